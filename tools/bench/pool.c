/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/pool.c - the pool family: 64-byte objects.
 *
 *   pool     one operation = allocate an object, write a tag into its
 *            first and last words, read them back, free it (same thread).
 *            rseqkit: rsk_pool_alloc() + rsk_pool_free() (RSK_INDEX_CPU,
 *            cache capacity POOL_CAP); malloc: glibc malloc(64) + free();
 *            mutex: a free list under one pthread mutex, grown by chunks
 *            of POOL_CHUNK objects from malloc (never shrunk).
 *   pool-pc  threads in pairs (thread 2k produces, 2k+1 consumes), each
 *            pair joined by a single-producer single-consumer ring of
 *            PC_RING pointers (the same ring for every impl).  The
 *            producer allocates an object, writes its pair and sequence
 *            number into it and enqueues it; the consumer dequeues it,
 *            checks pair and sequence (FIFO: each is the next one) and
 *            frees it.  A full (empty) ring is waited for by spinning
 *            PC_SPIN times, then with sched_yield().  One operation = one
 *            object from allocation to free: ns/op is the time of all the
 *            threads (producers and consumers) per object consumed, Mops/s
 *            objects consumed per microsecond of wall time.
 *
 * The checks: every thread freed what it allocated (pool: allocations ==
 * frees == operations, per thread; pool-pc: per pair, allocated by the
 * producer == freed by the producer (the object in hand at the stop) +
 * freed by the consumer + left in the ring, freed in order by the check);
 * no tag or sequence number came back wrong; rsk_pool_stats() in_use == 0
 * at the end (rseqkit), the free list's count 0 (mutex).
 *
 * pool_memory_run(): the memory figures (below; doc/BENCHMARKS.md).
 *
 * The rival allocators (jemalloc, mimalloc, tcmalloc: rival-*.c) run the
 * malloc rows' code in a helper process whose malloc is theirs.
 */
#include <sched.h>
#include <time.h>
#include "bench.h"

#define POOL_OBJ 64
#define POOL_WORDS (POOL_OBJ / 8)
#define POOL_CAP 64
#define POOL_CHUNK 64
#define PC_RING 256
#define PC_SPIN 64

enum { PK_RSK, PK_MALLOC, PK_MUTEX };

struct pool_thr {
	uint64_t allocs, frees;
} __attribute__((aligned(CACHE_LINE)));

struct pc_ring {
	struct {
		size_t head; /* next slot to take; written by the consumer */
		size_t tail_seen; /* the consumer's copy of tail */
		uint64_t want;	  /* the sequence number expected next */
	} c __attribute__((aligned(CACHE_LINE)));
	struct {
		size_t tail; /* next slot to fill; written by the producer */
		size_t head_seen;
		uint64_t seq;
	} p __attribute__((aligned(CACHE_LINE)));
	uint64_t *slot[PC_RING] __attribute__((aligned(CACHE_LINE)));
};

struct pool_state {
	int kind;
	int nthreads;
	int bad; /* objects that came back with a wrong tag or sequence */
	struct rsk_pool *rp;
	struct pool_thr *pt;
	struct pc_ring *rings; /* nthreads / 2, pool-pc only */
	/* the mutex rival */
	pthread_mutex_t mu __attribute__((aligned(CACHE_LINE)));
	void *mfree; /* free objects, linked through their first word */
	size_t m_in_use;
	void **chunks;
	size_t nchunks, capchunks;
};

static void *pool_setup(int nthreads, int kind, bool pc)
{
	struct pool_state *s = bench_alloc(sizeof(*s));

	s->kind = kind;
	s->nthreads = nthreads;
	s->pt = bench_alloc(sizeof(*s->pt) * (size_t)nthreads);
	if (pc)
		s->rings = bench_alloc(sizeof(*s->rings) * (size_t)(nthreads / 2 > 0 ? nthreads / 2 : 1));
	pthread_mutex_init(&s->mu, NULL);
	if (kind == PK_RSK) {
		struct rsk_pool_config cfg = {.size = POOL_OBJ, .cache_capacity = POOL_CAP,
					      .mode = RSK_INDEX_CPU};
		die_on(rsk_pool_create(&s->rp, &cfg), "rsk_pool_create");
	}
	return s;
}

static void *pool_setup_rsk(int nthreads)
{
	return pool_setup(nthreads, PK_RSK, false);
}
static void *pc_setup_rsk(int nthreads)
{
	return pool_setup(nthreads, PK_RSK, true);
}
static void *pool_setup_malloc(int nthreads)
{
	return pool_setup(nthreads, PK_MALLOC, false);
}
static void *pool_setup_mutex(int nthreads)
{
	return pool_setup(nthreads, PK_MUTEX, false);
}
static void *pc_setup_malloc(int nthreads)
{
	return pool_setup(nthreads, PK_MALLOC, true);
}

/* The mutex rival: a free list, grown by a chunk when empty. */
static void *mxp_alloc(struct pool_state *s)
{
	void *o;

	pthread_mutex_lock(&s->mu);
	if (!s->mfree) {
		char *c = aligned_alloc(CACHE_LINE, (size_t)POOL_OBJ * POOL_CHUNK);
		if (!c || (s->nchunks == s->capchunks &&
			   !(s->chunks = realloc(s->chunks, sizeof(void *) *
						 (s->capchunks = s->capchunks * 2 + 16))))) {
			pthread_mutex_unlock(&s->mu);
			free(c);
			return NULL;
		}
		s->chunks[s->nchunks++] = c;
		for (int i = POOL_CHUNK - 1; i >= 0; i--) {
			*(void **)(c + (size_t)i * POOL_OBJ) = s->mfree;
			s->mfree = c + (size_t)i * POOL_OBJ;
		}
	}
	o = s->mfree;
	s->mfree = *(void **)o;
	s->m_in_use++;
	pthread_mutex_unlock(&s->mu);
	return o;
}

static void mxp_free(struct pool_state *s, void *o)
{
	pthread_mutex_lock(&s->mu);
	*(void **)o = s->mfree;
	s->mfree = o;
	s->m_in_use--;
	pthread_mutex_unlock(&s->mu);
}

/* kind is a constant in every caller: each impl gets its own loop. */
static inline __attribute__((always_inline)) uint64_t *po_alloc(struct pool_state *s, int kind)
{
	switch (kind) {
	case PK_RSK:
		return rsk_pool_alloc(s->rp);
	case PK_MALLOC:
		return malloc(POOL_OBJ);
	default:
		return mxp_alloc(s);
	}
}

static inline __attribute__((always_inline)) int po_free(struct pool_state *s, int kind, void *o)
{
	switch (kind) {
	case PK_RSK:
		return rsk_pool_free(s->rp, o);
	case PK_MALLOC:
		free(o);
		return 0;
	default:
		mxp_free(s, o);
		return 0;
	}
}

static inline __attribute__((always_inline)) void pool_pairs(struct pool_state *s, struct thr *t,
							     unsigned n, int kind)
{
	struct pool_thr *pt = &s->pt[t->id];
	uint64_t allocs = pt->allocs, frees = pt->frees;
	int bad = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t *o = po_alloc(s, kind);
		if (__builtin_expect(o == NULL, 0)) {
			t->aux = -ENOMEM;
			break;
		}
		allocs++;
		uint64_t tag = ((uint64_t)(t->id + 1) << 40) + allocs;
		o[0] = tag;
		o[POOL_WORDS - 1] = tag;
		/* The object escapes: the stores happen, the loads reload. */
		__asm__ __volatile__("" : : "r"(o) : "memory");
		bad |= o[0] != tag || o[POOL_WORDS - 1] != tag;
		int r = po_free(s, kind, o);
		if (__builtin_expect(r < 0, 0)) {
			t->aux = r;
			break;
		}
		frees++;
	}
	pt->allocs = allocs;
	pt->frees = frees;
	if (bad)
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
}

/* One loop per kind (noinline: each to read in objdump -d); pool_pairs()
 * and pc_objects() take the kind as a constant. */
#define POOL_FNS(kind, KIND)                                                   \
	static __attribute__((noinline)) void pool_fn_##kind(void *sh, struct thr *t, unsigned n) \
	{                                                                      \
		pool_pairs(sh, t, n, KIND);                                    \
	}                                                                      \
	static __attribute__((noinline, unused)) void pc_fn_##kind(void *sh, struct thr *t, \
								   unsigned n) \
	{                                                                      \
		pc_objects(sh, t, n, KIND);                                    \
	}

/* The k-th pause waiting for the other side of a ring: false if the run
 * stopped.  Spin PC_SPIN times, then yield. */
static bool pc_pause(unsigned k, const int *stop)
{
	if (__atomic_load_n(stop, __ATOMIC_RELAXED))
		return false;
	if (k >= PC_SPIN)
		sched_yield();
#if defined(__x86_64__) || defined(__i386__)
	else
		__builtin_ia32_pause();
#endif
	return true;
}

/* Room in the ring for slot `tail`: false if the run stopped first. */
static bool pc_wait_room(struct pc_ring *q, size_t tail, const int *stop)
{
	for (unsigned k = 0;; k++) {
		q->p.head_seen = __atomic_load_n(&q->c.head, __ATOMIC_ACQUIRE);
		if (tail - q->p.head_seen < PC_RING)
			return true;
		if (!pc_pause(k, stop))
			return false;
	}
}

/* An object at slot `head`: false if the run stopped first. */
static bool pc_wait_item(struct pc_ring *q, size_t head, const int *stop)
{
	for (unsigned k = 0;; k++) {
		q->c.tail_seen = __atomic_load_n(&q->p.tail, __ATOMIC_ACQUIRE);
		if (q->c.tail_seen != head)
			return true;
		if (!pc_pause(k, stop))
			return false;
	}
}

static inline int pc_bad(struct pc_ring *q, const uint64_t *o, int pair)
{
	return o[0] != q->c.want++ || o[1] != (uint64_t)pair || o[POOL_WORDS - 1] != o[0];
}

static inline __attribute__((always_inline)) void pc_objects(struct pool_state *s, struct thr *t,
							     unsigned n, int kind)
{
	int pair = t->id / 2;
	struct pc_ring *q = &s->rings[pair];
	struct pool_thr *pt = &s->pt[t->id];
	const int *stop = &t->run->stop;
	uint64_t done = 0;
	int bad = 0;

	if (t->id % 2 == 0) { /* producer */
		size_t tail = q->p.tail;
		for (unsigned i = 0; i < n; i++) {
			uint64_t *o = po_alloc(s, kind);
			if (__builtin_expect(o == NULL, 0)) {
				t->aux = -ENOMEM;
				break;
			}
			pt->allocs++;
			o[0] = o[POOL_WORDS - 1] = q->p.seq;
			o[1] = (uint64_t)pair;
			if (tail - q->p.head_seen >= PC_RING && !pc_wait_room(q, tail, stop)) {
				/* stopped with the object in hand */
				if (po_free(s, kind, o) == 0)
					pt->frees++;
				break;
			}
			q->p.seq++;
			q->slot[tail % PC_RING] = o;
			__atomic_store_n(&q->p.tail, ++tail, __ATOMIC_RELEASE);
		}
	} else { /* consumer */
		size_t head = q->c.head;
		for (unsigned i = 0; i < n; i++) {
			if (head == q->c.tail_seen && !pc_wait_item(q, head, stop))
				break;
			uint64_t *o = q->slot[head % PC_RING];
			bad |= pc_bad(q, o, pair);
			int r = po_free(s, kind, o);
			if (__builtin_expect(r < 0, 0)) {
				t->aux = r;
				break;
			}
			pt->frees++;
			done++;
			__atomic_store_n(&q->c.head, ++head, __ATOMIC_RELEASE);
		}
	}
	t->objs += done;
	if (bad)
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
}

POOL_FNS(rsk, PK_RSK)
POOL_FNS(malloc, PK_MALLOC)
POOL_FNS(mutex, PK_MUTEX)

/* Free what is left in the rings, in order (checked); the count. */
static uint64_t pc_drain(struct pool_state *s, int pair)
{
	struct pc_ring *q = &s->rings[pair];
	uint64_t left = 0;

	while (q->c.head != q->p.tail) {
		uint64_t *o = q->slot[q->c.head % PC_RING];
		if (pc_bad(q, o, pair))
			s->bad++;
		if (po_free(s, s->kind, o) < 0)
			s->bad++;
		q->c.head++;
		left++;
	}
	return left;
}

static int pool_in_use_check(struct pool_state *s, char *err, size_t len)
{
	if (s->bad) {
		snprintf(err, len, "%d object(s) came back with a wrong tag or sequence number",
			 s->bad);
		return -1;
	}
	if (s->kind == PK_RSK) {
		struct rsk_pool_stats st;
		rsk_pool_stats(s->rp, &st);
		if (st.in_use != 0) {
			snprintf(err, len, "rsk_pool_stats: in_use %zu at the end, expected 0",
				 st.in_use);
			return -1;
		}
	}
	if (s->kind == PK_MUTEX && s->m_in_use != 0) {
		snprintf(err, len, "free list: %zu objects in use at the end, expected 0",
			 s->m_in_use);
		return -1;
	}
	return 0;
}

static int pool_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct pool_state *s = sh;

	for (int i = 0; i < n; i++) {
		const struct pool_thr *pt = &s->pt[i];
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: %s failed: %s", i,
				 t[i].aux == -ENOMEM ? "alloc" : "free", strerror((int)-t[i].aux));
			return -1;
		}
		if (pt->allocs != pt->frees || pt->allocs != t[i].ops_all) {
			snprintf(err, len, "thread %d: allocated %ju, freed %ju, operations %ju", i,
				 (uintmax_t)pt->allocs, (uintmax_t)pt->frees,
				 (uintmax_t)t[i].ops_all);
			return -1;
		}
	}
	return pool_in_use_check(s, err, len);
}

static int pc_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct pool_state *s = sh;

	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: %s failed: %s", i,
				 t[i].aux == -ENOMEM ? "alloc" : "free", strerror((int)-t[i].aux));
			return -1;
		}
	for (int k = 0; k < n / 2; k++) {
		const struct pool_thr *p = &s->pt[2 * k], *c = &s->pt[2 * k + 1];
		uint64_t left = pc_drain(s, k);
		if (p->allocs != p->frees + c->frees + left || c->allocs != 0) {
			snprintf(err, len,
				 "pair %d: allocated %ju, freed %ju by the producer, %ju by the "
				 "consumer, %ju left in the ring",
				 k, (uintmax_t)p->allocs, (uintmax_t)p->frees, (uintmax_t)c->frees,
				 (uintmax_t)left);
			return -1;
		}
	}
	return pool_in_use_check(s, err, len);
}

static void pool_teardown(void *sh)
{
	struct pool_state *s = sh;

	if (s->rings)
		for (int k = 0; k < s->nthreads / 2; k++)
			pc_drain(s, k);
	if (s->rp)
		rsk_pool_destroy(s->rp);
	for (size_t i = 0; i < s->nchunks; i++)
		free(s->chunks[i]);
	free(s->chunks);
	pthread_mutex_destroy(&s->mu);
	free(s->rings);
	free(s->pt);
	free(s);
}

/* Memory: `threads` threads (4 x CPUs) each allocate POOL_CAP objects
 * then free them, over and over for `ms` (--ms, at least 100); the main thread samples
 * rsk_pool_stats() every millisecond (the peak of cached objects), then
 * reads it once more after the threads are done, drains every cache and
 * trims.  A per-thread cache design of the same capacity would keep up to
 * threads x POOL_CAP objects; the pool keeps at most parts x POOL_CAP. */
struct pool_mem {
	bool valid;
	int threads, cpus;
	uint64_t ops;
	size_t caches, cached, cached_max, peak_cached, in_use, depot;
	size_t slabs, mapped, mapped_trimmed;
};
static struct pool_mem pmem;

struct pm_thr {
	struct rsk_pool *p;
	const int *stop;
	pthread_barrier_t *start;
	uint64_t ops;
	int err;
	pthread_t tid;
} __attribute__((aligned(CACHE_LINE)));

static void *pm_thread(void *arg)
{
	struct pm_thr *a = arg;
	void *held[POOL_CAP];

	pthread_barrier_wait(a->start);
	while (!__atomic_load_n(a->stop, __ATOMIC_RELAXED) && !a->err) {
		int k;
		for (k = 0; k < POOL_CAP; k++) {
			if (!(held[k] = rsk_pool_alloc(a->p))) {
				a->err = errno ? errno : ENOMEM;
				break;
			}
			*(uint64_t *)held[k] = a->ops + (uint64_t)k;
		}
		for (int j = 0; j < k; j++)
			if (rsk_pool_free(a->p, held[j]) < 0)
				a->err = EINVAL;
		a->ops += (uint64_t)k;
	}
	return NULL;
}

static int pool_memory_run(int threads, unsigned ms)
{
	struct rsk_pool_config cfg = {.size = POOL_OBJ, .cache_capacity = POOL_CAP,
				      .mode = RSK_INDEX_CPU};
	struct rsk_pool *p;
	struct rsk_pool_stats st;
	struct pm_thr *a = aligned_alloc(CACHE_LINE, sizeof(*a) * (size_t)threads);
	pthread_barrier_t start;
	int stop = 0, err = 0;

	if (!a)
		exit(1);
	memset(a, 0, sizeof(*a) * (size_t)threads);
	memset(&pmem, 0, sizeof(pmem));
	die_on(rsk_pool_create(&p, &cfg), "rsk_pool_create");
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		a[i].p = p;
		a[i].stop = &stop;
		a[i].start = &start;
		if (pthread_create(&a[i].tid, NULL, pm_thread, &a[i])) {
			fprintf(stderr, "rseqkit-bench: cannot create thread %d\n", i);
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	uint64_t end = now_ns() + (uint64_t)ms * 1000000u;
	while (now_ns() < end) {
		struct timespec d = {0, 1000000};
		nanosleep(&d, NULL);
		rsk_pool_stats(p, &st);
		if (st.cached > pmem.peak_cached)
			pmem.peak_cached = st.cached;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < threads; i++) {
		pthread_join(a[i].tid, NULL);
		pmem.ops += a[i].ops;
		err = err ? err : a[i].err;
	}
	rsk_pool_stats(p, &st);
	pmem.threads = threads;
	pmem.cpus = nallowed;
	pmem.caches = st.caches;
	pmem.cached = st.cached;
	pmem.cached_max = st.cached_max;
	pmem.peak_cached = st.cached > pmem.peak_cached ? st.cached : pmem.peak_cached;
	pmem.in_use = st.in_use;
	pmem.depot = st.depot;
	pmem.slabs = st.slabs;
	pmem.mapped = st.bytes_mapped;
	if (rsk_pool_drain(p, -1) < 0 || rsk_pool_trim(p) < 0)
		err = err ? err : EINVAL;
	rsk_pool_stats(p, &st);
	pmem.mapped_trimmed = st.bytes_mapped;
	rsk_pool_destroy(p);
	pthread_barrier_destroy(&start);
	free(a);
	if (err || pmem.in_use != 0) {
		fprintf(stderr, "rseqkit-bench: pool memory run: %s%s\n",
			err ? strerror(err) : "", pmem.in_use ? " objects still in use" : "");
		return -1;
	}
	pmem.valid = true;
	return 0;
}

/* The malloc rows' code, in the process of each rival allocator. */
#define RIVAL_ROWS(op, setup, fn, check, flags)                                \
	ROWH(op, "jemalloc", setup, fn, check, pool_teardown, flags, &rival_jemalloc), \
	ROWH(op, "mimalloc", setup, fn, check, pool_teardown, flags, &rival_mimalloc), \
	ROWH(op, "tcmalloc", setup, fn, check, pool_teardown, flags, &rival_tcmalloc)

static const struct impl pool_impls[] = {
	ROW("pool", "rseqkit", pool_setup_rsk, NULL, pool_fn_rsk, NULL, pool_check, pool_teardown),
	ROWH("pool", "rseqkit-fallback", pool_setup_rsk, pool_fn_rsk, pool_check, pool_teardown, 0,
	     &helper_fallback),
	ROW("pool", "malloc", pool_setup_malloc, NULL, pool_fn_malloc, NULL, pool_check, pool_teardown),
	RIVAL_ROWS("pool", pool_setup_malloc, pool_fn_malloc, pool_check, 0),
	ROW("pool", "mutex", pool_setup_mutex, NULL, pool_fn_mutex, NULL, pool_check, pool_teardown),
	/* Producer/consumer pairs of threads (at 2 threads and the largest
	 * count). */
	ROWF("pool-pc", "rseqkit", pc_setup_rsk, NULL, pc_fn_rsk, NULL, pc_check, pool_teardown,
	     IMPL_PAIRS | IMPL_COUNTS, NULL),
	ROWF("pool-pc", "malloc", pc_setup_malloc, NULL, pc_fn_malloc, NULL, pc_check, pool_teardown,
	     IMPL_PAIRS | IMPL_COUNTS, NULL),
	RIVAL_ROWS("pool-pc", pc_setup_malloc, pc_fn_malloc, pc_check, IMPL_PAIRS | IMPL_COUNTS),
};

/* The memory figures, when the pool op is selected. */
static int pool_after(const char *const *ops, int nops, unsigned ms)
{
	for (int o = 0; o < nops; o++)
		if (!strcmp(ops[o], "pool"))
			return pool_memory_run(4 * nallowed, ms < 100 ? 100 : ms) < 0;
	return 0;
}

/* rseqkit against glibc's malloc and each rival allocator. */
static void pool_summary(const struct row *rows, int nrows)
{
	static const char *const mallocs[] = {"malloc", "jemalloc", "mimalloc", "tcmalloc"};
	bool head = false;

	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (r->failed || strcmp(r->im->name, "rseqkit") ||
		    (strcmp(r->im->op, "pool") && strcmp(r->im->op, "pool-pc")))
			continue;
		bool pc = !strcmp(r->im->op, "pool-pc");
		for (size_t k = 0; k < sizeof(mallocs) / sizeof(mallocs[0]); k++) {
			const struct row *m = find_row(rows, nrows, r->im->op, mallocs[k], r->threads);
			char what[96];
			if (!m)
				continue;
			if (!head)
				printf("\npool: rseqkit / each malloc, ns per op (targets against glibc "
				       "malloc: alloc+free at 1 thread <= 1.50x, producer/consumer "
				       "< 1.00x):\n");
			head = true;
			double x = r->ns_per_op / m->ns_per_op;
			snprintf(what, sizeof(what), "%-8s %2d threads  / %-9s %9.3f / %9.3f ns",
				 r->im->op, r->threads, mallocs[k], r->ns_per_op, m->ns_per_op);
			if (k == 0 && (pc || r->threads == 1))
				print_target(what, x, pc ? "<" : "<=", pc ? 1.0 : 1.5);
			else
				printf("  %s = %.2fx\n", what, x);
		}
	}
	if (pmem.valid) {
		size_t obj = POOL_OBJ, bound = (size_t)pmem.cpus * POOL_CAP * obj;
		size_t per_thread = (size_t)pmem.threads * POOL_CAP * obj;
		char what[160];
		printf("\npool memory (%d threads on %d CPUs, each allocating %d objects of %zu "
		       "bytes and freeing them; cache capacity %d):\n",
		       pmem.threads, pmem.cpus, POOL_CAP, obj, POOL_CAP);
		printf("  rseqkit pool cached:  %zu objects = %zu bytes at the end, peak seen %zu "
		       "bytes, in %zu caches\n",
		       pmem.cached, pmem.cached * obj, pmem.peak_cached * obj, pmem.caches);
		snprintf(what, sizeof(what), "peak cached bytes / (CPUs x capacity x size = %d x %d x %zu = %zu)",
			 pmem.cpus, POOL_CAP, obj, bound);
		print_target(what, (double)(pmem.peak_cached * obj) / (double)bound, "<=", 1.0);
		printf("  per-thread cache design, same capacity: threads x capacity x size = %d x "
		       "%d x %zu = %zu bytes (%.2fx the pool's peak)\n",
		       pmem.threads, POOL_CAP, obj, per_thread,
		       pmem.peak_cached ? (double)per_thread / (double)(pmem.peak_cached * obj) : 0.0);
		printf("  mapped %zu bytes in %zu slabs, %zu after drain + trim; in use at the end: "
		       "%zu\n",
		       pmem.mapped, pmem.slabs, pmem.mapped_trimmed, pmem.in_use);
	}
}

static void pool_json(FILE *f, const struct row *rows, int nrows)
{
	size_t obj = POOL_OBJ;

	(void)rows;
	(void)nrows;
	if (!pmem.valid)
		return;
	fprintf(f, ",\n  \"pool_memory\": {\"description\": \"threads each allocate "
		   "cache_capacity objects and free them, over and over for run_ms; "
		   "rsk_pool_stats() sampled every 1 ms (peak) and after the threads are "
		   "done; per_thread_design_bytes = threads x cache_capacity x object_size "
		   "(computed)\", \"threads\": %d, \"cpus\": %d, \"object_size\": %zu, "
		   "\"cache_capacity\": %d, \"mode\": \"cpu\", \"alloc_free_pairs\": %ju, "
		   "\"caches\": %zu, \"cached_objects\": %zu, \"cached_bytes\": %zu, "
		   "\"cached_bytes_peak\": %zu, \"cached_max_one_cache\": %zu, "
		   "\"bound_bytes\": %zu, \"per_thread_design_bytes\": %zu, "
		   "\"depot_objects\": %zu, \"slabs\": %zu, \"bytes_mapped\": %zu, "
		   "\"bytes_mapped_after_drain_trim\": %zu, \"in_use\": %zu}",
		pmem.threads, pmem.cpus, obj, POOL_CAP, (uintmax_t)pmem.ops, pmem.caches,
		pmem.cached, pmem.cached * obj, pmem.peak_cached * obj, pmem.cached_max,
		(size_t)pmem.cpus * POOL_CAP * obj, (size_t)pmem.threads * POOL_CAP * obj,
		pmem.depot, pmem.slabs, pmem.mapped, pmem.mapped_trimmed, pmem.in_use);
}

const struct family fam_pool = {
	.name = "pool", .title = "an object pool against the allocators", FAMILY_IMPLS(pool_impls),
	.after = pool_after, .summary = pool_summary, .json = pool_json,
};
