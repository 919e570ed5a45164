/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/bench.h - what the files of rseqkit-bench share.
 *
 * The bench is one harness and one file per family of operations:
 *
 *   harness.c   timing, pinning, repetitions, interleaving, progress
 *   report.c    tables, summaries, CSV, JSON, the SVG plots
 *   child.c     helper processes: the fallback child (RSEQKIT_DISABLE=1)
 *               and one per rival allocator (LD_PRELOAD)
 *   main.c      options, and the registry of families
 *   xfer.c      what the transfer families (stack, buffers) share
 *   cpu.c counter.c lock.c stack.c buffers.c pool.c fence.c workload.c
 *   malloc.c    the families: their rows, checks and summaries
 *   rival-*.c   the rivals from other projects: ck, jemalloc, mimalloc,
 *               tcmalloc
 *   ungated.c   the families' loops again, with the gate compiled out
 *
 * Adding a family: write a file with its rows (a table of struct impl),
 * a `const struct family fam_<name>` and add it to the registry in
 * main.c (and, if it has loops over the library's operations, include it
 * from ungated.c).  Adding a row: a function doing `n` operations (and,
 * if needed, setup/check/teardown) and one line in its family's table.
 * A new op also gets its line in report.c's opnote() and in
 * man/rseqkit-bench.1; its yardstick rows (YS_ROWS) a line in the pairs[]
 * of report.c's ys_report().
 *
 * Ungated rows.  A family's loops over the library's operations come
 * first in its file, each declared with BENCH_LOOP_DECL(name) and defined
 * as BENCH_LOOP(name); the rest of the file is inside #ifndef
 * BENCH_UNGATED.  ungated.c includes the family files again with
 * BENCH_UNGATED defined, after ungated.h, which compiles the gate out of
 * every fast path of that file (the installed headers have no switch for
 * it); there only the loops are compiled,
 * and each is named name_ungated.  So the rseqkit-ungated rows run the
 * library's own fast-path code, minus the gate: nothing copied by hand.
 */
#ifndef RSEQKIT_BENCH_H
#define RSEQKIT_BENCH_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rseqkit/rseqkit.h>
#include "../../src/env.h" /* rsk_env_bool_: the library's reader of switches */
#include "../yardstick.h"

#define BATCH_MAX (1u << 20) /* most operations between two reads of the stop flag */
#define BATCH_NS 50000u	     /* grow batches until one lasts this long */
#define CACHE_LINE 128	     /* a slot per CPU on its own pair of lines */
#define MAX_THREAD_COUNTS 16

struct run;

struct sample {
	double ns_per_op; /* thread time per operation */
	double mops;	  /* operations per microsecond, all threads */
	double p50, p99;  /* per-operation latency (ns) where sampled, else 0 */
};

/* One worker thread of one run. */
struct thr {
	struct run *run;
	int id;
	int pin_cpu;	  /* -1: not pinned */
	uint64_t ops;	  /* operations in the timed window */
	uint64_t ops_all; /* every operation, warm-up touch included */
	uint64_t t0, t1;  /* the thread's timed window (CLOCK_MONOTONIC) */
	int64_t acc;	  /* per-thread result the check reads */
	intptr_t aux;	  /* per-thread value set by thread_init */
	uint64_t objs;	  /* IMPL_COUNTS: operations the fn completed in the window */
	void *priv;	  /* per-thread state of the implementation */
	pthread_t tid;
} __attribute__((aligned(CACHE_LINE)));

struct run {
	const struct impl *im;
	void *shared;
	int nthreads;
	pthread_barrier_t start;
	int stop;
	struct thr *thr;
};

/*
 * A helper process a row runs in: this program, re-executed with one
 * environment variable set (the fallback child: RSEQKIT_DISABLE=1; a
 * rival allocator: LD_PRELOAD=its library).  child.c.
 */
struct helper {
	const char *name;    /* "fallback", "jemalloc", ... */
	const char *env;     /* the variable set in the child */
	const char *value;   /* its value */
	const char *env2;    /* optional: a second variable set in the child */
	const char *value2;  /* ... and its value */
	const char *library; /* LD_PRELOAD rows: the shared object (a soname) */
	const char *symbol;  /* ... and a symbol only it defines: the preload took */
	const char *package; /* the Debian package that provides it */
};

struct impl {
	const char *op;	  /* operation: one table per op */
	const char *name; /* "rseqkit", "thread-local", rivals */
	/* Shared state for one run (fresh each run), or NULL for none. */
	void *(*setup)(int nthreads);
	/* Optional, runs in the worker before the start barrier. */
	void (*thread_init)(void *shared, struct thr *t);
	/* Do n operations: the measured code. */
	void (*fn)(void *shared, struct thr *t, unsigned n);
	/* Optional, runs in the worker after the timed window. */
	void (*thread_fini)(void *shared, struct thr *t);
	/* 0 if the run's result is right, else -1 with a message in err. */
	int (*check)(void *shared, struct thr *t, int nthreads, char *err, size_t len);
	void (*teardown)(void *shared);
	unsigned flags; /* IMPL_* below */
	/* Optional, runs after the check: extra figures of the run. */
	void (*extra)(void *shared, struct sample *out);
	/* Where it runs: NULL here, else in that helper process. */
	const struct helper *helper;
};

/* impl flags */
#define IMPL_ONE_THREAD 2u  /* only at 1 thread (fence latency) */
#define IMPL_MAX_THREADS 4u /* only at the largest thread count (workload) */
#define IMPL_PAIRS 8u	    /* only at 2 threads and the largest count if even (pool-pc) */
#define IMPL_COUNTS 16u	    /* the fn counts its completed operations in thr.objs */
#define IMPL_HAND 32u	    /* needs glibc's rseq registration (tools/yardstick.h) */

/* Table entries.  ROW: run here; ROWF: flags and the extra-figures hook;
 * ROWH: in a helper process. */
#define ROW(op, name, setup, init, fn, fini, check, teardown)                  \
	{op, name, setup, init, fn, fini, check, teardown, 0, NULL, NULL}
#define ROWF(op, name, setup, init, fn, fini, check, teardown, flags, extra)   \
	{op, name, setup, init, fn, fini, check, teardown, flags, extra, NULL}
#define ROWH(op, name, setup, fn, check, teardown, flags, helper)              \
	{op, name, setup, NULL, fn, NULL, check, teardown, flags, NULL, helper}
/* A library operation's three rows, declared once: NAME (the library's
 * code as users get it), NAME-ungated (the same code, gate compiled out:
 * fn##_ungated from ungated.c) and rseqkit-fallback (the same code in the
 * fallback child, where every operation takes the slow path). */
#define RSK_ROWS(op, name, setup, fn, check, teardown)                         \
	ROW(op, name, setup, NULL, fn, NULL, check, teardown),                 \
	ROW(op, "rseqkit-ungated", setup, NULL, fn##_ungated, NULL, check, teardown), \
	ROWH(op, "rseqkit-fallback", setup, fn, check, teardown, 0, &helper_fallback)
/* The hand-written yardstick rows (tools/yardstick.h). */
#define HAND_ROW(op, name, setup, init, fn, check, teardown)                   \
	ROWF(op, name, setup, init, fn, NULL, check, teardown, IMPL_HAND, NULL)
/* The yardstick's rows of an op, after its rseqkit rows: the library's
 * structure in RSK_INDEX_CID mode (cid_setup with the rseqkit row's fn,
 * check and teardown), the hand-written limit in both modes (ys##_setup,
 * ys##_hand_cpu, ys##_hand_cid, hand_check), the hand-written twin with
 * the library's guarantees in both modes (ys##_hand_g_cpu,
 * ys##_hand_g_cid, the same check) and the thread-local twin (ys##_tl,
 * tl_fini, tl_check), all torn down by ys_teardown. */
#ifdef YS_HAVE_HAND
#define HAND_ROWS_(op, ys, check, teardown)                                    \
	HAND_ROW(op, "hand-written", ys##_setup, ys_thread_init, ys##_hand_cpu, check, teardown), \
	HAND_ROW(op, "hand-written-cid", ys##_setup, ys_thread_init, ys##_hand_cid, check, teardown), \
	HAND_ROW(op, "hand-guaranteed", ys##_setup, ys_thread_init, ys##_hand_g_cpu, check, \
		 teardown),                                                    \
	HAND_ROW(op, "hand-guaranteed-cid", ys##_setup, ys_thread_init, ys##_hand_g_cid, check, \
		 teardown),
#else
#define HAND_ROWS_(op, ys, check, teardown)
#endif
#define YS_ROWS(op, cid_setup, fn, check, teardown, ys, hand_check, ys_teardown, tl_fini, \
		tl_check)                                                      \
	ROW(op, "rseqkit-cid", cid_setup, NULL, fn, NULL, check, teardown),    \
	HAND_ROWS_(op, ys, hand_check, ys_teardown)                            \
	ROW(op, "thread-local", ys##_setup, NULL, ys##_tl, tl_fini, tl_check, ys_teardown)
/* A structure's setup in both index modes, from mk(nthreads, mode, ...):
 * name() (RSK_INDEX_CPU) and name_cid(). */
#define MODE_SETUPS(name, mk, ...)                                             \
	static void *name(int nthreads)                                        \
	{                                                                      \
		return mk(nthreads, RSK_INDEX_CPU, ##__VA_ARGS__);             \
	}                                                                      \
	static void *name##_cid(int nthreads)                                  \
	{                                                                      \
		return mk(nthreads, RSK_INDEX_CID, ##__VA_ARGS__);             \
	}

/* The loops the ungated rows take again (see above). */
#ifdef BENCH_UNGATED
#define BENCH_LOOP(name) name##_ungated
#else
#define BENCH_LOOP(name) name
#endif
#define BENCH_LOOP_DECL(name)                                                  \
	void name(void *sh, struct thr *t, unsigned n);                        \
	void name##_ungated(void *sh, struct thr *t, unsigned n)

struct row;
struct family {
	const char *name;  /* "counter" */
	const char *title; /* a few words for the plot and the progress line */
	const struct impl *impls;
	size_t nimpls;
	/* Optional: after the family's rows ran (the pool's memory run),
	 * for the ops selected; ms is a run's length.  Returns the failures. */
	int (*after)(const char *const *ops, int nops, unsigned ms);
	/* Optional: the family's own lines after its tables. */
	void (*summary)(const struct row *rows, int nrows);
	/* Optional: the family's JSON sections (",\n  \"key\": {...}"). */
	void (*json)(FILE *f, const struct row *rows, int nrows);
	/* Optional: the family's own thread counts, repetitions and run
	 * length, used where --threads, --reps, --ms and --quick do not say
	 * otherwise (the malloc family's 1, 2, 8, 64 threads). */
	const int *tcounts;
	int ntcounts;
	int reps;
	unsigned ms;
	/* Optional: the row the "x" column divides by (default
	 * "thread-local"). */
	const char *baseline;
};
#define FAMILY_IMPLS(t) (t), (sizeof(t) / sizeof((t)[0]))

/* A measured row. */
struct row {
	const struct impl *im;
	const struct family *fam;
	int threads;
	bool pinned;
	bool failed;
	int nsamples;
	struct sample *s;
	double ns_per_op, mops, spread_pct; /* medians and spread */
	double ns_min, ns_max;		    /* the repetitions' extremes */
	double p50, p99;		    /* medians of the sampled latencies, or 0 */
	double x_tl, x_alt;		    /* ratios; 0 when there is none */
};

struct config {
	int reps;
	unsigned ms, warm_ms;
	bool quick;
	int pin_mode; /* 0: only 1-thread runs, 1: all, -1: none */
};

/* The machine (main.c). */
extern int ncpus_possible;		       /* slots in per-CPU arrays */
extern int allowed_cpus[CPU_SETSIZE], nallowed; /* CPUs we may run on */

/* --fallback (main.c): only the rows of the fallback comparison run:
 * each op's rseqkit-fallback and rseqkit-mixed rows beside what users
 * write without rseq (fallback_twin()). */
extern bool bench_fallback_set;
/* report.c: that alternative for op - an atomic add on a sched_getcpu()
 * slot for the counters, glibc's malloc for the pool, else a mutex - and
 * whether im is one of the rows --fallback runs. */
const char *fallback_twin(const char *op);
bool fallback_row(const struct impl *im);

/* harness.c */
uint64_t now_ns(void);
void pin_self(int cpu);
int run_once(const struct impl *im, int nthreads, const int *pins, unsigned ms,
	     struct sample *out);
uint64_t ops_all(const struct thr *t, int n);
bool row_runs_at(const struct impl *im, int nt, int tmax);
int run_family(const struct family *fam, const char *const *ops, int nops, const int *tcounts,
	       int ntc, const struct config *cfg, struct row *rows, int *nrows);
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress_clear(void);

/* child.c */
extern const struct helper helper_fallback;
int helper_start(const struct helper *h, const char *argv0);
bool helper_ready(const struct helper *h);
const char *helper_missing(const struct helper *h);
void helpers_stop(void);
int run_row(const struct impl *im, int nthreads, const int *pins, unsigned ms,
	    struct sample *out);
int helper_serve(int rfd, int wfd);

/* main.c: every row of every family, in registry order. */
const struct impl *impl_at(size_t k);
size_t impl_count(void);
long impl_index(const struct impl *im);

/* report.c */
void machine_facts(void);
void print_banner(const struct config *cfg);
void print_family(const struct family *fam, struct row *rows, int nrows);
const struct row *find_row(const struct row *rows, int nrows, const char *op,
			   const char *name, int threads);
/* "  WHAT: target CMP T: Xx met" (or "not met"): reported, never asserted. */
void print_target(const char *what, double x, const char *cmp, double target);
int write_csv(const char *path, const struct row *rows, int nrows);
int write_json(const char *path, const struct row *rows, int nrows, const struct config *c,
	       const struct family *const *fams, int nfams);
int write_plot(const char *path, const struct family *fam, const struct row *rows, int nrows);
void json_str(FILE *f, const char *s);

/* Shared helpers of the families. */
static inline __attribute__((unused)) void die_on(int err, const char *what)
{
	if (err < 0) {
		fprintf(stderr, "rseqkit-bench: %s: %s\n", what, strerror(-err));
		exit(1);
	}
}

/* Zeroed, CACHE_LINE-aligned memory, or the program exits. */
void *bench_alloc(size_t bytes);
/* free() the n pointers given. */
void bench_free(int n, ...);

/* counter.c: a counter total against the operations done. */
int counter_expect(intptr_t got, struct thr *t, int n, char *err, size_t len);
/* The thread-local rows' sum (t[i].acc) against the operations done. */
int counter_check_tl(void *sh, struct thr *t, int n, char *err, size_t len);

/* A counter shared by all threads, its per-CPU slots, a mutex and a
 * pthread spinlock (counter-add, and the word the spinlock rows guard). */
struct pcpu_slot {
	intptr_t v;
} __attribute__((aligned(CACHE_LINE)));

struct counter_state {
	struct pcpu_slot *slots; /* ncpus_possible of them */
	struct pcpu_slot shared;
	struct pcpu_slot fallback; /* rseq unusable in a thread: atomics */
	pthread_mutex_t mutex __attribute__((aligned(CACHE_LINE)));
	pthread_spinlock_t spin __attribute__((aligned(CACHE_LINE)));
};
void counter_init(struct counter_state *s);
/* The shared counter under the mutex / the pthread spinlock. */
void counter_add_mutex(void *sh, struct thr *t, unsigned n);
void counter_add_spin(void *sh, struct thr *t, unsigned n);
void counter_fini(struct counter_state *s);
int counter_check_slots(void *sh, struct thr *t, int n, char *err, size_t len);
int counter_check_shared(void *sh, struct thr *t, int n, char *err, size_t len);

/* The families (registry: main.c). */
extern const struct family fam_cpu, fam_counter, fam_lock, fam_stack, fam_buffers, fam_pool,
	fam_fence, fam_workload, fam_malloc;

/* malloc.c: glibc's process (LD_PRELOAD emptied) and rseqkit-malloc's;
 * the memory child (the hidden option --malloc-memory THREADS MS). */
extern const struct helper helper_glibc, helper_rskmalloc;
int malloc_memory_child(int threads, unsigned ms);

/* Concurrency Kit's rows (rival-ck.c; header-only parts, so no library
 * to link), where libck-dev is installed.  -DBENCH_NO_CK: as without. */
#if defined(__has_include) && !defined(BENCH_NO_CK)
#if __has_include(<ck_stack.h>) && __has_include(<ck_ring.h>) && __has_include(<ck_spinlock.h>)
#define BENCH_HAVE_CK 1
void *ck_lock_setup(int nthreads);
void ck_lock_fn(void *sh, struct thr *t, unsigned n);
int ck_lock_check(void *sh, struct thr *t, int n, char *err, size_t len);
void ck_lock_teardown(void *sh);
void *ck_stack_setup(int nthreads);
void ck_stack_fn(void *sh, struct thr *t, unsigned n);
int ck_stack_check(void *sh, struct thr *t, int n, char *err, size_t len);
void ck_stack_teardown(void *sh);
void *ck_ring_setup(int nthreads);
void ck_ring_fn(void *sh, struct thr *t, unsigned n);
int ck_ring_check(void *sh, struct thr *t, int n, char *err, size_t len);
void ck_ring_teardown(void *sh);
#endif
#endif

/* The rivals' helpers (rival-*.c). */
extern const struct helper rival_jemalloc, rival_mimalloc, rival_tcmalloc;

/* The yardstick's shared pieces (cpu.c): whether mm_cid is written here,
 * and the per-thread check of the hand-written rows. */
extern int ys_cid_ok;
/* The start of a hand-written row's function fn##_cid (arguments sh, t,
 * n) where the kernel writes no mm_cid: the cpu_id row's code. */
#define YS_CPU_IF_NO_CID(fn)                                                   \
	do {                                                                   \
		if (!ys_cid_ok) {                                              \
			fn##_cpu(sh, t, n);                                    \
			return;                                                \
		}                                                              \
	} while (0)
#define YS_NO_OTHER(fn) (void)0
void ys_note_cid(void);
bool ys_rows_available(void);
void ys_thread_init(void *sh, struct thr *t);
int ys_aux_check(struct thr *t, int n, char *err, size_t len);

#endif /* RSEQKIT_BENCH_H */
