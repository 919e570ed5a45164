/* SPDX-License-Identifier: MIT */
/*
 * Each restartable primitive: exact single-thread semantics (success,
 * compare-failed, wrong index), then multi-thread sums under delay
 * injection inside the asm, where aborts must happen and nothing may be
 * lost.  Built with -DRSEQKIT_NEGATIVE_CONTROL (descriptor never armed)
 * the same program must instead detect lost updates.
 *
 * Bad arguments (issue 14): an unknown index mode, a NULL first pointer
 * and a copy longer than RSK_CMPCOPYSTORE_MAX_WORDS are -EINVAL from every
 * primitive, before the section, storing nothing; rsk_index() and
 * rsk_index_slow() return -1 for the unknown mode.  The cases that crashed
 * before (a NULL v, a huge copy that wrote below dst) run in children, as
 * do the copies of 0 words and of too many, in each index mode, between
 * guard words right below and above dst.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

#define SLOT_WORDS 16 /* 128 bytes: each CPU's slot on its own lines */
struct slot {
	intptr_t v;
	intptr_t gate; /* always open here */
	intptr_t v2;
	intptr_t copy[4];
} __attribute__((aligned(128)));

static struct slot *slots;
static int nslots;

/* Run op until it commits or fails its compare; retries after aborts. */
#define RETRY(mode, idxvar, call)                                              \
	({                                                                     \
		int r_;                                                        \
		do {                                                           \
			idxvar = rsk_index(mode);                              \
			if (idxvar < 0)                                        \
				break;                                         \
			r_ = (call);                                           \
		} while (r_ == RSK_ABORTED);                                   \
		idxvar < 0 ? RSK_ABORTED : r_;                                 \
	})

static int copy_nothing(enum rsk_index_mode m, size_t n, int want, char *why, size_t size);

static __attribute__((unused)) void single_thread(enum rsk_index_mode m, const char *mn)
{
	int i;
	intptr_t v = 5, v2 = 9, out = 0;
	intptr_t src[3] = { 11, 22, 33 }, dst[3] = { 0, 0, 0 };

	tap_ok(RETRY(m, i, rsk_cmpstore(m, i, &v, 5, 7)) == RSK_OK && v == 7,
	       "%s cmpstore commits when equal", mn);
	tap_ok(RETRY(m, i, rsk_cmpstore(m, i, &v, 5, 8)) == RSK_CMPFAIL && v == 7,
	       "%s cmpstore fails and stores nothing when different", mn);
	tap_ok(RETRY(m, i, rsk_cmpstore_release(m, i, &v, 7, 1)) == RSK_OK && v == 1,
	       "%s cmpstore_release commits", mn);
	tap_ok(RETRY(m, i, rsk_cmpcmpstore(m, i, &v, 1, &v2, 9, 2)) == RSK_OK && v == 2 && v2 == 9,
	       "%s cmpcmpstore commits when both equal", mn);
	tap_ok(RETRY(m, i, rsk_cmpcmpstore(m, i, &v, 2, &v2, 8, 3)) == RSK_CMPFAIL && v == 2,
	       "%s cmpcmpstore fails on the second compare", mn);
	tap_ok(RETRY(m, i, rsk_cmpcmpstore(m, i, &v, 1, &v2, 9, 3)) == RSK_CMPFAIL && v == 2,
	       "%s cmpcmpstore fails on the first compare", mn);
	tap_ok(RETRY(m, i, rsk_cmpstorestore(m, i, &v, 2, &v2, 40, 4)) == RSK_OK && v == 4 && v2 == 40,
	       "%s cmpstorestore stores both", mn);
	tap_ok(RETRY(m, i, rsk_cmpstorestore_release(m, i, &v, 3, &v2, 41, 5)) == RSK_CMPFAIL &&
		       v == 4 && v2 == 40,
	       "%s cmpstorestore_release fails and stores neither", mn);
	tap_ok(RETRY(m, i, rsk_cmpcopystore(m, i, &v, 4, dst, src, 3, 6)) == RSK_OK && v == 6 &&
		       memcmp(dst, src, sizeof(src)) == 0,
	       "%s cmpcopystore copies 3 words and commits", mn);
	memset(dst, 0, sizeof(dst));
	tap_ok(RETRY(m, i, rsk_cmpcopystore_release(m, i, &v, 4, dst, src, 3, 7)) == RSK_CMPFAIL &&
		       v == 6 && dst[0] == 0,
	       "%s cmpcopystore_release fails without copying", mn);
	{
		char why[64] = "", why2[64] = "";
		int bad;

		/* In a child, v 6 -> 7 there: the same here. */
		bad = copy_nothing(m, 0, RSK_OK, why, sizeof(why));
		tap_ok(!bad, "%s cmpcopystore of 0 words commits; dst and the guard words below and "
			     "above it unchanged%s%s",
		       mn, bad ? ": " : "", why);
		v = 7;
		bad = copy_nothing(m, (size_t)-1, -EINVAL, why, sizeof(why));
		bad += copy_nothing(m, RSK_CMPCOPYSTORE_MAX_WORDS + 1, -EINVAL, why2, sizeof(why2));
		tap_ok(!bad, "%s cmpcopystore of (size_t)-1 and of RSK_CMPCOPYSTORE_MAX_WORDS + 1 words: "
			     "-EINVAL; v, dst and the guard words below and above it unchanged%s%s%s%s",
		       mn, why[0] ? "; (size_t)-1: " : "", why, why2[0] ? "; MAX + 1: " : "", why2);
	}
	tap_ok(RETRY(m, i, rsk_add(m, i, &v, -10)) == RSK_OK && v == -3, "%s add of a negative count", mn);

	struct node { intptr_t payload; struct node *next; } n2 = { 2, NULL }, n1 = { 1, &n2 };
	intptr_t head = (intptr_t)&n1;
	intptr_t off = (intptr_t)offsetof(struct node, next);
	tap_ok(RETRY(m, i, rsk_pop(m, i, &head, 0, off, &out)) == RSK_OK && out == (intptr_t)&n1 &&
		       head == (intptr_t)&n2,
	       "%s pop unlinks the head", mn);
	tap_ok(RETRY(m, i, rsk_pop(m, i, &head, 0, off, &out)) == RSK_OK && out == (intptr_t)&n2 &&
		       head == 0,
	       "%s pop unlinks the last node", mn);
	out = 99;
	tap_ok(RETRY(m, i, rsk_pop(m, i, &head, 0, off, &out)) == RSK_CMPFAIL && head == 0,
	       "%s pop of an empty list fails", mn);

	intptr_t arr[4] = { 0, 0, 0, 0 };
	intptr_t *ptr = arr;
	tap_ok(RETRY(m, i, rsk_derefadd(m, i, &ptr, 2 * sizeof(intptr_t), 5)) == RSK_OK &&
		       arr[2] == 5 && arr[1] == 0 && arr[3] == 0,
	       "%s derefadd adds to the slot behind the pointer", mn);

	/* An index that is not current must abort without storing. */
	v = 1;
	int wrong = (rsk_index(m) + 1) % 100000 + 1000;
	tap_ok(rsk_cmpstore(m, wrong, &v, 1, 2) == RSK_ABORTED && v == 1,
	       "%s stale index aborts without storing", mn);
	tap_ok(rsk_add(m, wrong, &v, 1) == RSK_ABORTED && v == 1, "%s add with stale index aborts", mn);

	/* Gated twins: open gate behaves as ungated, closed gate stores nothing. */
	intptr_t gate = 0;
	v = 1;
	tap_ok(RETRY(m, i, rsk_gated_cmpstore(m, i, &gate, &v, 1, 2)) == RSK_OK && v == 2,
	       "%s gated cmpstore commits through an open gate", mn);
	tap_ok(RETRY(m, i, rsk_gated_add(m, i, &gate, &v, 3)) == RSK_OK && v == 5,
	       "%s gated add commits through an open gate", mn);
	gate = 1;
	tap_ok(RETRY(m, i, rsk_gated_cmpstore(m, i, &gate, &v, 5, 9)) == RSK_STOPPED && v == 5,
	       "%s gated cmpstore stops at a closed gate", mn);
	tap_ok(RETRY(m, i, rsk_gated_add(m, i, &gate, &v, 3)) == RSK_STOPPED && v == 5,
	       "%s gated add stops at a closed gate", mn);
	memset(dst, 0, sizeof(dst));
	tap_ok(RETRY(m, i, rsk_gated_cmpcopystore(m, i, &gate, &v, 5, dst, src, 3, 6)) == RSK_STOPPED &&
		       v == 5 && dst[0] == 0,
	       "%s gated cmpcopystore stops before copying", mn);
	n1.next = &n2;
	head = (intptr_t)&n1;
	tap_ok(RETRY(m, i, rsk_gated_pop(m, i, &gate, &head, 0, off, &out)) == RSK_STOPPED &&
		       head == (intptr_t)&n1,
	       "%s gated pop stops at a closed gate", mn);
	tap_ok(RETRY(m, i, rsk_gated_derefadd(m, i, &gate, &ptr, 0, 1)) == RSK_STOPPED && arr[0] == 0,
	       "%s gated derefadd stops at a closed gate", mn);
}

/* ---- bad arguments ---- */

/* Every primitive, by number: the ten plain ones, then their gated twins
 * (open gate).  v is the first pointer (for derefadd the pointer it goes
 * through); n the copy's length; pop and the compares are set up to fail
 * their compare should a section ever run. */
#define A_OPS 10
static const char *const a_name[A_OPS] = { "cmpstore", "cmpstore_release", "cmpcmpstore",
					   "cmpstorestore", "cmpstorestore_release", "cmpcopystore",
					   "cmpcopystore_release", "add", "pop", "derefadd" };
static intptr_t a_gate, a_v2, a_out, a_src[4], a_dst[4];

static int call_op(int op, enum rsk_index_mode m, int idx, intptr_t *v, intptr_t *dst, size_t n)
{
	const intptr_t *g = &a_gate;
	intptr_t *const *pp = (intptr_t *const *)(void *)v;

	switch (op) {
	case 0: return rsk_cmpstore(m, idx, v, 7, 8);
	case 1: return rsk_cmpstore_release(m, idx, v, 7, 8);
	case 2: return rsk_cmpcmpstore(m, idx, v, 7, &a_v2, 0, 8);
	case 3: return rsk_cmpstorestore(m, idx, v, 7, &a_v2, 9, 8);
	case 4: return rsk_cmpstorestore_release(m, idx, v, 7, &a_v2, 9, 8);
	case 5: return rsk_cmpcopystore(m, idx, v, 7, dst, a_src, n, 8);
	case 6: return rsk_cmpcopystore_release(m, idx, v, 7, dst, a_src, n, 8);
	case 7: return rsk_add(m, idx, v, 1);
	case 8: return rsk_pop(m, idx, v, v != NULL ? *v : 0, 0, &a_out);
	case 9: return rsk_derefadd(m, idx, pp, 0, 1);
	case 10: return rsk_gated_cmpstore(m, idx, g, v, 7, 8);
	case 11: return rsk_gated_cmpstore_release(m, idx, g, v, 7, 8);
	case 12: return rsk_gated_cmpcmpstore(m, idx, g, v, 7, &a_v2, 0, 8);
	case 13: return rsk_gated_cmpstorestore(m, idx, g, v, 7, &a_v2, 9, 8);
	case 14: return rsk_gated_cmpstorestore_release(m, idx, g, v, 7, &a_v2, 9, 8);
	case 15: return rsk_gated_cmpcopystore(m, idx, g, v, 7, dst, a_src, n, 8);
	case 16: return rsk_gated_cmpcopystore_release(m, idx, g, v, 7, dst, a_src, n, 8);
	case 17: return rsk_gated_add(m, idx, g, v, 1);
	case 18: return rsk_gated_pop(m, idx, g, v, v != NULL ? *v : 0, 0, &a_out);
	default: return rsk_gated_derefadd(m, idx, g, pp, 0, 1);
	}
}

static const char *op_label(int op, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s", op >= A_OPS ? "gated_" : "", a_name[op % A_OPS]);
	return buf;
}

/* Run op until it is not RSK_ABORTED (a bounded number of times). */
static int call_settled(int op, enum rsk_index_mode m, intptr_t *v, intptr_t *dst, size_t n)
{
	int r = RSK_ABORTED;

	for (int k = 0; k < 1000 && r == RSK_ABORTED; k++)
		r = call_op(op, m, rsk_index(m), v, dst, n);
	return r;
}

/* What a child said: 0 ok, 1 wrong answer, else how it died. */
static int child_status(pid_t pid, char *why, size_t size)
{
	int status = 0;

	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		snprintf(why, size, "child killed by signal %d", WTERMSIG(status));
	else
		snprintf(why, size, "child exit status %d", WEXITSTATUS(status));
	return 1;
}

#define GUARD_WORDS 512
#define GUARD_FILL  ((intptr_t)0x5a5a5a5a)

/* rsk_cmpcopystore(m) of n words from {11, 22, 33} into a 3-word dst
 * {1, 2, 3} with a guard word right below it and one right above, in a
 * child (a copy that runs away from dst faults there, and is reported
 * instead of ending this test).  n is 0 or beyond the bound: nothing may
 * be copied.  It must return want, with *v 6 -> 7 when that is RSK_OK and
 * untouched otherwise, and leave dst and both guard words as they were.
 * Returns 0, or 1 with why said. */
static int copy_nothing(enum rsk_index_mode m, size_t n, int want, char *why, size_t size)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		static struct {
			intptr_t below, dst[3], above;
		} g;
		const intptr_t src[3] = { 11, 22, 33 };
		intptr_t v = 6;
		int i, r, ok;

		_Static_assert(sizeof(g) == 5 * sizeof(intptr_t), "the guard words touch dst");
		alarm(10);
		g.below = g.above = GUARD_FILL;
		g.dst[0] = 1;
		g.dst[1] = 2;
		g.dst[2] = 3;
		r = RETRY(m, i, rsk_cmpcopystore(m, i, &v, 6, g.dst, src, n, 7));
		ok = r == want && v == (want == RSK_OK ? 7 : 6) && g.below == GUARD_FILL &&
		     g.above == GUARD_FILL && g.dst[0] == 1 && g.dst[1] == 2 && g.dst[2] == 3;
		if (!ok)
			printf("# cmpcopystore of %zu words: returned %d (want %d), v %ld; guard below "
			       "%#lx, dst {%ld, %ld, %ld}, guard above %#lx\n",
			       n, r, want, (long)v, (unsigned long)g.below, (long)g.dst[0],
			       (long)g.dst[1], (long)g.dst[2], (unsigned long)g.above);
		fflush(stdout);
		_exit(ok ? 0 : 1);
	}
	if (pid < 0) {
		snprintf(why, size, "fork: %s", strerror(errno));
		return 1;
	}
	return child_status(pid, why, size);
}

/* A copy of n words into a 4-word dst between two guard regions: must be
 * -EINVAL with *v, dst and both guards untouched.  In a child: before the
 * bound, the x86-64, aarch64 and arm loops index dst with a negative (or
 * overflowing) count and write below it until they fault. */
static void huge_copy(int op, size_t n, const char *what)
{
	char name[48], why[64] = "";
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		static struct {
			intptr_t lo[GUARD_WORDS];
			intptr_t dst[4];
			intptr_t hi[GUARD_WORDS];
		} g;
		intptr_t v = 7;
		int r, bad = 0;

		alarm(10);
		for (int i = 0; i < GUARD_WORDS; i++)
			g.lo[i] = g.hi[i] = GUARD_FILL;
		memset(g.dst, 0, sizeof(g.dst));
		r = call_settled(op, RSK_INDEX_CPU, &v, g.dst, n);
		for (int i = 0; i < GUARD_WORDS; i++)
			bad += g.lo[i] != GUARD_FILL || g.hi[i] != GUARD_FILL;
		for (int i = 0; i < 4; i++)
			bad += g.dst[i] != 0;
		if (r != -EINVAL || v != 7 || bad != 0)
			printf("# %s: returned %d, v %ld, %d words of dst and its guards changed\n",
			       op_label(op, name, sizeof(name)), r, (long)v, bad);
		fflush(stdout);
		_exit(r == -EINVAL && v == 7 && bad == 0 ? 0 : 1);
	}
	int failed = child_status(pid, why, sizeof(why));
	tap_ok(!failed, "%s of %s words: -EINVAL, nothing written below dst, above it or to v%s%s",
	       op_label(op, name, sizeof(name)), what, failed ? ": " : "", why);
}

static __attribute__((unused)) void bad_arguments(void)
{
	char name[48], why[64];
	int fails = 0;

	/* 1. Copies longer than RSK_CMPCOPYSTORE_MAX_WORDS. */
	huge_copy(5, (size_t)-1, "(size_t)-1");
	huge_copy(6, RSK_CMPCOPYSTORE_MAX_WORDS + 1, "RSK_CMPCOPYSTORE_MAX_WORDS + 1");
	huge_copy(A_OPS + 5, ((size_t)1 << (sizeof(size_t) * 8 - 3)) + 2, "2^(bits-3) + 2");
	huge_copy(A_OPS + 6, (size_t)PTRDIFF_MAX, "PTRDIFF_MAX");
	{
		size_t n = RSK_CMPCOPYSTORE_MAX_WORDS;
		intptr_t *src = calloc(n, sizeof(intptr_t)), *dst = calloc(n, sizeof(intptr_t));
		intptr_t v = 1;
		int i, r = RSK_ABORTED;

		if (src != NULL && dst != NULL) {
			src[0] = 3;
			src[n - 1] = 4;
			r = RETRY(RSK_INDEX_CPU, i, rsk_cmpcopystore(RSK_INDEX_CPU, i, &v, 1, dst, src, n, 2));
		}
		tap_ok(r == RSK_OK && v == 2 && dst[0] == 3 && dst[n - 1] == 4,
		       "cmpcopystore of RSK_CMPCOPYSTORE_MAX_WORDS words is accepted and commits (%d)", r);
		free(src);
		free(dst);
	}

	/* 2. A NULL v (ptr for derefadd), in a child each: it faulted. */
	for (int op = 0; op < 2 * A_OPS; op++) {
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			intptr_t *volatile none = NULL;
			alarm(10);
			_exit(call_settled(op, RSK_INDEX_CPU, none, a_dst, 2) == -EINVAL ? 0 : 1);
		}
		why[0] = '\0';
		if (child_status(pid, why, sizeof(why)) != 0) {
			fails++;
			tap_diag("NULL v: %s: %s", op_label(op, name, sizeof(name)), why);
		}
	}
	tap_ok(fails == 0, "a NULL v is -EINVAL from every primitive (%d of %d wrong)", fails,
	       2 * A_OPS);

	/* 3. An unknown index mode: -1 from the index, -EINVAL from each
	 * primitive (before: RSK_ABORTED, which a retry loop retries). */
	enum rsk_index_mode bad = (enum rsk_index_mode)7;
	int ri = rsk_index(bad), rs = rsk_index_slow(bad);
	tap_ok(ri == -1 && rs == -1, "mode 7: rsk_index() %d, rsk_index_slow() %d (want -1)", ri, rs);
	fails = 0;
	for (int op = 0; op < 2 * A_OPS; op++) {
		intptr_t target = 5, v = op % A_OPS == 9 ? (intptr_t)&target : 7;
		intptr_t v0 = v;
		int r = call_op(op, bad, 0, &v, a_dst, 2);

		if (r != -EINVAL || v != v0 || target != 5) {
			fails++;
			tap_diag("mode 7: %s returned %d (v %s, target %ld)",
				 op_label(op, name, sizeof(name)), r, v == v0 ? "unchanged" : "changed",
				 (long)target);
		}
	}
	tap_ok(fails == 0, "mode 7: every primitive is -EINVAL and stores nothing (%d of %d wrong)",
	       fails, 2 * A_OPS);
}

/* ---- multi-thread ---- */

enum op_kind { OP_ADD, OP_CMPSTORE, OP_CMPSTORESTORE, OP_CMPCOPY, OP_GATED_ADD, OP_GATED_CMPCOPY, OP_KINDS };
static const char *op_name[] = { "add", "cmpstore", "cmpstorestore", "cmpcopystore",
				  "gated add", "gated cmpcopystore" };

struct run {
	enum rsk_index_mode mode;
	enum op_kind op;
	long reps;
	long aborts, fallbacks;
};

static void *worker(void *arg)
{
	struct run *r = arg;
	long aborts = 0, fallbacks = 0;

	for (long n = 0; n < r->reps; n++) {
		for (;;) {
			int i = rsk_index(r->mode);
			if (i < 0 || i >= nslots) {
				/* Not expected here: counted so the test fails loudly. */
				fallbacks++;
				__atomic_add_fetch(&slots[0].v, 1, __ATOMIC_RELAXED);
				break;
			}
			struct slot *s = &slots[i];
			intptr_t old = __atomic_load_n(&s->v, __ATOMIC_RELAXED);
			intptr_t word[4] = { old + 1, old + 2, old + 3, old + 4 };
			int ret;
			switch (r->op) {
			case OP_ADD:
				ret = rsk_add(r->mode, i, &s->v, 1);
				break;
			case OP_CMPSTORE:
				ret = rsk_cmpstore(r->mode, i, &s->v, old, old + 1);
				break;
			case OP_CMPSTORESTORE:
				ret = rsk_cmpstorestore(r->mode, i, &s->v, old, &s->v2, old + 1, old + 1);
				break;
			case OP_CMPCOPY:
				ret = rsk_cmpcopystore(r->mode, i, &s->v, old, s->copy, word, 4, old + 1);
				break;
			case OP_GATED_ADD:
				ret = rsk_gated_add(r->mode, i, &s->gate, &s->v, 1);
				break;
			default:
				ret = rsk_gated_cmpcopystore(r->mode, i, &s->gate, &s->v, old, s->copy,
							     word, 4, old + 1);
				break;
			}
			if (ret == RSK_OK)
				break;
			if (ret == RSK_ABORTED)
				aborts++;
		}
	}
	__atomic_add_fetch(&r->aborts, aborts, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->fallbacks, fallbacks, __ATOMIC_RELAXED);
	return NULL;
}

static long run_threads(struct run *r, int nthreads)
{
	pthread_t th[64];
	long sum = 0;

	memset(slots, 0, sizeof(*slots) * nslots);
	for (int t = 0; t < nthreads; t++)
		pthread_create(&th[t], NULL, worker, r);
	for (int t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	for (int c = 0; c < nslots; c++)
		sum += slots[c].v;
	return sum;
}

int main(void)
{
	int nthreads, modes = rsk_mm_cid_available() ? 2 : 1;
	struct rsk_status st;

	rsk_status(&st);
	if (!st.available) {
		/* Without rseq the primitives cannot run: the progress layer
		 * and its own tests cover that case.  Say so, do not pass. */
		tap_plan_skip_all(st.reason);
	}
	nslots = rsk_possible_cpus();
	slots = aligned_alloc(128, sizeof(*slots) * (size_t)nslots);
	nthreads = 4 * nslots > 32 ? 32 : 4 * nslots;
	if (nthreads < 4)
		nthreads = 4;

#ifdef RSEQKIT_NEGATIVE_CONTROL
	tap_plan(modes);
#else
	tap_plan(modes * (26 + 3 * OP_KINDS) + 8);
	bad_arguments();
	for (int m = 0; m < modes; m++)
		single_thread((enum rsk_index_mode)m, m ? "cid" : "cpu");
#endif

	for (int m = 0; m < modes; m++) {
		const char *mn = m ? "cid" : "cpu";
#ifdef RSEQKIT_NEGATIVE_CONTROL
		/* Widen the window between compare and commit; an unarmed
		 * section loses updates to threads preempting it. */
		long lost = 0;
		memset(rsk_inject_loops, 0, sizeof(rsk_inject_loops));
		rsk_inject_loops[3] = 20000;
		for (int op = OP_CMPSTORE; op < OP_KINDS && lost == 0; op++) {
			struct run r = { (enum rsk_index_mode)m, (enum op_kind)op, 20000, 0, 0 };
			long sum = run_threads(&r, nthreads);
			lost += (long)nthreads * r.reps - sum;
			tap_diag("%s %s unarmed: expected %ld, got %ld", mn, op_name[op],
				 (long)nthreads * r.reps, sum);
		}
		tap_ok(lost > 0, "%s negative control: unarmed sections lose updates (%ld lost)", mn, lost);
#else
		for (int op = 0; op < OP_KINDS; op++) {
			struct run r = { (enum rsk_index_mode)m, (enum op_kind)op, 20000, 0, 0 };
			long total = 0, aborts = 0, expect = 0;
			/* Delay at each asm point in turn, so every window is wide. */
			for (int point = 1; point <= 4; point++) {
				memset(rsk_inject_loops, 0, sizeof(rsk_inject_loops));
				rsk_inject_loops[point] = 2000;
				r.aborts = 0;
				total += run_threads(&r, nthreads);
				expect += (long)nthreads * r.reps;
				aborts += r.aborts;
			}
			tap_ok(total == expect, "%s %s: %ld threads x4 points, sum %ld == %ld", mn,
			       op_name[op], (long)nthreads, total, expect);
			tap_ok(aborts > 0, "%s %s: the kernel restarted sections (%ld aborts)", mn,
			       op_name[op], aborts);
			tap_ok(r.fallbacks == 0, "%s %s: every thread ran sections", mn, op_name[op]);
		}
#endif
	}
	free(slots);
	return tap_done();
}
