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

/* The one place that decides what push/pop do without a critical
 * section: nothing yet - the progress protocol will stop the part and
 * work on it with plain code. */
RSK_EXPORT int rsk_ptrbuf_slow_(struct rsk_ptrbuf *b, enum rsk_ptrbuf_op_ op, void *ptr,
				void **out)
{
	(void)b;
	(void)op;
	(void)ptr;
	if (out != NULL)
		*out = NULL;
	return -ENOSYS;
}

RSK_EXPORT int rsk_ptrbuf_pop_cpu(struct rsk_ptrbuf *b, int cpu, void **out)
{
	struct rsk_ptrbuf_part *p;
	intptr_t count;

	if (b == NULL || out == NULL || (unsigned)cpu >= (unsigned)b->nr)
		return -EINVAL;
	p = rsk_ptrbuf_part_(b, cpu);
	count = __atomic_load_n(&p->count, __ATOMIC_ACQUIRE);
	if ((uintptr_t)(count - 1) >= (uintptr_t)b->capacity) {
		*out = NULL;
		return -ENOENT;
	}
	*out = (void *)p->slot[count - 1];
	__atomic_store_n(&p->count, count - 1, __ATOMIC_RELAXED);
	return 0;
}
