/* SPDX-License-Identifier: MIT */
/*
 * The pool's per-thread caches, where no thread runs sections (the test
 * runs itself again with RSEQKIT_DISABLE=1): every object accounted for
 *   - with many threads allocating and freeing, each object's tag checked
 *     while it is held (an object handed out twice is overwritten),
 *   - when threads exit with objects in their caches,
 *   - in a fork child, for the other threads' caches,
 *   - across rsk_pool_destroy() while live threads cache its objects (a
 *     new pool, perhaps at the same address, must not get them),
 *   - with rsk_pool_drain(p, -1) of the calling thread's own cache;
 * and a negative control: with RSEQKIT_INJECT_BROKEN_TCACHE=1 (the
 * injection build's switch: a pop that leaves its object in the cache) a
 * debug pool stops at the second hand-out of one object.
 * A watchdog (alarm) ends a hung run.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

#define OBJ_SIZE 64
#define NTHREADS 24
#define ROUNDS	 3000
#define HELD	 40

static struct rsk_pool *make(unsigned flags)
{
	struct rsk_pool_config cfg = { .size = OBJ_SIZE, .cache_capacity = 8, .flags = flags,
				       .mode = RSK_INDEX_CPU };
	struct rsk_pool *p = NULL;

	if (rsk_pool_create(&p, &cfg) != 0)
		return NULL;
	return p;
}

static size_t total(const struct rsk_pool_stats *st)
{
	return st->slabs * st->slab_objects;
}

/* ---- many threads: tags and totals ---- */

struct churn {
	struct rsk_pool *p;
	int id;
	long bad, failed;
};

/* The word a churn thread writes in its objects in round r: its id in
 * the upper half, r in the lower (half a word each on 32-bit targets). */
static uintptr_t churn_word(int id, int r)
{
	return (uintptr_t)id << (sizeof(uintptr_t) * 4) | (uintptr_t)r;
}

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	uintptr_t *held[HELD];
	unsigned seed = (unsigned)c->id * 7919u + 1;

	for (int r = 0; r < ROUNDS; r++) {
		int n = 1 + (int)(rand_r(&seed) % HELD);
		for (int i = 0; i < n; i++) {
			held[i] = rsk_pool_alloc(c->p);
			if (held[i] == NULL) {
				c->failed++;
				n = i;
				break;
			}
			for (int w = 0; w < OBJ_SIZE / (int)sizeof(uintptr_t); w++)
				held[i][w] = churn_word(c->id, r);
		}
		if (r % 7 == 0)
			sched_yield();
		for (int i = 0; i < n; i++) {
			for (int w = 0; w < OBJ_SIZE / (int)sizeof(uintptr_t); w++)
				c->bad += held[i][w] != churn_word(c->id, r);
			rsk_pool_free(c->p, held[i]);
		}
	}
	/* Exits with objects in its cache. */
	return NULL;
}

static void many_threads(void)
{
	struct rsk_pool *p = make(0);
	struct churn c[NTHREADS];
	pthread_t t[NTHREADS];
	struct rsk_pool_stats st;
	long bad = 0, failed = 0;

	if (!tap_ok(p != NULL, "pool created"))
		return;
	for (int i = 0; i < NTHREADS; i++) {
		c[i] = (struct churn){ .p = p, .id = i + 1 };
		pthread_create(&t[i], NULL, churn_thread, &c[i]);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		bad += c[i].bad;
		failed += c[i].failed;
	}
	tap_ok(bad == 0 && failed == 0,
	       "%d threads x %d rounds: no object handed out twice (%ld tags overwritten), %ld "
	       "failed allocations",
	       NTHREADS, ROUNDS, bad, failed);
	rsk_pool_stats(p, &st);
	tap_ok(st.in_use == 0 && st.cached == 0 && st.depot == total(&st),
	       "the threads exited: their caches went back (in use %zu, cached %zu, depot %zu of "
	       "%zu)",
	       st.in_use, st.cached, st.depot, total(&st));
	rsk_pool_destroy(p);
}

/* ---- threads parked with objects in their caches ---- */

struct parked {
	struct rsk_pool *p;
	pthread_barrier_t *ready, *go;
	void *kept; /* one object it holds */
	int steps;  /* 1: after go, alloc and free 3 more, then wait on ready again */
	long got;   /* objects allocated after go */
};

static void *parked_thread(void *arg)
{
	struct parked *k = arg;
	void *o[5];

	/* 5 allocated, 4 freed: 1 held, 4 (at least) in the thread's cache. */
	for (int i = 0; i < 5; i++)
		o[i] = rsk_pool_alloc(k->p);
	for (int i = 1; i < 5; i++)
		rsk_pool_free(k->p, o[i]);
	k->kept = o[0];
	pthread_barrier_wait(k->ready);
	pthread_barrier_wait(k->go);
	if (k->steps) {
		/* From whatever pool is k->p now. */
		for (int i = 0; i < 3; i++)
			if ((o[i] = rsk_pool_alloc(k->p)) != NULL)
				k->got++;
		pthread_barrier_wait(k->ready);
		pthread_barrier_wait(k->go);
		for (int i = 0; i < (int)k->got; i++)
			rsk_pool_free(k->p, o[i]);
	}
	return NULL;
}

#define NPARKED 4

static void fork_child_caches(void)
{
	struct rsk_pool *p = make(0);
	pthread_barrier_t ready, go;
	struct parked k[NPARKED];
	pthread_t t[NPARKED];
	struct rsk_pool_stats st;
	int status = 0, fds[2];
	char line[200] = "";
	pid_t pid;

	if (p == NULL || pipe(fds) != 0) {
		tap_ok(0, "fork: setup");
		return;
	}
	pthread_barrier_init(&ready, NULL, NPARKED + 1);
	pthread_barrier_init(&go, NULL, NPARKED + 1);
	for (int i = 0; i < NPARKED; i++) {
		k[i] = (struct parked){ .p = p, .ready = &ready, .go = &go };
		pthread_create(&t[i], NULL, parked_thread, &k[i]);
	}
	pthread_barrier_wait(&ready);
	rsk_pool_stats(p, &st);
	tap_ok(st.in_use == NPARKED && st.cached >= 4 * NPARKED,
	       "fork: %d threads hold 1 object each (in use %zu) and cache %zu", NPARKED,
	       st.in_use, st.cached);
	pid = fork();
	if (pid == 0) {
		struct rsk_pool_stats cs;
		void *mine;

		close(fds[0]);
		rsk_pool_stats(p, &cs);
		/* The other threads' caches are back: only their held objects
		 * are in use, nothing is cached, and an allocation works. */
		mine = rsk_pool_alloc(p);
		snprintf(line, sizeof(line), "%zu %zu %zu %zu %d", cs.in_use, cs.cached, cs.depot,
			 total(&cs), mine != NULL && rsk_pool_free(p, mine) == 0);
		if (write(fds[1], line, strlen(line)) < 0)
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	ssize_t n = pid > 0 ? read(fds[0], line, sizeof(line) - 1) : -1;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	line[n > 0 ? n : 0] = 0;
	size_t in_use = 0, cached = 9, depot = 0, all = 1;
	int works = 0;
	int got = sscanf(line, "%zu %zu %zu %zu %d", &in_use, &cached, &depot, &all, &works);
	tap_ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == 5 &&
		       in_use == NPARKED && cached == 0 && depot + in_use == all && works,
	       "fork child: the other threads' caches went back (in use %zu, cached %zu, depot "
	       "%zu of %zu), alloc works",
	       in_use, cached, depot, all);
	pthread_barrier_wait(&go);
	for (int i = 0; i < NPARKED; i++) {
		pthread_join(t[i], NULL);
		rsk_pool_free(p, k[i].kept);
	}
	/* The kept objects went to this thread's own cache. */
	rsk_pool_stats(p, &st);
	size_t own = st.cached;
	rsk_pool_drain(p, -1);
	rsk_pool_stats(p, &st);
	tap_ok(own == NPARKED && st.in_use == 0 && st.cached == 0 && st.depot == total(&st),
	       "parent: all back after the threads exit (this thread's cache %zu, then in use %zu, "
	       "cached %zu)",
	       own, st.in_use, st.cached);
	rsk_pool_destroy(p);
	pthread_barrier_destroy(&ready);
	pthread_barrier_destroy(&go);
}

/* ---- destroy while live threads cache the pool's objects ---- */

static void destroy_with_caches(void)
{
	struct rsk_pool *p = make(0), *q;
	pthread_barrier_t ready, go;
	struct parked k[NPARKED];
	pthread_t t[NPARKED];
	struct rsk_pool_stats st;
	int ok = 1;

	if (p == NULL) {
		tap_ok(0, "destroy: setup");
		return;
	}
	pthread_barrier_init(&ready, NULL, NPARKED + 1);
	pthread_barrier_init(&go, NULL, NPARKED + 1);
	for (int i = 0; i < NPARKED; i++) {
		k[i] = (struct parked){ .p = p, .ready = &ready, .go = &go, .steps = 1 };
		pthread_create(&t[i], NULL, parked_thread, &k[i]);
	}
	pthread_barrier_wait(&ready);
	ok &= rsk_pool_destroy(p) == 0;
	/* Same size: malloc may well give the same address. */
	q = make(0);
	tap_diag("destroyed pool %p, new pool %p", (void *)p, (void *)q);
	for (int i = 0; i < NPARKED; i++)
		k[i].p = q;
	pthread_barrier_wait(&go);
	pthread_barrier_wait(&ready);
	rsk_pool_stats(q, &st);
	tap_ok(ok && q != NULL && st.in_use == 3 * NPARKED,
	       "destroy forgets the threads' cached objects: the new pool's objects are its own "
	       "(in use %zu, want %d)",
	       st.in_use, 3 * NPARKED);
	pthread_barrier_wait(&go);
	for (int i = 0; i < NPARKED; i++)
		pthread_join(t[i], NULL);
	rsk_pool_stats(q, &st);
	tap_ok(st.in_use == 0 && st.cached == 0, "the new pool: all back (in use %zu, cached %zu)",
	       st.in_use, st.cached);
	rsk_pool_destroy(q);
	pthread_barrier_destroy(&ready);
	pthread_barrier_destroy(&go);
}

/* ---- the calling thread's own cache ---- */

static void drain_own(void)
{
	struct rsk_pool *p = make(0);
	struct rsk_pool_stats st;
	void *o[6];

	if (p == NULL) {
		tap_ok(0, "drain: setup");
		return;
	}
	for (int i = 0; i < 6; i++)
		o[i] = rsk_pool_alloc(p);
	for (int i = 0; i < 6; i++)
		rsk_pool_free(p, o[i]);
	rsk_pool_stats(p, &st);
	size_t before = st.cached;
	int r = rsk_pool_drain(p, -1);
	rsk_pool_stats(p, &st);
	tap_ok(r == 0 && before > 0 && st.cached == 0 && st.depot == total(&st),
	       "drain(-1) empties the thread's own cache (%zu cached before, %zu after)", before,
	       st.cached);
	rsk_pool_destroy(p);
}

/* ---- negative control ---- */

static void broken_cache(const char *argv0)
{
	int status = 0, fds[2];
	char out[512] = "";
	pid_t pid;

	if (pipe(fds) != 0 || (pid = fork()) < 0) {
		tap_ok(0, "negative control: cannot fork");
		return;
	}
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		setenv("RSEQKIT_INJECT_BROKEN_TCACHE", "1", 1);
		execl("/proc/self/exe", argv0, "--broken", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], out, sizeof(out) - 1);
	close(fds[0]);
	waitpid(pid, &status, 0);
	out[n > 0 ? n : 0] = 0;
	out[strcspn(out, "\n")] = 0;
	tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
		       strstr(out, "handed out an allocated object") != NULL,
	       "negative control: a cache that hands an object out twice is caught by the debug "
	       "pool (\"%s\")",
	       out);
}

/* The broken run: a debug pool, two allocations from a cache refilled
 * by the first. */
static int broken_run(void)
{
	struct rsk_pool *p = make(RSK_POOL_DEBUG);
	void *a, *b;

	if (p == NULL)
		return 3;
	a = rsk_pool_alloc(p);
	b = rsk_pool_alloc(p);
	fprintf(stderr, "not caught: %p %p\n", a, b);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--broken") == 0)
		return broken_run();
	if (getenv("RSEQKIT_DISABLE") == NULL) {
		/* The library decides at start-up: start again without rseq. */
		setenv("RSEQKIT_DISABLE", "1", 1);
		execv("/proc/self/exe", argv);
		printf("1..0 # SKIP cannot re-execute itself\n");
		return 0;
	}
	alarm(120);
	tap_plan(10);
	many_threads();
	fork_child_caches();
	destroy_with_caches();
	drain_own();
	broken_cache(argv[0]);
	return tap_done();
}
