/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/fence.c - the fence family: rsk_fence_cpu() of another CPU,
 * rsk_fence_all().
 *
 * One measured thread (pinned, as every 1-thread row) calls the fence in
 * its loop; meanwhile one busy thread per other allowed CPU (pinned there)
 * runs rsk_counter_add() sections without pause, so the fence has real
 * sections to restart.  The check: the busy threads' counter equals the
 * adds they did (a fence restarts sections, it never loses one), and
 * every fence returned 0.
 */
#include "bench.h"

struct fence_state;

struct fence_busy_arg {
	struct fence_state *s;
	int cpu;
};

struct fence_state {
	struct rsk_counter *c;
	int target; /* the CPU fence-cpu fences */
	int nbusy;
	int stop;
	pthread_t busy[CPU_SETSIZE];
	struct fence_busy_arg arg[CPU_SETSIZE];
	uint64_t busy_ops; /* summed at join */
	pthread_barrier_t ready;
};

static void *fence_busy(void *p)
{
	struct fence_busy_arg *a = p;
	struct fence_state *s = a->s;
	uint64_t n = 0;

	pin_self(a->cpu);
	pthread_barrier_wait(&s->ready);
	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		for (int k = 0; k < 64; k++)
			rsk_counter_add(s->c, 1);
		n += 64;
	}
	__atomic_fetch_add(&s->busy_ops, n, __ATOMIC_RELAXED);
	return NULL;
}

static void *fence_setup(int nthreads)
{
	struct fence_state *s = calloc(1, sizeof(*s));

	(void)nthreads;
	if (!s)
		exit(1);
	die_on(rsk_counter_create(&s->c, RSK_INDEX_CPU), "rsk_counter_create");
	/* The measured thread runs on allowed_cpus[0] (1-thread rows are
	 * pinned there); the busy threads on every other allowed CPU. */
	s->target = nallowed > 1 ? allowed_cpus[1] : allowed_cpus[0];
	s->nbusy = nallowed - 1;
	pthread_barrier_init(&s->ready, NULL, (unsigned)s->nbusy + 1);
	for (int i = 0; i < s->nbusy; i++) {
		s->arg[i].s = s;
		s->arg[i].cpu = allowed_cpus[i + 1];
		if (pthread_create(&s->busy[i], NULL, fence_busy, &s->arg[i])) {
			fprintf(stderr, "rseqkit-bench: cannot create a busy thread\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&s->ready);
	return s;
}

static void fence_stop(struct fence_state *s)
{
	if (__atomic_exchange_n(&s->stop, 1, __ATOMIC_RELAXED))
		return;
	for (int i = 0; i < s->nbusy; i++)
		pthread_join(s->busy[i], NULL);
}

static void fence_cpu_fn(void *sh, struct thr *t, unsigned n)
{
	struct fence_state *s = sh;

	for (unsigned i = 0; i < n; i++) {
		int r = rsk_fence_cpu(s->target);
		if (__builtin_expect(r < 0, 0))
			t->aux = r;
	}
}

static void fence_all_fn(void *sh, struct thr *t, unsigned n)
{
	(void)sh;
	for (unsigned i = 0; i < n; i++) {
		int r = rsk_fence_all();
		if (__builtin_expect(r < 0, 0))
			t->aux = r;
	}
}

static int fence_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct fence_state *s = sh;
	intptr_t sum = 0;

	fence_stop(s);
	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: fence failed: %s", i, strerror((int)-t[i].aux));
			return -1;
		}
	rsk_counter_sum(s->c, &sum);
	if ((uintptr_t)sum != (uintptr_t)s->busy_ops) {
		snprintf(err, len, "busy threads' counter %jd, adds done %ju", (intmax_t)sum,
			 (uintmax_t)s->busy_ops);
		return -1;
	}
	return 0;
}

static void fence_teardown(void *sh)
{
	struct fence_state *s = sh;

	fence_stop(s);
	pthread_barrier_destroy(&s->ready);
	rsk_counter_destroy(s->c);
	free(s);
}

static const struct impl fence_impls[] = {
	/* 1 thread, busy threads on the other CPUs. */
	ROWF("fence-cpu", "rseqkit", fence_setup, NULL, fence_cpu_fn, NULL, fence_check,
	     fence_teardown, IMPL_ONE_THREAD, NULL),
	ROWF("fence-all", "rseqkit", fence_setup, NULL, fence_all_fn, NULL, fence_check,
	     fence_teardown, IMPL_ONE_THREAD, NULL),
};

static void fence_summary(const struct row *rows, int nrows)
{
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (!r->failed && !strncmp(r->im->op, "fence-", 6))
			printf("%s%-9s latency %.0f ns (median), spread %.0f%%\n",
			       strcmp(r->im->op, "fence-cpu") ? "  " : "\nfences (1 thread, busy threads on the other CPUs):\n  ",
			       r->im->op, r->ns_per_op, r->spread_pct);
	}
}

const struct family fam_fence = {
	.name = "fence", .title = "fence latency", FAMILY_IMPLS(fence_impls),
	.summary = fence_summary,
};
