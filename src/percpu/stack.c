/* SPDX-License-Identifier: MIT */
/* Per-CPU stack: creation and the slow path (see stack.h). */
#include <errno.h>
#include "internal.h"

RSK_PERCPU_GUARDED_(struct rsk_stack);

static size_t stack_size(int nr)
{
	return sizeof(struct rsk_stack) + (size_t)nr * sizeof(struct rsk_stack_part);
}

RSK_EXPORT int rsk_stack_create(struct rsk_stack **out, enum rsk_index_mode mode)
{
	struct rsk_stack *s;

	if (out == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID))
		return -EINVAL;
	s = rsk_percpu_create(stack_size(rsk_possible_cpus()), mode);
	if (s == NULL)
		return -ENOMEM;
	*out = s;
	return 0;
}

RSK_EXPORT int rsk_stack_destroy(struct rsk_stack *s)
{
	return s == NULL ? -EINVAL : rsk_percpu_destroy(s, stack_size(s->nr));
}

struct stack_op {
	enum rsk_stack_op_ op;
	struct rsk_stack_node *node;  /* push */
	struct rsk_stack_node **out;  /* pop, pop_all */
};

static enum rsk_result stack_attempt(void *s, void *arg, int *idx)
{
	struct stack_op *o = arg;

	if (o->op == RSK_STACK_PUSH_)
		return rsk_stack_try_push_(s, o->node, idx, rsk_area_offset_());
	if (o->op == RSK_STACK_POP_)
		return rsk_stack_try_pop_(s, o->out, idx, rsk_area_offset_());
	return rsk_stack_try_pop_all_(s, o->out, idx, rsk_area_offset_());
}

/* Plain code: with the gate closed and the CPU fenced, the part is ours. */
static enum rsk_result stack_locked(void *s, int idx, void *arg)
{
	struct rsk_stack_part *p = &((struct rsk_stack *)s)->part[idx];
	struct stack_op *o = arg;
	struct rsk_stack_node *head = (struct rsk_stack_node *)p->head;

	switch (o->op) {
	case RSK_STACK_PUSH_:
		o->node->next = head;
		/* Release, as the fast path's push: the node is published. */
		__atomic_store_n(&p->head, (intptr_t)o->node, __ATOMIC_RELEASE);
		return RSK_OK;
	case RSK_STACK_POP_:
		*o->out = head;
		if (head == NULL)
			return RSK_EMPTY;
		/* Relaxed atomic stores: another CPU's peek reads the head. */
		__atomic_store_n(&p->head, (intptr_t)head->next, __ATOMIC_RELAXED);
		return RSK_OK;
	case RSK_STACK_POP_ALL_:
		*o->out = head;
		__atomic_store_n(&p->head, 0, __ATOMIC_RELAXED);
		return head == NULL ? RSK_EMPTY : RSK_OK;
	}
	return RSK_EMPTY;
}

static intptr_t *stack_gate(void *s, int idx)
{
	return &((struct rsk_stack *)s)->part[idx].gate;
}

/* Another CPU's empty part: nothing to take, no gate needed. */
static enum rsk_result stack_peek(const void *s, int idx, const void *arg)
{
	const struct stack_op *o = arg;

	if (o->op != RSK_STACK_PUSH_ &&
	    __atomic_load_n(&((const struct rsk_stack *)s)->part[idx].head, __ATOMIC_RELAXED) == 0) {
		*o->out = NULL;
		return RSK_EMPTY;
	}
	return RSK_OK;
}

static const struct rsk_percpu_kind stack_kind = {
	.name = "rsk_stack",
	.attempt = stack_attempt,
	.locked = stack_locked,
	.gate = stack_gate,
	.peek = stack_peek,
};

RSK_EXPORT int rsk_stack_slow_(struct rsk_stack *s, enum rsk_stack_op_ op,
			       struct rsk_stack_node *node, struct rsk_stack_node **out,
			       enum rsk_result first)
{
	struct stack_op o = { op, node, out };
	int ret = rsk_percpu_slow(s, &stack_kind, &o, first);

	if (ret < 0 && out != NULL)
		*out = NULL;
	return ret < 0 ? ret : 0; /* the framework's part index: 0 */
}

RSK_EXPORT int rsk_stack_pop_all_cpu(struct rsk_stack *s, int cpu, struct rsk_stack_node **out)
{
	struct stack_op o = { RSK_STACK_POP_ALL_, NULL, out };
	int ret;

	if (out == NULL)
		return -EINVAL;
	ret = rsk_percpu_on_cpu(s, &stack_kind, cpu, &o);
	if (ret < 0)
		*out = NULL;
	return ret;
}

RSK_EXPORT int rsk_stack_push_cpu(struct rsk_stack *s, int cpu, struct rsk_stack_node *node)
{
	struct stack_op o = { RSK_STACK_PUSH_, node, NULL };

	if (node == NULL)
		return -EINVAL;
	return rsk_percpu_on_cpu(s, &stack_kind, cpu, &o);
}
