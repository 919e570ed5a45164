/* SPDX-License-Identifier: MIT */
/*
 * The per-CPU object pool (pool.h):
 *   - bad input answered with -EINVAL / errno EINVAL;
 *   - one thread, pinned: alloc/free against a model of the cache (refill
 *     and flush across the batch boundary), stats, the max_bytes bound
 *     (NULL, ENOMEM; objects stranded in another CPU's cache are found),
 *     drain + trim bringing the mapped bytes back to the slab floor;
 *   - threads: producers hand objects to consumers through a shared
 *     exchange array; a token in every object shows any object handed out
 *     twice; at the end nothing is in use and trim unmaps everything;
 *   - all of it again in a child re-executed with RSEQKIT_DISABLE=1 (every
 *     operation on a slow path);
 *   - a debug pool's misuse (double free, foreign pointer, pointer inside
 *     an object, use after free) kills a forked child with SIGABRT and the
 *     expected message on stderr.
 * Both index modes throughout.  The plan is printed at the end.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

static cpu_set_t all_cpus;
static int pinned_cpu;

static void pin(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

static int second_cpu(void)
{
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (c != pinned_cpu && CPU_ISSET(c, &all_cpus))
			return c;
	return -1;
}

static struct rsk_pool *make(enum rsk_index_mode m, size_t size, size_t align, long cap,
			     size_t max_bytes, unsigned flags)
{
	struct rsk_pool_config cfg = { size, align, cap, max_bytes, flags, m, 0 };
	struct rsk_pool *p = NULL;

	if (rsk_pool_create(&p, &cfg) != 0)
		return NULL;
	return p;
}

static void bad_input(void)
{
	struct rsk_pool_config cfg = { 64, 16, 8, 0, 0, RSK_INDEX_CPU, 0 };
	struct rsk_pool *p = NULL;

	tap_ok(rsk_pool_create(NULL, &cfg) == -EINVAL && rsk_pool_create(&p, NULL) == -EINVAL,
	       "create with NULL -EINVAL");
	cfg.size = 0;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "size 0 -EINVAL");
	cfg.size = RSK_POOL_MAX_SIZE + 1;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "size > RSK_POOL_MAX_SIZE -EINVAL");
	cfg.size = 64;
	cfg.align = 24;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "alignment 24 -EINVAL");
	cfg.align = RSK_POOL_MAX_ALIGN * 2;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "alignment > RSK_POOL_MAX_ALIGN -EINVAL");
	cfg.align = 16;
	cfg.cache_capacity = -1;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "capacity -1 -EINVAL");
	cfg.cache_capacity = RSK_POOL_MAX_CAPACITY + 1;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "capacity > max -EINVAL");
	cfg.cache_capacity = 8;
	cfg.flags = 2;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "unknown flag -EINVAL");
	cfg.flags = 0;
	cfg.mode = (enum rsk_index_mode)7;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "unknown mode -EINVAL");
	errno = 0;
	tap_ok(rsk_pool_alloc(NULL) == NULL && errno == EINVAL, "alloc(NULL) NULL, EINVAL");
	tap_ok(rsk_pool_free(NULL, &cfg) == -EINVAL, "free(NULL pool) -EINVAL");
	tap_ok(rsk_pool_drain(NULL, -1) == -EINVAL && rsk_pool_trim(NULL) == -EINVAL &&
		       rsk_pool_stats(NULL, NULL) == -EINVAL && rsk_pool_destroy(NULL) == -EINVAL,
	       "drain, trim, stats, destroy of NULL -EINVAL");
}

/* The cache of the current part, modelled: what stats.cached must say.
 * Without rseq (the RSEQKIT_DISABLE=1 child) it is the thread's cache
 * (rsk_pool_create(3): 16 objects, refilled and flushed 8 at a time, the
 * object returned taken from the refill). */
struct model {
	long cached, cap, batch, depot;
	int thread; /* the thread's cache */
};

static int without_rseq_here(void)
{
	return getenv("RSEQKIT_DISABLE") != NULL;
}

static void model_alloc(struct model *m, long slab_objects)
{
	if (m->cached > 0) {
		m->cached--;
		return;
	}
	if (m->depot == 0)
		m->depot = slab_objects;
	if (m->thread) {
		long n = m->batch < m->depot ? m->batch : m->depot;
		m->depot -= n;
		m->cached = n - 1; /* the object returned */
		return;
	}
	m->depot--; /* the object returned */
	m->cached = m->batch < m->depot ? m->batch : m->depot;
	m->depot -= m->cached;
}

static void model_free(struct model *m)
{
	if (m->cached == m->cap) {
		m->cached -= m->batch;
		m->depot += m->batch;
	}
	m->cached++;
}

#define NOBJ 40
static void single(enum rsk_index_mode m, const char *mn)
{
	struct rsk_pool *p = make(m, 48, 0, 8, 0, 0);
	struct rsk_pool_stats st;
	void *obj[NOBJ];
	int tc = without_rseq_here();
	struct model md = { 0, tc ? 16 : 8, tc ? 8 : 4, 0, tc };
	int ok_model = 1, distinct = 1, aligned = 1, intact = 1;

	if (!tap_ok(p != NULL, "%s: created (size 48, capacity 8)", mn))
		return;
	tap_ok(rsk_pool_stats(p, &st) == 0 && st.slabs == 0 && st.bytes_mapped == 0 &&
		       st.in_use == 0 && st.caches == 0,
	       "%s: nothing mapped, no cache before the first alloc", mn);
	tap_ok(p->align == 16 && st.object_stride == 48, "%s: default alignment 16, stride %zu",
	       mn, st.object_stride);
	for (int i = 0; i < NOBJ; i++) {
		obj[i] = rsk_pool_alloc(p);
		model_alloc(&md, (long)st.slab_objects);
		if (obj[i] == NULL) {
			distinct = 0;
			break;
		}
		memset(obj[i], i, 48);
		aligned &= ((uintptr_t)obj[i] % 16) == 0;
		for (int k = 0; k < i; k++)
			distinct &= obj[k] != obj[i];
		rsk_pool_stats(p, &st);
		ok_model &= st.cached == (size_t)md.cached && st.in_use == (size_t)i + 1 &&
			    st.depot == (size_t)md.depot;
	}
	tap_ok(distinct && aligned, "%s: %d allocations, distinct and aligned", mn, NOBJ);
	tap_ok(ok_model, "%s: allocation refills the cache by half its capacity (model)", mn);
	for (int i = 0; i < NOBJ; i++) {
		unsigned char *b = obj[i];
		for (int k = 0; k < 48; k++)
			intact &= b[k] == (unsigned char)i;
	}
	tap_ok(intact, "%s: objects do not overlap", mn);
	tap_ok(st.slabs == 1 && st.bytes_mapped == st.slab_bytes && st.slab_bytes >= 65536 &&
		       st.slab_objects >= 64,
	       "%s: one slab of %zu bytes, %zu objects", mn, st.slab_bytes, st.slab_objects);
	ok_model = 1;
	for (int i = 0; i < NOBJ; i++) {
		int r = rsk_pool_free(p, obj[i]);
		model_free(&md);
		rsk_pool_stats(p, &st);
		ok_model &= r == 0 && st.cached == (size_t)md.cached &&
			    st.in_use == (size_t)(NOBJ - 1 - i) && st.depot == (size_t)md.depot &&
			    st.cached <= (size_t)md.cap;
	}
	tap_ok(ok_model, "%s: free flushes half the cache when full (model)", mn);
	tap_ok(st.in_use == 0 && st.cached + st.depot == st.slab_objects && st.cached_max == st.cached,
	       "%s: stats: in use 0, cached %zu + depot %zu = slab", mn, st.cached, st.depot);
	tap_ok(rsk_pool_free(p, NULL) == -EINVAL && rsk_pool_free(p, (char *)obj[0] + 1) == -EINVAL,
	       "%s: free(NULL), free(misaligned) -EINVAL", mn);
	tap_ok(st.caches == (tc ? 0u : 1u), "%s: one thread made %s cache", mn,
	       tc ? "no CPU (its own)" : "one");
	tap_ok(rsk_pool_drain(p, p->nr) == -EINVAL && rsk_pool_drain(p, -2) == -EINVAL,
	       "%s: drain of a CPU outside -EINVAL", mn);
	tap_ok(rsk_pool_drain(p, -1) == 0 && rsk_pool_stats(p, &st) == 0 && st.cached == 0 &&
		       st.depot == st.slab_objects,
	       "%s: drain(-1): every object in the depot", mn);
	tap_ok(rsk_pool_trim(p) == 1 && rsk_pool_stats(p, &st) == 0 && st.slabs == 0 &&
		       st.bytes_mapped == 0 && st.depot == 0,
	       "%s: trim unmaps the free slab", mn);

	/* Memory bound: 3 slabs used, one kept busy, drain + trim -> 1 slab. */
	size_t n3 = 3 * st.slab_objects, kept = 0;
	void **many = calloc(n3, sizeof(void *));
	int got_all = 1;
	for (size_t i = 0; i < n3; i++)
		got_all &= (many[i] = rsk_pool_alloc(p)) != NULL;
	rsk_pool_stats(p, &st);
	tap_ok(got_all && st.slabs == 3 && st.in_use == n3, "%s: %zu objects fill 3 slabs", mn,
	       n3);
	uintptr_t keep = (uintptr_t)many[0] & ~(uintptr_t)(st.slab_bytes - 1);
	for (size_t i = 0; i < n3; i++) {
		if (((uintptr_t)many[i] & ~(uintptr_t)(st.slab_bytes - 1)) == keep)
			kept++;
		else
			rsk_pool_free(p, many[i]);
	}
	rsk_pool_stats(p, &st);
	size_t before = st.bytes_mapped;
	int trimmed = rsk_pool_drain(p, -1) == 0 ? rsk_pool_trim(p) : -1;
	rsk_pool_stats(p, &st);
	tap_ok(trimmed == 2 && st.bytes_mapped == st.slab_bytes && st.in_use == kept,
	       "%s: drain + trim: %zu -> %zu bytes mapped (floor: %zu objects in one slab)", mn,
	       before, st.bytes_mapped, kept);
	for (size_t i = 0; i < n3; i++)
		if (((uintptr_t)many[i] & ~(uintptr_t)(st.slab_bytes - 1)) == keep)
			rsk_pool_free(p, many[i]);
	tap_ok(rsk_pool_drain(p, -1) == 0 && rsk_pool_trim(p) == 1 && rsk_pool_stats(p, &st) == 0 &&
		       st.bytes_mapped == 0 && st.in_use == 0,
	       "%s: all freed: drain + trim -> 0 bytes mapped", mn);
	free(many);
	tap_ok(rsk_pool_destroy(p) == 0, "%s: destroyed", mn);

	/* max_bytes: two slabs, then NULL with ENOMEM. */
	size_t slab = st.slab_bytes, sobj = st.slab_objects, n = 0;
	p = make(m, 48, 0, 8, 2 * slab, 0);
	many = calloc(2 * sobj + 1, sizeof(void *));
	while (n <= 2 * sobj && (many[n] = rsk_pool_alloc(p)) != NULL)
		n++;
	int e = errno;
	rsk_pool_stats(p, &st);
	tap_ok(n == 2 * sobj && e == ENOMEM && st.bytes_mapped == 2 * slab,
	       "%s: max_bytes = 2 slabs: %zu objects, then NULL/ENOMEM (errno %d)", mn, n, e);
	int other = second_cpu();
	if (other >= 0 && m == RSK_INDEX_CPU) {
		/* A free object stranded in another CPU's cache is found. */
		pin(other);
		rsk_pool_free(p, many[0]);
		pin(pinned_cpu);
		void *again = rsk_pool_alloc(p);
		tap_ok(again == many[0], "%s: at the bound, alloc takes an object cached on CPU %d",
		       mn, other);
	} else {
		rsk_pool_free(p, many[0]);
		tap_ok(rsk_pool_alloc(p) == many[0], "%s: at the bound, a freed object comes back",
		       mn);
	}
	tap_ok(rsk_pool_destroy(p) == 0, "%s: destroyed with objects in use", mn);
	free(many);

	/* Alignment larger than the size. */
	p = make(m, 100, 256, 4, 0, 0);
	aligned = p != NULL;
	for (int i = 0; aligned && i < NOBJ; i++) {
		obj[i] = rsk_pool_alloc(p);
		aligned &= obj[i] != NULL && ((uintptr_t)obj[i] % 256) == 0;
	}
	tap_ok(aligned, "%s: size 100, align 256: objects aligned", mn);
	tap_ok(p != NULL && rsk_pool_free(p, (char *)obj[0] + 128) == -EINVAL,
	       "%s: free of a pointer aligned below the pool's -EINVAL", mn);
	rsk_pool_destroy(p);
}

/* ---- threads: producers and consumers ---- */

enum { T_FREE = 0, T_ALLOCATED = 1, T_TRANSIT = 2 };
struct token {
	long state;
	long owner;
	char payload[48];
};

#define EXCHANGE 64
#define PRODUCERS 4
#define CONSUMERS 4
#define PER_THREAD 100000
static struct rsk_pool *mt_pool;
static void *exchange[EXCHANGE];
static long dups, bad_state, allocs, frees, nulls;

/* A fresh allocation: its token must say free. */
static void take(struct token *t, long id)
{
	long want = T_FREE;

	if (!__atomic_compare_exchange_n(&t->state, &want, T_ALLOCATED, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		__atomic_add_fetch(&dups, 1, __ATOMIC_RELAXED);
	t->owner = id;
	__atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
}

static void give_back(struct token *t, long expect)
{
	if (__atomic_exchange_n(&t->state, T_FREE, __ATOMIC_ACQ_REL) != expect)
		__atomic_add_fetch(&bad_state, 1, __ATOMIC_RELAXED);
	if (rsk_pool_free(mt_pool, t) != 0)
		__atomic_add_fetch(&bad_state, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&frees, 1, __ATOMIC_RELAXED);
}

static void *producer(void *arg)
{
	long id = (long)(intptr_t)arg;
	unsigned seed = (unsigned)id * 2654435761u;
	int k = (int)id % CPU_COUNT(&all_cpus), cpu = 0;

	/* Producers spread over the CPUs, consumers anywhere: objects are
	 * allocated on one CPU and freed on another. */
	for (; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &all_cpus) && k-- == 0)
			break;
	pin(cpu);
	for (long i = 0; i < PER_THREAD; i++) {
		struct token *t = rsk_pool_alloc(mt_pool), *old;
		if (t == NULL) {
			__atomic_add_fetch(&nulls, 1, __ATOMIC_RELAXED);
			continue;
		}
		take(t, id);
		if (i % 3 == 0) { /* local: free it here */
			give_back(t, T_ALLOCATED);
			continue;
		}
		__atomic_store_n(&t->state, T_TRANSIT, __ATOMIC_RELEASE);
		old = __atomic_exchange_n((struct token **)&exchange[rand_r(&seed) % EXCHANGE], t,
					  __ATOMIC_ACQ_REL);
		if (old != NULL)
			give_back(old, T_TRANSIT);
	}
	return NULL;
}

static long producers_done;

static void *consumer(void *arg)
{
	unsigned seed = (unsigned)(intptr_t)arg * 7919u;

	sched_setaffinity(0, sizeof(all_cpus), &all_cpus);
	while (__atomic_load_n(&producers_done, __ATOMIC_ACQUIRE) < PRODUCERS) {
		struct token *old = __atomic_exchange_n(
			(struct token **)&exchange[rand_r(&seed) % EXCHANGE], NULL, __ATOMIC_ACQ_REL);
		if (old != NULL)
			give_back(old, T_TRANSIT);
		else
			sched_yield();
	}
	return NULL;
}

static void threads(enum rsk_index_mode m, const char *mn)
{
	pthread_t pt[PRODUCERS], ct[CONSUMERS];
	struct rsk_pool_stats st;

	mt_pool = make(m, sizeof(struct token), 0, 16, 0, 0);
	dups = bad_state = allocs = frees = nulls = producers_done = 0;
	for (long i = 0; i < CONSUMERS; i++)
		pthread_create(&ct[i], NULL, consumer, (void *)(intptr_t)i);
	for (long i = 0; i < PRODUCERS; i++)
		pthread_create(&pt[i], NULL, producer, (void *)(intptr_t)i);
	for (int i = 0; i < PRODUCERS; i++) {
		pthread_join(pt[i], NULL);
		__atomic_add_fetch(&producers_done, 1, __ATOMIC_RELEASE);
	}
	for (int i = 0; i < CONSUMERS; i++)
		pthread_join(ct[i], NULL);
	for (int i = 0; i < EXCHANGE; i++)
		if (exchange[i] != NULL) {
			give_back(exchange[i], T_TRANSIT);
			exchange[i] = NULL;
		}
	tap_ok(dups == 0 && bad_state == 0 && nulls == 0,
	       "%s threads: %ld allocations, none handed out twice (%ld), tokens right (%ld bad), "
	       "no NULL (%ld)",
	       mn, allocs, dups, bad_state, nulls);
	rsk_pool_stats(mt_pool, &st);
	tap_ok(allocs == frees && st.in_use == 0 && st.cached_max <= 16,
	       "%s threads: %ld frees, in use %zu, %zu caches, %zu slabs", mn, frees, st.in_use,
	       st.caches, st.slabs);
	tap_ok(st.caches <= (size_t)mt_pool->nr, "%s threads: caches %zu <= parts %d", mn,
	       st.caches, mt_pool->nr);
	tap_ok(rsk_pool_drain(mt_pool, -1) == 0 && rsk_pool_trim(mt_pool) >= 0 &&
		       rsk_pool_stats(mt_pool, &st) == 0 && st.slabs == 0 && st.bytes_mapped == 0,
	       "%s threads: drain + trim -> nothing mapped", mn);
	rsk_pool_destroy(mt_pool);
}

/* ---- debug pools ---- */

enum misuse { DOUBLE_FREE, FOREIGN, INTERIOR, USE_AFTER_FREE, NONE };

/* Run the misuse in a child; 0 if it died of SIGABRT saying `expect`. */
static void debug_case(enum rsk_index_mode m, const char *mn, enum misuse what,
		       const char *name)
{
	struct rsk_pool *p = make(m, 64, 0, 4, 0, RSK_POOL_DEBUG);
	char *a = rsk_pool_alloc(p), expect[200], got[1024] = "";
	static long foreign[16] __attribute__((aligned(16)));
	int fds[2], status = 0;
	pid_t pid;
	ssize_t len = 0, r;

	switch (what) {
	case DOUBLE_FREE:
		snprintf(expect, sizeof(expect), "rseqkit: pool %p: double free of %p", (void *)p,
			 (void *)a);
		break;
	case FOREIGN:
		snprintf(expect, sizeof(expect),
			 "rseqkit: pool %p: free of a pointer not from this pool: %p", (void *)p,
			 (void *)foreign);
		break;
	case INTERIOR:
		snprintf(expect, sizeof(expect),
			 "rseqkit: pool %p: free of a pointer that is not an object: %p", (void *)p,
			 (void *)(a + 16));
		break;
	case USE_AFTER_FREE:
		snprintf(expect, sizeof(expect),
			 "rseqkit: pool %p: write after free (use after free) to %p (byte 5 changed)",
			 (void *)p, (void *)a);
		break;
	default:
		break;
	}
	if (pipe(fds) != 0 || (pid = fork()) < 0) {
		tap_ok(0, "%s debug: %s: cannot fork", mn, name);
		return;
	}
	if (pid == 0) {
		struct rlimit no = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no);
		dup2(fds[1], 2);
		close(fds[0]);
		switch (what) {
		case DOUBLE_FREE:
			rsk_pool_free(p, a);
			rsk_pool_free(p, a);
			break;
		case FOREIGN:
			rsk_pool_free(p, foreign);
			break;
		case INTERIOR:
			rsk_pool_free(p, a + 16);
			break;
		case USE_AFTER_FREE:
			rsk_pool_free(p, a);
			a[5] = 1;
			rsk_pool_alloc(p); /* the same object: top of this CPU's cache */
			break;
		default: { /* correct use: no report */
			char *b = rsk_pool_alloc(p);
			int poisoned = 1;
			for (int i = 0; i < 64; i++)
				poisoned &= (unsigned char)b[i] == RSK_POOL_POISON;
			memset(a, 0, 64);
			memset(b, 0, 64);
			rsk_pool_free(p, a);
			rsk_pool_free(p, b);
			for (int i = 0; i < 200; i++) {
				char *c = rsk_pool_alloc(p);
				c[63] = 0;
				rsk_pool_free(p, c);
			}
			rsk_pool_drain(p, -1);
			rsk_pool_trim(p);
			rsk_pool_destroy(p);
			_exit(poisoned ? 0 : 3);
		}
		}
		_exit(4); /* not caught */
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(got) - 1 && (r = read(fds[0], got + len, sizeof(got) - 1 - (size_t)len)) > 0)
		len += r;
	got[len] = 0;
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (what == NONE)
		tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && len == 0,
		       "%s debug: correct use passes, allocations come poisoned (status %#x)", mn,
		       status);
	else if (!tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(got, expect),
			 "%s debug: %s caught: SIGABRT, \"%s\"", mn, name, expect))
		tap_diag("status %#x, stderr: %s", status, got);
	rsk_pool_destroy(p);
}

static void debug(enum rsk_index_mode m, const char *mn)
{
	debug_case(m, mn, NONE, "no misuse");
	debug_case(m, mn, DOUBLE_FREE, "double free");
	debug_case(m, mn, FOREIGN, "foreign pointer");
	debug_case(m, mn, INTERIOR, "pointer inside an object");
	debug_case(m, mn, USE_AFTER_FREE, "use after free");
}

/* rsk_pool_create(&p, cfg) with stderr caught: its return, and in msg
 * what it wrote there. */
static int create_caught(struct rsk_pool **p, const struct rsk_pool_config *cfg, char *msg,
			 size_t len)
{
	int fds[2], saved = dup(2), ret;
	ssize_t n;

	msg[0] = '\0';
	if (saved < 0 || pipe(fds) != 0)
		return -1000;
	fflush(stderr);
	dup2(fds[1], 2);
	ret = rsk_pool_create(p, cfg);
	dup2(saved, 2);
	close(saved);
	close(fds[1]);
	n = read(fds[0], msg, len - 1);
	msg[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	return ret;
}

/* Zero is the default of every field but size; the slab size is a field
 * and follows max_bytes; a debug pool's -EINVAL names the field. */
static void defaults_and_slabs(void)
{
	struct rsk_pool_config cfg = { .size = 128 };
	struct rsk_pool_stats st;
	struct rsk_pool *p = NULL;
	char msg[512];
	void *o;
	int r;

	r = rsk_pool_create(&p, &cfg);
	o = r == 0 ? rsk_pool_alloc(p) : NULL;
	tap_ok(r == 0 && o != NULL && rsk_pool_free(p, o) == 0 && p->capacity == 128 &&
		       p->align == 16 && p->mode == RSK_INDEX_CPU && rsk_pool_stats(p, &st) == 0 &&
		       st.slab_bytes == ((size_t)64 << 10),
	       "{ .size = 128 } creates a pool: capacity 128 (64 KiB of objects), align 16, "
	       "cpu mode, 64 KiB slabs (%d)", r);
	if (r == 0)
		rsk_pool_destroy(p);

	cfg = (struct rsk_pool_config){ .size = 1024 };
	r = rsk_pool_create(&p, &cfg);
	tap_ok(r == 0 && p->capacity == 64 && rsk_pool_stats(p, &st) == 0 &&
		       st.slab_bytes == ((size_t)128 << 10) && st.slab_objects >= 64,
	       "1 KiB objects: capacity 64, 128 KiB slabs of 64 or more objects (%d)", r);
	if (r == 0)
		rsk_pool_destroy(p);
	cfg.max_bytes = (size_t)64 << 10;
	r = rsk_pool_create(&p, &cfg);
	o = r == 0 ? rsk_pool_alloc(p) : NULL;
	memset(&st, 0, sizeof(st));
	if (r == 0)
		rsk_pool_stats(p, &st);
	tap_ok(r == 0 && o != NULL &&
		       st.slab_bytes == ((size_t)64 << 10) && st.slab_objects > 0,
	       "1 KiB objects, max_bytes 64 KiB: accepted with 64 KiB slabs (%d, %zu objects)", r,
	       st.slab_objects);
	if (r == 0)
		rsk_pool_destroy(p);
	cfg.max_bytes = 0;
	cfg.slab_bytes = (size_t)16 << 10;
	r = rsk_pool_create(&p, &cfg);
	o = r == 0 ? rsk_pool_alloc(p) : NULL;
	memset(&st, 0, sizeof(st));
	if (r == 0)
		rsk_pool_stats(p, &st);
	tap_ok(r == 0 && o != NULL &&
		       st.slab_bytes == ((size_t)16 << 10) && st.slab_objects >= 10 &&
		       st.slab_objects < 16,
	       "slab_bytes 16 KiB: slabs of 16 KiB (%d, %zu objects)", r,
	       st.slab_objects);
	if (r == 0)
		rsk_pool_destroy(p);
	cfg.slab_bytes = 3000;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "slab_bytes 3000 (not a power of two) -EINVAL");
	cfg.slab_bytes = 2048;
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "slab_bytes 2 KiB (below 4 KiB) -EINVAL");
	cfg = (struct rsk_pool_config){ .size = 8192, .slab_bytes = 8192 };
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL,
	       "slab_bytes 8 KiB for 8 KiB objects (no room for the header) -EINVAL");
	cfg = (struct rsk_pool_config){ .size = 1024, .max_bytes = 1000 };
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "max_bytes 1000 (below any slab) -EINVAL");
	cfg = (struct rsk_pool_config){ .size = 64, .max_bytes = (size_t)64 << 10,
					.slab_bytes = (size_t)128 << 10 };
	tap_ok(rsk_pool_create(&p, &cfg) == -EINVAL, "max_bytes below the slab_bytes asked -EINVAL");

	cfg = (struct rsk_pool_config){ .size = 64, .cache_capacity = -1, .flags = RSK_POOL_DEBUG };
	r = create_caught(&p, &cfg, msg, sizeof(msg));
	tap_ok(r == -EINVAL && strstr(msg, "rseqkit: rsk_pool_create: cache_capacity") != NULL,
	       "a debug pool's -EINVAL names the field on stderr (%d: %.80s)", r, msg);
	cfg = (struct rsk_pool_config){ .size = 64, .max_bytes = 100, .flags = RSK_POOL_DEBUG };
	r = create_caught(&p, &cfg, msg, sizeof(msg));
	tap_ok(r == -EINVAL && strstr(msg, "rsk_pool_create: max_bytes") != NULL,
	       "... max_bytes too (%d: %.80s)", r, msg);
	cfg.flags = 0;
	r = create_caught(&p, &cfg, msg, sizeof(msg));
	tap_ok(r == -EINVAL && (getenv("RSEQKIT_DEBUG") != NULL || msg[0] == '\0'),
	       "a pool without debug mode says nothing (%d: %.80s)", r, msg);
}

/* RSEQKIT_DEBUG=pool in a fresh process (the variable is read once, at
 * initialisation): a pool created without RSK_POOL_DEBUG has it, and a
 * double free is found (abort, with the message). */
static void debug_env_child(void)
{
	struct rsk_pool_config cfg = { .size = 64 };
	struct rsk_pool *p = NULL;
	void *o;

	if (rsk_pool_create(&p, &cfg) != 0)
		_exit(3);
	printf("debug=%d\n", (p->flags & RSK_POOL_DEBUG) != 0);
	fflush(stdout);
	o = rsk_pool_alloc(p);
	rsk_pool_free(p, o);
	rsk_pool_free(p, o); /* the debug check aborts here */
	_exit(4);
}

static void debug_env(char **argv)
{
	int fds[2], status = 0;
	char out[1024] = "";
	ssize_t n, got = 0;
	pid_t pid;

	if (pipe(fds) != 0 || (pid = fork()) < 0) {
		tap_ok(0, "RSEQKIT_DEBUG=pool: cannot fork");
		return;
	}
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		setenv("RSEQKIT_DEBUG", "spinlock,pool", 1);
		execl("/proc/self/exe", argv[0], "--debug-env", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while ((n = read(fds[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = '\0';
	close(fds[0]);
	waitpid(pid, &status, 0);
	tap_ok(strstr(out, "debug=1") != NULL && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
		       strstr(out, "rseqkit: pool") != NULL,
	       "RSEQKIT_DEBUG=spinlock,pool: an unmodified pool gets the debug checks (a double free "
	       "aborts with the message)");
}

static void run_all(void)
{
	bad_input();
	defaults_and_slabs();
	for (int m = 0; m < 2; m++) {
		const char *mn = m ? "cid" : "cpu";
		single((enum rsk_index_mode)m, mn);
		threads((enum rsk_index_mode)m, mn);
		debug((enum rsk_index_mode)m, mn);
	}
}

/* The same tests in a child without rseq; its TAP output becomes ours as
 * diagnostics, and one line for the whole. */
static void without_rseq(char **argv)
{
	int fds[2], status = 0, nok = 0, notok = 0;
	pid_t pid;
	FILE *f;
	char line[512];

	if (pipe(fds) != 0 || (pid = fork()) < 0) {
		tap_ok(0, "RSEQKIT_DISABLE=1: cannot fork");
		return;
	}
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		setenv("RSEQKIT_DISABLE", "1", 1);
		execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (fgets(line, sizeof(line), f) != NULL) {
		nok += strncmp(line, "ok ", 3) == 0;
		notok += strncmp(line, "not ok", 6) == 0;
		printf("#   %s", line);
	}
	fclose(f);
	waitpid(pid, &status, 0);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && notok == 0 && nok > 20,
	       "RSEQKIT_DISABLE=1 (slow paths only): %d checks pass, %d fail", nok, notok);
}

int main(int argc, char **argv)
{
	struct rsk_status st;
	int child = argc > 1 && strcmp(argv[1], "--child") == 0;

	if (argc > 1 && strcmp(argv[1], "--debug-env") == 0)
		debug_env_child();

	rsk_status(&st);
	if (!st.available)
		tap_diag("rseq unavailable (%s): slow paths only", st.reason);
	sched_getaffinity(0, sizeof(all_cpus), &all_cpus);
	pinned_cpu = sched_getcpu();
	pin(pinned_cpu);
	run_all();
	if (!child) {
		without_rseq(argv);
		debug_env(argv);
	}
	printf("1..%d\n", tap_n);
	return tap_done();
}
