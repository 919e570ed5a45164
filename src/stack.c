/* SPDX-License-Identifier: MIT */
/* Per-CPU stack: creation, quiescent drain, slow path (see stack.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

RSK_EXPORT int rsk_stack_create(struct rsk_stack **out, enum rsk_index_mode mode)
{
	struct rsk_stack *s;
	size_t size;
	int nr;

	if (out == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID))
		return -EINVAL;
	nr = rsk_possible_cpus();
	size = sizeof(*s) + (size_t)nr * sizeof(s->part[0]);
	s = aligned_alloc(RSK_PERCPU_ALIGN, size);
	if (s == NULL)
		return -ENOMEM;
	memset(s, 0, size);
	s->mode = rsk_percpu_effective_mode_(mode);
	s->nr = nr;
	*out = s;
	return 0;
}

RSK_EXPORT int rsk_stack_destroy(struct rsk_stack *s)
{
	if (s == NULL)
		return -EINVAL;
	free(s);
	return 0;
}

/* The one place that decides what push/pop/pop_all do without a critical
 * section: nothing yet - the progress protocol will stop the part and
 * work on it with plain code. */
RSK_EXPORT int rsk_stack_slow_(struct rsk_stack *s, enum rsk_stack_op_ op,
			       struct rsk_stack_node *node, struct rsk_stack_node **out)
{
	(void)s;
	(void)op;
	(void)node;
	if (out != NULL)
		*out = NULL;
	return -ENOSYS;
}

RSK_EXPORT int rsk_stack_pop_all_cpu(struct rsk_stack *s, int cpu, struct rsk_stack_node **out)
{
	if (s == NULL || out == NULL || (unsigned)cpu >= (unsigned)s->nr)
		return -EINVAL;
	*out = (struct rsk_stack_node *)__atomic_exchange_n(&s->part[cpu].head, 0,
							    __ATOMIC_ACQUIRE);
	return *out != NULL ? 0 : -ENOENT;
}
