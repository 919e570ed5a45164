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
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r = rsk_spinlock_try_(s, idx, off);

	(void)arg;
	/* Held: the part to wait for is the one of the thread's index (the
	 * section compared that part's word). */
	if (r == RSK_CMPFAIL)
		*idx = (int)rsk_arch_area_u32(rsk_arch_area_of(off),
					      ((struct rsk_spinlock *)s)->index_offset_);
	return r;
}

/*
 * Where sections run, the one place that takes a lock without a critical
 * section (spinlock_lock_atomic() below serves processes where none runs).
 * The lock word is its own gate, so that no section tests another word:
 *
 *   1. compare-and-swap 0 -> tag, a value of the calling thread's own
 *      (its thread id << 1: never 0 or 1, the values sections compare
 *      with and store);
 *   2. fence the CPUs where a section on this part may run (the part's
 *      CPU; every CPU in RSK_INDEX_CID mode): a section that read 0 before
 *      the swap and had not committed is restarted, and then reads the
 *      tag and finds the lock held;
 *   3. re-read the word: still the tag, the lock is ours.  Anything else
 *      means a section that read 0 before the swap committed its 1 before
 *      the fence: that section holds the lock, and this thread waits as
 *      for any held lock (it never stores to the word again).
 *
 * Only this thread writes its tag, and it writes it only over 0, so the
 * word cannot hold the tag again between 1 and 3 once something else
 * overwrote it.  A word that already holds the caller's own tag is its
 * own thread's hold (a signal handler on top of that thread's slow path,
 * or of a lock it took there): -EDEADLK, never a wait for itself.  fork()
 * waits for steps 1-3 (a hold), so a child sees a tag only where its
 * thread took the lock; a lock held at fork stays held.  If the fence
 * fails the word goes back to 0 where it is still the tag (a section that
 * read 0 before the swap may still commit over that 0: it then holds the
 * lock, as it would have) and the lock returns -ENXIO.
 *
 * Injection builds (the stress tool's negative control): with
 * RSEQKIT_INJECT_BROKEN_FOLD=fence the fence is left out, with =check the
 * re-read; either lets a section and a slow path hold one lock at once.
 */
#define FOLD_BUSY 1 /* fold_arg.err: the word was held */

struct fold_arg {
	int err;  /* 0, FOLD_BUSY, or a negative errno */
	int busy; /* FOLD_BUSY: the part that was held */
};

static intptr_t self_id(void)
{
	return (intptr_t)syscall(SYS_gettid);
}

#if RSK_INJECTING
static int broken_fold = -1; /* 0 none, 1 no fence, 2 no re-check */

static int fold_broken(void)
{
	int v = __atomic_load_n(&broken_fold, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *e = getenv("RSEQKIT_INJECT_BROKEN_FOLD");

		v = e == NULL ? 0 : !strcmp(e, "fence") ? 1 : !strcmp(e, "check") ? 2 : 0;
		__atomic_store_n(&broken_fold, v, __ATOMIC_RELAXED);
	}
	return v;
}
#else
#define fold_broken() 0
#endif

static enum rsk_result spinlock_fold(void *s, int idx, void *arg)
{
	struct rsk_spinlock *l = s;
	intptr_t *w = &l->part[idx].locked;
	intptr_t tag = self_id() << 1, free_word = 0;
	struct fold_arg *fa = arg;
	int err = 0, mine;

	if (__atomic_load_n(w, __ATOMIC_RELAXED) == tag) {
		fa->err = -EDEADLK;
		return RSK_CMPFAIL;
	}
	rsk_hold_enter_();
	/* Injection point 8, here and after the swap: the windows a migration
	 * (in RSK_INDEX_CPU mode the only way a section on this part runs
	 * beside this thread) and a section's commit must fall in for the
	 * fence and the re-check to matter. */
	RSK_INJECT_C(8);
	/* Acquire: pairs with the last holder's releasing unlock. */
	if (!__atomic_compare_exchange_n(w, &free_word, tag, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED)) {
		rsk_hold_leave_();
		fa->err = FOLD_BUSY;
		fa->busy = idx;
		return RSK_CMPFAIL;
	}
	RSK_INJECT_C(8);
	if (fold_broken() != 1)
		err = l->mode == RSK_INDEX_CPU ? rsk_fence_cpu(idx) : rsk_fence_all();
	if (err != 0) {
		intptr_t t = tag;
		__atomic_compare_exchange_n(w, &t, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		rsk_hold_leave_();
		fa->err = err;
		return RSK_CMPFAIL;
	}
	mine = fold_broken() == 2 || __atomic_load_n(w, __ATOMIC_RELAXED) == tag;
	rsk_hold_leave_();
	if (mine)
		return RSK_OK;
	fa->err = FOLD_BUSY;
	fa->busy = idx;
	return RSK_CMPFAIL;
}

static void spinlock_wait(void *s, int idx, unsigned round)
{
	rsk_spinlock_wait_(s, idx, round);
}

/* No gate: `locked` takes the word itself (above). */
static const struct rsk_percpu_kind spinlock_kind = {
	.name = "rsk_spinlock",
	.attempt = spinlock_attempt,
	.locked = spinlock_fold,
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
	for (unsigned round = 0;; round++) {
		struct fold_arg fa = {0, -1};

		idx = rsk_percpu_retry_(l, &spinlock_kind, &fa, first);
		if (idx >= 0)
			break;
		if (fa.err != FOLD_BUSY)
			return fa.err != 0 ? fa.err : idx;
		/* Held: wait, then sections again (the next attempt's
		 * result comes from rsk_spinlock_try_()). */
		rsk_spinlock_wait_(l, fa.busy, round);
		first = rsk_spinlock_try_(l, &idx, rsk_area_offset_());
		if (first == RSK_OK)
			break;
	}
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
	enum rsk_result first;
	int idx;

	first = rsk_spinlock_try_(l, &idx, off);
	if (RSK_PERCPU_LIKELY(first == RSK_OK)) {
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		l->part[idx].slice = slice;
		return idx;
	}
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
