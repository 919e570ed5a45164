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

/* Do op on part idx under its gate: plain code, the part is ours.
 * Returns 0, -ENOENT (nothing to pop), or the gate's error. */
static int op_locked(struct rsk_stack *s, int idx, enum rsk_stack_op_ op,
		     struct rsk_stack_node *node, struct rsk_stack_node **out)
{
	struct rsk_stack_part *p = &s->part[idx];
	struct rsk_stack_node *head;
	int err = rsk_gate_close(&p->gate, s->mode, idx);

	if (err != 0) {
		if (out != NULL)
			*out = NULL;
		return err;
	}
	head = (struct rsk_stack_node *)p->head;
	switch (op) {
	case RSK_STACK_PUSH_:
		node->next = head;
		/* Release, as the fast path's push: the node is published. */
		__atomic_store_n(&p->head, (intptr_t)node, __ATOMIC_RELEASE);
		break;
	case RSK_STACK_POP_:
		*out = head;
		if (head != NULL)
			p->head = (intptr_t)head->next;
		break;
	case RSK_STACK_POP_ALL_:
		*out = head;
		p->head = 0;
		break;
	}
	rsk_gate_open(&p->gate);
	return op != RSK_STACK_PUSH_ && head == NULL ? -ENOENT : 0;
}

RSK_EXPORT int rsk_stack_slow_(struct rsk_stack *s, enum rsk_stack_op_ op,
			       struct rsk_stack_node *node, struct rsk_stack_node **out, int ret)
{
	unsigned aborts = 0;
	int idx = -1;

	while (rsk_percpu_again(ret, &aborts)) {
		if (op == RSK_STACK_PUSH_)
			ret = rsk_stack_try_push_(s, node, &idx);
		else if (op == RSK_STACK_POP_)
			ret = rsk_stack_try_pop_(s, out, &idx);
		else
			ret = rsk_stack_try_pop_all_(s, out, &idx);
		if (ret == RSK_OK)
			return idx;
		if (ret < RSK_ABORTED)
			return ret;
	}
	/* The one place that works on the stack without a critical section. */
	idx = rsk_percpu_slow_index(s->mode, s->nr);
	ret = op_locked(s, idx, op, node, out);
	rsk_note_slow_path_at(idx);
	return ret == 0 ? idx : ret;
}

RSK_EXPORT int rsk_stack_pop_all_cpu(struct rsk_stack *s, int cpu, struct rsk_stack_node **out)
{
	if (s == NULL || out == NULL || (unsigned)cpu >= (unsigned)s->nr)
		return -EINVAL;
	return op_locked(s, cpu, RSK_STACK_POP_ALL_, NULL, out);
}

RSK_EXPORT int rsk_stack_push_cpu(struct rsk_stack *s, int cpu, struct rsk_stack_node *node)
{
	if (s == NULL || node == NULL || (unsigned)cpu >= (unsigned)s->nr)
		return -EINVAL;
	return op_locked(s, cpu, RSK_STACK_PUSH_, node, NULL);
}
