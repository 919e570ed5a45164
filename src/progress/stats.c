/* SPDX-License-Identifier: MIT */
/*
 * The progress layer's statistics: the process totals (rsk_stats_process())
 * and the abort limit.  Each thread's own counts and the holder slots
 * that keep them are gate.c's.
 */
#include <errno.h>
#include <sys/mman.h>
#include "progress_internal.h"

/*
 * Process totals.  Each thread counts its events in its own holder slot
 * (below: one 128-byte slot per thread, kept when the thread exits and
 * reused by a later one, so nothing is lost), with plain stores: the
 * slow path of a process without rseq counts every operation, and an
 * atomic add per event costs as much as the operation.  rsk_stats_process()
 * sums the slots.  A thread without a slot of its own (none could be
 * mapped) counts with atomic adds in one 128-byte slot per CPU, mapped at
 * init (rsk_stats_init()), never later: an event may be counted inside a
 * signal handler that interrupted malloc.  Until then (or if mapping
 * failed) those land in the spare slot.
 */
struct stat_slot *rsk_stat_slots_, rsk_spare_slot_;
int rsk_stat_nslots_;

void rsk_stats_init(int ncpus)
{
	size_t size = sizeof(struct stat_slot) * (size_t)ncpus;
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return;
	__atomic_store_n(&rsk_stat_nslots_, ncpus, __ATOMIC_RELAXED);
	__atomic_store_n(&rsk_stat_slots_, (struct stat_slot *)m, __ATOMIC_RELEASE);
}

static uint64_t stat_total(int which)
{
	struct stat_slot *s = __atomic_load_n(&rsk_stat_slots_, __ATOMIC_ACQUIRE);
	uint64_t t = __atomic_load_n(&rsk_spare_slot_.v[which], __ATOMIC_RELAXED);

	for (int i = 0; s != NULL && i < __atomic_load_n(&rsk_stat_nslots_, __ATOMIC_RELAXED); i++)
		t += __atomic_load_n(&s[i].v[which], __ATOMIC_RELAXED);
	return t + rsk_slot_counts_total_(which);
}

static unsigned abort_limit; /* 0 until first read */

RSK_EXPORT int rsk_stats_process(struct rsk_stats *st)
{
	if (st == NULL)
		return -EINVAL;
	st->aborts = stat_total(ST_ABORTS);
	st->slow_paths = stat_total(ST_SLOW_PATHS);
	st->fences = stat_total(ST_FENCES);
	st->gate_waits = stat_total(ST_GATE_WAITS);
	return 0;
}

RSK_EXPORT unsigned rsk_abort_limit(void)
{
	unsigned n = __atomic_load_n(&abort_limit, __ATOMIC_RELAXED);

	if (__builtin_expect(n == 0, 0)) {
		/* RSEQKIT_ABORT_LIMIT, read (and checked) at init. */
		rsk_init_once();
		n = rsk_process.env_abort_limit;
		unsigned zero = 0;
		/* A concurrent rsk_set_abort_limit() wins. */
		if (!__atomic_compare_exchange_n(&abort_limit, &zero, n, 0, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
			n = zero;
	}
	return n;
}

RSK_EXPORT int rsk_set_abort_limit(unsigned n)
{
	if (n == 0)
		return -EINVAL;
	__atomic_store_n(&abort_limit, n, __ATOMIC_RELAXED);
	return 0;
}
