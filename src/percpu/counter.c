/* SPDX-License-Identifier: MIT */
/* Per-CPU counter: creation, readers and the slow path (see counter.h). */
#include <errno.h>
#include <sched.h>
#include "internal.h"

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

/* What one operation does: add `count` (the slow path's add). */
struct counter_op {
	intptr_t count;
};

static enum rsk_result counter_attempt(void *s, void *arg, int *idx)
{
	return rsk_counter_try_(s, ((struct counter_op *)arg)->count, idx, rsk_area_offset_());
}

/* A thread that cannot run a section adds to the spill word of the part
 * rsk_percpu_spill_index_() chose (the current CPU's): atomic, beside the
 * sections (which never write it). */
static enum rsk_result counter_spill(void *s, int idx, void *arg)
{
	struct rsk_counter_part *p = &((struct rsk_counter *)s)->part[idx];

	rsk_spill_add_(&p->spill, ((struct counter_op *)arg)->count);
	return RSK_OK;
}

static const struct rsk_percpu_kind counter_kind = {
	.name = "rsk_counter",
	.attempt = counter_attempt,
	.locked = counter_spill,
	.gate = NULL, /* the sections need none: see counter.h */
};

/* The slow path where threads run sections: the framework's retries,
 * then the spill add. */
static __attribute__((noinline)) int counter_slow_general(struct rsk_counter *c, intptr_t count,
							 enum rsk_result first)
{
	struct counter_op op = { .count = count };
	int ret;

	/* The framework returns the part's index: the add returns 0. */
	ret = rsk_percpu_slow(c, &counter_kind, &op, first);
	return ret < 0 ? ret : 0;
}

RSK_EXPORT int rsk_counter_slow_(struct rsk_counter *c, intptr_t count, enum rsk_result first)
{
	/* No thread of the process runs sections (no rseq: fast_nr_ is 0),
	 * so there is nothing to retry or register: the spill add at once,
	 * on the current CPU's part.  This is every add of such a process,
	 * the fallback's fast path: no frame beyond this one, the CPU looked
	 * up once (rsk_percpu_spill_index_() where it is not simple). */
	if (first == RSK_NO_INDEX && c->fast_nr_ == 0 &&
	    rsk_percpu_alive_((const struct rsk_percpu_head *)(const void *)c)) {
		int idx = -1;

		if (__builtin_expect(!rsk_process.check_threads, 1))
			idx = sched_getcpu();
		if (__builtin_expect((unsigned)idx >= (unsigned)c->nr, 0))
			idx = rsk_percpu_spill_index_(c->mode, c->nr);
		rsk_spill_add_(&c->part[idx].spill, count);
		rsk_count_slow_path_(idx);
		return 0;
	}
	return counter_slow_general(c, count, first);
}

/* count + spill: every add to the part so far, in wrapping arithmetic. */
static uintptr_t part_adds(const struct rsk_counter_part *p)
{
	return (uintptr_t)__atomic_load_n(&p->count, __ATOMIC_RELAXED) +
	       (uintptr_t)__atomic_load_n(&p->spill, __ATOMIC_RELAXED);
}

/* The part's value.  base is loaded first, with acquire: if it is an
 * exchange's new base, count and spill are read after that exchange read
 * them (its store of base is a release), so the value is the exchanged-in
 * value plus later adds, never less. */
static intptr_t part_value(const struct rsk_counter_part *p)
{
	uintptr_t base = (uintptr_t)__atomic_load_n(&p->base, __ATOMIC_ACQUIRE);

	return (intptr_t)(part_adds(p) - base);
}

/* Exact without stopping the adds: the adds seen by the one read of count
 * and spill make the old value; base moves so that the part's value is
 * `value` plus whatever is added after that read. */
RSK_EXPORT int rsk_counter_exchange(struct rsk_counter *c, int cpu, intptr_t value, intptr_t *old)
{
	struct rsk_counter_part *p;
	uintptr_t adds;
	int err;

	if (c == NULL || old == NULL || (unsigned)cpu >= (unsigned)c->nr ||
	    !rsk_percpu_alive_((const struct rsk_percpu_head *)(const void *)c))
		return -EINVAL;
	p = &c->part[cpu];
	err = rsk_lock_take_(&p->lock, "rsk_counter", c);
	if (err != 0)
		return err;
	adds = part_adds(p);
	*old = (intptr_t)(adds - (uintptr_t)__atomic_load_n(&p->base, __ATOMIC_RELAXED));
	__atomic_store_n(&p->base, (intptr_t)(adds - (uintptr_t)value), __ATOMIC_RELEASE);
	rsk_lock_drop_(&p->lock);
	return 0;
}

RSK_EXPORT int rsk_counter_read(const struct rsk_counter *c, int cpu, intptr_t *value)
{
	if (c == NULL || value == NULL || (unsigned)cpu >= (unsigned)c->nr)
		return -EINVAL;
	*value = part_value(&c->part[cpu]);
	return 0;
}

RSK_EXPORT int rsk_counter_sum(const struct rsk_counter *c, intptr_t *sum)
{
	uintptr_t s = 0;

	if (c == NULL || sum == NULL)
		return -EINVAL;
	for (int i = 0; i < c->nr; i++)
		s += (uintptr_t)part_value(&c->part[i]);
	*sum = (intptr_t)s;
	return 0;
}

/* Every part, even after a part's lock failed: the first error is
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
