/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/stack.c - the stack family.
 *
 *   stack  push one node, pop one node (xfer.h): rsk_stack (rseqkit,
 *          -ungated, -fallback, -cid), the hand-written limit and a
 *          thread-local list, beside a list under a mutex and ck_stack
 *          (rival-ck.c)
 */
#include "xfer.h"
#include "../yardstick.h"
#ifdef BENCH_HAVE_CK
/* Only for CK_F_STACK_POP_MPMC: where ck has no multi-consumer pop (no
 * double-word compare-and-swap, i386), there is no ck row. */
#include <ck_stack.h>
#endif

static inline int rstack_push(struct rsk_stack *rs, struct snode *nodes, intptr_t id,
			      struct thr *t)
{
	int r = rsk_stack_push(rs, &nodes[id].rn);
	if (__builtin_expect(r < 0, 0))
		t->aux = r;
	return r < 0 ? -1 : 0;
}

static inline int rstack_pop(struct rsk_stack *rs, intptr_t *id, struct thr *t)
{
	struct rsk_stack_node *nd;
	int r = rsk_stack_pop(rs, &nd);

	if (r < 0) {
		if (r != -ENOENT)
			t->aux = r;
		return -1;
	}
	*id = ((struct snode *)(void *)((char *)nd - offsetof(struct snode, rn)))->id;
	return 0;
}

/* The loop the rseqkit, -ungated, -fallback and -cid rows share. */
BENCH_LOOP_DECL(xfer_rstack);
void BENCH_LOOP(xfer_rstack)(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
	/* In locals, as the hand-written loop keeps them (see lock.c). */
	struct rsk_stack *rs = s->rs;
	struct snode *nodes = s->nodes;
#define RS_PUSH(id) rstack_push(rs, nodes, id, t)
#define RS_POP(p) rstack_pop(rs, p, t)
	XFER_LOOP(s, t, n, RS_PUSH, RS_POP);
}

#ifndef BENCH_UNGATED
static void *rstack_setup_mode(int nthreads, enum rsk_index_mode mode)
{
	struct xfer_state *s = xfer_setup(nthreads, 1);
	die_on(rsk_stack_create(&s->rs, mode), "rsk_stack_create");
	return s;
}

MODE_SETUPS(rstack_setup, rstack_setup_mode)

static int rstack_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	int dup = 0;

	for (int c = 0; c < s->rs->nr; c++) {
		struct rsk_stack_node *nd;
		if (rsk_stack_pop_all_cpu(s->rs, c, &nd) < 0)
			continue;
		for (; nd; nd = nd->next)
			dup |= xfer_seen(s, ((struct snode *)(void *)((char *)nd -
						offsetof(struct snode, rn)))->id);
	}
	return xfer_finish(s, t, n, dup, err, len);
}

static const struct impl stack_impls[] = {
	RSK_ROWS("stack", "rseqkit", rstack_setup, xfer_rstack, rstack_check, xfer_teardown),
	ROW("stack", "mutex", xfer_setup1, NULL, xfer_mutex_ptr, NULL, mx_check, xfer_teardown),
#if defined(BENCH_HAVE_CK) && defined(CK_F_STACK_POP_MPMC)
	ROW("stack", "ck", ck_stack_setup, NULL, ck_stack_fn, NULL, ck_stack_check, ck_stack_teardown),
#endif
	YS_ROWS("stack", rstack_setup_cid, xfer_rstack, rstack_check, xfer_teardown, ys_stack,
		ys_stack_check_hand, ys_xfer_teardown, ys_xfer_tl_fini, ys_xfer_check_tl),
};

const struct family fam_stack = {
	.name = "stack", .title = "a per-CPU stack", FAMILY_IMPLS(stack_impls),
};
#endif /* !BENCH_UNGATED */
