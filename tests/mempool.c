/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU memory pools and the pool-backed counter (mempool.h):
 *   - bad input answered with -EINVAL / errno EINVAL, never a crash;
 *   - address arithmetic in both index modes: copy i at obj + i * stride,
 *     usable as the v of a primitive at the current index;
 *   - initial values: zero (also for reused slots), template, init
 *     callback (and its error);
 *   - limits: max_items, max_bytes (NULL, ENOMEM), more ranges otherwise;
 *   - lazy commit: untouched copies cost nothing (pagemap accounting),
 *     also after sums read every copy and after a slot is reused; in CID
 *     mode one thread commits one copy; 10,000 counters cost 8 bytes per
 *     counter per CPU that ran; destroy unmaps;
 *   - NUMA: move_pages(2) finds every written copy on its CPU's node;
 *   - robust mode: double free, foreign pointers, write after free, live
 *     objects at destroy each reported (message and error code), with
 *     negative controls (a correct program, a non-robust pool: no report);
 *     freed copies poisoned;
 *   - fork: the child sees the parent's values and allocates;
 *   - several pools at once; thread churn; exact sums of pool-backed
 *     counters under concurrent adds and exchanges;
 *   - all of it again in a child re-executed with RSEQKIT_DISABLE=1.
 * "--numa" runs the placement checks alone, for tests/qemu/mempool-numa.sh
 * on a machine of two nodes (with a negative control: RSK_MEMPOOL_NO_NUMA).
 * "--valgrind" runs the checks that mean something under valgrind (no
 * page accounting, no NUMA) for tests/mempool_valgrind.sh.
 */
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
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

static int under_valgrind, disabled;
static long page;

static struct rsk_mempool *make(size_t size, size_t align, enum rsk_index_mode mode, unsigned flags)
{
	struct rsk_mempool_config cfg = {.size = size, .align = align, .mode = mode, .flags = flags};
	struct rsk_mempool *p = NULL;

	return rsk_mempool_create(&p, &cfg) == 0 ? p : NULL;
}

static size_t committed(struct rsk_mempool *p)
{
	struct rsk_mempool_stats st;

	rsk_mempool_stats(p, &st);
	return st.committed_bytes;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static cpu_set_t allowed;

/* Injection (the test build): at 7, in rsk_pcounter_add between the index
 * and the section, yield now and then (stale indices, aborts); at 8, in
 * the gated load-store of rsk_pcounter_exchange, sleep so that an
 * unprotected window would lose adds. */
static int inject_on;
static __thread int in_drainer; /* only the exchanges sleep in their window */

void rsk_inject_hook(int point)
{
	static __thread unsigned n;

	if (!__atomic_load_n(&inject_on, __ATOMIC_RELAXED))
		return;
	if (point == 7 && ++n % 64 == 0)
		sched_yield();
	else if (point == 8 && in_drainer)
		usleep(50);
}

/* --- stderr capture, for the robust-mode reports ------------------------ */

static int saved_err = -1;
static FILE *capture;

static void capture_start(void)
{
	fflush(stderr);
	capture = tmpfile();
	saved_err = dup(2);
	dup2(fileno(capture), 2);
}

/* Everything written to stderr since capture_start(), in buf. */
static const char *capture_end(char *buf, size_t len)
{
	size_t n;

	fflush(stderr);
	dup2(saved_err, 2);
	close(saved_err);
	rewind(capture);
	n = fread(buf, 1, len - 1, capture);
	buf[n] = 0;
	fclose(capture);
	return buf;
}

/* --- bad input -------------------------------------------------------------- */

static int no_copy(void *copy, int idx, void *arg)
{
	(void)copy, (void)idx, (void)arg;
	return 0;
}

static void bad_input(void)
{
	struct rsk_mempool_config cfg = {.size = 8};
	struct rsk_mempool *p = NULL;
	int x;

	tap_ok(rsk_mempool_create(NULL, &cfg) == -EINVAL, "create(NULL out) -> -EINVAL");
	tap_ok(rsk_mempool_create(&p, NULL) == -EINVAL, "create(NULL cfg) -> -EINVAL");
	cfg.size = 0;
	tap_ok(rsk_mempool_create(&p, &cfg) == -EINVAL, "size 0 -> -EINVAL");
	cfg.size = RSK_MEMPOOL_STRIDE;
	tap_ok(rsk_mempool_create(&p, &cfg) == -EINVAL, "size = stride -> -EINVAL");
	cfg.size = 8;
	cfg.align = 24;
	tap_ok(rsk_mempool_create(&p, &cfg) == -EINVAL, "align 24 -> -EINVAL");
	cfg.align = 2 * RSK_MEMPOOL_MAX_ALIGN;
	tap_ok(rsk_mempool_create(&p, &cfg) == -EINVAL, "align 8192 -> -EINVAL");
	cfg.align = 0;
	cfg.flags = 0x80;
	tap_ok(rsk_mempool_create(&p, &cfg) == -EINVAL, "unknown flag -> -EINVAL");
	cfg.flags = 0;
	cfg.mode = (enum rsk_index_mode)7;
	tap_ok(rsk_mempool_create(&p, &cfg) == -EINVAL, "unknown mode -> -EINVAL");
	cfg.mode = RSK_INDEX_CPU;
	cfg.max_bytes = 4096;
	tap_ok(rsk_mempool_create(&p, &cfg) == -EINVAL, "max_bytes below one range -> -EINVAL");
	errno = 0;
	tap_ok(rsk_mempool_alloc(NULL) == NULL && errno == EINVAL, "alloc(NULL) -> NULL, EINVAL");
	errno = 0;
	tap_ok(rsk_mempool_zalloc(NULL) == NULL && errno == EINVAL, "zalloc(NULL) -> NULL, EINVAL");
	tap_ok(rsk_mempool_free(NULL, &x) == -EINVAL, "free(NULL pool) -> -EINVAL");
	tap_ok(rsk_mempool_destroy(NULL) == -EINVAL, "destroy(NULL) -> -EINVAL");
	tap_ok(rsk_mempool_stats(NULL, NULL) == -EINVAL, "stats(NULL) -> -EINVAL");
	p = make(8, 0, RSK_INDEX_CPU, 0);
	tap_ok(p != NULL, "create a pool of 8-byte objects");
	if (p == NULL)
		return;
	tap_ok(rsk_mempool_free(p, NULL) == -EINVAL, "free(NULL obj) -> -EINVAL");
	tap_ok(rsk_mempool_stats(p, NULL) == -EINVAL, "stats(NULL st) -> -EINVAL");
	tap_ok(rsk_mempool_for_each(p, &x, NULL, NULL) == -EINVAL, "for_each(NULL fn) -> -EINVAL");
	tap_ok(rsk_pcounter_add(NULL, (intptr_t *)&x, 1) == -EINVAL && rsk_pcounter_add(p, NULL, 1) == -EINVAL,
	       "pcounter_add(NULL ...) -> -EINVAL");
	intptr_t s, on_stack = 0;
	tap_ok(rsk_pcounter_sum(p, &on_stack, &s) == -EINVAL, "pcounter_sum of a foreign word -> -EINVAL");
	tap_ok(rsk_pcounter_exchange(p, &on_stack, 0, 0, &s) == -EINVAL,
	       "pcounter_exchange of a foreign word -> -EINVAL");
	intptr_t *c = rsk_mempool_zalloc(p);
	tap_ok(c != NULL && rsk_pcounter_read(p, c, p->nr, &s) == -EINVAL &&
		       rsk_pcounter_read(p, c, -1, &s) == -EINVAL && rsk_pcounter_sum(p, c, NULL) == -EINVAL,
	       "pcounter_read outside [0, nr), sum(NULL) -> -EINVAL");
	rsk_mempool_free(p, c);
	tap_ok(rsk_pcounter_sum(p, c, &s) == -EINVAL, "pcounter_sum of a freed counter -> -EINVAL");
	tap_ok(rsk_mempool_destroy(p) == 0, "destroy -> 0");
	/* Destroyed: its magic word says so while nothing reuses the freed
	 * memory (nothing allocates here).  Reads freed memory on purpose:
	 * not under valgrind or AddressSanitizer. */
#if !defined(__SANITIZE_ADDRESS__)
	if (!under_valgrind) {
		int r1 = rsk_mempool_destroy(p), r2 = rsk_mempool_free(p, &x);
		struct rsk_mempool_stats st_dead;
		int r3 = rsk_mempool_stats(p, &st_dead), r4 = rsk_mempool_for_each(p, &x, no_copy, NULL);
		int r5 = rsk_pcounter_sum(p, c, &s), r6 = rsk_pcounter_slow_(p, c, 1, RSK_STOPPED);
		void *a;

		errno = 0;
		a = rsk_mempool_alloc(p);
		tap_ok(r1 == -EINVAL, "destroy again -> -EINVAL, no double free (%d)", r1);
		tap_ok(a == NULL && errno == EINVAL && r2 == -EINVAL && r3 == -EINVAL && r4 == -EINVAL &&
			       r5 == -EINVAL && r6 == -EINVAL,
		       "after destroy: alloc, free, stats, for_each, pcounter_sum, the pcounter slow "
		       "path -> -EINVAL (%p %d %d %d %d %d)",
		       a, r2, r3, r4, r5, r6);
		return;
	}
#endif
	printf("ok %d # SKIP destroy again: reads freed memory on purpose\n", ++tap_n);
	printf("ok %d # SKIP after destroy: reads freed memory on purpose\n", ++tap_n);
}

/* The counter's readers and exchange take a word all of whose bytes are
 * inside one live object: in a pool of 12-byte objects aligned to 4, a
 * word at obj + 8 runs 4 bytes into the next object (read, sum and
 * exchange once accepted it, and exchange wrote those bytes). */
static void word_bounds(void)
{
	/* Objects of a word and a half (12 bytes, or 6 in 32 bits), aligned
	 * to half a word: the word at obj + W runs half a word past the end. */
	enum { W = sizeof(intptr_t), S = W + W / 2 };
	struct rsk_mempool *p = make(S, W / 2, RSK_INDEX_CPU, 0);
	unsigned char *o[4] = { NULL }, *obj = NULL, *next = NULL, copy_before[16], copy_after[16];
	intptr_t v, old = 0, *past, *inside;
	int ra, rb, rc, rd, idx = 0, changed = 0;

	if (p == NULL) {
		tap_ok(0, "word bounds: create a pool of %d-byte objects aligned to %d", (int)S, (int)W / 2);
		return;
	}
	for (int i = 0; i < 4; i++)
		o[i] = rsk_mempool_zalloc(p);
	/* An object whose + W is word-aligned, and the object after it. */
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			if (o[i] && o[j] && (uintptr_t)o[i] % W == 0 && o[j] == o[i] + S)
				obj = o[i], next = o[j];
	if (obj == NULL) {
		tap_ok(0, "word bounds: two adjacent objects, the first word-aligned");
		rsk_mempool_destroy(p);
		return;
	}
	past = (intptr_t *)(void *)(obj + W);
	inside = (intptr_t *)(void *)obj;
	memset(rsk_percpu_ptr(next, idx), 0x3c, S);
	memcpy(copy_before, rsk_percpu_ptr(next, idx), S);
	ra = rsk_pcounter_read(p, past, idx, &v);
	rb = rsk_pcounter_sum(p, past, &v);
	rc = rsk_pcounter_exchange(p, past, idx, (intptr_t)0x7777777777777777ll, &old);
	memcpy(copy_after, rsk_percpu_ptr(next, idx), S);
	changed = memcmp(copy_before, copy_after, S) != 0;
	tap_ok(ra == -EINVAL && rb == -EINVAL && rc == -EINVAL && !changed,
	       "word bounds: a word at obj + %d of a %d-byte object -> read %d, sum %d, exchange %d "
	       "(-EINVAL); the next object %s",
	       (int)W, (int)S, ra, rb, rc, changed ? "CHANGED" : "untouched");
	rd = rsk_pcounter_exchange(p, inside, idx, 5, &old);
	ra = rsk_pcounter_read(p, inside, idx, &v) == 0 && v == 5;
	rb = rsk_pcounter_sum(p, inside, &v) == 0 && v == 5;
	tap_ok(rd == 0 && ra && rb, "word bounds: the word at obj + 0 is accepted (exchange %d, sum %ld)",
	       rd, (long)v);
	rsk_mempool_destroy(p);

	/* A word that ends exactly at the object's end is inside it. */
	p = make(16, 8, RSK_INDEX_CPU, 0);
	obj = p ? rsk_mempool_zalloc(p) : NULL;
	tap_ok(obj != NULL && rsk_pcounter_exchange(p, (intptr_t *)(void *)(obj + 8), 0, 9, &old) == 0 &&
		       rsk_pcounter_sum(p, (intptr_t *)(void *)(obj + 8), &v) == 0 && v == 9 &&
		       rsk_pcounter_read(p, (intptr_t *)(void *)(obj + 16), 0, &v) == -EINVAL,
	       "word bounds: 16-byte objects: the word at obj + 8 is accepted, obj + 16 is not");
	if (p)
		rsk_mempool_destroy(p);
}

/* --- address arithmetic --------------------------------------------------- */

static void addressing(enum rsk_index_mode mode, const char *mn)
{
	struct rsk_mempool *p = make(24, 8, mode, 0);
	intptr_t *a, *b;
	int ok = 1, idx;

	if (!tap_ok(p != NULL, "%s: create", mn))
		return;
	a = rsk_mempool_alloc(p);
	b = rsk_mempool_alloc(p);
	tap_ok(a != NULL && b != NULL && a != b && ((uintptr_t)a & 7) == 0 && p->nr == rsk_possible_cpus(),
	       "%s: two objects, aligned, %d copies each", mn, p->nr);
	if (a == NULL || b == NULL)
		return;
	for (int i = 0; i < p->nr; i++) {
		ok &= (char *)rsk_percpu_ptr(a, i) == (char *)a + (size_t)i * RSK_MEMPOOL_STRIDE;
		ok &= rsk_percpu_ptr(a, i)[0] == 0 && rsk_percpu_ptr(a, i)[2] == 0;
		rsk_percpu_ptr(a, i)[0] = 1000 + i;
		rsk_percpu_ptr(a, i)[2] = 2000 + i;
		rsk_percpu_ptr(b, i)[0] = 3000 + i;
	}
	for (int i = 0; i < p->nr; i++)
		ok &= rsk_percpu_ptr(a, i)[0] == 1000 + i && rsk_percpu_ptr(a, i)[2] == 2000 + i &&
		      rsk_percpu_ptr(b, i)[0] == 3000 + i;
	tap_ok(ok, "%s: copy i at obj + i * %zu, zero at first, copies and objects independent", mn,
	       RSK_MEMPOOL_STRIDE);
	/* A copy serves as the v of a primitive at the current index. */
	if (rsk_index(p->mode) >= 0) {
		intptr_t before = 0;
		int ret = RSK_ABORTED, tries = 0;
		do {
			idx = rsk_index(p->mode);
			if (idx < 0)
				break;
			before = rsk_percpu_ptr(a, idx)[2];
			ret = rsk_add(p->mode, idx, &rsk_percpu_ptr(a, idx)[2], 5);
		} while (ret != RSK_OK && ++tries < 1000);
		tap_ok(ret == RSK_OK && rsk_percpu_ptr(a, idx)[2] == before + 5,
		       "%s: rsk_add on rsk_percpu_ptr(obj, %d) lands in copy %d", mn, idx, idx);
	} else {
		tap_ok(1, "%s: no index here (rseq unavailable): primitive check skipped", mn);
	}
	rsk_mempool_free(p, a);
	rsk_mempool_free(p, b);
	rsk_mempool_destroy(p);
}

/* --- initial values --------------------------------------------------------- */

struct tmpl {
	intptr_t a, b;
	char name[16];
};

static int init_calls, init_fail_at = -1;

static int init_cb(void *copy, int idx, void *arg)
{
	struct tmpl *t = copy;

	init_calls++;
	if (idx == init_fail_at)
		return ENOSPC;
	t->b = (intptr_t)arg + idx;
	return 0;
}

static void initial_values(void)
{
	struct tmpl tp = {.a = 42, .b = -1, .name = "template"};
	struct rsk_mempool_config cfg = {.size = sizeof(tp), .init_template = &tp};
	struct rsk_mempool *p = NULL, *z;
	struct tmpl *o;
	int ok = 1;

	/* Zero, and re-zeroed on reuse. */
	z = make(40, 8, RSK_INDEX_CPU, 0);
	o = rsk_mempool_alloc(z);
	for (int i = 0; o && i < z->nr; i++)
		memset(rsk_percpu_ptr(o, i), 0xff, 40);
	rsk_mempool_free(z, o);
	struct tmpl *o2 = rsk_mempool_alloc(z);
	for (int i = 0; o2 && i < z->nr; i++)
		ok &= ((unsigned char *)rsk_percpu_ptr(o2, i))[0] == 0 &&
		      ((unsigned char *)rsk_percpu_ptr(o2, i))[39] == 0;
	tap_ok(o != NULL && o2 == o && ok, "a reused slot comes back zeroed in every copy");
	rsk_mempool_destroy(z);

	tap_ok(rsk_mempool_create(&p, &cfg) == 0, "create with a template");
	tp.a = 0; /* the pool keeps its own copy */
	o = rsk_mempool_alloc(p);
	ok = o != NULL;
	for (int i = 0; ok && i < p->nr; i++)
		ok &= rsk_percpu_ptr(o, i)->a == 42 && rsk_percpu_ptr(o, i)->b == -1 &&
		      strcmp(rsk_percpu_ptr(o, i)->name, "template") == 0;
	tap_ok(ok, "template: every copy starts as the template");
	rsk_percpu_ptr(o, 0)->a = 7;
	rsk_mempool_free(p, o);
	o = rsk_mempool_alloc(p);
	tap_ok(o && rsk_percpu_ptr(o, 0)->a == 42, "template: a reused slot starts as the template again");
	struct tmpl *zo = rsk_mempool_zalloc(p);
	ok = zo != NULL;
	for (int i = 0; ok && i < p->nr; i++)
		ok &= rsk_percpu_ptr(zo, i)->a == 0 && rsk_percpu_ptr(zo, i)->name[0] == 0;
	tap_ok(ok, "zalloc ignores the template: zero");
	rsk_mempool_destroy(p);

	cfg.init = init_cb;
	cfg.init_arg = (void *)100;
	tp.a = 42;
	tap_ok(rsk_mempool_create(&p, &cfg) == 0, "create with template and init callback");
	init_calls = 0;
	o = rsk_mempool_alloc(p);
	ok = o != NULL && init_calls == p->nr;
	for (int i = 0; ok && i < p->nr; i++)
		ok &= rsk_percpu_ptr(o, i)->a == 42 && rsk_percpu_ptr(o, i)->b == 100 + i;
	tap_ok(ok, "init callback: called once per copy (%d of %d), after the template, with the index",
	       init_calls, p->nr);
	init_fail_at = p->nr - 1;
	errno = 0;
	struct rsk_mempool_stats st;
	struct tmpl *bad = rsk_mempool_alloc(p);
	rsk_mempool_stats(p, &st);
	tap_ok(bad == NULL && errno == ENOSPC && st.live == 1,
	       "init callback error: NULL, errno is its value, the slot is free again");
	init_fail_at = -1;
	rsk_mempool_destroy(p);
}

/* --- limits and ranges ---------------------------------------------------- */

static void limits(void)
{
	struct rsk_mempool_config cfg = {.size = 8, .max_items = 3};
	struct rsk_mempool *p = NULL;
	struct rsk_mempool_stats st;
	void *o[4];
	int ok = 1;

	rsk_mempool_create(&p, &cfg);
	for (int i = 0; i < 3; i++)
		o[i] = rsk_mempool_alloc(p);
	errno = 0;
	o[3] = rsk_mempool_alloc(p);
	tap_ok(o[0] && o[1] && o[2] && o[3] == NULL && errno == ENOMEM, "max_items 3: the 4th -> NULL, ENOMEM");
	rsk_mempool_free(p, o[1]);
	o[1] = rsk_mempool_zalloc(p);
	tap_ok(o[1] != NULL, "max_items: after a free, one more");
	rsk_mempool_destroy(p);

	/* max_bytes of one range: exactly one range's objects. */
	cfg.max_items = 0;
	cfg.max_bytes = (size_t)rsk_possible_cpus() * RSK_MEMPOOL_STRIDE;
	rsk_mempool_create(&p, &cfg);
	rsk_mempool_stats(p, &st);
	size_t n = 0;
	while (rsk_mempool_alloc(p) != NULL)
		n++;
	int e = errno;
	rsk_mempool_stats(p, &st);
	tap_ok(n == st.items_per_range && e == ENOMEM && st.ranges == 1,
	       "max_bytes of one range: %zu objects (%zu per range), then ENOMEM", n, st.items_per_range);
	rsk_mempool_destroy(p);

	/* No limit: a second range when the first is full, same arithmetic. */
	p = make(8, 0, RSK_INDEX_CPU, 0);
	rsk_mempool_stats(p, &st);
	intptr_t *last = NULL;
	for (size_t i = 0; i <= st.items_per_range; i++)
		last = rsk_mempool_zalloc(p);
	rsk_mempool_stats(p, &st);
	ok = last != NULL && st.ranges == 2 && st.live == st.items_per_range + 1 &&
	     st.reserved_bytes == 2 * (size_t)p->nr * RSK_MEMPOOL_STRIDE;
	for (int i = 0; ok && i < p->nr; i++) {
		*rsk_percpu_ptr(last, i) = i + 1;
		intptr_t v;
		ok &= rsk_pcounter_read(p, last, i, &v) == 0 && v == i + 1;
	}
	tap_ok(ok, "a full range: a second one (%zu ranges, %zu bytes reserved), copies addressed alike",
	       st.ranges, st.reserved_bytes);
	rsk_mempool_destroy(p);
}

/* --- lazy commit and accounting ------------------------------------------- */

struct adder {
	struct rsk_mempool *p;
	intptr_t **ctr;
	int n, cpu;
	long reps;
};

static void *add_all(void *arg)
{
	struct adder *a = arg;

	if (a->cpu >= 0)
		pin(a->cpu);
	for (long r = 0; r < a->reps; r++)
		for (int i = 0; i < a->n; i++)
			rsk_pcounter_add(a->p, a->ctr[i], 1);
	return NULL;
}

/* Pages a CPU's copies of n counters of 8 bytes take: range by range. */
static size_t pages_per_copy(size_t n, size_t per_range, size_t hdr)
{
	size_t pages = 0;

	while (n > 0) {
		size_t k = n < per_range ? n : per_range;
		pages += (hdr + k * 8 + (size_t)page - 1) / (size_t)page;
		n -= k;
	}
	return pages;
}

static int cpus_of(int *cpus, int max)
{
	int n = 0;

	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &allowed))
			cpus[n++] = c;
	return n;
}

static void accounting_checks(void);

/*
 * Whether a read of an untouched private anonymous page maps the shared
 * zero page here (present, not exclusively mapped).  Some kernels give it
 * a private zeroed page of its own instead (seen on a 6.18 VM): reading a
 * copy then commits memory, and the checks that say "reading commits
 * nothing" cannot hold.
 */
static int reads_map_zero_page(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	int pm = open("/proc/self/pagemap", O_RDONLY), zero = 0;
	uint64_t ent = 0;

	if (m != MAP_FAILED && pm >= 0) {
		(void)*(volatile char *)m;
		if (pread(pm, &ent, 8, (off_t)((uintptr_t)m / (uintptr_t)pg * 8)) == 8)
			zero = (ent >> 63 & 1) && !(ent >> 56 & 1);
	}
	if (pm >= 0)
		close(pm);
	if (m != MAP_FAILED)
		munmap(m, (size_t)pg);
	return zero;
}
static int zero_page_reads;

static void accounting(void)
{
	int pm = open("/proc/self/pagemap", O_RDONLY);

	/* Without pagemap the pool falls back to mincore(), which counts the
	 * zero pages that reading untouched copies maps: these exact checks
	 * then do not hold. */
	if (pm < 0) {
		tap_ok(1, "# SKIP accounting: /proc/self/pagemap not readable here");
		return;
	}
	close(pm);
	zero_page_reads = reads_map_zero_page();
	if (!zero_page_reads)
		tap_diag("this kernel maps a private page on a read fault, not the zero page: "
			 "the checks that reading commits nothing are skipped");
	accounting_checks();
}

/* tap_ok(cond, ...) for a check that holds only where reads map the zero
 * page; a SKIP (of this kernel, not a missing package) elsewhere. */
#define ZERO_PAGE_OK(cond, ...)                                                \
	(zero_page_reads ? tap_ok((cond), __VA_ARGS__)                         \
			 : tap_ok(1, "# SKIP reads do not map the zero page on this kernel"))

static void accounting_checks(void)
{
	struct rsk_mempool *p = make(8, 0, RSK_INDEX_CPU, 0);
	struct rsk_mempool_stats st;
	intptr_t *c = rsk_mempool_zalloc(p), s;
	int cpus[2], ncpu = cpus_of(cpus, 2);

	rsk_mempool_stats(p, &st);
	tap_ok(st.committed_bytes == 0 && st.reserved_bytes == (size_t)p->nr * RSK_MEMPOOL_STRIDE,
	       "fresh pool with an object: 0 of %zu reserved bytes committed", st.reserved_bytes);
	*rsk_percpu_ptr(c, 0) = 1;
	tap_ok(committed(p) == (size_t)page, "one copy written: one page committed (%zu)", committed(p));
	rsk_pcounter_sum(p, c, &s);
	ZERO_PAGE_OK(s == 1 && committed(p) == (size_t)page,
		     "a sum reads every copy: still one page (zero pages are not committed)");
	size_t before = committed(p);
	rsk_mempool_free(p, c);
	c = rsk_mempool_zalloc(p);
	tap_ok(*rsk_percpu_ptr(c, 0) == 0 && committed(p) == before,
	       "reused slot re-zeroed in the written copy only: nothing more committed (%zu)", before);
	rsk_mempool_destroy(p);

	/* 10,000 counters, added to from each CPU we may run on. */
	enum { N = 10000 };
	static intptr_t *ctr[N];
	p = make(8, 0, RSK_INDEX_CPU, 0);
	for (int i = 0; i < N; i++)
		ctr[i] = rsk_mempool_zalloc(p);
	rsk_mempool_stats(p, &st);
	tap_ok(st.live == N && st.committed_bytes == 0, "10,000 counters allocated: nothing committed");
	for (int k = 0; k < ncpu; k++) {
		struct adder a = {p, ctr, N, cpus[k], 1};
		pthread_t t;
		pthread_create(&t, NULL, add_all, &a);
		pthread_join(t, NULL);
	}
	rsk_mempool_stats(p, &st);
	/* Without rseq the slow path picks the copy of the CPU the thread is
	 * on, which pinning makes the same. */
	size_t want = (size_t)ncpu * pages_per_copy(N, st.items_per_range, 8) * (size_t)page;
	intptr_t total = 0;
	for (int i = 0; i < N; i++) {
		rsk_pcounter_sum(p, ctr[i], &s);
		total += s;
	}
	tap_ok(st.committed_bytes == want && total == (intptr_t)N * ncpu,
	       "10,000 counters added to on %d CPU(s): %zu bytes committed = %.2f bytes per counter per CPU "
	       "(expected %zu; rsk_counter: %d x 128 = %d bytes per counter); sums exact",
	       ncpu, st.committed_bytes, (double)st.committed_bytes / N / ncpu, want, p->nr, p->nr * 128);
	tap_ok(committed(p) == st.committed_bytes, "summing 10,000 counters commits nothing more");
	rsk_mempool_destroy(p);

	/* CID mode: one thread uses one concurrency id. */
	if (!rsk_mm_cid_available() || disabled) {
		tap_ok(1, "# SKIP cid mode accounting: no mm_cid here");
		return;
	}
	/* In a fresh child: its only thread has concurrency id 0 wherever it
	 * runs, so one copy is committed however many CPUs it visits. */
	int pfd[2];
	pid_t pid;
	if (pipe(pfd) != 0 || (pid = fork()) < 0) {
		tap_ok(0, "cid mode accounting: cannot fork");
		return;
	}
	if (pid == 0) {
		long res[4] = {0, 0, 0, 0}; /* sum, committed, indices seen (bits), mode */
		p = make(8, 0, RSK_INDEX_CID, 0);
		c = rsk_mempool_zalloc(p);
		for (int k = 0; k < ncpu; k++) {
			pin(cpus[k]);
			for (int i = 0; i < 100; i++) {
				/* The copy the add went to: the pinned
				 * thread's index (the add returns 0). */
				int idx = rsk_pcounter_add(p, c, 1) == 0 ? rsk_index(p->mode) : -1;
				if (idx >= 0 && idx < 63)
					res[2] |= 1l << idx;
			}
		}
		/* Before the sum, whose reads may commit pages where the
		 * kernel maps no zero page for them. */
		res[1] = (long)committed(p);
		rsk_pcounter_sum(p, c, &s);
		res[0] = (long)s;
		res[3] = p->mode;
		if (write(pfd[1], res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(1);
		_exit(0);
	}
	long res[4] = {0, 0, 0, 0};
	close(pfd[1]);
	int got = read(pfd[0], res, sizeof(res)) == (ssize_t)sizeof(res);
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	tap_ok(got && res[3] == RSK_INDEX_CID && res[0] == 100 * ncpu && res[2] == 1 && res[1] == page,
	       "cid mode: a one-thread process on %d CPU(s) uses copy 0 only (indices 0x%lx) and commits "
	       "one page of %d copies (%ld bytes)", ncpu, res[2], rsk_possible_cpus(), res[1]);
	sched_setaffinity(0, sizeof(allowed), &allowed);
}

static void destroy_unmaps(void)
{
	struct rsk_mempool *p = make(8, 0, RSK_INDEX_CPU, 0);
	intptr_t *c = rsk_mempool_zalloc(p);
	unsigned char v;
	char *base = (char *)c;

	*c = 1;
	rsk_mempool_destroy(p);
	/* mincore on an unmapped range fails with ENOMEM. */
	tap_ok(mincore((void *)((uintptr_t)base & ~((uintptr_t)page - 1)), (size_t)page, &v) == -1 &&
		       errno == ENOMEM,
	       "destroy unmaps the ranges (mincore -> ENOMEM)");
}

/* --- NUMA placement ---------------------------------------------------------- */

static int node_of_cpu(int cpu)
{
	char path[64];

	for (int n = 0; n < 1024; n++) {
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/node%d", cpu, n);
		if (access(path, F_OK) == 0)
			return n;
	}
	return -1;
}

/* Copies written by this thread (pinned to the first CPU we may use), so
 * that first touch would put them all on its node: the pool's binding
 * must put each on its own CPU's node.  Returns how many copies are on
 * the wrong node, or -1 if move_pages cannot tell. */
static int misplaced(unsigned flags, int *nodes_bound, int *distinct)
{
	struct rsk_mempool *p = make(64, 64, RSK_INDEX_CPU, flags);
	struct rsk_mempool_stats st;
	char *o = rsk_mempool_zalloc(p);
	void *pages[CPU_SETSIZE];
	int status[CPU_SETSIZE], n = 0, bad = 0, cpus[1];
	long ret;

	cpus_of(cpus, 1);
	pin(cpus[0]);
	for (int i = 0; i < p->nr && i < CPU_SETSIZE; i++) {
		o[(size_t)i * RSK_MEMPOOL_STRIDE] = 1;
		pages[n++] = o + (size_t)i * RSK_MEMPOOL_STRIDE;
	}
	sched_setaffinity(0, sizeof(allowed), &allowed);
	rsk_mempool_stats(p, &st);
	*nodes_bound = st.numa_nodes;
	*distinct = 0;
	ret = syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0);
	for (int i = 0; ret == 0 && i < n; i++) {
		int want = node_of_cpu(i);
		if (want < 0)
			continue; /* possible but absent CPU */
		*distinct += status[i] != status[0];
		bad += status[i] != want;
	}
	rsk_mempool_destroy(p);
	return ret == 0 ? bad : -1;
}

static void numa(int require_nodes)
{
	int bound, distinct, bad = misplaced(0, &bound, &distinct);

	if (bad < 0) {
		tap_ok(!require_nodes, "# SKIP move_pages: %s", strerror(errno));
		return;
	}
	tap_ok(bad == 0, "move_pages: every CPU's copy is on that CPU's node (%d node(s) bound by the pool, "
	       "copies on %d other node(s) than copy 0's)", bound, distinct);
	if (!require_nodes)
		return;
	tap_ok(bound >= 2, "the pool binds its strides to %d nodes", bound);
	/* Negative control: without the binding, first touch by one thread
	 * puts every copy on that thread's node, and the check sees it. */
	int nb = misplaced(RSK_MEMPOOL_NO_NUMA, &bound, &distinct);
	tap_ok(nb > 0 && bound == 0, "negative control, RSK_MEMPOOL_NO_NUMA: %d copies on the wrong node", nb);
}

/* --- NUMA binding failures (the test build's stand-ins, src/internal.h) --- */

#define FAKE_CPUS 64
static int fake_nodes;			/* 0: the machine's topology */
static int fake_cpu_node[FAKE_CPUS];	/* each CPU's node; >= fake_nodes: no memory */
static int fake_errno[FAKE_CPUS];	/* what binding each CPU's stride fails with */
static int fake_all_errno;		/* what every binding fails with (0: none) */
static int fake_calls[FAKE_CPUS];	/* bindings tried per CPU */

int rsk_inject_numa_nodes(void)
{
	return fake_nodes;
}

int rsk_inject_numa_cpu_node(int cpu)
{
	return cpu < FAKE_CPUS ? fake_cpu_node[cpu] : -1;
}

int rsk_inject_numa_mbind(int cpu, int node)
{
	if (cpu >= FAKE_CPUS)
		return EINVAL;
	fake_calls[cpu]++;
	if (fake_all_errno)
		return fake_all_errno;
	if (node >= fake_nodes) /* MPOL_PREFERRED on a node without memory */
		return EINVAL;
	return fake_errno[cpu];
}

/* A pool of two ranges under the stand-ins; its stats and stderr. */
static void fake_numa_pool(struct rsk_mempool_stats *st, char *err, size_t len)
{
	struct rsk_mempool *p;
	void *o[40];
	size_t n = 0;

	memset(fake_calls, 0, sizeof(fake_calls));
	memset(st, 0, sizeof(*st));
	capture_start();
	p = make(4096, 64, RSK_INDEX_CPU, 0);
	while (p != NULL && n < sizeof(o) / sizeof(o[0]) && rsk_mempool_stats(p, st) == 0 &&
	       st->ranges < 2)
		o[n++] = rsk_mempool_alloc(p);
	if (p != NULL)
		rsk_mempool_destroy(p);
	capture_end(err, len);
}

static void numa_failures(void)
{
	struct rsk_mempool_stats st;
	char err[4096];
	int nr = rsk_possible_cpus(), others_ok = 1, odd_calls = 0;

	if (nr < 2 || nr > FAKE_CPUS) {
		for (int i = 0; i < 3; i++)
			tap_ok(1, "# SKIP numa: the stand-in topology needs 2 to 64 possible CPUs "
			       "(%d here)", nr);
		return;
	}
	/* One CPU's binding fails (EINVAL, as MPOL_PREFERRED on a node that
	 * has no memory gives): that CPU's copies go to first touch, the
	 * others stay bound in every later range, and it is reported. */
	fake_nodes = 2;
	for (int i = 0; i < nr; i++)
		fake_cpu_node[i] = i % 2, fake_errno[i] = 0;
	fake_errno[1] = EINVAL;
	fake_numa_pool(&st, err, sizeof(err));
	for (int i = 0; i < nr; i++)
		if (i != 1 && fake_calls[i] != (int)st.ranges)
			others_ok = 0;
	tap_ok(st.ranges == 2 && fake_calls[1] == 1 && others_ok && st.numa_nodes == 2 &&
		       strstr(err, "mbind") != NULL && strstr(err, "CPU 1 ") != NULL,
	       "numa: one CPU's mbind fails (EINVAL): tried once (%d), the %d other CPUs bound in "
	       "each of %zu ranges (%s), stats numa_nodes %d (2), reported: %s",
	       fake_calls[1], nr - 1, st.ranges, others_ok ? "yes" : "NO", st.numa_nodes,
	       err[0] ? strtok(err, "\n") : "NOTHING");

	/* A node without memory: its CPUs are not bound at all (the kernel
	 * refuses it; first touch takes the nearest node with memory). */
	for (int i = 0; i < nr; i++)
		fake_cpu_node[i] = i % 2 ? 2 : 0, fake_errno[i] = 0;
	fake_numa_pool(&st, err, sizeof(err));
	others_ok = 1;
	for (int i = 0; i < nr; i++) {
		if (i % 2)
			odd_calls += fake_calls[i];
		else if (fake_calls[i] != (int)st.ranges)
			others_ok = 0;
	}
	tap_ok(st.ranges == 2 && odd_calls == 0 && others_ok && st.numa_nodes == 2 && err[0] == 0,
	       "numa: CPUs of a node without memory are left to first touch (%d bindings tried), "
	       "the others bound in each range (%s), numa_nodes %d (2), nothing reported (%s)",
	       odd_calls, others_ok ? "yes" : "NO", st.numa_nodes, err[0] ? strtok(err, "\n") : "");

	/* No NUMA in the kernel, or a seccomp filter (ENOSYS): the first
	 * failure ends the binding of the pool, and the stats say so. */
	for (int i = 0; i < nr; i++)
		fake_cpu_node[i] = i % 2;
	fake_all_errno = ENOSYS;
	fake_numa_pool(&st, err, sizeof(err));
	odd_calls = 0;
	for (int i = 0; i < nr; i++)
		odd_calls += fake_calls[i];
	tap_ok(st.ranges == 2 && odd_calls == 1 && st.numa_nodes == 0,
	       "numa: mbind gives ENOSYS: one try in all (%d), numa_nodes %d (0)", odd_calls,
	       st.numa_nodes);
	fake_all_errno = 0;
	fake_nodes = 0;
}

/* The row of the "committed memory of a cid pool used by 2 threads
 * on a machine with 64 possible CPUs" (tests/qemu/mempool-numa.sh boots
 * 64 CPUs of which the kernel brings up 2, maxcpus=2, and checks that the
 * guest's possible CPUs are 0-63): 10,000 pool-backed counters in CID mode, two
 * threads adding to each, against 10,000 rsk_counters (RSS growth). */
static long rss(void)
{
	long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * page;
}

static void *cid_adder(void *arg)
{
	struct adder *a = arg;

	for (int i = 0; i < a->n; i++)
		rsk_pcounter_add(a->p, a->ctr[i], 1);
	return NULL;
}

static void cid_figure(void)
{
	enum { N = 10000 };
	static intptr_t *ctr[N];
	static struct rsk_counter *rc[N];
	struct rsk_mempool *p = make(8, 0, RSK_INDEX_CID, 0);
	struct rsk_mempool_stats st;
	struct adder a = {p, ctr, N, -1, 1};
	pthread_t t[2];
	intptr_t total = 0, s;
	long r0;

	char buf[128] = "";
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	if (f != NULL) {
		if (fgets(buf, sizeof(buf), f) == NULL)
			buf[0] = 0;
		fclose(f);
	}
	tap_diag("possible CPUs (sysfs): %s", buf);
	for (int i = 0; i < N; i++)
		ctr[i] = rsk_mempool_zalloc(p);
	pthread_create(&t[0], NULL, cid_adder, &a);
	pthread_create(&t[1], NULL, cid_adder, &a);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	for (int i = 0; i < N; i++) {
		rsk_pcounter_sum(p, ctr[i], &s);
		total += s;
	}
	rsk_mempool_stats(p, &st);
	memset(rc, 0, sizeof(rc));
	r0 = rss();
	for (int i = 0; i < N && rsk_counter_create(&rc[i], RSK_INDEX_CID) == 0; i++)
		rsk_counter_add(rc[i], 1);
	long counter_bytes = rss() - r0;
	tap_ok(total == 2 * N && st.committed_bytes <= 2 * pages_per_copy(N, st.items_per_range, 8) * (size_t)page,
	       "cid pool, 2 threads, %d possible CPUs (mode %s): 10,000 counters commit %zu bytes of %zu "
	       "reserved; 10,000 rsk_counters: %ld bytes (ratio %.4f)",
	       p->nr, p->mode == RSK_INDEX_CID ? "cid" : "cpu", st.committed_bytes, st.reserved_bytes,
	       counter_bytes, counter_bytes > 0 ? (double)st.committed_bytes / (double)counter_bytes : 0.0);
	for (int i = 0; i < N; i++)
		rsk_counter_destroy(rc[i]);
	rsk_mempool_destroy(p);
}

/* --- robust mode -------------------------------------------------------- */

static void robust(void)
{
	char buf[4096];
	struct rsk_mempool *p = make(32, 0, RSK_INDEX_CPU, RSK_MEMPOOL_ROBUST);
	struct rsk_mempool *q = make(32, 0, RSK_INDEX_CPU, 0);
	struct rsk_mempool_stats st;
	char *o, *o2, local[32];
	int ret, ok = 1;

	/* Negative control: correct use reports nothing. */
	capture_start();
	o = rsk_mempool_alloc(p);
	memset(o, 1, 32);
	ret = rsk_mempool_free(p, o);
	o2 = rsk_mempool_alloc(p);
	rsk_mempool_free(p, o2);
	capture_end(buf, sizeof(buf));
	rsk_mempool_stats(p, &st);
	tap_ok(ret == 0 && buf[0] == 0 && st.errors == 0 && o2 == o,
	       "robust, correct use: no report (stderr '%s')", buf);

	/* Poison: the written copy, not the untouched ones. */
	o = rsk_mempool_alloc(p);
	memset(o, 1, 32);
	rsk_mempool_free(p, o);
	for (int i = 0; i < 32; i++)
		ok &= (unsigned char)o[i] == RSK_MEMPOOL_POISON;
	for (int c = 1; c < p->nr; c++)
		ok &= rsk_percpu_ptr(o, c)[0] == 0;
	tap_ok(ok, "robust: a freed written copy is poisoned (0x%x), untouched copies stay zero",
	       RSK_MEMPOOL_POISON);

	/* Double free. */
	capture_start();
	ret = rsk_mempool_free(p, o);
	capture_end(buf, sizeof(buf));
	tap_ok(ret == -EALREADY && strstr(buf, "rseqkit: mempool") && strstr(buf, "double free of"),
	       "robust: double free -> -EALREADY and '%.*s'", (int)strcspn(buf, "\n"), buf);

	/* Foreign pointers: the stack, inside an object, another copy, another pool. */
	o = rsk_mempool_alloc(p);
	void *other = rsk_mempool_alloc(q);
	capture_start();
	int r1 = rsk_mempool_free(p, local);
	int r2 = rsk_mempool_free(p, o + 8);
	int r3 = rsk_mempool_free(p, rsk_percpu_ptr(o, p->nr - 1));
	int r4 = rsk_mempool_free(p, other);
	capture_end(buf, sizeof(buf));
	tap_ok(r1 == -EINVAL && r2 == -EINVAL && r4 == -EINVAL && (p->nr == 1 || r3 == -EINVAL) &&
		       strstr(buf, "free of a pointer not from this pool:") &&
		       strstr(buf, "free of a pointer that is not an object:") &&
		       (p->nr == 1 || strstr(buf, "free of a copy other than copy 0:")),
	       "robust: foreign pointers -> -EINVAL, each reported");
	rsk_mempool_stats(p, &st);
	tap_ok(st.errors == 5 - (p->nr == 1), "robust: errors counted (%lu)", st.errors);

	/* Write after free, found when the slot is handed out again. */
	rsk_mempool_free(p, o);
	o[5] = 9; /* deliberately: the check under test */
	capture_start();
	o2 = rsk_mempool_alloc(p);
	capture_end(buf, sizeof(buf));
	tap_ok(o2 == o && strstr(buf, "write after free to copy 0 of") && strstr(buf, "(byte 5)") && o2[5] == 0,
	       "robust: write after free reported at reuse ('%.*s'), the object comes back zeroed",
	       (int)strcspn(buf, "\n"), buf);

	/* Non-robust pool, same misuse: error codes, no report. */
	capture_start();
	void *qo = rsk_mempool_alloc(q);
	rsk_mempool_free(q, qo);
	r1 = rsk_mempool_free(q, qo);
	r2 = rsk_mempool_free(q, local);
	capture_end(buf, sizeof(buf));
	tap_ok(r1 == -EALREADY && r2 == -EINVAL && buf[0] == 0,
	       "non-robust pool: double free / foreign pointer -> -EALREADY / -EINVAL, nothing printed");

	/* Live objects at destroy. */
	capture_start();
	ret = rsk_mempool_destroy(p);
	capture_end(buf, sizeof(buf));
	tap_ok(ret == -EBUSY && strstr(buf, "object still live at destroy") &&
		       strstr(buf, "destroyed with 1 object(s) still live"),
	       "robust: a live object at destroy -> -EBUSY and reported");
	capture_start();
	ret = rsk_mempool_destroy(q);
	capture_end(buf, sizeof(buf));
	tap_ok(ret == 0 && buf[0] == 0, "non-robust: destroy with live objects -> 0, silent");
	p = make(32, 0, RSK_INDEX_CPU, RSK_MEMPOOL_ROBUST);
	o = rsk_mempool_alloc(p);
	rsk_mempool_free(p, o);
	capture_start();
	ret = rsk_mempool_destroy(p);
	capture_end(buf, sizeof(buf));
	tap_ok(ret == 0 && buf[0] == 0, "robust, everything freed: destroy -> 0, silent");
}

/* --- fork ------------------------------------------------------------------ */

static void forked(void)
{
	struct rsk_mempool *p = make(8, 0, RSK_INDEX_CPU, 0);
	intptr_t *c = rsk_mempool_zalloc(p), s;
	int status = -1;
	pid_t pid;

	for (int i = 0; i < 10; i++)
		rsk_pcounter_add(p, c, 3);
	pid = fork();
	if (pid == 0) {
		intptr_t *d = rsk_mempool_zalloc(p);
		int bad = rsk_pcounter_sum(p, c, &s) != 0 || s != 30;
		rsk_pcounter_add(p, c, 1);
		rsk_pcounter_add(p, d, 2);
		bad |= rsk_pcounter_sum(p, c, &s) != 0 || s != 31;
		bad |= rsk_pcounter_sum(p, d, &s) != 0 || s != 2;
		bad |= rsk_mempool_free(p, d) != 0 || rsk_mempool_destroy(p) != 0;
		_exit(bad);
	}
	waitpid(pid, &status, 0);
	rsk_pcounter_sum(p, c, &s);
	tap_ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && s == 30,
	       "fork: the child sees the parent's values, allocates, adds, destroys; the parent keeps its own");
	rsk_mempool_destroy(p);
}

/* --- several pools, churn, concurrency ----------------------------------- */

static void several(void)
{
	struct rsk_mempool *p[3] = {make(8, 0, RSK_INDEX_CPU, 0), make(100, 16, RSK_INDEX_CID, 0),
				    make(4096, 4096, RSK_INDEX_CPU, RSK_MEMPOOL_ROBUST)};
	char *o[3][20];
	int ok = p[0] && p[1] && p[2];

	for (int k = 0; ok && k < 20; k++)
		for (int j = 0; j < 3; j++) {
			o[j][k] = rsk_mempool_zalloc(p[j]);
			ok &= o[j][k] != NULL && ((uintptr_t)o[j][k] & (j == 2 ? 4095 : j == 1 ? 15 : 7)) == 0;
			for (int i = 0; ok && i < p[j]->nr; i++)
				rsk_percpu_ptr(o[j][k], i)[0] = (char)(j * 50 + k + i);
		}
	for (int k = 0; ok && k < 20; k++)
		for (int j = 0; j < 3; j++)
			for (int i = 0; i < p[j]->nr; i++)
				ok &= rsk_percpu_ptr(o[j][k], i)[0] == (char)(j * 50 + k + i);
	for (int k = 0; ok && k < 20; k++)
		ok &= rsk_mempool_free(p[0], o[1][k]) == -EINVAL;
	for (int k = 0; ok && k < 20; k++)
		for (int j = 0; j < 3; j++)
			ok &= rsk_mempool_free(p[j], o[j][k]) == 0;
	for (int j = 0; j < 3; j++)
		ok &= p[j] && rsk_mempool_destroy(p[j]) == 0;
	tap_ok(ok, "three pools at once (8 B cpu, 100 B cid, 4 KiB robust): no overlap, each rejects the others'");
}

struct churn {
	struct rsk_mempool *p;
	intptr_t *shared;
	int rounds;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;

	for (int r = 0; r < c->rounds; r++) {
		intptr_t *mine = rsk_mempool_zalloc(c->p);
		if (mine == NULL)
			return (void *)1;
		rsk_pcounter_add(c->p, mine, 1);
		rsk_pcounter_add(c->p, c->shared, 1);
		intptr_t s;
		if (rsk_pcounter_sum(c->p, mine, &s) != 0 || s != 1)
			return (void *)1;
		rsk_mempool_free(c->p, mine);
	}
	return NULL;
}

static void churn(enum rsk_index_mode mode, const char *mn)
{
	struct rsk_mempool *p = make(8, 0, mode, 0);
	struct churn c = {p, rsk_mempool_zalloc(p), 50};
	struct rsk_mempool_stats st;
	int bad = 0;
	intptr_t s;

	for (int wave = 0; wave < 20; wave++) {
		pthread_t t[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, churn_thread, &c);
		for (int i = 0; i < 4; i++) {
			void *r;
			pthread_join(t[i], &r);
			bad |= r != NULL;
		}
	}
	rsk_pcounter_sum(p, c.shared, &s);
	rsk_mempool_stats(p, &st);
	tap_ok(!bad && s == 20 * 4 * 50 && st.live == 1,
	       "%s: 80 short-lived threads allocate, add, free: shared sum %ld, 1 live", mn, (long)s);
	rsk_mempool_destroy(p);
}

struct conc {
	struct rsk_mempool *p;
	intptr_t *ctr[3];
	long reps;
	int stop, exchanges, drainer_done;
	intptr_t drained;
	long done; /* rounds of adds, all threads */
};

/* At least reps rounds, and on until the drainer has exchanged 20 times
 * (so that adds and exchanges overlap however the threads are scheduled). */
static void *conc_adder(void *arg)
{
	struct conc *c = arg;
	long r;

	for (r = 0; r < c->reps || (__atomic_load_n(&c->exchanges, __ATOMIC_ACQUIRE) < 20 &&
				    !__atomic_load_n(&c->drainer_done, __ATOMIC_ACQUIRE) && r < 1000 * c->reps);
	     r++)
		for (int i = 0; i < 3; i++)
			if (rsk_pcounter_add(c->p, c->ctr[i], i + 1) < 0)
				return (void *)1;
	__atomic_fetch_add(&c->done, r, __ATOMIC_RELAXED);
	return NULL;
}

static void *conc_drainer(void *arg)
{
	struct conc *c = arg;
	int idx = 0;

	in_drainer = 1;
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		intptr_t old;
		if (rsk_pcounter_exchange(c->p, c->ctr[0], idx, 0, &old) != 0) {
			__atomic_store_n(&c->drainer_done, 1, __ATOMIC_RELEASE);
			return (void *)1;
		}
		c->drained += old;
		__atomic_fetch_add(&c->exchanges, 1, __ATOMIC_RELEASE);
		idx = (idx + 1) % c->p->nr;
		usleep(200);
	}
	return NULL;
}

static void concurrent(enum rsk_index_mode mode, const char *mn)
{
	enum { THREADS = 4 };
	struct rsk_mempool *p = make(24, 0, mode, 0);
	intptr_t *obj = rsk_mempool_zalloc(p); /* three counters in one object */
	struct conc c = {p, {&obj[0], &obj[1], &obj[2]}, disabled || under_valgrind ? 10000 : 50000, 0, 0, 0, 0, 0};
	pthread_t t[THREADS], d;
	intptr_t s[3];
	int bad = 0;
	void *r;

	struct rsk_stats st0, st1;
	rsk_stats_process(&st0);
	__atomic_store_n(&inject_on, 1, __ATOMIC_RELAXED);
	pthread_create(&d, NULL, conc_drainer, &c);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, conc_adder, &c);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	pthread_join(d, &r);
	__atomic_store_n(&inject_on, 0, __ATOMIC_RELAXED);
	bad |= r != NULL;
	for (int i = 0; i < 3; i++)
		rsk_pcounter_sum(p, c.ctr[i], &s[i]);
	long want = c.done;
	rsk_stats_process(&st1);
	tap_diag("%s: %llu aborts, %llu slow paths, %llu fences, %llu gate waits", mn,
		 (unsigned long long)(st1.aborts - st0.aborts), (unsigned long long)(st1.slow_paths - st0.slow_paths),
		 (unsigned long long)(st1.fences - st0.fences), (unsigned long long)(st1.gate_waits - st0.gate_waits));
	tap_ok(!bad && s[0] + c.drained == want && s[1] == 2 * want && s[2] == 3 * want,
	       "%s: %d threads, %ld rounds of adds on 3 counters in one object, a drainer exchanging "
	       "%d times: exact (%ld + %ld drained, %ld, %ld)",
	       mn, THREADS, c.done, c.exchanges, (long)s[0], (long)c.drained, (long)s[1], (long)s[2]);
	rsk_mempool_destroy(p);
}

/* --- iteration --------------------------------------------------------------- */

static int visit(void *copy, int idx, void *arg)
{
	int *seen = arg;

	if (*(intptr_t *)copy != idx * 10 || seen[0] != idx)
		return -100;
	seen[0]++;
	return idx == seen[1] ? 77 : 0;
}

static void iteration(void)
{
	struct rsk_mempool *p = make(16, 0, RSK_INDEX_CPU, 0);
	intptr_t *o = rsk_mempool_zalloc(p);
	int seen[2] = {0, -1};

	for (int i = 0; i < p->nr; i++)
		rsk_percpu_ptr(o, i)[1] = i * 10;
	tap_ok(rsk_mempool_for_each(p, &o[1], visit, seen) == 0 && seen[0] == p->nr,
	       "for_each visits copies 0 .. nr-1 in order (interior pointer)");
	seen[0] = 0;
	seen[1] = p->nr - 1;
	tap_ok(rsk_mempool_for_each(p, &o[1], visit, seen) == 77, "for_each stops at a nonzero return");
	rsk_mempool_free(p, o);
	tap_ok(rsk_mempool_for_each(p, &o[1], visit, seen) == -EINVAL, "for_each on a freed object -> -EINVAL");
	rsk_mempool_destroy(p);
}

/* --- driver ------------------------------------------------------------------- */

/* rsk_pcounter_add in robust mode checks that the word lies in the pool
 * it is given: another pool's counter, or a pointer outside any pool, is
 * -EINVAL with a report, and nothing is added; the right pool adds. */
static void robust_pcounter(void)
{
	char buf[4096];
	struct rsk_mempool *p = make(sizeof(intptr_t), 0, RSK_INDEX_CPU, RSK_MEMPOOL_ROBUST);
	struct rsk_mempool *q = make(sizeof(intptr_t), 0, RSK_INDEX_CPU, RSK_MEMPOOL_ROBUST);
	struct rsk_mempool *plain = make(sizeof(intptr_t), 0, RSK_INDEX_CPU, 0);
	intptr_t *cp = p ? rsk_mempool_zalloc(p) : NULL, *cq = q ? rsk_mempool_zalloc(q) : NULL;
	intptr_t *cn = plain ? rsk_mempool_zalloc(plain) : NULL, sp = -1, sq = -1, sn = -1;
	intptr_t local = 0;
	int wrong, outside, right, plain_ok;

	if (cp == NULL || cq == NULL || cn == NULL) {
		tap_ok(0, "robust pcounter: cannot make the pools");
		tap_ok(0, "robust pcounter: cannot make the pools");
		return;
	}
	capture_start();
	wrong = rsk_pcounter_add(p, cq, 5);
	outside = rsk_pcounter_add(p, &local, 5);
	capture_end(buf, sizeof(buf));
	right = rsk_pcounter_add(p, cp, 3);
	rsk_pcounter_sum(p, cp, &sp);
	rsk_pcounter_sum(q, cq, &sq);
	tap_ok(wrong == -EINVAL && outside == -EINVAL && local == 0 && sq == 0 && right == 0 &&
		       sp == 3 && strstr(buf, "rsk_pcounter_add") != NULL,
	       "robust pcounter: another pool's counter and a local word -EINVAL, nothing added, "
	       "reported; its own adds (%d %d %d, sums %ld %ld; stderr '%.120s')",
	       wrong, outside, right, (long)sp, (long)sq, buf);
	/* A pool that is not robust does not check (the documented
	 * precondition): its fast path stays one section. */
	plain_ok = rsk_pcounter_add(plain, cn, 2);
	rsk_pcounter_sum(plain, cn, &sn);
	tap_ok(plain_ok == 0 && sn == 2, "a plain pool's pcounter add (%d, sum %ld)", plain_ok,
	       (long)sn);
	rsk_mempool_destroy(p);
	rsk_mempool_destroy(q);
	rsk_mempool_destroy(plain);
}

static void run_all(void)
{
	bad_input();
	word_bounds();
	addressing(RSK_INDEX_CPU, "cpu");
	addressing(RSK_INDEX_CID, "cid");
	initial_values();
	limits();
	iteration();
	robust();
	robust_pcounter();
	several();
	churn(RSK_INDEX_CPU, "cpu");
	churn(RSK_INDEX_CID, "cid");
	concurrent(RSK_INDEX_CPU, "cpu");
	concurrent(RSK_INDEX_CID, "cid");
	if (under_valgrind)
		return;
	forked();
	accounting();
	destroy_unmaps();
	numa(0);
	numa_failures();
}

static void without_rseq(char **argv)
{
	int fds[2], status = 0, nok = 0, notok = 0;
	char line[1024];
	pid_t pid;
	FILE *f;

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
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && notok == 0 && nok > 40,
	       "RSEQKIT_DISABLE=1 (slow paths only): %d checks pass, %d fail", nok, notok);
}

int main(int argc, char **argv)
{
	int child = argc > 1 && strcmp(argv[1], "--child") == 0;
	const char *e = getenv("RSEQKIT_DISABLE");

	if (argc > 1 && strcmp(argv[1], "--help") == 0) {
		printf("usage: %s [--valgrind | --numa | --cid-figure | --child]\n", argv[0]);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--cid-figure") == 0) {
		page = sysconf(_SC_PAGESIZE);
		cid_figure();
		printf("1..%d\n", tap_n);
		return tap_done();
	}
	if (argc > 1 && strcmp(argv[1], "--numa") == 0) {
		/* tests/qemu/mempool-numa.sh, on a machine of two nodes */
		page = sysconf(_SC_PAGESIZE);
		sched_getaffinity(0, sizeof(allowed), &allowed);
		numa(1);
		printf("1..%d\n", tap_n);
		return tap_done();
	}
	under_valgrind = argc > 1 && strcmp(argv[1], "--valgrind") == 0;
	disabled = e != NULL && e[0] == '1';
	page = sysconf(_SC_PAGESIZE);
	sched_getaffinity(0, sizeof(allowed), &allowed);
	run_all();
	if (!child && !under_valgrind)
		without_rseq(argv);
	printf("1..%d\n", tap_n);
	return tap_done();
}
