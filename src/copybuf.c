/* SPDX-License-Identifier: MIT */
/* Per-CPU copy buffer: creation, quiescent drain, slow path (copybuf.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

RSK_EXPORT int rsk_copybuf_create(struct rsk_copybuf **out, enum rsk_index_mode mode,
				  size_t item_size, long capacity, unsigned flags)
{
	struct rsk_copybuf *b;
	size_t words, stride, size;
	int nr;

	if (out == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID) ||
	    (flags & ~RSK_COPYBUF_RELEASE) != 0 || item_size == 0 ||
	    item_size > RSK_COPYBUF_MAX_ITEM || capacity < 1 ||
	    capacity > RSK_COPYBUF_MAX_CAPACITY)
		return -EINVAL;
	nr = rsk_possible_cpus();
	words = (item_size + sizeof(intptr_t) - 1) / sizeof(intptr_t);
	if (__builtin_mul_overflow(words * sizeof(intptr_t), (size_t)capacity, &stride) ||
	    __builtin_add_overflow(stride, sizeof(struct rsk_copybuf_part) + RSK_PERCPU_ALIGN - 1,
				   &stride))
		return -ENOMEM;
	stride &= ~(size_t)(RSK_PERCPU_ALIGN - 1);
	/* The header gets an aligned slot of its own: parts stay aligned. */
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
	b->item_size = item_size;
	b->words = words;
	b->capacity = capacity;
	b->stride = stride;
	b->parts = (char *)b + RSK_PERCPU_ALIGN;
	*out = b;
	return 0;
}

RSK_EXPORT int rsk_copybuf_destroy(struct rsk_copybuf *b)
{
	if (b == NULL)
		return -EINVAL;
	free(b);
	return 0;
}

/* Do op on part idx under its gate: plain code, the part is ours.
 * Returns 0, -ENOSPC, -ENOENT, or the gate's error. */
static int op_locked(struct rsk_copybuf *b, int idx, enum rsk_copybuf_op_ op, void *item)
{
	struct rsk_copybuf_part *p = rsk_copybuf_part_(b, idx);
	int err = rsk_gate_close(&p->gate, b->mode, idx);
	intptr_t count;

	if (err != 0)
		return err;
	count = p->count;
	if (op == RSK_COPYBUF_PUSH_) {
		if (count >= b->capacity) {
			err = -ENOSPC;
		} else {
			memcpy(&p->item[(size_t)count * b->words], item, b->item_size);
			/* Release: the item is published with the count. */
			__atomic_store_n(&p->count, count + 1, __ATOMIC_RELEASE);
		}
	} else if (count == 0) {
		err = -ENOENT;
	} else {
		memcpy(item, &p->item[(size_t)(count - 1) * b->words], b->item_size);
		p->count = count - 1;
	}
	rsk_gate_open(&p->gate);
	return err;
}

RSK_EXPORT int rsk_copybuf_slow_(struct rsk_copybuf *b, enum rsk_copybuf_op_ op, void *item,
				 int ret)
{
	intptr_t bounce[RSK_COPYBUF_MAX_ITEM / sizeof(intptr_t)];
	intptr_t *words = (intptr_t *)item;
	unsigned aborts = 0;
	int idx = -1;

	if (!rsk_copybuf_direct_(b, item)) {
		/* The sections copy whole words: through an aligned copy,
		 * its last word's padding zeroed. */
		words = bounce;
		if (op == RSK_COPYBUF_PUSH_) {
			bounce[b->words - 1] = 0;
			memcpy(bounce, item, b->item_size);
		}
	}
	while (rsk_percpu_again(ret, &aborts)) {
		if (op == RSK_COPYBUF_PUSH_)
			ret = rsk_copybuf_try_push_(b, words, &idx);
		else
			ret = rsk_copybuf_try_pop_(b, words, &idx);
		if (ret == RSK_OK) {
			if (words != item && op == RSK_COPYBUF_POP_)
				memcpy(item, bounce, b->item_size);
			return idx;
		}
		if (ret < RSK_ABORTED)
			return ret;
	}
	/* The one place that works on the buffer without a critical section. */
	idx = rsk_percpu_slow_index(b->mode, b->nr);
	ret = op_locked(b, idx, op, item);
	rsk_note_slow_path_at(idx);
	return ret == 0 ? idx : ret;
}

RSK_EXPORT int rsk_copybuf_pop_cpu(struct rsk_copybuf *b, int cpu, void *item)
{
	if (b == NULL || item == NULL || (unsigned)cpu >= (unsigned)b->nr)
		return -EINVAL;
	return op_locked(b, cpu, RSK_COPYBUF_POP_, item);
}

RSK_EXPORT int rsk_copybuf_push_cpu(struct rsk_copybuf *b, int cpu, const void *item)
{
	if (b == NULL || item == NULL || (unsigned)cpu >= (unsigned)b->nr)
		return -EINVAL;
	return op_locked(b, cpu, RSK_COPYBUF_PUSH_, (void *)(uintptr_t)item);
}
