/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/pool.h - per-CPU object pool (fixed-size allocator).
 *
 * rsk_pool is a per-CPU cache of fixed-size objects: each object is one
 * piece of memory, used by one thread at a time, as from malloc().  Not to
 * be confused with rsk_mempool (<rseqkit/mempool.h>): per-CPU copies of
 * your own data, every object there existing once per CPU.
 *
 * A pool hands out objects of one size and alignment.  Each CPU (or
 * concurrency id) has a cache: an array of up to `cache_capacity` free
 * objects.  rsk_pool_alloc() pops from the current CPU's cache and
 * rsk_pool_free() pushes onto it, each one critical section (a gated
 * rsk_cmpcmpstore / rsk_cmpstorestore_release, as ptrbuf.h).  When the
 * cache is empty, the slow path refills it with a batch of half its
 * capacity from the pool's depot; when it is full, the slow path flushes
 * half of it to the depot.  A refill or flush of the calling thread's own
 * cache is itself a critical section (a gated rsk_cmpcopystore: a copy
 * into the free slots, or out of the newest ones, committed by storing
 * the count): no gate closed, no CPU fenced; only when that section
 * cannot run or keeps failing does the slow path close the part's gate.  The depot is a mutex-protected set of slabs,
 * each an aligned mmap() region of at least 64 KiB (at least 64 objects
 * up to 4 KiB, 8 beyond), that keeps a free count per slab;
 * rsk_pool_trim() returns slabs whose objects are all in the depot to the
 * system with munmap().  The memory a process keeps cached is bounded by
 * parts x capacity, not threads x capacity: in RSK_INDEX_CID mode the
 * parts are created on first use, so 4 threads on a 256-CPU machine make
 * at most 4 caches (RSK_INDEX_CPU mode creates them on first use too).
 *
 * Objects may be freed by any thread on any CPU: they move between caches
 * freely (producer/consumer).  Everything percpu.h says about progress
 * holds: without rseq, for unregistered threads, under a debugger, the
 * same API works through the slow paths (gate closed, CPU fenced).
 *
 * Synchronization:
 *
 *   operation            may run concurrently with    ordering
 *   -------------------  ---------------------------  -----------------------
 *   rsk_pool_alloc       everything but destroy       acquire of the object:
 *   rsk_pool_free        everything but destroy       what its last owner
 *                                                     stored before freeing
 *                                                     it is visible (frees
 *                                                     commit with release)
 *   rsk_pool_drain       everything but destroy       gate + fence of the
 *                                                     CPU(s) drained
 *   rsk_pool_trim        everything but destroy       depot lock
 *   rsk_pool_stats       everything but destroy       a snapshot: exact
 *                                                     only when no thread
 *                                                     allocates or frees
 *   rsk_pool_create      -                            -
 *   rsk_pool_destroy     nothing                      -
 *
 * Debug pools (RSK_POOL_DEBUG, or every pool a process creates with
 * RSEQKIT_DEBUG=pool in its environment): every object has a state (allocated or
 * free) in its slab's header, and free objects are filled with
 * RSK_POOL_POISON bytes.  Freeing a pointer that is not an object of the
 * pool (outside its slabs, or not at an object's start), freeing an object
 * twice, and writing to an object after freeing it (found when the object
 * is allocated again, or when the pool's slab is trimmed or destroyed)
 * print "rseqkit: pool <address>: <what> <pointer>" on stderr and call
 * abort().  Debug frees take the depot lock to find the slab: slower, and
 * serialised.  In a non-debug pool, freeing a foreign pointer or an
 * object twice is undefined (rsk_pool_free only checks NULL and the
 * alignment).
 *
 * Injection points (test builds): alloc - 7 after reading the index, 8
 * after reading the count, 9 after reading the slot; free - 7, 8 likewise.
 */
#ifndef RSEQKIT_POOL_H
#define RSEQKIT_POOL_H

#include <rseqkit/percpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rsk_pool_config.flags: debug checks (see above). */
#define RSK_POOL_DEBUG 1u
/* Largest object size, alignment, cache capacity. */
#define RSK_POOL_MAX_SIZE     ((size_t)1 << 20)
#define RSK_POOL_MAX_ALIGN    ((size_t)4096)
#define RSK_POOL_MAX_CAPACITY (1L << 16)
/* The byte free objects of a debug pool are filled with. */
#define RSK_POOL_POISON 0x6b

/*
 * Zero is the default of every field but size, which has none: { .size =
 * 128 } is a complete configuration.
 */
struct rsk_pool_config {
	size_t size;	      /* object size, 1 .. RSK_POOL_MAX_SIZE (required) */
	size_t align;	      /* power of two <= RSK_POOL_MAX_ALIGN; 0: 16, or the smallest
				 power of two >= size when that is smaller (size 1: 1) */
	long cache_capacity;  /* objects per CPU cache, 1 .. RSK_POOL_MAX_CAPACITY; 0: as
				 many as fill 64 KiB, at least 2, at most 128 */
	size_t max_bytes;     /* bound on the slabs' mapped bytes; 0 = unbounded */
	unsigned flags;	      /* 0 or RSK_POOL_DEBUG */
	enum rsk_index_mode mode; /* 0: RSK_INDEX_CPU */
	size_t slab_bytes;    /* bytes of one slab, a power of two from 4 KiB to 1 GiB;
				 0: the rule in rsk_pool_create(3) (see below) */
};

struct rsk_pool_stats {
	size_t in_use;	      /* objects allocated and not freed */
	size_t cached;	      /* free objects in the per-CPU caches, total */
	size_t cached_max;    /* ... in the fullest cache */
	size_t caches;	      /* caches created so far */
	size_t depot;	      /* free objects in the depot */
	size_t slabs;	      /* slabs mapped */
	size_t bytes_mapped;  /* their bytes */
	size_t slab_bytes;    /* bytes of one slab */
	size_t slab_objects;  /* objects per slab */
	size_t object_stride; /* bytes per object (size rounded to align) */
};

/* One cache: like a ptrbuf part. */
struct rsk_pool_part {
	intptr_t count;	  /* objects in the cache, [0, capacity] */
	intptr_t gate;	  /* the progress protocol's gate */
	RSK_PERCPU_FLEX_BEGIN_ intptr_t slot[]; RSK_PERCPU_FLEX_END_  /* capacity object pointers */
} __attribute__((aligned(RSK_PERCPU_ALIGN)));

struct rsk_pool {
	RSK_PERCPU_HEAD;		/* mode, nr (possible parts): read-only */
	unsigned flags;			/* read-only: RSK_POOL_* */
	intptr_t capacity;		/* read-only: objects per cache */
	size_t align;			/* read-only: object alignment */
	struct rsk_pool_part **part;	/* nr entries, NULL until first use */
};

/*
 * rsk_pool_create - make a pool as *cfg says; no memory is mapped yet.
 * Slabs: slab_bytes if set; else the smallest power of two from 64 KiB
 * that holds 64 objects (objects up to 4 KiB) or 8 (larger objects) with
 * the slab's header and per-object index (2 bytes, 3 in a debug pool):
 * 64 KiB up to 1008-byte objects, 128 KiB for 1 KiB ones; and where
 * max_bytes is smaller than that, the largest power of two within
 * max_bytes (at least 4 KiB) that holds one object.
 * Returns 0, -EINVAL (out or cfg NULL, size 0 or > RSK_POOL_MAX_SIZE,
 * align not 0 and not a power of two or > RSK_POOL_MAX_ALIGN, capacity < 0
 * or > RSK_POOL_MAX_CAPACITY, unknown mode or flag, slab_bytes not 0 and
 * not a power of two in [4 KiB, 1 GiB] or too small for one object,
 * max_bytes not 0 and smaller than one slab); in debug mode a message on
 * stderr names the field.  -ENOMEM.
 */
int rsk_pool_create(struct rsk_pool **out, const struct rsk_pool_config *cfg);

/*
 * rsk_pool_destroy - unmap every slab and free the pool, objects still
 * allocated included (they become invalid).  Returns 0, -EINVAL (NULL, or
 * destroyed already: the pool's magic word says so while the freed memory
 * is not reused).  The out-of-line functions (drain, trim, stats, the slow
 * paths) check the same word after destroy: -EINVAL (alloc: NULL, errno
 * EINVAL); the inline fast paths cannot, so a use after destroy is still
 * undefined behaviour.
 */
int rsk_pool_destroy(struct rsk_pool *p);

/*
 * rsk_pool_drain - move every object of the cache of part `cpu` (or of all
 * parts, cpu = -1) to the depot, while their threads keep allocating and
 * freeing (gate + fence).  Returns 0, -EINVAL (p NULL or destroyed, cpu
 * outside [-1, nr)), -ENXIO (a fence failed), -EDEADLK (from a handler
 * whose thread holds a gate or lock, when that part's gate is not free at
 * once), -EOWNERDEAD (the gate's holder is gone); a cache that could not
 * be drained kept its objects.
 */
int rsk_pool_drain(struct rsk_pool *p, int cpu);

/*
 * rsk_pool_trim - unmap the slabs whose objects are all in the depot
 * (drain first to include the caches' objects).  Returns the number of
 * slabs unmapped (>= 0), -EINVAL (NULL).
 */
int rsk_pool_trim(struct rsk_pool *p);

/* rsk_pool_stats - fill *st.  Returns 0, -EINVAL (p or st NULL). */
int rsk_pool_stats(struct rsk_pool *p, struct rsk_pool_stats *st);

/*
 * Not API: one attempt of each fast path (an enum rsk_result: RSK_OK,
 * RSK_NO_INDEX where the thread cannot run a section, RSK_NO_PART where
 * the CPU has no cache yet, RSK_EMPTY / RSK_FULL for the cache, or the
 * section's RSK_CMPFAIL, RSK_ABORTED, RSK_STOPPED), the slow paths (the operation after a first attempt
 * that returned `ret`: the retries, then the part's gate and the depot
 * lock), and the debug checks.
 */
void *rsk_pool_alloc_slow_(struct rsk_pool *p, enum rsk_result ret);
int rsk_pool_free_slow_(struct rsk_pool *p, void *obj, enum rsk_result ret);
void rsk_pool_debug_alloc_(struct rsk_pool *p, void *obj);
void rsk_pool_debug_free_(struct rsk_pool *p, void *obj);

static inline void *rsk_pool_checked_(struct rsk_pool *p, void *obj)
{
	if (RSK_PERCPU_UNLIKELY(p->flags & RSK_POOL_DEBUG))
		rsk_pool_debug_alloc_(p, obj);
	return obj;
}

RSK_PERCPU_INLINE enum rsk_result rsk_pool_try_alloc_(struct rsk_pool *p, intptr_t *obj, ptrdiff_t off)
{
	uint32_t ioff = p->index_offset_, i;
	rsk_arch_area_t area;
	int ready = rsk_percpu_enter_(off, ioff, p->fast_nr_, &area, &i);
	struct rsk_pool_part *c;
	intptr_t count;

	if (RSK_PERCPU_UNLIKELY(!ready))
		return RSK_NO_INDEX;
	RSK_INJECT_C(7);
	c = __atomic_load_n(&p->part[i], __ATOMIC_ACQUIRE);
	if (RSK_PERCPU_UNLIKELY(c == NULL))
		return RSK_NO_PART;
	count = __atomic_load_n(&c->count, __ATOMIC_RELAXED);
	if (RSK_PERCPU_UNLIKELY((uintptr_t)(count - 1) >= (uintptr_t)p->capacity))
		return RSK_EMPTY; /* refill */
	RSK_INJECT_C(8);
	*obj = __atomic_load_n(&c->slot[count - 1], __ATOMIC_RELAXED);
	RSK_INJECT_C(9);
	return RSK_PERCPU_OP_(cmpcmpstore, ioff, area, i, &c->gate, &c->count, count,
				   &c->slot[count - 1], *obj, count - 1);
}

RSK_PERCPU_INLINE enum rsk_result rsk_pool_try_free_(struct rsk_pool *p, void *obj, ptrdiff_t off)
{
	uint32_t ioff = p->index_offset_, i;
	rsk_arch_area_t area;
	int ready = rsk_percpu_enter_(off, ioff, p->fast_nr_, &area, &i);
	struct rsk_pool_part *c;
	intptr_t count;

	if (RSK_PERCPU_UNLIKELY(!ready))
		return RSK_NO_INDEX;
	RSK_INJECT_C(7);
	c = __atomic_load_n(&p->part[i], __ATOMIC_ACQUIRE);
	if (RSK_PERCPU_UNLIKELY(c == NULL))
		return RSK_NO_PART;
	count = __atomic_load_n(&c->count, __ATOMIC_RELAXED);
	if (RSK_PERCPU_UNLIKELY((uintptr_t)count >= (uintptr_t)p->capacity))
		return RSK_FULL; /* flush */
	RSK_INJECT_C(8);
	return RSK_PERCPU_OP_(cmpstorestore_release, ioff, area, i, &c->gate, &c->count,
				   count, &c->slot[count], (intptr_t)obj, count + 1);
}

/*
 * rsk_pool_alloc - an object from the current CPU's cache (refilled from
 * the depot when empty).  Returns it, or NULL with errno ENOMEM (the pool
 * reached max_bytes with every cache drained, or mmap failed) or EINVAL
 * (p NULL).  Lock-free when the cache has an object.
 * In a signal handler whose thread holds a gate or lock (or between
 * rsk_gate_close() and rsk_gate_open()) it waits for none: it takes its
 * cache, the depot, another cache or the overflow only if free at once,
 * else maps a slab of its own; so it fails there only in a pool with
 * max_bytes (NULL, errno EDEADLK), or when mmap fails (ENOMEM).
 */
RSK_PERCPU_INLINE void *rsk_pool_alloc(struct rsk_pool *p)
{
	ptrdiff_t off = rsk_area_offset_();
	intptr_t obj;
	enum rsk_result ret;

	if (RSK_PERCPU_UNLIKELY(p == NULL)) {
		errno = EINVAL;
		return NULL;
	}
	ret = rsk_pool_try_alloc_(p, &obj, off);
	if (RSK_PERCPU_LIKELY(ret == RSK_OK))
		return rsk_pool_checked_(p, (void *)obj);
	return rsk_pool_alloc_slow_(p, ret);
}

/*
 * rsk_pool_free - give obj back: onto the current CPU's cache (half of it
 * flushed to the depot when full), whichever thread or CPU allocated it.
 * Returns 0, -EINVAL (p or obj NULL, obj not aligned as the pool's
 * objects).  Lock-free when the cache has room.
 * In a signal handler whose thread holds a gate or lock, -EDEADLK (obj
 * stays the caller's) when its cache, the depot, every other cache and
 * the overflow of 64 are all full or held at that moment.
 */
RSK_PERCPU_INLINE int rsk_pool_free(struct rsk_pool *p, void *obj)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result ret;

	if (RSK_PERCPU_UNLIKELY(p == NULL || obj == NULL || ((uintptr_t)obj & (p->align - 1))))
		return -EINVAL;
	if (RSK_PERCPU_UNLIKELY(p->flags & RSK_POOL_DEBUG))
		rsk_pool_debug_free_(p, obj);
	ret = rsk_pool_try_free_(p, obj, off);
	if (RSK_PERCPU_LIKELY(ret == RSK_OK))
		return 0;
	return rsk_pool_free_slow_(p, obj, ret);
}

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_POOL_H */
