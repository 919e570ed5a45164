/* SPDX-License-Identifier: MIT */
/* Per-CPU copy buffer: creation and the slow path (see copybuf.h). */
#include <errno.h>
#include <string.h>
#include "internal.h"

_Static_assert(sizeof(struct rsk_copybuf) <= RSK_PERCPU_ALIGN, "the header fits its slot");

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
	b = rsk_percpu_create(size, mode);
	if (b == NULL)
		return -ENOMEM;
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
	return rsk_percpu_destroy(b, RSK_PERCPU_ALIGN + (size_t)b->nr * b->stride);
}

struct copybuf_op {
	enum rsk_copybuf_op_ op;
	/* What is copied: the item, or its bounce copy.  Not intptr_t *: the
	 * _cpu operations pass the caller's item, of any alignment. */
	void *words;
};

static enum rsk_result copybuf_attempt(void *s, void *arg, int *idx)
{
	struct copybuf_op *o = arg;

	if (o->op == RSK_COPYBUF_PUSH_)
		return rsk_copybuf_try_push_(s, o->words, idx, rsk_area_offset_());
	return rsk_copybuf_try_pop_(s, o->words, idx, rsk_area_offset_());
}

/* Copy n words: a loop, not a memcpy call, for the few words of an item.
 * Relaxed atomic stores keep the compiler from making it that call. */
static inline void copy_words(intptr_t *dst, const intptr_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}

/* Plain code: with the gate closed and the CPU fenced, the part is ours.
 * Both sides are word arrays: a part's slot, and the item or its bounce
 * copy (see copybuf_bytes_kind for an item that is neither). */
static enum rsk_result copybuf_locked(void *s, int idx, void *arg)
{
	struct rsk_copybuf *b = s;
	struct rsk_copybuf_part *p = rsk_copybuf_part_(b, idx);
	struct copybuf_op *o = arg;
	intptr_t count = p->count;

	if (o->op == RSK_COPYBUF_PUSH_) {
		if (count >= b->capacity)
			return RSK_FULL;
		copy_words(&p->item[(size_t)count * b->words], o->words, b->words);
		/* Release: the item is published with the count. */
		__atomic_store_n(&p->count, count + 1, __ATOMIC_RELEASE);
		return RSK_OK;
	}
	if (count == 0)
		return RSK_EMPTY;
	copy_words(o->words, &p->item[(size_t)(count - 1) * b->words], b->words);
	p->count = count - 1;
	return RSK_OK;
}

/* copybuf_locked() for the caller's own item when it is not a word array
 * (rsk_copybuf_direct_() false: a size that is not a multiple of a word,
 * or an unaligned address), from rsk_copybuf_push_cpu()/pop_cpu(): exactly
 * item_size bytes of it, at any alignment.  A pushed slot's last word is
 * zeroed first, as the slow path's bounce copy's is. */
static enum rsk_result copybuf_locked_bytes(void *s, int idx, void *arg)
{
	struct rsk_copybuf *b = s;
	struct rsk_copybuf_part *p = rsk_copybuf_part_(b, idx);
	struct copybuf_op *o = arg;
	intptr_t count = p->count;

	if (o->op == RSK_COPYBUF_PUSH_) {
		if (count >= b->capacity)
			return RSK_FULL;
		intptr_t *slot = &p->item[(size_t)count * b->words];
		slot[b->words - 1] = 0;
		memcpy(slot, o->words, b->item_size);
		/* Release: the item is published with the count. */
		__atomic_store_n(&p->count, count + 1, __ATOMIC_RELEASE);
		return RSK_OK;
	}
	if (count == 0)
		return RSK_EMPTY;
	memcpy(o->words, &p->item[(size_t)(count - 1) * b->words], b->item_size);
	p->count = count - 1;
	return RSK_OK;
}

static intptr_t *copybuf_gate(void *s, int idx)
{
	return &rsk_copybuf_part_(s, idx)->gate;
}

/* Another CPU's part that is empty (pop) or full (push) at a look. */
static enum rsk_result copybuf_peek(const void *s, int idx, const void *arg)
{
	const struct rsk_copybuf *b = s;
	const struct copybuf_op *o = arg;
	intptr_t count = __atomic_load_n(&rsk_copybuf_part_(b, idx)->count, __ATOMIC_RELAXED);

	if (o->op == RSK_COPYBUF_PUSH_)
		return count >= b->capacity ? RSK_FULL : RSK_OK;
	return count == 0 ? RSK_EMPTY : RSK_OK;
}

static const struct rsk_percpu_kind copybuf_kind = {
	.name = "rsk_copybuf",
	.attempt = copybuf_attempt,
	.locked = copybuf_locked,
	.gate = copybuf_gate,
	.peek = copybuf_peek,
};

/* The _cpu operations on an item that is not a word array (the slow path
 * bounces such an item instead: its sections need words). */
static const struct rsk_percpu_kind copybuf_bytes_kind = {
	.name = "rsk_copybuf",
	.attempt = copybuf_attempt,
	.locked = copybuf_locked_bytes,
	.gate = copybuf_gate,
	.peek = copybuf_peek,
};

/* The kind for the _cpu operations on item (b and item not NULL). */
static const struct rsk_percpu_kind *cpu_kind(const struct rsk_copybuf *b, const void *item)
{
	return rsk_copybuf_direct_(b, item) ? &copybuf_kind : &copybuf_bytes_kind;
}

RSK_EXPORT int rsk_copybuf_slow_(struct rsk_copybuf *b, enum rsk_copybuf_op_ op, void *item,
				 enum rsk_result first)
{
	intptr_t bounce[RSK_COPYBUF_MAX_ITEM / sizeof(intptr_t)];
	struct copybuf_op o = { op, item };
	int ret;

	if (!rsk_copybuf_direct_(b, item)) {
		/* The sections copy whole words: through an aligned copy,
		 * its last word's padding zeroed. */
		o.words = bounce;
		if (op == RSK_COPYBUF_PUSH_) {
			bounce[b->words - 1] = 0;
			memcpy(bounce, item, b->item_size);
		}
	}
	ret = rsk_percpu_slow(b, &copybuf_kind, &o, first);
	if (ret >= 0 && op == RSK_COPYBUF_POP_ && o.words != item)
		memcpy(item, bounce, b->item_size);
	return ret < 0 ? ret : 0; /* the framework's part index: 0 */
}

RSK_EXPORT int rsk_copybuf_pop_cpu(struct rsk_copybuf *b, int cpu, void *item)
{
	struct copybuf_op o = { RSK_COPYBUF_POP_, item };

	if (b == NULL || item == NULL)
		return -EINVAL;
	return rsk_percpu_on_cpu(b, cpu_kind(b, item), cpu, &o);
}

RSK_EXPORT int rsk_copybuf_push_cpu(struct rsk_copybuf *b, int cpu, const void *item)
{
	struct copybuf_op o = { RSK_COPYBUF_PUSH_, (void *)(uintptr_t)item };

	if (b == NULL || item == NULL)
		return -EINVAL;
	return rsk_percpu_on_cpu(b, cpu_kind(b, item), cpu, &o);
}
