/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/malloc.c - the malloc family: whole allocators, side by side.
 *
 * The workloads below call only malloc() and free(): the same code runs
 * under each allocator, each in a helper process of its own (child.c):
 * glibc (LD_PRELOAD emptied), jemalloc, mimalloc, tcmalloc (rival-*.c)
 * and rseqkit-malloc (LD_PRELOAD=librseqkit-malloc.so: the build tree's,
 * or RSEQKIT_MALLOC_LIB).  No row runs in this process: its heap has
 * served every other family.
 *
 *   malloc-16 ... malloc-1m  one operation = malloc(size), write the first
 *            and last words, read them back, free() (same thread).
 *   malloc-pc  threads in pairs (2k produces, 2k+1 consumes) joined by a
 *            single-producer single-consumer ring; the producer allocates
 *            (16 to 256 bytes, in turn), writes a sequence number, passes
 *            the object; the consumer checks it and frees it: every free
 *            is a free of another thread's object.  One operation = one
 *            object consumed (IMPL_COUNTS).
 *   malloc-churn  a server's heap: each thread owns CH_LOCAL slots, all
 *            threads share CH_SHARED more; an operation allocates an object
 *            of a random size (90% 16-256 B, 9% up to 4 KiB, 1% up to
 *            32 KiB), writes a header and a word per page, and puts it in
 *            a random slot (a shared one one time in four, swapped in
 *            atomically), freeing the object it replaces: random
 *            lifetimes, and frees of other threads' objects.
 *   malloc-share  false sharing (cache-scratch): the run's first thread
 *            allocates one 16-byte object per worker, back to back; each
 *            worker frees the one handed to it, then per operation
 *            allocates 16 bytes, writes them SHARE_WRITES times and frees
 *            them.  An allocator that gives a thread memory sharing a
 *            cache line with another thread's makes every write a
 *            coherence miss.
 *
 * The checks: every object comes back with what was written into it;
 * per thread, allocations == frees (pairs, share) or allocations ==
 * frees + objects still held (pc, churn, counted in the check); no
 * malloc() returned NULL.
 *
 * Memory (the family's `after`): malloc-churn in a fresh process per
 * allocator and thread count (64 and 256), restricted to two CPUs: peak
 * RSS (VmHWM), RSS once every object is freed, and RSS after the
 * allocator's release call (malloc_trim where it has one, else its own:
 * mallctl arena purge, mi_collect, MallocExtension_ReleaseFreeMemory).
 */
#include <dlfcn.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench.h"

#define PC_RING 256
#define PC_SPIN 64
#define CH_LOCAL 128
#define CH_SHARED 4096
#define SHARE_SIZE 16
#define SHARE_WRITES 64

/* ------------------------------------------------------------------ */
/* The allocators' processes                                           */

const struct helper helper_glibc = {
	.name = "glibc", .env = "LD_PRELOAD", .value = "",
};

/* librseqkit-malloc.so: RSEQKIT_MALLOC_LIB, else the build tree's, else
 * the soname where the loader looks (an installed library). */
static char rskm_path[PATH_MAX] = "librseqkit-malloc.so";
const struct helper helper_rskmalloc = {
	.name = "rseqkit-malloc", .env = "LD_PRELOAD", .value = rskm_path, .library = rskm_path,
	.symbol = NULL, .package = NULL,
};

/* rseqkit-malloc where the process cannot run sections (RSEQKIT_DISABLE=1):
 * the "rseqkit-fallback" rows of malloc-16 and malloc-256, beside glibc's
 * malloc (rseqkit-bench --fallback). */
static const struct helper helper_rskmalloc_fallback = {
	.name = "rseqkit-malloc-norseq", .env = "LD_PRELOAD", .value = rskm_path,
	.library = rskm_path, .env2 = "RSEQKIT_DISABLE", .value2 = "1",
};

__attribute__((constructor)) static void rskm_locate(void)
{
	const char *e = getenv("RSEQKIT_MALLOC_LIB");

	if (e && *e) {
		snprintf(rskm_path, sizeof(rskm_path), "%s", e);
		return;
	}
#ifdef BENCH_BUILD_DIR
	if (access(BENCH_BUILD_DIR "/lib/librseqkit-malloc.so", R_OK) == 0)
		snprintf(rskm_path, sizeof(rskm_path), "%s", BENCH_BUILD_DIR "/lib/librseqkit-malloc.so");
#endif
}

/* The allocators, in table order: rseqkit-malloc, then the four rivals. */
static const struct helper *const allocators[] = {
	&helper_rskmalloc, &helper_glibc, &rival_jemalloc, &rival_mimalloc, &rival_tcmalloc,
};
#define NALLOC (int)(sizeof(allocators) / sizeof(allocators[0]))

/* ------------------------------------------------------------------ */
/* State                                                               */

struct ma_thr {
	uint64_t allocs, frees;
	int err;	/* ENOMEM: a malloc() returned NULL */
	uint64_t rng;
	void **slots;	/* churn: CH_LOCAL objects or NULL */
	uint64_t *obj;	/* share: the object handed to this thread */
} __attribute__((aligned(CACHE_LINE)));

struct ma_ring {
	struct {
		size_t head, tail_seen;
		uint64_t want;
	} c __attribute__((aligned(CACHE_LINE)));
	struct {
		size_t tail, head_seen;
		uint64_t seq;
	} p __attribute__((aligned(CACHE_LINE)));
	uint64_t *slot[PC_RING] __attribute__((aligned(CACHE_LINE)));
};

struct ma_state {
	int nthreads;
	size_t size; /* pairs */
	int bad;     /* objects that came back wrong */
	struct ma_thr *mt;
	struct ma_ring *rings; /* pc: nthreads / 2 */
	void **shared;	       /* churn: CH_SHARED slots */
	uint64_t *handed;      /* share: the objects the first thread allocated */
};

static void *ma_setup(int nthreads, size_t size)
{
	struct ma_state *s = bench_alloc(sizeof(*s));

	s->nthreads = nthreads;
	s->size = size;
	s->mt = bench_alloc(sizeof(*s->mt) * (size_t)nthreads);
	for (int i = 0; i < nthreads; i++)
		s->mt[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) + 12345;
	return s;
}

static void ma_teardown(void *sh)
{
	struct ma_state *s = sh;

	if (s->rings)
		for (int k = 0; k < s->nthreads / 2; k++) {
			struct ma_ring *q = &s->rings[k];
			while (q->c.head != q->p.tail)
				free(q->slot[q->c.head++ % PC_RING]);
		}
	for (int i = 0; i < s->nthreads; i++) {
		for (int k = 0; s->mt[i].slots && k < CH_LOCAL; k++)
			free(s->mt[i].slots[k]);
		free(s->mt[i].slots);
		free(s->mt[i].obj);
	}
	for (int k = 0; s->shared && k < CH_SHARED; k++)
		free(s->shared[k]);
	free(s->shared);
	free(s->rings);
	free(s->mt);
	free(s);
}

static int ma_err(struct ma_state *s, struct thr *t, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		if (s->mt[i].err) {
			snprintf(err, len, "thread %d: malloc returned NULL", i);
			return -1;
		}
	(void)t;
	if (s->bad) {
		snprintf(err, len, "%d object(s) came back with wrong contents", s->bad);
		return -1;
	}
	return 0;
}

static inline uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* ------------------------------------------------------------------ */
/* malloc+free pairs                                                   */

static void pairs_fn(void *sh, struct thr *t, unsigned n)
{
	struct ma_state *s = sh;
	struct ma_thr *m = &s->mt[t->id];
	size_t sz = s->size, last = sz / 8 - 1;
	uint64_t allocs = m->allocs;
	int bad = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t *o = malloc(sz);
		if (__builtin_expect(o == NULL, 0)) {
			m->err = ENOMEM;
			break;
		}
		uint64_t tag = ((uint64_t)(t->id + 1) << 40) + ++allocs;
		o[0] = o[last] = tag;
		/* The object escapes: the stores happen, the loads reload. */
		__asm__ __volatile__("" : : "r"(o) : "memory");
		bad |= o[0] != tag || o[last] != tag;
		free(o);
	}
	m->frees += allocs - m->allocs;
	m->allocs = allocs;
	if (bad)
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
}

static int pairs_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ma_state *s = sh;

	if (ma_err(s, t, n, err, len))
		return -1;
	for (int i = 0; i < n; i++)
		if (s->mt[i].allocs != t[i].ops_all) {
			snprintf(err, len, "thread %d: %ju malloc+free pairs, %ju operations", i,
				 (uintmax_t)s->mt[i].allocs, (uintmax_t)t[i].ops_all);
			return -1;
		}
	return 0;
}

#define PAIRS_SETUP(sz)                                                        \
	static void *pairs_setup_##sz(int nthreads)                            \
	{                                                                      \
		return ma_setup(nthreads, sz);                                 \
	}
PAIRS_SETUP(16)
PAIRS_SETUP(64)
PAIRS_SETUP(256)
PAIRS_SETUP(4096)
PAIRS_SETUP(32768)
PAIRS_SETUP(1048576)

/* ------------------------------------------------------------------ */
/* Producer/consumer                                                   */

static const size_t pc_sizes[8] = {16, 24, 32, 48, 64, 96, 128, 256};

static void *pc_setup(int nthreads)
{
	struct ma_state *s = ma_setup(nthreads, 0);

	s->rings = bench_alloc(sizeof(*s->rings) * (size_t)(nthreads / 2 > 0 ? nthreads / 2 : 1));
	return s;
}

/* The k-th pause waiting for the other side: false if the run stopped. */
static bool pc_pause(unsigned k, const int *stop)
{
	if (__atomic_load_n(stop, __ATOMIC_RELAXED))
		return false;
	if (k >= PC_SPIN)
		sched_yield();
#if defined(__x86_64__) || defined(__i386__)
	else
		__builtin_ia32_pause();
#endif
	return true;
}

static void pc_fn(void *sh, struct thr *t, unsigned n)
{
	struct ma_state *s = sh;
	int pair = t->id / 2;
	struct ma_ring *q = &s->rings[pair];
	struct ma_thr *m = &s->mt[t->id];
	const int *stop = &t->run->stop;
	int bad = 0;

	if (t->id % 2 == 0) { /* producer */
		size_t tail = q->p.tail;
		for (unsigned i = 0; i < n; i++) {
			uint64_t *o = malloc(pc_sizes[q->p.seq % 8]);
			if (__builtin_expect(o == NULL, 0)) {
				m->err = ENOMEM;
				break;
			}
			m->allocs++;
			o[0] = q->p.seq;
			o[1] = (uint64_t)pair;
			bool room = true;
			for (unsigned k = 0; tail - q->p.head_seen >= PC_RING; k++) {
				q->p.head_seen = __atomic_load_n(&q->c.head, __ATOMIC_ACQUIRE);
				if (tail - q->p.head_seen < PC_RING)
					break;
				if (!(room = pc_pause(k, stop)))
					break;
			}
			if (!room) { /* stopped with the object in hand */
				free(o);
				m->frees++;
				break;
			}
			q->p.seq++;
			q->slot[tail % PC_RING] = o;
			__atomic_store_n(&q->p.tail, ++tail, __ATOMIC_RELEASE);
		}
	} else { /* consumer */
		size_t head = q->c.head;
		uint64_t done = 0;
		for (unsigned i = 0; i < n; i++) {
			bool item = true;
			for (unsigned k = 0; head == q->c.tail_seen; k++) {
				q->c.tail_seen = __atomic_load_n(&q->p.tail, __ATOMIC_ACQUIRE);
				if (head != q->c.tail_seen)
					break;
				if (!(item = pc_pause(k, stop)))
					break;
			}
			if (!item)
				break;
			uint64_t *o = q->slot[head % PC_RING];
			bad |= o[0] != q->c.want++ || o[1] != (uint64_t)pair;
			free(o);
			m->frees++;
			done++;
			__atomic_store_n(&q->c.head, ++head, __ATOMIC_RELEASE);
		}
		t->objs += done;
	}
	if (bad)
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
}

static int pc_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ma_state *s = sh;

	if (ma_err(s, t, n, err, len))
		return -1;
	for (int k = 0; k < n / 2; k++) {
		const struct ma_thr *p = &s->mt[2 * k], *c = &s->mt[2 * k + 1];
		uint64_t left = s->rings[k].p.tail - s->rings[k].c.head;
		if (p->allocs != p->frees + c->frees + left || c->allocs != 0) {
			snprintf(err, len,
				 "pair %d: allocated %ju, freed %ju by the producer, %ju by the "
				 "consumer, %ju left in the ring",
				 k, (uintmax_t)p->allocs, (uintmax_t)p->frees, (uintmax_t)c->frees,
				 (uintmax_t)left);
			return -1;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Churn                                                               */

static void *churn_setup(int nthreads)
{
	struct ma_state *s = ma_setup(nthreads, 0);

	s->shared = bench_alloc(sizeof(void *) * CH_SHARED);
	return s;
}

static void churn_init(void *sh, struct thr *t)
{
	struct ma_state *s = sh;

	s->mt[t->id].slots = calloc(CH_LOCAL, sizeof(void *));
	if (!s->mt[t->id].slots)
		s->mt[t->id].err = ENOMEM;
}

static inline size_t churn_size(uint64_t r)
{
	unsigned p = (unsigned)(r % 100);

	r >>= 8;
	if (p < 90)
		return 16 + (r % 16) * 16;	  /* 16-256 B */
	if (p < 99)
		return 256 + (r % (4096 - 256));  /* up to 4 KiB */
	return 4096 + (r % (32768 - 4096));	  /* up to 32 KiB */
}

/* An object's header: its size and the size's complement. */
static inline int churn_bad(const uint64_t *o)
{
	return o[1] != ~o[0] || o[0] < 16 || o[0] > 32768;
}

static void churn_fn(void *sh, struct thr *t, unsigned n)
{
	struct ma_state *s = sh;
	struct ma_thr *m = &s->mt[t->id];
	int bad = 0;

	if (!m->slots)
		return;
	for (unsigned i = 0; i < n; i++) {
		uint64_t r = xorshift(&m->rng);
		size_t sz = churn_size(r);
		uint64_t *o = malloc(sz);
		if (__builtin_expect(o == NULL, 0)) {
			m->err = ENOMEM;
			break;
		}
		m->allocs++;
		o[0] = sz;
		o[1] = ~(uint64_t)sz;
		for (size_t off = 4096; off < sz; off += 4096) /* touch every page */
			((char *)o)[off] = 1;
		uint64_t *old;
		if ((r >> 40) % 4 == 0)
			old = __atomic_exchange_n((uint64_t **)&s->shared[(r >> 44) % CH_SHARED], o,
						  __ATOMIC_ACQ_REL);
		else {
			void **slot = &m->slots[(r >> 44) % CH_LOCAL];
			old = *slot;
			*slot = o;
		}
		if (old) {
			bad |= churn_bad(old);
			free(old);
			m->frees++;
		}
	}
	if (bad)
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
}

static int churn_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ma_state *s = sh;
	uint64_t allocs = 0, frees = 0, held = 0;

	if (ma_err(s, t, n, err, len))
		return -1;
	for (int i = 0; i < n; i++) {
		allocs += s->mt[i].allocs;
		frees += s->mt[i].frees;
		for (int k = 0; k < CH_LOCAL; k++)
			if (s->mt[i].slots[k]) {
				held++;
				if (churn_bad(s->mt[i].slots[k]))
					s->bad++;
			}
	}
	for (int k = 0; k < CH_SHARED; k++)
		if (s->shared[k]) {
			held++;
			if (churn_bad(s->shared[k]))
				s->bad++;
		}
	if (allocs != frees + held || s->bad) {
		snprintf(err, len, "allocated %ju, freed %ju, %ju held; %d bad header(s)",
			 (uintmax_t)allocs, (uintmax_t)frees, (uintmax_t)held, s->bad);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* False sharing                                                       */

static void *share_setup(int nthreads)
{
	struct ma_state *s = ma_setup(nthreads, SHARE_SIZE);

	/* One thread allocates them all, back to back. */
	for (int i = 0; i < nthreads; i++)
		if (!(s->mt[i].obj = malloc(SHARE_SIZE)))
			s->mt[i].err = ENOMEM;
	return s;
}

static void share_fn(void *sh, struct thr *t, unsigned n)
{
	struct ma_state *s = sh;
	struct ma_thr *m = &s->mt[t->id];
	int bad = 0;

	for (unsigned i = 0; i < n; i++) {
		volatile uint64_t *o = m->obj;
		if (!o)
			break;
		o[0] = 0;
		for (int w = 0; w < SHARE_WRITES; w++)
			o[0] = o[0] + 1;
		bad |= o[0] != SHARE_WRITES;
		free((void *)o);
		m->frees++;
		if (!(m->obj = malloc(SHARE_SIZE))) {
			m->err = ENOMEM;
			break;
		}
		m->allocs++;
	}
	if (bad)
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
}

static int share_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ma_state *s = sh;

	if (ma_err(s, t, n, err, len))
		return -1;
	for (int i = 0; i < n; i++)
		if (s->mt[i].frees != t[i].ops_all || s->mt[i].allocs != s->mt[i].frees) {
			snprintf(err, len, "thread %d: %ju frees, %ju allocations, %ju operations",
				 i, (uintmax_t)s->mt[i].frees, (uintmax_t)s->mt[i].allocs,
				 (uintmax_t)t[i].ops_all);
			return -1;
		}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The rows: each op under each allocator                              */

#define AROW(op, name, setup, init, fn, check, flags, h)                       \
	{op, name, setup, init, fn, NULL, check, ma_teardown, flags, NULL, h}
#define ALLOC_ROWS(op, setup, init, fn, check, flags)                          \
	AROW(op, "rseqkit-malloc", setup, init, fn, check, flags, &helper_rskmalloc), \
	AROW(op, "glibc", setup, init, fn, check, flags, &helper_glibc),      \
	AROW(op, "jemalloc", setup, init, fn, check, flags, &rival_jemalloc), \
	AROW(op, "mimalloc", setup, init, fn, check, flags, &rival_mimalloc), \
	AROW(op, "tcmalloc", setup, init, fn, check, flags, &rival_tcmalloc)

static const struct impl malloc_impls[] = {
	ALLOC_ROWS("malloc-16", pairs_setup_16, NULL, pairs_fn, pairs_check, 0),
	AROW("malloc-16", "rseqkit-fallback", pairs_setup_16, NULL, pairs_fn, pairs_check, 0,
	     &helper_rskmalloc_fallback),
	ALLOC_ROWS("malloc-64", pairs_setup_64, NULL, pairs_fn, pairs_check, 0),
	ALLOC_ROWS("malloc-256", pairs_setup_256, NULL, pairs_fn, pairs_check, 0),
	AROW("malloc-256", "rseqkit-fallback", pairs_setup_256, NULL, pairs_fn, pairs_check, 0,
	     &helper_rskmalloc_fallback),
	ALLOC_ROWS("malloc-4k", pairs_setup_4096, NULL, pairs_fn, pairs_check, 0),
	ALLOC_ROWS("malloc-32k", pairs_setup_32768, NULL, pairs_fn, pairs_check, 0),
	ALLOC_ROWS("malloc-1m", pairs_setup_1048576, NULL, pairs_fn, pairs_check, 0),
	ALLOC_ROWS("malloc-pc", pc_setup, NULL, pc_fn, pc_check, IMPL_PAIRS | IMPL_COUNTS),
	ALLOC_ROWS("malloc-churn", churn_setup, churn_init, churn_fn, churn_check, 0),
	ALLOC_ROWS("malloc-share", share_setup, NULL, share_fn, share_check, 0),
};

static const char *const small_ops[] = {"malloc-16", "malloc-64", "malloc-256"};

/* ------------------------------------------------------------------ */
/* Memory: churn in a fresh process per allocator                      */

static const int mem_threads[] = {64, 256};
#define NMEMT (int)(sizeof(mem_threads) / sizeof(mem_threads[0]))

struct mem_result {
	bool valid;
	double peak_kib, freed_kib, released_kib;
	char release[48];
};
static struct mem_result mem[NALLOC][NMEMT];
static int mem_cpus[2], mem_ncpus;
static unsigned mem_ms;
static bool mem_ran;

static long status_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t kl = strlen(key);

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

/* Whether `sym` is defined by the preloaded allocator (or by glibc where
 * nothing is preloaded): so malloc_trim() is called only where it is the
 * allocator's own. */
static void *own_symbol(const char *sym)
{
	const char *pre = getenv("LD_PRELOAD");
	void *p = dlsym(RTLD_DEFAULT, sym);
	Dl_info di;

	if (!p)
		return NULL;
	if (!pre || !*pre)
		return p;
	const char *base = strrchr(pre, '/') ? strrchr(pre, '/') + 1 : pre;
	if (!dladdr(p, &di) || !di.dli_fname)
		return NULL;
	const char *got = strrchr(di.dli_fname, '/') ? strrchr(di.dli_fname, '/') + 1 : di.dli_fname;
	return strcmp(got, base) ? NULL : p;
}

/* The allocator's call that gives free memory back to the system. */
static const char *release_memory(void)
{
	void *f;

	if ((f = own_symbol("malloc_trim"))) {
		((int (*)(size_t))f)(0);
		return "malloc_trim";
	}
	if ((f = own_symbol("mallctl"))) {
		((int (*)(const char *, void *, size_t *, void *, size_t))f)("arena.4096.purge", NULL,
									      NULL, NULL, 0);
		return "mallctl-purge";
	}
	if ((f = own_symbol("mi_collect"))) {
		((void (*)(bool))f)(true);
		return "mi_collect";
	}
	if ((f = own_symbol("MallocExtension_ReleaseFreeMemory"))) {
		((void (*)(void))f)();
		return "ReleaseFreeMemory";
	}
	return "none";
}

/* The child (rseqkit-bench --malloc-memory THREADS MS): one churn run, its
 * figures on stdout. */
int malloc_memory_child(int threads, unsigned ms)
{
	static const struct impl churn = {"malloc-churn", "memory", churn_setup, churn_init,
					  churn_fn, NULL, churn_check, ma_teardown, 0, NULL, NULL};
	struct sample smp;

	if (threads < 1 || threads > 4096 || ms < 1)
		return 2;
	if (run_once(&churn, threads, NULL, ms, &smp) != 0)
		return 1;
	long peak = status_kib("VmHWM"), freed = status_kib("VmRSS");
	const char *how = release_memory();
	long released = status_kib("VmRSS");
	printf("%ld %ld %ld %s\n", peak, freed, released, how);
	return fflush(stdout) ? 1 : 0;
}

static int mem_run_one(const struct helper *h, int threads, unsigned ms, struct mem_result *out)
{
	int fd[2];
	char t[16], m[16], line[256] = "";

	if (pipe(fd))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		for (int i = 0; i < mem_ncpus; i++)
			CPU_SET(mem_cpus[i], &set);
		sched_setaffinity(0, sizeof(set), &set);
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		setenv(h->env, h->value, 1);
		snprintf(t, sizeof(t), "%d", threads);
		snprintf(m, sizeof(m), "%u", ms);
		execl("/proc/self/exe", "rseqkit-bench", "--malloc-memory", t, m, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	} else {
		close(fd[0]);
	}
	int st = 0;
	if (waitpid(pid, &st, 0) < 0)
		st = 1 << 8; /* as if it exited 1 */
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
	    sscanf(line, "%lf %lf %lf %47s", &out->peak_kib, &out->freed_kib, &out->released_kib,
		   out->release) != 4) {
		progress_clear();
		fprintf(stderr, "rseqkit-bench: malloc memory run, %s, %d threads: the child %s\n",
			h->name, threads,
			WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "failed (see above)");
		return -1;
	}
	out->valid = true;
	return 0;
}

static bool allocator_runs(const struct helper *h)
{
	return !helper_missing(h) && helper_ready(h);
}

static int malloc_after(const char *const *ops, int nops, unsigned ms)
{
	int failures = 0;
	bool want = false;

	for (int o = 0; o < nops; o++)
		want |= !strcmp(ops[o], "malloc-churn");
	if (!want)
		return 0;
	mem_ncpus = nallowed < 2 ? nallowed : 2;
	for (int i = 0; i < mem_ncpus; i++)
		mem_cpus[i] = allowed_cpus[i];
	mem_ms = ms < 60 ? 60 : ms * 4;
	memset(mem, 0, sizeof(mem));
	/* Interleaved: every allocator at one count, then the next count. */
	for (int c = 0; c < NMEMT; c++)
		for (int a = 0; a < NALLOC; a++) {
			if (!allocator_runs(allocators[a]))
				continue;
			progress("malloc: memory, %s, %d threads on %d CPUs", allocators[a]->name,
				 mem_threads[c], mem_ncpus);
			if (mem_run_one(allocators[a], mem_threads[c], mem_ms, &mem[a][c]))
				failures++;
		}
	mem_ran = true;
	return failures;
}

/* ------------------------------------------------------------------ */
/* Summary                                                             */

static const struct row *best_rival(const struct row *rows, int nrows, const char *op, int threads)
{
	const struct row *b = NULL;

	for (int a = 1; a < NALLOC; a++) {
		const struct row *r = find_row(rows, nrows, op, allocators[a]->name, threads);
		if (r && (!b || r->ns_per_op < b->ns_per_op))
			b = r;
	}
	return b;
}

static void malloc_summary(const struct row *rows, int nrows)
{
	int counts[MAX_THREAD_COUNTS], nc = 0;

	if (bench_fallback_set)
		return; /* its rows are the report's fallback lines */
	for (int i = 0; i < nrows; i++) {
		bool seen = false;
		for (int c = 0; c < nc; c++)
			seen |= counts[c] == rows[i].threads;
		if (!seen && nc < MAX_THREAD_COUNTS)
			counts[nc++] = rows[i].threads;
	}
	printf("\nmalloc targets: small-object malloc+free, rseqkit-malloc / the fastest of glibc, "
	       "jemalloc, mimalloc, tcmalloc (this run):\n");
	if (helper_missing(&helper_rskmalloc))
		printf("  n/a: rseqkit-malloc not measured (%s not built: make malloc)\n", rskm_path);
	else if (!helper_ready(&helper_rskmalloc))
		printf("  n/a: rseqkit-malloc not measured (its child did not start: see above)\n");
	for (size_t k = 0; k < sizeof(small_ops) / sizeof(small_ops[0]); k++)
		for (int c = 0; c < nc; c++) {
			const struct row *r = find_row(rows, nrows, small_ops[k], "rseqkit-malloc",
						       counts[c]);
			const struct row *b = best_rival(rows, nrows, small_ops[k], counts[c]);
			char what[128];
			if (!r || !b)
				continue;
			snprintf(what, sizeof(what), "%-10s %2d thread%s / %-8s %8.2f / %8.2f ns",
				 small_ops[k], counts[c], counts[c] > 1 ? "s" : " ", b->im->name,
				 r->ns_per_op, b->ns_per_op);
			if (counts[c] == 1)
				print_target(what, r->ns_per_op / b->ns_per_op, "<=", 1.10);
			else
				print_target(what, r->ns_per_op / b->ns_per_op, "<", 1.00);
		}
	printf("\nmalloc: rseqkit-malloc / glibc and / the fastest rival, ns per op, every op:\n");
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (r->failed || strcmp(r->im->name, "rseqkit-malloc"))
			continue;
		const struct row *g = find_row(rows, nrows, r->im->op, "glibc", r->threads);
		const struct row *b = best_rival(rows, nrows, r->im->op, r->threads);
		char xg[16] = "-", xb[16] = "-";
		if (g)
			snprintf(xg, sizeof(xg), "%.2fx", r->ns_per_op / g->ns_per_op);
		if (b)
			snprintf(xb, sizeof(xb), "%.2fx", r->ns_per_op / b->ns_per_op);
		printf("  %-12s %2d thread%s  / glibc %7s   / best rival (%s) %7s\n", r->im->op,
		       r->threads, r->threads > 1 ? "s" : " ", xg, b ? b->im->name : "-", xb);
	}
	if (!mem_ran)
		return;
	printf("\nmalloc memory: malloc-churn in a fresh process per allocator, %u ms on %d CPU%s "
	       "(", mem_ms, mem_ncpus, mem_ncpus > 1 ? "s" : "");
	for (int i = 0; i < mem_ncpus; i++)
		printf("%s%d", i ? "," : "", mem_cpus[i]);
	printf("); MiB: peak RSS (VmHWM), RSS once all is freed, after the release call\n");
	printf("  %-7s %-16s %9s %9s %9s  %-18s %8s\n", "threads", "impl", "peak", "freed",
	       "released", "release call", "x glibc");
	for (int c = 0; c < NMEMT; c++) {
		const struct mem_result *g = &mem[1][c];
		for (int a = 0; a < NALLOC; a++) {
			const struct mem_result *m = &mem[a][c];
			if (!m->valid)
				continue;
			char x[16] = "-";
			if (g->valid && g->peak_kib > 0)
				snprintf(x, sizeof(x), "%.2f", m->peak_kib / g->peak_kib);
			printf("  %-7d %-16s %9.1f %9.1f %9.1f  %-18s %8s\n", mem_threads[c],
			       allocators[a]->name, m->peak_kib / 1024, m->freed_kib / 1024,
			       m->released_kib / 1024, m->release, x);
		}
		if (c + 1 < NMEMT)
			printf("\n");
	}
	printf("\nmalloc memory targets: rseqkit-malloc peak RSS / each per-thread-cache allocator's, "
	       "churn, on %d CPUs:\n", mem_ncpus);
	bool any = false;
	for (int c = 0; c < NMEMT; c++) {
		const struct mem_result *r = &mem[0][c];
		if (!r->valid)
			continue;
		for (int a = 1; a < NALLOC; a++) {
			const struct mem_result *m = &mem[a][c];
			char what[128];
			if (!m->valid || allocators[a] == &rival_mimalloc || m->peak_kib <= 0)
				continue;
			snprintf(what, sizeof(what), "%3d threads / %-8s %8.1f / %8.1f MiB", mem_threads[c],
				 allocators[a]->name, r->peak_kib / 1024, m->peak_kib / 1024);
			print_target(what, r->peak_kib / m->peak_kib, "<=", 0.50);
			any = true;
		}
	}
	if (!any)
		printf("  n/a: rseqkit-malloc not measured\n");
}

static void malloc_json(FILE *f, const struct row *rows, int nrows)
{
	(void)rows;
	(void)nrows;
	if (!mem_ran)
		return;
	fprintf(f, ",\n  \"malloc_memory\": {\"description\": \"malloc-churn in a fresh process per "
		   "allocator, restricted to cpus; kib: peak = VmHWM, freed = VmRSS once every "
		   "object is freed, released = VmRSS after the release call\", \"run_ms\": %u, "
		   "\"cpus\": %d, \"results\": [",
		mem_ms, mem_ncpus);
	const char *sep = "";
	for (int c = 0; c < NMEMT; c++)
		for (int a = 0; a < NALLOC; a++) {
			const struct mem_result *m = &mem[a][c];
			if (!m->valid)
				continue;
			fprintf(f, "%s\n    {\"impl\": \"%s\", \"threads\": %d, \"peak_kib\": %.0f, "
				   "\"freed_kib\": %.0f, \"released_kib\": %.0f, \"release_call\": \"%s\"}",
				sep, allocators[a]->name, mem_threads[c], m->peak_kib, m->freed_kib,
				m->released_kib, m->release);
			sep = ",";
		}
	fprintf(f, "\n  ]}");
}

/* The thread counts: 1, 2, 8 and 64, whatever the machine. */
static const int malloc_tcounts[] = {1, 2, 8, 64};

const struct family fam_malloc = {
	.name = "malloc", .title = "whole allocators, each in its own process",
	FAMILY_IMPLS(malloc_impls), .after = malloc_after, .summary = malloc_summary,
	.json = malloc_json, .tcounts = malloc_tcounts, .ntcounts = 4, .reps = 5, .ms = 60,
	.baseline = "glibc",
};
