/* SPDX-License-Identifier: MIT */
/*
 * The framework every per-CPU structure shares (see <rseqkit/percpu.h> and
 * src/internal.h): creation and destruction, and the one slow path - the
 * retries a first attempt left, the registration of a new thread, then
 * the operation under a part's gate.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "internal.h"

/* Blocks at least this large come from mmap: their untouched pages cost
 * no memory (an empty large buffer is mostly never-written slots). */
#define RSK_PERCPU_MMAP_MIN ((size_t)64 * 1024)

enum rsk_index_mode rsk_percpu_effective_mode(enum rsk_index_mode mode)
{
	rsk_init_once();
	if (mode == RSK_INDEX_CID && !rsk_process.cid_for_structures)
		return RSK_INDEX_CPU;
	return mode;
}

void rsk_percpu_init_head(struct rsk_percpu_head *h)
{
	h->index_offset_ = h->mode == RSK_INDEX_CID ? RSK_ABI_OFF_MM_CID : RSK_ABI_OFF_CPU_ID;
	/* The offset is decided once, by rsk_init_once() (which
	 * rsk_percpu_effective_mode() ran): 0 means no thread can run a
	 * section, and the fast paths then never try. */
	h->fast_nr_ = rsk_fast.area_offset != 0 ? (uint32_t)h->nr : 0;
}

/*
 * Guard parts (<rseqkit/percpu.h>, "Guard parts"): part[-2] is these 128
 * bytes before the structure, all ones: a closed gate wherever a part
 * keeps it.  part[-1] is the structure's head, whose gate word is
 * index_offset_ (never 0) and fast_nr_ (RSK_PERCPU_GUARDED_ checks that
 * the structure's gate lies there).
 */
#define RSK_PERCPU_GUARD RSK_PERCPU_ALIGN

void *rsk_percpu_create(size_t size, enum rsk_index_mode mode)
{
	struct rsk_percpu_head *h;
	size_t total = RSK_PERCPU_GUARD + size;
	int mapped = total >= RSK_PERCPU_MMAP_MIN;
	unsigned char *base;

	if (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID)
		return NULL;
	if (mapped) {
		/* No reservation: a large buffer is mostly slots never written. */
		void *m = mmap(NULL, total, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		base = m == MAP_FAILED ? NULL : m;
	} else {
		base = aligned_alloc(RSK_PERCPU_ALIGN,
				     (total + RSK_PERCPU_ALIGN - 1) & ~(size_t)(RSK_PERCPU_ALIGN - 1));
		if (base != NULL)
			memset(base, 0, total);
	}
	if (base == NULL)
		return NULL;
	memset(base, 0xff, RSK_PERCPU_GUARD);
	h = (struct rsk_percpu_head *)(void *)(base + RSK_PERCPU_GUARD);
	h->mode = rsk_percpu_effective_mode(mode);
	h->nr = rsk_possible_cpus();
	rsk_percpu_init_head(h);
	h->magic_ = mapped ? RSK_PERCPU_MAGIC_MAPPED : RSK_PERCPU_MAGIC;
	return h;
}

int rsk_percpu_destroy(void *s, size_t size)
{
	struct rsk_percpu_head *h = s;
	unsigned char *base;
	uint32_t magic;

	if (h == NULL)
		return -EINVAL;
	base = (unsigned char *)s - RSK_PERCPU_GUARD;
	magic = h->magic_;
	if (magic != RSK_PERCPU_MAGIC && magic != RSK_PERCPU_MAGIC_MAPPED)
		return -EINVAL; /* destroyed already, or not a structure */
	h->magic_ = RSK_PERCPU_MAGIC_DEAD;
	if (magic == RSK_PERCPU_MAGIC_MAPPED)
		munmap(base, RSK_PERCPU_GUARD + size);
	else
		free(base);
	return 0;
}

/*
 * A home part for each thread that runs no sections (no rseq in the
 * process, or not registered): any part is correct under its gate, and
 * keeping to one spares a getcpu per operation and keeps threads on
 * different lines.  Chosen from the CPU at first use; moved on when a
 * gate is found held by someone else.
 */
static __thread int home_part = -1;

static __attribute__((noinline)) int home_choose(int nr)
{
	int h = home_part;

	if (h < 0) {
		int cpu = rsk_cpu();
		home_part = h = cpu >= 0 ? cpu : 0;
	}
	return h % nr;
}

/* See internal.h. */
int rsk_percpu_home_(int nr)
{
	int h;

	/* Every operation of a thread without sections comes here first:
	 * the place for RSEQKIT_CHECK_THREADS, before home_part (TLS). */
	if (__builtin_expect(rsk_process.check_threads, 0))
		rsk_check_thread_();
	h = home_part;
	/* Almost always: chosen, and below nr (a CPU number). */
	if (__builtin_expect((unsigned)h < (unsigned)nr, 1))
		return h;
	return home_choose(nr);
}

int rsk_percpu_slow_index(enum rsk_index_mode mode, int nr)
{
	int idx;

	if (rsk_fast.area_offset == 0) /* no thread runs sections */
		return rsk_percpu_home_(nr);
	idx = rsk_index(mode);
	if ((unsigned)idx < (unsigned)nr)
		return idx;
	return rsk_percpu_home_(nr);
}

/* See internal.h. */
int rsk_percpu_spill_index_(enum rsk_index_mode mode, int nr)
{
	int idx;

	if (rsk_fast.area_offset != 0) {
		idx = rsk_index(mode);
		if ((unsigned)idx < (unsigned)nr)
			return idx;
	}
	if (__builtin_expect(rsk_process.check_threads, 0))
		rsk_check_thread_(); /* as rsk_percpu_home_() */
	/* glibc reads it from its own rseq area, or the vDSO: no system
	 * call on the kernels rseqkit meets. */
	idx = sched_getcpu();
	if (__builtin_expect((unsigned)idx < (unsigned)nr, 1))
		return idx;
	return rsk_percpu_home_(nr);
}

/* After RSK_NO_INDEX: whether the thread can run sections on this
 * structure now (its first call registers it). */
static int index_now_usable(const struct rsk_percpu_head *h)
{
	if (h->fast_nr_ == 0 || rsk_thread_ensure() != RSK_THREAD_ACTIVE)
		return 0;
	return (unsigned)rsk_index(h->mode) < (unsigned)h->nr;
}

/* Close the gate of part idx, or of the next parts where the calling
 * thread holds it already (a signal handler interrupted its own slow
 * path there), or where another holds it while the calling thread holds
 * a gate (it waits for none: see src/progress/gate.c).  Returns the part
 * closed, or a negative errno. */
static int close_some_gate(void *s, const struct rsk_percpu_head *h,
			   const struct rsk_percpu_kind *k, int idx)
{
	for (int n = 0; n < h->nr; n++, idx = (idx + 1) % h->nr) {
		int err = rsk_gate_close_named_(k->gate(s, idx), h->mode, idx, k->name, s);

		if (err == 0)
			return idx;
		if (err != -EDEADLK)
			return err;
		home_part = idx + 1;
	}
	return -EDEADLK;
}

/* After RSK_STOPPED: whether the section met a guard part (it read
 * -1 or -2, the index of a thread that is not registered) rather than a
 * closed gate. */
static int stopped_by_guard(const struct rsk_percpu_head *h)
{
	const struct rsk_abi_area *area = rsk_area();

	return area != NULL &&
	       __atomic_load_n((const uint32_t *)(const void *)((const char *)area +
								 h->index_offset_),
			       __ATOMIC_RELAXED) >= (uint32_t)h->nr;
}

/* See internal.h: the slow path where nothing runs sections, after its
 * first try (rsk_percpu_plain()) did not end the operation. */
int rsk_percpu_plain_(void *s, const struct rsk_percpu_kind *k, void *arg, int busy)
{
	const struct rsk_percpu_head *h = s;
	int idx, moved = 0;
	unsigned round = 0;

	if (!rsk_percpu_alive_(h))
		return -EINVAL; /* used after rsk_<name>_destroy() */
	if (busy >= 0) {
		/* The first try found part `busy` busy (and counted). */
		idx = busy;
		k->wait(s, idx, round++);
	} else {
		idx = rsk_percpu_home_(h->nr);
	}
	for (;;) {
		intptr_t *gate = k->gate(s, idx);
		int err = rsk_gate_take_plain_(gate, idx, k->name, s);
		enum rsk_result r;

		if (__builtin_expect(err != 0, 0)) {
			if (err != -EDEADLK || ++moved >= h->nr)
				return err;
			/* A handler interrupted this thread's own slow path
			 * on that part, or holding a gate it may not wait for
			 * this one: the next one. */
			idx = (idx + 1) % h->nr;
			home_part = idx;
			continue;
		}
		r = k->locked(s, idx, arg);
		rsk_gate_drop_plain_(gate, idx, round == 0);
		if (__builtin_expect(r == RSK_OK, 1))
			return idx;
		if (r != RSK_CMPFAIL || k->wait == NULL)
			return rsk_percpu_final_error_(r);
		/* Busy (a held lock): wait with the gate open. */
		k->wait(s, idx, round++);
	}
}

int rsk_percpu_retry_(void *s, const struct rsk_percpu_kind *k, void *arg, enum rsk_result r)
{
	struct rsk_percpu_head *h = s;
	unsigned aborts = 0, round = 0;
	int idx = -1, tried_register = 0;

	if (!rsk_percpu_alive_(h))
		return -EINVAL; /* used after rsk_<name>_destroy() */
	for (;;) {
		/* The retries of the fast path. */
		for (;;) {
			if ((r == RSK_EMPTY || r == RSK_FULL) && k->outside == NULL)
				return rsk_percpu_final_error_(r);
			if (r == RSK_STOPPED && stopped_by_guard(h))
				r = RSK_NO_INDEX;
			if (r == RSK_ABORTED && rsk_percpu_give_up(&aborts))
				break;
			if (r == RSK_NO_INDEX && (tried_register++ || !index_now_usable(h)))
				break;
			/* Retried: a changed part, an abort below the limit,
			 * a thread registered now.  Anything else (RSK_STOPPED,
			 * RSK_NO_PART, an answer for `outside`) goes on. */
			if (r != RSK_CMPFAIL && r != RSK_ABORTED && r != RSK_NO_INDEX)
				break;
			if (r == RSK_CMPFAIL && k->wait != NULL)
				k->wait(s, idx, round++);
			r = k->attempt(s, arg, &idx);
			if (r == RSK_OK)
				return idx;
		}
		if (k->outside != NULL) {
			/* The structure's own phase, every gate open. */
			idx = rsk_percpu_slow_index(h->mode, h->nr);
			rsk_note_slow_path_at(idx);
			return k->outside(s, arg, idx);
		}
		if (k->gate == NULL) {
			/* No gate: `locked` is safe beside the sections, and
			 * is an add that needs no lock (the counter's spill). */
			idx = rsk_percpu_spill_index_(h->mode, h->nr);
			r = k->locked(s, idx, arg);
			rsk_note_slow_path_at(idx);
			return r == RSK_OK ? idx : rsk_percpu_final_error_(r);
		}
		/* The one place that works on the structure without a
		 * critical section: its gate makes the part ours. */
		idx = close_some_gate(s, h, k, rsk_percpu_slow_index(h->mode, h->nr));
		if (idx < 0)
			return idx;
		r = k->locked(s, idx, arg);
		rsk_gate_open(k->gate(s, idx));
		if (round == 0)
			rsk_note_slow_path_at(idx);
		if (r == RSK_OK)
			return idx;
		if (r != RSK_CMPFAIL || k->wait == NULL)
			return rsk_percpu_final_error_(r);
		/* Busy (a held lock): wait with the gate open, then again
		 * from the fast path. */
		k->wait(s, idx, round++);
		aborts = 0;
		r = k->attempt(s, arg, &idx);
		if (r == RSK_OK)
			return idx;
	}
}

int rsk_percpu_on_cpu(void *s, const struct rsk_percpu_kind *k, int cpu, void *arg)
{
	struct rsk_percpu_head *h = s;
	enum rsk_result r;
	int err;

	if (h == NULL || (unsigned)cpu >= (unsigned)h->nr)
		return -EINVAL;
	if (!rsk_percpu_alive_(h))
		return -EINVAL;
	if (__builtin_expect(rsk_process.check_threads, 0))
		rsk_check_thread_(); /* before the gate's TLS */
	if (k->peek != NULL && (r = k->peek(s, cpu, arg)) != RSK_OK)
		return rsk_percpu_final_error_(r);
	err = rsk_gate_close_named_(k->gate(s, cpu), h->mode, cpu, k->name, s);
	if (err != 0)
		return err;
	r = k->locked(s, cpu, arg);
	rsk_gate_open(k->gate(s, cpu));
	return r == RSK_OK ? 0 : rsk_percpu_final_error_(r);
}
