/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/tsan.h - what ThreadSanitizer cannot see, told to it.
 *
 * A TSan build (-fsanitize=thread) instruments C loads and stores, atomics
 * and locks; it sees nothing inside an asm statement.  A committed section
 * is, for the data of its part, a critical section: the kernel runs the
 * sections of one CPU one at a time, and restarts any that a preemption,
 * migration or signal cut.  So rseqkit tells TSan, keyed by one address
 * per part (its gate word, or the word a primitive commits): a fast path
 * releases the key before its section (RSK_TSAN_RELEASE) and acquires it
 * after a commit (RSK_TSAN_ACQUIRE_IF).  What a thread wrote before a
 * section then happens before whatever another thread reads after a later
 * section on that part; releasing before the commit leaves no window in
 * which the commit is visible and the release not yet made.  A gated
 * primitive (rsk_gated_* in <rseqkit/ops.h>) is keyed on both: the word
 * it commits and its gate, which is its part's key.  The key must
 * be known before the section, so under TSan the x86-64 part operations
 * (which read the index inside it) give way to the generic ones.
 *
 * The slow paths take and open the gate with atomics TSan sees (an
 * acquiring compare-and-swap, a releasing exchange) on the same word, so
 * they join the same order with no annotation of their own.
 *
 * In every other build these expand to nothing: the code is the same
 * instruction for instruction.
 */
#ifndef RSEQKIT_TSAN_H
#define RSEQKIT_TSAN_H

#include <stdint.h>

#if defined(__SANITIZE_THREAD__)
#define RSK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RSK_TSAN 1
#endif
#endif

/* RSEQKIT_TSAN_UNANNOTATED (tests only): a TSan build without the
 * annotations, the negative control of "make check-tsan". */
#if defined(RSK_TSAN) && !defined(RSEQKIT_TSAN_UNANNOTATED)
#ifdef __cplusplus
extern "C" {
#endif
/* The sanitizer runtime's own entry points (<sanitizer/tsan_interface.h>). */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#ifdef __cplusplus
}
#endif
#define RSK_TSAN_ACQUIRE(p)	     __tsan_acquire((void *)(uintptr_t)(p))
#define RSK_TSAN_RELEASE(p)	     __tsan_release((void *)(uintptr_t)(p))
/* RSK_TSAN_ACQUIRE(p) if cond (a section's result, read only under TSan). */
#define RSK_TSAN_ACQUIRE_IF(cond, p) ((cond) ? RSK_TSAN_ACQUIRE(p) : (void)0)
/* RSK_TSAN_RELEASE(p) if cond (an optional key, tested only under TSan). */
#define RSK_TSAN_RELEASE_IF(cond, p) ((cond) ? RSK_TSAN_RELEASE(p) : (void)0)
#else
#define RSK_TSAN_ACQUIRE(p)	     ((void)0)
#define RSK_TSAN_RELEASE(p)	     ((void)0)
#define RSK_TSAN_ACQUIRE_IF(cond, p) ((void)0)
#define RSK_TSAN_RELEASE_IF(cond, p) ((void)0)
#endif

#endif
