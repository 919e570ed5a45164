/* SPDX-License-Identifier: MIT */
/* Per-CPU spinlock: creation, contended wait, slow path (see spinlock.h). */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

RSK_EXPORT int rsk_spinlock_create(struct rsk_spinlock **out, enum rsk_index_mode mode)
{
	struct rsk_spinlock *l;
	size_t size;
	int nr;

	if (out == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID))
		return -EINVAL;
	nr = rsk_possible_cpus();
	size = sizeof(*l) + (size_t)nr * sizeof(l->part[0]);
	l = aligned_alloc(RSK_PERCPU_ALIGN, size);
	if (l == NULL)
		return -ENOMEM;
	memset(l, 0, size);
	l->mode = rsk_percpu_effective_mode_(mode);
	l->nr = nr;
	*out = l;
	return 0;
}

RSK_EXPORT int rsk_spinlock_destroy(struct rsk_spinlock *l)
{
	if (l == NULL)
		return -EINVAL;
	free(l);
	return 0;
}

/* The one place that takes a lock without a critical section: under the
 * part's gate, the lock word is ours to test and set with plain code.
 * A held lock is waited for with the gate open (its holder unlocks with a
 * plain store from anywhere, and other threads must keep going). */
static int lock_gated(struct rsk_spinlock *l)
{
	for (unsigned round = 0;; round++) {
		int idx = rsk_percpu_slow_index(l->mode, l->nr);
		struct rsk_spinlock_part *p = &l->part[idx];
		int err = rsk_gate_close(&p->gate, l->mode, idx);

		if (round == 0)
			rsk_note_slow_path_at(idx);
		if (err != 0)
			return err;
		/* Acquire: pairs with the last holder's releasing unlock. */
		if (__atomic_load_n(&p->locked, __ATOMIC_ACQUIRE) == 0) {
			__atomic_store_n(&p->locked, 1, __ATOMIC_RELAXED);
			rsk_gate_open(&p->gate);
			return idx;
		}
		rsk_gate_open(&p->gate);
		rsk_spinlock_wait_(l, idx, round);
	}
}

RSK_EXPORT int rsk_spinlock_slow_(struct rsk_spinlock *l, int idx, int ret)
{
	unsigned round = 0, aborts = 0;

	while (rsk_percpu_again(ret, &aborts)) {
		if (ret == RSK_CMPFAIL)
			rsk_spinlock_wait_(l, idx, round++);
		ret = rsk_spinlock_try_(l, &idx);
		if (ret == RSK_OK) {
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			return idx;
		}
	}
	return lock_gated(l);
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
