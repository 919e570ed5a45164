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
 * A refill or flush of the calling thread's own cache takes no gate: it
 * is a gated section of its own (cache_move_here), so no
 * membarrier fence per batch.
 *
 * Nothing slow happens under a part's gate: the depot lock, mmap/munmap
 * and the debug pools' memsets are taken or done with every gate open
 * (objects move between a cache and the depot through a scratch buffer),
 * so the fast paths of a CPU never stop for them.  Never two gates, nor a
 * gate and the depot lock, at once.
 *
 * The depot lock is a thread-id lock of the progress layer (the gates'
 * code without the fence): a fork() waits until no thread holds it, and
 * a signal handler that interrupted its own thread inside the depot gets
 * -EDEADLK, and then works with the caches only (its own part's, another
 * part's, or the overflow array that the next depot holder empties).  A
 * handler whose thread holds any gate or lock waits for none (the
 * progress layer says -EDEADLK: two such handlers could wait for each
 * other): it takes what it can at once - a cache, the depot, another
 * cache, the overflow - and, to allocate when all of them are empty or
 * held, maps a fresh slab of its own that the next depot holder links
 * (the pending list).
 * Nothing here calls malloc after creation (parts, scratch buffers and
 * slabs are mapped), so the slow paths are async-signal-safe with respect
 * to the same thread, debug pools excepted.
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
/* The range of rsk_pool_config.slab_bytes (a slab is aligned to its size:
 * an object's slab is its address rounded down). */
#define SLAB_SMALLEST ((size_t)4 << 10)
#define SLAB_LARGEST  ((size_t)1 << 30)
/* cache_capacity 0: as many objects as fill this, within [2, 128]. */
#define CACHE_DEFAULT_BYTES ((size_t)64 << 10)
#define SLAB_MAGIC 0x72736b736c616275ull /* "rskslabu" */
#define MAX_SLAB_OBJECTS 65535		  /* indices are 16 bits */

enum { OBJ_FREE = 0, OBJ_ALLOCATED = 1 };

struct slab {
	uint64_t magic;
	struct pool_impl *pool;
	struct slab *next, *prev;   /* every slab of the pool */
	struct slab *pnext, *pprev; /* slabs with free objects in the depot */
	int partial;		    /* on that list */
	int pending;		    /* mapped by a handler, not linked yet (pending_take()) */
	uint32_t nfree;		    /* free objects in the depot */
	char *first;		    /* object 0 */
	unsigned char *state;	    /* debug pools: OBJ_* per object */
	uint16_t freeidx[];	    /* nfree indices of free objects */
};

#define POOL_XFER_BUFS	4  /* scratch buffers of a pool (mapped on first use) */
#define POOL_XFER_STACK 64 /* objects moved at once without one */
#define POOL_OVERFLOW	64 /* frees parked while the depot is unavailable */

struct pool_impl {
	struct rsk_pool pub; /* first: the pool's address is the impl's */
	intptr_t lock;	     /* the depot lock (rsk_lock_take_) */
	size_t size, stride;	      /* object bytes, bytes between objects */
	size_t slab_bytes, slab_objects;
	size_t state_off, first_off;  /* from the slab's start */
	size_t max_bytes;
	size_t part_bytes;
	intptr_t batch;		      /* objects moved per refill / flush */
	char *parts;		      /* nr * part_bytes, mapped (NULL: one map each) */
	/* rsk_pool_set_parts_(): the caches live in the caller's memory,
	 * part i at parts + i * part_stride, with a soft capacity each. */
	size_t part_stride;	      /* part_bytes unless set */
	int parts_ext;		      /* parts is the caller's: never unmapped */
	const uint32_t *limits;	      /* NULL, or part i's capacity at limits[i * limit_stride] */
	size_t limit_stride;
	size_t ncaches;		      /* atomic */
	intptr_t *xbuf[POOL_XFER_BUFS]; /* capacity + 1 objects each */
	int xbusy[POOL_XFER_BUFS];
	intptr_t overflow[POOL_OVERFLOW];
	int noverflow;		      /* atomic: entries possibly in use */
	/* The allocator's page map (src/malloc/): told of every slab mapped
	 * and, before it is unmapped, of every slab unmapped. */
	int (*slab_hook)(void *arg, void *base, size_t bytes, int mapped);
	void *hook_arg;
	int mapped; /* the impl is mapped (rsk_pool_create_in_), not malloc'ed */
	struct slab *pending;	      /* atomic: slabs mapped by handlers, not linked yet */
	/* Under the lock: */
	struct slab *slabs, *partial;
	size_t nslabs, growing, depot_free;
};

static struct pool_impl *impl(struct rsk_pool *p)
{
	return (struct pool_impl *)p;
}

/* Is p a live pool?  Its magic word is RSK_PERCPU_MAGIC from create to
 * destroy, RSK_PERCPU_MAGIC_DEAD after: destroy and every slow path check
 * it, so a second destroy, or a use after destroy that reaches a slow
 * path, is -EINVAL while the freed memory is not reused (the inline fast
 * paths cannot tell). */
static int pool_alive(const struct rsk_pool *p)
{
	return p != NULL && __atomic_load_n(&p->magic_, __ATOMIC_RELAXED) == RSK_PERCPU_MAGIC;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The bytes mapped for a pool of nr parts: its impl, then the part
 * pointers. */
static size_t impl_bytes(int nr)
{
	return align_up(sizeof(struct pool_impl), sizeof(void *)) + (size_t)nr * sizeof(void *);
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

/* ---- slabs and the depot ---- */

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

static void *map_zeroed(size_t bytes)
{
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);

	return m == MAP_FAILED ? NULL : m;
}

/* Map and fill one slab, every object free (no lock held).  NULL if mmap
 * failed. */
static struct slab *slab_map(struct pool_impl *pi)
{
	size_t S = pi->slab_bytes;
	char *raw, *base;
	struct slab *s;

	raw = mmap(NULL, 2 * S, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
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
	if (pi->slab_hook != NULL && pi->slab_hook(pi->hook_arg, base, S, 1) != 0) {
		munmap(base, S);
		return NULL;
	}
	return s;
}

/* Put a mapped slab into the depot (under the lock). */
static void slab_link(struct pool_impl *pi, struct slab *s)
{
	__atomic_store_n(&s->pending, 0, __ATOMIC_RELAXED);
	s->prev = NULL;
	s->next = pi->slabs;
	if (pi->slabs)
		pi->slabs->prev = s;
	pi->slabs = s;
	partial_add(pi, s);
	pi->nslabs++;
	pi->depot_free += s->nfree;
}

/* Take a slab out of the depot (under the lock); slab_unmap() follows. */
static void slab_unlink(struct pool_impl *pi, struct slab *s)
{
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
}

/* Check (debug pools) and unmap a slab that nothing can reach any more. */
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
	s->magic = 0;
	if (pi->slab_hook != NULL)
		pi->slab_hook(pi->hook_arg, s, pi->slab_bytes, 0);
	munmap(s, pi->slab_bytes);
}

static void pending_link(struct pool_impl *pi);

static void depot_put(struct pool_impl *pi, void *obj)
{
	struct slab *s = slab_of(pi, obj);

	if (s->magic != SLAB_MAGIC || s->pool != pi || s->nfree >= pi->slab_objects)
		report(pi, "corrupted (double free or foreign pointer?) at", obj, -1);
	/* A handler's slab pushed after this holder took the lock. */
	if (__atomic_load_n(&s->pending, __ATOMIC_RELAXED))
		pending_link(pi);
	s->freeidx[s->nfree++] = (uint16_t)index_of(pi, s, obj);
	if (!s->partial)
		partial_add(pi, s);
	pi->depot_free++;
}

/* ---- the overflow: frees parked while the depot is the caller's own ---- */

static int overflow_put(struct pool_impl *pi, intptr_t obj)
{
	for (int i = 0; i < POOL_OVERFLOW; i++) {
		intptr_t none = 0;
		if (__atomic_compare_exchange_n(&pi->overflow[i], &none, obj, 0, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED)) {
			__atomic_add_fetch(&pi->noverflow, 1, __ATOMIC_RELEASE);
			return 1;
		}
	}
	return 0;
}

static intptr_t overflow_take(struct pool_impl *pi)
{
	if (__atomic_load_n(&pi->noverflow, __ATOMIC_ACQUIRE) <= 0)
		return 0;
	for (int i = 0; i < POOL_OVERFLOW; i++) {
		intptr_t obj = __atomic_exchange_n(&pi->overflow[i], 0, __ATOMIC_ACQUIRE);
		if (obj != 0) {
			__atomic_sub_fetch(&pi->noverflow, 1, __ATOMIC_RELAXED);
			return obj;
		}
	}
	return 0;
}

/* ---- the depot lock ---- */

/* Link the slabs the handlers mapped (under the lock).  An object of
 * theirs can come back only after its slab was pushed on the list. */
static void pending_link(struct pool_impl *pi)
{
	if (__atomic_load_n(&pi->pending, __ATOMIC_RELAXED) == NULL)
		return;
	for (struct slab *s = __atomic_exchange_n(&pi->pending, NULL, __ATOMIC_ACQUIRE), *next;
	     s != NULL; s = next) {
		next = s->next;
		slab_link(pi, s);
	}
}

/* 0, -EDEADLK (the calling thread holds it: a signal handler interrupted
 * its own depot work) or -EOWNERDEAD (its holder is gone). */
static int depot_lock(struct pool_impl *pi)
{
	int err = rsk_lock_take_(&pi->lock, "pool", pi);

	if (err == 0) {
		/* First the handlers' slabs: an object parked below may be one of theirs. */
		pending_link(pi);
		for (intptr_t obj; (obj = overflow_take(pi)) != 0;)
			depot_put(pi, (void *)obj);
	}
	return err;
}

/*
 * An object for a signal handler that can have no cache, the depot nor
 * the overflow without waiting: from a slab mapped here (mmap is
 * async-signal-safe), which the next depot holder links (depot_lock()).
 * Not in a bounded pool (its bound is kept under the depot lock) nor a
 * debug pool (its checks need the lock).  0 if none.
 */
static intptr_t pending_take(struct pool_impl *pi, struct slab *s);

static intptr_t pending_alloc(struct pool_impl *pi)
{
	struct slab *s;

	if (pi->max_bytes != 0 || (pi->pub.flags & RSK_POOL_DEBUG))
		return 0;
	s = slab_map(pi);
	if (s == NULL)
		return 0;
	return pending_take(pi, s);
}

/* One object of s, a slab nothing else reaches yet, which then goes on
 * the pending list. */
static intptr_t pending_take(struct pool_impl *pi, struct slab *s)
{
	intptr_t obj = (intptr_t)(s->first + (size_t)s->freeidx[--s->nfree] * pi->stride);
	struct slab *head = __atomic_load_n(&pi->pending, __ATOMIC_RELAXED);

	__atomic_store_n(&s->pending, 1, __ATOMIC_RELAXED);
	do
		s->next = head;
	while (!__atomic_compare_exchange_n(&pi->pending, &head, s, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	return obj;
}

static void depot_unlock(struct pool_impl *pi)
{
	rsk_lock_drop_(&pi->lock);
}

/* Take up to n objects from the depot's slabs (under the lock). */
static size_t depot_get(struct pool_impl *pi, intptr_t *out, size_t n)
{
	size_t got = 0;
	struct slab *s;

	while (got < n && (s = pi->partial) != NULL) {
		while (got < n && s->nfree > 0)
			out[got++] = (intptr_t)(s->first + (size_t)s->freeidx[--s->nfree] * pi->stride);
		if (s->nfree == 0)
			partial_remove(pi, s);
	}
	pi->depot_free -= got;
	return got;
}

/* Put n objects back (takes the lock); 0 or the lock's error. */
static int depot_put_all(struct pool_impl *pi, const intptr_t *objs, size_t n)
{
	int err;

	if (n == 0)
		return 0;
	err = depot_lock(pi);
	if (err != 0)
		return err;
	for (size_t i = 0; i < n; i++)
		depot_put(pi, (void *)objs[i]);
	depot_unlock(pi);
	return 0;
}

/*
 * Take between 1 and n objects, mapping a slab when the depot is empty
 * (outside the lock: the slab is counted against max_bytes meanwhile).
 * Returns how many (0: -ENOMEM, or the lock's error in *err).
 */
static size_t depot_take(struct pool_impl *pi, intptr_t *out, size_t n, int *err)
{
	size_t got;

	*err = depot_lock(pi);
	if (*err != 0)
		return 0;
	while ((got = depot_get(pi, out, n)) == 0) {
		if (pi->max_bytes != 0 &&
		    (pi->nslabs + __atomic_load_n(&pi->growing, __ATOMIC_RELAXED) + 1) *
				    pi->slab_bytes > pi->max_bytes) {
			*err = -ENOMEM;
			break;
		}
		__atomic_add_fetch(&pi->growing, 1, __ATOMIC_RELAXED);
		depot_unlock(pi);
		struct slab *s = slab_map(pi);
		*err = depot_lock(pi);
		if (*err != 0) {
			__atomic_sub_fetch(&pi->growing, 1, __ATOMIC_RELAXED);
			if (s == NULL)
				return 0;
			if (*err == -EDEADLK && pi->max_bytes == 0 &&
			    !(pi->pub.flags & RSK_POOL_DEBUG)) {
				/* Not free at once (a signal handler on top of a
				 * hold): the slab waits on the pending list. */
				out[0] = pending_take(pi, s);
				*err = 0;
				return 1;
			}
			slab_unmap(pi, s); /* the lock's holder died, or see pending_alloc() */
			return 0;
		}
		__atomic_sub_fetch(&pi->growing, 1, __ATOMIC_RELAXED);
		if (s == NULL) {
			*err = -ENOMEM;
			break;
		}
		slab_link(pi, s);
	}
	depot_unlock(pi);
	return got;
}

/* ---- scratch buffers: objects in transit between a cache and the depot ---- */

struct xfer {
	intptr_t *buf;
	size_t cap; /* entries */
	int slot;   /* which of the pool's buffers, -1: the stack one */
	intptr_t stack[POOL_XFER_STACK];
};

/* Objects in transit are counted as a hold: fork() waits for them to
 * arrive, so a child never loses them. */
static void xfer_get(struct pool_impl *pi, struct xfer *x)
{
	rsk_hold_enter_();
	for (int i = 0; i < POOL_XFER_BUFS; i++) {
		int free_ = 0;
		if (!__atomic_compare_exchange_n(&pi->xbusy[i], &free_, 1, 0, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		if (pi->xbuf[i] == NULL)
			pi->xbuf[i] = map_zeroed(((size_t)pi->pub.capacity + 1) * sizeof(intptr_t));
		if (pi->xbuf[i] == NULL) {
			__atomic_store_n(&pi->xbusy[i], 0, __ATOMIC_RELEASE);
			break;
		}
		x->buf = pi->xbuf[i];
		x->cap = (size_t)pi->pub.capacity + 1;
		x->slot = i;
		return;
	}
	/* All busy (signal handlers, or more threads than buffers at the
	 * depot at once): move fewer objects this time. */
	x->buf = x->stack;
	x->cap = POOL_XFER_STACK;
	x->slot = -1;
}

static void xfer_put(struct pool_impl *pi, struct xfer *x)
{
	if (x->slot >= 0)
		__atomic_store_n(&pi->xbusy[x->slot], 0, __ATOMIC_RELEASE);
	rsk_hold_leave_();
}

/* ---- per-thread caches where no thread runs sections ---- */

/*
 * In a process without rseq (fast_nr_ 0) every allocation and free comes
 * to the slow paths, and a part's cache is a lock the process's threads
 * take in turn.  There each thread keeps a small cache of its own, for up
 * to TC_POOLS pools at once, TC_OBJS objects each (so at most
 * TC_POOLS * TC_OBJS objects per thread, TC_OBJS * stride bytes of each
 * pool), filled from and flushed to the depot TC_BATCH at a time: the
 * common operation is then a pop or push on thread-local memory, as a
 * C library's thread cache.  Not for a pool with max_bytes (its bound
 * must see every free object) nor the allocator's mapped pools.
 *
 * Exactness.  A thread cache's objects are free objects of the pool that
 * only its thread hands out.  A signal handler that interrupts its own
 * thread inside the cache finds `busy` set and takes the shared path.
 * The cache goes back to its pool when the thread exits (a pthread key's
 * destructor) and in a fork child for every other thread (their records
 * are in the registry below, and a record's slots are the truth: a slot
 * is nonzero exactly when it holds an object, whatever its count said
 * when the fork came).  rsk_pool_destroy() forgets the pool's entries
 * (its objects are unmapped with it), rsk_pool_drain() empties the
 * calling thread's own entry, rsk_pool_stats() counts every thread's
 * cached objects.
 */
#define TC_POOLS 4
#define TC_OBJS	 16
#define TC_BATCH (TC_OBJS / 2)

struct tc_entry {
	struct pool_impl *pool; /* atomic; NULL: free */
	intptr_t count;		/* the slots below it hold objects */
	intptr_t slot[TC_OBJS]; /* 0: empty */
};

/* A thread's record: mapped, never unmapped while the library is loaded
 * (a fork child reads the records of threads it does not have). */
struct tc_record {
	struct tc_record *next; /* the registry, push only */
	int owned;		/* atomic: a thread has it */
	int busy;		/* its thread is inside (signal handlers: the shared path) */
	uint64_t *tally;	/* its thread's rsk_slow_tally_, NULL until known */
	struct tc_entry e[TC_POOLS];
};

#define TC_CHUNK 16 /* records mapped at once */
#define TC_NONE	 ((struct tc_record *)(uintptr_t)1)

static struct tc_record *tc_registry;	    /* atomic */
static __thread struct tc_record *tc_self; /* NULL: none yet; TC_NONE: none to have */
/* Thread exit, destroy and fork against each other (never a signal
 * handler's path: a handler only claims a record, lock-free). */
static pthread_mutex_t tc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tc_key;
static int tc_key_ok; /* 1: the key exists and setting it never allocates */
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;

static void tc_thread_exit(void *rec);
static void tc_fork_prepare(void)
{
	pthread_mutex_lock(&tc_lock);
}
static void tc_fork_parent(void)
{
	pthread_mutex_unlock(&tc_lock);
}
static void tc_fork_child(void);

/* Unloaded by dlclose(): glibc must not call a destructor that is
 * about to be unmapped (as runtime.c does for its own key). */
static void tc_fini(void) __attribute__((destructor));
static void tc_fini(void)
{
	if (tc_key_ok && rsk_process.unloadable) {
		tc_key_ok = 0;
		pthread_key_delete(tc_key);
	}
}

static void tc_init(void)
{
	if (pthread_key_create(&tc_key, tc_thread_exit) != 0)
		return;
#ifdef __GLIBC__
	/* glibc's first 32 keys live in the thread's descriptor: setting one
	 * allocates nothing, so a record claimed in a signal handler is
	 * safe.  Beyond them: no thread caches. */
	if (tc_key >= 32)
		return;
#endif
	/* After the gates' handlers: see rsk_progress_init_(). */
	rsk_progress_init_();
	if (pthread_atfork(tc_fork_prepare, tc_fork_parent, tc_fork_child) == 0)
		tc_key_ok = 1;
}

/* Negative control (injection builds, tests/pool_thread_cache.c):
 * RSEQKIT_INJECT_BROKEN_TCACHE=1 makes a pop leave the object in the
 * cache, so that it is handed out twice. */
#if RSK_INJECTING
static int tc_broken(void)
{
	static int v = -1;

	if (__atomic_load_n(&v, __ATOMIC_RELAXED) < 0) {
		const char *e = getenv("RSEQKIT_INJECT_BROKEN_TCACHE");
		__atomic_store_n(&v, e != NULL && e[0] == '1', __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&v, __ATOMIC_RELAXED);
}
#endif

/* A free record for the calling thread (lock-free, async-signal-safe:
 * mmap only), or TC_NONE. */
static __attribute__((noinline)) struct tc_record *tc_claim(void)
{
	struct tc_record *r, *head;

	/* A signal handler that runs while this claims finds none and
	 * takes the shared path: a record it claimed itself would be
	 * replaced, and never given back, when the claim below returns. */
	tc_self = TC_NONE;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!tc_key_ok)
		return TC_NONE;
	for (r = __atomic_load_n(&tc_registry, __ATOMIC_ACQUIRE); r != NULL; r = r->next) {
		int free_ = 0;
		if (__atomic_load_n(&r->owned, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&r->owned, &free_, 1, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			break;
	}
	if (r == NULL) {
		struct tc_record *chunk = map_zeroed(TC_CHUNK * sizeof(*chunk));

		if (chunk == NULL)
			return TC_NONE;
		/* The first is ours; the chain goes on the registry at once. */
		chunk[0].owned = 1;
		for (int i = 0; i + 1 < TC_CHUNK; i++)
			chunk[i].next = &chunk[i + 1];
		head = __atomic_load_n(&tc_registry, __ATOMIC_RELAXED);
		do
			chunk[TC_CHUNK - 1].next = head;
		while (!__atomic_compare_exchange_n(&tc_registry, &head, chunk, 1, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED));
		r = chunk;
	}
	r->tally = NULL; /* the slow-path count of a thread before */
	if (pthread_setspecific(tc_key, r) != 0) {
		__atomic_store_n(&r->owned, 0, __ATOMIC_RELEASE);
		return TC_NONE;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return tc_self = r;
}

/* Give back every object of an entry (its slots, whatever its count)
 * and free it.  Under tc_lock, or by the entry's own thread. */
static void tc_entry_drain(struct tc_entry *e)
{
	struct pool_impl *pi = __atomic_load_n(&e->pool, __ATOMIC_ACQUIRE);
	int locked;

	if (pi == NULL)
		return;
	locked = depot_lock(pi) == 0;
	for (int i = 0; i < TC_OBJS; i++) {
		intptr_t obj = e->slot[i];
		if (obj == 0)
			continue;
		if (locked)
			depot_put(pi, (void *)obj);
		else
			overflow_put(pi, obj); /* the depot's holder died */
		e->slot[i] = 0;
	}
	e->count = 0;
	if (locked)
		depot_unlock(pi);
	__atomic_store_n(&e->pool, NULL, __ATOMIC_RELEASE);
}

static void tc_record_drain(struct tc_record *r)
{
	for (int k = 0; k < TC_POOLS; k++)
		tc_entry_drain(&r->e[k]);
}

/* Thread exit: its objects go back to their pools, its record to the
 * registry; later operations of the thread (other TLS destructors) take
 * the shared path. */
static void tc_thread_exit(void *rec)
{
	struct tc_record *r = rec;

	r->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	tc_self = TC_NONE;
	pthread_mutex_lock(&tc_lock);
	tc_record_drain(r);
	pthread_mutex_unlock(&tc_lock);
	r->busy = 0;
	__atomic_store_n(&r->owned, 0, __ATOMIC_RELEASE);
}

/* The child has one thread: the other threads' records go back, with
 * their objects (fork() waited for every depot lock, see progress.c). */
static void tc_fork_child(void)
{
	pthread_mutex_init(&tc_lock, NULL);
	for (struct tc_record *r = tc_registry; r != NULL; r = r->next)
		if (r != tc_self && __atomic_load_n(&r->owned, __ATOMIC_RELAXED)) {
			tc_record_drain(r);
			r->busy = 0;
			r->owned = 0;
		}
}

/* rsk_pool_destroy(): no entry may name the pool any more (its objects
 * go with its slabs). */
static void tc_forget(const struct pool_impl *pi)
{
	if (__atomic_load_n(&tc_registry, __ATOMIC_ACQUIRE) == NULL)
		return;
	pthread_mutex_lock(&tc_lock);
	for (struct tc_record *r = tc_registry; r != NULL; r = r->next)
		for (int k = 0; k < TC_POOLS; k++) {
			struct tc_entry *e = &r->e[k];
			if (__atomic_load_n(&e->pool, __ATOMIC_RELAXED) != pi)
				continue;
			memset(e->slot, 0, sizeof(e->slot));
			e->count = 0;
			__atomic_store_n(&e->pool, NULL, __ATOMIC_RELEASE);
		}
	pthread_mutex_unlock(&tc_lock);
}

/* Objects of pi in every thread cache (rsk_pool_stats()): a sum of
 * counts other threads change meanwhile, as the parts' counts. */
static size_t tc_cached(const struct pool_impl *pi, size_t *max)
{
	size_t n = 0;

	for (struct tc_record *r = __atomic_load_n(&tc_registry, __ATOMIC_ACQUIRE); r != NULL;
	     r = r->next)
		for (int k = 0; k < TC_POOLS; k++)
			if (__atomic_load_n(&r->e[k].pool, __ATOMIC_RELAXED) == pi) {
				size_t c = (size_t)__atomic_load_n(&r->e[k].count, __ATOMIC_RELAXED);
				n += c;
				if (c > *max)
					*max = c;
			}
	return n;
}

/* The calling thread's record, marked busy, or NULL (none; or a signal
 * handler on top of its own thread's use: the shared path). */
static inline struct tc_record *tc_enter(void)
{
	struct tc_record *r;

	/* RSEQKIT_CHECK_THREADS: the thread checked before its TLS. */
	if (__builtin_expect(rsk_process.check_threads, 0))
		rsk_check_thread_();
	r = tc_self;

	if (__builtin_expect(r == NULL, 0))
		r = tc_claim();
	if (__builtin_expect(r == TC_NONE || r->busy, 0))
		return NULL;
	r->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return r;
}

static inline void tc_leave(struct tc_record *r)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	r->busy = 0;
}

/* r's entry for pi, a free entry claimed for it, or NULL (TC_POOLS
 * other pools have entries: the shared path). */
static inline struct tc_entry *tc_entry_of(struct tc_record *r, struct pool_impl *pi)
{
	struct tc_entry *e = &r->e[0];

	if (__builtin_expect(__atomic_load_n(&e->pool, __ATOMIC_RELAXED) == pi, 1))
		return e;
	for (int k = 1; k < TC_POOLS; k++)
		if (__atomic_load_n(&r->e[k].pool, __ATOMIC_RELAXED) == pi)
			return &r->e[k];
	for (int k = 0; k < TC_POOLS; k++)
		if (__atomic_load_n(&r->e[k].pool, __ATOMIC_RELAXED) == NULL) {
			r->e[k].count = 0;
			__atomic_store_n(&r->e[k].pool, pi, __ATOMIC_RELEASE);
			return &r->e[k];
		}
	return NULL;
}

static int tc_usable(const struct pool_impl *pi)
{
	return pi->max_bytes == 0 && !pi->mapped;
}

/* An object from the calling thread's cache of pi (refilled from the
 * depot), or 0: no cache here, or the depot failed (the shared path
 * then says why). */
static intptr_t tc_alloc(struct pool_impl *pi)
{
	struct tc_record *r;
	struct tc_entry *e;
	intptr_t obj = 0, n;

	if (!tc_usable(pi) || (r = tc_enter()) == NULL)
		return 0;
	e = tc_entry_of(r, pi);
	if (e == NULL)
		goto out;
	n = e->count;
	if (__builtin_expect(n == 0, 0)) {
		int err;
		/* Straight into the slots, under the depot lock. */
		n = (intptr_t)depot_take(pi, e->slot, TC_BATCH, &err);
		e->count = n;
		if (n == 0)
			goto out;
	}
	obj = e->slot[n - 1];
#if RSK_INJECTING
	if (tc_broken())
		goto out;
#endif
	e->slot[n - 1] = 0;
	e->count = n - 1;
out:
	tc_leave(r);
	return obj;
}

/* obj onto the calling thread's cache of pi (half of it flushed to the
 * depot when full): 1, or 0 where there is none (the shared path). */
static int tc_free(struct pool_impl *pi, void *obj)
{
	struct tc_record *r;
	struct tc_entry *e;
	intptr_t n;
	int done = 0;

	if (!tc_usable(pi) || (r = tc_enter()) == NULL)
		return 0;
	e = tc_entry_of(r, pi);
	if (e == NULL)
		goto out;
	n = e->count;
	if (__builtin_expect(n == TC_OBJS, 0)) {
		/* The oldest half, under the depot lock (a fork waits for it):
		 * never in transit. */
		if (depot_lock(pi) != 0)
			goto out;
		for (int i = 0; i < TC_BATCH; i++)
			depot_put(pi, (void *)e->slot[i]);
		memmove(e->slot, e->slot + TC_BATCH, (TC_OBJS - TC_BATCH) * sizeof(intptr_t));
		memset(e->slot + TC_OBJS - TC_BATCH, 0, TC_BATCH * sizeof(intptr_t));
		n -= TC_BATCH;
		e->count = n;
		depot_unlock(pi);
	}
	e->slot[n] = (intptr_t)obj;
	e->count = n + 1;
	done = 1;
out:
	tc_leave(r);
	return done;
}

/* A slow path of the calling thread on the full path: counted, and the
 * thread's tally (known once it has counted) copied into its record for
 * tc_count(). */
static void tc_count_full(void)
{
	struct tc_record *r = tc_self;

	rsk_note_slow_path_at(0);
	if (r != NULL && r != TC_NONE)
		r->tally = rsk_slow_tally_;
}

/* rsk_count_slow_path_() through the record (its tally is known: the
 * quick paths check): in position-independent code the thread-local
 * pointer costs a call (__tls_get_addr), the record's copy a load. */
static inline __attribute__((always_inline)) void tc_count(struct tc_record *r)
{
	uint64_t *t = r->tally;

	__atomic_store_n(t, __atomic_load_n(t, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	RSK_PROBE1(slow_path, 0);
}

/*
 * tc_alloc() and tc_free() where nothing is out of the ordinary: the
 * thread's record exists, knows its tally and is not in use (no signal
 * handler on top of its own thread's use), the pool's entry is the
 * first, and it has an object (alloc) or room (free); the slow path is
 * counted.  Otherwise 0, nothing changed, and the caller goes on to the
 * full path.  No call on the way: in a process without rseq this is every
 * allocation and free, and a call costs its caller the registers it
 * saves.
 */
static inline __attribute__((always_inline)) intptr_t tc_alloc_quick(struct pool_impl *pi)
{
	struct tc_record *r = tc_self;
	struct tc_entry *e;
	intptr_t obj, n;

	if (__builtin_expect(rsk_process.check_threads || !tc_usable(pi), 0) ||
	    __builtin_expect(r == NULL || r == TC_NONE || r->busy || r->tally == NULL, 0))
		return 0;
	r->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	e = &r->e[0];
	n = e->count;
	obj = 0;
	if (__builtin_expect(__atomic_load_n(&e->pool, __ATOMIC_RELAXED) == pi && n > 0, 1)) {
		obj = e->slot[n - 1];
#if RSK_INJECTING
		if (tc_broken())
			goto out;
#endif
		e->slot[n - 1] = 0;
		e->count = n - 1;
	}
#if RSK_INJECTING
out:
#endif
	if (obj != 0)
		tc_count(r);
	tc_leave(r);
	return obj;
}

static inline __attribute__((always_inline)) int tc_free_quick(struct pool_impl *pi, void *obj)
{
	struct tc_record *r = tc_self;
	struct tc_entry *e;
	intptr_t n;
	int done = 0;

	if (__builtin_expect(rsk_process.check_threads || !tc_usable(pi), 0) ||
	    __builtin_expect(r == NULL || r == TC_NONE || r->busy || r->tally == NULL, 0))
		return 0;
	r->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	e = &r->e[0];
	n = e->count;
	if (__builtin_expect(__atomic_load_n(&e->pool, __ATOMIC_RELAXED) == pi && n < TC_OBJS, 1)) {
		e->slot[n] = (intptr_t)obj;
		e->count = n + 1;
		done = 1;
		tc_count(r);
	}
	tc_leave(r);
	return done;
}

/* rsk_pool_drain(): the calling thread's own entry of pi. */
static void tc_drain_own(const struct pool_impl *pi)
{
	struct tc_record *r = tc_self;

	if (r == NULL || r == TC_NONE || r->busy)
		return;
	r->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	for (int k = 0; k < TC_POOLS; k++)
		if (__atomic_load_n(&r->e[k].pool, __ATOMIC_RELAXED) == pi)
			tc_entry_drain(&r->e[k]);
	tc_leave(r);
}

/* ---- creation ---- */

/* -EINVAL for a configuration's field; in debug mode (RSK_POOL_DEBUG, or
 * RSEQKIT_DEBUG=pool) a message names the field and its rule. */
static int config_error(int debug, const char *field_and_rule)
{
	if (debug)
		rsk_report_("rsk_pool_create: ", NULL, field_and_rule);
	return -EINVAL;
}

/* The objects of one slab of S bytes (0: not one fits), and where their
 * states and the objects begin. */
static size_t slab_fit(size_t S, size_t hdr, size_t per, size_t stride, size_t align, int debug,
		       size_t *state_off, size_t *first_off)
{
	size_t nobj = S > hdr ? (S - hdr) / per : 0;

	if (nobj > MAX_SLAB_OBJECTS)
		nobj = MAX_SLAB_OBJECTS;
	for (; nobj > 0; nobj--) {
		*state_off = hdr + nobj * sizeof(uint16_t);
		*first_off = align_up(*state_off + (debug ? nobj : 0), align);
		if (*first_off + nobj * stride <= S)
			break;
	}
	return nobj;
}

int rsk_pool_create_in_(struct rsk_pool **out, const struct rsk_pool_config *cfg, int mapped)
{
	struct pool_impl *pi;
	size_t align, stride, S, hdr, per, nobj, state_off = 0, first_off = 0;
	unsigned flags;
	long capacity;
	int debug, nr;

	if (out == NULL || cfg == NULL)
		return -EINVAL;
	/* The allocator's own pools (mapped) have their own check mode. */
	if (!mapped)
		rsk_init_once();
	flags = cfg->flags | (!mapped && (rsk_debug_ & RSK_DEBUG_POOL_) ? RSK_POOL_DEBUG : 0);
	debug = (flags & RSK_POOL_DEBUG) != 0;
	if (cfg->size == 0 || cfg->size > RSK_POOL_MAX_SIZE)
		return config_error(debug, "size: must be 1 .. RSK_POOL_MAX_SIZE (1 MiB): -EINVAL");
	if ((cfg->align & (cfg->align - 1)) != 0 || cfg->align > RSK_POOL_MAX_ALIGN)
		return config_error(debug, "align: must be 0 (the default) or a power of two "
					   "<= RSK_POOL_MAX_ALIGN (4096): -EINVAL");
	if (cfg->cache_capacity < 0 || cfg->cache_capacity > RSK_POOL_MAX_CAPACITY)
		return config_error(debug, "cache_capacity: must be 0 (the default) or 1 .. "
					   "RSK_POOL_MAX_CAPACITY (65536): -EINVAL");
	if ((cfg->flags & ~RSK_POOL_DEBUG) != 0)
		return config_error(debug, "flags: must be 0 or RSK_POOL_DEBUG: -EINVAL");
	if (cfg->mode != RSK_INDEX_CPU && cfg->mode != RSK_INDEX_CID)
		return config_error(debug, "mode: must be RSK_INDEX_CPU (0) or RSK_INDEX_CID: -EINVAL");
	if (cfg->slab_bytes != 0 && ((cfg->slab_bytes & (cfg->slab_bytes - 1)) != 0 ||
				     cfg->slab_bytes < SLAB_SMALLEST || cfg->slab_bytes > SLAB_LARGEST))
		return config_error(debug, "slab_bytes: must be 0 (the default) or a power of two "
					   "from 4 KiB to 1 GiB: -EINVAL");
	align = cfg->align;
	if (align == 0)
		for (align = 16; align / 2 >= cfg->size && align > 1;)
			align /= 2;
	stride = align_up(cfg->size, align);
	capacity = cfg->cache_capacity;
	if (capacity == 0) {
		size_t k = CACHE_DEFAULT_BYTES / stride;

		capacity = k < 2 ? 2 : k > 128 ? 128 : (long)k;
	}

	/* Slab geometry: header, free-index stack, debug states, objects. */
	hdr = sizeof(struct slab);
	per = stride + sizeof(uint16_t) + (size_t)debug;
	if (cfg->slab_bytes != 0) {
		S = cfg->slab_bytes;
	} else {
		S = SLAB_MIN_BYTES;
		/* At least 64 objects up to 4 KiB, 8 beyond; the allocator's
		 * pools (mapped) take 2 beyond 32 KiB: a slab of its 256 KiB
		 * class is then 1 MiB, not 4, of which little is touched while
		 * few are in use. */
		while (S < hdr + (stride <= 4096 ? 64 : mapped && stride > ((size_t)32 << 10) ? 2 : 8) * per + align)
			S *= 2;
		/* A bound below that slab: the largest slab within the bound
		 * (a bound below one slab would make every allocation fail). */
		while (cfg->max_bytes != 0 && cfg->max_bytes < S && S > SLAB_SMALLEST)
			S /= 2;
	}
	nobj = slab_fit(S, hdr, per, stride, align, debug, &state_off, &first_off);
	if (nobj == 0)
		return config_error(debug, cfg->slab_bytes != 0
						   ? "slab_bytes: too small for one object: -EINVAL"
						   : "max_bytes: smaller than one slab holding one object: -EINVAL");
	if (cfg->max_bytes != 0 && cfg->max_bytes < S)
		return config_error(debug, "max_bytes: smaller than one slab (slab_bytes): -EINVAL");

	/* The pool and its array of part pointers, in one block: from malloc,
	 * or mapped for rseqkit's malloc (src/malloc/), which is built on
	 * pools (a destroyed pool's memory is then unmapped, not kept). */
	nr = rsk_possible_cpus();
	pi = mapped ? map_zeroed(impl_bytes(nr)) : calloc(1, impl_bytes(nr));
	if (pi == NULL)
		return -ENOMEM;
	pi->mapped = mapped;
	pi->pub.part = (struct rsk_pool_part **)(void *)((char *)pi + align_up(sizeof(*pi), sizeof(void *)));
	pi->pub.mode = rsk_percpu_effective_mode(cfg->mode);
	pi->pub.nr = nr;
	pi->pub.magic_ = RSK_PERCPU_MAGIC;
	rsk_percpu_init_head((struct rsk_percpu_head *)&pi->pub);
	pi->pub.flags = flags;
	pi->pub.capacity = capacity;
	pi->pub.align = align;
	pi->size = cfg->size;
	pi->stride = stride;
	pi->slab_bytes = S;
	pi->slab_objects = nobj;
	pi->state_off = state_off;
	pi->first_off = first_off;
	pi->max_bytes = cfg->max_bytes;
	pi->part_bytes = align_up(sizeof(struct rsk_pool_part) + (size_t)capacity * sizeof(intptr_t),
				  RSK_PERCPU_ALIGN);
	pi->batch = (capacity + 1) / 2;
	/* The caches' address space, touched (and so backed) part by part;
	 * if it cannot be reserved, each cache is mapped on first use. */
	pi->parts = map_zeroed(pi->part_bytes * (size_t)nr);
	pi->part_stride = pi->part_bytes;
	if (!mapped && pi->pub.fast_nr_ == 0)
		pthread_once(&tc_once, tc_init); /* thread caches: no sections here */
	*out = &pi->pub;
	return 0;
}

RSK_EXPORT int rsk_pool_destroy(struct rsk_pool *p)
{
	struct pool_impl *pi = impl(p);
	struct slab *s;

	if (!pool_alive(p))
		return -EINVAL; /* NULL, destroyed already, or not a pool */
	__atomic_store_n(&p->magic_, RSK_PERCPU_MAGIC_DEAD, __ATOMIC_RELAXED);
	tc_forget(pi); /* waits for a thread exit that is giving objects back */
	while ((s = pi->pending) != NULL) {
		pi->pending = s->next;
		slab_unmap(pi, s);
	}
	while ((s = pi->slabs) != NULL) {
		slab_unlink(pi, s);
		slab_unmap(pi, s);
	}
	if (pi->parts_ext)
		; /* the caller's memory */
	else if (pi->parts != NULL)
		munmap(pi->parts, pi->part_bytes * (size_t)p->nr);
	else
		for (int i = 0; i < p->nr; i++)
			if (p->part[i] != NULL)
				munmap(p->part[i], pi->part_bytes);
	for (int i = 0; i < POOL_XFER_BUFS; i++)
		if (pi->xbuf[i] != NULL)
			munmap(pi->xbuf[i], ((size_t)p->capacity + 1) * sizeof(intptr_t));
	if (pi->mapped)
		munmap(pi, impl_bytes(p->nr));
	else
		free(pi);
	return 0;
}

RSK_EXPORT int rsk_pool_create(struct rsk_pool **out, const struct rsk_pool_config *cfg)
{
	return rsk_pool_create_in_(out, cfg, 0);
}

void rsk_pool_set_slab_hook_(struct rsk_pool *p, int (*hook)(void *arg, void *base, size_t bytes,
							       int mapped),
			     void *arg)
{
	impl(p)->hook_arg = arg;
	impl(p)->slab_hook = hook;
}

void rsk_pool_set_parts_(struct rsk_pool *p, char *base, size_t stride, const uint32_t *limits,
			 size_t limit_stride)
{
	struct pool_impl *pi = impl(p);

	if (pi->parts != NULL && !pi->parts_ext)
		munmap(pi->parts, pi->part_bytes * (size_t)p->nr);
	pi->parts = base;
	pi->part_stride = stride;
	pi->parts_ext = 1;
	pi->limits = limits;
	pi->limit_stride = limit_stride;
	/* Every part exists from now on: the caller's fast paths reach them
	 * by address, not through part[]. */
	for (int i = 0; i < p->nr; i++)
		__atomic_store_n(&p->part[i], (struct rsk_pool_part *)(void *)(base + (size_t)i * stride),
				 __ATOMIC_RELEASE);
}

/* Cache idx's capacity: the pool's, or its soft capacity (at most the
 * pool's, at least 1) where rsk_pool_set_parts_() gave one.  A cache may
 * hold more than its soft capacity for a moment after it shrank: every
 * room computed from it is clamped at 0. */
static intptr_t part_cap(const struct pool_impl *pi, int idx)
{
	intptr_t v;

	if (pi->limits == NULL)
		return pi->pub.capacity;
	v = (intptr_t)__atomic_load_n(&pi->limits[(size_t)idx * pi->limit_stride], __ATOMIC_RELAXED);
	return v < 1 ? 1 : v > pi->pub.capacity ? pi->pub.capacity : v;
}

/* Objects moved per refill or flush of cache idx: half its capacity. */
static intptr_t part_batch(const struct pool_impl *pi, int idx)
{
	return pi->limits == NULL ? pi->batch : (part_cap(pi, idx) + 1) / 2;
}

static size_t room_of(intptr_t cap, intptr_t count)
{
	return count < cap ? (size_t)(cap - count) : 0;
}

/* The cache of part idx, created on first use (NULL if out of memory:
 * the caller works on the depot directly).  Lock-free, no malloc. */
static __attribute__((noinline)) struct rsk_pool_part *make_part(struct pool_impl *pi, int idx)
{
	struct rsk_pool_part *c, *none = NULL;

	c = pi->parts != NULL ? (struct rsk_pool_part *)(void *)(pi->parts + (size_t)idx * pi->part_stride)
			      : map_zeroed(pi->part_bytes);
	if (c == NULL)
		return NULL;
	if (__atomic_compare_exchange_n(&pi->pub.part[idx], &none, c, 0, __ATOMIC_RELEASE,
					__ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&pi->ncaches, 1, __ATOMIC_RELAXED);
		return c;
	}
	if (pi->parts == NULL)
		munmap(c, pi->part_bytes);
	return none;
}

/* Cache idx, made on first use; NULL if it cannot be mapped. */
static inline struct rsk_pool_part *get_part(struct pool_impl *pi, int idx)
{
	struct rsk_pool_part *c = __atomic_load_n(&pi->pub.part[idx], __ATOMIC_ACQUIRE);

	return c != NULL ? c : make_part(pi, idx);
}

/* ---- the caches under their gates: plain code, no slow work ---- */

/*
 * Writes to a cache's slots under its closed gate are relaxed atomic word
 * stores, not memcpy: the owner's fast path may be reading a slot in C at
 * that moment (its section then fails on the gate), and the two must not
 * be a data race (ThreadSanitizer checks).  On every arch a relaxed store
 * of a word is a plain store.
 */
static void slots_store(intptr_t *dst, const intptr_t *src, size_t n)
{
	/* First to last: also a move down within one array (dst < src). */
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}

/* Close and open cache idx's gate.  Where no thread of the process runs
 * sections (fast_nr_ 0, fixed at creation) the gate is a plain lock:
 * nothing to fence, no time-slice region, and every allocation comes
 * here. */
static int close_part(struct pool_impl *pi, struct rsk_pool_part *c, int idx)
{
	if (pi->pub.fast_nr_ == 0)
		return rsk_gate_take_plain_(&c->gate, idx, "pool", pi);
	return rsk_gate_close_named_(&c->gate, pi->pub.mode, idx, "pool", pi);
}

static void open_part(struct pool_impl *pi, struct rsk_pool_part *c, int idx)
{
	if (pi->pub.fast_nr_ == 0)
		rsk_gate_drop_plain_(&c->gate, idx, 0);
	else
		rsk_gate_open(&c->gate);
}

/* Pop one object from cache idx into *obj (0 if it is empty).  Returns 0,
 * -ENOMEM (no cache) or the gate's error. */
static int cache_pop(struct pool_impl *pi, int idx, intptr_t *obj)
{
	struct rsk_pool_part *c = get_part(pi, idx);
	intptr_t count;
	int err;

	*obj = 0;
	if (c == NULL)
		return -ENOMEM;
	err = close_part(pi, c, idx);
	if (err != 0)
		return err;
	count = c->count;
	if (count > 0) {
		*obj = c->slot[count - 1];
		__atomic_store_n(&c->count, count - 1, __ATOMIC_RELAXED);
	}
	open_part(pi, c, idx);
	return 0;
}

/* Add objs[0..n) to cache idx, as many as fit; returns how many, or the
 * gate's error. */
static long cache_fill(struct pool_impl *pi, int idx, const intptr_t *objs, size_t n)
{
	struct rsk_pool_part *c = get_part(pi, idx);
	intptr_t count;
	size_t k;
	int err;

	if (c == NULL)
		return -ENOMEM;
	err = close_part(pi, c, idx);
	if (err != 0)
		return err;
	count = c->count;
	k = room_of(part_cap(pi, idx), count);
	if (k > n)
		k = n;
	slots_store(&c->slot[count], objs, k);
	__atomic_store_n(&c->count, count + (intptr_t)k, __ATOMIC_RELAXED);
	open_part(pi, c, idx);
	return (long)k;
}

/*
 * Push obj onto cache idx.  When it is full: with x, its oldest objects
 * (up to a batch, as many as x holds) move into x first (*moved of them:
 * the caller gives them to the depot); without x, -ENOSPC.  Returns 0,
 * -ENOSPC, -ENOMEM (no cache) or the gate's error.
 */
static int cache_push(struct pool_impl *pi, int idx, intptr_t obj, struct xfer *x, size_t *moved)
{
	struct rsk_pool_part *c = get_part(pi, idx);
	intptr_t count;
	int err;

	if (c == NULL)
		return -ENOMEM;
	err = close_part(pi, c, idx);
	if (err != 0)
		return err;
	count = c->count;
	if (count >= part_cap(pi, idx)) {
		size_t n = (size_t)part_batch(pi, idx);
		if (x == NULL) {
			open_part(pi, c, idx);
			return -ENOSPC;
		}
		if (n > x->cap)
			n = x->cap;
		/* The oldest: the newest are warm in cache. */
		memcpy(x->buf, c->slot, n * sizeof(intptr_t));
		slots_store(c->slot, c->slot + n, (size_t)count - n);
		count -= (intptr_t)n;
		*moved = n;
	}
	__atomic_store_n(&c->slot[count], obj, __ATOMIC_RELAXED);
	__atomic_store_n(&c->count, count + 1, __ATOMIC_RELAXED);
	open_part(pi, c, idx);
	return 0;
}

/*
 * The caller's own cache, without its gate: when the thread's index is idx
 * a critical section can move objects in or out of cache idx, and the
 * kernel restarts it if the thread moves, so no gate is closed and no CPU
 * fenced (a membarrier system call per refill or flush otherwise).  The
 * section is gated (a slow path elsewhere holding the part makes it stop)
 * and commits by storing the count, after a speculative copy: into the
 * free slots above the count, or out into the caller's scratch buffer.
 * Each returns 1 if it committed, 0 if the caller must take the gate (the
 * thread has another index or none, the gate is closed, or the section
 * kept failing).
 */
#define HERE_TRIES 4

/* Into cache idx (in: objs -> the free slots, as many as fit) or out of it
 * (!in: its newest objects -> objs; the section cannot move the others
 * down, so the oldest stay), up to n; *moved says how many. */
static int cache_move_here(struct pool_impl *pi, int idx, int in, intptr_t *objs, size_t n,
			   size_t *moved)
{
	struct rsk_pool_part *c = get_part(pi, idx);

	for (int t = 0; c != NULL && t < HERE_TRIES; t++) {
		intptr_t count = __atomic_load_n(&c->count, __ATOMIC_RELAXED);
		size_t room = in ? room_of(part_cap(pi, idx), count) : (size_t)count;
		intptr_t k = (intptr_t)(room < n ? room : n);
		int r;

		if (rsk_index(pi->pub.mode) != idx)
			return 0;
		if (in)
			r = rsk_gated_cmpcopystore_release(pi->pub.mode, idx, &c->gate, &c->count, count,
							   &c->slot[count], objs, (size_t)k, count + k);
		else
			r = rsk_gated_cmpcopystore(pi->pub.mode, idx, &c->gate, &c->count, count, objs,
						   &c->slot[count - k], (size_t)k, count - k);
		if (r == RSK_OK) {
			*moved = (size_t)k;
			return 1;
		}
		if (r == RSK_STOPPED)
			return 0;
	}
	return 0;
}

/* A signal handler's way round a part or a depot it interrupted: another
 * part's cache. */
static int other_pop(struct pool_impl *pi, int idx, intptr_t *obj)
{
	for (int k = 1; k < pi->pub.nr; k++) {
		int j = (idx + k) % pi->pub.nr;
		struct rsk_pool_part *c = __atomic_load_n(&pi->pub.part[j], __ATOMIC_ACQUIRE);

		if (c != NULL && __atomic_load_n(&c->count, __ATOMIC_RELAXED) > 0 &&
		    cache_pop(pi, j, obj) == 0 && *obj != 0)
			return 0;
	}
	*obj = 0;
	return -ENOENT;
}

static int other_push(struct pool_impl *pi, int idx, intptr_t obj)
{
	for (int k = 1; k < pi->pub.nr; k++) {
		int j = (idx + k) % pi->pub.nr;
		struct rsk_pool_part *c = __atomic_load_n(&pi->pub.part[j], __ATOMIC_ACQUIRE);

		if (c != NULL && __atomic_load_n(&c->count, __ATOMIC_RELAXED) < part_cap(pi, j) &&
		    cache_push(pi, j, obj, NULL, NULL) == 0)
			return 0;
	}
	return -ENOSPC;
}

/* ---- slow paths ---- */

/*
 * One object from the depot and, if cache idx can take them (use_cache),
 * a batch for it: the depot work is done with the gate open, and only the
 * hand-over to the cache closes it.  Returns the object or 0 (*err).
 */
static intptr_t refill(struct pool_impl *pi, int idx, int use_cache, int *err)
{
	struct xfer x;
	size_t want, got;
	intptr_t obj = 0;

	xfer_get(pi, &x);
	want = use_cache ? 1 + (size_t)part_batch(pi, idx) : 1;
	if (want > x.cap)
		want = x.cap;
	got = depot_take(pi, x.buf, want, err);
	if (got > 0) {
		long k = 0;
		size_t in = 0;
		obj = x.buf[0];
		if (got > 1 && cache_move_here(pi, idx, 1, x.buf + 1, got - 1, &in)) {
			k = (long)in;
		} else if (got > 1) {
			k = cache_fill(pi, idx, x.buf + 1, got - 1);
			if (k < 0)
				k = 0;
		}
		/* What did not fit (the cache filled meanwhile) goes back. */
		depot_put_all(pi, x.buf + 1 + k, got - 1 - (size_t)k);
		*err = 0;
	}
	xfer_put(pi, &x);
	return obj;
}

/*
 * Where no thread of the process runs sections (fast_nr_ 0) every
 * allocation and free comes to the slow paths below: their first try is
 * this, the thread's home cache under its gate as a plain lock, with
 * four calls (home part, the thread's gate state, take, drop: the drop
 * counts the slow path).
 * Anything else - a destroyed pool, no cache yet, a gate that does not
 * come at once, an empty or full cache - goes on to the general path, as
 * the try had not run (it changed nothing).
 */
static inline __attribute__((always_inline)) intptr_t alloc_plain(struct pool_impl *pi)
{
	int idx = rsk_percpu_home_(pi->pub.nr);
	struct rsk_pool_part *c = __atomic_load_n(&pi->pub.part[idx], __ATOMIC_ACQUIRE);
	struct gate_self *g = rsk_gate_self_();
	intptr_t count, obj;

	if (c == NULL || rsk_gate_take_plain_at_(g, &c->gate, idx, "pool", pi) != 0)
		return 0;
	count = c->count;
	if (__builtin_expect(count <= 0, 0)) {
		rsk_gate_drop_plain_at_(g, &c->gate, idx, 0);
		return 0;
	}
	obj = c->slot[count - 1];
	__atomic_store_n(&c->count, count - 1, __ATOMIC_RELAXED);
	rsk_gate_drop_plain_at_(g, &c->gate, idx, 1);
	return obj;
}

static inline __attribute__((always_inline)) int free_plain(struct pool_impl *pi, void *obj)
{
	int idx = rsk_percpu_home_(pi->pub.nr);
	struct rsk_pool_part *c = __atomic_load_n(&pi->pub.part[idx], __ATOMIC_ACQUIRE);
	struct gate_self *g = rsk_gate_self_();
	intptr_t count;

	if (c == NULL || rsk_gate_take_plain_at_(g, &c->gate, idx, "pool", pi) != 0)
		return 0;
	count = c->count;
	if (__builtin_expect(count >= part_cap(pi, idx), 0)) {
		rsk_gate_drop_plain_at_(g, &c->gate, idx, 0);
		return 0;
	}
	__atomic_store_n(&c->slot[count], (intptr_t)obj, __ATOMIC_RELAXED);
	__atomic_store_n(&c->count, count + 1, __ATOMIC_RELAXED);
	rsk_gate_drop_plain_at_(g, &c->gate, idx, 1);
	return 1;
}

/*
 * The slow paths on the framework (rsk_percpu_slow()): its retries of the
 * fast path's attempt, the registration of a new thread, then, in place
 * of a gate phase, the pool's own (the kind's `outside`): the cache under
 * its gate, and the depot, its lock and mmap with every gate open.  An
 * operation's object travels in its struct pool_op.
 */
struct pool_op {
	intptr_t obj; /* alloc: the object got; free: the object given */
};

/* The attempts return part 0 on success: the pool's callers want the
 * object, not the part (the inline attempt does not say which it was). */
static enum rsk_result alloc_attempt(void *s, void *arg, int *idx)
{
	struct pool_op *o = arg;
	enum rsk_result r = rsk_pool_try_alloc_(s, &o->obj, rsk_area_offset_());

	*idx = 0;
	return r;
}

static enum rsk_result free_attempt(void *s, void *arg, int *idx)
{
	struct pool_op *o = arg;

	*idx = 0;
	return rsk_pool_try_free_(s, (void *)o->obj, rsk_area_offset_());
}

/* The allocation's phase outside the gate, on part idx: its cache, then
 * the depot.  0 with o->obj, or a negative errno. */
static int alloc_outside(void *s, void *arg, int idx)
{
	struct rsk_pool *p = s;
	struct pool_impl *pi = impl(p);
	struct pool_op *o = arg;
	intptr_t obj;
	int err;

	for (int attempt = 0;; attempt++) {
		struct rsk_pool_part *c = get_part(pi, idx);

		/* An empty cache (a hint: checked again under the gate) goes
		 * to the depot first, and the gate closes once, to refill. */
		obj = 0;
		err = c == NULL ? -ENOMEM : 0;
		if (c != NULL && __atomic_load_n(&c->count, __ATOMIC_RELAXED) > 0) {
			err = cache_pop(pi, idx, &obj);
			if (obj != 0) {
				o->obj = obj;
				return 0;
			}
		}
		/* A signal handler on top of its thread's hold (in the depot:
		 * mine) takes nothing it would wait for: one object from the
		 * depot if it is free at once, and no batch (which might have
		 * to go back to a depot that then is not). */
		int held = rsk_holding_();

		if (!held || !rsk_lock_mine_(&pi->lock)) {
			/* The cache was empty (or its gate failed: the depot only). */
			obj = refill(pi, idx, err == 0 && !held, &err);
			if (obj != 0) {
				o->obj = obj;
				return 0;
			}
		} else {
			err = -EDEADLK;
		}
		if (err == -EDEADLK) {
			/* What can be had at once: the overflow, another cache,
			 * a slab of its own. */
			obj = overflow_take(pi);
			if (obj == 0)
				other_pop(pi, idx, &obj);
			if (obj == 0)
				obj = pending_alloc(pi);
			if (obj != 0) {
				o->obj = obj;
				return 0;
			}
		}
		if (err == -EOWNERDEAD || err == -EDEADLK)
			return err;
		/* At the bound: the other caches may hold free objects. */
		if (attempt == 0 && pi->max_bytes != 0) {
			rsk_pool_drain(p, -1);
			continue;
		}
		return -ENOMEM;
	}
}

static const struct rsk_percpu_kind alloc_kind = {
	.name = "pool",
	.attempt = alloc_attempt,
	.outside = alloc_outside,
};

/* rsk_pool_alloc_slow_() past the plain first try. */
static __attribute__((noinline)) void *alloc_general(struct rsk_pool *p, enum rsk_result ret)
{
	struct pool_op o = { 0 };
	int r;

	if (!pool_alive(p)) {
		errno = EINVAL; /* used after rsk_pool_destroy() */
		return NULL;
	}
	r = rsk_percpu_slow(p, &alloc_kind, &o, ret);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	return rsk_pool_checked_(p, (void *)o.obj);
}

/* The free's phase outside the gate, on part idx: its cache (a batch
 * flushed to the depot when full), else the depot, another cache, the
 * overflow.  0 or a negative errno. */
static int free_outside(void *s, void *arg, int idx)
{
	struct rsk_pool *p = s;
	struct pool_impl *pi = impl(p);
	void *obj = (void *)((struct pool_op *)arg)->obj;
	size_t moved = 0;
	struct xfer x;
	struct rsk_pool_part *c;
	int err, mine, full, asked, held = 0;

	c = get_part(pi, idx);
	/* Flushing needs the depot (not when the caller is inside it: mine)
	 * and a scratch buffer, taken only when the cache looks full.  Whether
	 * the depot is the caller's is asked only then, or when the push
	 * fails: in a process without rseq every free comes here. */
	full = c != NULL && __atomic_load_n(&c->count, __ATOMIC_RELAXED) >= part_cap(pi, idx);
	asked = full;
	/* held: a signal handler on top of its thread's hold, which takes
	 * nothing it would wait for: no flush (its batch might have to go
	 * back to a depot that then is not free). */
	held = asked && rsk_holding_();
	mine = held && rsk_lock_mine_(&pi->lock);
	full = full && !held;
	if (full) {
		size_t n;

		xfer_get(pi, &x);
		n = (size_t)part_batch(pi, idx) < x.cap ? (size_t)part_batch(pi, idx) : x.cap;
		/* The thread's own full cache: a section moves a batch out
		 * (to the depot), then the fast path has room for obj. */
		if (cache_move_here(pi, idx, 0, x.buf, n, &moved)) {
			int done = rsk_pool_try_free_(p, obj, rsk_area_offset_()) == RSK_OK;

			if (depot_put_all(pi, x.buf, moved) != 0)
				for (size_t i = 0; i < moved; i++) /* the depot's holder died */
					overflow_put(pi, x.buf[i]);
			moved = 0;
			if (done) {
				xfer_put(pi, &x);
				return 0;
			}
		}
	}
	err = cache_push(pi, idx, (intptr_t)obj, full ? &x : NULL, &moved);
	if (err != 0 && !asked) {
		held = rsk_holding_();
		mine = held && rsk_lock_mine_(&pi->lock);
	}
	if (err == -ENOSPC && !held) {
		/* It filled meanwhile. */
		full = 1;
		xfer_get(pi, &x);
		err = cache_push(pi, idx, (intptr_t)obj, &x, &moved);
	}
	if (err != 0 && !mine) {
		/* The part's gate is this thread's own (a signal handler), or
		 * held while this thread holds another, or its fence failed,
		 * or there is no cache: the depot directly. */
		intptr_t o = (intptr_t)obj;
		err = depot_put_all(pi, &o, 1);
	}
	if (err == -EDEADLK || (err != 0 && mine)) {
		/* The depot is this thread's own, or not free at once:
		 * another cache, the overflow. */
		err = other_push(pi, idx, (intptr_t)obj);
		if (err != 0)
			err = overflow_put(pi, (intptr_t)obj) ? 0 : -EDEADLK;
	}
	if (moved > 0 && depot_put_all(pi, x.buf, moved) != 0)
		for (size_t i = 0; i < moved; i++) /* only if the depot's holder died */
			overflow_put(pi, x.buf[i]);
	if (full)
		xfer_put(pi, &x);
	return err;
}

static const struct rsk_percpu_kind free_kind = {
	.name = "pool",
	.attempt = free_attempt,
	.outside = free_outside,
};

/* rsk_pool_free_slow_() past the plain first try. */
static __attribute__((noinline)) int free_general(struct rsk_pool *p, void *obj, enum rsk_result ret)
{
	struct pool_op o = { .obj = (intptr_t)obj };
	int r;

	if (!pool_alive(p))
		return -EINVAL; /* used after rsk_pool_destroy() */
	r = rsk_percpu_slow(p, &free_kind, &o, ret);
	return r < 0 ? r : 0;
}

/* Where no thread runs sections, past tc_alloc_quick(): the thread's
 * cache (a refill, another entry, the first use), else the home part's
 * (alloc_plain()), else the general path. */
static __attribute__((noinline)) void *alloc_no_sections(struct rsk_pool *p, enum rsk_result ret)
{
	intptr_t obj;

	if ((obj = tc_alloc(impl(p))) != 0) {
		tc_count_full();
		return rsk_pool_checked_(p, (void *)obj);
	}
	if ((obj = alloc_plain(impl(p))) != 0)
		return rsk_pool_checked_(p, (void *)obj);
	return alloc_general(p, ret);
}

static __attribute__((noinline)) int free_no_sections(struct rsk_pool *p, void *obj,
						      enum rsk_result ret)
{
	if (tc_free(impl(p), obj)) {
		tc_count_full();
		return 0;
	}
	if (free_plain(impl(p), obj))
		return 0;
	return free_general(p, obj, ret);
}

/* Where no thread runs sections: the thread's cache at once
 * (tc_alloc_quick()), else alloc_no_sections(); where threads do, the
 * general path. */
RSK_EXPORT void *rsk_pool_alloc_slow_(struct rsk_pool *p, enum rsk_result ret)
{
	if (__builtin_expect(p->fast_nr_ == 0, 0) && pool_alive(p)) {
		intptr_t obj = tc_alloc_quick(impl(p));

		if (__builtin_expect(obj == 0, 0))
			return alloc_no_sections(p, ret);
		return rsk_pool_checked_(p, (void *)obj);
	}
	return alloc_general(p, ret);
}

RSK_EXPORT int rsk_pool_free_slow_(struct rsk_pool *p, void *obj, enum rsk_result ret)
{
	if (__builtin_expect(p->fast_nr_ == 0, 0) && pool_alive(p)) {
		if (__builtin_expect(!tc_free_quick(impl(p), obj), 0))
			return free_no_sections(p, obj, ret);
		return 0;
	}
	return free_general(p, obj, ret);
}

/* ---- maintenance ---- */

RSK_EXPORT int rsk_pool_drain(struct rsk_pool *p, int cpu)
{
	struct pool_impl *pi = impl(p);
	int ret = 0, first, last;
	struct xfer x;

	if (!pool_alive(p) || cpu < -1 || cpu >= p->nr)
		return -EINVAL;
	if (rsk_lock_mine_(&pi->lock))
		return -EDEADLK;
	if (cpu < 0)
		tc_drain_own(pi);
	first = cpu < 0 ? 0 : cpu;
	last = cpu < 0 ? p->nr - 1 : cpu;
	xfer_get(pi, &x);
	for (int i = first; i <= last; i++) {
		struct rsk_pool_part *c = __atomic_load_n(&p->part[i], __ATOMIC_ACQUIRE);
		intptr_t left = c != NULL ? __atomic_load_n(&c->count, __ATOMIC_RELAXED) : 0;

		/* The objects that were there; the cache may refill meanwhile. */
		while (left > 0) {
			intptr_t count;
			size_t n;
			int err = close_part(pi, c, i);

			if (err != 0) {
				if (ret == 0)
					ret = err;
				break;
			}
			count = c->count;
			n = (size_t)count < x.cap ? (size_t)count : x.cap;
			/* The newest, from the top: the count drops in one store. */
			memcpy(x.buf, &c->slot[count - (intptr_t)n], n * sizeof(intptr_t));
			__atomic_store_n(&c->count, count - (intptr_t)n, __ATOMIC_RELAXED);
			open_part(pi, c, i);
			err = depot_put_all(pi, x.buf, n);
			if (err != 0) {
				for (size_t k = 0; k < n; k++)
					overflow_put(pi, x.buf[k]);
				if (ret == 0)
					ret = err;
				break;
			}
			left = n == 0 ? 0 : left - (intptr_t)n;
		}
	}
	xfer_put(pi, &x);
	return ret;
}

RSK_EXPORT int rsk_pool_trim(struct rsk_pool *p)
{
	struct pool_impl *pi = impl(p);
	struct slab *s, *next, *gone = NULL;
	int n = 0, err;

	if (!pool_alive(p))
		return -EINVAL;
	err = depot_lock(pi);
	if (err != 0)
		return err;
	for (s = pi->slabs; s != NULL; s = next) {
		next = s->next;
		if (s->nfree == pi->slab_objects) {
			slab_unlink(pi, s);
			s->next = gone;
			gone = s;
			n++;
		}
	}
	depot_unlock(pi);
	/* Unreachable now: checked and unmapped with the lock free. */
	for (s = gone; s != NULL; s = next) {
		next = s->next;
		slab_unmap(pi, s);
	}
	return n;
}

RSK_EXPORT int rsk_pool_stats(struct rsk_pool *p, struct rsk_pool_stats *st)
{
	struct pool_impl *pi = impl(p);
	size_t total;
	int err;

	if (!pool_alive(p) || st == NULL)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	err = depot_lock(pi);
	if (err != 0)
		return err;
	for (int i = 0; i < p->nr; i++) {
		struct rsk_pool_part *c = __atomic_load_n(&p->part[i], __ATOMIC_ACQUIRE);
		if (c != NULL) {
			size_t n = (size_t)__atomic_load_n(&c->count, __ATOMIC_RELAXED);
			st->cached += n;
			if (n > st->cached_max)
				st->cached_max = n;
		}
	}
	st->cached += tc_cached(pi, &st->cached_max);
	st->caches = __atomic_load_n(&pi->ncaches, __ATOMIC_RELAXED);
	st->depot = pi->depot_free;
	st->slabs = pi->nslabs;
	st->bytes_mapped = pi->nslabs * pi->slab_bytes;
	total = pi->nslabs * pi->slab_objects;
	depot_unlock(pi);
	st->in_use = total > st->cached + st->depot ? total - st->cached - st->depot : 0;
	st->slab_bytes = pi->slab_bytes;
	st->slab_objects = pi->slab_objects;
	st->object_stride = pi->stride;
	return 0;
}

/* ---- debug checks ---- */

static void debug_lock(struct pool_impl *pi, const void *obj)
{
	if (depot_lock(pi) != 0)
		report(pi, "debug pool used where its lock cannot be taken (a signal handler that "
			   "interrupted the pool, or a holder that died) with", obj, -1);
}

RSK_EXPORT void rsk_pool_debug_free_(struct rsk_pool *p, void *obj)
{
	struct pool_impl *pi = impl(p);
	struct slab *s;
	size_t off, i;

	if (!pool_alive(p))
		report(pi, "used after rsk_pool_destroy(): free of", obj, -1);
	debug_lock(pi, obj);
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
	depot_unlock(pi);
	/* Still the caller's until rsk_pool_free() pushes it: no lock needed. */
	memset(obj, RSK_POOL_POISON, pi->stride);
}

int rsk_pool_debug_state_(struct rsk_pool *p, const void *obj)
{
	struct pool_impl *pi = impl(p);
	struct slab *s;
	int st = -1;

	if (!pool_alive(p) || !(p->flags & RSK_POOL_DEBUG))
		return -1;
	debug_lock(pi, obj);
	for (s = pi->slabs; s != NULL; s = s->next)
		if ((const char *)obj >= (char *)s && (const char *)obj < (char *)s + pi->slab_bytes)
			break;
	if (s != NULL && (const char *)obj >= s->first) {
		size_t off = (size_t)((const char *)obj - s->first), i = off / pi->stride;

		if (off % pi->stride == 0 && i < pi->slab_objects)
			st = s->state[i] == OBJ_ALLOCATED;
	}
	depot_unlock(pi);
	return st;
}

RSK_EXPORT void rsk_pool_debug_alloc_(struct rsk_pool *p, void *obj)
{
	struct pool_impl *pi = impl(p);
	struct slab *s;
	size_t i;
	long off;

	if (!pool_alive(p))
		report(pi, "used after rsk_pool_destroy(): allocation of", obj, -1);
	s = slab_of(pi, obj);
	i = index_of(pi, s, obj);
	debug_lock(pi, obj);
	if (s->magic != SLAB_MAGIC || s->pool != pi || s->state[i] != OBJ_FREE)
		report(pi, "corrupted: handed out an allocated object", obj, -1);
	s->state[i] = OBJ_ALLOCATED;
	depot_unlock(pi);
	/* Ours now: the poison check needs no lock. */
	if ((off = poison_broken(pi, obj)) >= 0)
		report(pi, "write after free (use after free) to", obj, off);
}

#if RSK_INJECTING
/* See internal.h. */
intptr_t *rsk_pool_depot_lock_(struct rsk_pool *p)
{
	return &impl(p)->lock;
}
#endif
