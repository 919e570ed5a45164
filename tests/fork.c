/* SPDX-License-Identifier: MIT */
/*
 * fork() from a multi-threaded process that keeps using every structure.
 * Four threads hammer a counter, a spinlock, a stack, a ptrbuf, a copybuf
 * and a pool through their slow paths and their *_cpu operations (gates
 * held all the time, the pool's depot lock and slab mapping too), while
 * the main thread forks FORKS times.  Each child, under a 5 s alarm, uses
 * every structure (current part and every other part, the pool's refill,
 * flush, drain, trim) and exits 0.  A child that hangs (a gate or lock
 * inherited from a thread that does not exist in it) dies of SIGALRM: a
 * failure.  Twice: with rseq (the *_cpu operations close gates), and
 * re-executed with RSEQKIT_DISABLE=1 (every operation on a slow path).
 *
 * Before the workers start, each run also checks that a signal handler on
 * the forking thread can use the structures while fork() waits (its
 * prepare handler waiting for another thread's gate): the handler's gate
 * closes and the pool's holds must not wait for the fork to finish, which
 * only that thread can finish (before: a deadlock, caught by an alarm).
 *
 * The spinlock's lock words are the user's locks (like a pthread mutex, a
 * lock held by another thread at the fork stays held in the child): the
 * child clears them first, as an atfork child handler of its user would.
 * Everything under rseqkit's own gates and locks must need nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

#define WORKERS 4
#define FORKS 1000
#define MAX_FAILURES 3 /* stop early: each hang costs the child's alarm */
#define NODES 16

static struct rsk_counter *counter;
static struct rsk_spinlock *lock;
static struct rsk_stack *stack;
static struct rsk_ptrbuf *ptrbuf;
static struct rsk_copybuf *copybuf;
static struct rsk_pool *pool;
static int nr;
static volatile int stop;
static int slow_only;
/* Workers sleep PACE_US (20) microseconds between rounds: fewer runnable
 * threads than CPUs x 2, so a fork rarely waits for a preempted holder
 * (the run stays short on a loaded machine), and gates are still held at
 * most forks (before the fix, a child hung within the first few). */
static int pace_us = 20;

struct item {
	intptr_t a, b, c;
};

static struct rsk_stack_node nodes[WORKERS + 1][NODES];

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* One round of everything; returns the number of unexpected results. */
static int use_all(unsigned *seed, struct rsk_stack_node **mine, int *nmine, void **held,
		   int *nheld)
{
	int bad = 0, cpu = (int)(rnd(seed) % (unsigned)nr), idx;
	intptr_t old;
	void *p;
	struct item it = { 1, 2, 3 }, out;
	struct rsk_stack_node *n, *list;

	bad += rsk_counter_add(counter, 1) < 0;
	bad += rsk_counter_exchange(counter, cpu, 0, &old) != 0;

	idx = rsk_spinlock_lock(lock);
	if (idx >= 0)
		rsk_spinlock_unlock(lock, idx);
	else
		bad++;

	if (*nmine > 0)
		bad += rsk_stack_push(stack, mine[--*nmine]) < 0;
	if (rsk_stack_pop(stack, &n) >= 0)
		mine[(*nmine)++] = n;
	if (*nmine > 0)
		bad += rsk_stack_push_cpu(stack, cpu, mine[--*nmine]) != 0;
	if (rsk_stack_pop_all_cpu(stack, cpu, &list) == 0)
		for (; list != NULL && *nmine < NODES; list = list->next)
			mine[(*nmine)++] = list;

	if (rsk_ptrbuf_push(ptrbuf, &it) < 0)
		rsk_ptrbuf_pop(ptrbuf, &p);
	if (rsk_ptrbuf_push_cpu(ptrbuf, cpu, &it) != 0)
		rsk_ptrbuf_pop_cpu(ptrbuf, cpu, &p);
	rsk_ptrbuf_pop(ptrbuf, &p);
	rsk_ptrbuf_pop_cpu(ptrbuf, cpu, &p);

	if (rsk_copybuf_push(copybuf, &it) < 0)
		rsk_copybuf_pop(copybuf, &out);
	if (rsk_copybuf_push_cpu(copybuf, cpu, &it) != 0)
		rsk_copybuf_pop_cpu(copybuf, cpu, &out);
	rsk_copybuf_pop(copybuf, &out);
	rsk_copybuf_pop_cpu(copybuf, cpu, &out);

	/* The pool: allocate a handful, free them (refills and flushes). */
	while (*nheld < 24 && (p = rsk_pool_alloc(pool)) != NULL)
		held[(*nheld)++] = p;
	if (*nheld < 24)
		bad++;
	while (*nheld > (int)(rnd(seed) % 8))
		bad += rsk_pool_free(pool, held[--*nheld]) != 0;
	if (rnd(seed) % 16 == 0)
		bad += rsk_pool_drain(pool, cpu) != 0;
	if (rnd(seed) % 64 == 0)
		bad += rsk_pool_trim(pool) < 0;
	return bad;
}

static void *worker(void *arg)
{
	int w = (int)(intptr_t)arg;
	unsigned seed = (unsigned)w * 7919u + 1;
	struct rsk_stack_node *mine[NODES];
	void *held[32];
	int nmine = 0, nheld = 0;
	long bad = 0;

	for (int i = 0; i < NODES; i++)
		mine[nmine++] = &nodes[w][i];
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		bad += use_all(&seed, mine, &nmine, held, &nheld);
		if (pace_us > 0) {
			struct timespec ts = { 0, pace_us * 1000L };
			nanosleep(&ts, NULL);
		}
	}
	while (nheld > 0)
		rsk_pool_free(pool, held[--nheld]);
	return (void *)bad;
}

/* The child: every structure, every part; exit status = what failed. */
static int child(void)
{
	unsigned seed = 42;
	struct rsk_stack_node *mine[NODES];
	void *held[32];
	int nmine = 0, nheld = 0, bad = 0;
	intptr_t old, sum;
	struct rsk_pool_stats st;

	alarm(5);
	/* The user's locks (see above). */
	for (int i = 0; i < nr; i++)
		__atomic_store_n(&lock->part[i].locked, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < NODES; i++)
		mine[nmine++] = &nodes[WORKERS][i];
	for (int round = 0; round < 4; round++)
		bad += use_all(&seed, mine, &nmine, held, &nheld);
	for (int cpu = 0; cpu < nr; cpu++) {
		void *p;
		struct item out;
		struct rsk_stack_node *list;
		int r;
		bad += rsk_counter_exchange(counter, cpu, 0, &old) != 0;
		r = rsk_stack_pop_all_cpu(stack, cpu, &list);
		bad += r != 0 && r != -ENOENT;
		r = rsk_ptrbuf_pop_cpu(ptrbuf, cpu, &p);
		bad += r != 0 && r != -ENOENT;
		r = rsk_copybuf_pop_cpu(copybuf, cpu, &out);
		bad += r != 0 && r != -ENOENT;
		bad += rsk_pool_drain(pool, cpu) != 0;
	}
	bad += rsk_counter_reset(counter) != 0 || rsk_counter_sum(counter, &sum) != 0 || sum != 0;
	while (nheld > 0)
		bad += rsk_pool_free(pool, held[--nheld]) != 0;
	bad += rsk_pool_drain(pool, -1) != 0 || rsk_pool_trim(pool) < 0 ||
	       rsk_pool_stats(pool, &st) != 0;
	_exit(bad > 100 ? 100 : bad);
}

/* ---- a signal handler on the forking thread while fork() waits ---- */

static intptr_t held_gate;
static int holding, in_fork;
static pthread_t forker;
static volatile sig_atomic_t handler_ran, handler_saw_fork;
static int handler_bad;

static void fork_prepare_hook(void)
{
	__atomic_store_n(&in_fork, 1, __ATOMIC_SEQ_CST);
}

static void fork_after_hook(void)
{
	__atomic_store_n(&in_fork, 0, __ATOMIC_SEQ_CST);
}

static void on_usr1(int sig)
{
	intptr_t old;
	void *p;

	(void)sig;
	handler_saw_fork = __atomic_load_n(&in_fork, __ATOMIC_SEQ_CST);
	handler_bad += rsk_counter_add(counter, 1) < 0;
	handler_bad += rsk_counter_exchange(counter, 0, 0, &old) != 0;
	p = rsk_pool_alloc(pool);
	handler_bad += p == NULL || rsk_pool_free(pool, p) != 0;
	handler_ran = 1;
}

/* Holds a gate across the fork, and signals the forking thread while
 * rseqkit's prepare handler waits for it. */
static void *gate_holder(void *arg)
{
	struct timespec ms = { 0, 1000000 };

	(void)arg;
	if (rsk_gate_close(&held_gate, RSK_INDEX_CPU, 0) != 0)
		return (void *)1;
	__atomic_store_n(&holding, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&in_fork, __ATOMIC_SEQ_CST))
		nanosleep(&ms, NULL);
	/* The forking thread is past the test's prepare hook (registered
	 * after rseqkit's, so run before it): in rseqkit's within 100 ms,
	 * which waits for this gate for up to 2 s. */
	usleep(100000);
	pthread_kill(forker, SIGUSR1);
	usleep(200000);
	rsk_gate_open(&held_gate);
	return NULL;
}

static void signal_during_fork(const char *mode)
{
	int status = 0;
	pid_t tester;

	fflush(stdout);
	tester = fork(); /* a process of its own: a hang is its alarm */
	if (tester == 0) {
		struct sigaction sa = { .sa_handler = on_usr1 };
		pthread_t t;
		void *r = NULL;
		pid_t pid;

		alarm(10);
		sigaction(SIGUSR1, &sa, NULL);
		pthread_atfork(fork_prepare_hook, fork_after_hook, fork_after_hook);
		forker = pthread_self();
		pthread_create(&t, NULL, gate_holder, NULL);
		while (!__atomic_load_n(&holding, __ATOMIC_SEQ_CST))
			usleep(1000);
		pid = fork();
		if (pid == 0)
			_exit(0);
		waitpid(pid, NULL, 0);
		pthread_join(t, &r);
		if (!handler_ran || !handler_saw_fork || handler_bad != 0 || r != NULL)
			printf("# handler ran %d, during fork() %d, %d unexpected results, holder %s\n",
			       (int)handler_ran, (int)handler_saw_fork, handler_bad,
			       r == NULL ? "ok" : "failed");
		fflush(stdout);
		_exit(handler_ran && handler_saw_fork && handler_bad == 0 && r == NULL ? 0 : 1);
	}
	waitpid(tester, &status, 0);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "%s: a handler on the forking thread uses the counter and the pool while fork() "
	       "waits for another thread's gate: no deadlock (%s %d)",
	       mode,
	       WIFSIGNALED(status) ? (WTERMSIG(status) == SIGALRM ? "hung: killed by the alarm"
								  : "killed by signal")
				   : "exit status",
	       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int run(const char *mode)
{
	pthread_t t[WORKERS];
	struct rsk_pool_config pc = { .size = 48, .cache_capacity = 16, .mode = RSK_INDEX_CPU };
	int ok = 0, hung = 0, failed = 0, forks = 0;
	long bad = 0;
	char first[128] = "";
	double t0 = now();

	nr = rsk_possible_cpus();
	if (rsk_counter_create(&counter, RSK_INDEX_CPU) || rsk_spinlock_create(&lock, RSK_INDEX_CPU) ||
	    rsk_stack_create(&stack, RSK_INDEX_CPU) ||
	    rsk_ptrbuf_create(&ptrbuf, RSK_INDEX_CPU, 8, 0) ||
	    rsk_copybuf_create(&copybuf, RSK_INDEX_CPU, sizeof(struct item), 8, 0) ||
	    rsk_pool_create(&pool, &pc)) {
		tap_ok(0, "%s: structures created", mode);
		return 1;
	}
	signal_during_fork(mode);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
	for (forks = 0; forks < FORKS && hung + failed < MAX_FAILURES; forks++) {
		int status;
		pid_t pid = fork();
		if (pid < 0) {
			failed++;
			snprintf(first, sizeof(first), "fork: %s", strerror(errno));
			continue;
		}
		if (pid == 0)
			child();
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			ok++;
		} else {
			if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
				hung++;
			else
				failed++;
			if (first[0] == '\0')
				snprintf(first, sizeof(first), "child %d %s %d", forks,
					 WIFSIGNALED(status) ? "killed by signal" : "exit status",
					 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < WORKERS; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (long)r;
	}
	tap_ok(ok == FORKS,
	       "%s: %d of %d children of a %d-thread process used every structure and exited 0 "
	       "(%d hung, %d failed%s%s), %.1f s",
	       mode, ok, forks, WORKERS + 1, hung, failed, first[0] ? ": first " : "", first,
	       now() - t0);
	tap_ok(bad == 0, "%s: the parent's threads saw no unexpected result (%ld)", mode, bad);
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("PACE_US"))
		pace_us = atoi(getenv("PACE_US"));
	if (argc > 1 && strcmp(argv[1], "--slow") == 0) {
		slow_only = 1;
		tap_n = 3; /* points 4 to 6 of the parent's plan */
		run("RSEQKIT_DISABLE=1");
		return tap_done();
	}
	tap_plan(6);
	run("rseq");
	fflush(stdout);
	/* Again with every operation on a slow path, in a fresh process. */
	pid_t pid = fork();
	if (pid == 0) {
		setenv("RSEQKIT_DISABLE", "1", 1);
		execl("/proc/self/exe", argv[0], "--slow", (char *)NULL);
		_exit(127);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	tap_n += 3;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		tap_failed++;
	return tap_done();
}
