/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/ops.h - the restartable primitive operations, portable form.
 *
 * Each operation is a complete critical section: it arms the thread's
 * descriptor, re-checks that the thread still runs on index `idx` (the
 * value rsk_index(mode) returned), performs its loads and compares and
 * ends with one commit store.  If the thread is preempted, migrated or
 * signalled before the commit, the kernel restarts it at the abort label
 * and nothing was stored except the documented speculative stores (to
 * memory that only becomes visible through the commit).
 *
 * Usage pattern (per-CPU counter):
 *
 *	for (;;) {
 *		int cpu = rsk_index(RSK_INDEX_CPU);
 *		if (cpu < 0) { slow path (atomics, a lock ...); break; }
 *		if (rsk_add(RSK_INDEX_CPU, cpu, &count[cpu], 1) == RSK_OK)
 *			break;
 *	}
 *
 * Return value of every operation (an enum rsk_result, >= 0, or -EINVAL):
 *	RSK_OK       committed
 *	RSK_CMPFAIL  a compare failed, nothing was stored (not for add/derefadd)
 *	RSK_ABORTED  restarted by the kernel, or idx was no longer current, or
 *	             the thread cannot run sections: nothing was stored; retry
 *	             with a fresh index.
 *	RSK_STOPPED  (rsk_gated_* only) *gate was not 0: nothing was stored;
 *	             the progress protocol owns that CPU's data right now,
 *	             take the slow path (see <rseqkit/progress.h>).
 *	-EINVAL      a bad argument, checked before the section (nothing was
 *	             stored; retrying cannot help): `mode` is not RSK_INDEX_CPU
 *	             or RSK_INDEX_CID (rsk_index() returns -1 for it), the
 *	             first pointer (`v`; `ptr` for derefadd) is NULL, or a
 *	             copy's nwords exceeds RSK_CMPCOPYSTORE_MAX_WORDS.
 *	             The other pointers (v2, dst, src, out, gate, and *ptr)
 *	             are not checked: like memcpy's, they must point to valid
 *	             memory, and NULL is undefined behaviour.
 *
 * Ordering: the relaxed operations order nothing beyond the commit store
 * itself.  The _release variants make the commit a store-release: a
 * thread on another CPU that reads the committed word with acquire
 * ordering sees every earlier store of the committing thread (the
 * speculative ones included).  Precondition for all: `idx` came from
 * rsk_index(mode) in the calling thread.
 */
#ifndef RSEQKIT_OPS_H
#define RSEQKIT_OPS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <rseqkit/thread.h>
#include <rseqkit/arch.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The result codes of the raw operations and of one attempt of a
 * structure's operation: one enum, one meaning per value.  Every value is
 * >= 0 and every errno value an operation returns is negative, so one int
 * carries either without ambiguity: `ret < 0` is an argument error, any
 * other value an enum rsk_result.  RSK_OK is 0, so the committed path
 * tests the same zero as before.  The raw operations return the first
 * four; the last four are the structures' own (their slow paths take the
 * first attempt's code).
 */
enum rsk_result {
	RSK_OK = 0,	  /* committed */
	RSK_CMPFAIL = 1,  /* a compare failed (the data changed): nothing stored */
	RSK_ABORTED = 2,  /* restarted by the kernel, the index moved, or no
			     section could run: nothing stored; retry */
	RSK_STOPPED = 3,  /* gated operations only: the gate was closed */
	RSK_NO_INDEX = 4, /* structures: no usable index (not initialised,
			     not registered, no rseq, or a guard part) */
	RSK_NO_PART = 5,  /* structures: the CPU's part is not created yet */
	RSK_EMPTY = 6,	  /* structures: the part was empty */
	RSK_FULL = 7,	  /* structures: the part was full */
};

/*
 * The longest copy of rsk_cmpcopystore() and its family, in words: 65536
 * (512 KiB on 64-bit targets, 256 KiB on 32-bit ones).  Longer copies are
 * rejected with -EINVAL before the section starts.  The bound keeps the
 * count valid for every arch's copy loop (a signed word index scaled by
 * the word size, or an unsigned down-counter: see <rseqkit/arch.h>), so
 * that a huge or "negative" (size_t)-1 count cannot write below or far
 * beyond dst; and a copy that long would rarely commit anyway.
 */
#define RSK_CMPCOPYSTORE_MAX_WORDS ((size_t)1 << 16)

/* Not API: the index field of a mode in the area (RSK_INDEX_CPU: cpu_id,
 * RSK_INDEX_CID: mm_cid), or 0 for an unknown mode. */
#define RSK_OPS_FIELD_(mode)                                                   \
	((mode) == RSK_INDEX_CPU ? RSK_ABI_OFF_CPU_ID                          \
				 : (mode) == RSK_INDEX_CID ? RSK_ABI_OFF_MM_CID : 0)

/* The arch's `_at` operation on the index field of `mode`; mode is a
 * constant at every call site, so this folds to one inlined asm section.
 * The compiler barriers make every operation order the thread's other
 * memory accesses around it, in program order, as the documentation of
 * each says (the arch layer's own sections need not).  The argument
 * checks are outside the section: an unknown mode folds away where mode
 * is a constant, and the NULL check of the first pointer is one compare.
 * Under ThreadSanitizer the section releases its keys before it and
 * acquires them after a commit (<rseqkit/tsan.h>): its first operand and,
 * for a gated operation, its gate (RSK_OPS_GATED_AT_). */
#define RSK_OPS_AT_(op, mode, idx, ...)                                        \
	RSK_OPS_GATED_AT_(op, mode, idx, (const intptr_t *)NULL, __VA_ARGS__)
/* Not API: RSK_OPS_AT_ of a gated operation (gate NULL: an ungated one).
 * Under TSan a gated section is keyed on its gate as well as on its first
 * operand: the gate is the key of its part, the one the structures' fast
 * paths use (RSK_PERCPU_OP_, <rseqkit/percpu.h>) and the slow paths close
 * and open with atomics TSan sees, so the section joins their order.
 * (Keyed on its first operand alone, a pool's refill or flush of its own
 * cache - src/alloc/object_pool.c, cache_move_here - was ordered with none of the
 * pushes and pops of that cache.) */
#define RSK_OPS_GATED_AT_(op, mode, idx, gate, ...)                            \
	do {                                                                   \
		ptrdiff_t rsk_off_;                                            \
		uint32_t rsk_field_ = RSK_OPS_FIELD_(mode);                    \
		int rsk_ret_;                                                  \
		if (__builtin_expect(rsk_field_ == 0, 0))                      \
			return -EINVAL; /* unknown mode */                     \
		if (__builtin_expect(RSK_OPS_FIRST_(__VA_ARGS__, 0) == NULL, 0)) \
			return -EINVAL;                                        \
		rsk_off_ = rsk_area_offset_();                                 \
		if (__builtin_expect(rsk_off_ == 0, 0))                        \
			return RSK_ABORTED;                                    \
		__asm__ __volatile__("" ::: "memory");                         \
		RSK_TSAN_RELEASE(RSK_OPS_FIRST_(__VA_ARGS__, 0));               \
		RSK_TSAN_RELEASE_IF((gate) != NULL, (gate));                   \
		rsk_ret_ = rsk_arch_##op##_at(rsk_arch_area_of(rsk_off_), rsk_field_, (idx), \
					      __VA_ARGS__);                    \
		__asm__ __volatile__("" ::: "memory");                         \
		RSK_TSAN_ACQUIRE_IF(rsk_ret_ == RSK_OK, RSK_OPS_FIRST_(__VA_ARGS__, 0)); \
		RSK_TSAN_ACQUIRE_IF(rsk_ret_ == RSK_OK && (gate) != NULL, (gate)); \
		return rsk_ret_;                                               \
	} while (0)
/* Not API: an operation's first operand (the word it commits, or for
 * derefadd the pointer it goes through): the key of its TSan annotation. */
#define RSK_OPS_FIRST_(a, ...) (a)
#define RSK_OP_DISPATCH(op, mode, idx, ...) RSK_OPS_AT_(op, mode, idx, __VA_ARGS__)

/* rsk_cmpstore - if (*v == expect) *v = newv. */
static inline int rsk_cmpstore(enum rsk_index_mode mode, int idx, intptr_t *v,
			       intptr_t expect, intptr_t newv)
{
	RSK_OP_DISPATCH(cmpstore, mode, idx, v, expect, newv);
}

/* rsk_cmpstore_release - rsk_cmpstore() with a store-release commit. */
static inline int rsk_cmpstore_release(enum rsk_index_mode mode, int idx,
				       intptr_t *v, intptr_t expect,
				       intptr_t newv)
{
	RSK_OP_DISPATCH(cmpstore_release, mode, idx, v, expect, newv);
}

/* rsk_cmpcmpstore - if (*v == expect && *v2 == expect2) *v = newv. */
static inline int rsk_cmpcmpstore(enum rsk_index_mode mode, int idx,
				  intptr_t *v, intptr_t expect, intptr_t *v2,
				  intptr_t expect2, intptr_t newv)
{
	RSK_OP_DISPATCH(cmpcmpstore, mode, idx, v, expect, v2, expect2, newv);
}

/* rsk_cmpstorestore - if (*v == expect) { *v2 = newv2; *v = newv; };
 * the store to *v2 is speculative: it may happen even when the section
 * aborts, so *v2 must be memory that only *v publishes. */
static inline int rsk_cmpstorestore(enum rsk_index_mode mode, int idx,
				    intptr_t *v, intptr_t expect,
				    intptr_t *v2, intptr_t newv2, intptr_t newv)
{
	RSK_OP_DISPATCH(cmpstorestore, mode, idx, v, expect, v2, newv2, newv);
}

/* rsk_cmpstorestore_release - rsk_cmpstorestore(), store-release commit. */
static inline int rsk_cmpstorestore_release(enum rsk_index_mode mode, int idx,
					    intptr_t *v, intptr_t expect,
					    intptr_t *v2, intptr_t newv2,
					    intptr_t newv)
{
	RSK_OP_DISPATCH(cmpstorestore_release, mode, idx, v, expect, v2, newv2,
			newv);
}

/* rsk_cmpcopystore - if (*v == expect) { copy nwords words src -> dst;
 * *v = newv; }.  The copy is speculative (see rsk_cmpstorestore) and
 * word-sized: dst and src must be intptr_t-aligned.  nwords may be 0; above
 * RSK_CMPCOPYSTORE_MAX_WORDS it is -EINVAL, nothing copied or stored. */
static inline int rsk_cmpcopystore(enum rsk_index_mode mode, int idx,
				   intptr_t *v, intptr_t expect, intptr_t *dst,
				   const intptr_t *src, size_t nwords,
				   intptr_t newv)
{
	if (__builtin_expect(nwords > RSK_CMPCOPYSTORE_MAX_WORDS, 0))
		return -EINVAL;
	RSK_OP_DISPATCH(cmpcopystore, mode, idx, v, expect, dst, src,
			(intptr_t)nwords, newv);
}

/* rsk_cmpcopystore_release - rsk_cmpcopystore(), store-release commit. */
static inline int rsk_cmpcopystore_release(enum rsk_index_mode mode, int idx,
					   intptr_t *v, intptr_t expect,
					   intptr_t *dst, const intptr_t *src,
					   size_t nwords, intptr_t newv)
{
	if (__builtin_expect(nwords > RSK_CMPCOPYSTORE_MAX_WORDS, 0))
		return -EINVAL;
	RSK_OP_DISPATCH(cmpcopystore_release, mode, idx, v, expect, dst, src,
			(intptr_t)nwords, newv);
}

/* rsk_add - *v += count.  Never RSK_CMPFAIL. */
static inline int rsk_add(enum rsk_index_mode mode, int idx, intptr_t *v,
			  intptr_t count)
{
	RSK_OP_DISPATCH(add, mode, idx, v, count);
}

/* rsk_pop - if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v +
 * offset); }: unlinks the head of a singly linked list whose link is at
 * byte `offset` in each node.  No ABA: the head cannot change between the
 * load and the commit without restarting the section. */
static inline int rsk_pop(enum rsk_index_mode mode, int idx, intptr_t *v,
			  intptr_t expectnot, intptr_t offset, intptr_t *out)
{
	RSK_OP_DISPATCH(pop, mode, idx, v, expectnot, offset, out);
}

/* rsk_derefadd - *(intptr_t *)(*ptr + off) += inc: adds to a slot of an
 * array reached through a pointer that another thread may swap (with a
 * fence) between sections.  Never RSK_CMPFAIL. */
static inline int rsk_derefadd(enum rsk_index_mode mode, int idx,
			       intptr_t *const *ptr, intptr_t off,
			       intptr_t inc)
{
	RSK_OP_DISPATCH(derefadd, mode, idx, ptr, off, inc);
}

/*
 * Gated operations: the same sections, plus a load of *gate after the
 * descriptor is armed; unless it is 0 they return RSK_STOPPED without
 * storing.  A gate is the word the progress protocol closes to own one
 * CPU's data with ordinary code (rsk_gate_close(), <rseqkit/progress.h>);
 * per-CPU data structures keep one gate per CPU part.
 */
#define RSK_GATED_OP(op, mode, idx, gate, ...)                                \
	RSK_OPS_GATED_AT_(gated_##op, mode, idx, (gate), __VA_ARGS__, (gate))

/* rsk_gated_cmpstore - rsk_cmpstore() unless *gate != 0. */
static inline int rsk_gated_cmpstore(enum rsk_index_mode mode, int idx,
				     const intptr_t *gate, intptr_t *v,
				     intptr_t expect, intptr_t newv)
{
	RSK_GATED_OP(cmpstore, mode, idx, gate, v, expect, newv);
}

/* rsk_gated_cmpstore_release - rsk_cmpstore_release() unless *gate != 0. */
static inline int rsk_gated_cmpstore_release(enum rsk_index_mode mode, int idx,
					     const intptr_t *gate, intptr_t *v,
					     intptr_t expect, intptr_t newv)
{
	RSK_GATED_OP(cmpstore_release, mode, idx, gate, v, expect, newv);
}

/* rsk_gated_cmpcmpstore - rsk_cmpcmpstore() unless *gate != 0. */
static inline int rsk_gated_cmpcmpstore(enum rsk_index_mode mode, int idx,
					const intptr_t *gate, intptr_t *v,
					intptr_t expect, intptr_t *v2,
					intptr_t expect2, intptr_t newv)
{
	RSK_GATED_OP(cmpcmpstore, mode, idx, gate, v, expect, v2, expect2, newv);
}

/* rsk_gated_cmpstorestore - rsk_cmpstorestore() unless *gate != 0. */
static inline int rsk_gated_cmpstorestore(enum rsk_index_mode mode, int idx,
					  const intptr_t *gate, intptr_t *v,
					  intptr_t expect, intptr_t *v2,
					  intptr_t newv2, intptr_t newv)
{
	RSK_GATED_OP(cmpstorestore, mode, idx, gate, v, expect, v2, newv2, newv);
}

/* rsk_gated_cmpstorestore_release - rsk_cmpstorestore_release() unless
 * *gate != 0. */
static inline int rsk_gated_cmpstorestore_release(enum rsk_index_mode mode,
						  int idx, const intptr_t *gate,
						  intptr_t *v, intptr_t expect,
						  intptr_t *v2, intptr_t newv2,
						  intptr_t newv)
{
	RSK_GATED_OP(cmpstorestore_release, mode, idx, gate, v, expect, v2, newv2,
		     newv);
}

/* rsk_gated_cmpcopystore - rsk_cmpcopystore() unless *gate != 0. */
static inline int rsk_gated_cmpcopystore(enum rsk_index_mode mode, int idx,
					 const intptr_t *gate, intptr_t *v,
					 intptr_t expect, intptr_t *dst,
					 const intptr_t *src, size_t nwords,
					 intptr_t newv)
{
	if (__builtin_expect(nwords > RSK_CMPCOPYSTORE_MAX_WORDS, 0))
		return -EINVAL;
	RSK_GATED_OP(cmpcopystore, mode, idx, gate, v, expect, dst, src,
		     (intptr_t)nwords, newv);
}

/* rsk_gated_cmpcopystore_release - rsk_cmpcopystore_release() unless
 * *gate != 0. */
static inline int rsk_gated_cmpcopystore_release(enum rsk_index_mode mode,
						 int idx, const intptr_t *gate,
						 intptr_t *v, intptr_t expect,
						 intptr_t *dst,
						 const intptr_t *src,
						 size_t nwords, intptr_t newv)
{
	if (__builtin_expect(nwords > RSK_CMPCOPYSTORE_MAX_WORDS, 0))
		return -EINVAL;
	RSK_GATED_OP(cmpcopystore_release, mode, idx, gate, v, expect, dst, src,
		     (intptr_t)nwords, newv);
}

/* rsk_gated_add - rsk_add() unless *gate != 0. */
static inline int rsk_gated_add(enum rsk_index_mode mode, int idx,
				const intptr_t *gate, intptr_t *v,
				intptr_t count)
{
	RSK_GATED_OP(add, mode, idx, gate, v, count);
}

/* rsk_gated_pop - rsk_pop() unless *gate != 0. */
static inline int rsk_gated_pop(enum rsk_index_mode mode, int idx,
				const intptr_t *gate, intptr_t *v,
				intptr_t expectnot, intptr_t offset,
				intptr_t *out)
{
	RSK_GATED_OP(pop, mode, idx, gate, v, expectnot, offset, out);
}

/* rsk_gated_derefadd - rsk_derefadd() unless *gate != 0. */
static inline int rsk_gated_derefadd(enum rsk_index_mode mode, int idx,
				     const intptr_t *gate,
				     intptr_t *const *ptr, intptr_t off,
				     intptr_t inc)
{
	RSK_GATED_OP(derefadd, mode, idx, gate, ptr, off, inc);
}

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_OPS_H */
