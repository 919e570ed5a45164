/* SPDX-License-Identifier: MIT */
/*
 * The list of recorded threads after fork() (src/runtime/runtime.c: the
 * list rsk_prepare_unload(3) walks, and its lock).  The child has one
 * thread, the one that forked: the gates' child handler
 * (src/progress/gate.c) resets the list to that thread's entry and frees
 * the lock, which another thread may have held at the fork.  In every
 * registration mode (harness.h), with one loaded object other than the
 * program as the object to "unload" (its address is the descriptor
 * pointer written below, so rsk_prepare_unload_object() clears it in every
 * thread it walks):
 *
 *   control (parent): a recorded thread whose rseq area the kernel no
 *   longer reads (it unregistered itself with a raw rseq(2), so the test
 *   may write its pointer) gets the pointer; rsk_prepare_unload_object()
 *   clears it.  The checks below can see a walk.
 *
 *   stale (child): that thread does not exist in the child, but its area
 *   does (the child's memory is the parent's).  The child starts a thread
 *   (on a stack of its own, so that it cannot reuse the dead thread's),
 *   unregisters itself the same way, gives both its own area and the dead
 *   thread's the pointer, and the new thread calls
 *   rsk_prepare_unload_object(): the forking thread's pointer is cleared
 *   (its entry is in the list) and the dead thread's stays (its entry is
 *   not).
 *
 *   held (child): a thread is stopped inside the lock (the injection
 *   build's activation step 6) while the main thread forks.  The child
 *   calls rsk_prepare_unload_object(), then starts a thread whose first
 *   call records it and whose exit removes it: each takes the lock.  That
 *   lock spins with every signal blocked, so the parent waits for the
 *   child HANG_S seconds at most and kills it: a hang is a failure.
 *
 * Shown to fail when broken: without the call of rsk_registry_fork_child_()
 * in fork_child() (src/progress/gate.c), or with its body empty, "stale"
 * finds the dead thread's pointer cleared and "held" is killed after
 * HANG_S seconds; with the lock reset alone, "stale" fails; with the list
 * reset alone, "held" hangs; with the list emptied but the caller's entry
 * not put back, "stale" finds the forking thread's pointer left.
 *
 * Where rseqkit records no thread (no rseq; a pthread key of 32 or more,
 * see rsk_prepare_unload(3)), every check is skipped.
 */
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
#include "harness.h"

#define HANG_S 10
#define REGISTRY_LOCKED_STEP 6 /* rsk_inject_activation(): inside the lock */

static __thread int hold_here; /* this thread stops inside the lock */
static __thread int recorded;  /* step 6 ran in this thread */
static int holding, release_holder;

void rsk_inject_activation(int step)
{
	if (step != REGISTRY_LOCKED_STEP)
		return;
	recorded = 1;
	if (hold_here) {
		__atomic_store_n(&holding, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&release_holder, __ATOMIC_ACQUIRE))
			sched_yield();
	}
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Unregister the calling thread's area with a raw rseq(2), whoever
 * registered it: the kernel then never reads its descriptor pointer, which
 * the test may set to anything.  0 or an errno. */
static int raw_unregister(void)
{
	struct rsk_abi_area *area = rsk_area();
	struct rsk_status st;

	rsk_status(&st);
	if (area == NULL || st.registered_size == 0)
		return ENOSYS;
	if (syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, RSK_ABI_FLAG_UNREGISTER,
		    RSK_ARCH_SIGNATURE) != 0)
		return errno;
	return 0;
}

static void set_cs(struct rsk_abi_area *area, uintptr_t v)
{
	__atomic_store_n(&area->rseq_cs, (uint64_t)v, __ATOMIC_RELAXED);
}

static uint64_t get_cs(struct rsk_abi_area *area)
{
	return __atomic_load_n(&area->rseq_cs, __ATOMIC_RELAXED);
}

/* An address inside a loaded object other than the program (the C
 * library, the vDSO, ...): the first byte of its first loaded segment. */
static int other_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_memsz > 0) {
			*(uintptr_t *)data = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
			return 1;
		}
	return 0;
}

/* ---- the parent's threads ---- */

struct idle {
	struct rsk_abi_area *area;
	int init, recorded, unreg, ready;
};
static int stop_idle;

/* Recorded, then out of the kernel's sight, then idle until the end. */
static void *idle_thread(void *arg)
{
	struct idle *t = arg;

	t->init = rsk_init();
	t->recorded = recorded;
	t->area = rsk_area();
	t->unreg = raw_unregister();
	__atomic_store_n(&t->ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&stop_idle, __ATOMIC_ACQUIRE))
		nap_ms(1);
	return NULL;
}

static int holder_done;

/* Its first call stops inside the lock until the main thread forked. */
static void *holder_thread(void *arg)
{
	(void)arg;
	hold_here = 1;
	rsk_init();
	__atomic_store_n(&holder_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* ---- the children ---- */

static uintptr_t object_addr;
static int unloader_ready, unloader_go;

/* The "stale" child's second thread: recorded while the forking thread can
 * still create a registered thread (glibc registers a new thread only when
 * its creator is registered), it unloads once that one unregistered. */
static void *unload_thread(void *arg)
{
	struct rsk_abi_area **area = arg;
	int ok = rsk_init() == 0 && recorded;

	*area = rsk_area();
	__atomic_store_n(&unloader_ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&unloader_go, __ATOMIC_ACQUIRE))
		sched_yield();
	if (!ok)
		return (void *)1;
	rsk_prepare_unload_object((const void *)object_addr);
	return NULL;
}

/* Exit status bits of the "stale" child. */
#define STALE_DEAD 1  /* the dead thread's pointer was cleared */
#define STALE_SELF 2  /* the forking thread's pointer was left */
#define STALE_SETUP 4 /* could not start, record or unregister a thread */

static __attribute__((noreturn)) void stale_child(struct rsk_abi_area *dead)
{
	struct rsk_abi_area *me = rsk_area(), *its = NULL;
	pthread_attr_t attr;
	pthread_t th;
	size_t len = 1 << 20;
	void *stack, *res = (void *)1;
	int st = 0;

	/* A stack of its own: a thread on the dead thread's (cached) stack
	 * would have the dead thread's area. */
	stack = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pthread_attr_init(&attr);
	if (stack == MAP_FAILED || pthread_attr_setstack(&attr, stack, len) != 0 ||
	    pthread_create(&th, &attr, unload_thread, &its) != 0)
		_exit(STALE_SETUP);
	while (!__atomic_load_n(&unloader_ready, __ATOMIC_ACQUIRE))
		sched_yield();
	if (its == dead || raw_unregister() != 0) {
		st |= STALE_SETUP;
	} else {
		set_cs(dead, object_addr);
		set_cs(me, object_addr);
	}
	__atomic_store_n(&unloader_go, 1, __ATOMIC_RELEASE);
	if (pthread_join(th, &res) != 0 || res != NULL)
		st |= STALE_SETUP;
	if (get_cs(dead) != object_addr)
		st |= STALE_DEAD;
	if (get_cs(me) != 0)
		st |= STALE_SELF;
	_exit(st);
}

static void *record_and_exit(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)(rsk_init() != 0 || !recorded);
}

static __attribute__((noreturn)) void held_child(void)
{
	pthread_t th;
	void *res = (void *)1;

	rsk_prepare_unload_object((const void *)object_addr);
	if (pthread_create(&th, NULL, record_and_exit, NULL) != 0 || pthread_join(th, &res) != 0)
		_exit(2);
	_exit(res == NULL ? 0 : 3);
}

/* Wait for the child HANG_S seconds at most, then kill it; its status. */
static int wait_child(pid_t pid, int *hung)
{
	struct timespec t0, t;
	int status = 0;

	*hung = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= HANG_S) {
			*hung = 1;
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			return status;
		}
		nap_ms(1);
	}
}

static pid_t fork_flushed(void)
{
	fflush(stdout);
	fflush(stderr);
	return fork();
}

static void body(const struct test_mode *m, int argc, char **argv)
{
	struct idle idle = { 0 };
	pthread_t idle_th, holder_th;
	struct rsk_status st;
	char how[128];
	int status, hung = 0;
	pid_t pid;

	(void)m;
	(void)argc;
	(void)argv;
	rsk_init();
	rsk_status(&st);
	if (rsk_area() == NULL || st.registered_size == 0) {
		tap_skip("rseq(2) unavailable", "the list of threads after fork()");
		return;
	}
	if (!dl_iterate_phdr(other_object, &object_addr)) {
		tap_skip("no loaded object besides the program",
			 "the list of threads after fork()");
		return;
	}
	if (pthread_create(&idle_th, NULL, idle_thread, &idle) != 0) {
		tap_ok(0, "start a thread: %s", strerror(errno));
		return;
	}
	while (!__atomic_load_n(&idle.ready, __ATOMIC_ACQUIRE))
		nap_ms(1);
	if (idle.init != 0 || !idle.recorded) {
		tap_skip("rseqkit records no thread here (rsk_prepare_unload(3))",
			 "the list of threads after fork()");
		goto out;
	}
	if (!tap_ok(idle.unreg == 0, "a recorded thread unregisters its area (raw rseq(2)): %s",
		    strerror(idle.unreg)))
		goto out;

	/* control */
	set_cs(idle.area, object_addr);
	rsk_prepare_unload_object((const void *)object_addr);
	tap_ok(get_cs(idle.area) == 0,
	       "parent: the recorded thread's pointer into the object is cleared");

	/* stale */
	pid = fork_flushed();
	if (pid == 0)
		stale_child(idle.area);
	status = pid < 0 ? -1 : wait_child(pid, &hung);
	if (hung)
		snprintf(how, sizeof(how), "hung: killed after %d s", HANG_S);
	else
		describe_status(status, how, sizeof(how));
	if (!tap_ok(pid > 0 && !hung && WIFEXITED(status) && !(WEXITSTATUS(status) & STALE_SETUP),
		    "stale: the child ran (%s)", how)) {
		tap_ok(0, "stale: (not run) the dead thread's entry is gone");
		tap_ok(0, "stale: (not run) the forking thread's entry stays");
	} else {
		tap_ok(!(WEXITSTATUS(status) & STALE_DEAD),
		       "stale: the dead thread's entry is gone (its pointer stays)");
		tap_ok(!(WEXITSTATUS(status) & STALE_SELF),
		       "stale: the forking thread's entry stays (its pointer is cleared)");
	}

	/* held */
	if (pthread_create(&holder_th, NULL, holder_thread, NULL) != 0) {
		tap_ok(0, "start a thread: %s", strerror(errno));
		goto out;
	}
	while (!__atomic_load_n(&holding, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&holder_done, __ATOMIC_ACQUIRE))
		sched_yield();
	pid = -1;
	if (tap_ok(__atomic_load_n(&holding, __ATOMIC_ACQUIRE),
		   "held: a thread holds the lock (activation step 6)")) {
		pid = fork_flushed();
		if (pid == 0)
			held_child();
	}
	__atomic_store_n(&release_holder, 1, __ATOMIC_RELEASE);
	pthread_join(holder_th, NULL);
	hung = 0;
	status = pid < 0 ? -1 : wait_child(pid, &hung);
	if (hung)
		snprintf(how, sizeof(how), "hung: killed after %d s", HANG_S);
	else
		describe_status(status, how, sizeof(how));
	tap_ok(pid > 0 && !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "held: the child unloads, records and removes a thread (%s)", how);
out:
	__atomic_store_n(&stop_idle, 1, __ATOMIC_RELEASE);
	pthread_join(idle_th, NULL);
}

int main(int argc, char **argv)
{
	return run_modes(argc, argv, body);
}
