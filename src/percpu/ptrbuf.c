/* SPDX-License-Identifier: MIT */
/* Per-CPU pointer buffer: creation and the slow path (see ptrbuf.h). */
#include <errno.h>
#include "internal.h"

_Static_assert(sizeof(struct rsk_ptrbuf) <= RSK_PERCPU_ALIGN, "the header fits its slot");

RSK_EXPORT int rsk_ptrbuf_create(struct rsk_ptrbuf **out, enum rsk_index_mode mode,
				 long capacity, unsigned flags)
{
	struct rsk_ptrbuf *b;
	size_t stride, size;
	int nr;

	if (out == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID) ||
	    (flags & ~RSK_PTRBUF_RELEASE) != 0 || capacity < 1 ||
	    capacity > RSK_PTRBUF_MAX_CAPACITY)
		return -EINVAL;
	nr = rsk_possible_cpus();
	stride = sizeof(struct rsk_ptrbuf_part) + (size_t)capacity * sizeof(intptr_t);
	stride = (stride + RSK_PERCPU_ALIGN - 1) & ~(size_t)(RSK_PERCPU_ALIGN - 1);
	/* The header gets a part-sized slot of its own: parts stay aligned. */
	if (__builtin_mul_overflow(stride, (size_t)nr, &size) ||
	    __builtin_add_overflow(size, (size_t)RSK_PERCPU_ALIGN, &size))
		return -ENOMEM;
	b = rsk_percpu_create(size, mode);
	if (b == NULL)
		return -ENOMEM;
	b->flags = flags;
	b->capacity = capacity;
	b->stride = stride;
	b->parts = (char *)b + RSK_PERCPU_ALIGN;
	*out = b;
	return 0;
}

RSK_EXPORT int rsk_ptrbuf_destroy(struct rsk_ptrbuf *b)
{
	if (b == NULL)
		return -EINVAL;
	return rsk_percpu_destroy(b, RSK_PERCPU_ALIGN + (size_t)b->nr * b->stride);
}

struct ptrbuf_op {
	enum rsk_ptrbuf_op_ op;
	void *ptr;   /* push */
	void **out;  /* pop */
};

static enum rsk_result ptrbuf_attempt(void *s, void *arg, int *idx)
{
	struct ptrbuf_op *o = arg;

	if (o->op == RSK_PTRBUF_PUSH_)
		return rsk_ptrbuf_try_push_(s, o->ptr, idx, rsk_area_offset_());
	return rsk_ptrbuf_try_pop_(s, o->out, idx, rsk_area_offset_());
}

/* Plain code: with the gate closed and the CPU fenced, the part is ours. */
static enum rsk_result ptrbuf_locked(void *s, int idx, void *arg)
{
	struct rsk_ptrbuf *b = s;
	struct rsk_ptrbuf_part *p = rsk_ptrbuf_part_(b, idx);
	struct ptrbuf_op *o = arg;
	intptr_t count = p->count;

	if (o->op == RSK_PTRBUF_PUSH_) {
		if (count >= b->capacity)
			return RSK_FULL;
		/* Atomic (relaxed) where fast paths read in C: the owner of
		 * the part may be reading it speculatively, its section then
		 * failing on the closed gate. */
		__atomic_store_n(&p->slot[count], (intptr_t)o->ptr, __ATOMIC_RELAXED);
		/* Release: the object is published with the slot. */
		__atomic_store_n(&p->count, count + 1, __ATOMIC_RELEASE);
		return RSK_OK;
	}
	if (count == 0)
		return RSK_EMPTY;
	*o->out = (void *)p->slot[count - 1];
	__atomic_store_n(&p->count, count - 1, __ATOMIC_RELAXED);
	return RSK_OK;
}

static intptr_t *ptrbuf_gate(void *s, int idx)
{
	return &rsk_ptrbuf_part_(s, idx)->gate;
}

/* Another CPU's part that is empty (pop) or full (push) at a look. */
static enum rsk_result ptrbuf_peek(const void *s, int idx, const void *arg)
{
	const struct rsk_ptrbuf *b = s;
	const struct ptrbuf_op *o = arg;
	intptr_t count = __atomic_load_n(&rsk_ptrbuf_part_(b, idx)->count, __ATOMIC_RELAXED);

	if (o->op == RSK_PTRBUF_PUSH_)
		return count >= b->capacity ? RSK_FULL : RSK_OK;
	return count == 0 ? RSK_EMPTY : RSK_OK;
}

static const struct rsk_percpu_kind ptrbuf_kind = {
	.name = "rsk_ptrbuf",
	.attempt = ptrbuf_attempt,
	.locked = ptrbuf_locked,
	.gate = ptrbuf_gate,
	.peek = ptrbuf_peek,
};

RSK_EXPORT int rsk_ptrbuf_slow_(struct rsk_ptrbuf *b, enum rsk_ptrbuf_op_ op, void *ptr,
				void **out, enum rsk_result first)
{
	struct ptrbuf_op o = { op, ptr, out };
	int ret = rsk_percpu_slow(b, &ptrbuf_kind, &o, first);

	if (ret < 0 && out != NULL)
		*out = NULL;
	return ret < 0 ? ret : 0; /* the framework's part index: 0 */
}

RSK_EXPORT int rsk_ptrbuf_pop_cpu(struct rsk_ptrbuf *b, int cpu, void **out)
{
	struct ptrbuf_op o = { RSK_PTRBUF_POP_, NULL, out };
	int ret;

	if (out == NULL)
		return -EINVAL;
	ret = rsk_percpu_on_cpu(b, &ptrbuf_kind, cpu, &o);
	if (ret < 0)
		*out = NULL;
	return ret;
}

RSK_EXPORT int rsk_ptrbuf_push_cpu(struct rsk_ptrbuf *b, int cpu, void *ptr)
{
	struct ptrbuf_op o = { RSK_PTRBUF_PUSH_, ptr, NULL };

	return rsk_percpu_on_cpu(b, &ptrbuf_kind, cpu, &o);
}
