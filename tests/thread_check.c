/* SPDX-License-Identifier: MIT */
/*
 * Threads rseqkit does not support, and RSEQKIT_CHECK_THREADS=1, which
 * catches them (rseqkit(7), Threads).
 *
 * A thread made with raw clone(2) and CLONE_SETTLS to a zeroed block has
 * no TLS of libc's making: the rseq area at the process-wide offset reads
 * cpu_id 0, which the inline fast path takes for a registered thread on
 * CPU 0, and its sections run without the kernel's protection - updates
 * of other threads are lost without a sign.  A thread made without
 * CLONE_SETTLS shares its creator's TLS and area, which the kernel has not
 * registered for it either.  Under RSEQKIT_CHECK_THREADS=1 each of them
 * must stop the process (SIGABRT) with a message naming the problem at
 * its first operation, and threads made by pthread_create() must go on
 * as always (exact sums, no message), with glibc's registration and
 * rseqkit's own.
 *
 * Each case is a child process (this program again, with --child), whose
 * stderr is captured.  The raw threads use no libc function (their TLS
 * is not libc's): raw system calls in asm, x86-64 only; elsewhere the raw
 * cases are skipped.
 */
#include <pthread.h>
#include <stdint.h>
#include <linux/futex.h>
#include <rseqkit/counter.h>
#include <rseqkit/mempool.h>
#include <rseqkit/pool.h>
#include "harness.h"

#define STACK_SIZE (256 * 1024)
#define TLS_SIZE   (256 * 1024)

static struct rsk_counter *counter;
static struct rsk_pool *pool;
static struct rsk_mempool *mpool;
static intptr_t *pctr;
static long adds;
static enum { OP_COUNTER, OP_POOL, OP_PCOUNTER } op;

struct raw_thread {
	unsigned char *stack, *tls;
	volatile int ctid; /* cleared by the kernel when the thread exits */
};

/* The operation of the workers: counter adds; or pool allocations and
 * frees (a pair per round); or pool-counter adds. */
static void add_loop(void)
{
	for (long i = 0; i < adds; i++) {
		if (op == OP_COUNTER) {
			rsk_counter_add(counter, 1);
		} else if (op == OP_PCOUNTER) {
			rsk_pcounter_add(mpool, pctr, 1);
		} else {
			void *obj = rsk_pool_alloc(pool);
			if (obj != NULL)
				rsk_pool_free(pool, obj);
		}
	}
}

static void *pthread_body(void *arg)
{
	(void)arg;
	add_loop();
	return NULL;
}

#if defined(__x86_64__)
#define RAW_CLONE 1
/* The child starts on `stack_top`, where fn and its argument were put: it
 * pops them, calls fn and exits (SYS_exit: the thread only) without ever
 * returning into this function's frame. */
static long raw_clone(unsigned long flags, void *stack_top, volatile int *ctid, void *tls,
		      void (*fn)(void))
{
	void **sp = (void **)stack_top;
	register long r10 __asm__("r10") = (long)ctid;
	register long r8 __asm__("r8") = (long)tls;
	long ret;

	*--sp = (void *)fn;
	*--sp = NULL; /* keeps the stack 16-byte aligned after the pop */
	__asm__ __volatile__("syscall\n\t"
			     "testq %%rax, %%rax\n\t"
			     "jnz 1f\n\t"
			     "xorl %%ebp, %%ebp\n\t"
			     "popq %%rax\n\t"
			     "popq %%rax\n\t"
			     "callq *%%rax\n\t"
			     "movl %[nr_exit], %%eax\n\t"
			     "xorl %%edi, %%edi\n\t"
			     "syscall\n\t"
			     "hlt\n"
			     "1:"
			     : "=a"(ret)
			     : "0"((long)SYS_clone), "D"(flags), "S"(sp), "d"(0L), "r"(r10), "r"(r8),
			       [nr_exit] "i"(SYS_exit)
			     : "rcx", "r11", "memory");
	return ret;
}
#else
#define RAW_CLONE 0
#endif

#if RAW_CLONE
static int raw_start(struct raw_thread *t, int zeroed_tls)
{
	unsigned long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			      CLONE_SYSVSEM | CLONE_CHILD_CLEARTID;
	void *tls = NULL;

	t->stack = calloc(1, STACK_SIZE);
	t->tls = calloc(1, TLS_SIZE);
	if (t->stack == NULL || t->tls == NULL)
		return -1;
	if (zeroed_tls) {
		/* The thread pointer in the middle: static TLS lies below it
		 * on x86-64, the thread control block (and glibc's rseq area)
		 * above; every byte it can reach reads 0. */
		flags |= CLONE_SETTLS;
		tls = t->tls + TLS_SIZE / 2;
	}
	t->ctid = 1;
	return raw_clone(flags, t->stack + STACK_SIZE, &t->ctid, tls, add_loop) < 0 ? -1 : 0;
}

static void raw_join(struct raw_thread *t)
{
	int v;

	while ((v = t->ctid) != 0)
		syscall(SYS_futex, &t->ctid, FUTEX_WAIT, v, NULL, NULL, 0);
}
#endif

/* --child pthread|raw|shared[:pool|:pcounter] N: two threads of that kind
 * add 1 N times each (or allocate and free N times); prints the sum (or
 * the round count); exit 0 when it is exact, 3 when not. */
static int child(const char *arg, long n)
{
	struct rsk_pool_config pcfg = { .size = 64, .cache_capacity = 16, .mode = RSK_INDEX_CPU };
	struct rsk_mempool_config mcfg = { .size = sizeof(intptr_t), .mode = RSK_INDEX_CPU };
	char kind[32];
	const char *colon = strchr(arg, ':');
	intptr_t sum = 0;

	snprintf(kind, sizeof(kind), "%.*s", colon ? (int)(colon - arg) : (int)strlen(arg), arg);
	op = colon == NULL ? OP_COUNTER : strcmp(colon + 1, "pool") == 0 ? OP_POOL : OP_PCOUNTER;
	adds = n;
	if (rsk_counter_create(&counter, RSK_INDEX_CPU) != 0 || rsk_pool_create(&pool, &pcfg) != 0 ||
	    rsk_mempool_create(&mpool, &mcfg) != 0 || (pctr = rsk_mempool_zalloc(mpool)) == NULL)
		return 2;
	if (strcmp(kind, "pthread") == 0) {
		pthread_t t[2];
		for (int i = 0; i < 2; i++)
			if (pthread_create(&t[i], NULL, pthread_body, NULL) != 0)
				return 2;
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
	} else {
#if RAW_CLONE
		struct raw_thread t[2];
		for (int i = 0; i < 2; i++)
			if (raw_start(&t[i], strcmp(kind, "raw") == 0) != 0)
				return 2;
		for (int i = 0; i < 2; i++)
			raw_join(&t[i]);
#else
		return 2;
#endif
	}
	if (op == OP_COUNTER)
		rsk_counter_sum(counter, &sum);
	else if (op == OP_PCOUNTER)
		rsk_pcounter_sum(mpool, pctr, &sum);
	else
		sum = 2 * n; /* the threads finished */
	printf("sum %ld of %ld\n", (long)sum, 2 * n);
	fflush(stdout);
	return sum == (intptr_t)(2 * n) ? 0 : 3;
}

static void child_env(const void *arg)
{
	const char *check = arg;

	if (check != NULL)
		setenv("RSEQKIT_CHECK_THREADS", check, 1);
	else
		unsetenv("RSEQKIT_CHECK_THREADS");
	dup2(STDOUT_FILENO, STDERR_FILENO); /* the message is captured too */
}

static char self_path[PATH_MAX];

static void run(const char *mode_name, const char *check, const char *kind, const char *n,
		char *out, size_t len, int *status)
{
	char *argv[] = { self_path, (char *)"--child", (char *)kind, (char *)n, NULL };
	struct child_spec cs = { argv, find_mode(mode_name), child_env, check };

	*status = -1;
	out[0] = '\0';
	if (run_capture(&cs, out, len, status) != 0)
		tap_diag("cannot run %s", self_path);
}

static void show(const char *label, const char *out, int status)
{
	char how[128];
	const char *p = out;

	describe_status(status, how, sizeof(how));
	tap_diag("%s: %s", label, how);
	while (*p != '\0') {
		const char *e = strchr(p, '\n');
		int l = e ? (int)(e - p) : (int)strlen(p);
		tap_diag("  | %.*s", l, p);
		p += l + (e != NULL);
	}
}

int main(int argc, char **argv)
{
	static char out[8192];
	static const char *const modes[] = { "libc", "library" };
	int status, err;

	if (argc == 4 && strcmp(argv[1], "--child") == 0)
		return child(argv[2], atol(argv[3]));
	if (readlink("/proc/self/exe", self_path, sizeof(self_path) - 1) < 0) {
		tap_plan_skip_all("no /proc/self/exe");
		return 0;
	}
	if (!kernel_has_rseq(&err)) {
		tap_plan_skip_all("no rseq(2) here: nothing misreads an area");
		return 0;
	}
	tap_plan(9);

	for (int m = 0; m < 2; m++) {
		char label[160];

		/* No false alarm: libc's threads go on, exactly. */
		snprintf(label, sizeof(label), "[%s] RSEQKIT_CHECK_THREADS=1, pthread_create() threads",
			 modes[m]);
		run(modes[m], "1", "pthread", "100000", out, sizeof(out), &status);
		show(label, out, status);
		tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
			       strstr(out, "sum 200000 of 200000") != NULL &&
			       strstr(out, "RSEQKIT_CHECK_THREADS") == NULL,
		       "%s: exact sum, no message", label);
		snprintf(label, sizeof(label), "[%s] RSEQKIT_CHECK_THREADS=0, pthread_create() threads",
			 modes[m]);
		run(modes[m], "0", "pthread", "1000000", out, sizeof(out), &status);
		show(label, out, status);
		tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
			       strstr(out, "sum 2000000 of 2000000") != NULL,
		       "%s: exact sum (the fast path)", label);
	}

#if RAW_CLONE
	/* Without the check: what the check is for (a diagnostic only: a
	 * loss is likely, not certain). */
	run("libc", NULL, "raw", "2000000", out, sizeof(out), &status);
	show("[libc] raw clone(2) threads, zeroed TLS, no check (not asserted)", out, status);

	for (int m = 0; m < 2; m++) {
		char label[160];

		snprintf(label, sizeof(label),
			 "[%s] RSEQKIT_CHECK_THREADS=1, raw clone(2) threads with a zeroed TLS block",
			 modes[m]);
		run(modes[m], "1", "raw", "100000", out, sizeof(out), &status);
		show(label, out, status);
		tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
			       strstr(out, "rseqkit: RSEQKIT_CHECK_THREADS: thread ") != NULL &&
			       strstr(out, "is not one rseqkit supports: its thread pointer") != NULL &&
			       strstr(out, "sum ") == NULL,
		       "%s: stopped by SIGABRT at its first operation, the message names the thread "
		       "pointer",
		       label);
	}
	{
		const char *label = "[libc] RSEQKIT_CHECK_THREADS=1, raw clone(2) threads sharing "
				    "their creator's TLS";
		run("libc", "1", "shared", "100000", out, sizeof(out), &status);
		show(label, out, status);
		tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
			       strstr(out, "is not one rseqkit supports: its rseq area") != NULL &&
			       strstr(out, "the kernel has not registered that area for this thread") !=
				       NULL &&
			       strstr(out, "sum ") == NULL,
		       "%s: stopped by SIGABRT, the message names the unregistered area", label);
	}
	/* The other out-of-line entries: the pool's plain path (its home
	 * cache) and the pool counter's (the thread's index). */
	for (int k = 0; k < 2; k++) {
		const char *what = k == 0 ? "raw:pool" : "raw:pcounter";
		char label[160];

		snprintf(label, sizeof(label),
			 "[libc] RSEQKIT_CHECK_THREADS=1, raw clone(2) threads, zeroed TLS, %s",
			 k == 0 ? "rsk_pool_alloc/free" : "rsk_pcounter_add");
		run("libc", "1", what, "100000", out, sizeof(out), &status);
		show(label, out, status);
		tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
			       strstr(out, "is not one rseqkit supports: its thread pointer") != NULL &&
			       strstr(out, "sum ") == NULL,
		       "%s: stopped by SIGABRT, with the message", label);
	}
#else
	for (int i = 0; i < 5; i++)
		tap_skip("the raw clone(2) threads are written for x86-64 only (i386's CLONE_SETTLS "
			 "takes a segment descriptor)",
			 "raw clone(2) threads under RSEQKIT_CHECK_THREADS=1 (case %d)", i + 1);
#endif
	return tap_done();
}
