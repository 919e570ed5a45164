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

/* The one place that decides what lock does without a critical section:
 * nothing yet (the progress protocol will take the lock with an atomic
 * compare-and-swap on a stopped part). */
RSK_EXPORT int rsk_spinlock_slow_(struct rsk_spinlock *l)
{
	(void)l;
	return -ENOSYS;
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
