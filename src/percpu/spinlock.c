/* SPDX-License-Identifier: MIT */
/* Per-CPU spinlock: creation, contended wait, slow path (see spinlock.h). */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "internal.h"

RSK_PERCPU_GUARDED_(struct rsk_spinlock);

static size_t spinlock_size(int nr)
{
	return sizeof(struct rsk_spinlock) + (size_t)nr * sizeof(struct rsk_spinlock_part);
}

RSK_EXPORT int rsk_spinlock_create(struct rsk_spinlock **out, enum rsk_index_mode mode)
{
	struct rsk_spinlock *l;

	if (out == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID))
		return -EINVAL;
	l = rsk_percpu_create(spinlock_size(rsk_possible_cpus()), mode);
	if (l == NULL)
		return -ENOMEM;
	*out = l;
	return 0;
}

RSK_EXPORT int rsk_spinlock_destroy(struct rsk_spinlock *l)
{
	return l == NULL ? -EINVAL : rsk_percpu_destroy(l, spinlock_size(l->nr));
}

static enum rsk_result spinlock_attempt(void *s, void *arg, int *idx)
{
	(void)arg;
	return rsk_spinlock_try_(s, idx, rsk_area_offset_());
}

/* Where sections run, the one place that takes a lock without a critical
 * section (spinlock_lock_atomic() below serves processes where none runs):
 * under the part's gate, the lock word is ours to test and set with plain
 * code.  A
 * held lock is waited for with the gate open (its holder unlocks with a
 * plain store from anywhere, and other threads must keep going). */
static enum rsk_result spinlock_locked(void *s, int idx, void *arg)
{
	struct rsk_spinlock_part *p = &((struct rsk_spinlock *)s)->part[idx];

	(void)arg;
	/* Acquire: pairs with the last holder's releasing unlock. */
	if (__atomic_load_n(&p->locked, __ATOMIC_ACQUIRE) != 0)
		return RSK_CMPFAIL;
	__atomic_store_n(&p->locked, 1, __ATOMIC_RELAXED);
	return RSK_OK;
}

static intptr_t *spinlock_gate(void *s, int idx)
{
	return &((struct rsk_spinlock *)s)->part[idx].gate;
}

static void spinlock_wait(void *s, int idx, unsigned round)
{
	rsk_spinlock_wait_(s, idx, round);
}

static const struct rsk_percpu_kind spinlock_kind = {
	.name = "rsk_spinlock",
	.attempt = spinlock_attempt,
	.locked = spinlock_locked,
	.gate = spinlock_gate,
	.wait = spinlock_wait,
};

/*
 * No thread of the process runs sections (no rseq: fast_nr_ is 0, decided
 * once at initialisation), so nothing but atomics ever touches the lock
 * words: the lock is a compare-and-swap on the home part's word, as a
 * pthread spinlock, with no gate.  This is every lock of such a process,
 * the fallback's fast path.
 */
static int spinlock_lock_atomic(struct rsk_spinlock *l)
{
	int idx = rsk_percpu_slow_index(l->mode, l->nr);

	for (unsigned round = 0;; round++) {
		intptr_t free_word = 0;

		if (__atomic_compare_exchange_n(&l->part[idx].locked, &free_word, 1, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
		rsk_spinlock_wait_(l, idx, round);
	}
	rsk_note_slow_path_at(idx);
	return idx;
}

RSK_EXPORT int rsk_spinlock_slow_(struct rsk_spinlock *l, enum rsk_result first)
{
	int idx;

	if (first == RSK_NO_INDEX && l->fast_nr_ == 0 &&
	    rsk_percpu_alive_((const struct rsk_percpu_head *)(const void *)l))
		return spinlock_lock_atomic(l);
	idx = rsk_percpu_slow(l, &spinlock_kind, NULL, first);

	/* Nothing of the critical section may move above the commit that
	 * took the lock. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return idx;
}

/*
 * rsk_spinlock_lock() and _unlock() where the kernel offers the time-slice
 * extension: the holder is in a region (<rseqkit/slice.h>) from before the
 * commit that takes the lock until the unlock, its token kept in the
 * part.  A thread that has to wait for the lock ends the region first (it
 * would only spin longer), and the slow path's lock begins its own.  (Where
 * the extension is not offered, rsk_slice_begin() returns a token whose
 * end does nothing: these are then the plain lock and unlock.)
 */
static int lock_sliced(struct rsk_spinlock *l)
{
	ptrdiff_t off = rsk_area_offset_();
	rsk_slice_t slice = rsk_slice_begin();
	uintptr_t pos;
	enum rsk_result first;
	int idx;

	RSK_INJECT_C(7);
	RSK_PERCPU_CAS_(l, struct rsk_spinlock, off, pos, locked, 0, 1);
	RSK_SPINLOCK_TSAN_TAKEN_(l, pos);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	idx = rsk_percpu_pos_index_(pos);
	l->part[idx].slice = slice;
	return idx;
cmpfail:
	first = RSK_CMPFAIL;
	goto slow;
noindex:
	first = RSK_NO_INDEX;
	goto slow;
aborted:
	first = RSK_ABORTED;
	goto slow;
stopped:
	first = RSK_STOPPED;
slow:
	rsk_slice_end(slice);
	idx = rsk_spinlock_slow_(l, first);
	if (idx >= 0)
		l->part[idx].slice = rsk_slice_begin();
	return idx;
}

/*
 * RSEQKIT_DEBUG=spinlock: each part keeps its holder's thread id (a
 * system call, no TLS: these also run in signal handlers), so that a
 * thread that locks again while it holds a lock of the structure gets
 * -EDEADLK instead of spinning for ever (the lock it would wait for may be
 * its own), and an unlock by a thread that does not hold the part - a
 * double unlock included - is reported and refused with -EPERM (storing 0
 * would release another thread's lock).  Both are reported on stderr,
 * naming the structure.
 */
static intptr_t self_id(void)
{
	return (intptr_t)syscall(SYS_gettid);
}

RSK_EXPORT int rsk_spinlock_lock_slice_(struct rsk_spinlock *l)
{
	intptr_t me;
	int idx;

	if (!(rsk_debug_ & RSK_DEBUG_SPINLOCK_))
		return lock_sliced(l);
	if (!rsk_percpu_alive_((const struct rsk_percpu_head *)(const void *)l))
		return -EINVAL;
	me = self_id();
	for (int i = 0; i < l->nr; i++)
		if (__atomic_load_n(&l->part[i].owner, __ATOMIC_RELAXED) == me) {
			rsk_report_("spinlock ", l,
				    ": locked again by the thread that holds it: -EDEADLK");
			return -EDEADLK;
		}
	idx = lock_sliced(l);
	if (idx >= 0)
		__atomic_store_n(&l->part[idx].owner, me, __ATOMIC_RELAXED);
	return idx;
}

RSK_EXPORT int rsk_spinlock_unlock_slice_(struct rsk_spinlock *l, int cpu)
{
	struct rsk_spinlock_part *p;
	rsk_slice_t slice;

	if (l == NULL || (unsigned)cpu >= (unsigned)l->nr)
		return -EINVAL;
	p = &l->part[cpu];
	if (rsk_debug_ & RSK_DEBUG_SPINLOCK_) {
		if (__atomic_load_n(&p->owner, __ATOMIC_RELAXED) != self_id()) {
			rsk_report_("spinlock ", l,
				    __atomic_load_n(&p->locked, __ATOMIC_RELAXED) == 0
					    ? ": unlocked but not held (a double unlock?): -EPERM"
					    : ": unlocked by a thread that does not hold it: -EPERM");
			return -EPERM;
		}
		__atomic_store_n(&p->owner, 0, __ATOMIC_RELAXED);
	}
	/* Read before the release: the next holder writes it. */
	slice = (rsk_slice_t)p->slice;
	__atomic_store_n(&p->locked, 0, __ATOMIC_RELEASE);
	rsk_slice_end(slice);
	return 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/*
 * The lock of part idx was held.  Its holder is likely on this same CPU
 * but preempted, or migrated away: spinning here would only burn the
 * holder's time slice, so spin briefly, then yield.  Returns when the lock
 * looks free or after one yield; the caller re-reads its index.
 */
RSK_EXPORT void rsk_spinlock_wait_(struct rsk_spinlock *l, int idx, unsigned round)
{
	if ((unsigned)idx >= (unsigned)l->nr)
		return;
	if (round < 4) {
		for (int i = 0; i < 64; i++) {
			if (__atomic_load_n(&l->part[idx].locked, __ATOMIC_RELAXED) == 0)
				return;
			cpu_relax();
		}
	}
	sched_yield();
}
