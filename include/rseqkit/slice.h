/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/slice.h - time-slice extension: ask the kernel not to preempt
 * this thread inside a short region (Linux 7.0+).
 *
 * A thread that holds something others wait for (a lock, a closed gate)
 * and is preempted makes them wait a whole scheduling period.  With the
 * extension, a thread sets a request byte in its rseq area before such a
 * region; when the scheduler wants the CPU while the byte is set, the
 * kernel grants a short extension instead (5 us by default, tunable in
 * debugfs rseq/slice_ext_nsec up to 50 us) and marks it granted.  At the
 * end of the region the thread clears the request and, if it was granted,
 * gives the CPU back with rseq_slice_yield(2).
 *
 *	rsk_slice_t s = rsk_slice_begin();
 *	... the region: short, no system calls ...
 *	rsk_slice_end(s);
 *
 * Where it works: a kernel built with CONFIG_RSEQ_SLICE_EXTENSION (Debian's
 * 7.x kernels are not), not switched off at boot (rseq_slice_ext=0), and a
 * V2 registration (longer than 32 bytes).  glibc 2.36-2.40 register 32
 * bytes: with them the extension is not offered unless rseqkit owns the
 * registration (GLIBC_TUNABLES=glibc.pthread.rseq=0, which makes rseqkit
 * register its own area with the kernel's feature size).  Everywhere else
 * rsk_slice_begin() returns RSK_SLICE_NONE after one load and one branch,
 * rsk_slice_end() does nothing, and nothing else changes.  RSEQKIT_NO_SLICE=1
 * in the environment switches it off for the process.
 *
 * Rules of a region:
 *   - Short: the grant is a few microseconds; a region that runs longer is
 *     preempted at the grant's end as it would have been anyway.
 *   - No system calls: one made inside a granted region ends the grant
 *     and gives the CPU away at once (the kernel's rule); the extension
 *     then bought nothing.  The region's own end makes the one call that
 *     is meant (rsk_slice_end() -> rseq_slice_yield).
 *   - Nesting: a begin inside a region (or while a grant is pending)
 *     returns RSK_SLICE_NESTED, whose end does nothing; the outermost end
 *     clears the request.  Regions end in the reverse order they began.
 *
 * rseqkit's own regions: an rsk_spinlock holder is in one from its lock's
 * commit to its unlock, and a slow path from closing a part's gate to
 * opening it (<rseqkit/progress.h>).
 *
 * Signals: begin and end are async-signal-safe.  A handler's region inside
 * an interrupted region is nested; a handler's region that interrupted a
 * begin between its check and its store may end the request early, which
 * only loses the extension.  fork(): the child inherits its thread's
 * state (the kernel copies it, and the area is the parent's copy); a
 * region open across fork() is ended in the child by its own end.
 * Thread exit: nothing to do (the kernel drops the registration with the
 * thread).  dlclose(): nothing is kept but a per-thread byte.
 */
#ifndef RSEQKIT_SLICE_H
#define RSEQKIT_SLICE_H

#include <stdbool.h>
#include <rseqkit/thread.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What rsk_slice_begin() did, for rsk_slice_end(). */
typedef unsigned char rsk_slice_t;
#define RSK_SLICE_NONE	 0 /* nothing: the extension is not offered here */
#define RSK_SLICE_OUTER	 1 /* set the request: its end clears it */
#define RSK_SLICE_NESTED 2 /* inside another region: its end does nothing */

/*
 * rsk_slice_available - whether the kernel offers the time-slice
 * extension to this process (to the calling thread, once it is
 * registered: the kernel's flag in its area).  False on kernels before
 * 7.0, on kernels built without it or started with rseq_slice_ext=0,
 * under a 32-byte (legacy) registration, where rseq is unavailable, and
 * with RSEQKIT_NO_SLICE=1.  Async-signal-safe after initialisation.
 */
bool rsk_slice_available(void);

/*
 * rsk_slice_enable - enable the extension for the calling thread
 * (prctl(PR_RSEQ_SLICE_EXTENSION, SET, ENABLE)).  Optional: the first
 * rsk_slice_begin() of a thread does it.  Returns 0 (also when it was
 * enabled already), -EOPNOTSUPP when the extension is not offered (see
 * rsk_slice_available()), or -ENXIO when the calling thread cannot be
 * registered.  errno is preserved.  Async-signal-safe.  fork(): the
 * child's thread keeps the state.
 */
int rsk_slice_enable(void);

/* Not API: the slow side of rsk_slice_begin() and rsk_slice_end(). */
rsk_slice_t rsk_slice_begin_slow_(void);
void rsk_slice_yield_(void);

/* Not API: the request, in a thread that has the extension enabled. */
static inline __attribute__((always_inline)) rsk_slice_t rsk_slice_request_(rsk_arch_area_t a)
{
	/* A request or a grant pending: an enclosing region's. */
	if (rsk_arch_area_u8(a, RSK_ABI_OFF_SLICE_REQUEST) |
	    rsk_arch_area_u8(a, RSK_ABI_OFF_SLICE_GRANTED))
		return RSK_SLICE_NESTED;
	rsk_arch_area_set_u8(a, RSK_ABI_OFF_SLICE_REQUEST, 1);
	/* Nothing of the region moves above the request. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return RSK_SLICE_OUTER;
}

/*
 * rsk_slice_begin - ask not to be preempted until rsk_slice_end().
 * Where the extension is enabled in the thread: one load of the area's
 * flags and of the request and granted bytes, and one byte store.
 * Returns the token to give rsk_slice_end(): RSK_SLICE_OUTER,
 * RSK_SLICE_NESTED, or RSK_SLICE_NONE where the extension is not
 * offered (nothing was done).  Never fails.
 */
static inline rsk_slice_t rsk_slice_begin(void)
{
	rsk_arch_area_t a;

	if (__builtin_expect(!rsk_fast.slice_ok, 1))
		return RSK_SLICE_NONE;
	a = rsk_arch_area_of(rsk_area_offset_());
	if (__builtin_expect(!(rsk_arch_area_u32(a, RSK_ABI_OFF_FLAGS) &
			       RSK_ABI_FLAG_SLICE_EXT_ENABLED), 0))
		return rsk_slice_begin_slow_();
	return rsk_slice_request_(a);
}

/*
 * rsk_slice_end - end the region rsk_slice_begin() returned `s` for.  For
 * RSK_SLICE_OUTER: clear the request, then, if the kernel granted an
 * extension meanwhile, yield the CPU (rseq_slice_yield(2); errno is
 * preserved).  Otherwise nothing.
 */
static inline void rsk_slice_end(rsk_slice_t s)
{
	rsk_arch_area_t a;

	if (__builtin_expect(s != RSK_SLICE_OUTER, 1))
		return;
	a = rsk_arch_area_of(rsk_area_offset_());
	/* Nothing of the region moves below the clear. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	rsk_arch_area_set_u8(a, RSK_ABI_OFF_SLICE_REQUEST, 0);
	if (rsk_arch_area_u8(a, RSK_ABI_OFF_SLICE_GRANTED))
		rsk_slice_yield_();
}

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_SLICE_H */
