/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/malloc.h - rseqkit's malloc: a general-purpose allocator whose
 * small objects come from per-CPU caches pushed and popped in restartable
 * sections (rseqkit-malloc(7)).
 *
 * librseqkit-malloc.so exports the C library's names (malloc, free, ...,
 * for LD_PRELOAD or -lrseqkit-malloc) and the rsk_ twins declared here;
 * librseqkit-malloc.a has the rsk_ twins only, for a program that keeps
 * the C library's malloc and uses this one for some of its objects.
 * Memory from one family must be freed by the same family (an rsk_malloc
 * block with rsk_free); in a process that runs on librseqkit-malloc.so
 * both are the same allocator.
 *
 * Each function behaves as its C library namesake does in glibc 2.36
 * (malloc(3), posix_memalign(3), malloc_usable_size(3), malloc_trim(3)):
 *   - rsk_malloc(0) returns a unique pointer, rsk_free(NULL) does nothing;
 *   - rsk_realloc(NULL, n) is rsk_malloc(n); rsk_realloc(p, 0) frees p and
 *     returns NULL;
 *   - a size that overflows (calloc, reallocarray) or that cannot be
 *     mapped returns NULL with errno ENOMEM, and the old block of a
 *     failed realloc is left as it was;
 *   - rsk_posix_memalign returns EINVAL for an alignment that is not a
 *     power of two multiple of sizeof(void *) (*memptr unchanged), ENOMEM;
 *     rsk_aligned_alloc and rsk_memalign round an alignment that is not a
 *     power of two up to one, and return NULL with errno EINVAL for one
 *     above half the address space.
 * All are thread-safe, and may be called from any thread at any time,
 * before main() and in fork() child processes included; none is
 * async-signal-safe (as in glibc).
 *
 * The default mode does not detect a double free or a free of a pointer
 * inside a small block (they corrupt the caches), nor writes past a
 * block's end; RSEQKIT_MALLOC_CHECK=1 does (rseqkit-malloc(7)).  A free
 * of a pointer that no block contains aborts with a message in every
 * mode.
 */
#ifndef RSEQKIT_MALLOC_H
#define RSEQKIT_MALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rsk_malloc - n bytes, aligned to 16, or NULL (errno ENOMEM). */
void *rsk_malloc(size_t n);

/* rsk_free - give back a block of this allocator; NULL does nothing. */
void rsk_free(void *p);

/* rsk_calloc - nmemb * size bytes, zeroed; NULL (errno ENOMEM) on overflow. */
void *rsk_calloc(size_t nmemb, size_t size);

/* rsk_realloc - resize p to n bytes, keeping min(old, n) bytes of it. */
void *rsk_realloc(void *p, size_t n);

/* rsk_reallocarray - rsk_realloc(p, nmemb * size), ENOMEM on overflow. */
void *rsk_reallocarray(void *p, size_t nmemb, size_t size);

/* rsk_posix_memalign - n bytes aligned to align into *memptr; returns 0,
 * EINVAL or ENOMEM (errno unchanged). */
int rsk_posix_memalign(void **memptr, size_t align, size_t n);

/* rsk_aligned_alloc, rsk_memalign - n bytes aligned to align (rounded up
 * to a power of two), or NULL (errno EINVAL: align above SIZE_MAX / 2 + 1;
 * ENOMEM). */
void *rsk_aligned_alloc(size_t align, size_t n);
void *rsk_memalign(size_t align, size_t n);

/* rsk_valloc, rsk_pvalloc - page-aligned; pvalloc rounds n up to a page. */
void *rsk_valloc(size_t n);
void *rsk_pvalloc(size_t n);

/* rsk_malloc_usable_size - bytes usable in p (>= what was asked); 0 for
 * NULL. */
size_t rsk_malloc_usable_size(void *p);

/* rsk_malloc_trim - move every per-CPU cache's free objects (and the
 * calling thread's own cache's, where it cannot run sections) to the
 * central lists and give every free span back to the system; pad is
 * ignored.  Returns 1 if memory was released, 0 if not. */
int rsk_malloc_trim(size_t pad);

/* Statistics (rsk_malloc_stats). */
struct rsk_malloc_stats {
	size_t mapped;		/* bytes mapped for objects (spans + large blocks) */
	size_t in_use;		/* bytes of objects allocated and not freed (class sizes) */
	size_t cached;		/* free bytes in the per-CPU, per-thread and large-block caches */
	size_t central;		/* bytes of free objects in the central lists */
	size_t large_blocks;	/* large allocations (mapped one by one) */
	size_t large_bytes;	/* their bytes */
	size_t metadata;	/* bytes mapped for the page map and the CPUs' cache regions in use */
	size_t rss;		/* the process's resident set (/proc/self/statm), bytes */
	int classes;		/* size classes */
	int caches;		/* per-CPU caches in use, all classes and CPUs */
	int mode;		/* the index mode in effect: 0 CPU, 1 mm_cid */
	int check;		/* RSEQKIT_MALLOC_CHECK in effect */
	/* The per-CPU caches' adaptive capacities (rseqkit-malloc(7),
	 * "Cache capacity"): */
	size_t cpu_bound;	/* bound on the bytes one CPU's caches hold */
	size_t cpu_cached_max;	/* bytes of free objects in the fullest CPU's caches */
	size_t cpu_capacity_max; /* the largest sum over one CPU's classes of
				    capacity x class size, bytes (<= cpu_bound) */
};

/*
 * rsk_malloc_stats - fill *st (a snapshot: exact only while no thread
 * allocates); if fd >= 0, also write the per-class table that
 * RSEQKIT_MALLOC_STATS=1 prints at exit to fd.  Returns 0, or -1 with
 * errno EINVAL when st is NULL.  Uses no malloc and no stdio.
 */
int rsk_malloc_stats(struct rsk_malloc_stats *st, int fd);

/* mallinfo2 is exported by librseqkit-malloc.so with the C library's
 * struct mallinfo2 (<malloc.h>): arena = mapped, uordblks = in use,
 * fordblks = free (cached + central), hblks/hblkhd = large blocks. */

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_MALLOC_H */
