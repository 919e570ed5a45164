/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU memory pools (mempool.h): ranges, slots, initial values, robust
 * checks, committed-memory accounting, NUMA binding, and the slow paths of
 * the pool-backed counter.
 *
 * A range is one mmap of nr x RSK_MEMPOOL_STRIDE bytes.  Its first `hdr`
 * bytes of every stride belong to the pool (in the first range: the gate
 * word of that copy); then come the slots, `slot` bytes apart.  The object
 * pointer handed out is the slot's address in stride 0.  Bookkeeping (two
 * bitmaps per range: in use, ever handed out) lives in malloc'ed memory,
 * never in the range, so a range holds nothing but the users' copies.
 * The first range's mapping also holds, below it, the guard strides of
 * the gate (see "Guard strides" below).
 *
 * Every state change takes the pool's mutex.  A slot being initialised
 * outside the mutex is already marked in use, so nobody else touches it.
 * The checks of the counter's readers and of for_each (is this pointer in
 * a live object?) take no lock: the sorted array of ranges is replaced,
 * never changed in place, when a range is added (the old arrays are freed
 * at destroy), and the in-use bits are read and written atomically.
 */
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
/* rsk_pcounter_slow_ is cold to the inline fast path's callers only: this
 * definition stays optimised for speed (<rseqkit/mempool.h>).  Before the
 * first include of the header (internal.h includes it). */
#define RSK_PCOUNTER_SLOW_ATTR_
#include "internal.h"
#include <rseqkit/mempool.h>

#define BITS 64
#define MPOL_PREFERRED_ 1 /* <linux/mempolicy.h>, not needed as a header */
#define MAX_NODES 1024
#define LONG_BITS ((int)(8 * sizeof(unsigned long)))
#define MAX_REPORTED_LEAKS 16

struct range {
	char *base;	 /* nr x stride bytes */
	size_t lead;	 /* bytes mapped below base: the guard strides (first range) */
	size_t nfree;	 /* free slots */
	size_t hint;	 /* a bitmap word that may have a free slot */
	uint64_t *used;	 /* slot in use */
	uint64_t *dirty; /* slot handed out at least once (copies may be non-zero) */
};

/* The sorted ranges with their count, published by one pointer: a reader
 * that took no lock sees a count and an array that agree (a count and an
 * array stored apart could be seen old and new: the search would miss the
 * last range). */
struct range_view {
	size_t n;
	struct range *r[];
};

struct retired {
	struct retired *next;
	struct range_view *view;
};

struct pool_impl {
	struct rsk_mempool pub;
	pthread_mutex_t lock;
	unsigned flags;
	size_t align, slot, hdr, per_range, words; /* words: bitmap words per range */
	size_t range_bytes, max_items, max_bytes;
	unsigned char *tmpl;
	int (*init)(void *copy, int idx, void *arg);
	void *init_arg;
	struct range_view *view; /* for lock-free readers; replaced (release) when a range is added */
	struct range **ranges;	 /* view->r and view->n, for the mutex's holders */
	size_t nranges;
	struct retired *retired; /* former views, freed at destroy */
	size_t live;
	unsigned long errors;
	int numa_nodes; /* > 1: strides are bound to cpu_node[] */
	int *cpu_node;
#if RSK_INJECTING
	int numa_fake; /* the topology and mbind are the test's (internal.h) */
#endif
};

static struct pool_impl *impl_of(struct rsk_mempool *p)
{
	return (struct pool_impl *)p;
}

/* Is p a live pool?  Its head's magic_ is RSK_PERCPU_MAGIC from create to
 * destroy, RSK_PERCPU_MAGIC_DEAD after (the framework's slow path checks
 * the same word).  Destroy and every out-of-line entry check it, so a
 * second destroy, or a use after destroy that reaches the library, is
 * -EINVAL while the freed memory is not reused (the inline fast path of
 * rsk_pcounter_add() cannot tell). */
static int pool_alive(const struct rsk_mempool *p)
{
	return p != NULL && __atomic_load_n(&p->magic_, __ATOMIC_RELAXED) == RSK_PERCPU_MAGIC;
}

__attribute__((format(printf, 2, 3))) static void report(struct pool_impl *pi, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	/* va_start is just above: clang-tidy 14's analyzer loses it here. */
	vsnprintf(msg, sizeof(msg), fmt, ap); /* NOLINT(clang-analyzer-valist.Uninitialized) */
	va_end(ap);
	/* One write per report, so that lines of several threads stay whole. */
	fprintf(stderr, "rseqkit: mempool %p: %s\n", (void *)pi, msg);
}

static int all_bytes(const void *mem, size_t n, unsigned char b)
{
	const unsigned char *c = mem;
	uint64_t w = 0x0101010101010101ull * b;
	size_t i = 0;

	/* Copies are at least 8-aligned when n >= 8 (slot 0 is at hdr >= 8). */
	if (((uintptr_t)c & 7) == 0)
		for (; i + 8 <= n; i += 8)
			if (*(const uint64_t *)(const void *)(c + i) != w)
				return 0;
	for (; i < n; i++)
		if (c[i] != b)
			return 0;
	return 1;
}

/* Bind CPU cpu's stride at addr to node (mask: a bitmap of MAX_NODES
 * bits, node's set).  Returns 0 or mbind's errno. */
static int mbind_stride(struct pool_impl *pi, int cpu, void *addr, int node,
			const unsigned long *mask)
{
#if RSK_INJECTING
	if (pi->numa_fake)
		return rsk_inject_numa_mbind(cpu, node);
#else
	(void)pi, (void)cpu, (void)node;
#endif
	/* maxnode counts one past the last bit the kernel reads. */
	if (syscall(SYS_mbind, addr, RSK_MEMPOOL_STRIDE, MPOL_PREFERRED_, mask,
		    (unsigned long)MAX_NODES + 1, 0ul) != 0)
		return errno;
	return 0;
}

/*
 * Bind each CPU's stride of a fresh range to that CPU's node.  A failure
 * is the CPU's, not the pool's: that CPU's copies are placed by first
 * touch from then on (cpu_node[] -1: it would fail in every range), it is
 * reported once on stderr, and the other CPUs stay bound in this range and
 * the next.  Only ENOSYS (a kernel without NUMA) and EPERM (a seccomp
 * filter) end the binding of the whole pool, which numa_nodes 0 in the
 * stats then shows.  Called with the pool's mutex held.
 */
static void bind_range(struct pool_impl *pi, char *base)
{
	unsigned long mask[MAX_NODES / LONG_BITS];

	for (int i = 0; i < pi->pub.nr && pi->numa_nodes > 1; i++) {
		int node = pi->cpu_node[i], err;

		if (node < 0 || node >= MAX_NODES)
			continue;
		memset(mask, 0, sizeof(mask));
		mask[node / LONG_BITS] |= 1ul << (node % LONG_BITS);
		err = mbind_stride(pi, i, base + (size_t)i * RSK_MEMPOOL_STRIDE, node, mask);
		if (err == 0)
			continue;
		if (err == ENOSYS || err == EPERM) {
			pi->numa_nodes = 0;
			return;
		}
		pi->cpu_node[i] = -1;
		report(pi, "mbind(2) of the copies of CPU %d to node %d failed (%s): first touch places them",
		       i, node, strerror(err));
	}
}

static void numa_setup(struct pool_impl *pi)
{
	unsigned long has_memory[MAX_NODES / LONG_BITS];
	int nodes;

	pi->numa_nodes = 0;
	if ((pi->flags & RSK_MEMPOOL_NO_NUMA) || pi->pub.mode != RSK_INDEX_CPU)
		return;
	nodes = rsk_count_list_("/sys/devices/system/node/has_memory", has_memory, MAX_NODES);
#if RSK_INJECTING
	pi->numa_fake = rsk_inject_numa_nodes() > 0;
	if (pi->numa_fake) {
		nodes = rsk_inject_numa_nodes();
		memset(has_memory, 0, sizeof(has_memory));
		for (int k = 0; k < nodes && k < MAX_NODES; k++)
			has_memory[k / LONG_BITS] |= 1ul << (k % LONG_BITS);
	}
#endif
	if (nodes < 2)
		return;
	pi->cpu_node = malloc((size_t)pi->pub.nr * sizeof(int));
	if (pi->cpu_node == NULL)
		return;
	for (int i = 0; i < pi->pub.nr; i++) {
		int node = rsk_node_of_cpu_(i);

#if RSK_INJECTING
		if (pi->numa_fake)
			node = rsk_inject_numa_cpu_node(i);
#endif
		/* A CPU on a node without memory (MPOL_PREFERRED would be
		 * refused): not bound, the first touch takes the nearest node
		 * with memory. */
		if (node < 0 || node >= MAX_NODES ||
		    !(has_memory[node / LONG_BITS] & (1ul << (node % LONG_BITS))))
			node = -1;
		pi->cpu_node[i] = node;
	}
	pi->numa_nodes = nodes;
}

/* --- guard strides --------------------------------------------------------- */

/*
 * Guard strides.  Where the arch has the stride section
 * (RSK_ARCH_HAS_STRIDE_OPS: x86-64), rsk_pcounter_add() reads the index
 * inside the section as a signed 32-bit value and tests the gate word at
 * p->gate + (index << RSK_MEMPOOL_SHIFT) with no bound or sign test, as
 * the structures' part sections do (<rseqkit/percpu.h>, "Guard parts").
 * A registered thread's index is in [0, nr); the only other values an
 * area's cpu_id or mm_cid holds are -1 (not registered) and -2 (glibc's
 * "registration failed"), which select the two strides below the first
 * range.  So the first range is mapped with GUARD_STRIDES more strides
 * below it, whose word at the gate's offset (0) is written nonzero at
 * creation - a gate that is never open - and which are then made
 * read-only, so nothing can reopen them: such a section leaves through
 * `stopped`, and the slow path finds the thread has no index.  Nothing
 * else in the guard strides is ever touched, so they commit two pages
 * (the two written words' pages), and neither those pages nor the guard's
 * address space are counted in rsk_mempool_stats() (nor in max_bytes).
 */
#ifdef RSK_ARCH_HAS_STRIDE_OPS
#define GUARD_STRIDES 2
#else
#define GUARD_STRIDES 0 /* the generic section bound-checks its index */
#endif
#define GUARD_BYTES ((size_t)GUARD_STRIDES * RSK_MEMPOOL_STRIDE)
/* What the guards' gate words hold: all ones, as the structures' guard
 * part (src/percpu/percpu.c); any value but 0 reads as a closed gate. */
#define GUARD_GATE ((intptr_t)-1)

/* Close the guard gates in the lead bytes at m (no huge pages there yet:
 * the caller has madvised them) and make them read-only.  0 or -1. */
static int guard_init(char *m, size_t lead)
{
	if (lead == 0)
		return 0;
	/* The gate is word 0 of each stride of the first range. */
	for (size_t off = 0; off < lead; off += RSK_MEMPOOL_STRIDE)
		*(intptr_t *)(void *)(m + off) = GUARD_GATE;
	return mprotect(m, lead, PROT_READ);
}

/* --- ranges and slots ------------------------------------------------------ */

/* A new range, with `lead` bytes of guard strides mapped below it (the
 * first range: GUARD_BYTES; the others: 0). */
static struct range *range_new(struct pool_impl *pi, size_t lead)
{
	struct range *r;
	struct range_view *nv;
	struct retired *old;
	char *m;
	size_t i;

	if (pi->max_bytes && (pi->nranges + 1) * pi->range_bytes > pi->max_bytes)
		return NULL;
	nv = malloc(sizeof(*nv) + (pi->nranges + 1) * sizeof(struct range *));
	old = malloc(sizeof(*old));
	r = calloc(1, sizeof(*r));
	if (nv == NULL || old == NULL || r == NULL) {
		free(nv);
		free(old);
		free(r);
		return NULL;
	}
	r->used = calloc(pi->words, sizeof(uint64_t));
	r->dirty = calloc(pi->words, sizeof(uint64_t));
	m = mmap(NULL, lead + pi->range_bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	/* A huge page would commit 2 MiB of 32 CPUs' copies at the first
	 * write (and 2 MiB for a guard's word): before any write. */
	if (m != MAP_FAILED)
		madvise(m, lead + pi->range_bytes, MADV_NOHUGEPAGE);
	if (r->used == NULL || r->dirty == NULL || m == MAP_FAILED || guard_init(m, lead) != 0) {
		if (m != MAP_FAILED)
			munmap(m, lead + pi->range_bytes);
		free(r->used);
		free(r->dirty);
		free(r);
		free(nv);
		free(old);
		return NULL;
	}
	r->base = m + lead;
	r->lead = lead;
	bind_range(pi, r->base);
	r->nfree = pi->per_range;
	/* Bits beyond per_range in the last word: permanently in use. */
	if (pi->per_range % BITS)
		r->used[pi->words - 1] = ~0ull << (pi->per_range % BITS);
	/* A new sorted view, published whole. */
	for (i = 0; i < pi->nranges && pi->ranges[i]->base < r->base; i++)
		nv->r[i] = pi->ranges[i];
	nv->r[i] = r;
	for (; i < pi->nranges; i++)
		nv->r[i + 1] = pi->ranges[i];
	nv->n = pi->nranges + 1;
	old->view = pi->view;
	old->next = pi->retired;
	pi->retired = old;
	pi->ranges = nv->r;
	pi->nranges = nv->n;
	__atomic_store_n(&pi->view, nv, __ATOMIC_RELEASE);
	return r;
}

static void range_free(struct pool_impl *pi, struct range *r)
{
	munmap(r->base - r->lead, r->lead + pi->range_bytes);
	free(r->used);
	free(r->dirty);
	free(r);
}

/* The range whose stride 0 contains ptr, or NULL.  Needs no lock (see
 * the top of the file). */
static struct range *range_of(struct pool_impl *pi, const void *ptr, int *in_range)
{
	const struct range_view *v = __atomic_load_n(&pi->view, __ATOMIC_ACQUIRE);
	size_t lo = 0, hi = v != NULL ? v->n : 0;
	struct range *const *rs = v != NULL ? v->r : NULL;
	const char *c = ptr;

	*in_range = 0;
	while (lo < hi) { /* last range with base <= c */
		size_t mid = (lo + hi) / 2;
		if (rs[mid]->base <= c)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	if (c >= rs[lo - 1]->base + pi->range_bytes)
		return NULL;
	*in_range = 1;
	if (c >= rs[lo - 1]->base + RSK_MEMPOOL_STRIDE)
		return NULL; /* a copy other than 0 */
	return rs[lo - 1];
}

static char *slot_ptr(struct pool_impl *pi, struct range *r, size_t s)
{
	return r->base + pi->hdr + s * pi->slot;
}

/* What ptr must be: an object's start (free), any byte of one (for_each),
 * or the start of a word that lies wholly inside one (the counter).  The
 * last two values are the bytes from ptr on that must be in the object. */
enum where { SLOT_START = 0, INSIDE_OBJECT = 1, WORD_INSIDE_OBJECT = sizeof(intptr_t) };

/*
 * Find the live slot of ptr.  Returns 0 with *rp, *sp set, -EINVAL (not
 * an object of the pool, with *what saying why), -EALREADY (a free slot).
 * Called locked, or by readers without the lock (a stale answer then).
 */
static int lookup(struct pool_impl *pi, const void *ptr, enum where w, struct range **rp, size_t *sp,
		  const char **what)
{
	int in_range;
	struct range *r = range_of(pi, ptr, &in_range);
	size_t off, s;

	*what = "free of a pointer not from this pool:";
	if (r == NULL) {
		if (in_range)
			*what = "free of a copy other than copy 0:";
		return -EINVAL;
	}
	*what = "free of a pointer that is not an object:";
	if ((const char *)ptr < r->base + pi->hdr)
		return -EINVAL;
	off = (size_t)((const char *)ptr - (r->base + pi->hdr));
	s = off / pi->slot;
	if (s >= pi->per_range)
		return -EINVAL;
	if (w == SLOT_START ? off % pi->slot != 0 : off % pi->slot + (size_t)w > pi->pub.size)
		return -EINVAL;
	*rp = r;
	*sp = s;
	if (!(__atomic_load_n(&r->used[s / BITS], __ATOMIC_ACQUIRE) & (1ull << (s % BITS)))) {
		*what = "double free of";
		return -EALREADY;
	}
	return 0;
}

/* Take a free slot.  Returns its pointer (and whether it was ever handed
 * out), or NULL: limit reached or no memory.  Called locked. */
static char *take_slot(struct pool_impl *pi, int *was_dirty)
{
	struct range *r = NULL;

	if (pi->max_items && pi->live >= pi->max_items)
		return NULL;
	for (size_t i = 0; i < pi->nranges; i++)
		if (pi->ranges[i]->nfree) {
			r = pi->ranges[i];
			break;
		}
	if (r == NULL && (r = range_new(pi, 0)) == NULL)
		return NULL;
	for (size_t k = 0; k < pi->words; k++) {
		size_t w = (r->hint + k) % pi->words;
		uint64_t freebits = ~r->used[w];

		if (freebits) {
			unsigned b = (unsigned)__builtin_ctzll(freebits);
			size_t s = w * BITS + b;

			__atomic_fetch_or(&r->used[w], 1ull << b, __ATOMIC_RELEASE);
			*was_dirty = !!(r->dirty[w] & (1ull << b));
			r->dirty[w] |= 1ull << b;
			r->hint = w;
			r->nfree--;
			pi->live++;
			return slot_ptr(pi, r, s);
		}
	}
	return NULL; /* not reached: nfree said there was one */
}

static void give_back(struct pool_impl *pi, struct range *r, size_t s)
{
	__atomic_fetch_and(&r->used[s / BITS], ~(1ull << (s % BITS)), __ATOMIC_RELEASE);
	r->nfree++;
	pi->live--;
}

/* --- create, destroy ---------------------------------------------------- */

RSK_EXPORT int rsk_mempool_create(struct rsk_mempool **out, const struct rsk_mempool_config *cfg)
{
	struct pool_impl *pi;
	size_t align, hdr, slot;
	long page = sysconf(_SC_PAGESIZE);

	if (out == NULL || cfg == NULL)
		return -EINVAL;
	if (cfg->mode != RSK_INDEX_CPU && cfg->mode != RSK_INDEX_CID)
		return -EINVAL;
	if (cfg->flags & ~(RSK_MEMPOOL_ROBUST | RSK_MEMPOOL_NO_NUMA))
		return -EINVAL;
	/* 0 means 8, as documented, on 32-bit targets too (a uint64_t or a
	 * double per CPU must not straddle cache lines, and i386 malloc gives 8). */
	align = cfg->align ? cfg->align : 8;
	if ((align & (align - 1)) || align > RSK_MEMPOOL_MAX_ALIGN)
		return -EINVAL;
	if (page > 0 && (size_t)page > RSK_MEMPOOL_STRIDE)
		return -EINVAL; /* a page would hold several CPUs' copies */
	hdr = align > sizeof(intptr_t) ? align : sizeof(intptr_t);
	if (cfg->size == 0 || cfg->size > RSK_MEMPOOL_STRIDE - hdr)
		return -EINVAL;
	slot = (cfg->size + align - 1) & ~(align - 1);
	pi = calloc(1, sizeof(*pi));
	if (pi == NULL)
		return -ENOMEM;
	pi->pub.mode = cfg->mode;
	if (cfg->mode == RSK_INDEX_CID && !rsk_mm_cid_available())
		pi->pub.mode = RSK_INDEX_CPU;
	pi->pub.nr = rsk_possible_cpus();
	/* index_offset_ and fast_nr_, as every structure's head. */
	rsk_init_once();
	rsk_percpu_init_head((struct rsk_percpu_head *)(void *)&pi->pub);
	pi->pub.size = cfg->size;
	pi->pub.robust_ = (cfg->flags & RSK_MEMPOOL_ROBUST) != 0;
	pi->flags = cfg->flags;
	pi->align = align;
	pi->hdr = hdr;
	pi->slot = slot;
	pi->per_range = (RSK_MEMPOOL_STRIDE - hdr) / slot;
	pi->words = (pi->per_range + BITS - 1) / BITS;
	pi->range_bytes = (size_t)pi->pub.nr * RSK_MEMPOOL_STRIDE;
	pi->max_items = cfg->max_items;
	pi->max_bytes = cfg->max_bytes;
	pi->init = cfg->init;
	pi->init_arg = cfg->init_arg;
	if (pi->max_bytes && pi->max_bytes < pi->range_bytes) {
		free(pi);
		return -EINVAL;
	}
	if (cfg->init_template != NULL) {
		pi->tmpl = malloc(cfg->size);
		if (pi->tmpl == NULL) {
			free(pi);
			return -ENOMEM;
		}
		memcpy(pi->tmpl, cfg->init_template, cfg->size);
	}
	pthread_mutex_init(&pi->lock, NULL);
	pi->pub.magic_ = RSK_PERCPU_MAGIC;
	numa_setup(pi);
	/* The first range now: its strides' first words are the pool's gates,
	 * valid as long as the pool is, and the guard strides below it. */
	if (range_new(pi, GUARD_BYTES) == NULL) {
		rsk_mempool_destroy(&pi->pub);
		return -ENOMEM;
	}
	pi->pub.gate = (intptr_t *)(void *)pi->ranges[0]->base;
	*out = &pi->pub;
	return 0;
}

RSK_EXPORT int rsk_mempool_destroy(struct rsk_mempool *p)
{
	struct pool_impl *pi;
	size_t leaks = 0;

	if (!pool_alive(p))
		return -EINVAL; /* NULL, destroyed already, or not a pool */
	pi = impl_of(p);
	__atomic_store_n(&p->magic_, RSK_PERCPU_MAGIC_DEAD, __ATOMIC_RELAXED);
	if ((pi->flags & RSK_MEMPOOL_ROBUST) && pi->live) {
		for (size_t i = 0; i < pi->nranges; i++) {
			struct range *r = pi->ranges[i];
			for (size_t s = 0; s < pi->per_range; s++)
				if ((r->used[s / BITS] >> (s % BITS)) & 1)
					if (leaks++ < MAX_REPORTED_LEAKS)
						report(pi, "object still live at destroy: %p",
						       (void *)slot_ptr(pi, r, s));
		}
		report(pi, "destroyed with %zu object(s) still live", leaks);
	}
	for (size_t i = 0; i < pi->nranges; i++)
		range_free(pi, pi->ranges[i]);
	free(pi->view);
	while (pi->retired != NULL) {
		struct retired *next = pi->retired->next;
		free(pi->retired->view);
		free(pi->retired);
		pi->retired = next;
	}
	free(pi->tmpl);
	free(pi->cpu_node);
	pthread_mutex_destroy(&pi->lock);
	free(pi);
	return leaks ? -EBUSY : 0;
}

/* --- alloc, free ---------------------------------------------------------- */

static void *alloc_common(struct rsk_mempool *p, int zero)
{
	struct pool_impl *pi;
	int dirty = 0, err = 0;
	char *obj;

	if (!pool_alive(p)) {
		errno = EINVAL;
		return NULL;
	}
	pi = impl_of(p);
	pthread_mutex_lock(&pi->lock);
	obj = take_slot(pi, &dirty);
	pthread_mutex_unlock(&pi->lock);
	if (obj == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	/* The slot is ours: initialise its copies without the lock.  A slot
	 * never handed out is zero in every copy already. */
	for (int i = 0; i < p->nr && (dirty || (!zero && (pi->tmpl || pi->init))); i++) {
		char *c = rsk_percpu_ptr(obj, i);

		if (dirty && (pi->flags & RSK_MEMPOOL_ROBUST) && !all_bytes(c, p->size, 0) &&
		    !all_bytes(c, p->size, RSK_MEMPOOL_POISON)) {
			/* The copy was poisoned, or zero if it was zero at free. */
			unsigned char fill = (unsigned char)c[0] == RSK_MEMPOOL_POISON ? RSK_MEMPOOL_POISON : 0;
			size_t off = 0;
			while (off < p->size && (unsigned char)c[off] == fill)
				off++;
			report(pi, "write after free to copy %d of %p (byte %zu)", i, (void *)obj, off);
			__atomic_fetch_add(&pi->errors, 1, __ATOMIC_RELAXED);
		}
		if (!zero && pi->tmpl != NULL)
			memcpy(c, pi->tmpl, p->size);
		else if (dirty && !all_bytes(c, p->size, 0))
			memset(c, 0, p->size); /* untouched copies stay untouched */
		if (!zero && pi->init != NULL && (err = pi->init(c, i, pi->init_arg)) != 0)
			break;
	}
	if (err != 0) {
		rsk_mempool_free(p, obj);
		errno = err > 0 ? err : EINVAL;
		return NULL;
	}
	return obj;
}

RSK_EXPORT void *rsk_mempool_alloc(struct rsk_mempool *p)
{
	return alloc_common(p, 0);
}

RSK_EXPORT void *rsk_mempool_zalloc(struct rsk_mempool *p)
{
	return alloc_common(p, 1);
}

RSK_EXPORT int rsk_mempool_free(struct rsk_mempool *p, void *obj)
{
	struct pool_impl *pi;
	struct range *r = NULL;
	const char *what;
	size_t s = 0;
	int err;

	if (!pool_alive(p) || obj == NULL)
		return -EINVAL;
	pi = impl_of(p);
	pthread_mutex_lock(&pi->lock);
	err = lookup(pi, obj, SLOT_START, &r, &s, &what);
	if (err != 0) {
		__atomic_fetch_add(&pi->errors, 1, __ATOMIC_RELAXED);
		if (pi->flags & RSK_MEMPOOL_ROBUST)
			report(pi, "%s %p", what, obj);
	} else {
		if (pi->flags & RSK_MEMPOOL_ROBUST)
			for (int i = 0; i < p->nr; i++) {
				char *c = rsk_percpu_ptr((char *)obj, i);
				if (!all_bytes(c, p->size, 0))
					memset(c, RSK_MEMPOOL_POISON, p->size);
			}
		give_back(pi, r, s);
	}
	pthread_mutex_unlock(&pi->lock);
	return err;
}

/* --- iteration and stats ------------------------------------------------ */

/* Is ptr inside a live object?  No lock: a racing free makes the answer
 * stale, as it would be a moment later anyway. */
static int check_live(struct pool_impl *pi, const void *ptr, enum where w)
{
	struct range *r;
	const char *what;
	size_t s;

	return lookup(pi, ptr, w, &r, &s, &what) ? -EINVAL : 0;
}

RSK_EXPORT int rsk_mempool_for_each(struct rsk_mempool *p, const void *ptr,
				    int (*fn)(void *copy, int idx, void *arg), void *arg)
{
	if (!pool_alive(p) || ptr == NULL || fn == NULL || check_live(impl_of(p), ptr, INSIDE_OBJECT) != 0)
		return -EINVAL;
	for (int i = 0; i < p->nr; i++) {
		int ret = fn(rsk_percpu_ptr((char *)ptr, i), i, arg);
		if (ret != 0)
			return ret;
	}
	return 0;
}

/* Bytes of [base, base + len) with memory of their own: written pages
 * (mapped exclusively, or shared after fork() but not zero) and swapped
 * ones; not the zero page.  From /proc/self/pagemap where readable, else
 * mincore() (which also counts zero-page mappings). */
static size_t committed(char *base, size_t len, int pm)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = len / page, total = 0;
	uint64_t ent[512];
	unsigned char vec[512];

	for (size_t i = 0; i < n; i += 512) {
		size_t k = n - i < 512 ? n - i : 512;
		char *a = base + i * page;

		if (pm >= 0 && pread(pm, ent, k * 8, (off_t)((uintptr_t)a / page * 8)) == (ssize_t)(k * 8)) {
			for (size_t j = 0; j < k; j++) {
				int present = (int)(ent[j] >> 63 & 1), swapped = (int)(ent[j] >> 62 & 1);
				int exclusive = (int)(ent[j] >> 56 & 1);
				if (swapped || (present && (exclusive || !all_bytes(a + j * page, page, 0))))
					total += page;
			}
		} else if (mincore(a, k * page, vec) == 0) {
			for (size_t j = 0; j < k; j++)
				total += (vec[j] & 1) ? page : 0;
		}
	}
	return total;
}

RSK_EXPORT int rsk_mempool_stats(struct rsk_mempool *p, struct rsk_mempool_stats *st)
{
	struct pool_impl *pi;
	int pm;

	if (!pool_alive(p) || st == NULL)
		return -EINVAL;
	pi = impl_of(p);
	memset(st, 0, sizeof(*st));
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	pthread_mutex_lock(&pi->lock);
	st->live = pi->live;
	st->ranges = pi->nranges;
	st->capacity = pi->nranges * pi->per_range;
	st->reserved_bytes = pi->nranges * pi->range_bytes;
	for (size_t i = 0; i < pi->nranges; i++)
		st->committed_bytes += committed(pi->ranges[i]->base, pi->range_bytes, pm);
	st->item_stride = pi->slot;
	st->items_per_range = pi->per_range;
	st->stride = RSK_MEMPOOL_STRIDE;
	st->copies = p->nr;
	st->numa_nodes = pi->numa_nodes > 1 ? pi->numa_nodes : 0;
	st->errors = __atomic_load_n(&pi->errors, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&pi->lock);
	if (pm >= 0)
		close(pm);
	return 0;
}

/* --- the pool-backed counter --------------------------------------------- */

/* Add v to copy idx of *ctr under the pool's gate of idx (or, with old,
 * exchange it for `replace`).  Returns idx or the gate's error. */
static int update_locked(struct rsk_mempool *p, intptr_t *ctr, int idx, intptr_t v, intptr_t replace,
			 intptr_t *old)
{
	intptr_t *gate = rsk_mempool_gate(p, idx), *c = rsk_percpu_ptr(ctr, idx), cur;
	int err;

	if (rsk_fast.area_offset == 0) {
		/* No thread of the process runs sections: nothing writes a
		 * copy but these, so atomics do the gate's work - and a signal
		 * handler has nothing to wait for, nor to fail on. */
		if (old != NULL)
			*old = __atomic_exchange_n(c, replace, __ATOMIC_RELAXED);
		else
			__atomic_add_fetch(c, v, __ATOMIC_RELAXED);
		return idx;
	}
	err = rsk_gate_close(gate, p->mode, idx);
	if (err != 0)
		return err;
	cur = __atomic_load_n(c, __ATOMIC_RELAXED);
	RSK_INJECT_C(8); /* the window that only the gate protects */
	if (old != NULL)
		*old = cur;
	else
		replace = (intptr_t)((uintptr_t)cur + (uintptr_t)v);
	__atomic_store_n(c, replace, __ATOMIC_RELAXED);
	rsk_gate_open(gate);
	return idx;
}

/*
 * The add's slow path where threads run sections, on the framework
 * (rsk_percpu_slow()): the retries of the attempt, the registration of a
 * new thread, then the add under a copy's gate (the current one, else
 * the next free at once).  Its parts are the copies of *ctr, its gates
 * the pool's.
 */
struct pcounter_op {
	intptr_t *ctr;
	intptr_t v;
};

static enum rsk_result pcounter_attempt(void *s, void *arg, int *idx)
{
	struct rsk_mempool *p = s;
	struct pcounter_op *o = arg;

	if (p->mode == RSK_INDEX_CPU)
		return (enum rsk_result)rsk_pcounter_try_(p, o->ctr, o->v, RSK_INDEX_CPU, idx);
	return (enum rsk_result)rsk_pcounter_try_(p, o->ctr, o->v, RSK_INDEX_CID, idx);
}

/* Copy idx under its closed gate: the one place that adds without a
 * critical section. */
static enum rsk_result pcounter_locked(void *s, int idx, void *arg)
{
	struct pcounter_op *o = arg;
	intptr_t *c = rsk_percpu_ptr(o->ctr, idx), cur;

	(void)s;
	cur = __atomic_load_n(c, __ATOMIC_RELAXED);
	RSK_INJECT_C(8); /* the window that only the gate protects */
	__atomic_store_n(c, (intptr_t)((uintptr_t)cur + (uintptr_t)o->v), __ATOMIC_RELAXED);
	return RSK_OK;
}

static intptr_t *pcounter_gate(void *s, int idx)
{
	return rsk_mempool_gate(s, idx);
}

static const struct rsk_percpu_kind pcounter_kind = {
	.name = "mempool",
	.attempt = pcounter_attempt,
	.locked = pcounter_locked,
	.gate = pcounter_gate,
};

static __attribute__((noinline)) int pcounter_slow_gated(struct rsk_mempool *p, intptr_t *ctr,
							intptr_t v, enum rsk_result ret)
{
	struct pcounter_op o = { .ctr = ctr, .v = v };
	int r;

	if (!pool_alive(p) || ctr == NULL)
		return -EINVAL;
	r = rsk_percpu_slow(p, &pcounter_kind, &o, ret);
	return r < 0 ? r : 0; /* r: the copy's index */
}

RSK_EXPORT int rsk_pcounter_slow_(struct rsk_mempool *p, intptr_t *ctr, intptr_t v,
				 enum rsk_result ret)
{
	/* No thread of the process runs sections: an atomic add on the
	 * current CPU's copy, the CPU looked up once.  This is every add of
	 * such a process: no frame beyond this one, sched_getcpu() at once
	 * (rsk_percpu_spill_index_() where it is not that simple), as the
	 * counter's rsk_counter_slow_(). */
	if (rsk_fast.area_offset == 0 && pool_alive(p) && ctr != NULL) {
		int idx = -1;

		if (__builtin_expect(!rsk_process.check_threads, 1))
			idx = sched_getcpu();
		if (__builtin_expect((unsigned)idx >= (unsigned)p->nr, 0))
			idx = rsk_percpu_spill_index_(p->mode, p->nr);
		rsk_spill_add_(rsk_percpu_ptr(ctr, idx), v);
		rsk_count_slow_path_(idx);
		return 0;
	}
	return pcounter_slow_gated(p, ctr, v, ret);
}

/* ctr is an aligned word, all of whose bytes are inside one live object:
 * a word that starts in an object and runs past its end would read (and
 * exchange would write) the next object's bytes. */
static int counter_ok(struct rsk_mempool *p, const intptr_t *ctr)
{
	return pool_alive(p) && ctr != NULL && ((uintptr_t)ctr % sizeof(intptr_t)) == 0 &&
	       check_live(impl_of(p), ctr, WORD_INSIDE_OBJECT) == 0;
}

/* A robust pool's add: the pointer checked first (lock-free, as the
 * add), then one section, else the slow path. */
RSK_EXPORT int rsk_pcounter_robust_add_(struct rsk_mempool *p, intptr_t *ctr, intptr_t v)
{
	enum rsk_result ret = RSK_NO_INDEX;
	int idx;

	if (!counter_ok(p, ctr)) {
		if (pool_alive(p))
			rsk_report_("mempool ", p,
				    ": rsk_pcounter_add of a pointer that is not a word of a live "
				    "object of this pool: -EINVAL");
		return -EINVAL;
	}
	idx = rsk_index(p->mode);
	if ((unsigned)idx < (unsigned)p->nr) {
		RSK_INJECT_C(7);
		ret = rsk_gated_add(p->mode, idx, rsk_mempool_gate(p, idx), rsk_percpu_ptr(ctr, idx), v);
		if (ret == RSK_OK)
			return 0;
	}
	return rsk_pcounter_slow_(p, ctr, v, ret);
}

RSK_EXPORT int rsk_pcounter_read(struct rsk_mempool *p, const intptr_t *ctr, int idx, intptr_t *value)
{
	if (!counter_ok(p, ctr) || value == NULL || (unsigned)idx >= (unsigned)p->nr)
		return -EINVAL;
	*value = __atomic_load_n(rsk_percpu_ptr(ctr, idx), __ATOMIC_RELAXED);
	return 0;
}

RSK_EXPORT int rsk_pcounter_sum(struct rsk_mempool *p, const intptr_t *ctr, intptr_t *sum)
{
	uintptr_t s = 0;

	if (!counter_ok(p, ctr) || sum == NULL)
		return -EINVAL;
	for (int i = 0; i < p->nr; i++)
		s += (uintptr_t)__atomic_load_n(rsk_percpu_ptr(ctr, i), __ATOMIC_RELAXED);
	*sum = (intptr_t)s;
	return 0;
}

RSK_EXPORT int rsk_pcounter_exchange(struct rsk_mempool *p, intptr_t *ctr, int idx, intptr_t value,
				     intptr_t *old)
{
	int ret;

	if (!counter_ok(p, ctr) || old == NULL || (unsigned)idx >= (unsigned)p->nr)
		return -EINVAL;
	ret = update_locked(p, ctr, idx, 0, value, old);
	return ret < 0 ? ret : 0;
}
