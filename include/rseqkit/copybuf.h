/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/copybuf.h - per-CPU bounded buffer of fixed-size items, copied
 * by value (LIFO).
 *
 * Where a pointer buffer hands out objects that live elsewhere, a copy
 * buffer stores the bytes: no allocation per item, no object lifetime to
 * manage.  The copy happens inside the critical section (rsk_cmpcopystore,
 * word by word; on x86-64 items of 2, 4 or 8 words are copied unrolled),
 * so the item size is rounded up to whole words internally and bounded by
 * RSK_COPYBUF_MAX_ITEM: a long copy widens the window in which preemption
 * restarts the section.
 *
 * Synchronization:
 *
 *   operation              may run concurrently with    ordering
 *   ---------------------  ---------------------------  ---------------------
 *   rsk_copybuf_push       push, pop                    none; release with
 *                                                       RSK_COPYBUF_RELEASE
 *                                                       (the copied item and
 *                                                       earlier stores are
 *                                                       seen by whoever pops
 *                                                       it, on any CPU)
 *   rsk_copybuf_pop        push, pop                    relaxed
 *   rsk_copybuf_pop_cpu    everything                   gate + fence of that
 *   rsk_copybuf_push_cpu   everything                   CPU; push_cpu
 *                                                       releases
 *   rsk_copybuf_create     -                            -
 *   rsk_copybuf_destroy    nothing                      -
 *
 * Every operation reads or writes exactly item_size bytes of the caller's
 * item, at any alignment.  Items of a word-multiple size at a word-aligned
 * address are copied in place; others go through a bounce buffer on the
 * stack (one memcpy more, and a function call: that case is handled out
 * of line), or, in the _cpu operations, are copied with memcpy under the
 * gate.
 * On any result but success, the item buffer of rsk_copybuf_pop() may
 * have been partly written (the copy is speculative).
 *
 * Injection points (test builds): 7 after reading the index, 8 after
 * reading the count.
 */
#ifndef RSEQKIT_COPYBUF_H
#define RSEQKIT_COPYBUF_H

#include <string.h>
#include <rseqkit/percpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rsk_copybuf_create flag: pushes commit with a store-release. */
#define RSK_COPYBUF_RELEASE 1u
/* Largest item, in bytes. */
#define RSK_COPYBUF_MAX_ITEM 256
/* Largest capacity per part. */
#define RSK_COPYBUF_MAX_CAPACITY (1L << 24)

struct rsk_copybuf_part {
	intptr_t count;	  /* items in use, [0, capacity] */
	intptr_t gate;	  /* the progress protocol's gate */
	RSK_PERCPU_FLEX_BEGIN_ intptr_t item[]; RSK_PERCPU_FLEX_END_  /* capacity * words */
} __attribute__((aligned(RSK_PERCPU_ALIGN)));

struct rsk_copybuf {
	RSK_PERCPU_HEAD;	  /* mode, nr: read-only */
	unsigned flags;		  /* read-only: RSK_COPYBUF_* */
	size_t item_size;	  /* read-only: bytes per item, as created */
	size_t words;		  /* item_size rounded up to words */
	intptr_t capacity;	  /* read-only: items per part */
	size_t stride;		  /* bytes from one part to the next */
	char *parts;		  /* the first part */
};

/*
 * rsk_copybuf_create - allocate a buffer of `capacity` items of
 * `item_size` bytes per part, every part empty.  flags: 0 or
 * RSK_COPYBUF_RELEASE.  Returns 0, -EINVAL (out NULL, unknown mode or
 * flag, item_size 0 or > RSK_COPYBUF_MAX_ITEM, capacity < 1 or
 * > RSK_COPYBUF_MAX_CAPACITY), -ENOMEM.
 */
int rsk_copybuf_create(struct rsk_copybuf **out, enum rsk_index_mode mode, size_t item_size,
		       long capacity, unsigned flags);

/* rsk_copybuf_destroy - free b.  Returns 0, or -EINVAL if b is NULL or
 * destroyed already. */
int rsk_copybuf_destroy(struct rsk_copybuf *b);

/*
 * Not API: one attempt of each operation on word-aligned items
 * (RSK_OK with *idx set, RSK_FULL, RSK_EMPTY or another
 * rsk_result), and the slow path: the operation after a first attempt that
 * returned `first` (RSK_CMPFAIL if none was made: items that are not
 * word-aligned go through a bounce buffer there).
 */
enum rsk_copybuf_op_ { RSK_COPYBUF_PUSH_, RSK_COPYBUF_POP_ };
int rsk_copybuf_slow_(struct rsk_copybuf *b, enum rsk_copybuf_op_ op, void *item,
		      enum rsk_result first);

static inline struct rsk_copybuf_part *rsk_copybuf_part_(const struct rsk_copybuf *b, size_t idx)
{
	return (struct rsk_copybuf_part *)(void *)(b->parts + idx * b->stride);
}

/* Whether item can be copied a word at a time in place. */
static inline int rsk_copybuf_direct_(const struct rsk_copybuf *b, const void *item)
{
	return ((uintptr_t)item | b->item_size) % sizeof(intptr_t) == 0;
}

/*
 * The arch's counted copy sections (RSK_ARCH_HAS_COUNTED_COPY: x86-64),
 * for items of 2, 4 or 8 words: the section reads the index, finds the
 * part, checks the gate and the count, and copies the item unrolled, so
 * nothing is read before it but the buffer's constants.  The item size is
 * the buffer's, so the branches that pick the section go the same way
 * every time (three sizes: with a fourth, clang 14 makes them one
 * indirect jump through a table).  Other sizes, and the other archs, take
 * the generic form
 * (rsk_copybuf_try_push_at_ and _pop_at_: the index and count read
 * before a gated cmpcopystore that copies word by word).
 * RSK_COPYBUF_SECTION_ (Not API) says whether the counted form is in use.
 */
#if defined(RSK_ARCH_HAS_COUNTED_COPY) && defined(RSK_ARCH_HAS_STRIDE_OPS) && !defined(RSK_TSAN) && \
	!defined(RSEQKIT_ANALYZER)
#define RSK_COPYBUF_SECTION_ 1
#define RSK_COPYBUF_COPY_(b, off, OP, W, ptr, part)                           \
	RSK_PERCPU_SECTION_(RSK_COPYBUF_##OP##_W_(b, off, W, ptr, part))
#define RSK_COPYBUF_PUSH_W_(b, off, W, ptr, part)                              \
	RSK_ARCH_COUNTED_COPY_PUSH(rsk_arch_area_of(off), (b)->index_offset_, (b),        \
				   offsetof(struct rsk_copybuf, parts),                 \
				   offsetof(struct rsk_copybuf, stride),                \
				   offsetof(struct rsk_copybuf, capacity), RSK_COPYBUF_CDISP_, \
				   RSK_COPYBUF_GDISP_, RSK_COPYBUF_SDISP_, W, ptr, part)
#define RSK_COPYBUF_POP_W_(b, off, W, ptr, part)                               \
	RSK_ARCH_COUNTED_COPY_POP(rsk_arch_area_of(off), (b)->index_offset_, (b),         \
				  offsetof(struct rsk_copybuf, parts),                  \
				  offsetof(struct rsk_copybuf, stride), RSK_COPYBUF_CDISP_, \
				  RSK_COPYBUF_GDISP_, RSK_COPYBUF_SDISP_, W, ptr, part)
/* The bytes of a W-word item. */
#define RSK_COPYBUF_W_(W) ((W) * sizeof(intptr_t))
#define RSK_COPYBUF_CDISP_ offsetof(struct rsk_copybuf_part, count)
#define RSK_COPYBUF_GDISP_ offsetof(struct rsk_copybuf_part, gate)
#define RSK_COPYBUF_SDISP_ offsetof(struct rsk_copybuf_part, item)
/* The flags whose pushes rsk_copybuf_push() sends out of line: the
 * counted section's release is a compiler barrier, which would make the
 * caller reload what it keeps in registers, whatever the buffer.  (The
 * generic form's release is an instruction of its own, inline.) */
#define RSK_COPYBUF_OUT_OF_LINE_ RSK_COPYBUF_RELEASE
#else
#define RSK_COPYBUF_OUT_OF_LINE_ 0u
#endif

/* The generic form: see above. */
RSK_PERCPU_INLINE enum rsk_result rsk_copybuf_try_push_at_(struct rsk_copybuf *b, const intptr_t *src,
							int *idx, ptrdiff_t off)
{
	uint32_t ioff = b->index_offset_, i;
	rsk_arch_area_t area;
	int ready = rsk_percpu_enter_(off, ioff, b->fast_nr_, &area, &i);
	struct rsk_copybuf_part *p;
	intptr_t count;

	if (RSK_PERCPU_UNLIKELY(!ready))
		return RSK_NO_INDEX;
	*idx = (int)i;
	RSK_INJECT_C(7);
	p = rsk_copybuf_part_(b, i);
	count = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
	if (RSK_PERCPU_UNLIKELY((uintptr_t)count >= (uintptr_t)b->capacity))
		return RSK_FULL;
	RSK_INJECT_C(8);
	if (b->flags & RSK_COPYBUF_RELEASE)
		return RSK_PERCPU_OP_(cmpcopystore_release, ioff, area, i, &p->gate, &p->count,
				      count, &p->item[(size_t)count * b->words], src,
				      (intptr_t)b->words, count + 1);
	return RSK_PERCPU_OP_(cmpcopystore, ioff, area, i, &p->gate, &p->count, count,
			      &p->item[(size_t)count * b->words], src, (intptr_t)b->words,
			      count + 1);
}

RSK_PERCPU_INLINE enum rsk_result rsk_copybuf_try_pop_at_(struct rsk_copybuf *b, intptr_t *dst,
						       int *idx, ptrdiff_t off)
{
	uint32_t ioff = b->index_offset_, i;
	rsk_arch_area_t area;
	int ready = rsk_percpu_enter_(off, ioff, b->fast_nr_, &area, &i);
	struct rsk_copybuf_part *p;
	intptr_t count;

	if (RSK_PERCPU_UNLIKELY(!ready))
		return RSK_NO_INDEX;
	*idx = (int)i;
	RSK_INJECT_C(7);
	p = rsk_copybuf_part_(b, i);
	count = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
	if (RSK_PERCPU_UNLIKELY((uintptr_t)(count - 1) >= (uintptr_t)b->capacity))
		return RSK_EMPTY;
	RSK_INJECT_C(8);
	/* The count unchanged at the commit means nothing touched the part
	 * since the section started: the copy is whole. */
	return RSK_PERCPU_OP_(cmpcopystore, ioff, area, i, &p->gate, &p->count, count, dst,
			      &p->item[(size_t)(count - 1) * b->words], (intptr_t)b->words,
			      count - 1);
}

#ifdef RSK_COPYBUF_SECTION_
/* One attempt through the counted copy section for W-word items: its
 * result, RSK_CMPFAIL turned into the count's answer `none` (RSK_FULL or
 * RSK_EMPTY), *idx set on RSK_OK.  The section leaves the part's address:
 * the index is its distance from part 0 in strides, a division that only
 * the slow path's attempts keep (rsk_copybuf_push and _pop drop idx). */
#define RSK_COPYBUF_TRY_(b, off, OP, W, ptr, idx, none)                       \
	__extension__({                                                        \
		enum rsk_result r_;                                            \
		intptr_t part_;                                                \
		/* No rseq in the process: arming would write the TCB. */      \
		if (RSK_PERCPU_UNLIKELY((off) == 0)) {                         \
			r_ = RSK_NO_INDEX;                                     \
		} else {                                                       \
			RSK_INJECT_C(7);                                       \
			r_ = RSK_COPYBUF_COPY_(b, off, OP, W, ptr, part_);     \
			if (RSK_PERCPU_LIKELY(r_ == RSK_OK)) {                 \
				*(idx) = (int)((size_t)(part_ - (intptr_t)(b)->parts) / \
					       (b)->stride);                   \
			} else if (r_ == RSK_CMPFAIL) {                        \
				r_ = (none);                                   \
			}                                                      \
		}                                                              \
		r_;                                                            \
	})
#endif

RSK_PERCPU_INLINE enum rsk_result rsk_copybuf_try_push_(struct rsk_copybuf *b, const intptr_t *src,
						     int *idx, ptrdiff_t off)
{
#ifdef RSK_COPYBUF_SECTION_
	/* The item size in bytes: the operation has just read it (for
	 * rsk_copybuf_direct_()); the slow path's bounce copy of an item
	 * of another size takes the generic form. */
	size_t sz = b->item_size;

	/* The section orders nothing by itself: see RSK_COPYBUF_RELEASE. */
	if (b->flags & RSK_COPYBUF_RELEASE)
		RSK_ARCH_COUNTED_COPY_RELEASE();
	/* The sizes with a section of their own, each branch likely if
	 * reached: the size is the buffer's, so they go the same way each
	 * time, and the first size costs one compare. */
	if (RSK_PERCPU_LIKELY(sz == RSK_COPYBUF_W_(2)))
		return RSK_COPYBUF_TRY_(b, off, PUSH, 2, src, idx, RSK_FULL);
	if (RSK_PERCPU_LIKELY(sz == RSK_COPYBUF_W_(8)))
		return RSK_COPYBUF_TRY_(b, off, PUSH, 8, src, idx, RSK_FULL);
	if (RSK_PERCPU_LIKELY(sz == RSK_COPYBUF_W_(4)))
		return RSK_COPYBUF_TRY_(b, off, PUSH, 4, src, idx, RSK_FULL);
	return rsk_copybuf_try_push_at_(b, src, idx, off);
#else
	return rsk_copybuf_try_push_at_(b, src, idx, off);
#endif
}

RSK_PERCPU_INLINE enum rsk_result rsk_copybuf_try_pop_(struct rsk_copybuf *b, intptr_t *dst,
						    int *idx, ptrdiff_t off)
{
#ifdef RSK_COPYBUF_SECTION_
	/* The item size in bytes: the operation has just read it (for
	 * rsk_copybuf_direct_()); the slow path's bounce copy of an item
	 * of another size takes the generic form. */
	size_t sz = b->item_size;

	/* The sizes with a section of their own, each branch likely if
	 * reached: the size is the buffer's, so they go the same way each
	 * time, and the first size costs one compare. */
	if (RSK_PERCPU_LIKELY(sz == RSK_COPYBUF_W_(2)))
		return RSK_COPYBUF_TRY_(b, off, POP, 2, dst, idx, RSK_EMPTY);
	if (RSK_PERCPU_LIKELY(sz == RSK_COPYBUF_W_(8)))
		return RSK_COPYBUF_TRY_(b, off, POP, 8, dst, idx, RSK_EMPTY);
	if (RSK_PERCPU_LIKELY(sz == RSK_COPYBUF_W_(4)))
		return RSK_COPYBUF_TRY_(b, off, POP, 4, dst, idx, RSK_EMPTY);
	return rsk_copybuf_try_pop_at_(b, dst, idx, off);
#else
	return rsk_copybuf_try_pop_at_(b, dst, idx, off);
#endif
}

/*
 * rsk_copybuf_push - copy the item (b->item_size bytes) onto the current
 * CPU's part.  Returns 0, -ENOSPC (that part is
 * full: nothing stored), -EINVAL (b or item NULL, or b destroyed),
 * -ENXIO (a slow path's fence failed), -EDEADLK (a signal handler whose
 * thread holds the gate it needs), -EOWNERDEAD (a gate's holder exited
 * holding it).  Lock-free on the fast path.
 */
RSK_PERCPU_INLINE int rsk_copybuf_push(struct rsk_copybuf *b, const void *item)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r = RSK_CMPFAIL;
	int idx;

	if (RSK_PERCPU_UNLIKELY(b == NULL || item == NULL))
		return -EINVAL;
	if (RSK_PERCPU_LIKELY(rsk_copybuf_direct_(b, item) &&
			      !(b->flags & RSK_COPYBUF_OUT_OF_LINE_))) {
		r = rsk_copybuf_try_push_(b, (const intptr_t *)item, &idx, off);
		if (RSK_PERCPU_LIKELY(r == RSK_OK))
			return 0;
		if (r == RSK_FULL)
			return -ENOSPC;
	}
	return rsk_copybuf_slow_(b, RSK_COPYBUF_PUSH_, (void *)(uintptr_t)item, r);
}

/*
 * rsk_copybuf_pop - copy the last item of the current CPU's part into
 * item (b->item_size bytes) and remove it.  Returns 0, -ENOENT (that part is empty), -EINVAL (b or item NULL, or b
 * destroyed), -ENXIO (a slow path's fence failed), -EDEADLK (a signal
 * handler whose thread holds the gate it needs), -EOWNERDEAD (a gate's
 * holder exited holding it).  Lock-free on the fast path.
 */
RSK_PERCPU_INLINE int rsk_copybuf_pop(struct rsk_copybuf *b, void *item)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r = RSK_CMPFAIL;
	int idx;

	if (RSK_PERCPU_UNLIKELY(b == NULL || item == NULL))
		return -EINVAL;
	if (RSK_PERCPU_LIKELY(rsk_copybuf_direct_(b, item))) {
		r = rsk_copybuf_try_pop_(b, (intptr_t *)item, &idx, off);
		if (RSK_PERCPU_LIKELY(r == RSK_OK))
			return 0;
		if (r == RSK_EMPTY)
			return -ENOENT;
	}
	return rsk_copybuf_slow_(b, RSK_COPYBUF_POP_, item, r);
}

/*
 * rsk_copybuf_pop_cpu - copy out and remove the last item of part `cpu`
 * (any CPU's) while that CPU's threads keep operating (the part's gate is
 * closed and the CPU fenced meanwhile).  Returns 0, -ENOENT (empty),
 * -EINVAL (b or item NULL, cpu outside [0, b->nr)), -ENXIO (the fence
 * failed), -EDEADLK (from a handler whose thread holds that part's gate),
 * -EOWNERDEAD (the gate's holder is gone).
 */
int rsk_copybuf_pop_cpu(struct rsk_copybuf *b, int cpu, void *item);

/*
 * rsk_copybuf_push_cpu - copy the item onto part `cpu` (any CPU's), as
 * safely as rsk_copybuf_pop_cpu() and with release ordering: with it,
 * items move between CPUs.  Returns 0, -ENOSPC (full), -EINVAL (as
 * pop_cpu).
 */
int rsk_copybuf_push_cpu(struct rsk_copybuf *b, int cpu, const void *item);

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_COPYBUF_H */
