/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/percpu.h - what the per-CPU data structures share.
 *
 * Every structure (counter.h, spinlock.h, stack.h, ptrbuf.h, copybuf.h)
 * follows the same rules:
 *
 *  - It is created at run time with one part per possible CPU
 *    (rsk_possible_cpus(), from /sys/devices/system/cpu/possible - not
 *    sysconf, which undercounts).  In RSK_INDEX_CID mode the same number of
 *    parts is used: the kernel keeps mm_cid below min(threads, allowed
 *    CPUs), so possible CPUs bound it.
 *  - RSK_INDEX_CID asked for where the kernel writes no mm_cid
 *    (!rsk_mm_cid_available(), kernels before 6.3) silently becomes
 *    RSK_INDEX_CPU: indexing by a meaningless mm_cid would put every
 *    thread on part 0.  The structure's `mode` field tells which it got.
 *  - Each part starts on its own 128-byte boundary (two 64-byte lines:
 *    adjacent-line prefetchers pull pairs) and carries a `gate` word, the
 *    progress protocol's (<rseqkit/progress.h>): every section is a gated
 *    one and stops when the gate is closed.
 *  - Every index rsk_index() returns is checked against the structure's
 *    size before it is used.
 *  - When the calling thread cannot run a critical section on the part of
 *    its CPU (rsk_index() < 0: no rseq in this process, thread not
 *    registered; or an index beyond the structure), when the section found
 *    the gate closed, or when it aborted rsk_abort_limit() times in a row
 *    (a debugger single-stepping it), the operation goes to the
 *    structure's single slow-path function (rsk_<name>_slow_()): it closes
 *    the gate of a part (the current CPU's, or any when the thread has no
 *    index), fences, does the operation with plain code and reopens the
 *    gate.  Same API, same results, only slower.
 *  - Only the first attempt of a fast path is inline (always: a call
 *    would cost as much as the section); whatever it did not finish - the
 *    retries after an abort or a changed part, then the gate - is one call
 *    to rsk_<name>_slow_(), out of line.
 *  - Operations on another CPU's part (rsk_<name>_*_cpu) use the same
 *    gate, so they are safe while that CPU's threads run.
 *
 * Return values: negative errno on error, otherwise (for operations on the
 * current CPU's part) the index of the part that was used:
 *	-EINVAL  NULL structure or argument, bad mode, size or capacity 0 or
 *	         beyond its maximum, a CPU index outside the structure
 *	-ENOMEM  creation could not allocate
 *	-ENOSPC  a buffer part is full (ptrbuf, copybuf push)
 *	-ENOENT  a part is empty (stack, ptrbuf, copybuf pop)
 *	-EINVAL  also: a slow path's fence could not reach the CPU (see
 *	         rsk_fence_cpu(3)); nothing was done
 */
#ifndef RSEQKIT_PERCPU_H
#define RSEQKIT_PERCPU_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <rseqkit/thread.h>
#include <rseqkit/ops.h>
#include <rseqkit/progress.h>

/* Alignment and minimum stride of each CPU's part. */
#define RSK_PERCPU_ALIGN 128

/* The structures' fast paths: inlined at every call site, whatever the
 * optimiser thinks of their size (a call costs as much as the section). */
#define RSK_PERCPU_INLINE static inline __attribute__((always_inline))

#define RSK_PERCPU_LIKELY(x)   __builtin_expect(!!(x), 1)
#define RSK_PERCPU_UNLIKELY(x) __builtin_expect(!!(x), 0)

/*
 * The calling thread's rseq area and the index (*idx) it must use for a
 * structure of `nr` parts, or NULL when it cannot run a section on one of
 * them (no rseq, thread not registered, or an index the structure does
 * not have: the caller's slow path decides).  One load of the area offset
 * serves both the index and the section that follows; rsk_index() does
 * the lazy initialisation and registration the first time.
 */
static inline __attribute__((always_inline)) struct rsk_abi_area *
rsk_percpu_area_(enum rsk_index_mode mode, int nr, int *idx)
{
	struct rsk_abi_area *area = rsk_area();
	int i;

	if (RSK_PERCPU_LIKELY(area != NULL)) {
		int32_t cpu = rsk_area_cpu_id(area);

		/* A structure is in CID mode only where mm_cid is written;
		 * cpu_id < 0 means the thread is not registered. */
		i = mode == RSK_INDEX_CPU
			    ? cpu
			    : (cpu >= 0 ? (int)__atomic_load_n(&area->mm_cid, __ATOMIC_RELAXED)
					: -1);
		if (RSK_PERCPU_LIKELY((unsigned)i < (unsigned)nr)) {
			*idx = i;
			return area;
		}
	}
	i = rsk_index(mode);
	if ((unsigned)i >= (unsigned)nr || (area = rsk_area()) == NULL)
		return NULL;
	*idx = i;
	return area;
}

/* Run the gated arch operation `op` on the index field of `mode`: the
 * structures' form of ops.h's dispatch, for an area already in hand. */
#define RSK_PERCPU_OP_(op, mode, area, idx, gate, ...)                         \
	((mode) == RSK_INDEX_CID                                               \
		 ? rsk_arch_gated_##op##_cid((area), (idx), __VA_ARGS__, (gate)) \
		 : rsk_arch_gated_##op##_cpu((area), (idx), __VA_ARGS__, (gate)))

/* Creation-time mode: CID only where the kernel writes mm_cid. */
static inline enum rsk_index_mode rsk_percpu_effective_mode_(enum rsk_index_mode mode)
{
	if (mode == RSK_INDEX_CID && !rsk_mm_cid_available())
		return RSK_INDEX_CPU;
	return mode;
}

#endif /* RSEQKIT_PERCPU_H */
