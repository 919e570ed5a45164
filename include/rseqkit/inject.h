/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/inject.h - numbered injection points for tests.
 *
 * Rare interleavings (a preemption between the index check and the commit)
 * are made common by widening the windows: tests build the library and
 * their own code with -DRSEQKIT_INJECT, which turns
 *   - RSK_INJECT_ASM(n), n = 1..6, into a delay loop inside the critical
 *     section's asm, spinning rsk_inject_loops[n] times, and
 *   - RSK_INJECT_C(n), n = 7..9, into a call to rsk_inject_hook(n), which
 *     spins or, every rsk_inject_modulo-th pass, yields, raises a signal or
 *     sleeps (see tools/rseqkit-stress), and
 *   - RSK_INJECT_HELD: the library calls rsk_inject_hook(RSK_INJECT_HELD)
 *     each time a thread has just taken a gate or lock on a slow path, so
 *     that a test can raise a signal whose handler runs on top of the hold.
 * Without RSEQKIT_INJECT (every installed build) they expand to nothing.
 */
#ifndef RSEQKIT_INJECT_H
#define RSEQKIT_INJECT_H

#define RSK_INJECT_POINTS 10 /* indices 1..9 are used */
#define RSK_INJECT_HELD	  (-1) /* not an index: a gate or lock was just taken */

#ifdef RSEQKIT_INJECT

#ifdef __cplusplus
extern "C" {
#endif
/* Delay-loop counts, one per point; 0 = no delay.  Set by the test. */
extern int rsk_inject_loops[RSK_INJECT_POINTS];
/* C-level hook, defined by the test program (weakly by the library). */
void rsk_inject_hook(int point);
#ifdef __cplusplus
}
#endif

#define RSK_INJECT_C(n) rsk_inject_hook(n)
#define RSK_INJECTING	1

#else

#define RSK_INJECT_C(n) ((void)0)
#define RSK_INJECTING	0

#endif

#endif /* RSEQKIT_INJECT_H */
