/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/workload.c - the workload family: a real-world pattern,
 * three designs of one program.
 *
 * Worker threads (by default 4 x CPUs) process events.  One event: take
 * an object (pop from the per-CPU buffer, else allocate from the
 * preallocated pool), process it (five multiply-adds over its payload,
 * a light touch: the rows compare the designs, not the work), add to WL_STATS statistics counters (events, bytes, objects
 * allocated from the pool, objects recycled from a buffer), give the
 * object back (push on the per-CPU buffer, else free it to the pool).  A
 * reader thread sums the statistics every millisecond.
 *
 *   rseqkit        rsk_counter x 4, rsk_ptrbuf (WL_CAP per CPU)
 *   atomic-getcpu  sched_getcpu()-indexed slots of 4 counters updated with
 *                  atomics; per-CPU free lists (WL_CAP) under per-CPU mutexes
 *   mutex          one mutex around the 4 shared counters and one shared
 *                  free list (taken twice per event: get, put back + stats)
 *
 * The pool (rseqkit, atomic-getcpu) is a mutex-protected array stack of
 * the preallocated objects: the path of an empty or full per-CPU part.
 *
 * Latency: every WL_EVERY-th event of each thread is timed on its own
 * (CLOCK_MONOTONIC before and after); p50 and p99 come from those samples
 * (merged over the threads, median over the repetitions).  A timed event
 * includes the time its thread spent preempted, which is the tail an
 * oversubscribed server sees.  The clock reads cost about 2 x 20 ns per
 * WL_EVERY events, well under 1 ns per event.
 *
 * The check: events counted by the statistics == events processed (every
 * thread's operations, warm-up touch included); allocated + recycled ==
 * events; bytes == the bytes the threads counted themselves; every object
 * is found exactly once in the pool and the buffers afterwards.
 */
#include <time.h>
#include "bench.h"

#define WL_STATS 4
#define WL_CAP 32
#define WL_EVERY 64
#define WL_MAX_SAMPLES (1 << 16) /* per thread and run */

enum { WL_RSEQKIT, WL_GETCPU, WL_MUTEX };
enum { WS_EVENTS, WS_BYTES, WS_ALLOC, WS_RECYCLED };

struct wl_obj {
	intptr_t id;
	struct wl_obj *next; /* free lists */
	uint64_t uses;
	uint64_t data[5];
} __attribute__((aligned(64)));

struct wl_pcpu {
	intptr_t stat[WL_STATS];
	pthread_mutex_t mu;
	struct wl_obj *obj[WL_CAP];
	int n;
} __attribute__((aligned(CACHE_LINE)));

struct wl_thr {
	uint64_t n;
	uint32_t *lat;
	size_t nlat;
};

struct wl_state {
	int design;
	int nobj;
	struct wl_obj *objs;
	unsigned char *seen;
	/* the pool (and the mutex design's shared free list) */
	pthread_mutex_t pool_mu __attribute__((aligned(CACHE_LINE)));
	struct wl_obj **pool;
	int npool;
	intptr_t stat[WL_STATS]; /* mutex design, under pool_mu */
	struct rsk_counter *rc[WL_STATS];
	struct rsk_ptrbuf *rb;
	struct wl_pcpu *pc;
	/* reader */
	pthread_t reader;
	int stop;
	uint64_t passes;
	intptr_t last_sum;
	/* latency samples of the run */
	pthread_mutex_t lat_mu;
	uint32_t *lat;
	size_t nlat, caplat;
};

static void wl_sum(struct wl_state *s, intptr_t out[WL_STATS])
{
	memset(out, 0, sizeof(intptr_t) * WL_STATS);
	switch (s->design) {
	case WL_RSEQKIT:
		for (int k = 0; k < WL_STATS; k++)
			rsk_counter_sum(s->rc[k], &out[k]);
		break;
	case WL_GETCPU:
		for (int c = 0; c < ncpus_possible; c++)
			for (int k = 0; k < WL_STATS; k++)
				out[k] += __atomic_load_n(&s->pc[c].stat[k], __ATOMIC_RELAXED);
		break;
	default:
		pthread_mutex_lock(&s->pool_mu);
		memcpy(out, s->stat, sizeof(intptr_t) * WL_STATS);
		pthread_mutex_unlock(&s->pool_mu);
		break;
	}
}

static void *wl_reader(void *arg)
{
	struct wl_state *s = arg;
	intptr_t st[WL_STATS];

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		struct timespec d = {0, 1000000};
		nanosleep(&d, NULL);
		wl_sum(s, st);
		s->last_sum = st[WS_EVENTS];
		s->passes++;
	}
	return NULL;
}

static void *wl_setup(int nthreads, int design)
{
	struct wl_state *s = aligned_alloc(CACHE_LINE, sizeof(*s));

	if (!s)
		exit(1);
	memset(s, 0, sizeof(*s));
	s->design = design;
	/* Enough that neither the buffers nor the pool run dry: every part
	 * full, and one object in flight per thread, twice over. */
	s->nobj = ncpus_possible * WL_CAP + 2 * nthreads + 64;
	s->objs = aligned_alloc(64, sizeof(*s->objs) * (size_t)s->nobj);
	s->seen = calloc((size_t)s->nobj, 1);
	s->pool = calloc((size_t)s->nobj, sizeof(*s->pool));
	s->pc = aligned_alloc(CACHE_LINE, sizeof(*s->pc) * (size_t)ncpus_possible);
	if (!s->objs || !s->seen || !s->pool || !s->pc)
		exit(1);
	memset(s->objs, 0, sizeof(*s->objs) * (size_t)s->nobj);
	memset(s->pc, 0, sizeof(*s->pc) * (size_t)ncpus_possible);
	for (int c = 0; c < ncpus_possible; c++)
		pthread_mutex_init(&s->pc[c].mu, NULL);
	for (int i = 0; i < s->nobj; i++) {
		s->objs[i].id = i;
		s->pool[i] = &s->objs[i];
	}
	s->npool = s->nobj;
	pthread_mutex_init(&s->pool_mu, NULL);
	pthread_mutex_init(&s->lat_mu, NULL);
	if (design == WL_RSEQKIT) {
		for (int k = 0; k < WL_STATS; k++)
			die_on(rsk_counter_create(&s->rc[k], RSK_INDEX_CPU), "rsk_counter_create");
		die_on(rsk_ptrbuf_create(&s->rb, RSK_INDEX_CPU, WL_CAP, 0), "rsk_ptrbuf_create");
	}
	if (pthread_create(&s->reader, NULL, wl_reader, s)) {
		fprintf(stderr, "rseqkit-bench: cannot create the reader thread\n");
		exit(1);
	}
	return s;
}

static void *wl_setup_rsk(int nthreads)
{
	return wl_setup(nthreads, WL_RSEQKIT);
}
static void *wl_setup_getcpu(int nthreads)
{
	return wl_setup(nthreads, WL_GETCPU);
}
static void *wl_setup_mutex(int nthreads)
{
	return wl_setup(nthreads, WL_MUTEX);
}

static void wl_reader_stop(struct wl_state *s)
{
	if (__atomic_exchange_n(&s->stop, 1, __ATOMIC_RELAXED))
		return;
	pthread_join(s->reader, NULL);
}

static void wl_teardown(void *sh)
{
	struct wl_state *s = sh;

	wl_reader_stop(s);
	if (s->design == WL_RSEQKIT) {
		for (int k = 0; k < WL_STATS; k++)
			rsk_counter_destroy(s->rc[k]);
		rsk_ptrbuf_destroy(s->rb);
	}
	for (int c = 0; c < ncpus_possible; c++)
		pthread_mutex_destroy(&s->pc[c].mu);
	pthread_mutex_destroy(&s->pool_mu);
	pthread_mutex_destroy(&s->lat_mu);
	bench_free(6, s->objs, s->seen, s->pool, s->pc, s->lat, s);
}

static void wl_thread_init(void *sh, struct thr *t)
{
	struct wl_thr *w = calloc(1, sizeof(*w));

	(void)sh;
	if (!w || !(w->lat = malloc(sizeof(*w->lat) * WL_MAX_SAMPLES)))
		exit(1);
	w->n = 1; /* the first sample is event WL_EVERY, not the cold first one */
	t->priv = w;
}

static void wl_thread_fini(void *sh, struct thr *t)
{
	struct wl_state *s = sh;
	struct wl_thr *w = t->priv;

	pthread_mutex_lock(&s->lat_mu);
	if (s->nlat + w->nlat > s->caplat) {
		size_t cap = (s->nlat + w->nlat) * 2;
		uint32_t *p = realloc(s->lat, cap * sizeof(*p));
		if (!p)
			exit(1);
		s->lat = p;
		s->caplat = cap;
	}
	memcpy(s->lat + s->nlat, w->lat, w->nlat * sizeof(*w->lat));
	s->nlat += w->nlat;
	pthread_mutex_unlock(&s->lat_mu);
	free(w->lat);
	free(w);
	t->priv = NULL;
}

static inline struct wl_obj *wl_pool_get(struct wl_state *s)
{
	struct wl_obj *o = NULL;

	pthread_mutex_lock(&s->pool_mu);
	if (s->npool > 0)
		o = s->pool[--s->npool];
	pthread_mutex_unlock(&s->pool_mu);
	return o;
}

static inline void wl_pool_put(struct wl_state *s, struct wl_obj *o)
{
	pthread_mutex_lock(&s->pool_mu);
	s->pool[s->npool++] = o;
	pthread_mutex_unlock(&s->pool_mu);
}

/* The processing of one event: deterministic work on the object; returns
 * the event's size in bytes (a statistic). */
static inline intptr_t wl_touch(struct wl_obj *o, uint64_t seq)
{
	uint64_t x = seq ^ (uint64_t)o->id;

	o->uses++;
	for (int k = 0; k < 5; k++) {
		x = x * 6364136223846793005u + 1442695040888963407u;
		o->data[k] ^= x >> 17;
	}
	return 64 + (intptr_t)(x >> 60) * 8;
}

/* One event of each design; 0, or -1 when no object was to be had (the
 * check reports it; cannot happen with nobj as sized). */
static inline int wl_event(struct wl_state *s, struct thr *t, uint64_t seq)
{
	struct wl_obj *o = NULL;
	intptr_t bytes;
	int recycled = 0;

	switch (s->design) {
	case WL_RSEQKIT: {
		void *p;
		if (rsk_ptrbuf_pop(s->rb, &p) >= 0) {
			o = p;
			recycled = 1;
		} else if (!(o = wl_pool_get(s))) {
			return -1;
		}
		bytes = wl_touch(o, seq);
		rsk_counter_add(s->rc[WS_EVENTS], 1);
		rsk_counter_add(s->rc[WS_BYTES], bytes);
		rsk_counter_add(s->rc[recycled ? WS_RECYCLED : WS_ALLOC], 1);
		if (rsk_ptrbuf_push(s->rb, o) < 0)
			wl_pool_put(s, o);
		break;
	}
	case WL_GETCPU: {
		int cpu = sched_getcpu();
		if ((unsigned)cpu >= (unsigned)ncpus_possible)
			cpu = 0;
		struct wl_pcpu *pc = &s->pc[cpu];
		pthread_mutex_lock(&pc->mu);
		if (pc->n > 0) {
			o = pc->obj[--pc->n];
			recycled = 1;
		}
		pthread_mutex_unlock(&pc->mu);
		if (!o && !(o = wl_pool_get(s)))
			return -1;
		bytes = wl_touch(o, seq);
		cpu = sched_getcpu();
		if ((unsigned)cpu >= (unsigned)ncpus_possible)
			cpu = 0;
		pc = &s->pc[cpu];
		__atomic_fetch_add(&pc->stat[WS_EVENTS], 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&pc->stat[WS_BYTES], bytes, __ATOMIC_RELAXED);
		__atomic_fetch_add(&pc->stat[recycled ? WS_RECYCLED : WS_ALLOC], 1,
				   __ATOMIC_RELAXED);
		pthread_mutex_lock(&pc->mu);
		if (pc->n < WL_CAP) {
			pc->obj[pc->n++] = o;
			o = NULL;
		}
		pthread_mutex_unlock(&pc->mu);
		if (o)
			wl_pool_put(s, o);
		break;
	}
	default:
		/* One shared free list (the pool itself) and shared stats. */
		pthread_mutex_lock(&s->pool_mu);
		if (s->npool > 0)
			o = s->pool[--s->npool];
		pthread_mutex_unlock(&s->pool_mu);
		if (!o)
			return -1;
		bytes = wl_touch(o, seq);
		pthread_mutex_lock(&s->pool_mu);
		s->stat[WS_EVENTS]++;
		s->stat[WS_BYTES] += bytes;
		s->stat[WS_RECYCLED]++; /* every object comes from the one list */
		s->pool[s->npool++] = o;
		pthread_mutex_unlock(&s->pool_mu);
		break;
	}
	t->acc += bytes;
	return 0;
}

static void wl_fn(void *sh, struct thr *t, unsigned n)
{
	struct wl_state *s = sh;
	struct wl_thr *w = t->priv;
	uint64_t seq = w->n;

	for (unsigned i = 0; i < n; i++, seq++) {
		int r;
		if (__builtin_expect(seq % WL_EVERY == 0, 0) && w->nlat < WL_MAX_SAMPLES) {
			uint64_t a = now_ns();
			r = wl_event(s, t, seq);
			uint64_t d = now_ns() - a;
			w->lat[w->nlat++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		} else {
			r = wl_event(s, t, seq);
		}
		if (__builtin_expect(r < 0, 0))
			t->aux = -ENOMEM;
	}
	w->n = seq;
}

static int wl_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct wl_state *s = sh;
	intptr_t st[WL_STATS], bytes = 0;
	uint64_t events = ops_all(t, n);
	int dup = 0, missing = 0;

	wl_reader_stop(s);
	for (int i = 0; i < n; i++) {
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: no object to be had", i);
			return -1;
		}
		bytes += t[i].acc;
	}
	wl_sum(s, st);
	if ((uintptr_t)st[WS_EVENTS] != (uintptr_t)events ||
	    (uintptr_t)(st[WS_ALLOC] + st[WS_RECYCLED]) != (uintptr_t)events ||
	    st[WS_BYTES] != bytes) {
		snprintf(err, len,
			 "statistics: events %jd, allocated+recycled %jd, bytes %jd; processed "
			 "%ju events of %jd bytes",
			 (intmax_t)st[WS_EVENTS], (intmax_t)(st[WS_ALLOC] + st[WS_RECYCLED]),
			 (intmax_t)st[WS_BYTES], (uintmax_t)events, (intmax_t)bytes);
		return -1;
	}
#define WL_SEEN(o) (dup |= (o)->id < 0 || (o)->id >= s->nobj || s->seen[(o)->id]++)
	for (int i = 0; i < s->npool; i++)
		WL_SEEN(s->pool[i]);
	for (int c = 0; c < ncpus_possible; c++)
		for (int i = 0; i < s->pc[c].n; i++)
			WL_SEEN(s->pc[c].obj[i]);
	if (s->design == WL_RSEQKIT) {
		void *p;
		for (int c = 0; c < s->rb->nr; c++)
			while (rsk_ptrbuf_pop_cpu(s->rb, c, &p) == 0)
				WL_SEEN((struct wl_obj *)p);
	}
	for (int i = 0; i < s->nobj; i++)
		missing += !s->seen[i];
	if (dup || missing) {
		snprintf(err, len, "objects: %d missing, %s duplicated or invalid", missing,
			 dup ? "some" : "none");
		return -1;
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void wl_extra(void *sh, struct sample *out)
{
	struct wl_state *s = sh;

	if (s->nlat == 0)
		return;
	qsort(s->lat, s->nlat, sizeof(*s->lat), cmp_u32);
	out->p50 = s->lat[(s->nlat - 1) / 2];
	out->p99 = s->lat[(size_t)((double)(s->nlat - 1) * 0.99)];
}

static const struct impl workload_impls[] = {
	/* At the largest thread count (default 4 x CPUs). */
	ROWF("workload", "rseqkit", wl_setup_rsk, wl_thread_init, wl_fn, wl_thread_fini, wl_check,
	     wl_teardown, IMPL_MAX_THREADS, wl_extra),
	ROWF("workload", "atomic-getcpu", wl_setup_getcpu, wl_thread_init, wl_fn, wl_thread_fini,
	     wl_check, wl_teardown, IMPL_MAX_THREADS, wl_extra),
	ROWF("workload", "mutex", wl_setup_mutex, wl_thread_init, wl_fn, wl_thread_fini, wl_check,
	     wl_teardown, IMPL_MAX_THREADS, wl_extra),
};

static void workload_summary(const struct row *rows, int nrows)
{
	const struct row *base = NULL;
	bool head = false;

	for (int i = 0; i < nrows; i++)
		if (!rows[i].failed && !strcmp(rows[i].im->op, "workload") &&
		    !strcmp(rows[i].im->name, "atomic-getcpu"))
			base = &rows[i];
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (r->failed || strcmp(r->im->op, "workload"))
			continue;
		if (!head)
			printf("\nworkload (totals verified; latency: every %d-th event timed):\n"
			       "  %-14s %7s %12s %10s %10s %12s\n",
			       WL_EVERY, "impl", "threads", "events/s", "p50 ns", "p99 ns",
			       "x getcpu");
		head = true;
		char xb[16] = "-";
		if (base && base->threads == r->threads)
			snprintf(xb, sizeof(xb), "%.2f", r->mops / base->mops);
		printf("  %-14s %7d %12.0f %10.0f %10.0f %12s\n", r->im->name, r->threads,
		       r->mops * 1e6, r->p50, r->p99, xb);
	}
	if (head && base) {
		const struct row *r = find_row(rows, nrows, "workload", "rseqkit", base->threads);
		if (r)
			print_target("rseqkit events/s over atomic-getcpu's", r->mops / base->mops,
				     ">=", 2.0);
	}
}

/* The workload, in its own words. */
static void workload_json(FILE *f, const struct row *rows, int nrows)
{
	const char *sep = "";

	fprintf(f, ",\n  \"workload\": {\"description\": \"worker threads process events: "
		   "each takes an object from a per-CPU buffer (or a preallocated pool), touches "
		   "it, adds to 4 statistics counters and puts the object back; a reader thread "
		   "sums the statistics every 1 ms\", \"latency\": \"every %d-th event of each "
		   "thread timed alone with CLOCK_MONOTONIC; p50/p99 over all threads' samples, "
		   "median over the repetitions\", \"checked\": \"events counted by the "
		   "statistics == events processed; allocated + recycled == events; bytes; every "
		   "object found once\", \"results\": [",
		WL_EVERY);
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (r->failed || strcmp(r->im->op, "workload"))
			continue;
		fprintf(f, "%s\n    {\"impl\": \"%s\", \"threads\": %d, \"events_per_s\": %.0f, "
			   "\"ns_per_event\": %.4f, \"p50_ns\": %.1f, \"p99_ns\": %.1f, "
			   "\"spread_pct\": %.2f, \"reps\": %d, \"totals_verified\": true}",
			sep, r->im->name, r->threads, r->mops * 1e6, r->ns_per_op, r->p50, r->p99,
			r->spread_pct, r->nsamples);
		sep = ",";
	}
	fprintf(f, "\n  ]}");
}

const struct family fam_workload = {
	.name = "workload", .title = "a server-like workload", FAMILY_IMPLS(workload_impls),
	.summary = workload_summary, .json = workload_json,
};
