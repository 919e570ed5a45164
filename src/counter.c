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

/* Add count to part idx under its gate (or, with old, exchange its value
 * for `replace`); returns idx or the gate's error.  Plain code: with the
 * gate closed and the CPU fenced, no section touches the part (the
 * relaxed atomics are for concurrent readers). */
static int update_locked(struct rsk_counter *c, int idx, intptr_t count, intptr_t replace,
			 intptr_t *old)
{
	struct rsk_counter_part *p = &c->part[idx];
	int err = rsk_gate_close(&p->gate, c->mode, idx);
	intptr_t v;

	if (err != 0)
		return err;
	v = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
	if (old != NULL)
		*old = v;
	else
		replace = (intptr_t)((uintptr_t)v + (uintptr_t)count);
	__atomic_store_n(&p->count, replace, __ATOMIC_RELAXED);
	rsk_gate_open(&p->gate);
	return idx;
}

RSK_EXPORT int rsk_counter_slow_(struct rsk_counter *c, intptr_t count, int ret)
{
	unsigned aborts = 0;
	int idx = -1;

	while (rsk_percpu_again(ret, &aborts)) {
		ret = rsk_counter_try_(c, count, &idx);
		if (ret == RSK_OK)
			return idx;
	}
	/* The one place that adds without a critical section. */
	idx = rsk_percpu_slow_index(c->mode, c->nr);
	rsk_note_slow_path_at(idx);
	return update_locked(c, idx, count, 0, NULL);
}

RSK_EXPORT int rsk_counter_exchange(struct rsk_counter *c, int cpu, intptr_t value, intptr_t *old)
{
	int ret;

	if (c == NULL || old == NULL || (unsigned)cpu >= (unsigned)c->nr)
		return -EINVAL;
	ret = update_locked(c, cpu, 0, value, old);
	return ret < 0 ? ret : 0;
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
	intptr_t old;

	if (c == NULL)
		return -EINVAL;
	for (int i = 0; i < c->nr; i++) {
		int err = rsk_counter_exchange(c, i, 0, &old);
		if (err != 0)
			return err;
	}
	return 0;
}
