/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU object pool (pool.h): the depot of slabs, the slow paths of the
 * caches, cross-CPU drain, trim, debug checks.
 *
 * Slabs are aligned to their size (a power of two), so an object's slab
 * is its address masked.  A slab's header keeps a stack of the indices of
 * its free objects (the depot never writes into objects: a debug pool's
 * poison stays intact) and, in debug pools, a state byte per object.
 *
 * Lock order: a part's gate, then the depot lock (never the reverse, and
 * never two gates at once).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "internal.h"
#include <rseqkit/pool.h>

#define SLAB_MIN_BYTES ((size_t)64 << 10)
#define SLAB_MAGIC 0x72736b736c616275ull /* "rskslabu" */
#define MAX_SLAB_OBJECTS 65535		  /* indices are 16 bits */

enum { OBJ_FREE = 0, OBJ_ALLOCATED = 1 };

struct slab {
	uint64_t magic;
	struct pool_impl *pool;
	struct slab *next, *prev;   /* every slab of the pool */
	struct slab *pnext, *pprev; /* slabs with free objects in the depot */
	int partial;		    /* on that list */
	uint32_t nfree;		    /* free objects in the depot */
	char *first;		    /* object 0 */
	unsigned char *state;	    /* debug pools: OBJ_* per object */
	uint16_t freeidx[];	    /* nfree indices of free objects */
};

struct pool_impl {
	struct rsk_pool pub; /* first: the pool's address is the impl's */
	pthread_mutex_t lock;
	size_t size, stride;	      /* object bytes, bytes between objects */
	size_t slab_bytes, slab_objects;
	size_t state_off, first_off;  /* from the slab's start */
	size_t max_bytes;
	size_t part_bytes;
	intptr_t batch;		      /* objects moved per refill / flush */
	/* Under the lock: */
	struct slab *slabs, *partial;
	size_t nslabs, depot_free, ncaches;
};

static struct pool_impl *impl(struct rsk_pool *p)
{
	return (struct pool_impl *)p;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* ---- debug reports ---- */

__attribute__((noreturn)) static void report(struct pool_impl *pi, const char *what,
					     const void *obj, long offset)
{
	if (offset >= 0)
		fprintf(stderr, "rseqkit: pool %p: %s %p (byte %ld changed)\n", (void *)pi, what,
			obj, offset);
	else
		fprintf(stderr, "rseqkit: pool %p: %s %p\n", (void *)pi, what, obj);
	abort();
}

/* The first byte of obj that is not poison, or -1. */
static long poison_broken(const struct pool_impl *pi, const void *obj)
{
	const unsigned char *b = obj;

	for (size_t i = 0; i < pi->stride; i++)
		if (b[i] != RSK_POOL_POISON)
			return (long)i;
	return -1;
}

/* ---- slabs and the depot (under the lock) ---- */

static struct slab *slab_of(const struct pool_impl *pi, const void *obj)
{
	return (struct slab *)((uintptr_t)obj & ~(uintptr_t)(pi->slab_bytes - 1));
}

static size_t index_of(const struct pool_impl *pi, const struct slab *s, const void *obj)
{
	return (size_t)((const char *)obj - s->first) / pi->stride;
}

static void partial_add(struct pool_impl *pi, struct slab *s)
{
	s->pprev = NULL;
	s->pnext = pi->partial;
	if (pi->partial)
		pi->partial->pprev = s;
	pi->partial = s;
	s->partial = 1;
}

static void partial_remove(struct pool_impl *pi, struct slab *s)
{
	if (s->pprev)
		s->pprev->pnext = s->pnext;
	else
		pi->partial = s->pnext;
	if (s->pnext)
		s->pnext->pprev = s->pprev;
	s->partial = 0;
}

/* Map one more slab, all objects in the depot.  0 or -ENOMEM. */
static int grow(struct pool_impl *pi)
{
	size_t S = pi->slab_bytes;
	char *raw, *base;
	struct slab *s;

	if (pi->max_bytes != 0 && (pi->nslabs + 1) * S > pi->max_bytes)
		return -ENOMEM;
	raw = mmap(NULL, 2 * S, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return -ENOMEM;
	base = (char *)align_up((uintptr_t)raw, S);
	if (base > raw)
		munmap(raw, (size_t)(base - raw));
	if (base + S < raw + 2 * S)
		munmap(base + S, (size_t)(raw + 2 * S - (base + S)));
	s = (struct slab *)(void *)base;
	s->magic = SLAB_MAGIC;
	s->pool = pi;
	s->first = base + pi->first_off;
	s->nfree = (uint32_t)pi->slab_objects;
	/* Pop order: object 0 first. */
	for (size_t i = 0; i < pi->slab_objects; i++)
		s->freeidx[i] = (uint16_t)(pi->slab_objects - 1 - i);
	if (pi->pub.flags & RSK_POOL_DEBUG) {
		s->state = (unsigned char *)base + pi->state_off; /* zero: OBJ_FREE */
		memset(s->first, RSK_POOL_POISON, pi->slab_objects * pi->stride);
	}
	s->prev = NULL;
	s->next = pi->slabs;
	if (pi->slabs)
		pi->slabs->prev = s;
	pi->slabs = s;
	partial_add(pi, s);
	pi->nslabs++;
	pi->depot_free += pi->slab_objects;
	return 0;
}

/* Take up to n objects; map a slab only if may_grow and nothing was found.
 * Returns how many. */
static size_t depot_get(struct pool_impl *pi, intptr_t *out, size_t n, int may_grow)
{
	size_t got = 0;

	while (got < n) {
		struct slab *s = pi->partial;

		if (s == NULL) {
			if (got > 0 || !may_grow || grow(pi) != 0)
				break;
			continue;
		}
		while (got < n && s->nfree > 0)
			out[got++] = (intptr_t)(s->first + (size_t)s->freeidx[--s->nfree] * pi->stride);
		if (s->nfree == 0)
			partial_remove(pi, s);
	}
	pi->depot_free -= got;
	return got;
}

static void depot_put(struct pool_impl *pi, void *obj)
{
	struct slab *s = slab_of(pi, obj);

	if (s->magic != SLAB_MAGIC || s->pool != pi || s->nfree >= pi->slab_objects)
		report(pi, "corrupted (double free or foreign pointer?) at", obj, -1);
	s->freeidx[s->nfree++] = (uint16_t)index_of(pi, s, obj);
	if (!s->partial)
		partial_add(pi, s);
	pi->depot_free++;
}

static void slab_unmap(struct pool_impl *pi, struct slab *s)
{
	if (pi->pub.flags & RSK_POOL_DEBUG) {
		/* Last chance to see a write after free. */
		for (size_t i = 0; i < pi->slab_objects; i++) {
			char *obj = s->first + i * pi->stride;
			long off;
			if (s->state[i] == OBJ_FREE && (off = poison_broken(pi, obj)) >= 0)
				report(pi, "write after free (use after free) to", obj, off);
		}
	}
	if (s->partial)
		partial_remove(pi, s);
	if (s->prev)
		s->prev->next = s->next;
	else
		pi->slabs = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pi->nslabs--;
	pi->depot_free -= s->nfree;
	s->magic = 0;
	munmap(s, pi->slab_bytes);
}

/* ---- creation ---- */

RSK_EXPORT int rsk_pool_create(struct rsk_pool **out, const struct rsk_pool_config *cfg)
{
	struct pool_impl *pi;
	size_t align, stride, S, hdr, per, nobj, state_off = 0, first_off = 0;
	int debug, nr;

	if (out == NULL || cfg == NULL || cfg->size == 0 || cfg->size > RSK_POOL_MAX_SIZE ||
	    (cfg->align & (cfg->align - 1)) != 0 || cfg->align > RSK_POOL_MAX_ALIGN ||
	    cfg->cache_capacity < 1 || cfg->cache_capacity > RSK_POOL_MAX_CAPACITY ||
	    (cfg->flags & ~RSK_POOL_DEBUG) != 0 ||
	    (cfg->mode != RSK_INDEX_CPU && cfg->mode != RSK_INDEX_CID))
		return -EINVAL;
	debug = (cfg->flags & RSK_POOL_DEBUG) != 0;
	align = cfg->align;
	if (align == 0)
		for (align = 16; align / 2 >= cfg->size && align > 1;)
			align /= 2;
	stride = align_up(cfg->size, align);

	/* Slab geometry: header, free-index stack, debug states, objects. */
	hdr = sizeof(struct slab);
	per = stride + sizeof(uint16_t) + (size_t)debug;
	S = SLAB_MIN_BYTES;
	while (S < hdr + (stride <= 4096 ? 64 : 8) * per + align)
		S *= 2;
	nobj = (S - hdr) / per;
	if (nobj > MAX_SLAB_OBJECTS)
		nobj = MAX_SLAB_OBJECTS;
	for (; nobj > 0; nobj--) {
		state_off = hdr + nobj * sizeof(uint16_t);
		first_off = align_up(state_off + (debug ? nobj : 0), align);
		if (first_off + nobj * stride <= S)
			break;
	}
	if (nobj == 0)
		return -EINVAL;

	pi = calloc(1, sizeof(*pi));
	if (pi == NULL)
		return -ENOMEM;
	nr = rsk_possible_cpus();
	/* An array of part pointers: sizeof(struct rsk_pool_part *) is meant. */
	pi->pub.part = calloc((size_t)nr, sizeof(*pi->pub.part)); /* NOLINT(bugprone-sizeof-expression) */
	if (pi->pub.part == NULL) {
		free(pi);
		return -ENOMEM;
	}
	pthread_mutex_init(&pi->lock, NULL);
	pi->pub.mode = rsk_percpu_effective_mode(cfg->mode);
	pi->pub.nr = nr;
	pi->pub.magic_ = RSK_PERCPU_MAGIC;
	rsk_percpu_init_head((struct rsk_percpu_head *)&pi->pub);
	pi->pub.flags = cfg->flags;
	pi->pub.capacity = cfg->cache_capacity;
	pi->pub.align = align;
	pi->size = cfg->size;
	pi->stride = stride;
	pi->slab_bytes = S;
	pi->slab_objects = nobj;
	pi->state_off = state_off;
	pi->first_off = first_off;
	pi->max_bytes = cfg->max_bytes;
	pi->part_bytes = align_up(sizeof(struct rsk_pool_part) +
					  (size_t)cfg->cache_capacity * sizeof(intptr_t),
				  RSK_PERCPU_ALIGN);
	pi->batch = (cfg->cache_capacity + 1) / 2;
	*out = &pi->pub;
	return 0;
}

RSK_EXPORT int rsk_pool_destroy(struct rsk_pool *p)
{
	struct pool_impl *pi = impl(p);

	if (p == NULL)
		return -EINVAL;
	while (pi->slabs != NULL)
		slab_unmap(pi, pi->slabs);
	for (int i = 0; i < p->nr; i++)
		free(p->part[i]);
	free(p->part);
	pthread_mutex_destroy(&pi->lock);
	free(pi);
	return 0;
}

/* The cache of part idx, created on first use (NULL if out of memory:
 * the caller works on the depot directly). */
static struct rsk_pool_part *get_part(struct pool_impl *pi, int idx)
{
	struct rsk_pool_part *c = __atomic_load_n(&pi->pub.part[idx], __ATOMIC_ACQUIRE);

	if (c != NULL)
		return c;
	pthread_mutex_lock(&pi->lock);
	c = pi->pub.part[idx];
	if (c == NULL) {
		c = aligned_alloc(RSK_PERCPU_ALIGN, pi->part_bytes);
		if (c != NULL) {
			memset(c, 0, pi->part_bytes);
			pi->ncaches++;
			__atomic_store_n(&pi->pub.part[idx], c, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&pi->lock);
	return c;
}

/* ---- slow paths ---- */

RSK_EXPORT void *rsk_pool_alloc_slow_(struct rsk_pool *p, int ret)
{
	struct pool_impl *pi = impl(p);
	unsigned aborts = 0;
	intptr_t fast;

	while (rsk_percpu_again(ret, &aborts)) {
		ret = rsk_pool_try_alloc_(p, &fast, rsk_area_offset_());
		if (ret == RSK_OK)
			return rsk_pool_checked_(p, (void *)fast);
	}

	for (int attempt = 0;; attempt++) {
		int idx = rsk_percpu_slow_index(p->mode, p->nr);
		struct rsk_pool_part *c = get_part(pi, idx);
		intptr_t obj = 0;

		if (c != NULL && rsk_gate_close(&c->gate, p->mode, idx) == 0) {
			intptr_t count = c->count;
			if (count > 0) {
				obj = c->slot[count - 1];
				__atomic_store_n(&c->count, count - 1, __ATOMIC_RELAXED);
			} else {
				pthread_mutex_lock(&pi->lock);
				if (depot_get(pi, &obj, 1, 1) == 1) {
					size_t n = depot_get(pi, c->slot, (size_t)pi->batch, 0);
					__atomic_store_n(&c->count, (intptr_t)n, __ATOMIC_RELAXED);
				}
				pthread_mutex_unlock(&pi->lock);
			}
			rsk_gate_open(&c->gate);
		} else {
			/* No cache (or its fence failed): the depot directly. */
			pthread_mutex_lock(&pi->lock);
			depot_get(pi, &obj, 1, 1);
			pthread_mutex_unlock(&pi->lock);
		}
		rsk_note_slow_path();
		if (obj != 0)
			return rsk_pool_checked_(p, (void *)obj);
		/* At the bound: the other caches may hold free objects. */
		if (attempt == 0 && pi->max_bytes != 0) {
			rsk_pool_drain(p, -1);
			continue;
		}
		errno = ENOMEM;
		return NULL;
	}
}

RSK_EXPORT int rsk_pool_free_slow_(struct rsk_pool *p, void *obj, int ret)
{
	struct pool_impl *pi = impl(p);
	unsigned aborts = 0;
	struct rsk_pool_part *c;
	int idx;

	while (rsk_percpu_again(ret, &aborts)) {
		ret = rsk_pool_try_free_(p, obj, rsk_area_offset_());
		if (ret == RSK_OK)
			return 0;
	}
	idx = rsk_percpu_slow_index(p->mode, p->nr);
	c = get_part(pi, idx);

	if (c != NULL && rsk_gate_close(&c->gate, p->mode, idx) == 0) {
		intptr_t count = c->count;
		if (count >= p->capacity) {
			/* Flush the oldest half: the newest are warm in cache. */
			intptr_t n = pi->batch;
			pthread_mutex_lock(&pi->lock);
			for (intptr_t i = 0; i < n; i++)
				depot_put(pi, (void *)c->slot[i]);
			pthread_mutex_unlock(&pi->lock);
			memmove(c->slot, c->slot + n, (size_t)(count - n) * sizeof(intptr_t));
			count -= n;
		}
		c->slot[count] = (intptr_t)obj;
		__atomic_store_n(&c->count, count + 1, __ATOMIC_RELAXED);
		rsk_gate_open(&c->gate);
	} else {
		pthread_mutex_lock(&pi->lock);
		depot_put(pi, obj);
		pthread_mutex_unlock(&pi->lock);
	}
	rsk_note_slow_path();
	return 0;
}

/* ---- maintenance ---- */

RSK_EXPORT int rsk_pool_drain(struct rsk_pool *p, int cpu)
{
	struct pool_impl *pi = impl(p);
	int ret = 0, first, last;

	if (p == NULL || cpu < -1 || cpu >= p->nr)
		return -EINVAL;
	first = cpu < 0 ? 0 : cpu;
	last = cpu < 0 ? p->nr - 1 : cpu;
	for (int i = first; i <= last; i++) {
		struct rsk_pool_part *c = __atomic_load_n(&p->part[i], __ATOMIC_ACQUIRE);
		int err;

		if (c == NULL || __atomic_load_n(&c->count, __ATOMIC_RELAXED) == 0)
			continue;
		err = rsk_gate_close(&c->gate, p->mode, i);
		if (err != 0) {
			ret = -EINVAL;
			continue;
		}
		pthread_mutex_lock(&pi->lock);
		for (intptr_t k = 0; k < c->count; k++)
			depot_put(pi, (void *)c->slot[k]);
		pthread_mutex_unlock(&pi->lock);
		__atomic_store_n(&c->count, 0, __ATOMIC_RELAXED);
		rsk_gate_open(&c->gate);
	}
	return ret;
}

RSK_EXPORT int rsk_pool_trim(struct rsk_pool *p)
{
	struct pool_impl *pi = impl(p);
	struct slab *s, *next;
	int n = 0;

	if (p == NULL)
		return -EINVAL;
	pthread_mutex_lock(&pi->lock);
	for (s = pi->slabs; s != NULL; s = next) {
		next = s->next;
		if (s->nfree == pi->slab_objects) {
			slab_unmap(pi, s);
			n++;
		}
	}
	pthread_mutex_unlock(&pi->lock);
	return n;
}

RSK_EXPORT int rsk_pool_stats(struct rsk_pool *p, struct rsk_pool_stats *st)
{
	struct pool_impl *pi = impl(p);
	size_t total;

	if (p == NULL || st == NULL)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&pi->lock);
	for (int i = 0; i < p->nr; i++) {
		struct rsk_pool_part *c = __atomic_load_n(&p->part[i], __ATOMIC_ACQUIRE);
		if (c != NULL) {
			size_t n = (size_t)__atomic_load_n(&c->count, __ATOMIC_RELAXED);
			st->cached += n;
			if (n > st->cached_max)
				st->cached_max = n;
		}
	}
	st->caches = pi->ncaches;
	st->depot = pi->depot_free;
	st->slabs = pi->nslabs;
	st->bytes_mapped = pi->nslabs * pi->slab_bytes;
	total = pi->nslabs * pi->slab_objects;
	pthread_mutex_unlock(&pi->lock);
	st->in_use = total > st->cached + st->depot ? total - st->cached - st->depot : 0;
	st->slab_bytes = pi->slab_bytes;
	st->slab_objects = pi->slab_objects;
	st->object_stride = pi->stride;
	return 0;
}

/* ---- debug checks ---- */

RSK_EXPORT void rsk_pool_debug_free_(struct rsk_pool *p, void *obj)
{
	struct pool_impl *pi = impl(p);
	struct slab *s;
	size_t off, i;

	pthread_mutex_lock(&pi->lock);
	for (s = pi->slabs; s != NULL; s = s->next)
		if ((char *)obj >= (char *)s && (char *)obj < (char *)s + pi->slab_bytes)
			break;
	if (s == NULL)
		report(pi, "free of a pointer not from this pool:", obj, -1);
	if ((char *)obj < s->first)
		report(pi, "free of a pointer that is not an object:", obj, -1);
	off = (size_t)((char *)obj - s->first);
	i = off / pi->stride;
	if (off % pi->stride != 0 || i >= pi->slab_objects)
		report(pi, "free of a pointer that is not an object:", obj, -1);
	if (s->state[i] != OBJ_ALLOCATED)
		report(pi, "double free of", obj, -1);
	s->state[i] = OBJ_FREE;
	memset(obj, RSK_POOL_POISON, pi->stride);
	pthread_mutex_unlock(&pi->lock);
}

RSK_EXPORT void rsk_pool_debug_alloc_(struct rsk_pool *p, void *obj)
{
	struct pool_impl *pi = impl(p);
	struct slab *s = slab_of(pi, obj);
	size_t i = index_of(pi, s, obj);
	long off;

	pthread_mutex_lock(&pi->lock);
	if (s->magic != SLAB_MAGIC || s->pool != pi || s->state[i] != OBJ_FREE)
		report(pi, "corrupted: handed out an allocated object", obj, -1);
	if ((off = poison_broken(pi, obj)) >= 0)
		report(pi, "write after free (use after free) to", obj, off);
	s->state[i] = OBJ_ALLOCATED;
	pthread_mutex_unlock(&pi->lock);
}
