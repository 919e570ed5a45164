/* SPDX-License-Identifier: MIT */
/*
 * mempool-bench - figures of the per-CPU memory pools (<rseqkit/mempool.h>)
 * beside what users would otherwise write, as ratios measured in one run:
 *
 *   1. alloc + free of a per-CPU object: rsk_mempool_zalloc + free against
 *      calloc(possible CPUs, 128) + free (the README's hand-made array);
 *   2. counter add, one pinned thread: rsk_pcounter_add against
 *      rsk_counter_add;
 *   3. 10,000 counters, each added to once from every CPU we may run on:
 *      memory committed (RSS growth) by a pool of pool-backed counters,
 *      by 10,000 rsk_counters (128 bytes per possible CPU each), and by a
 *      per-thread design (an array of 10,000 per thread) at 4 x CPUs
 *      threads; and the time to sum all 10,000 in each design.
 *
 * Timings: medians of REPS repetitions taken round-robin over the rivals
 * (tools/harness.h, the clock and statistics rseqkit-bench uses).
 * Usage: mempool-bench [--quick].  Exit status 0, or 1 if a result was
 * wrong (a sum that does not match).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rseqkit/rseqkit.h>
#include "harness.h"

#define NCOUNTERS 10000
#define MAX_REPS 15

static int reps = 11;
static long ops = 2000000;

static double now_ns(void)
{
	return (double)harness_now_ns();
}

static long rss_bytes(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f == NULL)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE);
}

static void pin(int cpu)
{
	harness_pin_thread(cpu);
}

static cpu_set_t allowed;
static int cpus[CPU_SETSIZE], ncpus;
static int failed;

/* --- 1. alloc + free --------------------------------------------------- */

static double alloc_pool(struct rsk_mempool *p, long n)
{
	double t0 = now_ns();

	for (long i = 0; i < n; i++) {
		void *o = rsk_mempool_zalloc(p);
		__asm__ volatile("" : : "r"(o) : "memory");
		rsk_mempool_free(p, o);
	}
	return (now_ns() - t0) / (double)n;
}

static double alloc_calloc(long n)
{
	int nr = rsk_possible_cpus();
	double t0 = now_ns();

	for (long i = 0; i < n; i++) {
		void *o = calloc((size_t)nr, 128);
		__asm__ volatile("" : : "r"(o) : "memory");
		free(o);
	}
	return (now_ns() - t0) / (double)n;
}

struct alloc_reps {
	struct rsk_mempool *p;
	long n;
	double t[2][MAX_REPS];
};

static void alloc_rep(void *arg, int rival, int rep)
{
	struct alloc_reps *a = arg;

	a->t[rival][rep] = rival == 0 ? alloc_pool(a->p, a->n) : alloc_calloc(a->n);
}

static void row_alloc(void)
{
	struct rsk_mempool_config cfg = {.size = 8};
	struct alloc_reps a = {.n = ops / 10};
	double ma, mb;

	rsk_mempool_create(&a.p, &cfg);
	alloc_pool(a.p, a.n / 10);
	alloc_calloc(a.n / 10);
	harness_round_robin(2, reps, alloc_rep, &a);
	ma = harness_median(a.t[0], reps);
	mb = harness_median(a.t[1], reps);
	printf("%-58s %8.1f ns   %-34s %8.1f ns   ratio %.2f\n", "alloc+free per-CPU object: rsk_mempool_zalloc+free", ma,
	       "calloc(possible, 128)+free", mb, ma / mb);
	rsk_mempool_destroy(a.p);
}

/* --- 2. counter add ------------------------------------------------------- */

static double add_pool(struct rsk_mempool *p, intptr_t *c, long n)
{
	double t0 = now_ns();

	for (long i = 0; i < n; i++)
		rsk_pcounter_add(p, c, 1);
	return (now_ns() - t0) / (double)n;
}

static double add_counter(struct rsk_counter *c, long n)
{
	double t0 = now_ns();

	for (long i = 0; i < n; i++)
		rsk_counter_add(c, 1);
	return (now_ns() - t0) / (double)n;
}

struct add_reps {
	struct rsk_mempool *p;
	intptr_t *c;
	struct rsk_counter *rc;
	double t[2][MAX_REPS];
};

static void add_rep(void *arg, int rival, int rep)
{
	struct add_reps *a = arg;

	a->t[rival][rep] = rival == 0 ? add_pool(a->p, a->c, ops) : add_counter(a->rc, ops);
}

static void row_add(void)
{
	struct rsk_mempool_config cfg = {.size = sizeof(intptr_t)};
	struct add_reps a;
	struct rsk_mempool *p;
	struct rsk_counter *rc;
	intptr_t *c, s1, s2;
	double ma, mb;
	long total = 0;

	rsk_mempool_create(&p, &cfg);
	c = rsk_mempool_zalloc(p);
	rsk_counter_create(&rc, RSK_INDEX_CPU);
	pin(cpus[0]);
	add_pool(p, c, ops / 10);
	add_counter(rc, ops / 10);
	total += ops / 10;
	a.p = p;
	a.c = c;
	a.rc = rc;
	harness_round_robin(2, reps, add_rep, &a);
	total += ops * reps;
	sched_setaffinity(0, sizeof(allowed), &allowed);
	rsk_pcounter_sum(p, c, &s1);
	rsk_counter_sum(rc, &s2);
	if (s1 != total || s2 != total) {
		fprintf(stderr, "counter add: sums %ld, %ld, expected %ld\n", (long)s1, (long)s2, total);
		failed = 1;
	}
	ma = harness_median(a.t[0], reps);
	mb = harness_median(a.t[1], reps);
	printf("%-58s %8.2f ns   %-34s %8.2f ns   ratio %.2f\n", "counter add, 1 pinned thread: rsk_pcounter_add", ma,
	       "rsk_counter_add", mb, ma / mb);
	rsk_mempool_destroy(p);
	rsk_counter_destroy(rc);
}

/* --- 3. 10,000 counters ---------------------------------------------------- */

static struct rsk_mempool *cpool;
static intptr_t *pc[NCOUNTERS];
static struct rsk_counter *rcs[NCOUNTERS];

struct tl_thread {
	intptr_t *slots; /* this thread's 10,000 counters */
	pthread_t tid;
};
static struct tl_thread *tls;
static intptr_t many_sums[3]; /* the last sums of row_many()'s designs */
static int ntl;
static pthread_barrier_t tl_done, tl_exit;

static void *tl_main(void *arg)
{
	struct tl_thread *t = arg;

	t->slots = calloc(NCOUNTERS, sizeof(intptr_t));
	for (int i = 0; i < NCOUNTERS; i++)
		t->slots[i] += 1;
	pthread_barrier_wait(&tl_done);
	pthread_barrier_wait(&tl_exit); /* alive while the sums run */
	free(t->slots);
	return NULL;
}

static double sum_pool(intptr_t *out)
{
	double t0 = now_ns();
	intptr_t total = 0, s;

	for (int i = 0; i < NCOUNTERS; i++) {
		rsk_pcounter_sum(cpool, pc[i], &s);
		total += s;
	}
	*out = total;
	return now_ns() - t0;
}

static double sum_counter(intptr_t *out)
{
	double t0 = now_ns();
	intptr_t total = 0, s;

	for (int i = 0; i < NCOUNTERS; i++) {
		rsk_counter_sum(rcs[i], &s);
		total += s;
	}
	*out = total;
	return now_ns() - t0;
}

static double sum_tl(intptr_t *out)
{
	double t0 = now_ns();
	intptr_t total = 0;

	for (int i = 0; i < NCOUNTERS; i++)
		for (int t = 0; t < ntl; t++)
			total += __atomic_load_n(&tls[t].slots[i], __ATOMIC_RELAXED);
	*out = total;
	return now_ns() - t0;
}

static void sum_rep(void *arg, int rival, int rep)
{
	double(*t)[MAX_REPS] = arg;
	intptr_t *sum = &many_sums[rival];

	t[rival][rep] = rival == 0 ? sum_pool(sum) : rival == 1 ? sum_counter(sum) : sum_tl(sum);
}

static void row_many(void)
{
	struct rsk_mempool_config cfg = {.size = sizeof(intptr_t)};
	struct rsk_mempool_stats st;
	long r0, m_pool, m_counter, m_tl;
	double t[3][MAX_REPS];
	intptr_t sa, sb, sc;
	int nr = rsk_possible_cpus();

	/* The arrays of handles are the caller's, not the designs' cost. */
	memset(pc, 1, sizeof(pc));
	memset(rcs, 1, sizeof(rcs));
	/* Pool-backed counters, each added to once on every CPU we may use. */
	r0 = rss_bytes();
	rsk_mempool_create(&cpool, &cfg);
	for (int i = 0; i < NCOUNTERS; i++)
		pc[i] = rsk_mempool_zalloc(cpool);
	for (int k = 0; k < ncpus; k++) {
		pin(cpus[k]);
		for (int i = 0; i < NCOUNTERS; i++)
			rsk_pcounter_add(cpool, pc[i], 1);
	}
	sched_setaffinity(0, sizeof(allowed), &allowed);
	m_pool = rss_bytes() - r0;
	rsk_mempool_stats(cpool, &st);

	r0 = rss_bytes();
	for (int i = 0; i < NCOUNTERS; i++)
		rsk_counter_create(&rcs[i], RSK_INDEX_CPU);
	for (int k = 0; k < ncpus; k++) {
		pin(cpus[k]);
		for (int i = 0; i < NCOUNTERS; i++)
			rsk_counter_add(rcs[i], 1);
	}
	sched_setaffinity(0, sizeof(allowed), &allowed);
	m_counter = rss_bytes() - r0;

	ntl = 4 * ncpus;
	tls = calloc((size_t)ntl, sizeof(*tls));
	pthread_barrier_init(&tl_done, NULL, (unsigned)ntl + 1);
	pthread_barrier_init(&tl_exit, NULL, (unsigned)ntl + 1);
	r0 = rss_bytes();
	for (int t = 0; t < ntl; t++)
		pthread_create(&tls[t].tid, NULL, tl_main, &tls[t]);
	pthread_barrier_wait(&tl_done);
	/* The counters only: each thread's stack is not part of the design's
	 * cost, but malloc may give each thread an arena; RSS counts both. */
	m_tl = rss_bytes() - r0;

	printf("%-58s %8ld B    (%.1f B per counter per CPU that ran; stats: %zu committed of %zu reserved)\n",
	       "10,000 counters, memory: pool-backed counters", m_pool, (double)m_pool / NCOUNTERS / ncpus,
	       st.committed_bytes, st.reserved_bytes);
	printf("%-58s %8ld B    ratio pool/this %.3f (%d possible CPUs x 128 B each)\n",
	       "10,000 counters, memory: rsk_counter", m_counter, (double)m_pool / (double)m_counter, nr);
	printf("%-58s %8ld B    ratio pool/this %.3f (%d threads; RSS also counts their stacks)\n",
	       "10,000 counters, memory: per-thread arrays", m_tl, (double)m_pool / (double)m_tl, ntl);

	harness_round_robin(3, reps, sum_rep, t);
	sa = many_sums[0];
	sb = many_sums[1];
	sc = many_sums[2];
	if (sa != (intptr_t)NCOUNTERS * ncpus || sb != sa || sc != (intptr_t)NCOUNTERS * ntl) {
		fprintf(stderr, "10,000 counters: sums %ld %ld %ld\n", (long)sa, (long)sb, (long)sc);
		failed = 1;
	}
	double ma = harness_median(t[0], reps), mb = harness_median(t[1], reps),
	       mc = harness_median(t[2], reps);
	printf("%-58s %8.0f us   rsk_counter %.0f us (ratio %.2f), per-thread %.0f us (ratio %.2f)\n",
	       "10,000 counters, time to sum all: pool-backed", ma / 1e3, mb / 1e3, ma / mb, mc / 1e3, ma / mc);

	pthread_barrier_wait(&tl_exit);
	for (int t = 0; t < ntl; t++)
		pthread_join(tls[t].tid, NULL);
	free(tls);
	for (int i = 0; i < NCOUNTERS; i++)
		rsk_counter_destroy(rcs[i]);
	rsk_mempool_destroy(cpool);
}

int main(int argc, char **argv)
{
	struct rsk_status st;

	if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
		reps = 3;
		ops = 200000;
	} else if (argc > 1) {
		fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
		return 2;
	}
	rsk_status(&st);
	sched_getaffinity(0, sizeof(allowed), &allowed);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed))
			cpus[ncpus++] = c;
	printf("# mempool-bench: rseq %s (owner %s), %d possible CPUs, %d usable, medians of %d\n",
	       st.available ? "available" : "unavailable", rsk_owner_name(st.owner), rsk_possible_cpus(), ncpus,
	       reps);
	row_alloc();
	row_add();
	row_many();
	return failed;
}
