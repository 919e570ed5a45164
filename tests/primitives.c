/* SPDX-License-Identifier: MIT */
/*
 * Each restartable primitive: exact single-thread semantics (success,
 * compare-failed, wrong index), then multi-thread sums under delay
 * injection inside the asm, where aborts must happen and nothing may be
 * lost.  Built with -DRSEQKIT_NEGATIVE_CONTROL (descriptor never armed)
 * the same program must instead detect lost updates.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
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
	tap_ok(RETRY(m, i, rsk_cmpcopystore(m, i, &v, 6, dst, src, 0, 7)) == RSK_OK && v == 7,
	       "%s cmpcopystore of 0 words commits", mn);
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
	tap_plan(modes * (25 + 3 * OP_KINDS));
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
