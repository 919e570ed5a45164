/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/spinlock.h - per-CPU spinlock.
 *
 * One lock word per CPU part.  rsk_spinlock_lock() takes the lock of the
 * CPU the thread runs on (a restartable compare-and-store 0 -> 1, no
 * atomic instruction) and returns that CPU's index: the caller then works
 * on the data of that index, even if it migrates meanwhile - the lock, not
 * the CPU, protects the data.  Threads contend only with threads that ran
 * on the same CPU when they locked.
 *
 * Synchronization:
 *
 *   operation              may run concurrently with    ordering
 *   ---------------------  ---------------------------  ---------------------
 *   rsk_spinlock_lock      lock, unlock                 acquire (after the
 *                                                       lock is taken)
 *   rsk_spinlock_unlock    lock, unlock (other index)   release
 *   rsk_spinlock_create    -                            -
 *   rsk_spinlock_destroy   nothing                      -
 *
 * A thread must not take a second lock of the same structure while it
 * holds one (it could be the same CPU's lock: deadlock), nor take it from
 * a signal handler that may interrupt a holder.
 *
 * Injection points (test builds): 7 between reading the index and the
 * section.
 */
#ifndef RSEQKIT_SPINLOCK_H
#define RSEQKIT_SPINLOCK_H

#include <rseqkit/percpu.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsk_spinlock_part {
	intptr_t locked;  /* 0 free, 1 held */
	intptr_t gate;	  /* the progress protocol's gate */
} __attribute__((aligned(RSK_PERCPU_ALIGN)));

struct rsk_spinlock {
	enum rsk_index_mode mode; /* read-only: the mode in effect */
	int nr;			  /* read-only: number of parts */
	struct rsk_spinlock_part part[];
};

/*
 * rsk_spinlock_create - allocate a per-CPU lock, every part free.
 * Returns 0, -EINVAL (out NULL, unknown mode), -ENOMEM.
 */
int rsk_spinlock_create(struct rsk_spinlock **out, enum rsk_index_mode mode);

/* rsk_spinlock_destroy - free l; no lock may be held or wanted.
 * Returns 0, or -EINVAL if l is NULL. */
int rsk_spinlock_destroy(struct rsk_spinlock *l);

/* Not API: one attempt of rsk_spinlock_lock (RSK_OK with *idx set). */
RSK_PERCPU_INLINE int rsk_spinlock_try_(struct rsk_spinlock *l, int *idx)
{
	struct rsk_abi_area *area = rsk_percpu_area_(l->mode, l->nr, idx);

	if (RSK_PERCPU_UNLIKELY(area == NULL))
		return RSK_STOPPED;
	RSK_INJECT_C(7);
	return RSK_PERCPU_OP_(cmpstore, l->mode, area, *idx, &l->part[*idx].gate,
			      &l->part[*idx].locked, 0, 1);
}

/* Not API: rsk_spinlock_lock after a first attempt on part idx that
 * returned `ret` (waits and retries, then the slow path); and the
 * contended wait (spins, then yields the CPU so a preempted holder runs). */
int rsk_spinlock_slow_(struct rsk_spinlock *l, int idx, int ret);
void rsk_spinlock_wait_(struct rsk_spinlock *l, int idx, unsigned round);

/*
 * rsk_spinlock_lock - take the lock of the current CPU's part.
 * Returns its index (>= 0; pass it to rsk_spinlock_unlock), -EINVAL if l
 * is NULL (or a slow path's fence failed: no lock taken).  Blocking: spins,
 * yielding the CPU while the lock stays held.  Without rseq, or after too
 * many aborts, the slow path takes the lock under the part's gate.
 */
RSK_PERCPU_INLINE int rsk_spinlock_lock(struct rsk_spinlock *l)
{
	int idx = -1, ret;

	if (RSK_PERCPU_UNLIKELY(l == NULL))
		return -EINVAL;
	ret = rsk_spinlock_try_(l, &idx);
	if (RSK_PERCPU_LIKELY(ret == RSK_OK)) {
		/* Nothing of the critical section may move above the
		 * commit that took the lock. */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		return idx;
	}
	return rsk_spinlock_slow_(l, idx, ret);
}

/*
 * rsk_spinlock_unlock - release the lock of index `cpu` (the value
 * rsk_spinlock_lock returned), from any CPU.  Release ordering: every
 * load and store of the critical section happens before the lock is seen
 * free.  Returns 0, -EINVAL (l NULL, cpu outside [0, l->nr), or that lock
 * is not held).
 */
RSK_PERCPU_INLINE int rsk_spinlock_unlock(struct rsk_spinlock *l, int cpu)
{
	if (RSK_PERCPU_UNLIKELY(l == NULL || (unsigned)cpu >= (unsigned)l->nr))
		return -EINVAL;
	if (RSK_PERCPU_UNLIKELY(__atomic_load_n(&l->part[cpu].locked, __ATOMIC_RELAXED) != 1))
		return -EINVAL;
	__atomic_store_n(&l->part[cpu].locked, 0, __ATOMIC_RELEASE);
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_SPINLOCK_H */
