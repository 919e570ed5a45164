/* SPDX-License-Identifier: MIT */
/*
 * insn-loops - one loop per fast path, for the instruction-count report
 * (`make insn-count`, tools/insn-count.py), built as a user would build
 * it: the installed-style headers, -Iinclude -O2, nothing else.
 *
 * Each loop_* function is one loop round a fast path, noinline so that it
 * stands alone in `objdump -d`.  The lines starting with "//@insn" tell
 * insn-count.py what each loop is:
 *   path=   the fast path (its row in the report)
 *   impl=   rseqkit, or hand-written (tools/yardstick.h)
 *   mode=   cpu, cid, or - (the structure's own mode)
 *   ops=    operations per round (the report divides by it)
 *   fn=     the function
 * Run as a program it runs every loop a little and checks what it did
 * (exit 1 on a wrong result), so the loops counted are loops that work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rseqkit/rseqkit.h>
#include <rseqkit/counter.h>
#include <rseqkit/spinlock.h>
#include <rseqkit/stack.h>
#include <rseqkit/ptrbuf.h>
#include <rseqkit/copybuf.h>
#include <rseqkit/mempool.h>
#include "yardstick.h"

#define LOOP __attribute__((noinline, used))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- rseqkit ---------------------------------------------------- */

//@insn path=counter-add impl=rseqkit mode=- ops=4 fn=loop_rsk_counter_add4
LOOP void loop_rsk_counter_add4(struct rsk_counter **c, unsigned n)
{
	struct rsk_counter *c0 = c[0], *c1 = c[1], *c2 = c[2], *c3 = c[3];

	for (unsigned i = 0; i < n; i++) {
		rsk_counter_add(c0, 1);
		rsk_counter_add(c1, 1);
		rsk_counter_add(c2, 1);
		rsk_counter_add(c3, 1);
	}
}

//@insn path=spinlock impl=rseqkit mode=- ops=1 fn=loop_rsk_spinlock
LOOP int loop_rsk_spinlock(struct rsk_spinlock *l, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int idx = rsk_spinlock_lock(l);
		if (UNLIKELY(idx < 0))
			return idx;
		rsk_spinlock_unlock(l, idx);
	}
	return 0;
}

//@insn path=stack impl=rseqkit mode=- ops=1 fn=loop_rsk_stack
LOOP int loop_rsk_stack(struct rsk_stack *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rsk_stack_node *nd;
		int r = rsk_stack_pop(s, &nd);
		if (UNLIKELY(r < 0))
			return r;
		rsk_stack_push(s, nd);
	}
	return 0;
}

//@insn path=ptrbuf impl=rseqkit mode=- ops=1 fn=loop_rsk_ptrbuf
LOOP int loop_rsk_ptrbuf(struct rsk_ptrbuf *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		void *p;
		int r = rsk_ptrbuf_pop(b, &p);
		if (UNLIKELY(r < 0))
			return r;
		rsk_ptrbuf_push(b, p);
	}
	return 0;
}

/* Pop an item and push it back: W words, the item on the stack.  The
 * walk follows the layout, which is the first size's (16 bytes) in
 * <rseqkit/copybuf.h>: the 64-byte loop tells the compiler its size, so
 * that the walk takes the 64-byte section.  Its count is then short of the
 * tests of the size that the compiler folds away (rsk_copybuf_direct_()'s
 * and the 16-byte compare: four instructions an operation at run time). */
#define COPY_SIZE(b, W)                                                        \
	do {                                                                   \
		if ((W) != 2 && (b)->item_size != (W) * sizeof(intptr_t))      \
			__builtin_unreachable();                               \
	} while (0)
#define RSK_COPY_LOOP(W)                                                       \
	LOOP int loop_rsk_copybuf##W(struct rsk_copybuf *b, unsigned n)        \
	{                                                                      \
		intptr_t v[W];                                                 \
		for (unsigned i = 0; i < n; i++) {                             \
			COPY_SIZE(b, W);                                       \
			int r = rsk_copybuf_pop(b, v);                         \
			if (UNLIKELY(r < 0))                                   \
				return r;                                      \
			COPY_SIZE(b, W);                                       \
			rsk_copybuf_push(b, v);                                \
		}                                                              \
		return 0;                                                      \
	}
//@insn path=copybuf16 impl=rseqkit mode=- ops=1 fn=loop_rsk_copybuf2
RSK_COPY_LOOP(2)
//@insn path=copybuf64 impl=rseqkit mode=- ops=1 fn=loop_rsk_copybuf8
RSK_COPY_LOOP(8)

//@insn path=pcounter-add impl=rseqkit mode=- ops=4 fn=loop_rsk_pcounter_add4
LOOP void loop_rsk_pcounter_add4(struct rsk_mempool *p, intptr_t **c, unsigned n)
{
	intptr_t *c0 = c[0], *c1 = c[1], *c2 = c[2], *c3 = c[3];

	for (unsigned i = 0; i < n; i++) {
		rsk_pcounter_add(p, c0, 1);
		rsk_pcounter_add(p, c1, 1);
		rsk_pcounter_add(p, c2, 1);
		rsk_pcounter_add(p, c3, 1);
	}
}

//@insn path=cpu-read impl=rseqkit mode=cpu ops=1 fn=loop_rsk_cpu
LOOP int loop_rsk_cpu(unsigned n)
{
	int acc = 0;

	for (unsigned i = 0; i < n; i++)
		acc += rsk_cpu();
	return acc;
}

//@insn path=mm-cid-read impl=rseqkit mode=cid ops=1 fn=loop_rsk_mm_cid
LOOP int loop_rsk_mm_cid(unsigned n)
{
	int acc = 0;

	for (unsigned i = 0; i < n; i++)
		acc += rsk_mm_cid();
	return acc;
}

/* ---- hand-written twins ----------------------------------------- */

#ifdef YS_HAVE_HAND
/* G: empty (the limit) or _g (the twin with the library's guarantees),
 * H: the loops' prefix. */
#define HAND_LOOPS(MODE) HAND_LOOPS_(MODE, , hw)
#define HAND_LOOPS_(MODE, G, H)                                                \
	LOOP void loop_##H##_counter_add4_##MODE(char *p, size_t span, unsigned n) \
	{                                                                      \
		ptrdiff_t off = ys_offset();                                   \
		for (unsigned i = 0; i < n; i++) {                             \
			ys_add##G##_##MODE(off, p, 1);                              \
			ys_add##G##_##MODE(off, p + span, 1);                       \
			ys_add##G##_##MODE(off, p + 2 * span, 1);                   \
			ys_add##G##_##MODE(off, p + 3 * span, 1);                   \
		}                                                              \
	}                                                                      \
	LOOP void loop_##H##_spinlock_##MODE(char *locks, unsigned n)             \
	{                                                                      \
		ptrdiff_t off = ys_offset();                                   \
		for (unsigned i = 0; i < n; i++)                               \
			ys_unlock(locks, ys_lock##G##_##MODE(off, locks));          \
	}                                                                      \
	LOOP int loop_##H##_stack_##MODE(char *parts, unsigned n)                 \
	{                                                                      \
		ptrdiff_t off = ys_offset();                                   \
		for (unsigned i = 0; i < n; i++) {                             \
			struct ys_node *nd = ys_pop##G##_##MODE(off, parts);        \
			if (UNLIKELY(nd == NULL))                              \
				return -1;                                     \
			ys_push##G##_##MODE(off, parts, nd);                        \
		}                                                              \
		return 0;                                                      \
	}                                                                      \
	LOOP int loop_##H##_ptrbuf_##MODE(char *parts, unsigned n)                \
	{                                                                      \
		ptrdiff_t off = ys_offset();                                   \
		for (unsigned i = 0; i < n; i++) {                             \
			void *p;                                               \
			if (UNLIKELY(ys_ppop##G##_##MODE(off, parts, &p) < 0))      \
				return -1;                                     \
			ys_ppush##G##_##MODE(off, parts, p);                        \
		}                                                              \
		return 0;                                                      \
	}                                                                      \
	HAND_COPY_LOOP(MODE, G, H, 2)                                          \
	HAND_COPY_LOOP(MODE, G, H, 8)
#define HAND_COPY_LOOP(MODE, G, H, W)                                          \
	LOOP int loop_##H##_copybuf##W##_##MODE(char *parts, unsigned n)       \
	{                                                                      \
		ptrdiff_t off = ys_offset();                                   \
		intptr_t v[W];                                                 \
		for (unsigned i = 0; i < n; i++) {                             \
			if (UNLIKELY(ys_cpop##W##G##_##MODE(off, parts, v) < 0)) \
				return -1;                                     \
			ys_cpush##W##G##_##MODE(off, parts, v);                \
		}                                                              \
		return 0;                                                      \
	}
//@insn path=counter-add impl=hand-written mode=cpu ops=4 fn=loop_hw_counter_add4_cpu
//@insn path=spinlock impl=hand-written mode=cpu ops=1 fn=loop_hw_spinlock_cpu
//@insn path=stack impl=hand-written mode=cpu ops=1 fn=loop_hw_stack_cpu
//@insn path=ptrbuf impl=hand-written mode=cpu ops=1 fn=loop_hw_ptrbuf_cpu
//@insn path=copybuf16 impl=hand-written mode=cpu ops=1 fn=loop_hw_copybuf2_cpu
//@insn path=copybuf64 impl=hand-written mode=cpu ops=1 fn=loop_hw_copybuf8_cpu
HAND_LOOPS(cpu)
//@insn path=counter-add impl=hand-written mode=cid ops=4 fn=loop_hw_counter_add4_cid
//@insn path=spinlock impl=hand-written mode=cid ops=1 fn=loop_hw_spinlock_cid
//@insn path=stack impl=hand-written mode=cid ops=1 fn=loop_hw_stack_cid
//@insn path=ptrbuf impl=hand-written mode=cid ops=1 fn=loop_hw_ptrbuf_cid
//@insn path=copybuf16 impl=hand-written mode=cid ops=1 fn=loop_hw_copybuf2_cid
//@insn path=copybuf64 impl=hand-written mode=cid ops=1 fn=loop_hw_copybuf8_cid
HAND_LOOPS(cid)
//@insn path=counter-add impl=hand-guaranteed mode=cpu ops=4 fn=loop_hg_counter_add4_cpu
//@insn path=spinlock impl=hand-guaranteed mode=cpu ops=1 fn=loop_hg_spinlock_cpu
//@insn path=stack impl=hand-guaranteed mode=cpu ops=1 fn=loop_hg_stack_cpu
//@insn path=ptrbuf impl=hand-guaranteed mode=cpu ops=1 fn=loop_hg_ptrbuf_cpu
//@insn path=copybuf16 impl=hand-guaranteed mode=cpu ops=1 fn=loop_hg_copybuf2_cpu
//@insn path=copybuf64 impl=hand-guaranteed mode=cpu ops=1 fn=loop_hg_copybuf8_cpu
HAND_LOOPS_(cpu, _g, hg)
//@insn path=counter-add impl=hand-guaranteed mode=cid ops=4 fn=loop_hg_counter_add4_cid
//@insn path=spinlock impl=hand-guaranteed mode=cid ops=1 fn=loop_hg_spinlock_cid
//@insn path=stack impl=hand-guaranteed mode=cid ops=1 fn=loop_hg_stack_cid
//@insn path=ptrbuf impl=hand-guaranteed mode=cid ops=1 fn=loop_hg_ptrbuf_cid
//@insn path=copybuf16 impl=hand-guaranteed mode=cid ops=1 fn=loop_hg_copybuf2_cid
//@insn path=copybuf64 impl=hand-guaranteed mode=cid ops=1 fn=loop_hg_copybuf8_cid
HAND_LOOPS_(cid, _g, hg)

//@insn path=cpu-read impl=hand-written mode=cpu ops=1 fn=loop_hw_cpu
LOOP int loop_hw_cpu(unsigned n)
{
	ptrdiff_t off = ys_offset();
	int acc = 0;

	for (unsigned i = 0; i < n; i++)
		acc += ys_read_cpu(off);
	return acc;
}

//@insn path=mm-cid-read impl=hand-written mode=cid ops=1 fn=loop_hw_mm_cid
LOOP int loop_hw_mm_cid(unsigned n)
{
	ptrdiff_t off = ys_offset();
	int acc = 0;

	for (unsigned i = 0; i < n; i++)
		acc += ys_read_cid(off);
	return acc;
}
#endif

/* ---- run each loop once, check what it did ---------------------- */

static int fails;

static void expect(const char *what, long got, long want)
{
	if (got != want) {
		fprintf(stderr, "insn-loops: %s: got %ld, expected %ld\n", what, got, want);
		fails++;
	}
}

int main(void)
{
	enum { N = 1000 };
	struct rsk_counter *c[4];
	struct rsk_spinlock *l;
	struct rsk_stack *s;
	struct rsk_ptrbuf *b;
	struct rsk_stack_node node;
	intptr_t sum, total = 0;
	int ncpu = rsk_possible_cpus(), cpu;

	for (int k = 0; k < 4; k++)
		if (rsk_counter_create(&c[k], RSK_INDEX_CPU))
			return 1;
	if (rsk_spinlock_create(&l, RSK_INDEX_CPU) || rsk_stack_create(&s, RSK_INDEX_CPU) ||
	    rsk_ptrbuf_create(&b, RSK_INDEX_CPU, 4, 0))
		return 1;
	loop_rsk_counter_add4(c, N);
	for (int k = 0; k < 4; k++) {
		rsk_counter_sum(c[k], &sum);
		total += sum;
	}
	expect("rsk counter adds", (long)total, 4 * N);
	struct rsk_mempool_config pc = {.size = sizeof(intptr_t), .mode = RSK_INDEX_CPU};
	struct rsk_mempool *pool;
	intptr_t *pctr[4];
	if (rsk_mempool_create(&pool, &pc))
		return 1;
	for (int k = 0; k < 4; k++)
		if (!(pctr[k] = rsk_mempool_zalloc(pool)))
			return 1;
	loop_rsk_pcounter_add4(pool, pctr, N);
	total = 0;
	for (int k = 0; k < 4; k++) {
		rsk_pcounter_sum(pool, pctr[k], &sum);
		total += sum;
	}
	expect("rsk pcounter adds", (long)total, 4 * N);
	rsk_mempool_destroy(pool);
	expect("rsk spinlock", loop_rsk_spinlock(l, N), 0);
	/* The pops and pushes stay on one CPU's part only while the thread
	 * does not migrate: retry a few times before calling it wrong. */
	int r = -1;
	for (int tries = 0; tries < 100 && r; tries++) {
		rsk_stack_push(s, &node);
		r = loop_rsk_stack(s, N);
		struct rsk_stack_node *all;
		for (int k = 0; k < ncpu; k++)
			rsk_stack_pop_all_cpu(s, k, &all);
	}
	expect("rsk stack pop+push", r, 0);
	r = -1;
	for (int tries = 0; tries < 100 && r; tries++) {
		rsk_ptrbuf_push(b, &node);
		r = loop_rsk_ptrbuf(b, N);
		void *p;
		for (int k = 0; k < ncpu; k++)
			while (rsk_ptrbuf_pop_cpu(b, k, &p) == 0)
				;
	}
	expect("rsk ptrbuf pop+push", r, 0);
	/* Each copy buffer holds one item, popped and pushed back N times. */
#define RSK_COPY_RUN(W)                                                        \
	do {                                                                   \
		struct rsk_copybuf *cb;                                        \
		intptr_t item[W], got[W];                                      \
		for (int k = 0; k < W; k++)                                    \
			item[k] = 1000 + k;                                    \
		if (rsk_copybuf_create(&cb, RSK_INDEX_CPU, W * sizeof(intptr_t), 4, 0)) \
			return 1;                                              \
		r = -1;                                                        \
		for (int tries = 0; tries < 100 && r; tries++) {               \
			rsk_copybuf_push(cb, item);                            \
			r = loop_rsk_copybuf##W(cb, N);                        \
			total = 0;                                             \
			for (int k = 0; k < ncpu; k++)                         \
				while (rsk_copybuf_pop_cpu(cb, k, got) == 0)   \
					total += !memcmp(got, item, sizeof(item)); \
		}                                                              \
		expect("rsk copybuf" #W " pop+push", r, 0);                    \
		expect("rsk copybuf" #W ": the item intact", (long)total, 1);  \
		rsk_copybuf_destroy(cb);                                       \
	} while (0)
	RSK_COPY_RUN(2);
	RSK_COPY_RUN(8);
	cpu = loop_rsk_cpu(1);
	if (cpu < 0 || cpu >= ncpu)
		expect("rsk_cpu in range", cpu, 0);
	if (loop_rsk_mm_cid(1) < 0)
		expect("rsk_mm_cid in range", loop_rsk_mm_cid(1), 0);

#ifdef YS_HAVE_HAND
	if (!ys_thread_ok()) {
		fprintf(stderr, "insn-loops: glibc has not registered rseq: hand-written loops not run\n");
	} else {
		size_t span = (size_t)ncpu << 7;
		char *cp = aligned_alloc(128, 4 * span), *lk = aligned_alloc(128, span);
		char *st = aligned_alloc(128, span);
		char *pb = aligned_alloc(128, (size_t)ncpu << YS_PTR_SHIFT);
		struct ys_node yn = {NULL, 7};
		size_t cbsz = (size_t)ncpu << YS_C64_SHIFT;
		char *cb = aligned_alloc(128, cbsz);
		if (!cp || !lk || !st || !pb || !cb)
			return 1;
/* The counter sums the word at +8 too: the guaranteed twin's fallback. */
#define HAND_RUN(MODE) HAND_RUN_(MODE, , hw, "hand-written ")
#define HAND_RUN_(MODE, G, H, WHAT)                                                    \
	do {                                                                           \
		memset(cp, 0, 4 * span);                                               \
		memset(lk, 0, span);                                                   \
		loop_##H##_counter_add4_##MODE(cp, span, N);                              \
		total = 0;                                                             \
		for (int k = 0; k < 4 * ncpu; k++)                                     \
			total += *(intptr_t *)(void *)(cp + ((size_t)k << 7)) +        \
				 *(intptr_t *)(void *)(cp + ((size_t)k << 7) + 8);      \
		expect(WHAT "counter adds " #MODE, (long)total, 4 * N);        \
		loop_##H##_spinlock_##MODE(lk, N);                                        \
		for (int k = 0; k < ncpu; k++)                                         \
			expect(WHAT "lock free " #MODE,                        \
			       (long)*(intptr_t *)(void *)(lk + ((size_t)k << 7)), 0); \
		r = -1;                                                                \
		for (int tries = 0; tries < 100 && r; tries++) {                       \
			memset(st, 0, span);                                           \
			ys_push##G##_##MODE(ys_offset(), st, &yn);                          \
			r = loop_##H##_stack_##MODE(st, N);                               \
		}                                                                      \
		expect(WHAT "stack pop+push " #MODE, r, 0);                    \
		total = 0;                                                             \
		for (int k = 0; k < ncpu; k++)                                         \
			total += *(struct ys_node **)(void *)(st + ((size_t)k << 7)) == &yn; \
		expect(WHAT "stack: the node on one part " #MODE, (long)total, 1); \
		r = -1;                                                                \
		for (int tries = 0; tries < 100 && r; tries++) {                       \
			memset(pb, 0, (size_t)ncpu << YS_PTR_SHIFT);                   \
			ys_ppush##G##_##MODE(ys_offset(), pb, &yn);                         \
			r = loop_##H##_ptrbuf_##MODE(pb, N);                              \
		}                                                                      \
		expect(WHAT "ptrbuf pop+push " #MODE, r, 0);                   \
		total = 0;                                                             \
		for (int k = 0; k < ncpu; k++) {                                       \
			intptr_t *pp = (intptr_t *)(void *)(pb + ((size_t)k << YS_PTR_SHIFT)); \
			total += pp[0] == 1 && pp[2] == (intptr_t)&yn;                 \
		}                                                                      \
		expect(WHAT "ptrbuf: the pointer in one part " #MODE, (long)total, 1); \
		HAND_COPY_RUN(MODE, G, H, WHAT, 2, YS_C16_SHIFT);                      \
		HAND_COPY_RUN(MODE, G, H, WHAT, 8, YS_C64_SHIFT);                      \
	} while (0)
/* One item of W words (1000, 1001, ...) popped and pushed back N times:
 * then one part holds it, whole. */
#define HAND_COPY_RUN(MODE, G, H, WHAT, W, SHIFT)                                      \
	do {                                                                           \
		intptr_t it_[W];                                                       \
		for (int k = 0; k < W; k++)                                            \
			it_[k] = 1000 + k;                                             \
		r = -1;                                                                \
		for (int tries = 0; tries < 100 && r; tries++) {                       \
			memset(cb, 0, cbsz);                                           \
			ys_cpush##W##G##_##MODE(ys_offset(), cb, it_);                 \
			r = loop_##H##_copybuf##W##_##MODE(cb, N);                     \
		}                                                                      \
		expect(WHAT "copybuf" #W " pop+push " #MODE, r, 0);                    \
		total = 0;                                                             \
		for (int k = 0; k < ncpu; k++) {                                       \
			intptr_t *pp = (intptr_t *)(void *)(cb + ((size_t)k << SHIFT)); \
			total += pp[0] == 1 && !memcmp(pp + 2, it_, sizeof(it_));      \
		}                                                                      \
		expect(WHAT "copybuf" #W ": the item in one part " #MODE, (long)total, 1); \
	} while (0)
		HAND_RUN(cpu);
		HAND_RUN_(cpu, _g, hg, "hand-guaranteed ");
		if (ys_cid_available()) {
			HAND_RUN(cid);
			HAND_RUN_(cid, _g, hg, "hand-guaranteed ");
		}
		cpu = loop_hw_cpu(1);
		if (cpu < 0 || cpu >= ncpu)
			expect("hand-written cpu read in range", cpu, 0);
		free(cp);
		free(lk);
		free(st);
		free(pb);
		free(cb);
	}
#endif
	if (fails)
		return 1;
	printf("insn-loops: every loop ran and did what it says\n");
	return 0;
}
