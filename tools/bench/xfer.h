/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/xfer.h - what the transfer families (stack, buffers) share.
 *
 * Every thread starts with HAND items, each with a unique id; one
 * operation pushes an item from its hand (if any) and pops one into it (if
 * the structure gives one: the per-CPU parts answer for the current CPU
 * only, so after a migration a pop may find the part empty and a thread
 * may pop another thread's item).  The check: every id is found exactly
 * once in the hands plus what is left in the structure, and no copied
 * item came back torn.
 */
#ifndef RSEQKIT_BENCH_XFER_H
#define RSEQKIT_BENCH_XFER_H

#include "bench.h"

#define HAND 4
#define MAX_WORDS 8 /* 64-byte items */

struct hand {
	intptr_t id[HAND];
	int n;
} __attribute__((aligned(CACHE_LINE)));

struct snode { /* a stack node: the library stack's link, and the id */
	struct rsk_stack_node rn;
	intptr_t id;
};

struct xfer_state {
	int nids;
	size_t words; /* copy rows: words per item; else 1 */
	struct hand *hands;
	struct snode *nodes;
	unsigned char *seen;
	int torn;
	/* mutex rival: a LIFO array of values under a lock */
	pthread_mutex_t mu __attribute__((aligned(CACHE_LINE)));
	intptr_t *mbuf;
	int mcount;
	/* the library's structure the row uses, if any */
	struct rsk_stack *rs;
	struct rsk_ptrbuf *rp;
	struct rsk_copybuf *rc;
};

struct xfer_state *xfer_setup(int nthreads, size_t words);
void *xfer_setup1(int nthreads);
void *xfer_setup2(int nthreads);
void *xfer_setup8(int nthreads);
void xfer_teardown(void *sh);
/* Mark an id found; 0 if it is valid and was not found before. */
int xfer_seen(struct xfer_state *s, intptr_t id);
/* The hands, then every id found once and nothing torn. */
int xfer_finish(struct xfer_state *s, struct thr *t, int n, int dup, char *err, size_t len);

/* One push+pop against the hand; PUSH(id) and POP(&id) yield 0 on
 * success.  The items of copy rows are `words` copies of their id. */
#define XFER_LOOP(s, t, n, PUSH, POP)                                          \
	do {                                                                   \
		struct hand *h_ = &(s)->hands[(t)->id];                        \
		for (unsigned i_ = 0; i_ < (n); i_++) {                        \
			intptr_t id_ = 0;                                        \
			if (h_->n > 0) {                                       \
				id_ = h_->id[h_->n - 1];                       \
				if (PUSH(id_) == 0)                            \
					h_->n--;                               \
			}                                                      \
			if (POP(&id_) == 0)                                    \
				h_->id[h_->n++] = id_;                         \
		}                                                              \
	} while (0)

/* Fill an item with its id, check one that came back. */
#define ITEM_FILL(v, words, id)                                                \
	for (size_t w_ = 0; w_ < (words); w_++)                                \
	(v)[w_] = (id)
#define ITEM_TORN(v, words)                                                    \
	({                                                                     \
		int t_ = 0;                                                    \
		for (size_t w_ = 1; w_ < (words); w_++)                        \
			t_ |= (v)[w_] != (v)[0];                               \
		t_;                                                            \
	})
/* XFER_LOOP over W-word items: PUSH and POP have the item buffer v_ and
 * or a torn copy into torn_; torn copies are added to xs->torn. */
#define COPY_LOOP(xs, t, n, W, PUSH, POP)                                      \
	do {                                                                   \
		intptr_t v_[W];                                                \
		int torn_ = 0;                                                 \
		XFER_LOOP(xs, t, n, PUSH, POP);                                \
		if (torn_)                                                     \
			__atomic_fetch_add(&(xs)->torn, torn_, __ATOMIC_RELAXED); \
	} while (0)

/* The mutex rival of all three: a LIFO of `words`-word values. */
void xfer_mutex_ptr(void *sh, struct thr *t, unsigned n);
void xfer_mutex_copy2(void *sh, struct thr *t, unsigned n);
void xfer_mutex_copy8(void *sh, struct thr *t, unsigned n);
int mx_check(void *sh, struct thr *t, int n, char *err, size_t len);

/* The yardstick's twins (tools/yardstick.h): hand-written sections on
 * hand-written parts, and the same work on thread-local data. */
void *ys_stack_setup(int nthreads);
void *ys_ptr_setup(int nthreads);
void *ys_copy2_setup(int nthreads);
void *ys_copy8_setup(int nthreads);
void ys_xfer_teardown(void *sh);
void ys_stack_hand_cpu(void *sh, struct thr *t, unsigned n);
void ys_stack_hand_cid(void *sh, struct thr *t, unsigned n);
void ys_ptr_hand_cpu(void *sh, struct thr *t, unsigned n);
void ys_ptr_hand_cid(void *sh, struct thr *t, unsigned n);
void ys_copy2_hand_cpu(void *sh, struct thr *t, unsigned n);
void ys_copy2_hand_cid(void *sh, struct thr *t, unsigned n);
void ys_copy8_hand_cpu(void *sh, struct thr *t, unsigned n);
void ys_copy8_hand_cid(void *sh, struct thr *t, unsigned n);
void ys_stack_hand_g_cpu(void *sh, struct thr *t, unsigned n);
void ys_stack_hand_g_cid(void *sh, struct thr *t, unsigned n);
void ys_ptr_hand_g_cpu(void *sh, struct thr *t, unsigned n);
void ys_ptr_hand_g_cid(void *sh, struct thr *t, unsigned n);
void ys_copy2_hand_g_cpu(void *sh, struct thr *t, unsigned n);
void ys_copy2_hand_g_cid(void *sh, struct thr *t, unsigned n);
void ys_copy8_hand_g_cpu(void *sh, struct thr *t, unsigned n);
void ys_copy8_hand_g_cid(void *sh, struct thr *t, unsigned n);
int ys_stack_check_hand(void *sh, struct thr *t, int n, char *err, size_t len);
int ys_buf_check_hand(void *sh, struct thr *t, int n, char *err, size_t len);
void ys_stack_tl(void *sh, struct thr *t, unsigned n);
void ys_ptr_tl(void *sh, struct thr *t, unsigned n);
void ys_copy2_tl(void *sh, struct thr *t, unsigned n);
void ys_copy8_tl(void *sh, struct thr *t, unsigned n);
void ys_xfer_tl_fini(void *sh, struct thr *t);
int ys_xfer_check_tl(void *sh, struct thr *t, int n, char *err, size_t len);

#endif /* RSEQKIT_BENCH_XFER_H */
