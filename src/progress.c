/* SPDX-License-Identifier: MIT */
/*
 * The progress protocol's runtime: fences, gates, statistics.
 * See <rseqkit/progress.h> for the protocol and why it is safe.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "internal.h"
#include <rseqkit/progress.h>

#if defined(__has_include)
#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define RSK_PROBE1(name, a)    STAP_PROBE1(rseqkit, name, a)
#define RSK_PROBE2(name, a, b) STAP_PROBE2(rseqkit, name, a, b)
#endif
#endif
#ifndef RSK_PROBE1
#define RSK_PROBE1(name, a)    ((void)(a))
#define RSK_PROBE2(name, a, b) ((void)(a), (void)(b))
#endif

static __thread struct rsk_stats thread_stats;

/*
 * Process totals, one 128-byte slot per CPU: the slow path of a process
 * without rseq counts every operation, and one shared counter would make
 * every thread bounce its cache line.  The slots are mapped at init
 * (rsk_stats_init()), never later: an event may be counted inside a
 * signal handler that interrupted malloc.  Until then (or if mapping
 * failed) everything lands in the spare slot.
 */
enum { ST_ABORTS, ST_SLOW_PATHS, ST_FENCES, ST_GATE_WAITS, ST_N };
struct stat_slot {
	uint64_t v[ST_N];
} __attribute__((aligned(128)));
static struct stat_slot *stat_slots, spare_slot;
static int stat_nslots;

void rsk_stats_init(int ncpus)
{
	size_t size = sizeof(struct stat_slot) * (size_t)ncpus;
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return;
	__atomic_store_n(&stat_nslots, ncpus, __ATOMIC_RELAXED);
	__atomic_store_n(&stat_slots, (struct stat_slot *)m, __ATOMIC_RELEASE);
}

static struct stat_slot *stat_slot_for(int cpu)
{
	struct stat_slot *s = __atomic_load_n(&stat_slots, __ATOMIC_ACQUIRE);

	if (s == NULL || (unsigned)cpu >= (unsigned)__atomic_load_n(&stat_nslots, __ATOMIC_RELAXED))
		return &spare_slot;
	return &s[cpu];
}

static uint64_t stat_total(int which)
{
	struct stat_slot *s = __atomic_load_n(&stat_slots, __ATOMIC_ACQUIRE);
	uint64_t t = __atomic_load_n(&spare_slot.v[which], __ATOMIC_RELAXED);

	for (int i = 0; s != NULL && i < __atomic_load_n(&stat_nslots, __ATOMIC_RELAXED); i++)
		t += __atomic_load_n(&s[i].v[which], __ATOMIC_RELAXED);
	return t;
}

static unsigned abort_limit; /* 0 until first read */

enum { MB_UNKNOWN = 0, MB_READY = 1, MB_NONE = -1 };
static int membarrier_state;

/* Count an event of the calling thread, on CPU (or index) `cpu`. */
static void count_event(uint64_t *mine, int which, int cpu)
{
	(*mine)++;
	__atomic_add_fetch(&stat_slot_for(cpu)->v[which], 1, __ATOMIC_RELAXED);
}

RSK_EXPORT void rsk_note_abort(void)
{
	int cpu = rsk_cpu();

	count_event(&thread_stats.aborts, ST_ABORTS, cpu);
	RSK_PROBE1(abort, cpu);
}

void rsk_note_slow_path_at(int idx)
{
	count_event(&thread_stats.slow_paths, ST_SLOW_PATHS, idx);
	RSK_PROBE1(slow_path, idx);
}

RSK_EXPORT void rsk_note_slow_path(void)
{
	rsk_note_slow_path_at(rsk_cpu());
}

RSK_EXPORT int rsk_stats_thread(struct rsk_stats *st)
{
	if (st == NULL)
		return -EINVAL;
	*st = thread_stats;
	return 0;
}

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

static long sys_membarrier(int cmd, unsigned flags, int cpu)
{
	return syscall(SYS_membarrier, cmd, flags, cpu);
}

/* Register for the RSEQ membarrier once; remember whether it works. */
static int membarrier_ready(void)
{
	int st = __atomic_load_n(&membarrier_state, __ATOMIC_ACQUIRE);

	if (st == MB_UNKNOWN) {
		st = rsk_process.membarrier_rseq &&
				     sys_membarrier(RSK_ABI_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ,
						    0, 0) == 0 ?
			     MB_READY :
			     MB_NONE;
		__atomic_store_n(&membarrier_state, st, __ATOMIC_RELEASE);
	}
	return st == MB_READY;
}

/*
 * Fallback fence: run on each CPU of `cpus` in turn.  Being scheduled on a
 * CPU means whatever thread ran there was preempted, and a preempted
 * section restarts.  The caller's affinity is restored afterwards.
 */
static int fence_by_migration(int first, int last)
{
	int ncpu = rsk_process.possible_cpus;
	size_t size = CPU_ALLOC_SIZE(ncpu);
	cpu_set_t *saved = CPU_ALLOC(ncpu), *one = CPU_ALLOC(ncpu);
	int err = 0, moved = 0;

	if (saved == NULL || one == NULL) {
		err = -ENOMEM;
		goto out;
	}
	if (sched_getaffinity(0, size, saved) != 0) {
		err = -errno;
		goto out;
	}
	for (int cpu = first; cpu <= last; cpu++) {
		CPU_ZERO_S(size, one);
		CPU_SET_S(cpu, size, one);
		if (sched_setaffinity(0, size, one) != 0) {
			/* Not ours to run on: in a range, threads of ours cannot
			 * run there either unless their affinity differs. */
			if (first == last)
				err = -errno;
			continue;
		}
		moved = 1;
		/* sched_setaffinity() migrates before returning; the yield
		 * makes sure we really were scheduled on the CPU. */
		sched_yield();
	}
	if (moved)
		sched_setaffinity(0, size, saved);
out:
	CPU_FREE(saved);
	CPU_FREE(one);
	return err;
}

static int fence(int cpu)
{
	int err;

	rsk_init_once();
	if (rsk_process.owner == RSK_OWNER_NONE)
		return 0; /* no thread of ours can be inside a section */
	if (membarrier_ready()) {
		long r = cpu >= 0 ? sys_membarrier(RSK_ABI_MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
						   RSK_ABI_MEMBARRIER_CMD_FLAG_CPU, cpu) :
				    sys_membarrier(RSK_ABI_MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
		err = r == 0 ? 0 : -errno;
	} else {
		err = cpu >= 0 ? fence_by_migration(cpu, cpu) :
				 fence_by_migration(0, rsk_process.possible_cpus - 1);
	}
	if (err == 0) {
		count_event(&thread_stats.fences, ST_FENCES, cpu >= 0 ? cpu : 0);
		RSK_PROBE1(fence, cpu);
	}
	return err;
}

RSK_EXPORT int rsk_fence_cpu(int cpu)
{
	rsk_init_once();
	if (cpu < 0 || cpu >= rsk_process.possible_cpus)
		return -EINVAL;
	return fence(cpu);
}

RSK_EXPORT int rsk_fence_all(void)
{
	return fence(-1);
}

RSK_EXPORT int rsk_gate_close(intptr_t *gate, enum rsk_index_mode mode, int idx)
{
	intptr_t open = 0;
	int err;

	if (gate == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID))
		return -EINVAL;
	while (!__atomic_compare_exchange_n(gate, &open, 1, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED)) {
		count_event(&thread_stats.gate_waits, ST_GATE_WAITS, idx);
		open = 0;
		sched_yield(); /* the holder may be preempted */
	}
	err = mode == RSK_INDEX_CPU ? rsk_fence_cpu(idx) : rsk_fence_all();
	if (err != 0)
		rsk_gate_open(gate);
	RSK_PROBE2(gate_close, idx, err);
	return err;
}
