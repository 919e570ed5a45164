/* SPDX-License-Identifier: MIT */
/*
 * rseqkit's malloc (<rseqkit/malloc.h>, rseqkit-malloc(7)).
 *
 * Small objects (up to SMALL_MAX) are rounded up to one of NCLASS size
 * classes, and each class is an rseqkit pool (<rseqkit/pool.h>): a cache
 * per CPU (or mm_cid), in one region per CPU for all classes, popped and
 * pushed in one gated rseqkit section each, refilled from and flushed to
 * the pool's depot (a central free list per
 * class, under a fork-aware lock) in batches of half a cache, and a depot
 * of slabs (spans of pages aligned to their size) mapped with mmap.  The
 * pools' slow paths carry rseqkit's progress protocol: threads and
 * processes without rseq, single-stepped threads and signal handlers get
 * the same results through the caches' gates.
 *
 * free() and malloc_usable_size() find an object's class without a header:
 * a page map (a two-level radix tree over 4 KiB pages, both levels mapped,
 * the second on demand) gives every page of every slab its class, written
 * by the pools' slab hook when a slab is mapped and cleared before it is
 * unmapped.  Large blocks (above SMALL_MAX, or aligned beyond 4 KiB) are
 * mapped one by one; their first page's entry holds their page count.
 *
 * Hot path: malloc is a table load (the class's key, up to 1 KiB) and one
 * inline section that reads the CPU index, checks the cache's gate,
 * compares its count with its capacity and pops ("the per-CPU caches"
 * below); free is the class map's load and the same section's push.  No
 * atomic instruction, no call unless a cache is empty or full.
 *
 * Nothing here calls malloc: metadata is mapped.  Calls made while the
 * first call is initialising (rseqkit's own initialisation may reach
 * malloc through pthread_atfork() or atexit in glibc) are served, on that
 * thread, from a static bootstrap area whose blocks are never reused.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "../internal.h"
#include "../env.h"
#include <rseqkit/malloc.h>
#include <rseqkit/pool.h>

#define LIKELY(x)   __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define NOINLINE __attribute__((noinline))
#define COLD __attribute__((noinline, cold))

/* ---- size classes ----
 *
 * 16 to 128 bytes in steps of 16 (8 classes), then four classes per power
 * of two: 2^k * 5/4, 6/4, 7/4, 8/4 for k = 7 .. 17, up to 256 KiB (44).
 * Internal waste: at most 15 bytes up to 128, and below 20% of the block
 * above (a request just past 2^k gets 2^k * 5/4).
 */
#define NCLASS	  52
#define SMALL_MAX ((size_t)256 << 10)
#define PAGE	  ((size_t)4096) /* the page map's granule, whatever the system page */
#define PAGE_SHIFT 12

/* KOFF(key) (the per-CPU caches below) of every size up to 1024 bytes,
 * whose key is class + 1: malloc's fast path is one load from here. */
#define KOFF_MAX 1024
#define K(key)	 ((key) << 10) /* PART_SHIFT */
static const uint16_t sc_koff[KOFF_MAX + 1] = {
	[0 ... 16] = K(1),
	[17 ... 32] = K(2),
	[33 ... 48] = K(3),
	[49 ... 64] = K(4),
	[65 ... 80] = K(5),
	[81 ... 96] = K(6),
	[97 ... 112] = K(7),
	[113 ... 128] = K(8),
	[129 ... 160] = K(9),
	[161 ... 192] = K(10),
	[193 ... 224] = K(11),
	[225 ... 256] = K(12),
	[257 ... 320] = K(13),
	[321 ... 384] = K(14),
	[385 ... 448] = K(15),
	[449 ... 512] = K(16),
	[513 ... 640] = K(17),
	[641 ... 768] = K(18),
	[769 ... 896] = K(19),
	[897 ... 1024] = K(20),
};
#undef K

ALWAYS_INLINE unsigned size_class(size_t n)
{
	if (n <= KOFF_MAX)
		return (unsigned)(sc_koff[n] >> 10) - 1;
	unsigned k = (unsigned)(63 - __builtin_clzll((unsigned long long)(n - 1)));
	return 8 + (k - 7) * 4 + (unsigned)((n - 1) >> (k - 2)) - 4;
}

static size_t class_size(unsigned c)
{
	if (c < 8)
		return (size_t)(c + 1) * 16;
	unsigned k = 7 + (c - 8) / 4, i = (c - 8) % 4;
	return (size_t)(i + 5) << (k - 2);
}

/* ---- the page map ----
 *
 * Entry of a page: 0 unknown; small: (class << 2) | 1 on every page of a
 * slab; large: (pages << 2) | 2 on the block's first page only.
 */
#define PM_LEAF_BITS 18
#define PM_LEAF_N    ((size_t)1 << PM_LEAF_BITS)
#if UINTPTR_MAX > 0xffffffffu
#define PM_ROOT_N ((size_t)1 << (48 - PAGE_SHIFT - PM_LEAF_BITS))
#else
#define PM_ROOT_N ((size_t)1 << (32 - PAGE_SHIFT - PM_LEAF_BITS))
#endif
#define E_SMALL 1u
#define E_LARGE 2u

static uintptr_t *pm_root[PM_ROOT_N];
static size_t pm_leaves; /* atomic: leaves mapped (statistics) */

ALWAYS_INLINE uintptr_t pm_get(const void *p)
{
	uintptr_t a = (uintptr_t)p >> PAGE_SHIFT;
	uintptr_t r = a >> PM_LEAF_BITS;
	const uintptr_t *leaf;

	if (UNLIKELY(r >= PM_ROOT_N))
		return 0;
	leaf = __atomic_load_n(&pm_root[r], __ATOMIC_ACQUIRE);
	if (UNLIKELY(leaf == NULL))
		return 0;
	return __atomic_load_n(&leaf[a & (PM_LEAF_N - 1)], __ATOMIC_RELAXED);
}

/* The leaf of page number a, mapped on first use; NULL: out of memory. */
static uintptr_t *pm_leaf(uintptr_t a)
{
	uintptr_t r = a >> PM_LEAF_BITS;
	uintptr_t *leaf, *none = NULL;
	void *m;

	if (r >= PM_ROOT_N)
		return NULL;
	leaf = __atomic_load_n(&pm_root[r], __ATOMIC_ACQUIRE);
	if (leaf != NULL)
		return leaf;
	m = mmap(NULL, PM_LEAF_N * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (__atomic_compare_exchange_n(&pm_root[r], &none, (uintptr_t *)m, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&pm_leaves, 1, __ATOMIC_RELAXED);
		return m;
	}
	munmap(m, PM_LEAF_N * sizeof(uintptr_t));
	return none;
}

/* Set pages [base, base + bytes) to v (every page: slabs), or the first
 * only (first_only: large blocks).  Returns 0 or -1 (no leaf). */
static int pm_set(const void *base, size_t bytes, uintptr_t v, int first_only)
{
	uintptr_t a = (uintptr_t)base >> PAGE_SHIFT, end = a + (first_only ? 1 : bytes >> PAGE_SHIFT);

	for (; a < end; a++) {
		uintptr_t *leaf = pm_leaf(a);
		if (leaf == NULL)
			return -1;
		__atomic_store_n(&leaf[a & (PM_LEAF_N - 1)], v, __ATOMIC_RELAXED);
	}
	return 0;
}

/* ---- the class map ----
 *
 * free()'s first look-up: one byte per 64 KiB of the address space (a
 * slab is at least 64 KiB and aligned to its size, so each granule is
 * one slab's or none), the class + 1 of the slab there, 0 elsewhere
 * (large blocks, the bootstrap area, foreign pointers: the page map
 * decides).  Reserved at initialisation (2 GiB of address space over 47
 * bits, 64 KiB on 32-bit; MAP_NORESERVE, so only the pages written to
 * describe slabs are backed), it is a single load with no pointer to
 * follow; where it cannot be reserved (an address-space limit) cm_n stays
 * 0 and every free asks the page map.
 */
#define CM_SHIFT 16
#if UINTPTR_MAX > 0xffffffffu
#define CM_N ((uintptr_t)1 << (47 - CM_SHIFT))
#else
#define CM_N ((uintptr_t)1 << (32 - CM_SHIFT))
#endif

static unsigned char *cm_base;
static uintptr_t cm_n; /* atomic: CM_N once cm_base is mapped, else 0 */

static void cm_init(void)
{
	void *m = mmap(NULL, CM_N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);

	if (m == MAP_FAILED)
		return;
	cm_base = m;
	__atomic_store_n(&cm_n, CM_N, __ATOMIC_RELEASE);
}

/* Granules [base, base + bytes) to v (class + 1, or 0); a range the map
 * does not cover exactly is left to the page map. */
static void cm_set(const void *base, size_t bytes, unsigned v)
{
	uintptr_t g = (uintptr_t)base >> CM_SHIFT, n = bytes >> CM_SHIFT;
	uintptr_t mask = ((uintptr_t)1 << CM_SHIFT) - 1;

	if (cm_base == NULL || (((uintptr_t)base | bytes) & mask) != 0 || g >= CM_N || n > CM_N - g)
		return;
	for (uintptr_t i = 0; i < n; i++)
		__atomic_store_n(&cm_base[g + i], (unsigned char)v, __ATOMIC_RELAXED);
}

/* ---- process state ---- */

static struct rsk_pool *pools[NCLASS];	   /* every class's pool, once made */
static intptr_t pools_lock;		   /* making a pool (rsk_lock_take_) */
static enum rsk_index_mode index_mode = RSK_INDEX_CPU;
static int check_mode, stats_at_exit, stats_fd = 2;
static size_t large_blocks, large_bytes; /* atomic */
static unsigned long last_release_ms;	 /* atomic: the last timed release */

/* ---- the per-CPU caches ----
 *
 * One region per CPU (or mm_cid) holds the caches of every class: a
 * header, then one cache per class at a fixed offset, in PART_BYTES: a
 * pool part (count, gate, CAP_MAX slots) and, in the last word, the
 * class's soft capacity on that CPU (0: not set yet).  A class is named
 * on the fast paths by its key, class + 1 (the class map's byte in free),
 * or KOFF(key), key << PART_SHIFT (a table load from malloc's size):
 * region + KOFF(key) is where the displacements KEY_*DISP of the cache
 * start.  free() shifts the class map's byte rather than loading a
 * table: the object's address, often from a malloc just before, is on
 * the path to the cache's count, and a second dependent load there makes
 * a malloc+free pair measurably slower.
 * On x86-64 the fast path is one section (RSK_ARCH_REGION_POP and
 * _PUSH) that reads the index itself and compares the count with the
 * capacity inside; elsewhere rsk_percpu_enter_() reads the index and one
 * gated section compares what the C code read.  No pointer to a pool or
 * a part on the way to the section.  The pools
 * (rsk_pool_set_parts_) keep their slow paths - refill, flush, gates,
 * fences, the depot - on the same memory.
 *
 * Capacity.  A class's cache on a CPU starts with room for 4 KiB of
 * objects (at least one object, at most its pool's capacity: 64 KiB of
 * objects, 2 to 126) and doubles, up to that capacity, when it runs
 * empty on malloc or full on free (each a refill or flush of half of it),
 * as long as the sum over the CPU's classes of capacity x size stays
 * within CPU_BOUND.  The timed release (at most once a second) halves,
 * down to the start, every cache that had no such miss since the last
 * one, and drains one holding more than its new capacity: a CPU's caches
 * never hold more than CPU_BOUND bytes (but for the moment between a
 * shrink and its drain), and idle ones give their objects back.
 */
#define CAP_MAX	   125
#define PART_SHIFT 10
#define PART_BYTES ((size_t)1 << PART_SHIFT) /* count, gate, CAP_MAX slots, capacity */
#define CPU_BOUND  ((size_t)3 << 20)
#define LF_N	   2 /* large blocks in a CPU's front cache */

struct cpu_hdr {
	size_t grown;	       /* atomic: bytes of capacity above the classes' start */
	int used;	       /* a slow path has run on this index */
	uint32_t miss[NCLASS] __attribute__((aligned(128))); /* empty or full */
	uint32_t seen[NCLASS] __attribute__((aligned(128))); /* miss at the last release */
	/* The large-block front cache of the index (lf_take, lf_put): the
	 * slots, the gate of their sections, and what the timed release saw
	 * in them (written under the gate). */
	intptr_t lf_slot[LF_N] __attribute__((aligned(128)));
	intptr_t lf_gate;
	intptr_t lf_seen[LF_N];
} __attribute__((aligned(128)));

/* Powers of two, so that the fast paths' addresses are shifts and adds. */
#define HDR_BYTES ((sizeof(struct cpu_hdr) + 127) & ~(size_t)127)
#define CPU_SHIFT 16
#define CPU_BYTES ((size_t)1 << CPU_SHIFT)
/* The capacity word after the slots; the displacements of a cache's
 * fields from region + (key << PART_SHIFT). */
#define LIM_OFF	   (offsetof(struct rsk_pool_part, slot) + CAP_MAX * sizeof(intptr_t))
#define KEY_DISP   ((long)HDR_BYTES - (long)PART_BYTES)
#define KEY_CDISP  (KEY_DISP + (long)offsetof(struct rsk_pool_part, count))
#define KEY_GDISP  (KEY_DISP + (long)offsetof(struct rsk_pool_part, gate))
#define KEY_SDISP  (KEY_DISP + (long)offsetof(struct rsk_pool_part, slot))
#define KEY_LDISP  (KEY_DISP + (long)LIM_OFF)
#define KEY(c)	   ((c) + 1)
#define KEY_CLASS(key) ((unsigned)(key) - 1)
#define KOFF(key)  ((uintptr_t)(key) << PART_SHIFT)
_Static_assert(PART_SHIFT == 10, "sc_koff's keys");
_Static_assert(LIM_OFF + sizeof(uint32_t) <= PART_BYTES, "a class's cache fits its part");
_Static_assert(HDR_BYTES + NCLASS * PART_BYTES <= CPU_BYTES, "a CPU's caches fit its region");

static char *cache_base;	     /* cache_nr regions of CPU_BYTES; NULL: none */
static int cache_nr;
static uint32_t fast_nr; /* cache_nr, or 0 (no rseq, check mode): the generic fast paths' */
static enum rsk_index_mode fast_mode;
static size_t init_bytes;	     /* the classes' starting capacities, in bytes */

/* The fast paths' view, on one line: the regions' base (0 while every
 * call takes the slow paths: not initialised, no rseq in the process,
 * check mode), rseqkit's area offset and the index field. */
static struct {
	uintptr_t base; /* atomic: cache_base (release), or 0 */
	ptrdiff_t off;
	uint32_t ioff;
} fast __attribute__((aligned(64)));

ALWAYS_INLINE struct cpu_hdr *hdr_of(uint32_t i)
{
	return (struct cpu_hdr *)(void *)(cache_base + ((size_t)i << CPU_SHIFT));
}

ALWAYS_INLINE struct rsk_pool_part *part_of(uint32_t i, unsigned c)
{
	return (struct rsk_pool_part *)(void *)(cache_base + ((size_t)i << CPU_SHIFT) + HDR_BYTES +
						(size_t)c * PART_BYTES);
}

/* Class c's soft capacity on index i. */
ALWAYS_INLINE uint32_t *lim_of(uint32_t i, unsigned c)
{
	return (uint32_t *)(void *)((char *)part_of(i, c) + LIM_OFF);
}

/* Initialisation: 0 not started, 1 running (init_tid), 2 done. */
static int init_state;
static pid_t init_tid;

/* ---- messages without stdio ---- */

struct msg {
	char b[512];
	size_t n;
};

static void msg_s(struct msg *m, const char *s)
{
	while (*s != '\0' && m->n < sizeof(m->b))
		m->b[m->n++] = *s++;
}

static void msg_u(struct msg *m, unsigned long long v, int width)
{
	char t[24];
	int i = 0;

	do
		t[i++] = (char)('0' + v % 10);
	while ((v /= 10) != 0 && i < 24);
	for (; width > i; width--)
		msg_s(m, " ");
	while (i > 0 && m->n < sizeof(m->b))
		m->b[m->n++] = t[--i];
}

static void msg_p(struct msg *m, const void *p)
{
	uintptr_t v = (uintptr_t)p;
	char t[2 + 2 * sizeof(v) + 1];
	int i = 0, started = 0;

	t[i++] = '0';
	t[i++] = 'x';
	for (int sh = (int)(8 * sizeof(v)) - 4; sh >= 0; sh -= 4) {
		unsigned d = (unsigned)(v >> sh) & 15;
		if (d != 0 || started || sh == 0) {
			t[i++] = "0123456789abcdef"[d];
			started = 1;
		}
	}
	t[i] = '\0';
	msg_s(m, t);
}

static void msg_out(struct msg *m, int fd)
{
	size_t off = 0;

	while (off < m->n) {
		ssize_t w = write(fd, m->b + off, m->n - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	m->n = 0;
}

/* A bad pointer: report it and abort (never a silent corruption). */
static COLD __attribute__((noreturn)) void bad_pointer(const char *what, const void *p)
{
	struct msg m = { .n = 0 };

	msg_s(&m, "rseqkit-malloc: ");
	msg_s(&m, what);
	msg_s(&m, " ");
	msg_p(&m, p);
	msg_s(&m, "\n");
	msg_out(&m, 2);
	abort();
}

/* ---- the kernel's page ----
 *
 * The page map counts 4 KiB pages (PAGE) whatever the system's page, but
 * the kernel maps, unmaps and remaps whole system pages (sys_pg, from
 * sysconf at initialisation: 64 KiB on some arm64 and ppc64le kernels),
 * refusing an address that is not aligned to one.  So every large block
 * starts on a system page and spans whole ones; the kernel is only asked
 * through k_mmap, k_munmap and k_mremap.
 *
 * RSEQKIT_MALLOC_PAGE_ (a test knob, rseqkit-malloc(7)): a power of two
 * above the system page, up to 1 MiB, that these three calls emulate:
 * addresses aligned to it, lengths rounded up to it, an unaligned address
 * refused with EINVAL, as a kernel with pages that size does; the
 * allocator takes it as its sys_pg.  make check runs the allocator's
 * tests with 64 KiB pages on a 4 KiB kernel that way.
 */
static size_t sys_pg = PAGE;	  /* the system page (or the emulated one) */
static unsigned sys_shift = PAGE_SHIFT;
static size_t emu_pg;		  /* the emulated page; 0: none */
static size_t real_pg = PAGE;	  /* the kernel's own page */

static size_t round_emu(size_t n)
{
	return (n + emu_pg - 1) & ~(emu_pg - 1);
}

static void *k_mmap(size_t len)
{
	char *raw, *base;
	size_t l, over;

	if (emu_pg == 0)
		return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (len > SIZE_MAX - 2 * emu_pg)
		return MAP_FAILED;
	l = round_emu(len);
	over = emu_pg - real_pg;
	raw = mmap(NULL, l + over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return MAP_FAILED;
	base = (char *)(((uintptr_t)raw + emu_pg - 1) & ~(uintptr_t)(emu_pg - 1));
	if (base > raw)
		munmap(raw, (size_t)(base - raw));
	if (base + l < raw + l + over)
		munmap(base + l, (size_t)(raw + l + over - (base + l)));
	return base;
}

static int k_munmap(void *p, size_t len)
{
	if (emu_pg == 0)
		return munmap(p, len);
	if (((uintptr_t)p & (emu_pg - 1)) != 0) {
		errno = EINVAL;
		return -1;
	}
	return munmap(p, round_emu(len));
}

/* mremap(p, len, nlen, MREMAP_MAYMOVE). */
static void *k_mremap(void *p, size_t len, size_t nlen)
{
	char *q;

	if (emu_pg == 0)
		return mremap(p, len, nlen, MREMAP_MAYMOVE);
	if (((uintptr_t)p & (emu_pg - 1)) != 0 || nlen > SIZE_MAX - 2 * emu_pg) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	len = round_emu(len);
	nlen = round_emu(nlen);
	if (nlen <= len) {
		if (nlen < len)
			munmap((char *)p + nlen, len - nlen);
		return p;
	}
	q = mremap(p, len, nlen, 0);
	if (q != MAP_FAILED)
		return q;
	/* Move the pages to an aligned place of the new length. */
	q = k_mmap(nlen);
	if (q == MAP_FAILED)
		return MAP_FAILED;
	if (mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, q) == MAP_FAILED) {
		munmap(q, nlen);
		return MAP_FAILED;
	}
	return q;
}

/* The system page (and the knob) into sys_pg; once, at initialisation. */
static void page_init(void)
{
	long s = sysconf(_SC_PAGESIZE);
	const char *v = getenv("RSEQKIT_MALLOC_PAGE_");

	if (s >= (long)PAGE && (s & (s - 1)) == 0)
		real_pg = (size_t)s;
	sys_pg = real_pg;
	if (v != NULL && *v != '\0') {
		char *end;
		unsigned long e = strtoul(v, &end, 0);
		if (*end == '\0' && e > real_pg && e <= ((size_t)1 << 20) && (e & (e - 1)) == 0)
			sys_pg = emu_pg = e;
	}
	sys_shift = (unsigned)__builtin_ctzll((unsigned long long)sys_pg);
}

/* ---- the bootstrap area: calls made while the first one initialises ---- */

#define BOOT_BYTES ((size_t)256 << 10)
static char boot_area[BOOT_BYTES] __attribute__((aligned(4096)));
static size_t boot_used; /* atomic */

/* A block of the bootstrap area: its size in the 16 bytes before it. */
static void *boot_alloc(size_t align, size_t n)
{
	size_t old = __atomic_load_n(&boot_used, __ATOMIC_RELAXED), start, end;

	if (align < 16)
		align = 16;
	do {
		start = (old + 16 + align - 1) & ~(align - 1);
		if (n > BOOT_BYTES || start + n > BOOT_BYTES) {
			errno = ENOMEM;
			return NULL;
		}
		end = (start + n + 15) & ~(size_t)15;
	} while (!__atomic_compare_exchange_n(&boot_used, &old, end, 0, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	*(size_t *)(void *)(boot_area + start - 16) = n;
	return boot_area + start;
}

ALWAYS_INLINE int in_boot(const void *p)
{
	return (const char *)p >= boot_area && (const char *)p < boot_area + BOOT_BYTES;
}

static size_t boot_size(const void *p)
{
	return *(const size_t *)(const void *)((const char *)p - 16);
}

/* ---- initialisation ---- */

static int env_is(const char *name, const char *value)
{
	const char *v = getenv(name);

	return v != NULL && strcmp(v, value) == 0;
}

static size_t class_size(unsigned c);
static long class_capacity(unsigned c);
static uint32_t start_capacity(unsigned c);

/* The caches' regions, and the fast paths' view of the index. */
static void cache_init(void)
{
	struct rsk_percpu_head h;
	int nr = rsk_possible_cpus();
	void *m;

	cm_init();
	for (unsigned c = 0; c < NCLASS; c++)
		init_bytes += start_capacity(c) * class_size(c);
	if (nr <= 0)
		return;
	m = mmap(NULL, (size_t)nr * CPU_BYTES, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return; /* the pools' own caches, through their slow paths */
	memset(&h, 0, sizeof(h));
	h.mode = rsk_percpu_effective_mode(index_mode);
	h.nr = nr;
	rsk_percpu_init_head(&h);
	cache_base = m;
	cache_nr = nr;
	fast_mode = h.mode;
	/* Check mode: every call goes to the slow paths, which check. */
	__atomic_store_n(&fast_nr, check_mode ? 0 : h.fast_nr_, __ATOMIC_RELEASE);
	fast.off = rsk_area_offset_();
	fast.ioff = h.index_offset_;
	if (!check_mode && h.fast_nr_ != 0)
		__atomic_store_n(&fast.base, (uintptr_t)cache_base, __ATOMIC_RELEASE);
}

static void tc_init(void);

static void do_init(void)
{
	rsk_init_once();
	page_init();
	check_mode = rsk_env_bool_("RSEQKIT_MALLOC_CHECK", 0);
	stats_at_exit = rsk_env_bool_("RSEQKIT_MALLOC_STATS", 0);
	if (stats_at_exit) {
		/* Standard error as it is now: programs such as coreutils'
		 * close it at exit, before the destructors run. */
		int fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
		if (fd >= 0)
			stats_fd = fd;
	}
	index_mode = env_is("RSEQKIT_MALLOC_INDEX", "cid") ? RSK_INDEX_CID : RSK_INDEX_CPU;
	cache_init();
	tc_init();
}

/* 1 when the allocator is ready; 0 when the caller is the thread that is
 * initialising it (a call from inside rseqkit's or libc's set-up): the
 * bootstrap area serves it. */
static NOINLINE int ensure_init(void)
{
	int st = __atomic_load_n(&init_state, __ATOMIC_ACQUIRE), zero = 0;
	pid_t me;

	if (LIKELY(st == 2))
		return 1;
	me = (pid_t)syscall(SYS_gettid);
	if (st == 0 && __atomic_compare_exchange_n(&init_state, &zero, 1, 0, __ATOMIC_ACQUIRE,
						   __ATOMIC_ACQUIRE)) {
		int saved = errno;
		__atomic_store_n(&init_tid, me, __ATOMIC_RELAXED);
		do_init();
		errno = saved;
		__atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
		return 1;
	}
	if (__atomic_load_n(&init_tid, __ATOMIC_RELAXED) == me)
		return 0;
	while (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
		sched_yield();
	return 1;
}

static int slab_hook(void *arg, void *base, size_t bytes, int mapped)
{
	unsigned c = (unsigned)(uintptr_t)arg;
	int r;

	/* The class map says "small" only while the page map does too. */
	if (!mapped)
		cm_set(base, bytes, 0);
	r = pm_set(base, bytes, mapped ? ((uintptr_t)c << 2) | E_SMALL : 0, 0);
	if (mapped && r == 0)
		cm_set(base, bytes, c + 1);
	return r;
}

/* Largest cache capacity of class c: about 64 KiB of objects per CPU,
 * between 2 and CAP_MAX (126) objects. */
static long class_capacity(unsigned c)
{
	size_t k = ((size_t)64 << 10) / class_size(c);

	return k < 2 ? 2 : k > CAP_MAX ? CAP_MAX : (long)k;
}

/* Its starting capacity: 4 KiB of objects, at least one. */
static uint32_t start_capacity(unsigned c)
{
	size_t k = (size_t)4096 / class_size(c);
	long max = class_capacity(c);

	return k < 1 ? 1 : k > (size_t)max ? (uint32_t)max : (uint32_t)k;
}

/*
 * A slow path of class c on the caller's index: set the cache's capacity
 * on first use; when the cache was empty (malloc) or full (free), count a
 * miss and double the capacity, within the CPU's bound.
 */
static NOINLINE void cache_miss(unsigned c, int freeing)
{
	int idx;
	struct cpu_hdr *h;
	uint32_t lim, nl, max = (uint32_t)class_capacity(c);
	intptr_t count;
	size_t add, grown, size = class_size(c);

	if (cache_base == NULL || check_mode)
		return;
	idx = rsk_percpu_slow_index(fast_mode, cache_nr);
	h = hdr_of((uint32_t)idx);
	lim = __atomic_load_n(lim_of((uint32_t)idx, c), __ATOMIC_RELAXED);
	if (lim == 0) {
		uint32_t zero = 0;
		if (!__atomic_load_n(&h->used, __ATOMIC_RELAXED))
			__atomic_store_n(&h->used, 1, __ATOMIC_RELAXED);
		__atomic_compare_exchange_n(lim_of((uint32_t)idx, c), &zero, start_capacity(c), 0,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
		return;
	}
	count = __atomic_load_n(&part_of((uint32_t)idx, c)->count, __ATOMIC_RELAXED);
	if (freeing ? count < (intptr_t)lim : count > 0)
		return; /* not a miss: a gate, an abort, no index */
	__atomic_add_fetch(&h->miss[c], 1, __ATOMIC_RELAXED);
	if (lim >= max)
		return;
	nl = lim * 2 < max ? lim * 2 : max;
	add = (size_t)(nl - lim) * size;
	grown = __atomic_load_n(&h->grown, __ATOMIC_RELAXED);
	do
		if (init_bytes + grown + add > CPU_BOUND)
			return;
	while (!__atomic_compare_exchange_n(&h->grown, &grown, grown + add, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED));
	if (!__atomic_compare_exchange_n(lim_of((uint32_t)idx, c), &lim, nl, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		__atomic_sub_fetch(&h->grown, add, __ATOMIC_RELAXED);
}

/*
 * The timed release's pass over the caches: a cache with no miss since
 * the last pass halves its capacity (down to its start; all: to the start
 * at once), and one holding more than that is drained.
 */
static void cache_shrink(int all)
{
	for (int i = 0; cache_base != NULL && i < cache_nr; i++) {
		struct cpu_hdr *h = hdr_of((uint32_t)i);
		if (!__atomic_load_n(&h->used, __ATOMIC_RELAXED))
			continue;
		for (unsigned c = 0; c < NCLASS; c++) {
			uint32_t lim = __atomic_load_n(lim_of((uint32_t)i, c), __ATOMIC_RELAXED), nl;
			uint32_t m = __atomic_load_n(&h->miss[c], __ATOMIC_RELAXED), start = start_capacity(c);
			struct rsk_pool *p = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
			int quiet = m == __atomic_load_n(&h->seen[c], __ATOMIC_RELAXED);

			__atomic_store_n(&h->seen[c], m, __ATOMIC_RELAXED);
			if (lim <= start || (!quiet && !all))
				continue;
			nl = all ? start : lim / 2 > start ? lim / 2 : start;
			if (!__atomic_compare_exchange_n(lim_of((uint32_t)i, c), &lim, nl, 0,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				continue; /* it grew meanwhile: busy */
			__atomic_sub_fetch(&h->grown, (size_t)(lim - nl) * class_size(c), __ATOMIC_RELAXED);
			if (p != NULL && __atomic_load_n(&part_of((uint32_t)i, c)->count, __ATOMIC_RELAXED) >
						 (intptr_t)nl)
				rsk_pool_drain(p, i);
		}
	}
}

/* The pool of class c, made on first use; NULL (errno) if it cannot be. */
static NOINLINE struct rsk_pool *make_pool(unsigned c)
{
	struct rsk_pool *p = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
	size_t size = class_size(c);
	int err;

	if (p != NULL)
		return p;
	err = rsk_lock_take_(&pools_lock, "malloc", pools);
	if (err != 0 && err != -EOWNERDEAD) {
		errno = -err == EDEADLK ? ENOMEM : -err;
		return NULL;
	}
	p = pools[c];
	if (p == NULL) {
		struct rsk_pool_config cfg = {
			.size = size,
			/* A power-of-two class aligns its objects to their size
			 * (up to a page): memalign's small blocks come from it. */
			.align = (size & (size - 1)) == 0 ? (size < PAGE ? size : PAGE) : 16,
			.cache_capacity = class_capacity(c),
			.flags = check_mode ? RSK_POOL_DEBUG : 0,
			.mode = index_mode,
		};
		err = rsk_pool_create_in_(&p, &cfg, 1);
		if (err == 0) {
			rsk_pool_set_slab_hook_(p, slab_hook, (void *)(uintptr_t)c);
			if (cache_base != NULL)
				rsk_pool_set_parts_(p, (char *)part_of(0, c), CPU_BYTES, lim_of(0, c),
						    CPU_BYTES / sizeof(uint32_t));
			__atomic_store_n(&pools[c], p, __ATOMIC_RELEASE);
		} else {
			p = NULL;
			errno = -err;
		}
	}
	rsk_lock_drop_(&pools_lock);
	return p;
}

/* ---- per-thread caches where a thread cannot run sections ----
 *
 * A thread that cannot run sections (RSEQKIT_DISABLE=1, seccomp,
 * qemu-user, an old kernel, a thread left unregistered) finds no index on
 * every malloc and free and takes the pools' slow paths, each a cache's
 * gate closed and reopened.  Unless RSEQKIT_MALLOC_THREAD_CACHE=0
 * (tc_init()), each such thread keeps the objects it frees
 * of the classes up to 1 KiB (TC_NCLASS) and hands them out again: at
 * most tc_cap(c) of class c (32 objects, and no more than 4 KiB of them),
 * so at most 394 objects and 65760 bytes per thread.  A free to a full
 * class moves half of it to the pool; a malloc that finds it empty asks
 * the pool for one.  Only a call whose attempt found no index
 * (RSK_NO_INDEX) uses it: a thread that runs sections never fills one.
 *
 * Exactness, as the pool's own thread cache (src/alloc/object_pool.c),
 * which the allocator's pools do not use: a thread's cache holds free
 * objects that only its thread hands out; `busy` is set while the thread
 * is inside, so a signal handler interrupting it there takes the pools'
 * path; a slot is nonzero exactly when it holds an object.  The objects
 * go back to their pools when the thread exits (a pthread key's
 * destructor), in a fork child for every other thread, and at
 * malloc_trim for the caller.  Records are mapped, never unmapped, and
 * nothing here calls malloc.
 */
#define TC_NCLASS 20 /* classes 0 .. 19: 16 B to 1 KiB */
#define TC_OBJS	  32

struct tc_record {
	struct tc_record *next; /* the registry, push only */
	int owned;		/* atomic: a thread has it */
	int busy;		/* its thread is inside (signal handlers: the pools' path) */
	uint32_t count[TC_NCLASS];
	intptr_t slot[TC_NCLASS][TC_OBJS]; /* 0: empty */
};

#define TC_CHUNK 16 /* records mapped at once */
#define TC_NONE	 ((struct tc_record *)(uintptr_t)1)

static struct tc_record *tc_registry; /* atomic */
static __thread struct tc_record *tc_self __attribute__((tls_model("initial-exec")));
static pthread_mutex_t tc_lock = PTHREAD_MUTEX_INITIALIZER; /* thread exit against fork */
static pthread_key_t tc_key;
/* 1: thread caches (the key exists and setting it never allocates);
 * 0: not initialised yet; -1: none (check mode, no key). */
static int tc_state;
static uint8_t tc_caps[TC_NCLASS]; /* class c's bound: 32 objects, 4 KiB */

/* Negative control (the injection build, tests/malloc_negative.sh):
 * RSEQKIT_INJECT_BROKEN_MCACHE=1 makes a pop leave the object in the
 * cache, so that it is handed out twice. */
#if RSK_INJECTING
static int tc_broken(void)
{
	static int v = -1;

	if (__atomic_load_n(&v, __ATOMIC_RELAXED) < 0) {
		const char *e = getenv("RSEQKIT_INJECT_BROKEN_MCACHE");
		__atomic_store_n(&v, e != NULL && e[0] == '1', __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&v, __ATOMIC_RELAXED);
}
#endif

/* Give back every object of r (its slots, whatever its counts). */
static void tc_record_drain(struct tc_record *r)
{
	for (unsigned c = 0; c < TC_NCLASS; c++) {
		struct rsk_pool *p = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
		for (int i = 0; i < TC_OBJS; i++) {
			intptr_t obj = __atomic_load_n(&r->slot[c][i], __ATOMIC_RELAXED);
			if (obj == 0)
				continue;
			__atomic_store_n(&r->slot[c][i], 0, __ATOMIC_RELAXED);
			if (p != NULL)
				rsk_pool_free_slow_(p, (void *)obj, RSK_NO_INDEX);
		}
		__atomic_store_n(&r->count[c], 0, __ATOMIC_RELAXED);
	}
}

/* Thread exit: its objects go back to their pools, its record to the
 * registry; later calls of the thread (other destructors) take the
 * pools' path. */
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

static void tc_fork_prepare(void)
{
	pthread_mutex_lock(&tc_lock);
}

static void tc_fork_parent(void)
{
	pthread_mutex_unlock(&tc_lock);
}

/* The child has one thread: the others' records go back, with their
 * objects (fork() waited for the pools' gates and depot locks). */
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

/* At initialisation.  The fork handlers come after the gates' (see
 * rsk_progress_init_()): the prepare handler then takes tc_lock before
 * the gates' makes other threads wait for the fork - a thread exiting
 * under tc_lock may be waiting at a gate - and the child's drains once
 * the gates are the child's. */
static void tc_init(void)
{
	int st = -1;

	for (unsigned c = 0; c < TC_NCLASS; c++) {
		size_t k = (size_t)4096 / class_size(c);
		tc_caps[c] = (uint8_t)(k > TC_OBJS ? TC_OBJS : k);
	}
	if (check_mode || !rsk_env_bool_("RSEQKIT_MALLOC_THREAD_CACHE", 1) ||
	    pthread_key_create(&tc_key, tc_thread_exit) != 0)
		goto out;
#ifdef __GLIBC__
	/* glibc's first 32 keys live in the thread's descriptor: setting one
	 * allocates nothing.  Beyond them: no thread caches. */
	if (tc_key >= 32)
		goto out;
#endif
	rsk_progress_init_();
	if (pthread_atfork(tc_fork_prepare, tc_fork_parent, tc_fork_child) == 0)
		st = 1;
out:
	__atomic_store_n(&tc_state, st, __ATOMIC_RELEASE);
}

/* A free record for the calling thread (lock-free, async-signal-safe:
 * mmap only), or TC_NONE. */
static NOINLINE struct tc_record *tc_claim(void)
{
	struct tc_record *r, *head;
	int st;

	/* A handler that runs while this claims finds none: a record it
	 * claimed would be replaced, never given back, when this returns. */
	tc_self = TC_NONE;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	st = __atomic_load_n(&tc_state, __ATOMIC_ACQUIRE);
	if (st <= 0) {
		if (st == 0)
			tc_self = NULL; /* before initialisation: ask again later */
		return TC_NONE;
	}
	for (r = __atomic_load_n(&tc_registry, __ATOMIC_ACQUIRE); r != NULL; r = r->next) {
		int free_ = 0;
		if (__atomic_load_n(&r->owned, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&r->owned, &free_, 1, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			break;
	}
	if (r == NULL) {
		struct tc_record *chunk = mmap(NULL, TC_CHUNK * sizeof(*chunk), PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (chunk == MAP_FAILED)
			return TC_NONE;
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
	if (pthread_setspecific(tc_key, r) != 0) {
		__atomic_store_n(&r->owned, 0, __ATOMIC_RELEASE);
		return TC_NONE;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return tc_self = r;
}

/* The calling thread's record, marked busy, or NULL (none; or a handler
 * on top of its own thread's use: the pools' path). */
ALWAYS_INLINE struct tc_record *tc_enter(void)
{
	struct tc_record *r = tc_self;

	if (UNLIKELY(r == NULL))
		r = tc_claim();
	if (UNLIKELY(r == TC_NONE || r->busy))
		return NULL;
	r->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return r;
}

ALWAYS_INLINE void tc_leave(struct tc_record *r)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	r->busy = 0;
}

/* An object of class c (< TC_NCLASS) from the thread's cache, or NULL. */
ALWAYS_INLINE void *tc_pop(unsigned c)
{
	struct tc_record *r = tc_enter();
	intptr_t obj = 0;
	uint32_t n;

	if (r == NULL)
		return NULL;
	n = r->count[c];
	if (LIKELY(n != 0)) {
		obj = r->slot[c][n - 1];
#if RSK_INJECTING
		if (tc_broken())
			goto out;
#endif
		__atomic_store_n(&r->slot[c][n - 1], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&r->count[c], n - 1, __ATOMIC_RELAXED);
	}
#if RSK_INJECTING
out:
#endif
	tc_leave(r);
	return (void *)obj;
}

/* tc_push() to a full class (r busy): half of it, and then obj, go. */
static NOINLINE void tc_flush(struct tc_record *r, unsigned c, void *obj)
{
	struct rsk_pool *p = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
	intptr_t out[TC_OBJS];
	uint32_t n = r->count[c], k;

	/* Out of the slots first; to the pool once no longer busy. */
	for (k = 0; k < n - n / 2; k++) {
		out[k] = r->slot[c][n - 1 - k];
		__atomic_store_n(&r->slot[c][n - 1 - k], 0, __ATOMIC_RELAXED);
	}
	n -= k;
	__atomic_store_n(&r->slot[c][n], (intptr_t)obj, __ATOMIC_RELAXED);
	__atomic_store_n(&r->count[c], n + 1, __ATOMIC_RELAXED);
	tc_leave(r);
	while (k > 0)
		rsk_pool_free_slow_(p, (void *)out[--k], RSK_NO_INDEX);
}

/* Keep obj of class c (< TC_NCLASS) in the thread's cache; 0 if there is
 * no cache (the caller frees it to the pool).  A full class first moves
 * half of its objects to the pool. */
ALWAYS_INLINE int tc_push(unsigned c, void *obj)
{
	struct tc_record *r = tc_enter();
	uint32_t n;

	if (r == NULL)
		return 0;
	n = r->count[c];
	if (UNLIKELY(n >= tc_caps[c])) {
		tc_flush(r, c, obj);
		return 1;
	}
	__atomic_store_n(&r->slot[c][n], (intptr_t)obj, __ATOMIC_RELAXED);
	__atomic_store_n(&r->count[c], n + 1, __ATOMIC_RELAXED);
	tc_leave(r);
	return 1;
}

/* malloc_trim: the calling thread's own objects go back. */
static void tc_drain_self(void)
{
	struct tc_record *r = tc_self;

	if (r == NULL || r == TC_NONE || r->busy)
		return;
	r->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	tc_record_drain(r);
	tc_leave(r);
}

/* Objects of class c in every thread's cache (statistics: a sum of
 * counts other threads change meanwhile). */
static size_t tc_cached(unsigned c)
{
	size_t n = 0;

	if (c >= TC_NCLASS)
		return 0;
	for (struct tc_record *r = __atomic_load_n(&tc_registry, __ATOMIC_ACQUIRE); r != NULL;
	     r = r->next)
		n += __atomic_load_n(&r->count[c], __ATOMIC_RELAXED);
	return n;
}

/* ---- release of free memory ---- */

/* Milliseconds of a monotonic clock, modulo the width of a long: only
 * differences are used, in unsigned arithmetic, so they are right across
 * the wrap (every 49 days with a 32-bit long). */
static unsigned long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (unsigned long)ts.tv_sec * 1000ul + (unsigned long)ts.tv_nsec / 1000000ul;
}

#define RELEASE_INTERVAL_MS 1000ul

/* Give every slab whose objects are all back in its class's depot to the
 * system; drain: first move the per-CPU caches' objects there. */
static int lc_flush(int all, unsigned long now);

static int release_free(int drain)
{
	int n = lc_flush(drain, now_ms());

	cache_shrink(drain);

	for (unsigned c = 0; c < NCLASS; c++) {
		struct rsk_pool *p = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
		int r;
		if (p == NULL)
			continue;
		if (drain)
			rsk_pool_drain(p, -1);
		r = rsk_pool_trim(p);
		if (r > 0)
			n += r;
	}
	return n;
}

/* Called where memory moves in bulk (a large block freed, a small
 * allocation past its cache's fast path): at most once a second, the free
 * slabs go back to the system.  The bound on how long a free slab stays
 * mapped is one second after the next such event; malloc_trim() releases
 * at once. */
static void maybe_release_at(unsigned long t)
{
	unsigned long last = __atomic_load_n(&last_release_ms, __ATOMIC_RELAXED);

	if (t - last < RELEASE_INTERVAL_MS ||
	    !__atomic_compare_exchange_n(&last_release_ms, &last, t, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	release_free(0);
}

static void maybe_release(void)
{
	maybe_release_at(now_ms());
}

/* ---- check mode (RSEQKIT_MALLOC_CHECK=1) ----
 *
 * A block of n bytes takes a class of at least n + 16 bytes: its last
 * word holds n ^ CHECK_KEY, and the bytes from n to that word are a canary
 * (CHECK_BYTE).  free() asks the pool (a debug pool) whether the pointer
 * is an allocated object - not an object: never returned; free: double
 * free - then checks the word and the canary.  Freed objects are poisoned
 * by the pool, which finds writes after free when it hands them out.
 */
#define CHECK_EXTRA 16
#define CHECK_KEY   ((size_t)0x5aa5c33c96695aa5ull)
#define CHECK_BYTE  0xa5

static void check_mark(void *p, size_t n, size_t slot)
{
	memset((char *)p + n, CHECK_BYTE, slot - sizeof(size_t) - n);
	*(size_t *)(void *)((char *)p + slot - sizeof(size_t)) = n ^ CHECK_KEY;
}

/* The size of a live checked block p of class c, after checking it. */
static size_t check_block(unsigned c, void *p, const char *op)
{
	size_t slot = class_size(c), n;
	int st = rsk_pool_debug_state_(pools[c], p);
	const unsigned char *b = p;

	(void)op;
	if (st < 0)
		bad_pointer("free of a pointer never returned by malloc:", p);
	if (st == 0)
		bad_pointer("double free of", p);
	n = *(const size_t *)(const void *)((const char *)p + slot - sizeof(size_t)) ^ CHECK_KEY;
	if (n > slot - CHECK_EXTRA)
		bad_pointer("canary overrun (the block's size word is overwritten) at", p);
	for (size_t i = n; i < slot - sizeof(size_t); i++)
		if (b[i] != CHECK_BYTE)
			bad_pointer("canary overrun (a write past the end of the block) at", p);
	return n;
}

/* ---- small objects ---- */

static NOINLINE void *large_alloc(size_t n, size_t align, int zero);

/*
 * One attempt of the fast paths on the cache KOFF(key) of the caller's
 * index, cache_pop_() and cache_push_(): RSK_OK; RSK_NO_INDEX when the
 * thread cannot run a section here; RSK_EMPTY or RSK_FULL;
 * RSK_ABORTED, or RSK_STOPPED (the cache's gate is closed, or, where the
 * section reads the index, the thread has none: settle_stop() tells them
 * apart off the fast path); where the C code reads the count before the
 * section, RSK_CMPFAIL (it changed).  The push commits with release, so
 * that whoever pops the object sees what its owner wrote.
 */
#if defined(RSK_ARCH_HAS_REGION_OPS) && !defined(RSK_TSAN) && !defined(RSEQKIT_ANALYZER)
/* The section reads the index; fast.base is 0 where no call may run it,
 * and otherwise fast.off is not 0 (init_head gave a fast_nr). */
#define MALLOC_SECTION 1

/* A section's RSK_STOPPED: RSK_NO_INDEX where the thread has no index
 * (not registered: -1 or -2), else the cache's gate is closed. */
static int settle_stop(int ret)
{
	if (ret == RSK_STOPPED &&
	    (int32_t)rsk_arch_area_u32(rsk_arch_area_of(fast.off), fast.ioff) < 0)
		return RSK_NO_INDEX;
	return ret;
}

ALWAYS_INLINE int cache_pop_(uintptr_t koff, intptr_t *obj)
{
	uintptr_t base = __atomic_load_n(&fast.base, __ATOMIC_ACQUIRE);
	intptr_t o;
	enum rsk_result r;

	if (UNLIKELY(base == 0))
		return RSK_NO_INDEX;
	RSK_INJECT_C(7);
	r = RSK_PERCPU_SECTION_(RSK_ARCH_REGION_POP(rsk_arch_area_of(fast.off), fast.ioff, base, koff,
						    CPU_SHIFT, KEY_CDISP, KEY_GDISP, KEY_SDISP,
						    KEY_LDISP, o));
	if (LIKELY(r == RSK_OK)) {
		*obj = o;
		return RSK_OK;
	}
	/* cmpfail: empty (or above a capacity that shrank): refill */
	return r == RSK_CMPFAIL ? RSK_EMPTY : (int)r;
}

ALWAYS_INLINE int cache_push_(uintptr_t koff, void *obj)
{
	uintptr_t base = __atomic_load_n(&fast.base, __ATOMIC_ACQUIRE);
	enum rsk_result r;

	if (UNLIKELY(base == 0))
		return RSK_NO_INDEX;
	RSK_INJECT_C(7);
	r = RSK_PERCPU_SECTION_(RSK_ARCH_REGION_PUSH(rsk_arch_area_of(fast.off), fast.ioff, base, koff,
						     CPU_SHIFT, KEY_CDISP, KEY_GDISP, KEY_SDISP,
						     KEY_LDISP, obj));
	if (LIKELY(r == RSK_OK))
		return RSK_OK;
	/* cmpfail: full: flush */
	return r == RSK_CMPFAIL ? RSK_FULL : (int)r;
}
#else
/* The pop compares the slot it read as well as the count (another thread
 * on the CPU may have popped and pushed in between). */
static int settle_stop(int ret)
{
	return ret;
}

ALWAYS_INLINE int cache_pop_(uintptr_t koff, intptr_t *obj)
{
	unsigned c = KEY_CLASS(koff >> PART_SHIFT);
	uint32_t ioff = fast.ioff, i, lim;
	rsk_arch_area_t area;
	struct rsk_pool_part *pt;
	intptr_t count;

	if (UNLIKELY(!rsk_percpu_enter_(rsk_area_offset_(), ioff,
					__atomic_load_n(&fast_nr, __ATOMIC_ACQUIRE), &area, &i)))
		return RSK_NO_INDEX;
	RSK_INJECT_C(7);
	pt = part_of(i, c);
	lim = __atomic_load_n(lim_of(i, c), __ATOMIC_RELAXED);
	count = __atomic_load_n(&pt->count, __ATOMIC_RELAXED);
	if (UNLIKELY((uintptr_t)(count - 1) >= (uintptr_t)lim))
		return RSK_EMPTY; /* (or above a capacity that shrank): refill */
	RSK_INJECT_C(8);
	*obj = __atomic_load_n(&pt->slot[count - 1], __ATOMIC_RELAXED);
	RSK_INJECT_C(9);
	return (int)RSK_PERCPU_OP_(cmpcmpstore, ioff, area, i, &pt->gate, &pt->count, count,
				   &pt->slot[count - 1], *obj, count - 1);
}

ALWAYS_INLINE int cache_push_(uintptr_t koff, void *obj)
{
	unsigned c = KEY_CLASS(koff >> PART_SHIFT);
	uint32_t ioff = fast.ioff, i, lim;
	rsk_arch_area_t area;
	struct rsk_pool_part *pt;
	intptr_t count;

	if (UNLIKELY(!rsk_percpu_enter_(rsk_area_offset_(), ioff,
					__atomic_load_n(&fast_nr, __ATOMIC_ACQUIRE), &area, &i)))
		return RSK_NO_INDEX;
	RSK_INJECT_C(7);
	pt = part_of(i, c);
	lim = __atomic_load_n(lim_of(i, c), __ATOMIC_RELAXED);
	count = __atomic_load_n(&pt->count, __ATOMIC_RELAXED);
	if (UNLIKELY((uintptr_t)count >= (uintptr_t)lim))
		return RSK_FULL; /* flush */
	RSK_INJECT_C(8);
	return (int)RSK_PERCPU_OP_(cmpstorestore_release, ioff, area, i, &pt->gate, &pt->count,
				   count, &pt->slot[count], (intptr_t)obj, count + 1);
}
#endif

/* The attempts with RSK_NO_INDEX told apart: the slow paths' retries. */
static int cache_try_pop(unsigned c, intptr_t *obj)
{
	return settle_stop(cache_pop_(KOFF(KEY(c)), obj));
}

static int cache_try_push(unsigned c, void *obj)
{
	return settle_stop(cache_push_(KOFF(KEY(c)), obj));
}

/* Class c's object, the slow way: the pool made on first use, check mode,
 * a refill.  n and align are what was asked (align 16 for malloc): check
 * mode takes a class with room for its canary. */
/* What the pool's slow path is told after malloc's own retries: why the
 * last attempt failed, or, where it would retry (a changed count, an
 * abort past the limit), that the cache was empty or full: the pool's own
 * attempts would not know the capacity. */
static enum rsk_result settled(int ret, enum rsk_result instead)
{
	return ret == RSK_CMPFAIL || ret == RSK_ABORTED ? instead : (enum rsk_result)ret;
}

static NOINLINE void *small_pool(unsigned c, size_t n, size_t align, int ret)
{
	struct rsk_pool *p;
	void *obj;

	if (!ensure_init())
		return boot_alloc(align, n);
	if (check_mode) {
		size_t s = n + CHECK_EXTRA;
		if (align > 16) {
			if (s < align)
				s = align;
			s = (size_t)1 << (64 - __builtin_clzll((unsigned long long)(s - 1)));
		}
		if (s > SMALL_MAX)
			return large_alloc(n, align, 0);
		c = size_class(s);
	}
	p = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
	if (p == NULL) {
		p = make_pool(c);
		if (p == NULL)
			return NULL;
		ret = RSK_CMPFAIL; /* no attempt made yet */
	}
	if (check_mode) {
		obj = rsk_pool_alloc(p);
		if (obj != NULL)
			check_mark(obj, n, class_size(c));
		return obj;
	}
	{
		unsigned aborts = 0;
		intptr_t o = 0; /* (gcc -O1 cannot tell the exits apart) */
		while (rsk_percpu_again(ret, &aborts))
			if ((ret = cache_try_pop(c, &o)) == RSK_OK)
				return (void *)o;
	}
	/* A refill (or the first use of a class): where memory moves in
	 * bulk, so the timed release looks here too. */
	cache_miss(c, 0);
	maybe_release();
	/* The retries are done: the pool's slow path goes to its gate or
	 * refills (its own attempts would not know the capacity). */
	obj = rsk_pool_alloc_slow_(p, settled(ret, RSK_EMPTY));
	if (obj == NULL && errno != ENOMEM)
		errno = ENOMEM;
	return obj;
}

/* malloc past its first attempt (ret): where it found no index, the
 * thread's cache comes first (a thread cache exists only once the
 * allocator is initialised, and never in check mode).  Out of line, so
 * that the fast path saves no register and ends in a tail call. */
static NOINLINE void *small_alloc_slow(size_t n, unsigned key, size_t align, int ret)
{
	unsigned c = KEY_CLASS(key);

	ret = settle_stop(ret);
	if (ret == RSK_NO_INDEX && c < TC_NCLASS) {
		void *o = tc_pop(c);
		if (LIKELY(o != NULL))
			return o;
	}
	return small_pool(c, n, align, ret);
}

/* malloc(n), n <= KOFF_MAX, past its first attempt: the key again from n,
 * so that the fast path keeps nothing but n for the call. */
static NOINLINE void *malloc_slow(size_t n, int ret)
{
	return small_alloc_slow(n, KEY(size_class(n)), 16, ret);
}

ALWAYS_INLINE void *small_alloc(unsigned key, size_t n, size_t align)
{
	intptr_t obj;
	int ret = cache_pop_(KOFF(key), &obj);

	if (LIKELY(ret == RSK_OK))
		return (void *)obj;
	return small_alloc_slow(n, key, align, ret);
}

/* ---- large blocks: mapped one by one ----
 *
 * A freed large block of up to LC_MAX_BLOCK bytes is kept (unmapped from
 * the page map, so a second free is still a pointer never returned) in a
 * small cache, up to LC_MAX_BYTES in all, for the next large allocation
 * that fits it with at most a quarter of it unused: a program that
 * allocates and frees a 1 MiB buffer in a loop does not pay an mmap,
 * a munmap and the page faults each time.  A block cached for a second or
 * more is unmapped at the next release (maybe_release), every one at
 * malloc_trim(), and all of them before an mmap that failed is retried.
 *
 * The cache takes no lock: each slot is one word, the block's address
 * (aligned to a system page) with its length in system pages, less one,
 * in the bits below the page (at most 4095: LC_MAX_BLOCK).
 * A block is taken by a compare-and-swap of that word to 0 and put by one
 * from 0, so a taker that wins owns the block, and a word that was taken
 * and put back meanwhile names the same block of the same length.  Two
 * threads freeing and allocating large blocks on two CPUs meet on these
 * few cache lines only, never on a lock a preempted holder keeps.  A slot's
 * time is a hint: a race can make a block look older, which only unmaps
 * it sooner.
 *
 * In front of it each CPU (index) keeps LF_N freed blocks of up to
 * LF_MAX_BLOCK bytes in its region's header (lf_slot: the same words),
 * taken and put by one gated compare-and-store section each, so that a
 * thread that frees and allocates large blocks on its CPU touches no
 * line another CPU writes.  A block there still counts in large_blocks
 * and large_bytes (statistics subtract the front caches' blocks when they
 * are read), so the sections are the whole cost.  A thread that cannot
 * run a section, a section that fails, a full or empty front cache: the
 * shared cache.  The timed release closes a front cache's gate and
 * unmaps a block it finds in the same slot as at the previous release
 * (every one at malloc_trim): the same word may be a block taken and put
 * back meanwhile, which is only unmapped sooner.
 */
#define LC_N	     16
#define LC_MAX_BLOCK ((size_t)16 << 20) /* its pages - 1 fit below a 4 KiB or larger page */
#define LC_MAX_BYTES ((size_t)64 << 20)
#define LF_MAX_BLOCK ((size_t)4 << 20)

static struct {
	size_t bytes;		  /* atomic: the bytes of the cached blocks */
	uintptr_t slot[LC_N];	  /* atomic: address | (pages - 1), or 0 */
	unsigned long when[LC_N]; /* atomic: when the slot was last filled (now_ms) */
} lc __attribute__((aligned(64)));

static size_t lc_len(uintptr_t w)
{
	return ((w & (sys_pg - 1)) + 1) << sys_shift;
}

/* A cached block of at least len bytes (and at most 5/4 of it); its
 * length in *got.  NULL: none. */
static char *lc_take(size_t len, size_t *got)
{
	if (__atomic_load_n(&lc.bytes, __ATOMIC_RELAXED) == 0)
		return NULL;
	/* A few tries: one lost only to another thread's take or put. */
	for (int tries = 0; tries < 4; tries++) {
		int best = -1;
		uintptr_t bw = 0;

		for (int i = 0; i < LC_N; i++) {
			uintptr_t w = __atomic_load_n(&lc.slot[i], __ATOMIC_RELAXED);
			size_t l = lc_len(w);

			if (w != 0 && l >= len && l - len <= len / 4 && (best < 0 || l < lc_len(bw))) {
				best = i;
				bw = w;
			}
		}
		if (best < 0)
			return NULL;
		/* Acquire: the block's pages as its last owner left them. */
		if (__atomic_compare_exchange_n(&lc.slot[best], &bw, 0, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			*got = lc_len(bw);
			__atomic_sub_fetch(&lc.bytes, *got, __ATOMIC_RELAXED);
			return (char *)(bw & ~(uintptr_t)(sys_pg - 1));
		}
		/* Another thread took (or replaced) that one: look again. */
	}
	return NULL;
}

/* Keep a freed block; 0 if it does not fit (the caller unmaps it). */
static int lc_put(char *p, size_t len, unsigned long now)
{
	uintptr_t w = (uintptr_t)p | ((len >> sys_shift) - 1);

	if (len > LC_MAX_BLOCK)
		return 0;
	if (__atomic_add_fetch(&lc.bytes, len, __ATOMIC_RELAXED) > LC_MAX_BYTES) {
		__atomic_sub_fetch(&lc.bytes, len, __ATOMIC_RELAXED);
		return 0;
	}
	for (int i = 0; i < LC_N; i++) {
		uintptr_t empty = 0;

		if (__atomic_load_n(&lc.slot[i], __ATOMIC_RELAXED) != 0)
			continue;
		__atomic_store_n(&lc.when[i], now, __ATOMIC_RELAXED);
		/* Release: whoever takes it sees the block as we left it. */
		if (__atomic_compare_exchange_n(&lc.slot[i], &empty, w, 0, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return 1;
	}
	__atomic_sub_fetch(&lc.bytes, len, __ATOMIC_RELAXED);
	return 0;
}

/* A block of at least len bytes (at most 5/4 of it) from the front cache
 * of the caller's index, its length in *got; NULL: none there, no index,
 * or a failed section (the caller asks the shared cache).  The block was
 * put by a section on this index: its pages are as the putter left them
 * (the put commits with release). */
static char *lf_take(size_t len, size_t *got)
{
	uint32_t ioff = fast.ioff, i;
	rsk_arch_area_t area;
	struct cpu_hdr *h;

	if (!rsk_percpu_enter_(rsk_area_offset_(), ioff,
			       __atomic_load_n(&fast_nr, __ATOMIC_ACQUIRE), &area, &i))
		return NULL;
	h = hdr_of(i);
	for (int k = 0; k < LF_N; k++) {
		intptr_t w = __atomic_load_n(&h->lf_slot[k], __ATOMIC_RELAXED);
		size_t l = lc_len((uintptr_t)w);

		if (w == 0 || l < len || l - len > len / 4)
			continue;
		if (RSK_PERCPU_OP_(cmpstore, ioff, area, i, &h->lf_gate, &h->lf_slot[k], w, 0) !=
		    RSK_OK)
			return NULL;
		*got = l;
		return (char *)((uintptr_t)w & ~(uintptr_t)(sys_pg - 1));
	}
	return NULL;
}

/* Keep a freed block of len bytes in the front cache of the caller's
 * index; 0 if it does not fit there (the caller tries the shared cache). */
static int lf_put(char *p, size_t len)
{
	uint32_t ioff = fast.ioff, i;
	rsk_arch_area_t area;
	struct cpu_hdr *h;
	intptr_t w = (intptr_t)((uintptr_t)p | ((len >> sys_shift) - 1));

	if (len > LF_MAX_BLOCK ||
	    !rsk_percpu_enter_(rsk_area_offset_(), ioff,
			       __atomic_load_n(&fast_nr, __ATOMIC_ACQUIRE), &area, &i))
		return 0;
	h = hdr_of(i);
	for (int k = 0; k < LF_N; k++) {
		if (__atomic_load_n(&h->lf_slot[k], __ATOMIC_RELAXED) != 0)
			continue;
		/* Release: whoever takes it sees the block as we left it. */
		return RSK_PERCPU_OP_(cmpstore_release, ioff, area, i, &h->lf_gate, &h->lf_slot[k],
				      0, w) == RSK_OK;
	}
	return 0;
}

/* Unmap the front caches' blocks that were in their slot at the previous
 * release too (all: every one); returns how many.  Each front cache with
 * a block (or a remembered one) is visited under its gate. */
static int lf_flush(int all)
{
	int n = 0;

	for (int i = 0; cache_base != NULL && i < cache_nr; i++) {
		struct cpu_hdr *h = hdr_of((uint32_t)i);
		int any = 0;

		for (int k = 0; k < LF_N; k++)
			any |= __atomic_load_n(&h->lf_slot[k], __ATOMIC_RELAXED) != 0 ||
			       __atomic_load_n(&h->lf_seen[k], __ATOMIC_RELAXED) != 0;
		/* A gate this thread holds already (a handler on top of its
		 * own release) or one that cannot be had: left for later. */
		if (!any || rsk_gate_close(&h->lf_gate, fast_mode, i) != 0)
			continue;
		for (int k = 0; k < LF_N; k++) {
			intptr_t w = __atomic_load_n(&h->lf_slot[k], __ATOMIC_RELAXED);
			size_t l = lc_len((uintptr_t)w);

			if (w != 0 &&
			    (all || w == __atomic_load_n(&h->lf_seen[k], __ATOMIC_RELAXED))) {
				__atomic_store_n(&h->lf_slot[k], 0, __ATOMIC_RELAXED);
				__atomic_sub_fetch(&large_blocks, 1, __ATOMIC_RELAXED);
				__atomic_sub_fetch(&large_bytes, l, __ATOMIC_RELAXED);
				k_munmap((void *)((uintptr_t)w & ~(uintptr_t)(sys_pg - 1)), l);
				w = 0;
				n++;
			}
			__atomic_store_n(&h->lf_seen[k], w, __ATOMIC_RELAXED);
		}
		rsk_gate_open(&h->lf_gate);
	}
	return n;
}

/* The blocks in the front caches and their bytes (statistics: slots
 * other threads change meanwhile). */
static size_t lf_cached(size_t *blocks)
{
	size_t bytes = 0;

	*blocks = 0;
	for (int i = 0; cache_base != NULL && i < cache_nr; i++)
		for (int k = 0; k < LF_N; k++) {
			intptr_t w = __atomic_load_n(&hdr_of((uint32_t)i)->lf_slot[k],
						     __ATOMIC_RELAXED);
			if (w != 0) {
				bytes += lc_len((uintptr_t)w);
				++*blocks;
			}
		}
	return bytes;
}

/* Unmap the cached blocks kept for the release interval or more at `now`
 * (all of them: all), the front caches' as lf_flush says; returns how
 * many. */
static int lc_flush(int all, unsigned long now)
{
	int n = lf_flush(all);

	if (__atomic_load_n(&lc.bytes, __ATOMIC_RELAXED) == 0)
		return n;
	for (int i = 0; i < LC_N; i++) {
		uintptr_t w = __atomic_load_n(&lc.slot[i], __ATOMIC_ACQUIRE);

		if (w == 0 ||
		    (!all && now - __atomic_load_n(&lc.when[i], __ATOMIC_RELAXED) < RELEASE_INTERVAL_MS) ||
		    !__atomic_compare_exchange_n(&lc.slot[i], &w, 0, 0, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		__atomic_sub_fetch(&lc.bytes, lc_len(w), __ATOMIC_RELAXED);
		k_munmap((void *)(w & ~(uintptr_t)(sys_pg - 1)), lc_len(w));
		n++;
	}
	return n;
}

/* n bytes aligned to align; zero: the bytes must read as 0 (a new
 * mapping does, a cached block is cleared). */
static NOINLINE void *large_alloc(size_t n, size_t align, int zero)
{
	size_t len, extra, total;
	char *m, *p;
	int retried = 0;

	if (!ensure_init())
		return boot_alloc(align, n);
	if (n > SIZE_MAX - 2 * sys_pg - align)
		goto nomem;
	/* Whole system pages, aligned to one: what the kernel maps. */
	len = (n + sys_pg - 1) & ~(sys_pg - 1);
	if (len == 0)
		len = sys_pg;
	extra = align > sys_pg ? align - sys_pg : 0;
	total = len + extra;
	if ((len >> PAGE_SHIFT) > (UINTPTR_MAX >> 2))
		goto nomem;
	if (extra == 0 && (p = lf_take(len, &total)) != NULL) {
		/* Counted in the statistics while it was in the front cache. */
		len = total;
		if (zero)
			memset(p, 0, len);
		if (pm_set(p, len, ((uintptr_t)(len >> PAGE_SHIFT) << 2) | E_LARGE, 1) != 0)
			goto unmap;
		return p;
	}
	if (extra == 0 && (p = lc_take(len, &total)) != NULL) {
		len = total;
		if (zero)
			memset(p, 0, len);
		goto found;
	}
	for (;;) {
		m = k_mmap(total);
		if (m != MAP_FAILED)
			break;
		if (retried++ || lc_flush(1, 0) == 0)
			goto nomem;
	}
	p = m;
	if (extra != 0) {
		p = (char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
		if (p > m)
			k_munmap(m, (size_t)(p - m));
		if (p + len < m + total)
			k_munmap(p + len, (size_t)(m + total - (p + len)));
	}
found:
	__atomic_add_fetch(&large_blocks, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&large_bytes, len, __ATOMIC_RELAXED);
	if (pm_set(p, len, ((uintptr_t)(len >> PAGE_SHIFT) << 2) | E_LARGE, 1) != 0)
		goto unmap;
	return p;
unmap:
	__atomic_sub_fetch(&large_blocks, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&large_bytes, len, __ATOMIC_RELAXED);
	k_munmap(p, len);
nomem:
	errno = ENOMEM;
	return NULL;
}

static void large_free(void *p, uintptr_t e)
{
	size_t len = (size_t)(e >> 2) << PAGE_SHIFT;
	unsigned long t;

	if (((uintptr_t)p & (sys_pg - 1)) != 0)
		bad_pointer("free of a pointer never returned by malloc (inside a large block):", p);
	pm_set(p, PAGE, 0, 1);
	t = now_ms(); /* one clock read for the cache and the release */
	if (!lf_put(p, len)) {
		__atomic_sub_fetch(&large_blocks, 1, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&large_bytes, len, __ATOMIC_RELAXED);
		if (!lc_put(p, len, t))
			k_munmap(p, len);
	}
	maybe_release_at(t);
}

/* ---- the functions ---- */

ALWAYS_INLINE void *do_malloc(size_t n)
{
	if (LIKELY(n <= KOFF_MAX)) {
		intptr_t obj;
		int ret = cache_pop_(sc_koff[n], &obj);
		if (LIKELY(ret == RSK_OK))
			return (void *)obj;
		return malloc_slow(n, ret);
	}
	if (LIKELY(n <= SMALL_MAX))
		return small_alloc(KEY(size_class(n)), n, 16);
	return large_alloc(n, 0, 0);
}

/* free() of a small object past its first attempt (ret): the retries,
 * check mode, a flush. */
static NOINLINE void free_small_pool(void *p, unsigned c, int ret)
{
	struct rsk_pool *pl = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
	unsigned aborts = 0;

	if (check_mode) {
		check_block(c, p, "free");
		if (rsk_pool_free(pl, p) != 0)
			bad_pointer("free of a misaligned pointer", p);
		return;
	}
	if (((uintptr_t)p & (pl->align - 1)) != 0)
		bad_pointer("free of a misaligned pointer", p);
	while (rsk_percpu_again(ret, &aborts))
		if ((ret = cache_try_push(c, p)) == RSK_OK)
			return;
	cache_miss(c, 1);
	/* Room now if the capacity grew. */
	if (cache_try_push(c, p) == RSK_OK)
		return;
	rsk_pool_free_slow_(pl, p, settled(ret, RSK_FULL));
}

/* free() of a small object of key `key` whose attempt failed (ret): where
 * it found no index, the thread's cache first (none in check mode). */
static NOINLINE void free_small_slow(void *p, unsigned key, int ret)
{
	unsigned c = KEY_CLASS(key);

	ret = settle_stop(ret);
	if (ret == RSK_NO_INDEX && c < TC_NCLASS && tc_push(c, p))
		return;
	free_small_pool(p, c, ret);
}

/* free() of a pointer whose entry is not a small object. */
static NOINLINE void free_slow(void *p, uintptr_t e)
{
	if ((e & 3) == E_LARGE) {
		large_free(p, e);
		return;
	}
	if (in_boot(p))
		return; /* bootstrap blocks are never reused */
	bad_pointer("free of a pointer never returned by malloc:", p);
}

/* free() past the class map: the page map's small objects (where the
 * class map is not mapped), large blocks, the bootstrap area, NULL. */
static NOINLINE void free_paged(void *p)
{
	uintptr_t e = pm_get(p);

	if (e & E_SMALL) {
		unsigned key = KEY((unsigned)(e >> 2));
		int ret = cache_push_(KOFF(key), p);
		if (ret != RSK_OK)
			free_small_slow(p, key, ret);
		return;
	}
	if (p == NULL)
		return;
	free_slow(p, e);
}

/* free() of a small object past the class map's attempt.  The key again
 * from the map, so that the fast path keeps nothing but p for the call. */
static NOINLINE void free_mapped_slow(void *p, int ret)
{
	free_small_slow(p, __atomic_load_n(&cm_base[(uintptr_t)p >> CM_SHIFT], __ATOMIC_RELAXED), ret);
}

ALWAYS_INLINE void do_free(void *p)
{
	uintptr_t g = (uintptr_t)p >> CM_SHIFT;

	if (LIKELY(g < __atomic_load_n(&cm_n, __ATOMIC_ACQUIRE))) {
		unsigned b = __atomic_load_n(&cm_base[g], __ATOMIC_RELAXED);
		if (LIKELY(b != 0)) {
			int ret = cache_push_(KOFF(b), p);
			if (LIKELY(ret == RSK_OK))
				return;
			free_mapped_slow(p, ret);
			return;
		}
	}
	free_paged(p);
}

/* Usable bytes of a live block. */
static size_t usable(void *p)
{
	uintptr_t e = pm_get(p);

	if ((e & 3) == E_SMALL) {
		unsigned c = (unsigned)(e >> 2);
		if (check_mode)
			return check_block(c, p, "malloc_usable_size");
		return class_size(c);
	}
	if ((e & 3) == E_LARGE)
		return (size_t)(e >> 2) << PAGE_SHIFT;
	if (p != NULL && in_boot(p))
		return boot_size(p);
	if (p != NULL)
		bad_pointer("malloc_usable_size of a pointer never returned by malloc:", p);
	return 0;
}

static void *do_calloc(size_t nmemb, size_t size)
{
	size_t n;
	void *p;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	if (n > SMALL_MAX)
		return large_alloc(n, 0, 1); /* a new mapping is zero already */
	p = do_malloc(n);
	if (p != NULL)
		memset(p, 0, n);
	return p;
}

static void *do_realloc(void *p, size_t n)
{
	uintptr_t e;
	size_t old;
	void *q;

	if (p == NULL)
		return do_malloc(n);
	if (n == 0) {
		do_free(p);
		return NULL;
	}
	e = pm_get(p);
	if ((e & 3) == E_SMALL && !check_mode) {
		unsigned c = (unsigned)(e >> 2);
		if (n <= SMALL_MAX && size_class(n) == c)
			return p;
	} else if ((e & 3) == E_LARGE && n > SMALL_MAX && ((uintptr_t)p & (sys_pg - 1)) == 0) {
		size_t len = (size_t)(e >> 2) << PAGE_SHIFT, nlen;
		if (n > SIZE_MAX - 2 * sys_pg) {
			errno = ENOMEM;
			return NULL;
		}
		nlen = (n + sys_pg - 1) & ~(sys_pg - 1);
		if (nlen == len)
			return p;
		/* The pages move (or grow, or shrink) without a copy.  p's
		 * entry goes first: once they have moved, another thread's new
		 * block may start at p and write its own. */
		pm_set(p, PAGE, 0, 1);
		q = k_mremap(p, len, nlen);
		if (q == MAP_FAILED) {
			pm_set(p, PAGE, e, 1); /* its leaf is mapped: cannot fail */
			errno = ENOMEM;
			return NULL;
		}
		if (pm_set(q, PAGE, ((uintptr_t)(nlen >> PAGE_SHIFT) << 2) | E_LARGE, 1) != 0) {
			/* Keep it findable: back where it was is not possible,
			 * so copy it into a fresh block. */
			void *r = large_alloc(n, 0, 0);
			if (r != NULL)
				memcpy(r, q, len < nlen ? len : nlen);
			k_munmap(q, nlen);
			__atomic_sub_fetch(&large_blocks, 1, __ATOMIC_RELAXED);
			__atomic_sub_fetch(&large_bytes, len, __ATOMIC_RELAXED);
			return r;
		}
		__atomic_add_fetch(&large_bytes, nlen - len, __ATOMIC_RELAXED);
		return q;
	}
	old = usable(p);
	q = do_malloc(n);
	if (q == NULL)
		return NULL;
	memcpy(q, p, old < n ? old : n);
	do_free(p);
	return q;
}

/* n bytes aligned to align (a power of two). */
static void *do_aligned(size_t align, size_t n)
{
	if (align <= 16)
		return do_malloc(n);
	if (align <= PAGE && n <= SMALL_MAX) {
		/* A power-of-two class is aligned to its size (up to a page). */
		size_t s = n;
		if (s < align)
			s = align;
		s = (size_t)1 << (64 - __builtin_clzll((unsigned long long)(s - 1)));
		if (s <= SMALL_MAX)
			return small_alloc(KEY(size_class(s)), n, align);
	}
	return large_alloc(n, align, 0);
}

/* glibc 2.36's memalign (and aligned_alloc): an alignment that is not a
 * power of two is rounded up to one; one above half the address space is
 * EINVAL. */
static void *do_memalign(size_t align, size_t n)
{
	if (align > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if ((align & (align - 1)) != 0)
		align = (size_t)1 << (64 - __builtin_clzll((unsigned long long)align));
	return do_aligned(align, n);
}

static int do_posix_memalign(void **out, size_t align, size_t n)
{
	int saved = errno;
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)) != 0 || align % sizeof(void *) != 0)
		return EINVAL;
	p = do_aligned(align, n);
	if (p == NULL) {
		errno = saved;
		return ENOMEM;
	}
	*out = p;
	return 0;
}

static void *do_pvalloc(size_t n)
{
	size_t pg;

	if (!ensure_init())
		return boot_alloc(PAGE, n);
	pg = sys_pg;

	if (n > SIZE_MAX - pg) {
		errno = ENOMEM;
		return NULL;
	}
	return do_memalign(pg, n == 0 ? pg : (n + pg - 1) & ~(pg - 1));
}

/* ---- statistics ---- */

static size_t read_rss(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	size_t v = 0;
	const char *s = buf;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	while (*s != ' ' && *s != '\0')
		s++;
	while (*s == ' ')
		s++;
	while (*s >= '0' && *s <= '9')
		v = v * 10 + (size_t)(*s++ - '0');
	return v * real_pg;
}

/* Bytes of free objects in index i's caches, and (*cap) the sum of their
 * capacities in bytes; 0 for an index no slow path has run on. */
static size_t cpu_cached(int i, size_t *cap)
{
	const struct cpu_hdr *h = hdr_of((uint32_t)i);
	size_t bytes = 0;

	*cap = 0;
	if (cache_base == NULL || !__atomic_load_n(&h->used, __ATOMIC_RELAXED))
		return 0;
	for (unsigned c = 0; c < NCLASS; c++) {
		size_t sz = class_size(c);
		*cap += (size_t)__atomic_load_n(lim_of((uint32_t)i, c), __ATOMIC_RELAXED) * sz;
		bytes += (size_t)__atomic_load_n(&part_of((uint32_t)i, c)->count, __ATOMIC_RELAXED) * sz;
	}
	return bytes;
}

static void stats_fill(struct rsk_malloc_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->classes = NCLASS;
	st->mode = index_mode == RSK_INDEX_CID;
	st->check = check_mode;
	for (unsigned c = 0; c < NCLASS; c++) {
		struct rsk_pool *p = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
		struct rsk_pool_stats ps;
		size_t sz = class_size(c);
		if (p == NULL || rsk_pool_stats(p, &ps) != 0)
			continue;
		st->mode = p->mode == RSK_INDEX_CID; /* the mode in effect */
		st->mapped += ps.bytes_mapped;
		/* A thread cache's objects are in use for the pool, free here. */
		size_t tc = tc_cached(c);
		st->in_use += (ps.in_use > tc ? ps.in_use - tc : 0) * sz;
		st->cached += (ps.cached + tc) * sz;
		st->central += ps.depot * sz;
	}
	st->cpu_bound = CPU_BOUND;
	for (int i = 0; i < cache_nr; i++) {
		size_t cap, bytes = cpu_cached(i, &cap);
		if (!__atomic_load_n(&hdr_of((uint32_t)i)->used, __ATOMIC_RELAXED))
			continue;
		st->metadata += CPU_BYTES;
		for (unsigned c = 0; c < NCLASS; c++)
			st->caches += __atomic_load_n(lim_of((uint32_t)i, c), __ATOMIC_RELAXED) != 0;
		if (bytes > st->cpu_cached_max)
			st->cpu_cached_max = bytes;
		if (cap > st->cpu_capacity_max)
			st->cpu_capacity_max = cap;
	}
	/* The front caches' blocks count in large_blocks and large_bytes. */
	st->large_blocks = __atomic_load_n(&large_blocks, __ATOMIC_RELAXED);
	st->large_bytes = __atomic_load_n(&large_bytes, __ATOMIC_RELAXED);
	st->mapped += st->large_bytes + __atomic_load_n(&lc.bytes, __ATOMIC_RELAXED);
	{
		size_t fb, fbytes = lf_cached(&fb);
		st->large_blocks = st->large_blocks > fb ? st->large_blocks - fb : 0;
		st->large_bytes = st->large_bytes > fbytes ? st->large_bytes - fbytes : 0;
		st->cached += fbytes + __atomic_load_n(&lc.bytes, __ATOMIC_RELAXED);
	}
	st->metadata += __atomic_load_n(&pm_leaves, __ATOMIC_RELAXED) * PM_LEAF_N * sizeof(uintptr_t);
	st->rss = read_rss();
}

static void stats_print(int fd)
{
	struct rsk_malloc_stats st;
	struct msg m = { .n = 0 };

	stats_fill(&st);
	msg_s(&m, "rseqkit-malloc: index ");
	msg_s(&m, st.mode ? "mm_cid" : "cpu");
	msg_s(&m, rsk_area_offset_() != 0 ? "" : " (no rseq: every operation through the caches' gates)");
	msg_s(&m, st.check ? ", check mode" : "");
	msg_s(&m, "\n  class   size     in use     cached    central     mapped\n");
	msg_out(&m, fd);
	for (unsigned c = 0; c < NCLASS; c++) {
		struct rsk_pool *p = __atomic_load_n(&pools[c], __ATOMIC_ACQUIRE);
		struct rsk_pool_stats ps;
		size_t sz = class_size(c);
		if (p == NULL || rsk_pool_stats(p, &ps) != 0)
			continue;
		msg_s(&m, "  ");
		msg_u(&m, c, 5);
		msg_u(&m, sz, 7);
		msg_u(&m, ps.in_use * sz, 11);
		msg_u(&m, ps.cached * sz, 11);
		msg_u(&m, ps.depot * sz, 11);
		msg_u(&m, ps.bytes_mapped, 11);
		msg_s(&m, "\n");
		msg_out(&m, fd);
	}
	for (int i = 0; i < cache_nr; i++) {
		size_t cap, bytes = cpu_cached(i, &cap);
		if (cap == 0)
			continue;
		msg_s(&m, "  cache ");
		msg_u(&m, (unsigned)i, 3);
		msg_s(&m, ": ");
		msg_u(&m, bytes, 0);
		msg_s(&m, " bytes cached, capacity ");
		msg_u(&m, cap, 0);
		msg_s(&m, " bytes (bound ");
		msg_u(&m, CPU_BOUND, 0);
		msg_s(&m, ")\n");
		msg_out(&m, fd);
	}
	msg_s(&m, "  total: mapped ");
	msg_u(&m, st.mapped, 0);
	msg_s(&m, ", in use ");
	msg_u(&m, st.in_use, 0);
	msg_s(&m, ", cached ");
	msg_u(&m, st.cached, 0);
	msg_s(&m, ", central ");
	msg_u(&m, st.central, 0);
	msg_s(&m, ", large ");
	msg_u(&m, st.large_blocks, 0);
	msg_s(&m, " blocks ");
	msg_u(&m, st.large_bytes, 0);
	msg_s(&m, " bytes, metadata ");
	msg_u(&m, st.metadata, 0);
	msg_s(&m, ", RSS ");
	msg_u(&m, st.rss, 0);
	msg_s(&m, "\n");
	msg_out(&m, fd);
}

static void stats_dtor(void) __attribute__((destructor));
static void stats_dtor(void)
{
	if (stats_at_exit)
		stats_print(stats_fd);
}

/* ---- the API ---- */

#define API __attribute__((visibility("default")))

API void *rsk_malloc(size_t n)
{
	return do_malloc(n);
}

API void rsk_free(void *p)
{
	do_free(p);
}

API void *rsk_calloc(size_t nmemb, size_t size)
{
	return do_calloc(nmemb, size);
}

API void *rsk_realloc(void *p, size_t n)
{
	return do_realloc(p, n);
}

API void *rsk_reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return do_realloc(p, n);
}

API int rsk_posix_memalign(void **memptr, size_t align, size_t n)
{
	return do_posix_memalign(memptr, align, n);
}

API void *rsk_aligned_alloc(size_t align, size_t n)
{
	return do_memalign(align, n);
}

API void *rsk_memalign(size_t align, size_t n)
{
	return do_memalign(align, n);
}

API void *rsk_valloc(size_t n)
{
	if (!ensure_init())
		return boot_alloc(PAGE, n);
	return do_memalign(sys_pg, n);
}

API void *rsk_pvalloc(size_t n)
{
	return do_pvalloc(n);
}

API size_t rsk_malloc_usable_size(void *p)
{
	return p == NULL ? 0 : usable(p);
}

API int rsk_malloc_trim(size_t pad)
{
	(void)pad;
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
		return 0;
	tc_drain_self();
	return release_free(1) > 0;
}

API int rsk_malloc_stats(struct rsk_malloc_stats *st, int fd)
{
	if (st == NULL) {
		errno = EINVAL;
		return -1;
	}
	stats_fill(st);
	if (fd >= 0)
		stats_print(fd);
	return 0;
}

#ifdef RSK_MALLOC_LIBC_NAMES
/* librseqkit-malloc.so: the C library's names (its version script exports
 * them), each an alias of its rsk_ twin: the same code, no extra call. */
#define LIBC_NAME(name, type, params) API type name params __attribute__((alias("rsk_" #name)))
LIBC_NAME(malloc, void *, (size_t n));
LIBC_NAME(free, void, (void *p));
LIBC_NAME(calloc, void *, (size_t nmemb, size_t size));
LIBC_NAME(realloc, void *, (void *p, size_t n));
LIBC_NAME(reallocarray, void *, (void *p, size_t nmemb, size_t size));
LIBC_NAME(posix_memalign, int, (void **memptr, size_t align, size_t n));
LIBC_NAME(aligned_alloc, void *, (size_t align, size_t n));
LIBC_NAME(memalign, void *, (size_t align, size_t n));
LIBC_NAME(valloc, void *, (size_t n));
LIBC_NAME(pvalloc, void *, (size_t n));
LIBC_NAME(malloc_usable_size, size_t, (void *p));
LIBC_NAME(malloc_trim, int, (size_t pad));

API struct mallinfo2 mallinfo2(void)
{
	struct rsk_malloc_stats st;
	struct mallinfo2 mi;

	memset(&mi, 0, sizeof(mi));
	stats_fill(&st);
	mi.arena = st.mapped - st.large_bytes;
	mi.hblks = st.large_blocks;
	mi.hblkhd = st.large_bytes;
	mi.uordblks = st.in_use + st.large_bytes;
	mi.fordblks = st.cached + st.central;
	mi.keepcost = 0;
	return mi;
}
#endif

#ifdef RSK_MALLOC_LIBC_NAMES
/*
 * The C++ operators new and delete (the Itanium ABI's mangled names, as
 * libstdc++ and libc++ define them), so that a C++ program's allocations
 * reach the same inline paths without a call through libstdc++.  A
 * throwing new that finds no memory calls std::get_new_handler()'s
 * handler until there is none, then throws std::bad_alloc through
 * libstdc++'s own std::__throw_bad_alloc() (weak references: a program
 * without libstdc++ has no C++ to call them, and aborts instead).  The
 * nothrow forms return NULL without calling the handler.  Every delete
 * is free(): the size and alignment they are given are not needed.
 */
#if __SIZEOF_SIZE_T__ == 8
#define CXX_SZ "m"
#else
#define CXX_SZ "j"
#endif
typedef void (*new_handler_fn)(void);
extern new_handler_fn cxx_get_new_handler(void) __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
extern void cxx_throw_bad_alloc(void) __asm__("_ZSt17__throw_bad_allocv") __attribute__((weak, noreturn));

static COLD void *cxx_no_memory(size_t n, size_t align)
{
	for (;;) {
		new_handler_fn h = cxx_get_new_handler != NULL ? cxx_get_new_handler() : NULL;
		void *p;
		if (h == NULL) {
			if (cxx_throw_bad_alloc != NULL)
				cxx_throw_bad_alloc();
			bad_pointer("operator new: out of memory, and no C++ runtime to throw std::bad_alloc; size",
				    (void *)n);
		}
		h();
		p = align > 16 ? do_memalign(align, n) : do_malloc(n);
		if (p != NULL)
			return p;
	}
}

API void *cxx_new(size_t n) __asm__("_Znw" CXX_SZ);
API void *cxx_new(size_t n)
{
	void *p = do_malloc(n);

	return LIKELY(p != NULL) ? p : cxx_no_memory(n, 0);
}

API void *cxx_new_array(size_t n) __asm__("_Zna" CXX_SZ);
API void *cxx_new_array(size_t n)
{
	void *p = do_malloc(n);

	return LIKELY(p != NULL) ? p : cxx_no_memory(n, 0);
}

API void *cxx_new_nothrow(size_t n, const void *tag) __asm__("_Znw" CXX_SZ "RKSt9nothrow_t");
API void *cxx_new_nothrow(size_t n, const void *tag)
{
	(void)tag;
	return do_malloc(n);
}

API void *cxx_new_array_nothrow(size_t n, const void *tag) __asm__("_Zna" CXX_SZ "RKSt9nothrow_t");
API void *cxx_new_array_nothrow(size_t n, const void *tag)
{
	(void)tag;
	return do_malloc(n);
}

API void *cxx_new_aligned(size_t n, size_t al) __asm__("_Znw" CXX_SZ "St11align_val_t");
API void *cxx_new_aligned(size_t n, size_t al)
{
	void *p = do_memalign(al, n);

	return LIKELY(p != NULL) ? p : cxx_no_memory(n, al);
}

API void *cxx_new_array_aligned(size_t n, size_t al) __asm__("_Zna" CXX_SZ "St11align_val_t");
API void *cxx_new_array_aligned(size_t n, size_t al)
{
	void *p = do_memalign(al, n);

	return LIKELY(p != NULL) ? p : cxx_no_memory(n, al);
}

API void *cxx_new_aligned_nothrow(size_t n, size_t al, const void *tag)
	__asm__("_Znw" CXX_SZ "St11align_val_tRKSt9nothrow_t");
API void *cxx_new_aligned_nothrow(size_t n, size_t al, const void *tag)
{
	(void)tag;
	return do_memalign(al, n);
}

API void *cxx_new_array_aligned_nothrow(size_t n, size_t al, const void *tag)
	__asm__("_Zna" CXX_SZ "St11align_val_tRKSt9nothrow_t");
API void *cxx_new_array_aligned_nothrow(size_t n, size_t al, const void *tag)
{
	(void)tag;
	return do_memalign(al, n);
}

/* The deletes: free(), whatever else they are given. */
#define CXX_DELETE(fn, sym, ...)                                               \
	API void fn(void *p, ##__VA_ARGS__) __asm__(sym);                      \
	API void fn(void *p, ##__VA_ARGS__)                                    \
	{                                                                      \
		do_free(p);                                                    \
	}
CXX_DELETE(cxx_delete, "_ZdlPv")
CXX_DELETE(cxx_delete_array, "_ZdaPv")
CXX_DELETE(cxx_delete_sized, "_ZdlPv" CXX_SZ, size_t n __attribute__((unused)))
CXX_DELETE(cxx_delete_array_sized, "_ZdaPv" CXX_SZ, size_t n __attribute__((unused)))
CXX_DELETE(cxx_delete_nothrow, "_ZdlPvRKSt9nothrow_t", const void *t __attribute__((unused)))
CXX_DELETE(cxx_delete_array_nothrow, "_ZdaPvRKSt9nothrow_t", const void *t __attribute__((unused)))
CXX_DELETE(cxx_delete_aligned, "_ZdlPvSt11align_val_t", size_t a __attribute__((unused)))
CXX_DELETE(cxx_delete_array_aligned, "_ZdaPvSt11align_val_t", size_t a __attribute__((unused)))
CXX_DELETE(cxx_delete_sized_aligned, "_ZdlPv" CXX_SZ "St11align_val_t", size_t n __attribute__((unused)),
	   size_t a __attribute__((unused)))
CXX_DELETE(cxx_delete_array_sized_aligned, "_ZdaPv" CXX_SZ "St11align_val_t",
	   size_t n __attribute__((unused)), size_t a __attribute__((unused)))
CXX_DELETE(cxx_delete_aligned_nothrow, "_ZdlPvSt11align_val_tRKSt9nothrow_t",
	   size_t a __attribute__((unused)), const void *t __attribute__((unused)))
CXX_DELETE(cxx_delete_array_aligned_nothrow, "_ZdaPvSt11align_val_tRKSt9nothrow_t",
	   size_t a __attribute__((unused)), const void *t __attribute__((unused)))
#endif
