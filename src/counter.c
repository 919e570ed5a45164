/* SPDX-License-Identifier: MIT */
/* Per-CPU counter: creation, readers and the slow path (see counter.h). */
#include <errno.h>
#include "internal.h"

RSK_PERCPU_GUARDED_(struct rsk_counter);

static size_t counter_size(int nr)
{
	return sizeof(struct rsk_counter) + (size_t)nr * sizeof(struct rsk_counter_part);
}

RSK_EXPORT int rsk_counter_create(struct rsk_counter **out, enum rsk_index_mode mode)
{
	struct rsk_counter *c;

	if (out == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID))
		return -EINVAL;
	c = rsk_percpu_create(counter_size(rsk_possible_cpus()), mode);
	if (c == NULL)
		return -ENOMEM;
	*out = c;
	return 0;
}

RSK_EXPORT int rsk_counter_destroy(struct rsk_counter *c)
{
	return c == NULL ? -EINVAL : rsk_percpu_destroy(c, counter_size(c->nr));
}

/* What one operation does: add `count`, or (exchange) take the value and
 * store `replace`. */
struct counter_op {
	intptr_t count, replace;
	intptr_t *old; /* non-NULL: exchange */
};

static enum rsk_try counter_attempt(void *s, void *arg, int *idx)
{
	return rsk_counter_try_(s, ((struct counter_op *)arg)->count, idx, rsk_area_offset_());
}

/* Plain code: with the gate closed and the CPU fenced, no section touches
 * the part (the relaxed atomics are for concurrent readers). */
static enum rsk_try counter_locked(void *s, int idx, void *arg)
{
	struct rsk_counter_part *p = &((struct rsk_counter *)s)->part[idx];
	struct counter_op *op = arg;
	intptr_t v = __atomic_load_n(&p->count, __ATOMIC_RELAXED);

	if (op->old != NULL)
		*op->old = v;
	else
		op->replace = (intptr_t)((uintptr_t)v + (uintptr_t)op->count);
	__atomic_store_n(&p->count, op->replace, __ATOMIC_RELAXED);
	return RSK_TRY_DONE;
}

static intptr_t *counter_gate(void *s, int idx)
{
	return &((struct rsk_counter *)s)->part[idx].gate;
}

static const struct rsk_percpu_kind counter_kind = {
	.name = "rsk_counter",
	.attempt = counter_attempt,
	.locked = counter_locked,
	.gate = counter_gate,
};

RSK_EXPORT int rsk_counter_slow_(struct rsk_counter *c, intptr_t count, enum rsk_try first)
{
	struct counter_op op = { .count = count };

	return rsk_percpu_slow(c, &counter_kind, &op, first);
}

RSK_EXPORT int rsk_counter_exchange(struct rsk_counter *c, int cpu, intptr_t value, intptr_t *old)
{
	struct counter_op op = { .replace = value, .old = old };

	if (old == NULL)
		return -EINVAL;
	return rsk_percpu_on_cpu(c, &counter_kind, cpu, &op);
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

/* Every part, even after a part's fence failed: the first error is
 * reported, the other parts are reset. */
RSK_EXPORT int rsk_counter_reset(struct rsk_counter *c)
{
	intptr_t old;
	int first = 0;

	if (c == NULL)
		return -EINVAL;
	for (int i = 0; i < c->nr; i++) {
		int err = rsk_counter_exchange(c, i, 0, &old);
		if (err != 0 && first == 0)
			first = err;
	}
	return first;
}
