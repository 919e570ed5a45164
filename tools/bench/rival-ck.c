/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/rival-ck.c - Concurrency Kit, as Debian's libck-dev installs
 * it: ck_spinlock beside rsk_spinlock (lock.c), ck_stack's lock-free
 * stack beside rsk_stack (stack.c), and ck_ring's MPMC ring beside
 * rsk_ptrbuf (buffers.c), opt-in (-DBENCH_CK_RING): with 8 threads on 2
 * busy CPUs, four threads were seen spinning for minutes in
 * ck_ring_enqueue_mpmc() (waiting for p_tail to reach their reservation;
 * libck 0.7.1).
 */
#include "xfer.h"

#ifdef BENCH_HAVE_CK
#include <ck_ring.h>
#include <ck_spinlock.h>
#include <ck_stack.h>

/* ck_spinlock guarding the shared counter (the lock family's check). */
struct ck_lock {
	struct counter_state c;
	ck_spinlock_t ck __attribute__((aligned(CACHE_LINE)));
};

void *ck_lock_setup(int nthreads)
{
	struct ck_lock *s = bench_alloc(sizeof(*s));

	(void)nthreads;
	counter_init(&s->c);
	ck_spinlock_init(&s->ck);
	return s;
}

void ck_lock_fn(void *sh, struct thr *t, unsigned n)
{
	struct ck_lock *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++) {
		ck_spinlock_lock(&s->ck);
		s->c.shared.v++;
		ck_spinlock_unlock(&s->ck);
	}
}

int ck_lock_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	return counter_check_shared(&((struct ck_lock *)sh)->c, t, n, err, len);
}

void ck_lock_teardown(void *sh)
{
	counter_fini(&((struct ck_lock *)sh)->c);
	free(sh);
}

/* The transfers: the shared items and hands, ck's own nodes. */
struct ck_node {
	ck_stack_entry_t ce;
	intptr_t id;
};

struct ck_xfer {
	struct xfer_state *x;
	struct ck_node *nodes;
	ck_stack_t cks __attribute__((aligned(CACHE_LINE)));
	ck_ring_t ring __attribute__((aligned(CACHE_LINE)));
	ck_ring_buffer_t *ringbuf;
};

static void *ck_xfer_setup(int nthreads)
{
	struct ck_xfer *s = bench_alloc(sizeof(*s));
	unsigned rsz = 2;

	s->x = xfer_setup(nthreads, 1);
	s->nodes = bench_alloc(sizeof(*s->nodes) * (size_t)s->x->nids);
	for (int i = 0; i < s->x->nids; i++)
		s->nodes[i].id = i;
	while (rsz <= (unsigned)s->x->nids)
		rsz *= 2;
	s->ringbuf = bench_alloc(rsz * sizeof(*s->ringbuf));
	ck_ring_init(&s->ring, rsz);
	ck_stack_init(&s->cks);
	return s;
}

static void ck_xfer_teardown(void *sh)
{
	struct ck_xfer *s = sh;

	xfer_teardown(s->x);
	free(s->nodes);
	free(s->ringbuf);
	free(s);
}

void *ck_stack_setup(int nthreads)
{
	return ck_xfer_setup(nthreads);
}

void ck_stack_teardown(void *sh)
{
	ck_xfer_teardown(sh);
}

#define CK_ID(e) (((struct ck_node *)(void *)((char *)(e) - offsetof(struct ck_node, ce)))->id)

void ck_stack_fn(void *sh, struct thr *t, unsigned n)
{
	struct ck_xfer *s = sh;
#ifdef CK_F_STACK_POP_MPMC
#define CKS_PUSH(id) (ck_stack_push_mpmc(&s->cks, &s->nodes[id].ce), 0)
#define CKS_POP(p) ({ ck_stack_entry_t *e_ = ck_stack_pop_mpmc(&s->cks); \
	if (e_) { *(p) = CK_ID(e_); } e_ ? 0 : -1; })
	XFER_LOOP(s->x, t, n, CKS_PUSH, CKS_POP);
#else
	(void)s;
	(void)n;
	t->aux = -ENOSYS; /* no ck_stack_pop_mpmc on this arch: the check says so */
#endif
}

int ck_stack_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ck_xfer *s = sh;
	ck_stack_entry_t *e;
	int dup = 0;

	while ((e = ck_stack_pop_upmc(&s->cks)) != NULL)
		dup |= xfer_seen(s->x, CK_ID(e));
	return xfer_finish(s->x, t, n, dup, err, len);
}

void *ck_ring_setup(int nthreads)
{
	return ck_xfer_setup(nthreads);
}

void ck_ring_teardown(void *sh)
{
	ck_xfer_teardown(sh);
}

void ck_ring_fn(void *sh, struct thr *t, unsigned n)
{
	struct ck_xfer *s = sh;
#define CKR_PUSH(id) (ck_ring_enqueue_mpmc(&s->ring, s->ringbuf, &s->nodes[id]) ? 0 : -1)
#define CKR_POP(p) ({ void *o_; bool k_ = ck_ring_dequeue_mpmc(&s->ring, s->ringbuf, &o_); \
	if (k_) { *(p) = ((struct ck_node *)o_)->id; } k_ ? 0 : -1; })
	XFER_LOOP(s->x, t, n, CKR_PUSH, CKR_POP);
}

int ck_ring_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ck_xfer *s = sh;
	void *o;
	int dup = 0;

	while (ck_ring_dequeue_mpmc(&s->ring, s->ringbuf, &o))
		dup |= xfer_seen(s->x, ((struct ck_node *)o)->id);
	return xfer_finish(s->x, t, n, dup, err, len);
}
#endif /* BENCH_HAVE_CK */
