/* SPDX-License-Identifier: MIT */
/*
 * Signal handlers of two threads, each on top of its own thread's hold.
 *
 * A handler whose thread holds a gate or the pool's depot lock waits for
 * no other hold: it takes what is free at once and moves on, and is
 * -EDEADLK only when nothing can be had without waiting.  Otherwise two
 * such handlers wait for each other forever.
 *
 * Cross forms (each in a child process of its own, with a 20 s alarm that
 * reports a hang as a failure): thread T1 holds the gates of parts
 * 1..nr-1 and runs on CPU 0, T2 holds part 0's gate and runs on CPU 1;
 * each raises SIGUSR1 on itself while holding, and its handler works on
 * the structure:
 *   stack      rsk_stack_push: every part is held, one by each thread:
 *              -EDEADLK at once; rsk_stack_push_cpu on the other's part:
 *              -EDEADLK
 *   pool       rsk_pool_alloc and rsk_pool_free: the depot is free, the
 *              allocation succeeds
 *   depot      T1 holds the depot lock instead of gates 1..nr-1, T2 part
 *              0's gate; both handlers allocate and free: they succeed
 *              (other caches, the overflow, a slab of their own)
 * each run without rseq (RSEQKIT_DISABLE=1) and with it.
 *
 * Load form: 4 workers allocate, free and add to a pool counter and an
 * rsk_counter while signalled often (pthread_kill, 2500 rounds), their
 * handlers doing the same; the main thread drains the pool meanwhile.
 * No handler call may fail, and every total must be exact: with rseq,
 * without it (RSEQKIT_DISABLE=1) and with RSEQKIT_ABORT_LIMIT=1.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

/* The progress layer's depot lock, as the pool's code takes it
 * (src/internal.h; injection builds). */
int rsk_lock_take_(intptr_t *lock, const char *what, const void *obj);
void rsk_lock_drop_(intptr_t *lock);
intptr_t *rsk_pool_depot_lock_(struct rsk_pool *p);

/* ---- a child's report: "ok - ..." lines on stdout, read by the parent ---- */

static void say(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", cond ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static char hung_msg[160];

static void watchdog(int signo)
{
	ssize_t w = write(STDOUT_FILENO, hung_msg, strlen(hung_msg));

	(void)signo;
	(void)w;
	_exit(3);
}

static void arm_watchdog(const char *what, unsigned seconds)
{
	struct sigaction sa = { .sa_handler = watchdog };

	snprintf(hung_msg, sizeof(hung_msg), "not ok - %s: hung (a deadlock: the %u s alarm)\n",
		 what, seconds);
	sigaction(SIGALRM, &sa, NULL);
	alarm(seconds);
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* ---- cross forms ---- */

enum form { F_STACK, F_POOL, F_DEPOT };
static enum form form;
static struct rsk_stack *stack;
static struct rsk_pool *pool;
static struct rsk_stack_node nodes[2];
static int nr;
static pthread_barrier_t bar;

struct result {
	int push, push_cpu; /* stack */
	void *obj;	    /* pool: what the handler allocated */
	int alloc_errno, free_ret;
};
static struct result res[2];
static __thread int me = -1;

static intptr_t *part_gate(int i)
{
	return form == F_STACK ? &stack->part[i].gate : &pool->part[i]->gate;
}

static void cross_handler(int signo)
{
	struct result *r = &res[me];
	int saved = errno;

	(void)signo;
	if (form == F_STACK) {
		r->push = rsk_stack_push(stack, &nodes[me]);
		/* The other thread's part: T1's is part 0, T2's part 1. */
		r->push_cpu = rsk_stack_push_cpu(stack, me == 0 ? 0 : 1, &nodes[me]);
	} else {
		errno = 0;
		r->obj = rsk_pool_alloc(pool);
		r->alloc_errno = errno;
		r->free_ret = r->obj != NULL ? rsk_pool_free(pool, r->obj) : -1000;
	}
	errno = saved;
}

/* Without rseq (RSEQKIT_DISABLE=1) each thread keeps its own cache of
 * the first 4 pools it uses (rsk_pool_create(3), "Thread caches without
 * rseq"): a thread that used these 4 decoys first meets `pool`'s part
 * caches, which the cross form is about. */
#define DECOYS 4
static struct rsk_pool *decoy[DECOYS];

static void use_decoys(void)
{
	for (int k = 0; k < DECOYS; k++) {
		void *o = decoy[k] != NULL ? rsk_pool_alloc(decoy[k]) : NULL;
		if (o != NULL)
			rsk_pool_free(decoy[k], o);
	}
}

static void *cross_thread(void *arg)
{
	int i = (int)(intptr_t)arg, err = 0;

	me = i;
	/* T1 (0) on CPU 0, T2 (1) on CPU 1: each one's part is held by the other. */
	pin(i);
	if (form != F_STACK)
		use_decoys();
	if (i == 0 && form == F_DEPOT) {
		err = rsk_lock_take_(rsk_pool_depot_lock_(pool), "handlers.t", pool);
	} else if (i == 0) {
		for (int k = 1; k < nr && err == 0; k++)
			err = rsk_gate_close(part_gate(k), RSK_INDEX_CPU, k);
	} else {
		err = rsk_gate_close(part_gate(0), RSK_INDEX_CPU, 0);
	}
	if (err != 0) {
		printf("not ok - thread %d could not take its holds (%d)\n", i, err);
		fflush(stdout);
		_exit(1);
	}
	pthread_barrier_wait(&bar); /* both hold */
	pthread_kill(pthread_self(), SIGUSR1);
	pthread_barrier_wait(&bar); /* both handlers returned */
	if (i == 0 && form == F_DEPOT) {
		rsk_lock_drop_(rsk_pool_depot_lock_(pool));
	} else if (i == 0) {
		for (int k = 1; k < nr; k++)
			rsk_gate_open(part_gate(k));
	} else {
		rsk_gate_open(part_gate(0));
	}
	return NULL;
}

/* Make every part's cache (a thread on each CPU allocates and frees). */
static void *touch_part(void *arg)
{
	void *o;

	if (pin((int)(intptr_t)arg) != 0)
		return NULL;
	use_decoys();
	o = rsk_pool_alloc(pool);
	if (o != NULL)
		rsk_pool_free(pool, o);
	return NULL;
}

static int cross(const char *name)
{
	static const char *const forms[] = { "stack", "pool", "depot" };
	struct sigaction sa = { .sa_handler = cross_handler };
	struct rsk_pool_config cfg = { .size = 48, .cache_capacity = 8, .mode = RSK_INDEX_CPU };
	pthread_t t[2];
	char what[96];
	int f;

	for (f = 0; f < 3 && strcmp(forms[f], name) != 0; f++)
		;
	if (f == 3)
		return 2;
	form = (enum form)f;
	nr = rsk_possible_cpus();
	if (nr < 2 || pin(1) != 0 || pin(0) != 0) {
		printf("skip - %s: needs CPUs 0 and 1\n", name);
		return 0;
	}
	if (form == F_STACK) {
		if (rsk_stack_create(&stack, RSK_INDEX_CPU) != 0)
			return 1;
	} else {
		if (rsk_pool_create(&pool, &cfg) != 0)
			return 1;
		for (int k = 0; k < DECOYS; k++)
			if (rsk_pool_create(&decoy[k], &cfg) != 0)
				return 1;
		use_decoys(); /* this thread's: the main part of the check below */
		for (int c = 0; c < nr; c++) {
			pthread_t tt;
			pthread_create(&tt, NULL, touch_part, (void *)(intptr_t)c);
			pthread_join(tt, NULL);
		}
		for (int c = 0; c < nr; c++)
			if (pool->part[c] == NULL) {
				printf("skip - %s: no cache for part %d (CPU offline?)\n", name, c);
				return 0;
			}
	}
	sigaction(SIGUSR1, &sa, NULL);
	pthread_barrier_init(&bar, NULL, 2);
	snprintf(what, sizeof(what), "%s: two handlers, each on top of its thread's hold", name);
	arm_watchdog(what, 20);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, cross_thread, (void *)(intptr_t)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	alarm(0);
	say(1, "%s: both returned", what);
	if (form == F_STACK) {
		for (int i = 0; i < 2; i++) {
			say(res[i].push == -EDEADLK,
			    "%s: T%d's push, every part held by a thread: -EDEADLK (%d)", name, i + 1,
			    res[i].push);
			say(res[i].push_cpu == -EDEADLK,
			    "%s: T%d's push_cpu on the other's part: -EDEADLK (%d)", name, i + 1,
			    res[i].push_cpu);
		}
		return 0;
	}
	for (int i = 0; i < 2; i++)
		say(res[i].obj != NULL && res[i].free_ret == 0,
		    "%s: T%d's allocation succeeded (errno %d) and its free (%d)", name, i + 1,
		    res[i].alloc_errno, res[i].free_ret);
	{
		struct rsk_pool_stats st;
		void *o;

		/* The depot links any slab a handler mapped. */
		o = rsk_pool_alloc(pool);
		rsk_pool_free(pool, o);
		say(rsk_pool_drain(pool, -1) == 0 && rsk_pool_stats(pool, &st) == 0 &&
			    st.in_use == 0 && st.cached == 0 &&
			    st.depot == st.slabs * st.slab_objects,
		    "%s: then drained, every object back in the depot (%zu slabs)", name, st.slabs);
	}
	return 0;
}

/* ---- load form ---- */

#define WORKERS 4
#define SIGNAL_ROUNDS 2500 /* rounds of one signal to each worker */

static struct rsk_mempool *mp;
static intptr_t *pctr;
static struct rsk_counter *ctr;
static long h_calls, h_fail_pc, h_fail_pc_other, h_fail_alloc, h_fail_free, h_pc_ok, h_ctr_ok;

static void load_handler(int signo)
{
	int saved = errno;
	void *o;

	(void)signo;
	__atomic_add_fetch(&h_calls, 1, __ATOMIC_RELAXED);
	int pc = rsk_pcounter_add(mp, pctr, 1);

	if (pc < 0)
		__atomic_add_fetch(pc == -EDEADLK ? &h_fail_pc : &h_fail_pc_other, 1,
				   __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&h_pc_ok, 1, __ATOMIC_RELAXED);
	if (rsk_counter_add(ctr, 1) >= 0)
		__atomic_add_fetch(&h_ctr_ok, 1, __ATOMIC_RELAXED);
	o = rsk_pool_alloc(pool);
	if (o == NULL)
		__atomic_add_fetch(&h_fail_alloc, 1, __ATOMIC_RELAXED);
	else if (rsk_pool_free(pool, o) != 0)
		__atomic_add_fetch(&h_fail_free, 1, __ATOMIC_RELAXED);
	errno = saved;
}

static long w_fail;
static int w_stop;
static long w_rounds[WORKERS];

static void *load_worker(void *arg)
{
	void *held[8] = { 0 };
	int i = (int)(intptr_t)arg;

	long r;

	for (r = 0; !__atomic_load_n(&w_stop, __ATOMIC_ACQUIRE); r++) {
		for (int k = 0; k < 8; k++)
			if ((held[k] = rsk_pool_alloc(pool)) == NULL)
				__atomic_add_fetch(&w_fail, 1, __ATOMIC_RELAXED);
		if (rsk_pcounter_add(mp, pctr, 1) < 0 || rsk_counter_add(ctr, 1) < 0)
			__atomic_add_fetch(&w_fail, 1, __ATOMIC_RELAXED);
		for (int k = 0; k < 8; k++)
			if (held[k] != NULL && rsk_pool_free(pool, held[k]) != 0)
				__atomic_add_fetch(&w_fail, 1, __ATOMIC_RELAXED);
	}
	w_rounds[i] = r;
	return NULL;
}

static int load(void)
{
	struct sigaction sa = { .sa_handler = load_handler, .sa_flags = SA_RESTART };
	struct rsk_pool_config cfg = { .size = 64, .cache_capacity = 2, .mode = RSK_INDEX_CPU };
	struct rsk_mempool_config mcfg = { .size = sizeof(intptr_t), .mode = RSK_INDEX_CPU };
	struct rsk_pool_stats st;
	pthread_t t[WORKERS];
	intptr_t psum = -1, csum = -1;
	long adds = 0;
	const char *disable = getenv("RSEQKIT_DISABLE");
	int no_sections = disable != NULL && strcmp(disable, "1") == 0;

	if (rsk_pool_create(&pool, &cfg) != 0 || rsk_mempool_create(&mp, &mcfg) != 0 ||
	    rsk_counter_create(&ctr, RSK_INDEX_CPU) != 0 || (pctr = rsk_mempool_zalloc(mp)) == NULL) {
		say(0, "load: cannot create the structures");
		return 1;
	}
	sigaction(SIGUSR1, &sa, NULL);
	arm_watchdog("load: 4 signalled workers", 100);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, load_worker, (void *)(intptr_t)i);
	/* Signal the workers often; drain the pool meanwhile. */
	for (int r = 0; r < SIGNAL_ROUNDS; r++) {
		for (int i = 0; i < WORKERS; i++)
			pthread_kill(t[i], SIGUSR1);
		if (r % 8 == 0)
			rsk_pool_drain(pool, -1);
		usleep(20);
	}
	__atomic_store_n(&w_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(t[i], NULL);
		adds += w_rounds[i];
	}
	alarm(0);
	rsk_pcounter_sum(mp, pctr, &psum);
	rsk_counter_sum(ctr, &csum);
	printf("# load: %ld handler calls; failures: pcounter_add %ld, pool_alloc %ld, "
	       "pool_free %ld; workers %ld\n",
	       h_calls, h_fail_pc, h_fail_alloc, h_fail_free, w_fail);
	say(h_calls > 0, "load: the handlers ran (%ld)", h_calls);
	/* rsk_pcounter_add(3): in a handler on top of a hold it fails, with
	 * -EDEADLK, only where threads run sections and every copy's gate is
	 * held at that moment (drains and other workers' slow paths hold
	 * them); where no thread runs sections it is an atomic add. */
	say(h_fail_pc_other == 0 && (h_fail_pc == 0 || !no_sections),
	    "load: rsk_pcounter_add in a handler failed only as documented (%ld -EDEADLK%s, "
	    "%ld other)", h_fail_pc, no_sections ? " without sections" : "", h_fail_pc_other);
	say(h_fail_alloc == 0 && h_fail_free == 0,
	    "load: no rsk_pool_alloc/free in a handler failed (%ld, %ld)", h_fail_alloc,
	    h_fail_free);
	say(w_fail == 0, "load: no worker call failed (%ld)", w_fail);
	say(psum == adds + h_pc_ok, "load: pool counter exact (%ld)",
	    (long)psum);
	say(csum == adds + h_ctr_ok, "load: rsk_counter exact (%ld)",
	    (long)csum);
	{
		int dr = rsk_pool_drain(pool, -1), sr = rsk_pool_stats(pool, &st);
		say(dr == 0 && sr == 0 && st.in_use == 0,
		    "load: every object back (drain %d, stats %d, in use %zu)", dr, sr, st.in_use);
	}
	return 0;
}

/* ---- the parent: each form and mode in a child ---- */

static void run_child(const char *self, const char *what, const char *envname, const char *envval,
		      const char *label)
{
	int fd[2], status, seen = 0;
	pid_t pid;
	FILE *in;
	char line[512];

	if (pipe(fd) != 0)
		exit(1);
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], STDOUT_FILENO);
		close(fd[0]);
		close(fd[1]);
		if (envname != NULL)
			setenv(envname, envval, 1);
		execl("/proc/self/exe", self, "--child", what, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	in = fdopen(fd[0], "r");
	while (fgets(line, sizeof(line), in) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "ok - ", 5) == 0) {
			tap_ok(1, "[%s] %s", label, line + 5);
			seen++;
		} else if (strncmp(line, "not ok - ", 9) == 0) {
			tap_ok(0, "[%s] %s", label, line + 9);
			seen++;
		} else if (strncmp(line, "skip - ", 7) == 0) {
			printf("ok %d - [%s] # SKIP %s\n", ++tap_n, label, line + 7);
			seen++;
		} else {
			printf("# [%s] %s\n", label, line);
		}
	}
	fclose(in);
	waitpid(pid, &status, 0);
	tap_ok(seen > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "[%s] %s: the child ended normally (status %#x)", label, what, status);
}

int main(int argc, char **argv)
{
	static const char *const forms[] = { "stack", "pool", "depot" };

	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return strcmp(argv[2], "load") == 0 ? load() : cross(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int f = 0; f < 3; f++) {
		run_child(argv[0], forms[f], NULL, NULL, "rseq");
		run_child(argv[0], forms[f], "RSEQKIT_DISABLE", "1", "RSEQKIT_DISABLE=1");
	}
	run_child(argv[0], "load", NULL, NULL, "rseq");
	run_child(argv[0], "load", "RSEQKIT_DISABLE", "1", "RSEQKIT_DISABLE=1");
	run_child(argv[0], "load", "RSEQKIT_ABORT_LIMIT", "1", "RSEQKIT_ABORT_LIMIT=1");
	printf("1..%d\n", tap_n);
	return tap_failed != 0;
}
