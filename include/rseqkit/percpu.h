/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/percpu.h - what the per-CPU data structures share.
 *
 * Every structure (counter.h, spinlock.h, stack.h, ptrbuf.h, copybuf.h,
 * pool.h) follows the same rules:
 *
 *  - It is created at run time with one part per possible CPU
 *    (rsk_possible_cpus(), from /sys/devices/system/cpu/possible - not
 *    sysconf, which undercounts).  In RSK_INDEX_CID mode the same number of
 *    parts is used: the kernel keeps mm_cid below min(threads, allowed
 *    CPUs), so possible CPUs bound it.
 *  - The index mode is fixed at creation.  RSK_INDEX_CID asked for where
 *    the structures cannot use mm_cid becomes RSK_INDEX_CPU: on kernels
 *    without mm_cid (before 6.3), where indexing by it would put every
 *    thread on part 0, and where rseqkit registers glibc's area itself
 *    (glibc.pthread.rseq=0), where an unregistered thread's mm_cid field
 *    could hold a stale valid id (see "Fast path" below).  The structure's
 *    `mode` field tells which it got.
 *  - Each part starts on its own 128-byte boundary (two 64-byte lines:
 *    adjacent-line prefetchers pull pairs) and carries a `gate` word in
 *    the same line as the data, the progress protocol's
 *    (<rseqkit/progress.h>): every section is a gated one and stops when
 *    the gate is closed.
 *  - When the calling thread cannot run a critical section on the part of
 *    its CPU (no rseq in this process, thread not registered yet or any
 *    more, an index beyond the structure), when the section found the
 *    gate closed, or when it aborted rsk_abort_limit() times in a row (a
 *    debugger single-stepping it), the operation goes to its structure's
 *    slow path: it closes the gate of a part (the current CPU's, or the
 *    thread's home part when it has no index), fences, does the operation
 *    with plain code and reopens the gate.  Same API, same results, only
 *    slower.
 *  - Operations on another CPU's part (rsk_<name>_*_cpu) use the same
 *    gate, so they are safe while that CPU's threads run.
 *  - The exception is the counter, whose parts need no gate: a thread
 *    without a section adds to another word of the part atomically, and
 *    an exchange moves a third (<rseqkit/counter.h>).  Its parts have
 *    no gate word.
 *
 * Fast path.  Only the first attempt of an operation is inline (always: a
 * call would cost as much as the section); whatever it did not finish -
 * the retries after an abort or a changed part, the registration of a new
 * thread, then the gate - is one call to the structure's slow path, out
 * of line.  Each structure writes that attempt once, as an inline
 * rsk_<name>_try_*_() returning an enum rsk_result whose section is an
 * expression (RSK_PERCPU_OP_, the part operations, RSK_PERCPU_SECTION_);
 * the operation calls it and hands every result but RSK_OK and the
 * answers (RSK_EMPTY, RSK_FULL) to its slow path, whose kind calls the
 * same attempt (doc/HACKING.md, "A fast path").  The first attempt reads the index from the area field fixed at
 * creation (cpu_id or mm_cid, at `index_offset_`) and compares it, as
 * unsigned, with the number of parts.  That one compare also stands for
 * every reason a thread that has an area cannot run a section: an
 * unregistered thread's cpu_id is -1 or -2; and an unregistered thread's
 * mm_cid field
 * is (uint32_t)-1 in the areas whose mm_cid the structures use (glibc
 * registers every thread it creates or aborts; rseqkit's own TLS area
 * starts so and is reset so at rsk_unregister()).  The section then
 * re-checks the same field after arming its descriptor.
 *
 * Guard parts.  Where the arch reads the index inside the section (the
 * part operations below, RSK_ARCH_HAS_PART_OPS: x86-64) there is no
 * compare at all: the index is read as a signed 32-bit value and scaled.
 * A registered thread's cpu_id and mm_cid are below the kernel's
 * nr_cpu_ids, which the possible-CPU count the parts are sized by is not
 * below (src/runtime/topology.c); the only other values an area holds, -1 (not
 * registered) and -2 (glibc's "registration failed"), select part[-1] and
 * part[-2], and their gate words are never 0: part[-1] is the structure's
 * head (its gate word is index_offset_, 4 or 24, and fast_nr_), part[-2]
 * the 128 bytes before it, all ones.  Such a section leaves through
 * `stopped`, and the slow path, seeing the thread's index out of range,
 * treats it as RSK_NO_INDEX.  The sections that test no gate (the
 * counter's add, the spinlock's compare-and-store) leave through
 * `stopped` on the sign of the scaled index instead.  The area offset is still tested (0: no
 * rseq in the process), outside the section.  The mempool's counter
 * section (RSK_ARCH_HAS_STRIDE_OPS) relies on the same two values, with
 * two guard strides below the pool's gates (src/alloc/percpu_memory.c).
 *
 * Return values: negative errno on error, otherwise 0 (rsk_spinlock_lock:
 * the index of the lock it took, which its unlock needs):
 *	-EINVAL  NULL structure or argument, bad mode, size or capacity 0 or
 *	         beyond its maximum, a CPU index outside the structure, a
 *	         structure already destroyed (where that is seen: destroy and
 *	         the slow paths check a mark)
 *	-ENOMEM  creation could not allocate
 *	-ENOSPC  a buffer part is full (ptrbuf, copybuf push)
 *	-ENOENT  a part is empty (stack, ptrbuf, copybuf pop)
 *	-EDEADLK a signal handler's operation (or one made while the caller
 *	         holds a gate, see Signals below) whose gate is not free at
 *	         once: on a named part (rsk_<name>_*_cpu, exchange, reset)
 *	         when that part's gate (exchange lock) is held, on the
 *	         current part only when every part's gate is held
 *	-ENXIO   a slow path's fence could not reach a CPU where a thread of
 *	         the process may run (no membarrier; see rsk_fence_cpu(3));
 *	         nothing was done
 *	-EOWNERDEAD  the part's gate is held by a thread that no longer exists,
 *	         or that held it through a fork() (reported once on stderr;
 *	         see rsk_gate_close(3))
 *
 * Signals and fork: every operation is async-signal-safe with respect to
 * its own thread, and a handler that runs on a thread inside fork() does
 * not wait for that fork.  A thread that holds a gate or lock (a handler
 * that interrupted its thread's slow path, or code between
 * rsk_gate_close() and rsk_gate_open()) waits for none, since another
 * thread's handler could be waiting for its hold: an operation on the
 * current part uses the first part whose gate is free at once (the
 * counter's add never fails), and returns -EDEADLK only when every
 * part's gate is held at that moment.  What holds
 * in the child, and at dlclose() and thread exit: each structure's man
 * page.
 *
 * Adding a structure: the code is the skeleton of doc/GUIDE.md, "Adding a
 * structure"; every file a new structure touches is listed in
 * doc/HACKING.md, "Adding a structure".
 */
#ifndef RSEQKIT_PERCPU_H
#define RSEQKIT_PERCPU_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <rseqkit/thread.h>
#include <rseqkit/ops.h>
#include <rseqkit/progress.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Alignment and minimum stride of each CPU's part. */
#define RSK_PERCPU_ALIGN 128
/* Not API: log2 of the parts' stride in the structures whose parts are an
 * array of RSK_PERCPU_ALIGN-byte parts (counter, spinlock, stack). */
#define RSK_PERCPU_SHIFT_ 7

/* Around a flexible array member: they are C99, and g++ and clang++ accept
 * them as an extension but warn under -pedantic. */
#ifdef __cplusplus
#define RSK_PERCPU_FLEX_BEGIN_                                                 \
	_Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wpedantic\"")
#define RSK_PERCPU_FLEX_END_ _Pragma("GCC diagnostic pop")
#else
#define RSK_PERCPU_FLEX_BEGIN_
#define RSK_PERCPU_FLEX_END_
#endif

/* The structures' fast paths: inlined at every call site, whatever the
 * optimiser thinks of their size (a call costs as much as the section). */
#define RSK_PERCPU_INLINE static inline __attribute__((always_inline))

#define RSK_PERCPU_LIKELY(x)   __builtin_expect(!!(x), 1)
#define RSK_PERCPU_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The outcome of one attempt of a structure operation is an enum
 * rsk_result (<rseqkit/ops.h>): RSK_OK, RSK_CMPFAIL, RSK_ABORTED and
 * RSK_STOPPED are the arch sections' return values (<rseqkit/arch.h>),
 * RSK_NO_INDEX, RSK_NO_PART, RSK_EMPTY and RSK_FULL the conditions the
 * structures find before or instead of a section. */

/*
 * The header every structure starts with (those above, and struct
 * rsk_mempool, whose parts are the copies of its objects).  `mode` and
 * `nr` are read-only API; the rest is the fast path's and the slow path's.
 */
#define RSK_PERCPU_HEAD                                                        \
	enum rsk_index_mode mode; /* read-only: the mode in effect */          \
	int nr;			  /* read-only: number of parts */             \
	uint32_t index_offset_;	  /* Not API: the area field indexes come from */ \
	uint32_t fast_nr_;	  /* Not API: nr, or 0 where rseq is unavailable */ \
	uint32_t magic_		  /* Not API: RSK_PERCPU_MAGIC_ while alive */

struct rsk_percpu_head {
	RSK_PERCPU_HEAD;
};

/*
 * Not API: whether the calling thread, whose area is at `off`
 * (rsk_area_offset_(), read by the caller before anything else so that the
 * compiler shares the load between operations), can run a section on a
 * structure
 * whose fast_nr_ is `fast_nr` and whose index is the area field at `ioff`
 * (fast_nr_ is the number of parts, or 0 where rseq is unavailable, which
 * the area offset, fixed at initialisation, tells); if so, *area and *idx
 * are set for RSK_PERCPU_OP_ (see "Fast path" above).  Callers read ioff
 * from the structure once and pass the same value to RSK_PERCPU_OP_.
 */
RSK_PERCPU_INLINE int rsk_percpu_enter_(ptrdiff_t off, uint32_t ioff, uint32_t fast_nr,
					rsk_arch_area_t *area, uint32_t *idx)
{
#ifndef RSK_ARCH_HAS_AREA_OFFSET
	/* Where the area is reached by its address, tp + 0 is not known to
	 * be readable.  (Through %fs it is: the TCB; fast_nr is 0 there.) */
	if (RSK_PERCPU_UNLIKELY(off == 0))
		return 0;
#endif
	*area = rsk_arch_area_of(off);
	*idx = rsk_arch_area_u32(*area, ioff);
	if (RSK_PERCPU_UNLIKELY(*idx >= fast_nr))
		return 0;
	/* fast_nr is an int's value: the index is not negative as an int,
	 * which lets the compiler drop a caller's `>= 0` test of it. */
	if (*idx > (uint32_t)INT32_MAX)
		__builtin_unreachable();
	return 1;
}

/* Not API: &s->part[i] for a structure whose parts are an array of
 * 128-byte parts after its head, written so that the compiler folds the
 * array's offset into the address instead of computing (i + 1) * 128. */
#ifdef RSEQKIT_ANALYZER /* cppcheck: "cyclic reverse analysis" on the form below */
#define RSK_PERCPU_PART_(s, i) (&(s)->part[(i)])
#else
#define RSK_PERCPU_PART_(s, i)                                                 \
	((__typeof__(&(s)->part[0]))(void *)((char *)(s) + offsetof(__typeof__(*(s)), part) + \
					     ((size_t)(i) << 7)))
#endif

/* Not API: the gated arch operation `op` on the index field at ioff, for
 * an area and index from rsk_percpu_enter_(). */
#define RSK_PERCPU_GATED_(op, area, ioff, idx, gate, ...)                      \
	rsk_arch_gated_##op##_at((area), (ioff), (idx), __VA_ARGS__, (gate))
#ifdef RSK_TSAN
/* Under ThreadSanitizer a section also releases its part's gate word
 * before it, and acquires it after a commit (<rseqkit/tsan.h>). */
#define RSK_PERCPU_OP_(op, ioff, area, idx, gate, ...)                         \
	__extension__({                                                        \
		enum rsk_result rsk_r_;                                           \
		RSK_TSAN_RELEASE(gate);                                        \
		rsk_r_ = (enum rsk_result)RSK_PERCPU_GATED_(op, (area), (ioff), (int)(idx), \
							 (gate), __VA_ARGS__); \
		RSK_TSAN_ACQUIRE_IF(rsk_r_ == RSK_OK, (gate));           \
		rsk_r_;                                                        \
	})
#else
#define RSK_PERCPU_OP_(op, ioff, area, idx, gate, ...)                         \
	((enum rsk_result)RSK_PERCPU_GATED_(op, (area), (ioff), (int)(idx), (gate), __VA_ARGS__))
#endif

/*
 * Not API: the part operations of structures whose parts are an array of
 * 128-byte parts after their head (counter, spinlock, stack).  Each is an
 * expression whose value is the section's enum rsk_result, as
 * RSK_PERCPU_OP_'s is: RSK_OK (pos is the index << 7), RSK_NO_INDEX (the
 * thread cannot run a section), RSK_CMPFAIL (CAS: the word was not
 * `expect`; POP: the part was empty), RSK_ABORTED, RSK_STOPPED (the gate
 * was closed, or a thread without an index reached a guard part).  Where
 * the arch has them (RSK_ARCH_HAS_PART_OPS: x86-64) the section reads the
 * index itself; elsewhere they are rsk_percpu_enter_() and an `_at`
 * operation.  s is the structure, T its type, FIELD the part's word.
 * RSK_PERCPU_CAS_UNGATED_ is the compare-and-store of a part without a
 * gate (the spinlock's: its slow path takes the word itself), which gives
 * RSK_STOPPED only to a thread without an index; RSK_PERCPU_ADD_ has no
 * gate either (the counter's parts need none: src/percpu/counter.c; a
 * thread without an index is stopped by the sign of its index, as the
 * spinlock's).  The caller tests the value with constants only, so that, once
 * inlined, each exit of the section branches straight to its caller's
 * code for that result.
 */
/* Not API: the index of a part operation's pos, telling the compiler what
 * it is (a multiple of 128 whose index fits an int), so that callers'
 * tests of the index and later address computations fold away. */
RSK_PERCPU_INLINE int rsk_percpu_pos_index_(uintptr_t pos)
{
	if ((pos & 127) != 0 || (pos >> 7) > (uintptr_t)INT32_MAX)
		__builtin_unreachable();
	return (int)(pos >> 7);
}

#define RSK_PERCPU_VDISP_(T, field) offsetof(T, part[0].field)
#define RSK_PERCPU_GDISP_(T)	    offsetof(T, part[0].gate)

#if defined(RSEQKIT_ANALYZER)
/* make check-analyze: cppcheck's parser breaks on the sections (an "AST
 * broken" error), so it checks a C model with the same results. */
#define RSK_PERCPU_PART_MODEL_(s, off, pos)                                    \
	((off) == 0 || (s)->fast_nr_ == 0 ? RSK_NO_INDEX                       \
	 : ((pos) = 0, (s)->magic_ == 0)  ? RSK_ABORTED                        \
	 : (s)->magic_ == 1		  ? RSK_STOPPED                        \
					  : RSK_OK)
#define RSK_PERCPU_ADD_(s, T, off, pos, field, count)                          \
	((void)(count), RSK_PERCPU_PART_MODEL_(s, off, pos))
#define RSK_PERCPU_CAS_(s, T, off, pos, field, expect, newv)                   \
	(RSK_PERCPU_PART_MODEL_(s, off, pos) != RSK_OK ? RSK_PERCPU_PART_MODEL_(s, off, pos) \
	 : (expect) == (newv)			     ? RSK_CMPFAIL                    \
						     : RSK_OK)
#define RSK_PERCPU_CAS_UNGATED_(s, T, off, pos, field, expect, newv)           \
	RSK_PERCPU_CAS_(s, T, off, pos, field, expect, newv)
#define RSK_PERCPU_PUSH_(s, T, off, pos, field, node, next)                    \
	((void)(node), RSK_PERCPU_PART_MODEL_(s, off, pos))
#define RSK_PERCPU_POP_(s, T, off, pos, field, head, next)                     \
	(RSK_PERCPU_PART_MODEL_(s, off, pos) != RSK_OK ? RSK_PERCPU_PART_MODEL_(s, off, pos) \
	 : ((head) = (s)->magic_) == 2		     ? RSK_CMPFAIL                    \
						     : RSK_OK)
#else
/*
 * Not API: RSK_PERCPU_SECTION_(stmt) is the enum rsk_result of a section
 * written as a statement that leaves through labels named noindex,
 * cmpfail, aborted and stopped (an asm goto's exits: the part operations
 * here, the arch's counted operations): the statement gets labels of its
 * own, and the expression is RSK_OK where the statement falls through.
 * Each exit's block starts with an empty asm, which keeps it a block of
 * its own: the result's constant is set there, off the fast path.
 * Without it clang 14 folds the blocks into the edges out of the asm
 * goto, and their copies land before the section (make insn-count: 2.5
 * more instructions per counter add, 3 per spinlock lock).
 */
#define RSK_PERCPU_EXIT_(label, result)                                        \
	label: __attribute__((unused));                                        \
	__asm__ __volatile__("");                                              \
	rsk_r_ = (result);                                                     \
	goto rsk_done_
#define RSK_PERCPU_SECTION_(stmt)                                              \
	__extension__({                                                        \
		__label__ noindex, cmpfail, aborted, stopped, rsk_done_;       \
		enum rsk_result rsk_r_;                                        \
		stmt;                                                          \
		rsk_r_ = RSK_OK;                                               \
		goto rsk_done_;                                                \
		RSK_PERCPU_EXIT_(noindex, RSK_NO_INDEX);                       \
		RSK_PERCPU_EXIT_(cmpfail, RSK_CMPFAIL);                        \
		RSK_PERCPU_EXIT_(aborted, RSK_ABORTED);                        \
		RSK_PERCPU_EXIT_(stopped, RSK_STOPPED);                        \
	rsk_done_:                                                             \
		rsk_r_;                                                        \
	})
#define RSK_PERCPU_ADD_(s, T, off, pos, field, count)                          \
	RSK_PERCPU_SECTION_(RSK_PERCPU_ADD_STMT_(s, T, off, pos, field, count))
#define RSK_PERCPU_CAS_(s, T, off, pos, field, expect, newv)                   \
	RSK_PERCPU_SECTION_(RSK_PERCPU_CAS_STMT_(s, T, off, pos, field, expect, newv))
#define RSK_PERCPU_CAS_UNGATED_(s, T, off, pos, field, expect, newv)           \
	RSK_PERCPU_SECTION_(RSK_PERCPU_CAS_UNGATED_STMT_(s, T, off, pos, field, expect, newv))
#define RSK_PERCPU_PUSH_(s, T, off, pos, field, node, next)                    \
	RSK_PERCPU_SECTION_(RSK_PERCPU_PUSH_STMT_(s, T, off, pos, field, node, next))
#define RSK_PERCPU_POP_(s, T, off, pos, field, head, next)                     \
	RSK_PERCPU_SECTION_(RSK_PERCPU_POP_STMT_(s, T, off, pos, field, head, next))
#endif

#if defined(RSEQKIT_ANALYZER)
/* (the model above) */
#elif defined(RSK_ARCH_HAS_PART_OPS) && !defined(RSK_TSAN)
/* (Under ThreadSanitizer the generic ones below: their part, and so the
 * key of their annotation, is known before the section.) */
/* The section arms its descriptor before it reads the index: an area
 * offset of 0 (no rseq) must never get that far, or the arming store would
 * land in the TCB. */
#define RSK_PERCPU_PART_READY_(off)                                            \
	do {                                                                   \
		if (RSK_PERCPU_UNLIKELY((off) == 0))                           \
			goto noindex;                                          \
	} while (0)
#define RSK_PERCPU_ADD_STMT_(s, T, off, pos, field, count)                     \
	do {                                                                   \
		RSK_PERCPU_PART_READY_(off);                                   \
		RSK_ARCH_PART_ADD(rsk_arch_area_of(off), (s)->index_offset_, (s), pos, \
				  RSK_PERCPU_SHIFT_, RSK_PERCPU_VDISP_(T, field), count); \
	} while (0)
#define RSK_PERCPU_CAS_STMT_(s, T, off, pos, field, expect, newv)              \
	do {                                                                   \
		RSK_PERCPU_PART_READY_(off);                                   \
		RSK_ARCH_PART_CAS(rsk_arch_area_of(off), (s)->index_offset_, (s), pos, \
				  RSK_PERCPU_SHIFT_, RSK_PERCPU_VDISP_(T, field), \
				  RSK_PERCPU_GDISP_(T), expect, newv);         \
	} while (0)
#define RSK_PERCPU_CAS_UNGATED_STMT_(s, T, off, pos, field, expect, newv)      \
	do {                                                                   \
		RSK_PERCPU_PART_READY_(off);                                   \
		RSK_ARCH_PART_CAS_UNGATED(rsk_arch_area_of(off), (s)->index_offset_, (s), pos, \
				  RSK_PERCPU_SHIFT_, RSK_PERCPU_VDISP_(T, field), \
				  expect, newv);                               \
	} while (0)
#define RSK_PERCPU_PUSH_STMT_(s, T, off, pos, field, node, next)               \
	do {                                                                   \
		RSK_PERCPU_PART_READY_(off);                                   \
		RSK_ARCH_PART_PUSH(rsk_arch_area_of(off), (s)->index_offset_, (s), pos, \
				  RSK_PERCPU_SHIFT_, RSK_PERCPU_VDISP_(T, field), \
				  RSK_PERCPU_GDISP_(T), node, next);           \
	} while (0)
#define RSK_PERCPU_POP_STMT_(s, T, off, pos, field, head, next)                \
	do {                                                                   \
		RSK_PERCPU_PART_READY_(off);                                   \
		RSK_ARCH_PART_POP(rsk_arch_area_of(off), (s)->index_offset_, (s), pos, \
				  RSK_PERCPU_SHIFT_, RSK_PERCPU_VDISP_(T, field), \
				  RSK_PERCPU_GDISP_(T), head, next);           \
	} while (0)
#else
/* The prologue every generic part operation shares: the area and index
 * from rsk_percpu_enter_() (else `noindex`), and pos.  Declares ioff_,
 * area_ and i_ in the enclosing block. */
#define RSK_PERCPU_ENTER_(s, off, pos)                                         \
	uint32_t ioff_ = (s)->index_offset_, i_;                               \
	rsk_arch_area_t area_;                                                 \
	if (RSK_PERCPU_UNLIKELY(!rsk_percpu_enter_((off), ioff_, (s)->fast_nr_, &area_, &i_))) \
		goto noindex;                                                  \
	(pos) = (uintptr_t)i_ << 7
/* The part's word and gate at pos. */
#define RSK_PERCPU_WORD_(s, T, pos, field)                                     \
	((intptr_t *)(void *)((char *)(s) + RSK_PERCPU_VDISP_(T, field) + (pos)))
#define RSK_PERCPU_GATE_(s, T, pos)                                            \
	((const intptr_t *)(const void *)((const char *)(s) + RSK_PERCPU_GDISP_(T) + (pos)))
/* Enter, then one gated `_at` operation on the part's word; its result
 * picks the label. */
#define RSK_PERCPU_PART_OP_(s, T, off, pos, field, op, ...)                    \
	do {                                                                   \
		int r_;                                                        \
		RSK_PERCPU_ENTER_(s, off, pos);                                \
		RSK_TSAN_RELEASE((char *)(s) + RSK_PERCPU_GDISP_(T) + (pos));   \
		r_ = RSK_PERCPU_GATED_(op, area_, ioff_, (int)i_, RSK_PERCPU_GATE_(s, T, pos), \
				       RSK_PERCPU_WORD_(s, T, pos, field), __VA_ARGS__); \
		if (RSK_PERCPU_UNLIKELY(r_ != RSK_OK)) {                       \
			if (r_ == RSK_STOPPED)                                 \
				goto stopped;                                  \
			if (r_ == RSK_CMPFAIL)                                 \
				goto cmpfail;                                  \
			goto aborted;                                          \
		}                                                              \
		RSK_TSAN_ACQUIRE((char *)(s) + RSK_PERCPU_GDISP_(T) + (pos));   \
	} while (0)
#define RSK_PERCPU_ADD_STMT_(s, T, off, pos, field, count)                     \
	do {                                                                   \
		RSK_PERCPU_ENTER_(s, off, pos);                                \
		if (RSK_PERCPU_UNLIKELY(rsk_arch_add_at(area_, ioff_, (int)i_, \
							RSK_PERCPU_WORD_(s, T, pos, field), \
							(count)) != RSK_OK))   \
			goto aborted;                                          \
	} while (0)
#define RSK_PERCPU_CAS_STMT_(s, T, off, pos, field, expect, newv)              \
	RSK_PERCPU_PART_OP_(s, T, off, pos, field, cmpstore, expect, newv)
/* As the add: the plain compare-and-store, no gate. */
#define RSK_PERCPU_CAS_UNGATED_STMT_(s, T, off, pos, field, expect, newv)      \
	do {                                                                   \
		int r_;                                                        \
		RSK_PERCPU_ENTER_(s, off, pos);                                \
		r_ = rsk_arch_cmpstore_at(area_, ioff_, (int)i_,               \
					  RSK_PERCPU_WORD_(s, T, pos, field), (expect), (newv)); \
		if (RSK_PERCPU_UNLIKELY(r_ != RSK_OK)) {                       \
			if (r_ == RSK_CMPFAIL)                                 \
				goto cmpfail;                                  \
			goto aborted;                                          \
		}                                                              \
	} while (0)
/* node->next = the head, speculatively; the commit publishes it (a head
 * that moved meanwhile fails the compare: a retry). */
#define RSK_PERCPU_PUSH_STMT_(s, T, off, pos, field, node, next)               \
	do {                                                                   \
		intptr_t head_;                                                \
		int r_;                                                        \
		RSK_PERCPU_ENTER_(s, off, pos);                                \
		head_ = __atomic_load_n(RSK_PERCPU_WORD_(s, T, pos, field), __ATOMIC_RELAXED); \
		*(intptr_t *)(void *)((char *)(node) + (next)) = head_;        \
		RSK_TSAN_RELEASE((char *)(s) + RSK_PERCPU_GDISP_(T) + (pos));   \
		r_ = RSK_PERCPU_GATED_(cmpstore_release, area_, ioff_, (int)i_, \
				       RSK_PERCPU_GATE_(s, T, pos),            \
				       RSK_PERCPU_WORD_(s, T, pos, field), head_, (intptr_t)(node)); \
		if (RSK_PERCPU_UNLIKELY(r_ != RSK_OK)) {                       \
			if (r_ == RSK_STOPPED)                                 \
				goto stopped;                                  \
			goto aborted; /* the head moved, or a restart */       \
		}                                                              \
		RSK_TSAN_ACQUIRE((char *)(s) + RSK_PERCPU_GDISP_(T) + (pos));   \
	} while (0)
#define RSK_PERCPU_POP_STMT_(s, T, off, pos, field, head, next)                \
	RSK_PERCPU_PART_OP_(s, T, off, pos, field, pop, 0, (intptr_t)(next), &(head))
#endif

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_PERCPU_H */
