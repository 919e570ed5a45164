/* SPDX-License-Identifier: MIT */
/*
 * A copy buffer reads and writes exactly item_size bytes of the caller's
 * item, whatever its size and alignment: item sizes 1 to 24 (whole words
 * and not), the sizes around 4 and 8 words (the x86-64 sections of their
 * own) and the largest, at every offset 0 to 7 from a word boundary,
 * through every pair of push (push, push_cpu) and pop (pop, pop_cpu).
 *
 *   - Writes: the popped item sits between guard bytes; any guard byte
 *     changed is a write outside the item.
 *   - Reads: the pushed item ends at the end of a page whose next page is
 *     inaccessible; a read past the item faults (caught, reported as a
 *     failure).  Its own guard bytes differ from the popped item's, so a
 *     word copied whole also shows in the popped item's guards.
 *
 * Twice: in this process (with rseq where the kernel has it: sections for
 * push and pop, the gate for the _cpu operations), and in a child
 * re-executed with RSEQKIT_DISABLE=1 (every operation on its slow path).
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "harness.h"

/* 1 to 24, then these. */
static const size_t more_sizes[] = { 31, 32, 33, 63, 64, 65, RSK_COPYBUF_MAX_ITEM - 1,
				     RSK_COPYBUF_MAX_ITEM };
#define N_MORE (sizeof(more_sizes) / sizeof(more_sizes[0]))
#define N_SIZES (24 + (int)N_MORE)
#define MAX_SIZE RSK_COPYBUF_MAX_ITEM
#define OFFSETS 8
#define GUARD 16	  /* guard bytes on each side of the popped item */
#define SRC_GUARD 0x5a	  /* bytes around the pushed item */
#define DST_GUARD 0xa5	  /* bytes around the popped item */
#define N_PATHS 4
#define N_POINTS (N_PATHS * N_SIZES)

enum { VIA_PLAIN, VIA_CPU };
static const char *const op_name[2][2] = { { "push", "push_cpu" }, { "pop", "pop_cpu" } };

static char *page_end; /* end of an accessible page; the next one is not */

static int do_push(struct rsk_copybuf *b, int how, int cpu, const void *item)
{
	int r = how == VIA_CPU ? rsk_copybuf_push_cpu(b, cpu, item) : rsk_copybuf_push(b, item);

	/* The plain operation returns 0; it must have used the pinned CPU's
	 * part (its index is read, as it no longer comes back). */
	return how == VIA_CPU ? r : (r != 0 ? r : rsk_cpu() == cpu ? 0 : -ERANGE);
}

static int do_pop(struct rsk_copybuf *b, int how, int cpu, void *item)
{
	int r = how == VIA_CPU ? rsk_copybuf_pop_cpu(b, cpu, item) : rsk_copybuf_pop(b, item);

	return how == VIA_CPU ? r : (r != 0 ? r : rsk_cpu() == cpu ? 0 : -ERANGE);
}

/* One size through one pair, at every offset.  Returns the number of
 * failing offsets; the first failure is described in why. */
static int one_pair(size_t size, int push_how, int pop_how, char *why, size_t len)
{
	struct rsk_copybuf *b = NULL;
	unsigned char want[MAX_SIZE];
	/* Aligned, so that offset 0 is a word boundary. */
	_Alignas(16) unsigned char dst[GUARD + OFFSETS + MAX_SIZE + GUARD];
	int fails = 0, cpu, r;

	why[0] = '\0';
	if (rsk_copybuf_create(&b, RSK_INDEX_CPU, size, 2, 0) != 0) {
		snprintf(why, len, "create failed");
		return 1;
	}
	/* The part of this CPU (pinned): where push and pop go. */
	memset(want, 1, sizeof(want));
	cpu = rsk_copybuf_push(b, want) == 0 ? rsk_cpu() : -1;
	if (cpu < 0 || rsk_copybuf_pop_cpu(b, cpu, want) != 0) {
		snprintf(why, len, "no part to use (%d)", cpu);
		rsk_copybuf_destroy(b);
		return 1;
	}
	for (int off = 0; off < OFFSETS; off++) {
		/* The pushed item ends off bytes before the page's end (its
		 * address takes every residue mod 8 over the offsets); at
		 * offset 0 a read past it faults, at the others it reads
		 * SRC_GUARD bytes. */
		unsigned char *src = (unsigned char *)page_end - size - (size_t)off;
		unsigned char *item = dst + GUARD + off;
		int bad = 0, bad_at = 0;
		const char *what = NULL;

		memset(page_end - 2 * MAX_SIZE, SRC_GUARD, 2 * MAX_SIZE);
		for (size_t i = 0; i < size; i++)
			src[i] = want[i] = (unsigned char)(0x11 + i * 13 + (size_t)off * 3);
		memset(dst, DST_GUARD, sizeof(dst));
		r = do_push(b, push_how, cpu, src);
		if (r == 0)
			r = do_pop(b, pop_how, cpu, item);
		if (r != 0) {
			what = "returned an error";
		} else if (memcmp(item, want, size) != 0) {
			what = "popped bytes differ";
		} else {
			for (size_t i = 0; i < sizeof(dst) && !bad; i++) {
				if (i >= GUARD + (size_t)off && i < GUARD + (size_t)off + size)
					continue;
				if (dst[i] != DST_GUARD)
					bad = 1, bad_at = (int)i - (GUARD + off);
			}
			if (bad)
				what = "a guard byte changed";
		}
		if (what != NULL) {
			if (fails++ == 0)
				snprintf(why, len, "offset %d: %s (%d)%s%+d", off, what, r,
					 bad ? ", first at item " : "", bad ? bad_at : 0);
		}
	}
	rsk_copybuf_destroy(b);
	return fails;
}

/* one_pair() in a child process: a read past the pushed item kills it
 * (SIGSEGV), and whatever it did to its gates dies with it. */
static void run_pair(size_t size, int push_how, int pop_how)
{
	char why[256] = "", how[64];
	int fds[2], status = 0;
	ssize_t got = 0, n;
	pid_t pid;

	if (pipe(fds) != 0 || (pid = fork()) < 0) {
		tap_ok(0, "%s then %s, %zu-byte item: cannot fork", op_name[0][push_how],
		       op_name[1][pop_how], size);
		return;
	}
	if (pid == 0) {
		int fails;

		close(fds[0]);
		alarm(20);
		fails = one_pair(size, push_how, pop_how, why, sizeof(why));
		if (write(fds[1], why, strlen(why)) < 0)
			_exit(2);
		_exit(fails ? 1 : 0);
	}
	close(fds[1]);
	while ((n = read(fds[0], why + got, sizeof(why) - 1 - (size_t)got)) > 0 ||
	       (n < 0 && errno == EINTR))
		got += n > 0 ? n : 0;
	why[got] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status)) {
		describe_status(status, how, sizeof(how));
		snprintf(why, sizeof(why), "%s: %s", how,
			 WTERMSIG(status) == SIGSEGV ? "a read or write outside the item" : "?");
	}
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "%s then %s, %zu-byte item at offsets 0-%d: exactly its bytes read and written%s%s",
	       op_name[0][push_how], op_name[1][pop_how], size, OFFSETS - 1, why[0] ? "; " : "",
	       why);
}

static void body(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (m == MAP_FAILED || mprotect(m + page, (size_t)page, PROT_NONE) != 0) {
		for (int i = 0; i < N_POINTS; i++)
			tap_ok(0, "cannot map the test pages: %s", strerror(errno));
		return;
	}
	page_end = m + page;
	for (int push_how = 0; push_how < 2; push_how++)
		for (int pop_how = 0; pop_how < 2; pop_how++)
			for (int k = 0; k < N_SIZES; k++)
				run_pair(k < 24 ? (size_t)k + 1 : more_sizes[k - 24], push_how,
					 pop_how);
	munmap(m, (size_t)page * 2);
}

static void disable_rseq(const void *arg)
{
	(void)arg;
	setenv("RSEQKIT_DISABLE", "1", 1);
}

int main(int argc, char **argv)
{
	cpu_set_t one;
	struct rsk_status st;

	/* One CPU: push and pop find the same part. */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	sched_setaffinity(0, sizeof(one), &one);
	rsk_status(&st);
	if (argc > 1 && strcmp(argv[1], "--child") == 0) {
		tap_plan(1 + N_POINTS);
		tap_ok(!st.available, "without rseq (%s): every operation on its slow path",
		       st.reason ? st.reason : "?");
		body();
		return tap_done();
	}
	tap_plan(N_POINTS + 1 + N_POINTS + 1);
	tap_diag("rseq %s", st.available ? "available: sections and gates" : "unavailable: slow paths");
	body();

	/* This program's path (under valgrind /proc/self/exe is valgrind). */
	char self[PATH_MAX] = "/proc/self/exe";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *cargv[] = { self, (char *)"--child", NULL };
	struct child_spec cs = { cargv, NULL, disable_rseq, NULL };
	int first = tap_n;

	if (n > 0)
		self[n] = '\0';
	relay_child("RSEQKIT_DISABLE=1", &cs);
	while (tap_n < first + 1 + N_POINTS + 1)
		tap_ok(0, "[RSEQKIT_DISABLE=1] a point the child did not reach");
	return tap_done();
}
