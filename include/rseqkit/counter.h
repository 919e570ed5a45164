/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/counter.h - per-CPU counter.
 *
 * One intptr_t per CPU part; rsk_counter_add() is one restartable add on
 * the current CPU's part (no lock prefix, no shared cache line, no gate),
 * the readers sum the parts.
 *
 * A part's value is count + spill - base.  Only sections on the part's
 * CPU write `count`; a thread that cannot run a section (no rseq, not
 * registered, too many aborts) adds to `spill` with an atomic add; an
 * exchange moves `base` under the part's lock.  So no add ever waits for
 * a gate or a fence, and an exchange takes no fence either: it reads
 * count and spill once and sets base so that what came before those
 * reads is the old value, everything after the new one.
 *
 * Synchronization (see also <rseqkit/percpu.h>):
 *
 *   operation              may run concurrently with    ordering
 *   ---------------------  ---------------------------  ---------------------
 *   rsk_counter_add        everything                   none (relaxed)
 *   rsk_counter_read       everything                   relaxed loads; beside
 *                                                       an exchange of that
 *                                                       part, the value
 *                                                       before or after it
 *   rsk_counter_sum        everything                   as read, part by
 *                                                       part; not a
 *                                                       snapshot: adds during
 *                                                       the walk may or may
 *                                                       not be counted
 *   rsk_counter_exchange   everything                   exact: every add is
 *                                                       in the old value or
 *                                                       in the new one, once
 *                                                       (the part's lock
 *                                                       orders exchanges)
 *   rsk_counter_reset      everything                   each part exact, as
 *                                                       exchange; not one
 *                                                       snapshot of all
 *   rsk_counter_create     -                            -
 *   rsk_counter_destroy    nothing                      -
 *
 * Injection points (test builds): 7 between reading the index and the
 * section.
 */
#ifndef RSEQKIT_COUNTER_H
#define RSEQKIT_COUNTER_H

#include <rseqkit/percpu.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsk_counter_part {
	intptr_t count; /* written by sections on this part's CPU only */
	intptr_t spill; /* atomic adds of threads without a section */
	intptr_t base;	/* subtracted: moved by exchanges, under lock */
	intptr_t lock;	/* orders exchanges (a gate without a fence) */
} __attribute__((aligned(RSK_PERCPU_ALIGN)));

struct rsk_counter {
	RSK_PERCPU_HEAD; /* mode, nr: read-only */
	RSK_PERCPU_FLEX_BEGIN_ struct rsk_counter_part part[]; RSK_PERCPU_FLEX_END_
};

/*
 * rsk_counter_create - allocate a counter, zeroed, with one part per
 * possible CPU, indexed by `mode` (RSK_INDEX_CID becomes RSK_INDEX_CPU
 * where the kernel has no mm_cid).  Stores it in *out.
 * Returns 0, -EINVAL (out NULL, unknown mode), -ENOMEM.
 */
int rsk_counter_create(struct rsk_counter **out, enum rsk_index_mode mode);

/* rsk_counter_destroy - free c.  No operation may be running on it.
 * Returns 0, or -EINVAL if c is NULL or destroyed already. */
int rsk_counter_destroy(struct rsk_counter *c);

/* Not API: one attempt of rsk_counter_add (RSK_OK with *idx set). */
RSK_PERCPU_INLINE enum rsk_result rsk_counter_try_(struct rsk_counter *c, intptr_t count, int *idx,
						ptrdiff_t off)
{
	enum rsk_result r;
	uintptr_t pos = 0; /* (0: clang-tidy misses the exits) */

	RSK_INJECT_C(7);
	r = RSK_PERCPU_ADD_(c, struct rsk_counter, off, pos, count, count);
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		*idx = rsk_percpu_pos_index_(pos);
	return r;
}

/* Not API: rsk_counter_add after a first attempt that returned `first`. */
int rsk_counter_slow_(struct rsk_counter *c, intptr_t count, enum rsk_result first);

/*
 * rsk_counter_add - add count (any sign) to the current CPU's part.
 * Returns 0, or -EINVAL if c is NULL or destroyed (seen on the slow
 * path): the part added to is not returned (rsk_cpu() tells the CPU).  One restartable add; without rseq,
 * or after too many aborts, the slow path adds with one atomic add to the
 * spill word of the part of the CPU it runs on (sched_getcpu()): it never
 * waits.  Async-signal-safe, also in a
 * handler that interrupted an operation of its own thread on c.
 */
RSK_PERCPU_INLINE int rsk_counter_add(struct rsk_counter *c, intptr_t count)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r;
	int idx;

	/* No rseq: straight to the slow path, tested first.  In the
	 * section's statement (where it stays for the try_ callers, and
	 * folds away here) its exit joins the section's, and gcc then
	 * copies a register back and forth in every pass of a caller's
	 * loop of adds; ahead of the NULL test, gcc and clang both take it
	 * out of such a loop. */
	if (RSK_PERCPU_UNLIKELY(off == 0))
		return c == NULL ? -EINVAL : rsk_counter_slow_(c, count, RSK_NO_INDEX);
	if (RSK_PERCPU_UNLIKELY(c == NULL))
		return -EINVAL;
	r = rsk_counter_try_(c, count, &idx, off);
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		return 0;
	return rsk_counter_slow_(c, count, r);
}

/*
 * rsk_counter_read - *value = the part of CPU index `cpu`.
 * Returns 0, -EINVAL (c or value NULL, cpu outside [0, c->nr)).
 */
int rsk_counter_read(const struct rsk_counter *c, int cpu, intptr_t *value);

/*
 * rsk_counter_sum - *sum = the sum over all parts (wrapping like intptr_t
 * would, computed unsigned).  Returns 0, -EINVAL (c or sum NULL).
 */
int rsk_counter_sum(const struct rsk_counter *c, intptr_t *sum);

/*
 * rsk_counter_exchange - replace the value of part `cpu` with `value` and
 * store the old one in *old, exactly: no add is lost or counted twice,
 * while other threads keep adding (no fence: the adds are not stopped).
 * Returns 0, -EINVAL (c or old NULL, cpu outside [0, c->nr)), -EDEADLK
 * (called from a handler whose thread is in an exchange of that part),
 * -EOWNERDEAD (a thread that died in an exchange of that part holds its
 * lock): nothing changed on an error.
 */
int rsk_counter_exchange(struct rsk_counter *c, int cpu, intptr_t value, intptr_t *old);

/*
 * rsk_counter_reset - set every part to 0, each exactly as
 * rsk_counter_exchange() does, while other threads may keep adding.  It
 * goes on past a part whose lock fails (-EDEADLK, -EOWNERDEAD), resets
 * the others and returns the first error; 0 when every part was reset,
 * -EINVAL if c is NULL.
 */
int rsk_counter_reset(struct rsk_counter *c);

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_COUNTER_H */
