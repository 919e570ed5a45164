/* SPDX-License-Identifier: MIT */
/* Per-CPU pointer buffer: creation, quiescent drain, slow path (ptrbuf.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

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
	b = aligned_alloc(RSK_PERCPU_ALIGN, size);
	if (b == NULL)
		return -ENOMEM;
	memset(b, 0, size);
	b->mode = rsk_percpu_effective_mode_(mode);
	b->nr = nr;
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
	free(b);
	return 0;
}

/* Do op on part idx under its gate: plain code, the part is ours.
 * Returns 0, -ENOSPC, -ENOENT, or the gate's error. */
static int op_locked(struct rsk_ptrbuf *b, int idx, enum rsk_ptrbuf_op_ op, void *ptr,
		     void **out)
{
	struct rsk_ptrbuf_part *p = rsk_ptrbuf_part_(b, idx);
	int err = rsk_gate_close(&p->gate, b->mode, idx);
	intptr_t count;

	if (err != 0)
		goto out;
	count = p->count;
	if (op == RSK_PTRBUF_PUSH_) {
		if (count >= b->capacity) {
			err = -ENOSPC;
		} else {
			p->slot[count] = (intptr_t)ptr;
			/* Release: the object is published with the slot. */
			__atomic_store_n(&p->count, count + 1, __ATOMIC_RELEASE);
		}
	} else if (count == 0) {
		err = -ENOENT;
	} else {
		*out = (void *)p->slot[count - 1];
		p->count = count - 1;
	}
	rsk_gate_open(&p->gate);
out:
	if (err != 0 && out != NULL)
		*out = NULL;
	return err;
}

RSK_EXPORT int rsk_ptrbuf_slow_(struct rsk_ptrbuf *b, enum rsk_ptrbuf_op_ op, void *ptr,
				void **out, int ret)
{
	unsigned aborts = 0;
	int idx = -1;

	while (rsk_percpu_again(ret, &aborts)) {
		if (op == RSK_PTRBUF_PUSH_)
			ret = rsk_ptrbuf_try_push_(b, ptr, &idx);
		else
			ret = rsk_ptrbuf_try_pop_(b, out, &idx);
		if (ret == RSK_OK)
			return idx;
		if (ret < RSK_ABORTED)
			return ret;
	}
	/* The one place that works on the buffer without a critical section. */
	idx = rsk_percpu_slow_index(b->mode, b->nr);
	ret = op_locked(b, idx, op, ptr, out);
	rsk_note_slow_path_at(idx);
	return ret == 0 ? idx : ret;
}

RSK_EXPORT int rsk_ptrbuf_pop_cpu(struct rsk_ptrbuf *b, int cpu, void **out)
{
	if (b == NULL || out == NULL || (unsigned)cpu >= (unsigned)b->nr)
		return -EINVAL;
	return op_locked(b, cpu, RSK_PTRBUF_POP_, NULL, out);
}

RSK_EXPORT int rsk_ptrbuf_push_cpu(struct rsk_ptrbuf *b, int cpu, void *ptr)
{
	if (b == NULL || (unsigned)cpu >= (unsigned)b->nr)
		return -EINVAL;
	return op_locked(b, cpu, RSK_PTRBUF_PUSH_, ptr, NULL);
}
