/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/stack.h - per-CPU stack (intrusive singly linked LIFO list).
 *
 * The user embeds a struct rsk_stack_node in each object; the stack links
 * them, it never allocates.  Each CPU part has its own list head.  Push is
 * a restartable compare-and-store of the head; pop is rsk_pop(), which
 * reads head->next inside the critical section, so no ABA problem exists
 * (the classic lock-free stack needs tags or hazard pointers for that).
 *
 * Synchronization:
 *
 *   operation                may run concurrently with  ordering
 *   -----------------------  -------------------------  -------------------
 *   rsk_stack_push           push, pop, pop_all         release: the node's
 *                                                       contents are visible
 *                                                       to whoever pops it
 *   rsk_stack_pop            push, pop, pop_all         address dependency
 *                                                       (consume) on the node
 *   rsk_stack_pop_all        push, pop, pop_all         as pop
 *   rsk_stack_pop_all_cpu    everything                 as pop (gate+fence)
 *   rsk_stack_push_cpu       everything                 as push (gate+fence)
 *   rsk_stack_create         -                          -
 *   rsk_stack_destroy        nothing                    -
 *
 * A node may be on one stack once.  pop and pop_all take from the current
 * CPU's part only: a part whose threads went away keeps its nodes until
 * some thread drains it with rsk_stack_pop_all_cpu(), which is safe while
 * that CPU's threads keep pushing and popping (it closes the part's gate
 * and fences the CPU); rsk_stack_push_cpu() moves nodes to any part.
 *
 * Injection points (test builds): push - 7 after reading the index, 8
 * after reading the head; pop, pop_all - 7 after reading the index, 8
 * before the section.
 */
#ifndef RSEQKIT_STACK_H
#define RSEQKIT_STACK_H

#include <rseqkit/percpu.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsk_stack_node {
	struct rsk_stack_node *next;
};

struct rsk_stack_part {
	intptr_t head;	  /* struct rsk_stack_node *, 0 when empty */
	intptr_t gate;	  /* the progress protocol's gate */
} __attribute__((aligned(RSK_PERCPU_ALIGN)));

struct rsk_stack {
	RSK_PERCPU_HEAD; /* mode, nr: read-only */
	RSK_PERCPU_FLEX_BEGIN_ struct rsk_stack_part part[]; RSK_PERCPU_FLEX_END_
};

/* rsk_stack_create - allocate a per-CPU stack, every part empty.
 * Returns 0, -EINVAL (out NULL, unknown mode), -ENOMEM. */
int rsk_stack_create(struct rsk_stack **out, enum rsk_index_mode mode);

/* rsk_stack_destroy - free s (not the nodes still on it: drain first if
 * they own memory).  Returns 0, or -EINVAL if s is NULL or destroyed
 * already. */
int rsk_stack_destroy(struct rsk_stack *s);

/*
 * Not API: one attempt of each operation (RSK_OK with *idx set,
 * RSK_EMPTY, or another rsk_result), and the slow path: the operation
 * after a first attempt that returned `first`.
 */
enum rsk_stack_op_ { RSK_STACK_PUSH_, RSK_STACK_POP_, RSK_STACK_POP_ALL_ };
int rsk_stack_slow_(struct rsk_stack *s, enum rsk_stack_op_ op, struct rsk_stack_node *node,
		    struct rsk_stack_node **out, enum rsk_result first);

RSK_PERCPU_INLINE enum rsk_result rsk_stack_try_push_(struct rsk_stack *s,
						   struct rsk_stack_node *node, int *idx, ptrdiff_t off)
{
	enum rsk_result r;
	uintptr_t pos = 0; /* (0: clang-tidy misses the exits) */

	RSK_INJECT_C(7);
	RSK_INJECT_C(8);
	/* node->next = the head, speculatively; the commit publishes it. */
	r = RSK_PERCPU_PUSH_(s, struct rsk_stack, off, pos, head, node,
			     offsetof(struct rsk_stack_node, next));
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		*idx = rsk_percpu_pos_index_(pos);
	return r;
}

RSK_PERCPU_INLINE enum rsk_result rsk_stack_try_pop_(struct rsk_stack *s,
						  struct rsk_stack_node **out, int *idx, ptrdiff_t off)
{
	enum rsk_result r;
	uintptr_t pos = 0; /* (0: clang-tidy misses the exits) */
	intptr_t head = 0;

	RSK_INJECT_C(7);
	RSK_INJECT_C(8);
	r = RSK_PERCPU_POP_(s, struct rsk_stack, off, pos, head, head,
			    offsetof(struct rsk_stack_node, next));
	if (RSK_PERCPU_LIKELY(r == RSK_OK)) {
		*idx = rsk_percpu_pos_index_(pos);
		*out = (struct rsk_stack_node *)head;
	} else if (r == RSK_CMPFAIL) { /* the head was 0 */
		*out = NULL;
		r = RSK_EMPTY;
	}
	return r;
}

RSK_PERCPU_INLINE enum rsk_result rsk_stack_try_pop_all_(struct rsk_stack *s,
						      struct rsk_stack_node **out, int *idx, ptrdiff_t off)
{
	uint32_t ioff = s->index_offset_, i;
	rsk_arch_area_t area;
	int ready = rsk_percpu_enter_(off, ioff, s->fast_nr_, &area, &i);
	intptr_t head;
	enum rsk_result r;

	if (RSK_PERCPU_UNLIKELY(!ready))
		return RSK_NO_INDEX;
	*idx = (int)i;
	RSK_INJECT_C(7);
	head = __atomic_load_n(&RSK_PERCPU_PART_(s, i)->head, __ATOMIC_RELAXED);
	if (head == 0) {
		*out = NULL;
		return RSK_EMPTY;
	}
	RSK_INJECT_C(8);
	/* Comparing the head is enough: whatever list hangs from it at the
	 * commit is the one taken (its links are read later). */
	r = RSK_PERCPU_OP_(cmpstore, ioff, area, i, &RSK_PERCPU_PART_(s, i)->gate, &RSK_PERCPU_PART_(s, i)->head,
			   head, 0);
	if (RSK_PERCPU_LIKELY(r == RSK_OK)) {
		/* The caller reads the list only after the commit took it
		 * (the section names no memory but the head). */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		*out = (struct rsk_stack_node *)head;
	}
	return r;
}

/*
 * rsk_stack_push - push node on the current CPU's part.
 * Returns 0, -EINVAL (s or node NULL, or s
 * destroyed), -ENXIO (a slow path's fence failed), -EDEADLK (a signal
 * handler whose thread holds the gate it needs), -EOWNERDEAD (a gate's
 * holder exited holding it); on an error the node is not pushed.
 * Lock-free on the fast path.
 */
RSK_PERCPU_INLINE int rsk_stack_push(struct rsk_stack *s, struct rsk_stack_node *node)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r;
	int idx;

	if (RSK_PERCPU_UNLIKELY(s == NULL || node == NULL))
		return -EINVAL;
	r = rsk_stack_try_push_(s, node, &idx, off);
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		return 0;
	return rsk_stack_slow_(s, RSK_STACK_PUSH_, node, NULL, r);
}

/*
 * rsk_stack_pop - unlink the top node of the current CPU's part into *out.
 * Returns 0, -ENOENT (that part is empty; *out set
 * to NULL), -EINVAL (s or out NULL, or s destroyed), -ENXIO (a slow
 * path's fence failed), -EDEADLK (a signal handler whose thread holds the
 * gate it needs), -EOWNERDEAD (a gate's holder exited holding it).
 * Lock-free on the fast path.
 */
RSK_PERCPU_INLINE int rsk_stack_pop(struct rsk_stack *s, struct rsk_stack_node **out)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r;
	int idx;

	if (RSK_PERCPU_UNLIKELY(s == NULL || out == NULL))
		return -EINVAL;
	r = rsk_stack_try_pop_(s, out, &idx, off);
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		return 0;
	if (r == RSK_EMPTY)
		return -ENOENT;
	{
		/* Through a local: out's target stays out of memory on the
		 * fast path (its address does not escape to the call). */
		struct rsk_stack_node *got;
		int ret = rsk_stack_slow_(s, RSK_STACK_POP_, NULL, &got, r);

		*out = got;
		return ret;
	}
}

/*
 * rsk_stack_pop_all - take the whole list of the current CPU's part: *out
 * gets its top node (the rest linked through next, NULL-terminated).
 * Returns 0, -ENOENT (empty; *out = NULL), -EINVAL.
 * Lock-free on the fast path.
 */
RSK_PERCPU_INLINE int rsk_stack_pop_all(struct rsk_stack *s, struct rsk_stack_node **out)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r;
	int idx;

	if (RSK_PERCPU_UNLIKELY(s == NULL || out == NULL))
		return -EINVAL;
	r = rsk_stack_try_pop_all_(s, out, &idx, off);
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		return 0;
	if (r == RSK_EMPTY)
		return -ENOENT;
	{
		/* Through a local: out's target stays out of memory on the
		 * fast path (its address does not escape to the call). */
		struct rsk_stack_node *got;
		int ret = rsk_stack_slow_(s, RSK_STACK_POP_ALL_, NULL, &got, r);

		*out = got;
		return ret;
	}
}

/*
 * rsk_stack_pop_all_cpu - take the whole list of part `cpu` (any CPU's),
 * while that CPU's threads keep operating: the part's gate is closed and
 * the CPU fenced meanwhile.  Returns 0 (*out = top node), -ENOENT (empty;
 * *out = NULL), -EINVAL (s or out NULL, cpu outside [0, s->nr)), -ENXIO
 * (the fence failed), -EDEADLK (from a handler whose thread holds that
 * part's gate), -EOWNERDEAD (the gate's holder is gone).
 */
int rsk_stack_pop_all_cpu(struct rsk_stack *s, int cpu, struct rsk_stack_node **out);

/*
 * rsk_stack_push_cpu - push node on part `cpu` (any CPU's), as safely as
 * rsk_stack_pop_all_cpu(): with it, nodes move between CPUs.  Returns 0,
 * -EINVAL (s or node NULL, cpu outside [0, s->nr)), or as
 * rsk_stack_pop_all_cpu() -ENXIO, -EDEADLK, -EOWNERDEAD: node not pushed.
 */
int rsk_stack_push_cpu(struct rsk_stack *s, int cpu, struct rsk_stack_node *node);

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_STACK_H */
