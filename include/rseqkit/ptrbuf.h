/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/ptrbuf.h - per-CPU bounded pointer buffer (LIFO).
 *
 * Each CPU part holds up to `capacity` pointers and a count.  Push writes
 * the slot speculatively and commits the count (rsk_cmpstorestore); pop
 * compares both the count and the slot's content and commits the lower
 * count (rsk_cmpcmpstore).  Pointers are opaque: NULL may be stored.
 *
 * Synchronization:
 *
 *   operation              may run concurrently with    ordering
 *   ---------------------  ---------------------------  ---------------------
 *   rsk_ptrbuf_push        push, pop                    none; release with
 *                                                       RSK_PTRBUF_RELEASE:
 *                                                       stores made before
 *                                                       the push are seen by
 *                                                       whoever pops it, on
 *                                                       any CPU
 *   rsk_ptrbuf_pop         push, pop                    address dependency
 *   rsk_ptrbuf_pop_cpu     everything                   gate + fence of that
 *   rsk_ptrbuf_push_cpu    everything                   CPU; push_cpu
 *                                                       releases
 *   rsk_ptrbuf_create      -                            -
 *   rsk_ptrbuf_destroy     nothing                      -
 *
 * Without RSK_PTRBUF_RELEASE, a consumer that runs on the producer's CPU
 * after it (the kernel orders context switches and migrations) sees the
 * object, but a consumer on another CPU may not on weakly ordered
 * machines (arm, powerpc, riscv; x86 is ordered either way).
 *
 * Injection points (test builds): push - 7 after reading the index, 8
 * after reading the count; pop - 7, 8 likewise, 9 after reading the slot.
 * Where the section reads all three itself (RSK_PTRBUF_SECTION_: x86-64
 * with gcc) 7 is before it, 8 and 9 are not on the way, and the
 * section's own points are 1 (armed), 2 (gate open) and 3 (before the
 * commit).
 */
#ifndef RSEQKIT_PTRBUF_H
#define RSEQKIT_PTRBUF_H

#include <rseqkit/percpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rsk_ptrbuf_create flag: pushes commit with a store-release. */
#define RSK_PTRBUF_RELEASE 1u
/* Largest capacity per part. */
#define RSK_PTRBUF_MAX_CAPACITY (1L << 24)

struct rsk_ptrbuf_part {
	intptr_t count;	  /* slots in use, [0, capacity] */
	intptr_t gate;	  /* the progress protocol's gate */
	RSK_PERCPU_FLEX_BEGIN_ intptr_t slot[]; RSK_PERCPU_FLEX_END_  /* capacity pointers */
} __attribute__((aligned(RSK_PERCPU_ALIGN)));

struct rsk_ptrbuf {
	RSK_PERCPU_HEAD;	  /* mode, nr: read-only */
	unsigned flags;		  /* read-only: RSK_PTRBUF_* */
	intptr_t capacity;	  /* read-only: pointers per part */
	size_t stride;		  /* bytes from one part to the next */
	char *parts;		  /* the first part */
};

/*
 * rsk_ptrbuf_create - allocate a buffer of `capacity` pointers per part,
 * every part empty.  flags: 0 or RSK_PTRBUF_RELEASE.
 * Returns 0, -EINVAL (out NULL, unknown mode or flag, capacity < 1 or
 * > RSK_PTRBUF_MAX_CAPACITY), -ENOMEM.
 */
int rsk_ptrbuf_create(struct rsk_ptrbuf **out, enum rsk_index_mode mode, long capacity,
		      unsigned flags);

/* rsk_ptrbuf_destroy - free b (not what its pointers point to).
 * Returns 0, or -EINVAL if b is NULL or destroyed already. */
int rsk_ptrbuf_destroy(struct rsk_ptrbuf *b);

static inline struct rsk_ptrbuf_part *rsk_ptrbuf_part_(const struct rsk_ptrbuf *b, size_t idx)
{
	return (struct rsk_ptrbuf_part *)(void *)(b->parts + idx * b->stride);
}

/*
 * Not API: one attempt of each operation (RSK_OK with *idx set,
 * RSK_FULL, RSK_EMPTY or another rsk_result), and the slow path: the
 * operation after a first attempt that returned `first`.
 */
enum rsk_ptrbuf_op_ { RSK_PTRBUF_PUSH_, RSK_PTRBUF_POP_ };
int rsk_ptrbuf_slow_(struct rsk_ptrbuf *b, enum rsk_ptrbuf_op_ op, void *ptr, void **out,
		     enum rsk_result first);

/* The arch's stride part operations: the section reads the index, finds
 * the part (index * stride), checks the gate and the count itself, so
 * nothing is read before it but the buffer's constants.  With gcc only:
 * gcc 12's pop + push is faster this way than in the generic form, but
 * clang 14 spills registers around the ten-register section and is
 * slower (the yardstick's ptrbuf row measures either form).
 * RSK_PTRBUF_SECTION_ (Not API) says which form is in use. */
#if defined(RSK_ARCH_HAS_STRIDE_OPS) && !defined(__clang__) && !defined(RSK_TSAN) && \
	!defined(RSEQKIT_ANALYZER)
#define RSK_PTRBUF_SECTION_ 1
#define RSK_PTRBUF_CDISP_ offsetof(struct rsk_ptrbuf_part, count)
#define RSK_PTRBUF_GDISP_ offsetof(struct rsk_ptrbuf_part, gate)
#define RSK_PTRBUF_SDISP_ offsetof(struct rsk_ptrbuf_part, slot)

RSK_PERCPU_INLINE enum rsk_result rsk_ptrbuf_try_push_(struct rsk_ptrbuf *b, void *ptr, int *idx, ptrdiff_t off)
{
	enum rsk_result r;
	intptr_t i;

	/* No rseq in the process: arming would write the TCB. */
	if (RSK_PERCPU_UNLIKELY(off == 0))
		return RSK_NO_INDEX;
	RSK_INJECT_C(7);
	r = RSK_PERCPU_SECTION_(RSK_ARCH_COUNTED_PUSH(
		rsk_arch_area_of(off), b->index_offset_, b->parts, b->stride, RSK_PTRBUF_CDISP_,
		RSK_PTRBUF_GDISP_, RSK_PTRBUF_SDISP_, b->capacity, ptr, i));
	if (RSK_PERCPU_LIKELY(r == RSK_OK)) {
		if (i < 0 || i > INT32_MAX) /* it passed the section's sign test */
			__builtin_unreachable();
		*idx = (int)i;
	} else if (r == RSK_CMPFAIL) {
		r = RSK_FULL;
	}
	return r;
}

RSK_PERCPU_INLINE enum rsk_result rsk_ptrbuf_try_pop_(struct rsk_ptrbuf *b, void **out, int *idx, ptrdiff_t off)
{
	enum rsk_result r;
	intptr_t i, ptr;

	if (RSK_PERCPU_UNLIKELY(off == 0))
		return RSK_NO_INDEX;
	RSK_INJECT_C(7);
	r = RSK_PERCPU_SECTION_(RSK_ARCH_COUNTED_POP(
		rsk_arch_area_of(off), b->index_offset_, b->parts, b->stride, RSK_PTRBUF_CDISP_,
		RSK_PTRBUF_GDISP_, RSK_PTRBUF_SDISP_, ptr, i));
	if (RSK_PERCPU_LIKELY(r == RSK_OK)) {
		if (i < 0 || i > INT32_MAX)
			__builtin_unreachable();
		*idx = (int)i;
		*out = (void *)ptr;
	} else if (r == RSK_CMPFAIL) {
		*out = NULL;
		r = RSK_EMPTY;
	}
	return r;
}
#else
RSK_PERCPU_INLINE enum rsk_result rsk_ptrbuf_try_push_(struct rsk_ptrbuf *b, void *ptr, int *idx, ptrdiff_t off)
{
	uint32_t ioff = b->index_offset_, i;
	rsk_arch_area_t area;
	int ready = rsk_percpu_enter_(off, ioff, b->fast_nr_, &area, &i);
	struct rsk_ptrbuf_part *p;
	intptr_t count;

	if (RSK_PERCPU_UNLIKELY(!ready))
		return RSK_NO_INDEX;
	*idx = (int)i;
	RSK_INJECT_C(7);
	p = rsk_ptrbuf_part_(b, i);
	count = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
	if (RSK_PERCPU_UNLIKELY((uintptr_t)count >= (uintptr_t)b->capacity))
		return RSK_FULL;
	RSK_INJECT_C(8);
	if (b->flags & RSK_PTRBUF_RELEASE)
		return RSK_PERCPU_OP_(cmpstorestore_release, ioff, area, i, &p->gate, &p->count,
				      count, &p->slot[count], (intptr_t)ptr, count + 1);
	/* Relaxed for other CPUs, but in program order for this one (a
	 * consumer that runs here after the push sees the object): the
	 * compiler must not sink the caller's stores below the commit, which
	 * the x86-64 section does not forbid by itself.  No instruction. */
	__atomic_signal_fence(__ATOMIC_RELEASE);
	return RSK_PERCPU_OP_(cmpstorestore, ioff, area, i, &p->gate, &p->count, count,
			      &p->slot[count], (intptr_t)ptr, count + 1);
}

RSK_PERCPU_INLINE enum rsk_result rsk_ptrbuf_try_pop_(struct rsk_ptrbuf *b, void **out, int *idx, ptrdiff_t off)
{
	uint32_t ioff = b->index_offset_, i;
	rsk_arch_area_t area;
	int ready = rsk_percpu_enter_(off, ioff, b->fast_nr_, &area, &i);
	struct rsk_ptrbuf_part *p;
	intptr_t count, ptr;
	enum rsk_result r;

	if (RSK_PERCPU_UNLIKELY(!ready))
		return RSK_NO_INDEX;
	*idx = (int)i;
	RSK_INJECT_C(7);
	p = rsk_ptrbuf_part_(b, i);
	count = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
	if (RSK_PERCPU_UNLIKELY((uintptr_t)(count - 1) >= (uintptr_t)b->capacity)) {
		*out = NULL;
		return RSK_EMPTY;
	}
	RSK_INJECT_C(8);
	ptr = __atomic_load_n(&p->slot[count - 1], __ATOMIC_RELAXED);
	RSK_INJECT_C(9);
	/* Count and slot both unchanged at the commit: ptr is the top entry,
	 * taken exactly once. */
	r = RSK_PERCPU_OP_(cmpcmpstore, ioff, area, i, &p->gate, &p->count, count,
			   &p->slot[count - 1], ptr, count - 1);
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		*out = (void *)ptr;
	return r;
}
#endif

/*
 * rsk_ptrbuf_push - append ptr to the current CPU's part.
 * Returns 0, -ENOSPC (that part is full: nothing
 * stored), -EINVAL (b NULL, or b destroyed), -ENXIO (a slow path's fence
 * failed), -EDEADLK (a signal handler whose thread holds the gate it
 * needs), -EOWNERDEAD (a gate's holder exited holding it).  Lock-free on
 * the fast path.
 */
RSK_PERCPU_INLINE int rsk_ptrbuf_push(struct rsk_ptrbuf *b, void *ptr)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r;
	int idx;

	if (RSK_PERCPU_UNLIKELY(b == NULL))
		return -EINVAL;
	r = rsk_ptrbuf_try_push_(b, ptr, &idx, off);
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		return 0;
	if (r == RSK_FULL)
		return -ENOSPC;
	return rsk_ptrbuf_slow_(b, RSK_PTRBUF_PUSH_, ptr, NULL, r);
}

/*
 * rsk_ptrbuf_pop - take the last pointer of the current CPU's part into
 * *out.  Returns 0, -ENOENT (that part is empty;
 * *out = NULL), -EINVAL (b or out NULL, or b destroyed), -ENXIO (a slow
 * path's fence failed), -EDEADLK (a signal handler whose thread holds the
 * gate it needs), -EOWNERDEAD (a gate's holder exited holding it).
 * Lock-free on the fast path.
 */
RSK_PERCPU_INLINE int rsk_ptrbuf_pop(struct rsk_ptrbuf *b, void **out)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r;
	int idx;

	if (RSK_PERCPU_UNLIKELY(b == NULL || out == NULL))
		return -EINVAL;
	r = rsk_ptrbuf_try_pop_(b, out, &idx, off);
	if (RSK_PERCPU_LIKELY(r == RSK_OK))
		return 0;
	if (r == RSK_EMPTY)
		return -ENOENT;
	{
		/* Through a local: out's target stays out of memory on the
		 * fast path (its address does not escape to the call). */
		void *got;
		int ret = rsk_ptrbuf_slow_(b, RSK_PTRBUF_POP_, NULL, &got, r);

		*out = got;
		return ret;
	}
}

/*
 * rsk_ptrbuf_pop_cpu - take the last pointer of part `cpu` (any CPU's)
 * while that CPU's threads keep operating (the part's gate is closed and
 * the CPU fenced meanwhile).  Returns 0, -ENOENT (empty; *out = NULL),
 * -EINVAL (b or out NULL, cpu outside [0, b->nr)), -ENXIO (the fence
 * failed), -EDEADLK (from a handler whose thread holds that part's gate),
 * -EOWNERDEAD (the gate's holder is gone).
 */
int rsk_ptrbuf_pop_cpu(struct rsk_ptrbuf *b, int cpu, void **out);

/*
 * rsk_ptrbuf_push_cpu - append ptr to part `cpu` (any CPU's), as safely as
 * rsk_ptrbuf_pop_cpu() and with release ordering: with it, pointers move
 * between CPUs.  Returns 0, -ENOSPC (full), -EINVAL (as pop_cpu).
 */
int rsk_ptrbuf_push_cpu(struct rsk_ptrbuf *b, int cpu, void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_PTRBUF_H */
