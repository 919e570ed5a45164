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
#include <rseqkit/slice.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsk_spinlock_part {
	intptr_t locked;  /* 0 free; held: 1 (a section took it) or the
			     slow-path holder's tag */
	intptr_t gate;	  /* always 0: the lock word is its own gate */
	intptr_t slice;	  /* the holder's rsk_slice_t (where the extension is offered) */
	intptr_t owner;	  /* RSEQKIT_DEBUG=spinlock: the holder's thread id, else 0 */
} __attribute__((aligned(RSK_PERCPU_ALIGN)));

struct rsk_spinlock {
	RSK_PERCPU_HEAD; /* mode, nr: read-only */
	RSK_PERCPU_FLEX_BEGIN_ struct rsk_spinlock_part part[]; RSK_PERCPU_FLEX_END_
};

/*
 * rsk_spinlock_create - allocate a per-CPU lock, every part free.
 * Returns 0, -EINVAL (out NULL, unknown mode), -ENOMEM.
 */
int rsk_spinlock_create(struct rsk_spinlock **out, enum rsk_index_mode mode);

/* rsk_spinlock_destroy - free l; no lock may be held or wanted.
 * Returns 0, or -EINVAL if l is NULL or destroyed already. */
int rsk_spinlock_destroy(struct rsk_spinlock *l);

/* Not API: for ThreadSanitizer, a lock taken in a section acquires what
 * the unlock (an atomic release store on the same word) released. */
#define RSK_SPINLOCK_TSAN_TAKEN_(l, pos)                                       \
	RSK_TSAN_ACQUIRE((char *)(l) + RSK_PERCPU_VDISP_(struct rsk_spinlock, locked) + (pos))

/* Not API: one attempt of rsk_spinlock_lock (RSK_OK with *idx set;
 * RSK_CMPFAIL: the lock of the thread's part is held). */
RSK_PERCPU_INLINE enum rsk_result rsk_spinlock_try_(struct rsk_spinlock *l, int *idx, ptrdiff_t off)
{
	enum rsk_result r;
	uintptr_t pos = 0; /* (0: clang-tidy misses the exits) */

	RSK_INJECT_C(7);
	r = RSK_PERCPU_CAS_UNGATED_(l, struct rsk_spinlock, off, pos, locked, 0, 1);
	if (RSK_PERCPU_LIKELY(r == RSK_OK)) {
		RSK_SPINLOCK_TSAN_TAKEN_(l, pos);
		*idx = rsk_percpu_pos_index_(pos);
	}
	return r;
}

/* Not API: rsk_spinlock_lock after a first attempt that returned `first`
 * (waits and retries, then the slow path); and the contended wait (spins,
 * then yields the CPU so a preempted holder runs). */
int rsk_spinlock_slow_(struct rsk_spinlock *l, enum rsk_result first);
void rsk_spinlock_wait_(struct rsk_spinlock *l, int idx, unsigned round);
/* Not API: lock and unlock with the holder's time-slice extension region,
 * where the kernel offers it. */
int rsk_spinlock_lock_slice_(struct rsk_spinlock *l);
int rsk_spinlock_unlock_slice_(struct rsk_spinlock *l, int cpu);

/*
 * rsk_spinlock_lock - take the lock of the current CPU's part.
 * Returns its index (>= 0; pass it to rsk_spinlock_unlock), -EINVAL if l
 * is NULL, -ENXIO (a slow path's fence failed), -EDEADLK (the part's
 * word holds the calling thread's own slow-path tag: a signal handler on
 * top of its thread's slow-path lock of that part; or, with
 * RSEQKIT_DEBUG=spinlock, the calling thread holds a lock of l already,
 * reported on stderr): no lock taken then.
 * Blocking: spins, yielding the CPU while the lock stays held.  In a
 * process without rseq the lock is a compare-and-swap; where the thread
 * cannot run a section, or after too many aborts, the slow path takes the
 * lock word itself: a compare-and-swap 0 -> a tag of the thread's own, a
 * fence (rsk_fence_cpu(), every CPU in RSK_INDEX_CID mode), then the word
 * must still be the tag (else a section committed before the fence and
 * holds the lock).  No section tests a gate.  A signal handler may call it
 * only where the code it interrupted cannot hold one of this lock's parts
 * (it would wait for itself).  A lock held at fork() or at thread exit
 * stays held.
 */
RSK_PERCPU_INLINE int rsk_spinlock_lock(struct rsk_spinlock *l)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r;
	int idx;

	if (RSK_PERCPU_UNLIKELY(l == NULL))
		return -EINVAL;
	/* Where the kernel offers the time-slice extension, the holder asks
	 * not to be preempted while it holds the lock, and with
	 * RSEQKIT_DEBUG=spinlock the lock checks its holder: the library's
	 * copy of this function.  Elsewhere this test is all. */
	if (RSK_PERCPU_UNLIKELY(rsk_fast.lock_slow))
		return rsk_spinlock_lock_slice_(l);
	r = rsk_spinlock_try_(l, &idx, off);
	if (RSK_PERCPU_LIKELY(r == RSK_OK)) {
		/* Nothing of the critical section may move above the commit
		 * that took the lock. */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		return idx;
	}
	return rsk_spinlock_slow_(l, r);
}

/*
 * rsk_spinlock_unlock - release the lock of index `cpu` (the value
 * rsk_spinlock_lock returned), from any CPU.  Release ordering: every
 * load and store of the critical section happens before the lock is seen
 * free.  Returns 0, -EINVAL (l NULL, cpu outside [0, l->nr)).  Unlocking
 * a lock that is not held is not detected: one store, as a hand-written
 * unlock (a free lock stays free; one held by another thread is released,
 * the caller's bug).  With RSEQKIT_DEBUG=spinlock it is: an unlock of a
 * lock the calling thread does not hold (a free one: a double unlock) is
 * reported on stderr and returns -EPERM, the lock left as it was.
 */
RSK_PERCPU_INLINE int rsk_spinlock_unlock(struct rsk_spinlock *l, int cpu)
{
	struct rsk_spinlock_part *p;

	if (RSK_PERCPU_UNLIKELY(l == NULL || (unsigned)cpu >= (unsigned)l->nr))
		return -EINVAL;
	if (RSK_PERCPU_UNLIKELY(rsk_fast.lock_slow))
		return rsk_spinlock_unlock_slice_(l, cpu);
	p = RSK_PERCPU_PART_(l, (unsigned)cpu);
	__atomic_store_n(&p->locked, 0, __ATOMIC_RELEASE);
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_SPINLOCK_H */
