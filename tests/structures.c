/* SPDX-License-Identifier: MIT */
/*
 * The per-CPU data structures, one thread: exact semantics of each
 * operation (pinned to one CPU, so the current part does not change), the
 * layout promises (size, alignment), and bad input answered with -EINVAL.
 * The concurrent side is rseqkit-stress's (tests/stress_quick.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <rseqkit/rseqkit.h>
#include "harness.h"

/* Whether RSK_INDEX_CID structures get mm_cid here (see percpu.h). */
static int cid_structures(void)
{
	struct rsk_status st;

	return rsk_status(&st) == 0 && st.cid_structures;
}

static int nr;

static int aligned128(const void *p)
{
	return ((uintptr_t)p % RSK_PERCPU_ALIGN) == 0;
}

static void skip(const char *why)
{
	printf("ok %d # SKIP %s\n", ++tap_n, why);
}

/* Destroy twice: the second destroy must find the structure's dead mark
 * (-EINVAL).  It reads the block the first one freed, on purpose: not
 * under AddressSanitizer, ThreadSanitizer or valgrind, which rightly call
 * that a use after free; and only for a block that stays mapped after
 * free() - nothing allocates in between, and the library maps (and unmaps
 * at destroy) blocks of 64 KiB and more itself, so bytes, an upper bound
 * of the structure's size, must be well below that.  glibc's free() keeps
 * such a small block mapped; musl's unmaps it (a 4 KiB counter: the
 * second destroy faults), so elsewhere the check is skipped. */

static const char *no_second_destroy(size_t bytes)
{
#ifdef FREED_READS_REPORTED
	(void)bytes;
	return "reads freed memory on purpose (a sanitizer reports that)";
#elif !defined(__GLIBC__)
	(void)bytes;
	return "this libc's free() may unmap the block (musl's does)";
#else
	const char *preload = getenv("LD_PRELOAD"); /* valgrind's vgpreload_*.so */

	if (preload != NULL && strstr(preload, "vgpreload") != NULL)
		return "reads freed memory on purpose (valgrind)";
	if (bytes >= ((size_t)32 << 10))
		return "a block this large may be unmapped by its destroy";
	return NULL;
#endif
}

/* The second destroy's point, right after a first destroy that returned 0
 * (call: that second destroy; bytes: as no_second_destroy). */
#define DESTROY_AGAIN(call, bytes, ...)                                        \
	do {                                                                   \
		const char *why_ = no_second_destroy(bytes);                   \
		char what_[128];                                               \
		snprintf(what_, sizeof(what_), __VA_ARGS__);                   \
		if (why_ != NULL) {                                            \
			printf("ok %d - %s # SKIP %s\n", ++tap_n, what_, why_); \
		} else {                                                       \
			int r_ = (call);                                       \
			tap_ok(r_ == -EINVAL, "%s (%d)", what_, r_);          \
		}                                                              \
	} while (0)

#define N_COUNTER 18

/* The part an operation used: the structures' operations return 0, so the
 * tests find the part by what it holds. */
static int counter_part(const struct rsk_counter *c)
{
	for (int i = 0; i < c->nr; i++) {
		intptr_t v = 0;

		if (rsk_counter_read(c, i, &v) == 0 && v != 0)
			return i;
	}
	return -1;
}
static int stack_part(const struct rsk_stack *s, const struct rsk_stack_node *node)
{
	for (int i = 0; i < s->nr; i++)
		if (__atomic_load_n(&s->part[i].head, __ATOMIC_RELAXED) == (intptr_t)node)
			return i;
	return -1;
}
static int ptrbuf_part(const struct rsk_ptrbuf *b, const void *ptr)
{
	for (int i = 0; i < b->nr; i++) {
		const struct rsk_ptrbuf_part *q = rsk_ptrbuf_part_(b, (size_t)i);

		if (q->count > 0 && q->slot[q->count - 1] == (intptr_t)ptr)
			return i;
	}
	return -1;
}
static int copybuf_part(const struct rsk_copybuf *b, intptr_t first_word)
{
	for (int i = 0; i < b->nr; i++) {
		const struct rsk_copybuf_part *q = rsk_copybuf_part_(b, (size_t)i);

		if (q->count > 0 && q->item[(size_t)(q->count - 1) * b->words] == first_word)
			return i;
	}
	return -1;
}
/* ret (0 or -errno) as the part used, found by `part`, or ret itself. */
#define PART_OF(ret, part) ((ret) == 0 ? (part) : (ret) < 0 ? (ret) : -1000)

static void counter(enum rsk_index_mode m, const char *mn)
{
	struct rsk_counter *c = NULL;
	intptr_t v = -1, sum = -1;
	size_t bytes;
	int idx;

	tap_ok(rsk_counter_create(NULL, m) == -EINVAL, "%s counter: create(NULL) -EINVAL", mn);
	tap_ok(rsk_counter_create(&c, (enum rsk_index_mode)7) == -EINVAL,
	       "%s counter: unknown mode -EINVAL", mn);
	tap_ok(rsk_counter_create(&c, m) == 0 && c != NULL, "%s counter: created", mn);
	tap_ok(c->nr == nr && aligned128(&c->part[0]) && aligned128(&c->part[1 % nr]) &&
		       (m == RSK_INDEX_CPU ? c->mode == RSK_INDEX_CPU
					   : c->mode == (cid_structures() ? RSK_INDEX_CID : RSK_INDEX_CPU)),
	       "%s counter: one 128-aligned part per possible CPU, mode %d", mn, c->mode);
	idx = PART_OF(rsk_counter_add(c, 5), counter_part(c));
	tap_ok(idx >= 0 && idx < nr, "%s counter: add returns 0, on part %d", mn, idx);
	tap_ok(rsk_counter_add(c, -2) == 0, "%s counter: negative add returns 0", mn);
	tap_ok(rsk_counter_read(c, idx, &v) == 0 && v == 3, "%s counter: read part = 3", mn);
	tap_ok(rsk_counter_sum(c, &sum) == 0 && sum == 3, "%s counter: sum = 3", mn);
	tap_ok(rsk_counter_read(c, -1, &v) == -EINVAL && rsk_counter_read(c, nr, &v) == -EINVAL,
	       "%s counter: read of a CPU outside -EINVAL", mn);
	tap_ok(rsk_counter_read(c, idx, NULL) == -EINVAL && rsk_counter_read(NULL, 0, &v) == -EINVAL,
	       "%s counter: read with NULL -EINVAL", mn);
	tap_ok(rsk_counter_sum(NULL, &sum) == -EINVAL && rsk_counter_sum(c, NULL) == -EINVAL,
	       "%s counter: sum with NULL -EINVAL", mn);
	tap_ok(rsk_counter_add(NULL, 1) == -EINVAL, "%s counter: add(NULL) -EINVAL", mn);
	tap_ok(rsk_counter_reset(c) == 0 && rsk_counter_sum(c, &sum) == 0 && sum == 0,
	       "%s counter: reset", mn);
	tap_ok(rsk_counter_reset(NULL) == -EINVAL, "%s counter: reset(NULL) -EINVAL", mn);
	rsk_counter_add(c, INTPTR_MAX);
	rsk_counter_add(c, 1);
	tap_ok(rsk_counter_sum(c, &sum) == 0 && sum == INTPTR_MIN, "%s counter: sum wraps", mn);
	bytes = (size_t)(c->nr + 2) * sizeof(c->part[0]);
	tap_ok(rsk_counter_destroy(c) == 0, "%s counter: destroyed", mn);
	DESTROY_AGAIN(rsk_counter_destroy(c), bytes, "%s counter: destroyed again: -EINVAL", mn);
	tap_ok(rsk_counter_destroy(NULL) == -EINVAL, "%s counter: destroy(NULL) -EINVAL", mn);
}

#define N_SPINLOCK 10
static void spinlock(enum rsk_index_mode m, const char *mn)
{
	struct rsk_spinlock *l = NULL;
	size_t bytes;
	int idx;

	tap_ok(rsk_spinlock_create(NULL, m) == -EINVAL, "%s spinlock: create(NULL) -EINVAL", mn);
	tap_ok(rsk_spinlock_create(&l, m) == 0 && l->nr == nr && aligned128(&l->part[0]),
	       "%s spinlock: created", mn);
	idx = rsk_spinlock_lock(l);
	tap_ok(idx >= 0 && idx < nr && l->part[idx].locked == 1, "%s spinlock: lock takes part %d",
	       mn, idx);
	tap_ok(rsk_spinlock_unlock(l, idx) == 0 && l->part[idx].locked == 0,
	       "%s spinlock: unlock frees it", mn);
	tap_ok(rsk_spinlock_unlock(l, idx) == 0 && l->part[idx].locked == 0,
	       "%s spinlock: unlock of a free lock leaves it free", mn);
	tap_ok(rsk_spinlock_unlock(l, -1) == -EINVAL && rsk_spinlock_unlock(l, nr) == -EINVAL,
	       "%s spinlock: unlock of a CPU outside -EINVAL", mn);
	tap_ok(rsk_spinlock_lock(NULL) == -EINVAL && rsk_spinlock_unlock(NULL, 0) == -EINVAL,
	       "%s spinlock: NULL -EINVAL", mn);
	tap_ok(rsk_spinlock_lock(l) == idx && rsk_spinlock_unlock(l, idx) == 0,
	       "%s spinlock: lock again", mn);
	bytes = (size_t)(l->nr + 2) * sizeof(l->part[0]);
	tap_ok(rsk_spinlock_destroy(l) == 0 && rsk_spinlock_destroy(NULL) == -EINVAL,
	       "%s spinlock: destroy, destroy(NULL) -EINVAL", mn);
	DESTROY_AGAIN(rsk_spinlock_destroy(l), bytes, "%s spinlock: destroyed again: -EINVAL", mn);
}

#define N_STACK 13
static void stack(enum rsk_index_mode m, const char *mn)
{
	struct rsk_stack *s = NULL;
	struct rsk_stack_node n[3], *out = &n[0];
	size_t bytes;
	int idx;

	tap_ok(rsk_stack_create(NULL, m) == -EINVAL, "%s stack: create(NULL) -EINVAL", mn);
	tap_ok(rsk_stack_create(&s, m) == 0 && s->nr == nr && aligned128(&s->part[0]),
	       "%s stack: created", mn);
	tap_ok(rsk_stack_pop(s, &out) == -ENOENT && out == NULL, "%s stack: pop of empty -ENOENT",
	       mn);
	idx = PART_OF(rsk_stack_push(s, &n[0]), stack_part(s, &n[0]));
	tap_ok(idx >= 0 && rsk_stack_push(s, &n[1]) == 0 && stack_part(s, &n[1]) == idx &&
		       rsk_stack_push(s, &n[2]) == 0 && stack_part(s, &n[2]) == idx,
	       "%s stack: three pushes return 0, on part %d", mn, idx);
	tap_ok(rsk_stack_pop(s, &out) == 0 && out == &n[2], "%s stack: pop is LIFO", mn);
	tap_ok(rsk_stack_pop_all(s, &out) == 0 && out == &n[1] && n[1].next == &n[0] &&
		       n[0].next == NULL,
	       "%s stack: pop_all takes the rest, linked", mn);
	tap_ok(rsk_stack_pop_all(s, &out) == -ENOENT && out == NULL,
	       "%s stack: pop_all of empty -ENOENT", mn);
	rsk_stack_push(s, &n[0]);
	tap_ok(rsk_stack_pop_all_cpu(s, idx, &out) == 0 && out == &n[0] && n[0].next == NULL &&
		       rsk_stack_pop_all_cpu(s, idx, &out) == -ENOENT,
	       "%s stack: pop_all_cpu drains a part", mn);
	tap_ok(rsk_stack_pop_all_cpu(s, -1, &out) == -EINVAL &&
		       rsk_stack_pop_all_cpu(s, nr, &out) == -EINVAL,
	       "%s stack: pop_all_cpu of a CPU outside -EINVAL", mn);
	tap_ok(rsk_stack_push(s, NULL) == -EINVAL && rsk_stack_push(NULL, &n[0]) == -EINVAL,
	       "%s stack: push with NULL -EINVAL", mn);
	tap_ok(rsk_stack_pop(s, NULL) == -EINVAL && rsk_stack_pop(NULL, &out) == -EINVAL &&
		       rsk_stack_pop_all(NULL, &out) == -EINVAL &&
		       rsk_stack_pop_all_cpu(NULL, 0, &out) == -EINVAL,
	       "%s stack: pops with NULL -EINVAL", mn);
	bytes = (size_t)(s->nr + 2) * sizeof(s->part[0]);
	tap_ok(rsk_stack_destroy(s) == 0 && rsk_stack_destroy(NULL) == -EINVAL,
	       "%s stack: destroy, destroy(NULL) -EINVAL", mn);
	DESTROY_AGAIN(rsk_stack_destroy(s), bytes, "%s stack: destroyed again: -EINVAL", mn);
}

#define N_PTRBUF 12
static void ptrbuf(enum rsk_index_mode m, const char *mn)
{
	struct rsk_ptrbuf *b = NULL;
	int x, y, z, idx;
	void *out = &x;
	size_t bytes;

	tap_ok(rsk_ptrbuf_create(&b, m, 0, 0) == -EINVAL &&
		       rsk_ptrbuf_create(&b, m, -1, 0) == -EINVAL &&
		       rsk_ptrbuf_create(&b, m, RSK_PTRBUF_MAX_CAPACITY + 1, 0) == -EINVAL,
	       "%s ptrbuf: capacity 0, negative, beyond the maximum -EINVAL", mn);
	tap_ok(rsk_ptrbuf_create(NULL, m, 2, 0) == -EINVAL &&
		       rsk_ptrbuf_create(&b, m, 2, 0x80) == -EINVAL &&
		       rsk_ptrbuf_create(&b, (enum rsk_index_mode)-1, 2, 0) == -EINVAL,
	       "%s ptrbuf: NULL, unknown flag, unknown mode -EINVAL", mn);
	tap_ok(rsk_ptrbuf_create(&b, m, 2, RSK_PTRBUF_RELEASE) == 0 && b->nr == nr &&
		       aligned128(rsk_ptrbuf_part_(b, 0)) && aligned128(rsk_ptrbuf_part_(b, nr - 1)),
	       "%s ptrbuf: created, parts 128-aligned", mn);
	tap_ok(rsk_ptrbuf_pop(b, &out) == -ENOENT && out == NULL, "%s ptrbuf: pop of empty -ENOENT",
	       mn);
	idx = PART_OF(rsk_ptrbuf_push(b, &x), ptrbuf_part(b, &x));
	tap_ok(idx >= 0 && rsk_ptrbuf_push(b, &y) == 0 && ptrbuf_part(b, &y) == idx,
	       "%s ptrbuf: two pushes return 0, on part %d", mn, idx);
	tap_ok(rsk_ptrbuf_push(b, &z) == -ENOSPC, "%s ptrbuf: push on a full part -ENOSPC", mn);
	tap_ok(rsk_ptrbuf_pop(b, &out) == 0 && out == &y && rsk_ptrbuf_pop(b, &out) == 0 &&
		       out == &x && rsk_ptrbuf_pop(b, &out) == -ENOENT,
	       "%s ptrbuf: pops are LIFO, then empty", mn);
	rsk_ptrbuf_push(b, NULL);
	out = &x;
	tap_ok(rsk_ptrbuf_pop_cpu(b, idx, &out) == 0 && out == NULL &&
		       rsk_ptrbuf_pop_cpu(b, idx, &out) == -ENOENT,
	       "%s ptrbuf: NULL is a value; pop_cpu drains", mn);
	tap_ok(rsk_ptrbuf_pop_cpu(b, -1, &out) == -EINVAL &&
		       rsk_ptrbuf_pop_cpu(b, nr, &out) == -EINVAL,
	       "%s ptrbuf: pop_cpu of a CPU outside -EINVAL", mn);
	tap_ok(rsk_ptrbuf_push(NULL, &x) == -EINVAL && rsk_ptrbuf_pop(NULL, &out) == -EINVAL &&
		       rsk_ptrbuf_pop(b, NULL) == -EINVAL && rsk_ptrbuf_pop_cpu(NULL, 0, &out) == -EINVAL,
	       "%s ptrbuf: NULL arguments -EINVAL", mn);
	bytes = (size_t)(b->nr + 2) * b->stride;
	tap_ok(rsk_ptrbuf_destroy(b) == 0 && rsk_ptrbuf_destroy(NULL) == -EINVAL,
	       "%s ptrbuf: destroy, destroy(NULL) -EINVAL", mn);
	DESTROY_AGAIN(rsk_ptrbuf_destroy(b), bytes, "%s ptrbuf: destroyed again: -EINVAL", mn);
}

#define N_COPYBUF 14
static void copybuf(enum rsk_index_mode m, const char *mn)
{
	struct rsk_copybuf *b = NULL;
	struct { uint64_t a, b; } in1 = { 1, 2 }, in2 = { 3, 4 }, out = { 0, 0 };
	unsigned char odd_in[1 + 3] = { 0, 7, 8, 9 }, odd_out[1 + 3] = { 0, 0, 0, 0 };
	unsigned char big[RSK_COPYBUF_MAX_ITEM], big_out[RSK_COPYBUF_MAX_ITEM];
	size_t bytes;
	int idx;

	tap_ok(rsk_copybuf_create(&b, m, 0, 4, 0) == -EINVAL &&
		       rsk_copybuf_create(&b, m, RSK_COPYBUF_MAX_ITEM + 1, 4, 0) == -EINVAL,
	       "%s copybuf: item size 0 or beyond the maximum -EINVAL", mn);
	tap_ok(rsk_copybuf_create(&b, m, 16, 0, 0) == -EINVAL &&
		       rsk_copybuf_create(&b, m, 16, RSK_COPYBUF_MAX_CAPACITY + 1, 0) == -EINVAL &&
		       rsk_copybuf_create(NULL, m, 16, 4, 0) == -EINVAL &&
		       rsk_copybuf_create(&b, m, 16, 4, 2) == -EINVAL,
	       "%s copybuf: capacity 0 or too big, NULL, unknown flag -EINVAL", mn);
	tap_ok(rsk_copybuf_create(&b, m, sizeof(in1), 2, 0) == 0 && b->nr == nr &&
		       aligned128(rsk_copybuf_part_(b, 0)) &&
		       aligned128(rsk_copybuf_part_(b, nr - 1)),
	       "%s copybuf: created, parts 128-aligned", mn);
	tap_ok(rsk_copybuf_pop(b, &out) == -ENOENT, "%s copybuf: pop of empty -ENOENT", mn);
	idx = PART_OF(rsk_copybuf_push(b, &in1), copybuf_part(b, (intptr_t)in1.a));
	tap_ok(idx >= 0 && rsk_copybuf_push(b, &in2) == 0 && rsk_copybuf_push(b, &in1) == -ENOSPC,
	       "%s copybuf: two pushes on part %d, third -ENOSPC", mn, idx);
	in2.a = 99; /* copied by value: later changes do not matter */
	tap_ok(rsk_copybuf_pop(b, &out) == 0 && out.a == 3 && out.b == 4 &&
		       rsk_copybuf_pop(b, &out) == 0 && out.a == 1 && out.b == 2,
	       "%s copybuf: pops return copies, LIFO", mn);
	bytes = (size_t)(b->nr + 2) * b->stride;
	tap_ok(rsk_copybuf_destroy(b) == 0, "%s copybuf: destroyed", mn);
	DESTROY_AGAIN(rsk_copybuf_destroy(b), bytes, "%s copybuf: destroyed again: -EINVAL", mn);

	/* 3 bytes at an odd address: rounded up, through the bounce buffer. */
	tap_ok(rsk_copybuf_create(&b, m, 3, 1, RSK_COPYBUF_RELEASE) == 0 && b->words == 1 &&
		       rsk_copybuf_push(b, odd_in + 1) >= 0 && rsk_copybuf_pop(b, odd_out + 1) >= 0 &&
		       memcmp(odd_out, odd_in, sizeof(odd_in)) == 0,
	       "%s copybuf: a 3-byte unaligned item round-trips, nothing else written", mn);
	rsk_copybuf_destroy(b);

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 7 + 1);
	tap_ok(rsk_copybuf_create(&b, m, sizeof(big), 3, 0) == 0 && rsk_copybuf_push(b, big) >= 0 &&
		       rsk_copybuf_pop_cpu(b, idx, big_out) == 0 &&
		       memcmp(big, big_out, sizeof(big)) == 0,
	       "%s copybuf: a maximum-size item round-trips through pop_cpu", mn);
	tap_ok(rsk_copybuf_pop_cpu(b, idx, big_out) == -ENOENT &&
		       rsk_copybuf_pop_cpu(b, -1, big_out) == -EINVAL &&
		       rsk_copybuf_pop_cpu(b, nr, big_out) == -EINVAL,
	       "%s copybuf: pop_cpu of empty -ENOENT, of a CPU outside -EINVAL", mn);
	tap_ok(rsk_copybuf_push(NULL, big) == -EINVAL && rsk_copybuf_push(b, NULL) == -EINVAL &&
		       rsk_copybuf_pop(NULL, big) == -EINVAL && rsk_copybuf_pop(b, NULL) == -EINVAL &&
		       rsk_copybuf_pop_cpu(NULL, 0, big) == -EINVAL,
	       "%s copybuf: NULL arguments -EINVAL", mn);
	bytes = (size_t)(b->nr + 2) * b->stride;
	tap_ok(rsk_copybuf_destroy(b) == 0 && rsk_copybuf_destroy(NULL) == -EINVAL,
	       "%s copybuf: destroy, destroy(NULL) -EINVAL", mn);
	DESTROY_AGAIN(rsk_copybuf_destroy(b), bytes, "%s copybuf: destroyed again (%zu-byte items): -EINVAL",
		      mn, (size_t)RSK_COPYBUF_MAX_ITEM);
}

/* Without a critical section possible (thread unregistered), every
 * operation takes its slow path and gives the same results.  The thread's
 * registration is taken away with the raw system call, whoever made it. */
#define N_SLOW 7
static void slow_paths(void)
{
	struct rsk_status st;
	struct rsk_stats before, after;
	struct rsk_counter *c;
	struct rsk_stack *s;
	struct rsk_ptrbuf *b;
	struct rsk_copybuf *cb;
	struct rsk_spinlock *l;
	struct rsk_stack_node n, *out = NULL;
	intptr_t sum = 0;
	char item[8] = "rseqkit", back[8] = { 0 };
	void *p = NULL;
	int idx;

	rsk_status(&st);
	struct rsk_abi_area *area = rsk_area();
	if (area == NULL ||
	    syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, RSK_ABI_FLAG_UNREGISTER,
		    RSK_ARCH_SIGNATURE) != 0 ||
	    rsk_index(RSK_INDEX_CPU) >= 0) {
		for (int i = 0; i < N_SLOW; i++)
			skip("cannot unregister this thread");
		return;
	}
	rsk_stats_thread(&before);
	rsk_counter_create(&c, RSK_INDEX_CPU);
	rsk_spinlock_create(&l, RSK_INDEX_CPU);
	rsk_stack_create(&s, RSK_INDEX_CPU);
	rsk_ptrbuf_create(&b, RSK_INDEX_CPU, 1, 0);
	rsk_copybuf_create(&cb, RSK_INDEX_CPU, sizeof(item), 1, 0);
	tap_ok(rsk_counter_add(c, 5) >= 0 && rsk_counter_add(c, -2) >= 0 &&
		       rsk_counter_sum(c, &sum) == 0 && sum == 3,
	       "unregistered: counter adds exactly (sum %ld)", (long)sum);
	idx = rsk_spinlock_lock(l);
	tap_ok(idx >= 0 && l->part[idx].locked != 0 && rsk_spinlock_unlock(l, idx) == 0 &&
		       l->part[idx].locked == 0,
	       "unregistered: spinlock lock and unlock");
	tap_ok(rsk_stack_push(s, &n) >= 0 && rsk_stack_pop(s, &out) >= 0 && out == &n &&
		       rsk_stack_pop(s, &out) == -ENOENT && out == NULL &&
		       rsk_stack_push(s, &n) >= 0 && rsk_stack_pop_all(s, &out) >= 0 && out == &n,
	       "unregistered: stack push, pop, empty pop, pop_all");
	tap_ok(rsk_ptrbuf_push(b, &n) >= 0 && rsk_ptrbuf_push(b, &n) == -ENOSPC &&
		       rsk_ptrbuf_pop(b, &p) >= 0 && p == &n && rsk_ptrbuf_pop(b, &p) == -ENOENT,
	       "unregistered: ptrbuf push, full, pop, empty");
	tap_ok(rsk_copybuf_push(cb, item) >= 0 && rsk_copybuf_push(cb, item) == -ENOSPC &&
		       rsk_copybuf_pop(cb, back) >= 0 && memcmp(back, item, sizeof(item)) == 0 &&
		       rsk_copybuf_pop(cb, back) == -ENOENT,
	       "unregistered: copybuf push, full, pop, empty");
	rsk_stats_thread(&after);
	tap_ok(after.slow_paths >= before.slow_paths + 16,
	       "unregistered: slow paths counted (%llu)",
	       (unsigned long long)(after.slow_paths - before.slow_paths));
	tap_ok(rsk_register() != 0 || st.owner != RSK_OWNER_LIBRARY || rsk_index(RSK_INDEX_CPU) >= 0,
	       "re-registration (library-owned) brings the fast path back");
	rsk_counter_destroy(c);
	rsk_spinlock_destroy(l);
	rsk_stack_destroy(s);
	rsk_ptrbuf_destroy(b);
	rsk_copybuf_destroy(cb);
}

/* Operations on any CPU's part: exact, and errors for bad indices. */
#define N_REMOTE 6
static void remote(enum rsk_index_mode mode, const char *mn)
{
	struct rsk_counter *c;
	struct rsk_stack *s;
	struct rsk_ptrbuf *b;
	struct rsk_copybuf *cb;
	struct rsk_stack_node n1, n2, *out = NULL;
	intptr_t old = -1, sum = -1;
	long v = 42, back = 0;
	void *p = NULL;
	int last = nr - 1;

	rsk_counter_create(&c, mode);
	rsk_stack_create(&s, mode);
	rsk_ptrbuf_create(&b, mode, 4, 0);
	rsk_copybuf_create(&cb, mode, sizeof(v), 4, 0);
	int idx = PART_OF(rsk_counter_add(c, 7), counter_part(c));
	tap_ok(idx >= 0 && rsk_counter_exchange(c, idx, 100, &old) == 0 && old == 7 &&
		       rsk_counter_sum(c, &sum) == 0 && sum == 100 && rsk_counter_reset(c) == 0 &&
		       rsk_counter_sum(c, &sum) == 0 && sum == 0,
	       "%s counter: exchange takes the exact value, reset zeroes", mn);
	tap_ok(rsk_counter_exchange(c, -1, 0, &old) == -EINVAL &&
		       rsk_counter_exchange(c, nr, 0, &old) == -EINVAL &&
		       rsk_counter_exchange(c, 0, 0, NULL) == -EINVAL &&
		       rsk_counter_exchange(NULL, 0, 0, &old) == -EINVAL,
	       "%s counter: exchange rejects bad arguments", mn);
	tap_ok(rsk_stack_push_cpu(s, last, &n1) == 0 && rsk_stack_push_cpu(s, last, &n2) == 0 &&
		       rsk_stack_pop_all_cpu(s, last, &out) == 0 && out == &n2 && n2.next == &n1 &&
		       rsk_stack_pop_all_cpu(s, last, &out) == -ENOENT &&
		       rsk_stack_push_cpu(s, nr, &n1) == -EINVAL &&
		       rsk_stack_push_cpu(s, 0, NULL) == -EINVAL,
	       "%s stack: push_cpu / pop_all_cpu on part %d", mn, last);
	tap_ok(rsk_ptrbuf_push_cpu(b, last, &n1) == 0 && rsk_ptrbuf_pop_cpu(b, last, &p) == 0 &&
		       p == &n1 && rsk_ptrbuf_pop_cpu(b, last, &p) == -ENOENT &&
		       rsk_ptrbuf_push_cpu(b, -1, &n1) == -EINVAL,
	       "%s ptrbuf: push_cpu / pop_cpu on part %d", mn, last);
	for (int i = 0; i < 4; i++)
		rsk_ptrbuf_push_cpu(b, 0, &n1);
	tap_ok(rsk_ptrbuf_push_cpu(b, 0, &n1) == -ENOSPC, "%s ptrbuf: push_cpu on a full part -ENOSPC",
	       mn);
	tap_ok(rsk_copybuf_push_cpu(cb, last, &v) == 0 && rsk_copybuf_pop_cpu(cb, last, &back) == 0 &&
		       back == 42 && rsk_copybuf_pop_cpu(cb, last, &back) == -ENOENT &&
		       rsk_copybuf_push_cpu(cb, nr, &v) == -EINVAL,
	       "%s copybuf: push_cpu / pop_cpu on part %d", mn, last);
	rsk_counter_destroy(c);
	rsk_stack_destroy(s);
	rsk_ptrbuf_destroy(b);
	rsk_copybuf_destroy(cb);
}

/*
 * A signal handler whose operation finds the part's gate held by the very
 * thread it interrupted (here: the test closes the gate of the part its
 * next push would use, then raises the signal) must finish on another
 * part, not wait for itself: the stack's, the ptrbuf's and the copybuf's
 * push (with one part there is none: -EDEADLK).  An operation on the
 * named part, rsk_stack_push_cpu(), cannot move: -EDEADLK, nothing
 * pushed.  A hang is caught by a 20 s alarm, whose handler reports it as
 * a failed point.  The counter has no gate: a handler's add while its
 * thread holds a part's exchange lock just adds.
 * main() runs this again in a process without rseq (RSEQKIT_DISABLE=1),
 * where every operation takes its slow path.
 */
#define N_SIGNAL 7
static struct rsk_stack *sig_stack;
static struct rsk_stack_node sig_nodes[4]; /* [3]: push_cpu's */
static int sig_next;
static struct rsk_counter *sig_counter;
static struct rsk_ptrbuf *sig_ptrbuf;
static struct rsk_copybuf *sig_copybuf;
static long sig_item = 4242;
static volatile int sig_ret = -1000, sig_part = -1;
enum sig_op { SIG_PUSH, SIG_PUSH_CPU, SIG_ADD, SIG_PTRBUF, SIG_COPYBUF };
static volatile enum sig_op sig_op;

static void sig_handler(int signo)
{
	(void)signo;
	switch (sig_op) {
	case SIG_PUSH:
		sig_ret = rsk_stack_push(sig_stack, &sig_nodes[sig_next++]);
		break;
	case SIG_PUSH_CPU: /* on sig_part, whatever holds its gate */
		sig_ret = rsk_stack_push_cpu(sig_stack, sig_part, &sig_nodes[3]);
		break;
	case SIG_ADD:
		sig_ret = rsk_counter_add(sig_counter, 1);
		break;
	case SIG_PTRBUF:
		sig_ret = rsk_ptrbuf_push(sig_ptrbuf, &sig_item);
		break;
	case SIG_COPYBUF:
		sig_ret = rsk_copybuf_push(sig_copybuf, &sig_item);
		break;
	}
}

/* The alarm: a handler stuck on its own thread's gate never returns. */
static char sig_hung[192];

static void sig_watchdog(int signo)
{
	ssize_t w = write(STDOUT_FILENO, sig_hung, strlen(sig_hung));

	(void)signo;
	(void)w;
	_exit(1);
}

static void sig_alarm(const char *what)
{
	snprintf(sig_hung, sizeof(sig_hung), "not ok %d - signal: %s: hung (the 20 s alarm)\n",
		 tap_n + 1, what);
	alarm(20);
}

/* Raise the signal, its handler running op; what op returned. */
static int sig_run(enum sig_op op)
{
	sig_op = op;
	sig_ret = -1000;
	raise(SIGUSR1);
	return sig_ret;
}

/* What an operation on the current part, in a handler whose thread holds
 * the gate of part `held`, must return: another part's index, or -EDEADLK
 * where there is no other part. */
static int moved_on(int r, int held)
{
	return nr > 1 ? r >= 0 && r < nr && r != held : r == -EDEADLK;
}

/* Nodes on every part of the stack (drained: the stack is left empty). */
static int sig_drain(void)
{
	int n = 0;

	for (int i = 0; i < sig_stack->nr; i++) {
		struct rsk_stack_node *node = NULL;

		if (rsk_stack_pop_all_cpu(sig_stack, i, &node) >= 0)
			for (; node != NULL; node = node->next)
				n++;
	}
	return n;
}

static void signal_on_own_gate(void)
{
	struct sigaction sa = { .sa_handler = sig_handler }, wd = { .sa_handler = sig_watchdog };
	intptr_t sum = -1;
	long back = 0;
	void *p = NULL;
	int idx, r, r_cpu;

	if (rsk_stack_create(&sig_stack, RSK_INDEX_CPU) != 0 ||
	    rsk_counter_create(&sig_counter, RSK_INDEX_CPU) != 0 ||
	    rsk_ptrbuf_create(&sig_ptrbuf, RSK_INDEX_CPU, 4, 0) != 0 ||
	    rsk_copybuf_create(&sig_copybuf, RSK_INDEX_CPU, sizeof(sig_item), 4, 0) != 0) {
		for (int i = 0; i < N_SIGNAL; i++)
			tap_ok(0, "signal: cannot create a stack, a counter, a ptrbuf and a copybuf");
		return;
	}
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGALRM, &wd, NULL);

	/* The stack: push, then push_cpu on the held part. */
	idx = PART_OF(rsk_stack_push(sig_stack, &sig_nodes[sig_next]), /* this thread's part */
		      stack_part(sig_stack, &sig_nodes[sig_next]));
	sig_next++;
	sig_alarm("stack push, push_cpu on the held part");
	tap_ok(idx >= 0 && rsk_gate_close(&sig_stack->part[idx].gate, sig_stack->mode, idx) == 0,
	       "signal: the thread closes the gate of its part %d", idx);
	r = sig_run(SIG_PUSH);
	r = PART_OF(r, stack_part(sig_stack, &sig_nodes[sig_next - 1]));
	sig_part = idx;
	r_cpu = sig_run(SIG_PUSH_CPU);
	rsk_gate_open(&sig_stack->part[idx].gate);
	alarm(0);
	if (nr > 1)
		tap_ok(moved_on(r, idx), "signal: the handler's push went to part %d, not the held %d", r,
		       idx);
	else
		tap_ok(moved_on(r, idx), "signal: one part, held by the interrupted thread: -EDEADLK (%d)",
		       r);
	tap_ok(r_cpu == -EDEADLK && sig_stack->part[idx].head == (intptr_t)&sig_nodes[0],
	       "signal: push_cpu on part %d, whose gate the interrupted thread holds: -EDEADLK, "
	       "nothing pushed (%d)",
	       idx, r_cpu);
	r = sig_run(SIG_PUSH); /* the gate open again: an ordinary push */
	tap_ok(r >= 0 && sig_drain() == (nr > 1 ? 3 : 2), "signal: then a push in a handler as usual");

	/* The counter: its exchange lock held by this thread, as if a
	 * handler had interrupted an exchange; the handler's add adds. */
	idx = PART_OF(rsk_counter_add(sig_counter, 1), counter_part(sig_counter));
	r = -1000;
	sig_alarm("counter add");
	if (idx >= 0 && rsk_gate_close(&sig_counter->part[idx].lock, sig_counter->mode, idx) == 0) {
		r = sig_run(SIG_ADD);
		rsk_gate_open(&sig_counter->part[idx].lock);
	}
	alarm(0);
	rsk_counter_sum(sig_counter, &sum);
	tap_ok(idx >= 0 && r >= 0 && sum == 2,
	       "signal: a counter add in a handler whose thread holds a part's exchange lock adds (%d, sum %ld)",
	       r, (long)sum);

	/* The ptrbuf: a push, then one in a handler while this thread holds
	 * the gate of the part it used: the pointer is on another part. */
	idx = PART_OF(rsk_ptrbuf_push(sig_ptrbuf, &sig_nodes[0]), ptrbuf_part(sig_ptrbuf, &sig_nodes[0]));
	r = -1000;
	sig_alarm("ptrbuf push");
	if (idx >= 0 &&
	    rsk_gate_close(&rsk_ptrbuf_part_(sig_ptrbuf, (size_t)idx)->gate, sig_ptrbuf->mode, idx) == 0) {
		r = sig_run(SIG_PTRBUF);
		r = PART_OF(r, ptrbuf_part(sig_ptrbuf, &sig_item));
		rsk_gate_open(&rsk_ptrbuf_part_(sig_ptrbuf, (size_t)idx)->gate);
	}
	alarm(0);
	tap_ok(idx >= 0 && moved_on(r, idx) &&
		       (nr == 1 || (rsk_ptrbuf_pop_cpu(sig_ptrbuf, r, &p) == 0 && p == &sig_item)),
	       "signal: a ptrbuf push in a handler whose thread holds the gate of part %d: on part %d "
	       "(-EDEADLK if that is the only part)",
	       idx, r);

	/* The copybuf: the same. */
	idx = PART_OF(rsk_copybuf_push(sig_copybuf, &back), copybuf_part(sig_copybuf, (intptr_t)back));
	r = -1000;
	sig_alarm("copybuf push");
	if (idx >= 0 &&
	    rsk_gate_close(&rsk_copybuf_part_(sig_copybuf, (size_t)idx)->gate, sig_copybuf->mode, idx) == 0) {
		r = sig_run(SIG_COPYBUF);
		r = PART_OF(r, copybuf_part(sig_copybuf, (intptr_t)sig_item));
		rsk_gate_open(&rsk_copybuf_part_(sig_copybuf, (size_t)idx)->gate);
	}
	alarm(0);
	tap_ok(idx >= 0 && moved_on(r, idx) &&
		       (nr == 1 || (rsk_copybuf_pop_cpu(sig_copybuf, r, &back) == 0 && back == sig_item)),
	       "signal: a copybuf push in a handler whose thread holds the gate of part %d: on part %d "
	       "(-EDEADLK if that is the only part)",
	       idx, r);

	signal(SIGUSR1, SIG_DFL);
	signal(SIGALRM, SIG_DFL);
	rsk_stack_destroy(sig_stack);
	rsk_counter_destroy(sig_counter);
	rsk_ptrbuf_destroy(sig_ptrbuf);
	rsk_copybuf_destroy(sig_copybuf);
}

/* The signal checks again in a fresh process without rseq
 * (RSEQKIT_DISABLE=1: every operation on its slow path, as under valgrind,
 * seccomp or an old kernel, where a handler is likeliest to interrupt its
 * own thread's gate), its points relayed here: N_SIGNAL_SLOW of them. */
#define N_SIGNAL_SLOW (2 + N_SIGNAL + 1)
static void disable_rseq(const void *arg)
{
	(void)arg;
	setenv("RSEQKIT_DISABLE", "1", 1);
}

static void signal_without_rseq(void)
{
	/* This program's path: under valgrind /proc/self/exe is valgrind,
	 * and readlink() of it the program (which then runs natively). */
	char self[PATH_MAX] = "/proc/self/exe";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *argv[] = { self, (char *)"--signal-child", NULL };
	struct child_spec cs = { argv, NULL, disable_rseq, NULL };
	int first = tap_n;

	if (n > 0)
		self[n] = '\0';
	relay_child("RSEQKIT_DISABLE=1", &cs);
	while (tap_n < first + N_SIGNAL_SLOW) /* the plan stays right */
		tap_ok(0, "[RSEQKIT_DISABLE=1] a point the child did not reach");
}

/* In signal_without_rseq()'s child: the inline operations' NULL
 * structures get -EINVAL without rseq too, where the no-rseq test may
 * come before the NULL test (rsk_counter_add()). */
static void null_without_rseq(void)
{
	struct rsk_stack_node node, *top;
	intptr_t item[2] = {0, 0};
	void *out;

	tap_ok(rsk_counter_add(NULL, 1) == -EINVAL && rsk_stack_push(NULL, &node) == -EINVAL &&
		       rsk_stack_pop(NULL, &top) == -EINVAL && rsk_ptrbuf_push(NULL, &node) == -EINVAL &&
		       rsk_ptrbuf_pop(NULL, &out) == -EINVAL && rsk_copybuf_push(NULL, item) == -EINVAL &&
		       rsk_copybuf_pop(NULL, item) == -EINVAL,
	       "without rseq: counter add, stack, ptrbuf and copybuf push and pop of NULL -EINVAL");
}

/* Resident memory of this process, from /proc/self/statm; 0 if unknown. */
static size_t resident_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long size = 0, res = 0;

	if (f == NULL)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/* Creating a buffer of the largest capacity commits next to nothing: its
 * parts are mapped, not written (an empty one once took 263 MB, memset at
 * create).  Bound: 1 MiB, against nr x 128 MiB (ptrbuf) or 4 GiB (copybuf
 * of 256-byte items) reserved. */
#define N_RSS 2
static void buffers_commit_lazily(void)
{
	struct rsk_ptrbuf *b = NULL;
	struct rsk_copybuf *cb = NULL;
	size_t before, grew;

	before = resident_bytes();
	if (rsk_ptrbuf_create(&b, RSK_INDEX_CPU, RSK_PTRBUF_MAX_CAPACITY, 0) != 0) {
		tap_ok(0, "rss: ptrbuf of the largest capacity created");
	} else {
		grew = resident_bytes() - before;
		tap_ok(before != 0 && grew < ((size_t)1 << 20),
		       "rss: an empty ptrbuf of capacity %ld (%d parts) commits %zu KiB (< 1 MiB)",
		       (long)RSK_PTRBUF_MAX_CAPACITY, nr, grew >> 10);
		rsk_ptrbuf_destroy(b);
	}
	before = resident_bytes();
	if (rsk_copybuf_create(&cb, RSK_INDEX_CPU, RSK_COPYBUF_MAX_ITEM, RSK_COPYBUF_MAX_CAPACITY, 0) != 0) {
		/* 4 GiB a part may be more than this machine maps: not the
		 * point of the check, which the ptrbuf makes. */
		skip("rss: copybuf of the largest size not mappable here");
	} else {
		grew = resident_bytes() - before;
		tap_ok(before != 0 && grew < ((size_t)1 << 20),
		       "rss: an empty copybuf of %ld items of %d bytes commits %zu KiB (< 1 MiB)",
		       (long)RSK_COPYBUF_MAX_CAPACITY, RSK_COPYBUF_MAX_ITEM, grew >> 10);
		rsk_copybuf_destroy(cb);
	}
}

/* On CPU 1 every structure operation returns 0: the natural
 * `if (rsk_counter_add(c, 1) != 0) error();` must not fail there (the
 * part's index, 1, came back before).  CPU mode, pinned with
 * sched_setaffinity; the caller's affinity is restored. */
#define N_ZERO 1
static void zero_on_cpu1(void)
{
	struct rsk_mempool_config mc = { .size = sizeof(intptr_t) };
	struct rsk_counter *c = NULL;
	struct rsk_stack *s = NULL;
	struct rsk_ptrbuf *b = NULL;
	struct rsk_copybuf *cb = NULL;
	struct rsk_mempool *mp = NULL;
	struct rsk_stack_node node, *got = NULL;
	cpu_set_t saved, one;
	intptr_t *pc = NULL, item = 7;
	void *p = NULL;
	int r[9], on = -1, bad = 0;

	if (sched_getaffinity(0, sizeof(saved), &saved) != 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		tap_skip("one CPU online", "structure operations return 0 on CPU 1");
		return;
	}
	CPU_ZERO(&one);
	CPU_SET(1, &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0) {
		tap_skip("cannot run on CPU 1", "structure operations return 0 on CPU 1");
		return;
	}
	on = sched_getcpu();
	if (rsk_counter_create(&c, RSK_INDEX_CPU) != 0 || rsk_stack_create(&s, RSK_INDEX_CPU) != 0 ||
	    rsk_ptrbuf_create(&b, RSK_INDEX_CPU, 4, 0) != 0 ||
	    rsk_copybuf_create(&cb, RSK_INDEX_CPU, sizeof(item), 4, 0) != 0 ||
	    rsk_mempool_create(&mp, &mc) != 0 || (pc = rsk_mempool_zalloc(mp)) == NULL)
		bad = 1;
	if (!bad) {
		r[0] = rsk_counter_add(c, 1);
		r[1] = rsk_pcounter_add(mp, pc, 1);
		r[2] = rsk_stack_push(s, &node);
		r[3] = rsk_stack_pop(s, &got);
		r[4] = rsk_stack_push(s, &node) == 0 ? rsk_stack_pop_all(s, &got) : -1000;
		r[5] = rsk_ptrbuf_push(b, &item);
		r[6] = rsk_ptrbuf_pop(b, &p);
		r[7] = rsk_copybuf_push(cb, &item);
		r[8] = rsk_copybuf_pop(cb, &item);
		for (int i = 0; i < 9; i++)
			bad |= r[i] != 0;
	}
	tap_ok(!bad && on == 1,
	       "on CPU %d, counter add, pcounter add, stack push/pop/pop_all, ptrbuf push/pop, "
	       "copybuf push/pop return 0 (%d %d %d %d %d %d %d %d %d)",
	       on, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]);
	rsk_counter_destroy(c);
	rsk_stack_destroy(s);
	rsk_ptrbuf_destroy(b);
	rsk_copybuf_destroy(cb);
	if (mp != NULL)
		rsk_mempool_destroy(mp);
	sched_setaffinity(0, sizeof(saved), &saved);
}

int main(int argc, char **argv)
{
	struct rsk_status st;
	cpu_set_t one;
	int modes, signal_child = argc > 1 && strcmp(argv[1], "--signal-child") == 0;

	/* Without rseq (RSEQKIT_DISABLE=1, valgrind, seccomp) every operation
	 * takes its slow path: the same checks must pass. */
	rsk_status(&st);
	if (!st.available)
		tap_diag("rseq unavailable (%s): slow paths only", st.reason);
	nr = rsk_possible_cpus();
	/* Stay on one CPU: each part index is then stable. */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	sched_setaffinity(0, sizeof(one), &one);

	if (signal_child) { /* signal_without_rseq()'s child */
		tap_plan(2 + N_SIGNAL);
		tap_ok(!st.available && rsk_index(RSK_INDEX_CPU) < 0,
		       "rseq unavailable (%s): every operation takes its slow path",
		       st.reason ? st.reason : "?");
		null_without_rseq();
		signal_on_own_gate();
		return tap_done();
	}
	modes = 2; /* cid falls back to cpu where mm_cid is missing */
	tap_plan(modes * (N_COUNTER + N_SPINLOCK + N_STACK + N_PTRBUF + N_COPYBUF + N_REMOTE) + N_SLOW + N_SIGNAL +
		 N_SIGNAL_SLOW + N_RSS + N_ZERO);
	for (int m = 0; m < modes; m++) {
		const char *mn = m ? "cid" : "cpu";
		counter((enum rsk_index_mode)m, mn);
		spinlock((enum rsk_index_mode)m, mn);
		stack((enum rsk_index_mode)m, mn);
		ptrbuf((enum rsk_index_mode)m, mn);
		copybuf((enum rsk_index_mode)m, mn);
		remote((enum rsk_index_mode)m, mn);
	}
	slow_paths();
	signal_on_own_gate();
	signal_without_rseq();
	buffers_commit_lazily();
	zero_on_cpu1();
	return tap_done();
}
