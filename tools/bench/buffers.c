/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/buffers.c - the buffers family.
 *
 *   ptrbuf     push one pointer, pop one pointer (xfer.h): rsk_ptrbuf
 *   copybuf16  push a 16-byte item by copy, pop one: rsk_copybuf
 *   copybuf64  push a 64-byte item by copy, pop one: rsk_copybuf
 *
 * Each with its -ungated, -fallback and -cid rows, the hand-written
 * limit and a thread-local buffer, beside a LIFO array under a mutex
 * (memcpy under the lock for the copies).  ck_ring (rival-ck.c) is
 * opt-in: see there.
 */
#include "xfer.h"
#include "../yardstick.h"

/* The loops the rseqkit, -ungated, -fallback and -cid rows share. */
BENCH_LOOP_DECL(xfer_rptr);
void BENCH_LOOP(xfer_rptr)(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
	/* In locals, as the hand-written loop keeps them (see lock.c). */
	struct rsk_ptrbuf *rp = s->rp;
	struct snode *nodes = s->nodes;
#define RP_PUSH(id) ({ int r_ = rsk_ptrbuf_push(rp, &nodes[id]); \
	if (r_ < 0 && r_ != -ENOSPC) { t->aux = r_; } r_ < 0 ? -1 : 0; })
#define RP_POP(p) ({ void *o_; int r_ = rsk_ptrbuf_pop(rp, &o_); \
	if (r_ < 0 && r_ != -ENOENT) { t->aux = r_; } \
	if (r_ >= 0) { *(p) = ((struct snode *)o_)->id; } r_ < 0 ? -1 : 0; })
	XFER_LOOP(s, t, n, RP_PUSH, RP_POP);
}

#define RCOPY_FN(W)                                                            \
	BENCH_LOOP_DECL(xfer_rcopy##W);                                        \
	void BENCH_LOOP(xfer_rcopy##W)(void *sh, struct thr *t, unsigned n)    \
	{                                                                      \
		struct xfer_state *s = sh;                                     \
		struct rsk_copybuf *rc = s->rc; /* a local: see lock.c */      \
		COPY_LOOP(s, t, n, W, RC_PUSH##W, RC_POP##W);                         \
	}
#define RC_PUSH(W, id) ({ ITEM_FILL(v_, W, id); int r_ = rsk_copybuf_push(rc, v_); \
	if (r_ < 0 && r_ != -ENOSPC) { t->aux = r_; } r_ < 0 ? -1 : 0; })
#define RC_POP(W, p) ({ int r_ = rsk_copybuf_pop(rc, v_); \
	if (r_ < 0 && r_ != -ENOENT) { t->aux = r_; } \
	if (r_ >= 0) { torn_ |= ITEM_TORN(v_, W); *(p) = v_[0]; } r_ < 0 ? -1 : 0; })
#define RC_PUSH2(id) RC_PUSH(2, id)
#define RC_POP2(p) RC_POP(2, p)
#define RC_PUSH8(id) RC_PUSH(8, id)
#define RC_POP8(p) RC_POP(8, p)
RCOPY_FN(2)
RCOPY_FN(8)

#ifndef BENCH_UNGATED
static void *rptr_setup_mode(int nthreads, enum rsk_index_mode mode)
{
	struct xfer_state *s = xfer_setup(nthreads, 1);
	die_on(rsk_ptrbuf_create(&s->rp, mode, s->nids, 0), "rsk_ptrbuf_create");
	return s;
}

MODE_SETUPS(rptr_setup, rptr_setup_mode)

static int rptr_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	int dup = 0;
	void *o;

	for (int c = 0; c < s->rp->nr; c++)
		while (rsk_ptrbuf_pop_cpu(s->rp, c, &o) == 0)
			dup |= xfer_seen(s, ((struct snode *)o)->id);
	return xfer_finish(s, t, n, dup, err, len);
}

static void *rcopy_setup(int nthreads, enum rsk_index_mode mode, size_t words)
{
	struct xfer_state *s = xfer_setup(nthreads, words);
	die_on(rsk_copybuf_create(&s->rc, mode, words * sizeof(intptr_t), s->nids, 0),
	       "rsk_copybuf_create");
	return s;
}
MODE_SETUPS(rcopy_setup2, rcopy_setup, 2)
MODE_SETUPS(rcopy_setup8, rcopy_setup, 8)

static int rcopy_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	intptr_t v[MAX_WORDS];
	int dup = 0;

	for (int c = 0; c < s->rc->nr; c++)
		while (rsk_copybuf_pop_cpu(s->rc, c, v) == 0) {
			s->torn += ITEM_TORN(v, s->words);
			dup |= xfer_seen(s, v[0]);
		}
	return xfer_finish(s, t, n, dup, err, len);
}

/* The yardstick's rows of a buffer op. */
#define BUF_YS_ROWS(op, cid_setup, fn, check, ys)                              \
	YS_ROWS(op, cid_setup, fn, check, xfer_teardown, ys, ys_buf_check_hand, ys_xfer_teardown, \
		ys_xfer_tl_fini, ys_xfer_check_tl)

static const struct impl buffers_impls[] = {
	RSK_ROWS("ptrbuf", "rseqkit", rptr_setup, xfer_rptr, rptr_check, xfer_teardown),
	ROW("ptrbuf", "mutex", xfer_setup1, NULL, xfer_mutex_ptr, NULL, mx_check, xfer_teardown),
#if defined(BENCH_HAVE_CK) && defined(BENCH_CK_RING)
	ROW("ptrbuf", "ck", ck_ring_setup, NULL, ck_ring_fn, NULL, ck_ring_check, ck_ring_teardown),
#endif
	BUF_YS_ROWS("ptrbuf", rptr_setup_cid, xfer_rptr, rptr_check, ys_ptr),

	RSK_ROWS("copybuf16", "rseqkit", rcopy_setup2, xfer_rcopy2, rcopy_check, xfer_teardown),
	ROW("copybuf16", "mutex", xfer_setup2, NULL, xfer_mutex_copy2, NULL, mx_check, xfer_teardown),
	BUF_YS_ROWS("copybuf16", rcopy_setup2_cid, xfer_rcopy2, rcopy_check, ys_copy2),

	RSK_ROWS("copybuf64", "rseqkit", rcopy_setup8, xfer_rcopy8, rcopy_check, xfer_teardown),
	ROW("copybuf64", "mutex", xfer_setup8, NULL, xfer_mutex_copy8, NULL, mx_check, xfer_teardown),
	BUF_YS_ROWS("copybuf64", rcopy_setup8_cid, xfer_rcopy8, rcopy_check, ys_copy8),
};

const struct family fam_buffers = {
	.name = "buffers", .title = "per-CPU buffers", FAMILY_IMPLS(buffers_impls),
};
#endif /* !BENCH_UNGATED */
