/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/counter.c - the counter family: count events from every thread.
 *
 *   counter-add   add 1 to a counter shared by all threads: <rseqkit/ops.h>
 *                 used as its header shows (rseqkit), the library's counter
 *                 (rseqkit-counter, -ungated, -fallback), a thread-local
 *                 add (the limit), one shared atomic, sched_getcpu() and an
 *                 atomic per-CPU slot, a mutex, a pthread spinlock
 *                 (and rseqkit-mixed: every 2nd thread unregistered)
 *   pcounter-add  add 1 to a counter word of a per-CPU memory pool
 *                 (rsk_pcounter_add), beside the same alternatives
 *   counter-add4  add 1 to 4 independent counters in turn (ns per add):
 *                 a one-counter loop is bound by the store-to-load chain
 *                 of its one slot and hides the per-op cost; rseqkit in
 *                 both index modes beside the hand-written limit
 */
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "bench.h"
#include "../yardstick.h"

/* counter-add through the library's counter object: the loop the
 * rseqkit-counter, -ungated and -fallback rows share. */
BENCH_LOOP_DECL(rcounter_add);
void BENCH_LOOP(rcounter_add)(void *sh, struct thr *t, unsigned n)
{
	(void)t;
	for (unsigned i = 0; i < n; i++)
		rsk_counter_add(sh, 1);
}

#ifndef BENCH_UNGATED
void counter_init(struct counter_state *s)
{
	size_t sz = sizeof(struct pcpu_slot) * (size_t)ncpus_possible;

	if (!(s->slots = aligned_alloc(CACHE_LINE, sz))) {
		perror("rseqkit-bench: malloc");
		exit(1);
	}
	memset(s->slots, 0, sz);
	s->shared.v = 0;
	s->fallback.v = 0;
	pthread_mutex_init(&s->mutex, NULL);
	pthread_spin_init(&s->spin, PTHREAD_PROCESS_PRIVATE);
}

void counter_fini(struct counter_state *s)
{
	pthread_mutex_destroy(&s->mutex);
	pthread_spin_destroy(&s->spin);
	free(s->slots);
}

static void *counter_setup(int nthreads)
{
	struct counter_state *s = bench_alloc(sizeof(*s));

	(void)nthreads;
	counter_init(s);
	return s;
}

static void counter_teardown(void *sh)
{
	counter_fini(sh);
	free(sh);
}

/* The usage pattern of <rseqkit/ops.h>. */
static inline __attribute__((always_inline)) void
counter_inc_rseqkit(struct counter_state *s)
{
	for (;;) {
		int cpu = rsk_index(RSK_INDEX_CPU);
		if (__builtin_expect(cpu < 0, 0)) {
			__atomic_fetch_add(&s->fallback.v, 1, __ATOMIC_RELAXED);
			return;
		}
		if (__builtin_expect(rsk_add(RSK_INDEX_CPU, cpu, &s->slots[cpu].v, 1) == RSK_OK, 1))
			return;
	}
}

/* noinline: one self-contained loop to read in objdump -d. */
static __attribute__((noinline)) void counter_add_rseqkit(void *sh, struct thr *t, unsigned n)
{
	struct counter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++)
		counter_inc_rseqkit(s);
}

static __thread intptr_t tl_count;

static __attribute__((noinline)) void counter_add_tl(void *sh, struct thr *t, unsigned n)
{
	(void)sh;
	(void)t;
	for (unsigned i = 0; i < n; i++) {
		tl_count++;
		/* One add to memory per operation (the compiler may neither
		 * merge the increments nor keep the counter in a register),
		 * and nothing more: no fence, no volatile re-load. */
		__asm__ __volatile__("" ::: "memory");
	}
}

static void counter_tl_fini(void *sh, struct thr *t)
{
	(void)sh;
	t->acc = tl_count;
}

static void counter_add_atomic(void *sh, struct thr *t, unsigned n)
{
	struct counter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++)
		__atomic_fetch_add(&s->shared.v, 1, __ATOMIC_RELAXED);
}

static void counter_add_getcpu(void *sh, struct thr *t, unsigned n)
{
	struct counter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++) {
		int cpu = sched_getcpu();
		if (__builtin_expect((unsigned)cpu >= (unsigned)ncpus_possible, 0))
			cpu = 0;
		__atomic_fetch_add(&s->slots[cpu].v, 1, __ATOMIC_RELAXED);
	}
}

/* The shared counter under a lock of the counter state. */
#define LOCKED_ADD(name, lock, LOCK, UNLOCK)                                   \
	void name(void *sh, struct thr *t, unsigned n)                         \
	{                                                                      \
		struct counter_state *s = sh;                                  \
		(void)t;                                                       \
		for (unsigned i = 0; i < n; i++) {                             \
			LOCK(&s->lock);                                        \
			s->shared.v++;                                         \
			UNLOCK(&s->lock);                                      \
		}                                                              \
	}
LOCKED_ADD(counter_add_mutex, mutex, pthread_mutex_lock, pthread_mutex_unlock)
LOCKED_ADD(counter_add_spin, spin, pthread_spin_lock, pthread_spin_unlock)

int counter_expect(intptr_t got, struct thr *t, int n, char *err, size_t len)
{
	uint64_t want = ops_all(t, n);

	/* Modulo the word: a 32-bit counter may wrap in a long run. */
	if ((uintptr_t)got != (uintptr_t)want) {
		snprintf(err, len, "counter total %jd, operations done %ju (lost %jd)",
			 (intmax_t)got, (uintmax_t)want, (intmax_t)want - (intmax_t)got);
		return -1;
	}
	return 0;
}

int counter_check_slots(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct counter_state *s = sh;
	intptr_t sum = s->fallback.v;

	for (int c = 0; c < ncpus_possible; c++)
		sum += s->slots[c].v;
	return counter_expect(sum, t, n, err, len);
}

int counter_check_shared(void *sh, struct thr *t, int n, char *err, size_t len)
{
	return counter_expect(((struct counter_state *)sh)->shared.v, t, n, err, len);
}

int counter_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	intptr_t sum = 0;

	(void)sh;
	for (int i = 0; i < n; i++)
		sum += t[i].acc;
	return counter_expect(sum, t, n, err, len);
}
/* counter-add through the library's counter object. */
static void *rcounter_setup(int nthreads)
{
	struct rsk_counter *c;

	(void)nthreads;
	die_on(rsk_counter_create(&c, RSK_INDEX_CPU), "rsk_counter_create");
	return c;
}


static int rcounter_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	intptr_t sum = 0;

	rsk_counter_sum(sh, &sum);
	return counter_expect(sum, t, n, err, len);
}

static void rcounter_teardown(void *sh)
{
	rsk_counter_destroy(sh);
}
/* n operations spread over 4 independent counters, in turn. */
#define YS_BY4(n, OP)                                                          \
	do {                                                                   \
		unsigned i_ = 0;                                               \
		for (; i_ + 4 <= (n); i_ += 4) {                               \
			OP(0);                                                 \
			OP(1);                                                 \
			OP(2);                                                 \
			OP(3);                                                 \
		}                                                              \
		for (; i_ < (n); i_++)                                         \
			OP(0);                                                 \
	} while (0)

/* ---- counter-add4 ---- */

struct ys_c4 {
	char *parts; /* 4 counters x ncpus_possible parts of 128 bytes */
	size_t span; /* bytes of one counter's parts */
	struct rsk_counter *rc[4];
};

static void *ys_c4_setup(int nthreads)
{
	struct ys_c4 *s = bench_alloc(sizeof(*s));

	(void)nthreads;
	s->span = (size_t)ncpus_possible * CACHE_LINE;
	s->parts = bench_alloc(4 * s->span);
	ys_note_cid();
	return s;
}

static void ys_c4_teardown(void *sh)
{
	struct ys_c4 *s = sh;

	for (int k = 0; k < 4; k++)
		if (s->rc[k])
			rsk_counter_destroy(s->rc[k]);
	free(s->parts);
	free(s);
}

static void *ys_c4_setup_rsk_mode(int nthreads, enum rsk_index_mode mode)
{
	struct ys_c4 *s = ys_c4_setup(nthreads);

	for (int k = 0; k < 4; k++)
		die_on(rsk_counter_create(&s->rc[k], mode), "rsk_counter_create");
	return s;
}
MODE_SETUPS(ys_c4_setup_rsk, ys_c4_setup_rsk_mode)

static __attribute__((noinline)) void ys_c4_rsk(void *sh, struct thr *t, unsigned n)
{
	struct ys_c4 *s = sh;
	struct rsk_counter *c0 = s->rc[0], *c1 = s->rc[1], *c2 = s->rc[2], *c3 = s->rc[3];

	(void)t;
	(void)c1, (void)c2, (void)c3;
#define YS_RSK_ADD(k) rsk_counter_add(c##k, 1)
	YS_BY4(n, YS_RSK_ADD);
}

static int ys_c4_check_rsk(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_c4 *s = sh;
	uintptr_t total = 0;

	for (int k = 0; k < 4; k++) {
		intptr_t sum = 0;
		rsk_counter_sum(s->rc[k], &sum);
		total += (uintptr_t)sum;
	}
	return counter_expect((intptr_t)total, t, n, err, len);
}

#ifdef YS_HAVE_HAND
#define YS_C4_FN(MODE, OTHER) YS_C4_FN_(MODE, , OTHER)
#define YS_C4_FN_(MODE, G, OTHER)                                              \
	static __attribute__((noinline)) void ys_c4_hand##G##_##MODE(void *sh, struct thr *t, \
								 unsigned n)   \
	{                                                                      \
		struct ys_c4 *s = sh;                                          \
		ptrdiff_t off = ys_offset();                                   \
		char *p0 = s->parts, *p1 = p0 + s->span, *p2 = p1 + s->span,   \
		     *p3 = p2 + s->span;                                       \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER(ys_c4_hand##G);                                          \
		(void)p1, (void)p2, (void)p3;                                  \
		YS_BY4(n, YS_HAND_ADD##G##_##MODE);                            \
	}
#define YS_HAND_ADD_cpu(k) ys_add_cpu(off, p##k, 1)
#define YS_HAND_ADD_cid(k) ys_add_cid(off, p##k, 1)
#define YS_HAND_ADD_g_cpu(k) ys_add_g_cpu(off, p##k, 1)
#define YS_HAND_ADD_g_cid(k) ys_add_g_cid(off, p##k, 1)
YS_C4_FN(cpu, YS_NO_OTHER)
YS_C4_FN(cid, YS_CPU_IF_NO_CID)
YS_C4_FN_(cpu, _g, YS_NO_OTHER)
YS_C4_FN_(cid, _g, YS_CPU_IF_NO_CID)

static int ys_c4_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_c4 *s = sh;
	uintptr_t total = 0;

	if (ys_aux_check(t, n, err, len))
		return -1;
	/* The word at +0 (sections) and at +8 (the guaranteed twin's
	 * fallback; 0 for the others). */
	for (size_t o = 0; o < 4 * s->span; o += CACHE_LINE)
		total += *(uintptr_t *)(void *)(s->parts + o) +
			 *(uintptr_t *)(void *)(s->parts + o + 8);
	return counter_expect((intptr_t)total, t, n, err, len);
}
#endif

#ifdef YS_HAVE_HAND
/*
 * The guarantee ladder: the hand-written add (cpu mode) with what the
 * library's add checks for its guarantees, to show what each costs.
 * "hand+gate" stops a thread that is not registered by testing the part's
 * gate word in the section instead of the sign of its index (what a gated
 * section pays: the counter's has no gate); "hand+guards" is the add
 * with the sign test, as the library's, and the three tests rseqkit's
 * inline add makes before its section: a NULL structure (-EINVAL), an
 * area offset of 0 (no rseq in the process: the fallback) and the index
 * field read from the structure (the index mode, fixed at creation but
 * not at compile time).  The three "hand+guards-X" rows leave one of
 * them out.  No row is a usable add: a
 * stop or a failed test only counts the add atomically into part 0.
 */
#define LAD_NULL 1
#define LAD_AREA 2
#define LAD_MODE 4
#define LAD_ALL (LAD_NULL | LAD_AREA | LAD_MODE)
#define LAD_GATE 8 /* alone: the gate word instead of the sign test */

struct ys_lad {
	struct ys_c4 c4;	/* parts, span (rc unused) */
	char *h[4];		/* each counter's parts: the "structure" */
	uint32_t field[4];	/* each counter's index field: cpu_id */
};

static ptrdiff_t lad_area; /* the area offset, read once per loop as rsk_fast */

static void *ys_lad_setup(int nthreads)
{
	struct ys_lad *s = bench_alloc(sizeof(*s));
	struct ys_c4 *c4 = ys_c4_setup(nthreads);

	s->c4 = *c4;
	free(c4);
	for (int k = 0; k < 4; k++) {
		s->h[k] = s->c4.parts + (size_t)k * s->c4.span;
		s->field[k] = 4; /* offsetof(struct rseq, cpu_id) */
	}
	lad_area = ys_offset();
	return s;
}

static __attribute__((noinline)) void lad_slow(struct ys_lad *s)
{
	__atomic_fetch_add((intptr_t *)(void *)s->c4.parts, 1, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) void lad_add(struct ys_lad *s, int k, char *h,
							 ptrdiff_t off, int guards)
{
	if ((guards & LAD_NULL) && __builtin_expect(h == NULL, 0))
		goto slow;
	if ((guards & LAD_AREA) && __builtin_expect(off == 0, 0))
		goto slow;
	/* With LAD_MODE the field is loaded from the structure at every
	 * add, as the library's (the asm's memory clobber forces it). */
	if (__builtin_expect(guards == LAD_GATE		? ys_add_gated_cpu(off, h, 1)
			     : (guards & LAD_MODE) ? ys_add_signed_at(off, s->field[k], h, 1)
						   : ys_add_signed_cpu(off, h, 1),
			     0))
		goto slow;
	return;
slow:
	lad_slow(s);
}

/* A ladder row's loop: lad_add() with the guards given, 4 counters in turn. */
#define LAD_FN(name, guards)                                                   \
	static __attribute__((noinline)) void name(void *sh, struct thr *t, unsigned n) \
	{                                                                      \
		struct ys_lad *s = sh;                                         \
		const int guards_ = (guards);                                  \
		ptrdiff_t off = (guards_ & LAD_AREA) ? *(volatile ptrdiff_t *)&lad_area \
						     : ys_offset();            \
		char *h0 = s->h[0], *h1 = s->h[1], *h2 = s->h[2], *h3 = s->h[3]; \
		if (t->aux < 0)                                                \
			return;                                                \
		(void)h1, (void)h2, (void)h3;                                  \
		YS_BY4(n, LAD_OP);                                             \
	}
#define LAD_OP(k) lad_add(s, k, h##k, off, guards_)
LAD_FN(ys_lad_gate, LAD_GATE)
LAD_FN(ys_lad_all, LAD_ALL)
LAD_FN(ys_lad_no_null, LAD_ALL & ~LAD_NULL)
LAD_FN(ys_lad_no_area, LAD_ALL & ~LAD_AREA)
LAD_FN(ys_lad_no_mode, LAD_ALL & ~LAD_MODE)

static int ys_lad_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	return ys_c4_check_hand(&((struct ys_lad *)sh)->c4, t, n, err, len);
}

static void ys_lad_teardown(void *sh)
{
	struct ys_lad *s = sh;

	free(s->c4.parts);
	free(s);
}

#endif /* YS_HAVE_HAND */

static __thread intptr_t ys_tl_c4[4];

static __attribute__((noinline)) void ys_c4_tl(void *sh, struct thr *t, unsigned n)
{
	(void)sh;
	(void)t;
	/* One add to memory per operation, as counter-add's thread-local row. */
#define YS_TL_ADD(k)                                                           \
	do {                                                                   \
		ys_tl_c4[k]++;                                                 \
		__asm__ __volatile__("" ::: "memory");                         \
	} while (0)
	YS_BY4(n, YS_TL_ADD);
}

static void ys_c4_tl_fini(void *sh, struct thr *t)
{
	(void)sh;
	t->acc = ys_tl_c4[0] + ys_tl_c4[1] + ys_tl_c4[2] + ys_tl_c4[3];
}

/* ---- pcounter-add: a counter word in a per-CPU memory pool ---- */

struct pcounter_state {
	struct rsk_mempool *pool;
	intptr_t *ctr;
};

static void *pcounter_setup(int nthreads)
{
	struct rsk_mempool_config cfg = {.size = sizeof(intptr_t)};
	struct pcounter_state *s = bench_alloc(sizeof(*s));

	(void)nthreads;
	die_on(rsk_mempool_create(&s->pool, &cfg), "rsk_mempool_create");
	if (!(s->ctr = rsk_mempool_zalloc(s->pool)))
		die_on(-errno, "rsk_mempool_zalloc");
	return s;
}

static void pcounter_add(void *sh, struct thr *t, unsigned n)
{
	struct pcounter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++)
		rsk_pcounter_add(s->pool, s->ctr, 1);
}

static int pcounter_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct pcounter_state *s = sh;
	intptr_t sum = 0;

	rsk_pcounter_sum(s->pool, s->ctr, &sum);
	return counter_expect(sum, t, n, err, len);
}

static void pcounter_teardown(void *sh)
{
	struct pcounter_state *s = sh;

	rsk_mempool_destroy(s->pool);
	free(s);
}

/* The mixed case: every 2nd thread without an rseq registration (its
 * area unregistered, whoever registered it), beside threads that run
 * sections on the same counter.  Where rseq is missing it is the
 * fallback row again. */
static void mixed_thread_init(void *sh, struct thr *t)
{
	struct rsk_abi_area *area = rsk_area();
	struct rsk_status st;
	sigset_t all, old;

	(void)sh;
	if (t->id % 2 == 0 || area == NULL || rsk_area_cpu_id(area) < 0)
		return;
	rsk_status(&st);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, RSK_ABI_FLAG_UNREGISTER,
		    RSK_ARCH_SIGNATURE) == 0)
		__atomic_store_n(&area->mm_cid, UINT32_MAX, __ATOMIC_RELAXED);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static const struct impl counter_impls[] = {
#define COUNTER(name, fn, check) \
	ROW("counter-add", name, counter_setup, NULL, fn, NULL, check, counter_teardown)
	COUNTER("rseqkit", counter_add_rseqkit, counter_check_slots),
	RSK_ROWS("counter-add", "rseqkit-counter", rcounter_setup, rcounter_add, rcounter_check,
		 rcounter_teardown),
	ROW("counter-add", "thread-local", counter_setup, NULL, counter_add_tl, counter_tl_fini,
	    counter_check_tl, counter_teardown),
	COUNTER("atomic-shared", counter_add_atomic, counter_check_shared),
	COUNTER("atomic-getcpu", counter_add_getcpu, counter_check_slots),
	COUNTER("mutex", counter_add_mutex, counter_check_shared),
	COUNTER("spinlock", counter_add_spin, counter_check_shared),
	ROW("counter-add", "rseqkit-mixed", rcounter_setup, mixed_thread_init, rcounter_add, NULL,
	    rcounter_check, rcounter_teardown),

	ROW("pcounter-add", "rseqkit", pcounter_setup, NULL, pcounter_add, NULL, pcounter_check,
	    pcounter_teardown),
	ROWH("pcounter-add", "rseqkit-fallback", pcounter_setup, pcounter_add, pcounter_check,
	     pcounter_teardown, 0, &helper_fallback),
	ROW("pcounter-add", "rseqkit-mixed", pcounter_setup, mixed_thread_init, pcounter_add, NULL,
	    pcounter_check, pcounter_teardown),
	ROW("pcounter-add", "atomic-getcpu", counter_setup, NULL, counter_add_getcpu, NULL,
	    counter_check_slots, counter_teardown),
	ROW("pcounter-add", "mutex", counter_setup, NULL, counter_add_mutex, NULL,
	    counter_check_shared, counter_teardown),

	ROW("counter-add4", "rseqkit", ys_c4_setup_rsk, NULL, ys_c4_rsk, NULL, ys_c4_check_rsk,
	    ys_c4_teardown),
	YS_ROWS("counter-add4", ys_c4_setup_rsk_cid, ys_c4_rsk, ys_c4_check_rsk, ys_c4_teardown,
		ys_c4, ys_c4_check_hand, ys_c4_teardown, ys_c4_tl_fini, counter_check_tl),
#ifdef YS_HAVE_HAND
#define LAD_ROW(name, fn)                                                      \
	ROWF("counter-add4", name, ys_lad_setup, ys_thread_init, fn, NULL, ys_lad_check, \
	     ys_lad_teardown, IMPL_HAND | IMPL_ONE_THREAD, NULL)
	LAD_ROW("hand+gate", ys_lad_gate),
	LAD_ROW("hand+guards", ys_lad_all),
	LAD_ROW("hand+guards-null", ys_lad_no_null),
	LAD_ROW("hand+guards-area", ys_lad_no_area),
	LAD_ROW("hand+guards-mode", ys_lad_no_mode),
#endif
};

const struct family fam_counter = {
	.name = "counter", .title = "add to a counter", FAMILY_IMPLS(counter_impls),
};
#endif /* !BENCH_UNGATED */
