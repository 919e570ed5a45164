/* SPDX-License-Identifier: MIT */
/*
 * rseqkit's malloc, function by function (linked with librseqkit-malloc.so,
 * so malloc, free, ... are its): glibc 2.36's behaviour for every edge case
 * of <rseqkit/malloc.h>, block contents through realloc growth and
 * shrinking, calloc's zeroing of reused memory, alignments up to 1 MiB,
 * ENOMEM with nothing leaked under RLIMIT_AS (in a child), RSS falling
 * after everything is freed and malloc_trim(), and freed large blocks
 * kept for reuse unmapped by malloc_trim() and by the timed release.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rseqkit/malloc.h>
#include "tap.h"

static unsigned char pat(const void *key, size_t i)
{
	return (unsigned char)(((uintptr_t)key >> 4) * 31 + i * 7 + 1);
}

static void fill(unsigned char *p, size_t n, const void *key)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(key, i);
}

static int same(const unsigned char *p, size_t n, const void *key)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(key, i))
			return 0;
	return 1;
}

/* Called through these, the compiler cannot see the sizes that must fail
 * (it warns about them) nor the block that a failed realloc keeps. */
static void *(*volatile malloc_v)(size_t) = malloc;
static void *(*volatile calloc_v)(size_t, size_t) = calloc;
static void *(*volatile reallocarray_v)(void *, size_t, size_t) = reallocarray;
static void *(*volatile realloc_v)(void *, size_t) = realloc;
static void *(*volatile memalign_v)(size_t, size_t) = memalign;

static size_t rss_bytes(void)
{
	struct rsk_malloc_stats st;

	return rsk_malloc_stats(&st, -1) == 0 ? st.rss : 0;
}

/* Sizes: every one up to 1100, then around each class and power of two. */
/* The system page, or the one RSEQKIT_MALLOC_PAGE_ makes the allocator
 * emulate (a test knob: rseqkit-malloc(7)). */
static size_t sys_page(void)
{
	const char *v = getenv("RSEQKIT_MALLOC_PAGE_");
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	if (v != NULL && strtoul(v, NULL, 0) > pg)
		pg = strtoul(v, NULL, 0);
	return pg;
}

/* Bytes of address space mapped (/proc/self/statm's first field). */
static size_t vm_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;

	if (f != NULL) {
		if (fscanf(f, "%lu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t sizes[4000];
static int nsizes;

static void make_sizes(void)
{
	for (size_t n = 0; n <= 1100; n++)
		sizes[nsizes++] = n;
	for (size_t p = 1024; p <= ((size_t)4 << 20); p *= 2)
		for (size_t q = p; q < 2 * p; q += p / 4) {
			sizes[nsizes++] = q - 1;
			sizes[nsizes++] = q;
			sizes[nsizes++] = q + 1;
		}
}

/* RLIMIT_AS in a child: allocations fail with ENOMEM (small and large),
 * the failed realloc leaves its block intact, and after everything is
 * freed and trimmed the mapped bytes are back where they were. */
static int nomem_child(void)
{
	/* (malloc through malloc_v: clang 14 assumes malloc leaves errno
	 * alone and would read the 0 stored before the call.) */
	struct rsk_malloc_stats st0, st1;
	struct rlimit rl;
	void **keep = mmap(NULL, 1 << 24, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t n = 0, big = 0;
	char *blk;
	void *r;

	if (keep == MAP_FAILED)
		return 10;
	blk = malloc(100);
	fill((unsigned char *)blk, 100, blk);
	rsk_malloc_stats(&st0, -1);
	getrlimit(RLIMIT_AS, &rl);
	rl.rlim_cur = 0;
	{ /* the current size plus 256 MiB */
		FILE *f = fopen("/proc/self/statm", "r");
		unsigned long pages = 0;
		if (f == NULL || fscanf(f, "%lu", &pages) != 1)
			return 11;
		fclose(f);
		rl.rlim_cur = pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)256 << 20);
	}
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		return 12;
	errno = 0;
	for (;;) { /* large blocks until none */
		void *p = malloc_v((size_t)1 << 20);
		if (p == NULL) {
			if (errno != ENOMEM)
				return 13;
			break;
		}
		keep[n++] = p;
		big++;
	}
	errno = 0;
	for (;;) { /* then small ones */
		void *p = malloc_v(3000);
		if (p == NULL) {
			if (errno != ENOMEM)
				return 14;
			break;
		}
		keep[n++] = p;
		if (n >= (1 << 21))
			return 15;
	}
	errno = 0;
	r = realloc_v(blk, (size_t)64 << 20);
	if (r != NULL || errno != ENOMEM || !same((unsigned char *)blk, 100, blk))
		return 16;
	errno = 0;
	if (calloc_v(1, (size_t)64 << 20) != NULL || errno != ENOMEM)
		return 17;
	while (n > 0)
		free(keep[--n]);
	malloc_trim(0);
	rsk_malloc_stats(&st1, -1);
	if (st1.mapped > st0.mapped + ((size_t)8 << 20) || big < 10)
		return 18;
	/* and it works again */
	r = malloc((size_t)1 << 20);
	if (r == NULL)
		return 19;
	free(r);
	free(blk);
	return 0;
}

int main(void)
{
	struct rsk_malloc_stats st;
	void *a, *b, *p;
	int ok, status;
	pid_t pid;

	alarm(120);
	make_sizes();
	tap_plan(28);

	/* 1: it is ours */
	p = malloc(1);
	tap_ok(p != NULL && malloc_usable_size(p) == 16 && rsk_malloc_stats(&st, -1) == 0 && st.in_use >= 16,
	       "malloc is rseqkit's (usable size of malloc(1): %zu)", malloc_usable_size(p));
	free(p);

	/* 2: malloc(0): unique, usable; free(NULL) */
	a = malloc(0);
	b = malloc(0);
	tap_ok(a != NULL && b != NULL && a != b, "malloc(0) returns unique pointers (%p %p)", a, b);
	free(a);
	free(b);
	free(NULL);
	rsk_free(NULL);
	tap_ok(1, "free(NULL) does nothing");

	/* 3: every size: alignment, usable size, contents */
	ok = 1;
	for (int i = 0; i < nsizes && ok; i++) {
		size_t n = sizes[i];
		unsigned char *q = malloc(n);
		ok = q != NULL && ((uintptr_t)q & 15) == 0 && malloc_usable_size(q) >= n;
		if (ok) {
			fill(q, n, q);
			ok = same(q, n, q);
		}
		free(q);
	}
	tap_ok(ok, "%d sizes from 0 to 4 MiB: 16-aligned, usable >= asked, contents kept", nsizes);

	/* 4: realloc growth and shrinking keep contents */
	{
		unsigned char *q = NULL;
		size_t have = 0;
		ok = 1;
		for (int i = 1; i < nsizes && ok; i++) { /* sizes[0] is 0 */
			size_t n = sizes[i];
			q = realloc(q, n);
			ok = q != NULL && same(q, have < n ? have : n, (void *)0x1230);
			if (!ok)
				tap_diag("growing: realloc to %zu (from %zu) lost contents (%p)", n, have, (void *)q);
			if (ok) {
				fill(q, n, (void *)0x1230);
				have = n;
			}
		}
		/* Shrinking (the list is not sorted: where it grows again, only
		 * the bytes kept since are checked). */
		for (int i = nsizes - 1; i > 0 && ok; i -= 3) {
			size_t n = sizes[i];
			q = realloc(q, n);
			ok = q != NULL && same(q, have < n ? have : n, (void *)0x1230);
			if (!ok)
				tap_diag("shrinking: realloc to %zu (from %zu) lost contents (%p)", n, have, (void *)q);
			if (n < have)
				have = n;
		}
		free(q);
	}
	tap_ok(ok, "realloc through every size, growing and shrinking: contents kept");

	/* 5: realloc(p, 0), realloc(NULL, n) */
	p = malloc(50);
	tap_ok(realloc(p, 0) == NULL, "realloc(p, 0) frees p and returns NULL (glibc 2.36)");
	p = realloc(NULL, 70);
	tap_ok(p != NULL && malloc_usable_size(p) >= 70, "realloc(NULL, 70) allocates");
	free(p);

	/* 6: calloc zeroes reused memory, small and large */
	{
		void *blk[64];
		size_t csz[] = { 1, 16, 24, 100, 1000, 5000, 40000, 200000, 300000, 3000000 };
		ok = 1;
		for (size_t k = 0; k < sizeof(csz) / sizeof(csz[0]) && ok; k++) {
			for (int i = 0; i < 64; i++) {
				blk[i] = malloc(csz[k]);
				memset(blk[i], 0xff, csz[k]);
			}
			for (int i = 0; i < 64; i++)
				free(blk[i]);
			for (int i = 0; i < 64; i++) {
				unsigned char *z = calloc(1, csz[k]);
				for (size_t j = 0; z != NULL && j < csz[k]; j++)
					if (z[j] != 0)
						ok = 0;
				ok = ok && z != NULL;
				blk[i] = z;
			}
			for (int i = 0; i < 64; i++)
				free(blk[i]);
		}
	}
	tap_ok(ok, "calloc returns zeroed memory after reuse (16 B to 3 MB)");

	/* 7: overflow: calloc, reallocarray */
	errno = 0;
	p = calloc_v(SIZE_MAX / 2, 3);
	tap_ok(p == NULL && errno == ENOMEM, "calloc overflow: NULL, ENOMEM");
	a = malloc(10);
	memcpy(a, "123456789", 10);
	errno = 0;
	p = reallocarray_v(a, SIZE_MAX / 4, 8);
	tap_ok(p == NULL && errno == ENOMEM && memcmp(a, "123456789", 10) == 0,
	       "reallocarray overflow: NULL, ENOMEM, block intact");
	p = reallocarray_v(a, 100, 4);
	tap_ok(p != NULL && memcmp(p, "123456789", 10) == 0, "reallocarray(p, 100, 4) keeps contents");
	free(p);

	/* 8: sizes beyond what can be mapped */
	errno = 0;
	p = malloc_v(SIZE_MAX);
	b = malloc_v(SIZE_MAX - 4096);
	tap_ok(p == NULL && b == NULL && errno == ENOMEM, "malloc(SIZE_MAX), malloc(SIZE_MAX - 4096): NULL, ENOMEM");
	errno = 0;
	/* More than the address space leaves in one piece: 2^62 bytes, or,
	 * in 32 bits, 4 GiB less 16 MiB (a static 32-bit program on a 64-bit
	 * kernel has almost all of its 4 GiB free: 3 GiB can fit there). */
#if SIZE_MAX > 0xffffffffu
	p = malloc_v((size_t)1 << 62);
#else
	p = malloc_v((size_t)0xff000000u);
#endif
	tap_ok(p == NULL && errno == ENOMEM, "malloc(2^62, or 4 GiB - 16 MiB in 32 bits): NULL, ENOMEM");

	/* 9: posix_memalign's EINVAL */
	p = (void *)0x1;
	tap_ok(posix_memalign(&p, 3, 10) == EINVAL && posix_memalign(&p, sizeof(void *) / 2, 10) == EINVAL &&
		       posix_memalign(&p, 24, 10) == EINVAL && posix_memalign(&p, 0, 10) == EINVAL &&
		       p == (void *)0x1,
	       "posix_memalign: EINVAL for 3, sizeof(void *)/2, 24, 0; *memptr unchanged");

	/* 10: alignments up to 2 MiB, each with several sizes */
	ok = 1;
	for (size_t al = sizeof(void *); al <= ((size_t)2 << 20) && ok; al *= 2) {
		size_t asz[] = { 0, 1, al / 2 + 1, al, al + 1, 3 * al, 5000, 300000 };
		for (size_t k = 0; k < sizeof(asz) / sizeof(asz[0]) && ok; k++) {
			void *q = NULL;
			int r = posix_memalign(&q, al, asz[k]);
			unsigned char *m = aligned_alloc(al, asz[k]);
			unsigned char *m2 = memalign(al, asz[k]);
			ok = r == 0 && q != NULL && ((uintptr_t)q & (al - 1)) == 0 && m != NULL &&
			     ((uintptr_t)m & (al - 1)) == 0 && m2 != NULL && ((uintptr_t)m2 & (al - 1)) == 0 &&
			     malloc_usable_size(q) >= asz[k];
			if (ok) {
				fill(q, asz[k], q);
				fill(m, asz[k], m);
				ok = same(q, asz[k], q) && same(m, asz[k], m);
				m2 = realloc(m2, asz[k] + 100);
				ok = ok && m2 != NULL;
			}
			if (!ok)
				tap_diag("alignment %zu size %zu: %p %p %p", al, asz[k], q, (void *)m, (void *)m2);
			free(q);
			free(m);
			free(m2);
		}
	}
	tap_ok(ok, "posix_memalign, aligned_alloc, memalign: alignments 8 B to 2 MiB, sizes 0 to 300000");

	/* 11: memalign rounds an alignment that is not a power of two up */
	p = memalign_v(48, 10);
	tap_ok(p != NULL && ((uintptr_t)p & 63) == 0, "memalign(48, 10) is 64-aligned (glibc rounds up)");
	free(p);
	errno = 0;
	tap_ok(memalign_v(SIZE_MAX / 2 + 2, 10) == NULL && errno == EINVAL,
	       "memalign beyond half the address space: EINVAL");

	/* 12: valloc, pvalloc */
	{
		size_t pg = sys_page();
		a = valloc(10);
		b = pvalloc(1);
		tap_ok(a != NULL && b != NULL && ((uintptr_t)a & (pg - 1)) == 0 && ((uintptr_t)b & (pg - 1)) == 0 &&
			       malloc_usable_size(b) >= pg,
		       "valloc, pvalloc: page-aligned, pvalloc rounds up to a page");
		free(a);
		free(b);
	}

	/* 13: the rsk_ twins */
	a = rsk_malloc(100);
	a = rsk_realloc(a, 1000);
	b = rsk_calloc(10, 10);
	p = NULL;
	ok = a != NULL && b != NULL && rsk_posix_memalign(&p, 64, 10) == 0 && ((uintptr_t)p & 63) == 0 &&
	     rsk_malloc_usable_size(a) >= 1000;
	rsk_free(a);
	rsk_free(b);
	rsk_free(p);
	a = rsk_aligned_alloc(256, 10);
	b = rsk_memalign(256, 10);
	p = rsk_valloc(10);
	ok = ok && a != NULL && b != NULL && p != NULL && ((uintptr_t)a & 255) == 0;
	rsk_free(a);
	rsk_free(b);
	rsk_free(p);
	p = rsk_pvalloc(10);
	a = rsk_reallocarray(NULL, 3, 5);
	ok = ok && p != NULL && a != NULL;
	rsk_free(p);
	rsk_free(a);
	tap_ok(ok, "rsk_ twins: malloc, realloc, calloc, posix_memalign, aligned_alloc, memalign, valloc, pvalloc, reallocarray");

	/* 14: mallinfo2 */
	{
		void *volatile hold = malloc(1000), *volatile hold2 = malloc(1 << 20);
		struct mallinfo2 mi;
		memset(hold, 1, 1000);
		memset(hold2, 1, 1 << 20);
		mi = mallinfo2();
		tap_ok(mi.uordblks >= 1000 + (1 << 20) && mi.hblks >= 1 && mi.hblkhd >= (1 << 20) && mi.arena > 0,
		       "mallinfo2: in use %zu, large blocks %zu (%zu bytes), arena %zu", mi.uordblks, mi.hblks,
		       mi.hblkhd, mi.arena);
		free(hold);
		free(hold2);
	}

	/* 15: ENOMEM with nothing leaked, in a child under RLIMIT_AS */
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(nomem_child());
	waitpid(pid, &status, 0);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "RLIMIT_AS: ENOMEM from malloc, realloc (block intact), calloc; all mapped memory back after "
	       "free + malloc_trim; allocates again (child status %d)", status);

	/* 16: RSS falls after everything is freed and trimmed */
	{
		enum { N = 48 * 1024 };
		static void *blk[N];
		size_t before, peak, after;
		malloc_trim(0);
		before = rss_bytes();
		for (int i = 0; i < N; i++) {
			blk[i] = malloc(1024 + (size_t)(i % 7) * 16);
			memset(blk[i], 1, 1024);
		}
		peak = rss_bytes();
		for (int i = 0; i < N; i++)
			free(blk[i]);
		tap_ok(malloc_trim(0) == 1, "malloc_trim(0) after freeing 48 Ki blocks releases memory");
		after = rss_bytes();
		tap_ok(peak > before + ((size_t)40 << 20) && after < peak - ((size_t)40 << 20),
		       "RSS: %zu KiB before, %zu KiB with 48 MiB allocated, %zu KiB after free + trim", before >> 10,
		       peak >> 10, after >> 10);
	}

	/* 17: without malloc_trim, free spans go back a second later, at the
	 * next allocation past a cache's fast path */
	{
		enum { N = 24 * 1024 };
		static void *blk[N];
		struct rsk_malloc_stats s0, s1, s2;
		for (int i = 0; i < N; i++) {
			blk[i] = malloc(2000);
			memset(blk[i], 1, 2000);
		}
		rsk_malloc_stats(&s0, -1);
		for (int i = 0; i < N; i++)
			free(blk[i]);
		rsk_malloc_stats(&s1, -1);
		usleep(1100 * 1000);
		p = malloc(100000); /* a class whose cache is empty: the slow path */
		rsk_malloc_stats(&s2, -1);
		free(p);
		tap_ok(s1.mapped >= s0.mapped && s2.mapped + ((size_t)32 << 20) < s1.mapped,
		       "timed release: mapped %zu KiB in use, %zu KiB after free, %zu KiB a second later",
		       s0.mapped >> 10, s1.mapped >> 10, s2.mapped >> 10);
	}

	/* 18: large blocks aligned beyond the system page give all their
	 * pages back: the pieces cut off around them are whole system pages
	 * (so the kernel unmaps them), and so is what free unmaps */
	{
		size_t v0, v1, pg = sys_page();
		malloc_trim(0);
		v0 = vm_bytes();
		for (int i = 0; i < 512; i++) {
			size_t al = pg << (1 + i % 3), n = i % 2 ? 300000 : 70000 + pg / 2;
			p = memalign(al, n);
			if (p == NULL || ((uintptr_t)p & (al - 1)) != 0)
				break;
			memset(p, 1, n);
			p = realloc(p, n + pg + 1000); /* mremap: whole pages too */
			free(p);
		}
		malloc_trim(0);
		v1 = vm_bytes();
		tap_ok(v1 < v0 + ((size_t)8 << 20),
		       "512 blocks aligned to 2-8 pages of %zu, reallocated, freed: mapped %zu KiB before, "
		       "%zu KiB after",
		       pg, v0 >> 10, v1 >> 10);
	}

	/* 20: a freed large block kept for reuse (in the CPU's front cache,
	 * or the shared one) counts as cached, not as a large block, and is
	 * unmapped at malloc_trim, or without it by the timed release (a
	 * front cache's block at the second release that finds it there) */
	{
		struct rsk_malloc_stats s0, s1, s2, s3;
		size_t mb = (size_t)1 << 20;
		void *q;
		malloc_trim(0);
		rsk_malloc_stats(&s0, -1);
		q = malloc_v(mb);
		memset(q, 1, mb);
		free(q);
		rsk_malloc_stats(&s1, -1);
		malloc_trim(0);
		rsk_malloc_stats(&s2, -1);
		tap_ok(s1.large_blocks == s0.large_blocks && s1.cached >= s0.cached + mb &&
			       s2.cached + mb <= s1.cached && s2.mapped + mb <= s1.mapped &&
			       s2.cached < ((size_t)256 << 10), /* no large block stays cached */
		       "a freed 1 MiB block: large blocks %zu -> %zu, cached %zu KiB -> %zu KiB, "
		       "%zu KiB after malloc_trim (mapped %zu KiB -> %zu KiB)",
		       s0.large_blocks, s1.large_blocks, s0.cached >> 10, s1.cached >> 10,
		       s2.cached >> 10, s1.mapped >> 10, s2.mapped >> 10);
		q = malloc_v(mb);
		memset(q, 1, mb);
		free(q);
		rsk_malloc_stats(&s1, -1);
		/* Two releases a second apart, each from the free of a block
		 * too large to be kept (unmapped at once). */
		for (int k = 0; k < 2; k++) {
			usleep(1100 * 1000);
			q = malloc_v(20 * mb);
			free(q);
		}
		rsk_malloc_stats(&s3, -1);
		tap_ok(s3.cached + mb <= s1.cached && s3.mapped + mb <= s1.mapped,
		       "timed release of a freed 1 MiB block: cached %zu KiB -> %zu KiB, mapped %zu KiB -> "
		       "%zu KiB",
		       s1.cached >> 10, s3.cached >> 10, s1.mapped >> 10, s3.mapped >> 10);
	}

	/* 19: the statistics call */
	tap_ok(rsk_malloc_stats(NULL, -1) == -1 && errno == EINVAL && rsk_malloc_stats(&st, -1) == 0 &&
		       st.classes > 40 && st.rss > 0,
	       "rsk_malloc_stats: EINVAL for NULL; %d classes, mapped %zu, cached %zu, central %zu", st.classes,
	       st.mapped, st.cached, st.central);
	return tap_done();
}
