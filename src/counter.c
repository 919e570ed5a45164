/* SPDX-License-Identifier: MIT */
/* Per-CPU counter: creation, readers and the slow path (see counter.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

RSK_EXPORT int rsk_counter_create(struct rsk_counter **out, enum rsk_index_mode mode)
{
	struct rsk_counter *c;
	size_t size;
	int nr;

	if (out == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID))
		return -EINVAL;
	nr = rsk_possible_cpus();
	size = sizeof(*c) + (size_t)nr * sizeof(c->part[0]);
	c = aligned_alloc(RSK_PERCPU_ALIGN, size);
	if (c == NULL)
		return -ENOMEM;
	memset(c, 0, size);
	c->mode = rsk_percpu_effective_mode_(mode);
	c->nr = nr;
	*out = c;
	return 0;
}

RSK_EXPORT int rsk_counter_destroy(struct rsk_counter *c)
{
	if (c == NULL)
		return -EINVAL;
	free(c);
	return 0;
}

/* The one place that decides what an add does without a critical section:
 * nothing yet.  The progress protocol will stop the CPU's part and add
 * there with plain code. */
RSK_EXPORT int rsk_counter_slow_(struct rsk_counter *c, intptr_t count)
{
	(void)c;
	(void)count;
	return -ENOSYS;
}

RSK_EXPORT int rsk_counter_read(const struct rsk_counter *c, int cpu, intptr_t *value)
{
	if (c == NULL || value == NULL || (unsigned)cpu >= (unsigned)c->nr)
		return -EINVAL;
	*value = __atomic_load_n(&c->part[cpu].count, __ATOMIC_RELAXED);
	return 0;
}

RSK_EXPORT int rsk_counter_sum(const struct rsk_counter *c, intptr_t *sum)
{
	uintptr_t s = 0;

	if (c == NULL || sum == NULL)
		return -EINVAL;
	for (int i = 0; i < c->nr; i++)
		s += (uintptr_t)__atomic_load_n(&c->part[i].count, __ATOMIC_RELAXED);
	*sum = (intptr_t)s;
	return 0;
}

RSK_EXPORT int rsk_counter_reset(struct rsk_counter *c)
{
	if (c == NULL)
		return -EINVAL;
	for (int i = 0; i < c->nr; i++)
		__atomic_store_n(&c->part[i].count, 0, __ATOMIC_RELAXED);
	return 0;
}
