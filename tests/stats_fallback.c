/* SPDX-License-Identifier: MIT */
/*
 * The slow-path statistics of a process without rseq (RSEQKIT_DISABLE=1:
 * the test runs itself again with it set), where every operation is a
 * slow path and counts one in its thread's own holder slot, inline:
 *   - each thread's rsk_stats_thread() slow_paths rise by exactly its
 *     operations (counter adds, mempool counter adds, pool allocations
 *     and frees), also for threads whose slot an exited thread used
 *     before (more threads than one chunk of slots holds);
 *   - rsk_stats_process() rises by every thread's operations, exited
 *     threads included;
 *   - a fork child starts from its forking thread's counts, and counts on;
 * and a negative control: with RSEQKIT_INJECT_BROKEN_TALLY=1 (the
 * injection build's switch: a thread's count forgets its slot's base)
 * the test run again must fail, which shows that the waves reuse slots.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include <rseqkit/mempool.h>
#include "tap.h"

#define OPS	 300 /* of each kind, per thread */
#define PER_OPS	 (4 * OPS)
#define WAVE	 40 /* two waves: more than a chunk's 63 slots */

static struct rsk_counter *ctr;
static struct rsk_mempool *mp;
static intptr_t *word;
static struct rsk_pool *pool;

/* OPS of each operation; 0 if every one succeeded. */
static int work(void)
{
	int bad = 0;

	for (int i = 0; i < OPS; i++) {
		void *o;

		bad |= rsk_counter_add(ctr, 1) != 0;
		bad |= rsk_pcounter_add(mp, word, 1) < 0;
		o = rsk_pool_alloc(pool);
		bad |= o == NULL || rsk_pool_free(pool, o) != 0;
	}
	return bad;
}

struct result {
	uint64_t before, after;
	int bad;
};

static void *thread_main(void *arg)
{
	struct result *r = arg;
	struct rsk_stats st;

	rsk_stats_thread(&st);
	r->before = st.slow_paths;
	r->bad = work();
	rsk_stats_thread(&st);
	r->after = st.slow_paths;
	return NULL;
}

/* A wave of WAVE threads; the number whose count is not exact. */
static int wave(void)
{
	pthread_t t[WAVE];
	struct result r[WAVE];
	int wrong = 0;

	memset(r, 0, sizeof(r));
	for (int i = 0; i < WAVE; i++)
		if (pthread_create(&t[i], NULL, thread_main, &r[i]) != 0)
			return WAVE;
	for (int i = 0; i < WAVE; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < WAVE; i++)
		if (r[i].bad || r[i].before != 0 || r[i].after != PER_OPS) {
			if (wrong++ == 0)
				tap_diag("thread %d: slow paths %llu -> %llu, want 0 -> %d%s", i,
					 (unsigned long long)r[i].before,
					 (unsigned long long)r[i].after, PER_OPS,
					 r[i].bad ? ", an operation failed" : "");
		}
	return wrong;
}

int main(int argc, char **argv)
{
	struct rsk_mempool_config mc = {.size = sizeof(intptr_t)};
	struct rsk_pool_config pc = {.size = 64, .mode = RSK_INDEX_CPU};
	struct rsk_stats p0, p1, t0, t1;
	struct rsk_status st;
	intptr_t sum = 0;
	int w1, w2, status = -1;
	pid_t pid;

	if (getenv("RSEQKIT_DISABLE") == NULL) {
		setenv("RSEQKIT_DISABLE", "1", 1);
		execv("/proc/self/exe", argv);
		tap_plan_skip_all("cannot run itself again with RSEQKIT_DISABLE=1");
	}
	/* The negative control's run: the checks above, their verdict the
	 * exit status. */
	int broken = getenv("RSEQKIT_INJECT_BROKEN_TALLY") != NULL;

	if (broken && freopen("/dev/null", "w", stdout) == NULL)
		return 2;
	(void)argc;
	tap_plan(7);
	rsk_init();
	rsk_status(&st);
	if (!tap_ok(!st.available, "RSEQKIT_DISABLE=1: no rseq in the process")) {
		printf("Bail out! the statistics below need a process without rseq\n");
		return 1;
	}
	if (rsk_counter_create(&ctr, RSK_INDEX_CPU) != 0 || rsk_mempool_create(&mp, &mc) != 0 ||
	    (word = rsk_mempool_alloc(mp)) == NULL || rsk_pool_create(&pool, &pc) != 0) {
		printf("Bail out! cannot create the structures\n");
		return 1;
	}
	rsk_stats_process(&p0);
	rsk_stats_thread(&t0);
	int bad = work();
	rsk_stats_thread(&t1);
	tap_ok(!bad && t1.slow_paths - t0.slow_paths == PER_OPS,
	       "main thread: one slow path per operation (%llu, want %d)",
	       (unsigned long long)(t1.slow_paths - t0.slow_paths), PER_OPS);
	w1 = wave();
	w2 = wave();
	tap_ok(w1 == 0 && w2 == 0,
	       "%d threads in two waves, slots reused: each counts its own operations exactly "
	       "(%d, %d wrong)", 2 * WAVE, w1, w2);
	rsk_stats_process(&p1);
	rsk_counter_sum(ctr, &sum);
	tap_ok(p1.slow_paths - p0.slow_paths == (uint64_t)(2 * WAVE + 1) * PER_OPS &&
		       sum == (intptr_t)(2 * WAVE + 1) * OPS,
	       "process total: every thread's, exited ones included (%llu, want %d; sum %ld)",
	       (unsigned long long)(p1.slow_paths - p0.slow_paths), (2 * WAVE + 1) * PER_OPS,
	       (long)sum);

	/* fork: the child's thread starts from the forking thread's counts. */
	rsk_stats_thread(&t0);
	pid = fork();
	if (pid == 0) {
		struct rsk_stats c0, c1;

		rsk_stats_thread(&c0);
		int cbad = work();
		rsk_stats_thread(&c1);
		_exit(c0.slow_paths == t0.slow_paths && !cbad &&
				      c1.slow_paths - c0.slow_paths == PER_OPS
			      ? 0
			      : 1);
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	tap_ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "fork child: the thread's counts go on from the parent's (status %d)", status);
	rsk_stats_thread(&t1);
	tap_ok(t1.slow_paths == t0.slow_paths, "fork parent: the child's counts are not its own");

	if (broken)
		return tap_failed != 0;
	if (!RSK_INJECTING) {
		printf("ok %d # SKIP negative control: not an injection build\n", ++tap_n);
	} else {
		status = -1;
		pid = fork();
		if (pid == 0) {
			setenv("RSEQKIT_INJECT_BROKEN_TALLY", "1", 1);
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, &status, 0);
		tap_ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1,
		       "negative control: a count that forgets its slot's base fails (status %d)",
		       status);
	}
	rsk_pool_destroy(pool);
	rsk_mempool_destroy(mp);
	rsk_counter_destroy(ctr);
	return tap_failed != 0;
}
