/* SPDX-License-Identifier: MIT */
/*
 * rseqkit-bench - every rseqkit operation beside what users would otherwise
 * use, and beside the physical limit (the same work on thread-local data).
 *
 *   rseqkit-bench [--quick] [--ops LIST] [--threads LIST] [--pin|--no-pin]
 *                 [--reps N] [--ms N] [--outdir DIR] [--csv FILE]
 *                 [--json FILE] [--no-plots] [--list] [--version] [-h]
 *
 * Method (doc/BENCHMARKS.md has the long form):
 *   - one row = (operation, implementation, thread count);
 *   - a run starts the threads, releases them together, lets them loop for
 *     a fixed time, and stops them with a flag read once per batch of
 *     BATCH operations: the clock is read twice per thread per run, never
 *     inside the measured loop;
 *   - every implementation of an operation gets one untimed warm-up run,
 *     then the repetitions go round-robin over the implementations, so that
 *     frequency and noise drift hit them all alike;
 *   - each row reports the median over its repetitions and the spread
 *     (max - min) / median;
 *   - after every run the result is checked (counter sums equal the
 *     operations done, values read are possible CPU numbers, ...): a row
 *     that fails its check is dropped with an error and the exit status
 *     becomes 1.
 *
 * Adding a row: write a function doing `n` operations (and, if needed,
 * setup/check/teardown) and add one line to impls[] below.  An operation
 * gets its own table as soon as one of its rows is in impls[].
 *
 * Exit status: 0 all rows passed their checks, 1 a check failed or an
 * output file could not be written, 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rseqkit/rseqkit.h>

/* Optional rivals from Concurrency Kit (header-only parts only, so no
 * library to link).  Built without them when libck-dev is absent. */
#if defined(__has_include) && !defined(BENCH_NO_CK) /* -DBENCH_NO_CK: build as without ck */
#if __has_include(<ck_stack.h>) && __has_include(<ck_ring.h>) && __has_include(<ck_spinlock.h>)
#define BENCH_HAVE_CK 1
#include <ck_ring.h>
#include <ck_spinlock.h>
#include <ck_stack.h>
#endif
#endif

#define BATCH_MAX (1u << 20) /* most operations between two reads of the stop flag */
#define BATCH_NS 50000u	     /* grow batches until one lasts this long */
#define CACHE_LINE 128	   /* a slot per CPU on its own pair of lines */
#define MAX_IMPLS 64
#define MAX_THREAD_COUNTS 16

/* ------------------------------------------------------------------ */
/* The harness                                                         */

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
	int pin_cpu;	    /* -1: not pinned */
	uint64_t ops;	    /* operations in the timed window */
	uint64_t ops_all;   /* every operation, warm-up touch included */
	uint64_t t0, t1;    /* the thread's timed window (CLOCK_MONOTONIC) */
	int64_t acc;	    /* per-thread result the check reads */
	intptr_t aux;	    /* per-thread value set by thread_init */
	uint64_t objs;	    /* IMPL_COUNTS: operations the fn completed in the window */
	void *priv;	    /* per-thread state of the implementation */
	pthread_t tid;
} __attribute__((aligned(CACHE_LINE)));

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
};

/* impl flags */
#define IMPL_FALLBACK 1u /* run in the child with RSEQKIT_DISABLE=1 */
#define IMPL_ONE_THREAD 2u /* only at 1 thread (fence latency) */
#define IMPL_MAX_THREADS 4u /* only at the largest thread count (workload) */
#define IMPL_PAIRS 8u /* only at 2 threads and the largest count if even (pool-pc) */
#define IMPL_COUNTS 16u /* the fn counts its completed operations in thr.objs */

struct run {
	const struct impl *im;
	void *shared;
	int nthreads;
	pthread_barrier_t start;
	int stop;
	struct thr *thr;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *worker(void *arg)
{
	struct thr *t = arg;
	struct run *r = t->run;
	const struct impl *im = r->im;

	if (t->pin_cpu >= 0)
		pin_self(t->pin_cpu);
	if (im->thread_init)
		im->thread_init(r->shared, t);
	/* First touch outside the window: lazy registration, TLS, page
	 * faults.  These operations count in the totals checked. */
	im->fn(r->shared, t, 16);
	t->ops_all += 16;
	t->objs = 0;
	pthread_barrier_wait(&r->start);

	/* Batches grow from 1 operation until one lasts BATCH_NS, so that a
	 * slow operation (a lock convoy) cannot run far past the stop and a
	 * fast one reads the clock once per BATCH_NS or more. */
	uint64_t n = 0, t0 = now_ns(), t1 = t0;
	unsigned batch = 1;
	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		im->fn(r->shared, t, batch);
		n += batch;
		if (batch < BATCH_MAX) {
			uint64_t now = now_ns();
			if (now - t1 < BATCH_NS)
				batch *= 2;
			t1 = now;
		}
	}
	t->t1 = now_ns();
	t->t0 = t0;
	t->ops = n;
	t->ops_all += n;
	if (im->thread_fini)
		im->thread_fini(r->shared, t);
	return NULL;
}

/* One run of one implementation; -1 (message printed) if its check fails,
 * 1 if no thread got to do an operation (a loaded machine, a short run:
 * no measurement, but nothing wrong either). */
static int run_once(const struct impl *im, int nthreads, const int *pins,
		    unsigned ms, struct sample *out)
{
	struct run r = {.im = im, .nthreads = nthreads};
	char err[256] = "";
	int rc = 0;

	r.thr = aligned_alloc(CACHE_LINE, sizeof(*r.thr) * (size_t)nthreads);
	if (!r.thr) {
		perror("rseqkit-bench: malloc");
		exit(1);
	}
	memset(r.thr, 0, sizeof(*r.thr) * (size_t)nthreads);
	r.shared = im->setup ? im->setup(nthreads) : NULL;
	pthread_barrier_init(&r.start, NULL, (unsigned)nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		r.thr[i].run = &r;
		r.thr[i].id = i;
		r.thr[i].pin_cpu = pins ? pins[i] : -1;
		if (pthread_create(&r.thr[i].tid, NULL, worker, &r.thr[i])) {
			fprintf(stderr, "rseqkit-bench: cannot create thread %d\n", i);
			exit(1);
		}
	}
	pthread_barrier_wait(&r.start);
	struct timespec d = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&d, &d) && errno == EINTR)
		;
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		pthread_join(r.thr[i].tid, NULL);
	/* Wall time: first thread in to last thread out (the main thread may
	 * wake late when the workers fill every CPU). */
	uint64_t ops = 0, ns = 0, first = UINT64_MAX, last = 0;
	for (int i = 0; i < nthreads; i++) {
		ops += (im->flags & IMPL_COUNTS) ? r.thr[i].objs : r.thr[i].ops;
		ns += r.thr[i].t1 - r.thr[i].t0;
		first = r.thr[i].t0 < first ? r.thr[i].t0 : first;
		last = r.thr[i].t1 > last ? r.thr[i].t1 : last;
	}
	uint64_t wall = last - first;
	if (im->check && im->check(r.shared, r.thr, nthreads, err, sizeof(err))) {
		fprintf(stderr, "rseqkit-bench: %s/%s, %d threads: CHECK FAILED: %s\n",
			im->op, im->name, nthreads, err);
		rc = -1;
	} else if (ops == 0) {
		rc = 1;
	}
	out->p50 = out->p99 = 0;
	if (rc == 0 && im->extra)
		im->extra(r.shared, out);
	if (im->teardown)
		im->teardown(r.shared);
	pthread_barrier_destroy(&r.start);
	free(r.thr);
	if (rc == 0) {
		out->ns_per_op = (double)ns / (double)ops;
		out->mops = (double)ops / ((double)wall / 1000.0);
	}
	return rc;
}

/* Total of every thread's operations, warm-up touches included. */
static uint64_t ops_all(const struct thr *t, int n)
{
	uint64_t s = 0;

	for (int i = 0; i < n; i++)
		s += t[i].ops_all;
	return s;
}

static int ncpus_possible; /* slots in per-CPU arrays */
static int allowed_cpus[CPU_SETSIZE], nallowed; /* CPUs we may run on */

/* ------------------------------------------------------------------ */
/* cpu-read: which CPU am I on?                                        */

static __thread int tl_cpu; /* thread-local stand-in: one TLS load */

static void cpu_read_init(void *sh, struct thr *t)
{
	(void)sh;
	int c = t->pin_cpu >= 0 ? t->pin_cpu : sched_getcpu();
	tl_cpu = c < 0 ? 0 : c;
	t->aux = tl_cpu;
}

static void cpu_read_rseqkit(void *sh, struct thr *t, unsigned n)
{
	int64_t acc = 0;

	(void)sh;
	for (unsigned i = 0; i < n; i++)
		acc += rsk_cpu();
	t->acc += acc;
}

static void cpu_read_tl(void *sh, struct thr *t, unsigned n)
{
	int64_t acc = 0;

	(void)sh;
	/* volatile: one load per operation, as rsk_cpu() does. */
	for (unsigned i = 0; i < n; i++)
		acc += *(volatile int *)&tl_cpu;
	t->acc += acc;
}

static void cpu_read_getcpu(void *sh, struct thr *t, unsigned n)
{
	int64_t acc = 0;

	(void)sh;
	for (unsigned i = 0; i < n; i++)
		acc += sched_getcpu();
	t->acc += acc;
}

/* The sum of the CPU numbers read: exact for a pinned thread (and for the
 * thread-local value), within [0, ops * (cpus - 1)] otherwise. */
static int cpu_read_check_common(struct thr *t, int n, bool exact_tl, char *err, size_t len)
{
	for (int i = 0; i < n; i++) {
		int64_t ops = (int64_t)t[i].ops_all;
		if (exact_tl || t[i].pin_cpu >= 0) {
			int64_t want = ops * (exact_tl ? t[i].aux : t[i].pin_cpu);
			if (t[i].acc != want) {
				snprintf(err, len, "thread %d: sum of CPUs read %jd, expected %jd", i,
					 (intmax_t)t[i].acc, (intmax_t)want);
				return -1;
			}
		} else if (t[i].acc < 0 || t[i].acc > ops * (ncpus_possible - 1)) {
			snprintf(err, len, "thread %d: sum of CPUs read %jd is outside [0, %jd]", i,
				 (intmax_t)t[i].acc, (intmax_t)(ops * (ncpus_possible - 1)));
			return -1;
		}
	}
	return 0;
}

static int cpu_read_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	(void)sh;
	return cpu_read_check_common(t, n, false, err, len);
}

static int cpu_read_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	(void)sh;
	return cpu_read_check_common(t, n, true, err, len);
}

/* ------------------------------------------------------------------ */
/* counter-add: count events from every thread                         */

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

static void counter_init(struct counter_state *s)
{
	size_t sz = sizeof(struct pcpu_slot) * (size_t)ncpus_possible;

	if (!(s->slots = aligned_alloc(CACHE_LINE, sz))) {
		perror("rseqkit-bench: malloc");
		exit(1);
	}
	memset(s->slots, 0, sz);
	s->shared.v = 0;
	s->fallback.v = 0;
	pthread_mutex_init(&s->mutex, NULL);
	pthread_spin_init(&s->spin, PTHREAD_PROCESS_PRIVATE);
}

static void counter_fini(struct counter_state *s)
{
	pthread_mutex_destroy(&s->mutex);
	pthread_spin_destroy(&s->spin);
	free(s->slots);
}

static void *counter_setup(int nthreads)
{
	struct counter_state *s = aligned_alloc(CACHE_LINE, sizeof(*s));

	(void)nthreads;
	if (!s) {
		perror("rseqkit-bench: malloc");
		exit(1);
	}
	counter_init(s);
	return s;
}

static void counter_teardown(void *sh)
{
	counter_fini(sh);
	free(sh);
}

/* The usage pattern of <rseqkit/ops.h>. */
static inline __attribute__((always_inline)) void
counter_inc_rseqkit(struct counter_state *s)
{
	for (;;) {
		int cpu = rsk_index(RSK_INDEX_CPU);
		if (__builtin_expect(cpu < 0, 0)) {
			__atomic_fetch_add(&s->fallback.v, 1, __ATOMIC_RELAXED);
			return;
		}
		if (__builtin_expect(rsk_add(RSK_INDEX_CPU, cpu, &s->slots[cpu].v, 1) == RSK_OK, 1))
			return;
	}
}

/* noinline: one self-contained loop to read in objdump -d. */
static __attribute__((noinline)) void counter_add_rseqkit(void *sh, struct thr *t, unsigned n)
{
	struct counter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++)
		counter_inc_rseqkit(s);
}

static __thread intptr_t tl_count;

static __attribute__((noinline)) void counter_add_tl(void *sh, struct thr *t, unsigned n)
{
	(void)sh;
	(void)t;
	for (unsigned i = 0; i < n; i++) {
		tl_count++;
		/* One add to memory per operation (the compiler may neither
		 * merge the increments nor keep the counter in a register),
		 * and nothing more: no fence, no volatile re-load. */
		__asm__ __volatile__("" ::: "memory");
	}
}

static void counter_tl_fini(void *sh, struct thr *t)
{
	(void)sh;
	t->acc = tl_count;
}

static void counter_add_atomic(void *sh, struct thr *t, unsigned n)
{
	struct counter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++)
		__atomic_fetch_add(&s->shared.v, 1, __ATOMIC_RELAXED);
}

static void counter_add_getcpu(void *sh, struct thr *t, unsigned n)
{
	struct counter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++) {
		int cpu = sched_getcpu();
		if (__builtin_expect((unsigned)cpu >= (unsigned)ncpus_possible, 0))
			cpu = 0;
		__atomic_fetch_add(&s->slots[cpu].v, 1, __ATOMIC_RELAXED);
	}
}

static void counter_add_mutex(void *sh, struct thr *t, unsigned n)
{
	struct counter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++) {
		pthread_mutex_lock(&s->mutex);
		s->shared.v++;
		pthread_mutex_unlock(&s->mutex);
	}
}

static void counter_add_spin(void *sh, struct thr *t, unsigned n)
{
	struct counter_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++) {
		pthread_spin_lock(&s->spin);
		s->shared.v++;
		pthread_spin_unlock(&s->spin);
	}
}

static int counter_expect(intptr_t got, struct thr *t, int n, char *err, size_t len)
{
	uint64_t want = ops_all(t, n);

	/* Modulo the word: a 32-bit counter may wrap in a long run. */
	if ((uintptr_t)got != (uintptr_t)want) {
		snprintf(err, len, "counter total %jd, operations done %ju (lost %jd)",
			 (intmax_t)got, (uintmax_t)want, (intmax_t)want - (intmax_t)got);
		return -1;
	}
	return 0;
}

static int counter_check_slots(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct counter_state *s = sh;
	intptr_t sum = s->fallback.v;

	for (int c = 0; c < ncpus_possible; c++)
		sum += s->slots[c].v;
	return counter_expect(sum, t, n, err, len);
}

static int counter_check_shared(void *sh, struct thr *t, int n, char *err, size_t len)
{
	return counter_expect(((struct counter_state *)sh)->shared.v, t, n, err, len);
}

static int counter_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	intptr_t sum = 0;

	(void)sh;
	for (int i = 0; i < n; i++)
		sum += t[i].acc;
	return counter_expect(sum, t, n, err, len);
}

/* ------------------------------------------------------------------ */
/* Data structures: one operation = a pair (lock+unlock, push+pop).
 *
 *   operation  rseqkit row                   rivals
 *   spinlock   rsk_spinlock lock+unlock      mutex, pthread-spin, ck (ck_spinlock)
 *   stack      rsk_stack push+pop            mutex, ck (ck_stack CAS mpmc)
 *   ptrbuf     rsk_ptrbuf push+pop           mutex (ck_ring mpmc: opt-in, see below)
 *   copybuf16  rsk_copybuf push+pop 16 B     mutex (memcpy under the lock)
 *   copybuf64  rsk_copybuf push+pop 64 B     mutex
 *   pool       rsk_pool alloc+free 64 B      malloc, mutex (free list); see
 *   pool-pc    producer/consumer through      "Object pool" below
 *              a ring, rsk_pool              malloc
 * Rows are compiled only when their header is there.
 */
#if defined(__has_include) && !defined(BENCH_CORE_ONLY) /* -DBENCH_CORE_ONLY: as without them */
#if __has_include(<rseqkit/spinlock.h>)
#include <rseqkit/spinlock.h>
#define BENCH_HAVE_RSK_SPINLOCK 1
#endif
#if __has_include(<rseqkit/stack.h>)
#include <rseqkit/stack.h>
#define BENCH_HAVE_RSK_STACK 1
#endif
#if __has_include(<rseqkit/ptrbuf.h>)
#include <rseqkit/ptrbuf.h>
#define BENCH_HAVE_RSK_PTRBUF 1
#endif
#if __has_include(<rseqkit/copybuf.h>)
#include <rseqkit/copybuf.h>
#define BENCH_HAVE_RSK_COPYBUF 1
#endif
#if __has_include(<rseqkit/counter.h>)
#include <rseqkit/counter.h>
#define BENCH_HAVE_RSK_COUNTER 1
#endif
#if __has_include(<rseqkit/pool.h>)
#include <rseqkit/pool.h>
#define BENCH_HAVE_RSK_POOL 1
#endif
#endif
#if defined(BENCH_HAVE_RSK_COUNTER) && defined(BENCH_HAVE_RSK_PTRBUF)
#define BENCH_HAVE_WORKLOAD_RSK 1
#endif

static __attribute__((unused)) void die_on(int err, const char *what)
{
	if (err < 0) {
		fprintf(stderr, "rseqkit-bench: %s: %s\n", what, strerror(-err));
		exit(1);
	}
}

#ifdef BENCH_HAVE_RSK_COUNTER
/* counter-add through the library's counter object. */
static void *rcounter_setup(int nthreads)
{
	struct rsk_counter *c;

	(void)nthreads;
	die_on(rsk_counter_create(&c, RSK_INDEX_CPU), "rsk_counter_create");
	return c;
}

static void rcounter_add(void *sh, struct thr *t, unsigned n)
{
	(void)t;
	for (unsigned i = 0; i < n; i++)
		rsk_counter_add(sh, 1);
}

static int rcounter_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	intptr_t sum = 0;

	rsk_counter_sum(sh, &sum);
	return counter_expect(sum, t, n, err, len);
}

static void rcounter_teardown(void *sh)
{
	rsk_counter_destroy(sh);
}
#endif

/* spinlock: lock, add 1 to a plain counter the lock guards, unlock.  The
 * counter total proves mutual exclusion. */
struct lock_state {
	struct counter_state c; /* shared counter, mutex, pthread spinlock */
#ifdef BENCH_HAVE_CK
	ck_spinlock_t ck __attribute__((aligned(CACHE_LINE)));
#endif
#ifdef BENCH_HAVE_RSK_SPINLOCK
	struct rsk_spinlock *rl;
#endif
};

static void *lock_setup(int nthreads)
{
	struct lock_state *s = aligned_alloc(CACHE_LINE, sizeof(*s));

	(void)nthreads;
	if (!s)
		exit(1);
	memset(s, 0, sizeof(*s));
	counter_init(&s->c);
#ifdef BENCH_HAVE_CK
	ck_spinlock_init(&s->ck);
#endif
#ifdef BENCH_HAVE_RSK_SPINLOCK
	die_on(rsk_spinlock_create(&s->rl, RSK_INDEX_CPU), "rsk_spinlock_create");
#endif
	return s;
}

static void lock_teardown(void *sh)
{
	struct lock_state *s = sh;

#ifdef BENCH_HAVE_RSK_SPINLOCK
	rsk_spinlock_destroy(s->rl);
#endif
	counter_fini(&s->c);
	free(s);
}

#ifdef BENCH_HAVE_RSK_SPINLOCK
static void lock_rseqkit(void *sh, struct thr *t, unsigned n)
{
	struct lock_state *s = sh;

	for (unsigned i = 0; i < n; i++) {
		int idx = rsk_spinlock_lock(s->rl);
		if (__builtin_expect(idx < 0 || idx >= ncpus_possible, 0)) {
			t->aux = idx < 0 ? idx : -ERANGE; /* the check reports it */
			return;
		}
		s->c.slots[idx].v++;
		rsk_spinlock_unlock(s->rl, idx);
	}
}
#endif

static void lock_mutex(void *sh, struct thr *t, unsigned n)
{
	counter_add_mutex(&((struct lock_state *)sh)->c, t, n);
}

static void lock_pspin(void *sh, struct thr *t, unsigned n)
{
	counter_add_spin(&((struct lock_state *)sh)->c, t, n);
}

#ifdef BENCH_HAVE_CK
static void lock_ck(void *sh, struct thr *t, unsigned n)
{
	struct lock_state *s = sh;

	(void)t;
	for (unsigned i = 0; i < n; i++) {
		ck_spinlock_lock(&s->ck);
		s->c.shared.v++;
		ck_spinlock_unlock(&s->ck);
	}
}
#endif

static __attribute__((unused)) int lock_check_slots(void *sh, struct thr *t, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: lock failed: %s", i, strerror((int)-t[i].aux));
			return -1;
		}
	return counter_check_slots(&((struct lock_state *)sh)->c, t, n, err, len);
}

static int lock_check_shared(void *sh, struct thr *t, int n, char *err, size_t len)
{
	return counter_check_shared(&((struct lock_state *)sh)->c, t, n, err, len);
}

/*
 * Transfers (stack, ptrbuf, copybuf): every thread starts with HAND items,
 * each with a unique id; one operation pushes an item from its hand (if
 * any) and pops one into it (if the structure gives one: the per-CPU parts
 * answer for the current CPU only, so after a migration a pop may find the
 * part empty and a thread may pop another thread's item).  The check:
 * every id is found exactly once in the hands plus what is left in the
 * structure, and no copied item came back torn.
 */
#define HAND 4
#define MAX_WORDS 8 /* 64-byte items */

struct hand {
	intptr_t id[HAND];
	int n;
} __attribute__((aligned(CACHE_LINE)));

struct snode { /* a stack node: every stack's link, and the id */
#ifdef BENCH_HAVE_RSK_STACK
	struct rsk_stack_node rn;
#endif
#ifdef BENCH_HAVE_CK
	ck_stack_entry_t ce;
#endif
	intptr_t id;
};

struct xfer_state {
	int nids;
	size_t words; /* copy rows: words per item; else 1 */
	struct hand *hands;
	struct snode *nodes;
	unsigned char *seen;
	int torn;
	/* mutex rival: a LIFO array of values under a lock */
	pthread_mutex_t mu __attribute__((aligned(CACHE_LINE)));
	intptr_t *mbuf;
	int mcount;
#ifdef BENCH_HAVE_RSK_STACK
	struct rsk_stack *rs;
#endif
#ifdef BENCH_HAVE_RSK_PTRBUF
	struct rsk_ptrbuf *rp;
#endif
#ifdef BENCH_HAVE_RSK_COPYBUF
	struct rsk_copybuf *rc;
#endif
#ifdef BENCH_HAVE_CK
	ck_stack_t cks __attribute__((aligned(CACHE_LINE)));
	ck_ring_t ring __attribute__((aligned(CACHE_LINE)));
	ck_ring_buffer_t *ringbuf;
#endif
};

static struct xfer_state *xfer_setup(int nthreads, size_t words)
{
	struct xfer_state *s = aligned_alloc(CACHE_LINE, sizeof(*s));
	int nids = nthreads * HAND;

	if (!s)
		exit(1);
	memset(s, 0, sizeof(*s));
	s->nids = nids;
	s->words = words;
	s->hands = aligned_alloc(CACHE_LINE, sizeof(*s->hands) * (size_t)nthreads);
	s->nodes = calloc((size_t)nids, sizeof(*s->nodes));
	s->seen = calloc((size_t)nids, 1);
	s->mbuf = calloc((size_t)nids * words, sizeof(intptr_t));
	if (!s->hands || !s->nodes || !s->seen || !s->mbuf)
		exit(1);
	for (int i = 0; i < nthreads; i++) {
		for (int k = 0; k < HAND; k++)
			s->hands[i].id[k] = i * HAND + k;
		s->hands[i].n = HAND;
	}
	for (int i = 0; i < nids; i++)
		s->nodes[i].id = i;
	pthread_mutex_init(&s->mu, NULL);
#ifdef BENCH_HAVE_CK
	unsigned rsz = 2;
	while (rsz <= (unsigned)nids)
		rsz *= 2;
	s->ringbuf = calloc(rsz, sizeof(*s->ringbuf));
	ck_ring_init(&s->ring, rsz);
	ck_stack_init(&s->cks);
#endif
	return s;
}

static void *xfer_setup1(int nthreads)
{
	return xfer_setup(nthreads, 1);
}
static void *xfer_setup2(int nthreads)
{
	return xfer_setup(nthreads, 2);
}
static void *xfer_setup8(int nthreads)
{
	return xfer_setup(nthreads, 8);
}

static void xfer_teardown(void *sh)
{
	struct xfer_state *s = sh;

#ifdef BENCH_HAVE_RSK_STACK
	if (s->rs)
		rsk_stack_destroy(s->rs);
#endif
#ifdef BENCH_HAVE_RSK_PTRBUF
	if (s->rp)
		rsk_ptrbuf_destroy(s->rp);
#endif
#ifdef BENCH_HAVE_RSK_COPYBUF
	if (s->rc)
		rsk_copybuf_destroy(s->rc);
#endif
#ifdef BENCH_HAVE_CK
	free(s->ringbuf);
#endif
	pthread_mutex_destroy(&s->mu);
	free(s->hands);
	free(s->nodes);
	free(s->seen);
	free(s->mbuf);
	free(s);
}

/* One push+pop against the hand; PUSH(id) and POP(&id) yield 0 on
 * success.  The items of copy rows are `words` copies of their id. */
#define XFER_LOOP(s, t, n, PUSH, POP)                                          \
	do {                                                                   \
		struct hand *h_ = &(s)->hands[(t)->id];                        \
		for (unsigned i_ = 0; i_ < (n); i_++) {                        \
			intptr_t id_ = 0;                                        \
			if (h_->n > 0) {                                       \
				id_ = h_->id[h_->n - 1];                       \
				if (PUSH(id_) == 0)                            \
					h_->n--;                               \
			}                                                      \
			if (POP(&id_) == 0)                                    \
				h_->id[h_->n++] = id_;                         \
		}                                                              \
	} while (0)

/* Mark an id found; 0 if it is valid and was not found before. */
static int xfer_seen(struct xfer_state *s, intptr_t id)
{
	if (id < 0 || id >= s->nids || s->seen[id]++)
		return -1;
	return 0;
}

static int xfer_finish(struct xfer_state *s, struct thr *t, int n, int dup, char *err, size_t len)
{
	for (int i = 0; i < n; i++) {
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: operation failed: %s", i,
				 strerror((int)-t[i].aux));
			return -1;
		}
		for (int k = 0; k < s->hands[i].n; k++)
			dup |= xfer_seen(s, s->hands[i].id[k]);
	}
	int missing = 0;
	for (int i = 0; i < s->nids; i++)
		missing += !s->seen[i];
	if (dup || missing || s->torn) {
		snprintf(err, len, "items: %d missing, %s duplicated or invalid, %d torn copies",
			 missing, dup ? "some" : "none", s->torn);
		return -1;
	}
	return 0;
}

/* The mutex rival of all three: a LIFO of `words`-word values. */
static inline int mx_push(struct xfer_state *s, const intptr_t *v)
{
	pthread_mutex_lock(&s->mu);
	memcpy(&s->mbuf[(size_t)s->mcount * s->words], v, s->words * sizeof(intptr_t));
	s->mcount++;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static inline int mx_pop(struct xfer_state *s, intptr_t *v)
{
	int r = -1;

	pthread_mutex_lock(&s->mu);
	if (s->mcount > 0) {
		s->mcount--;
		memcpy(v, &s->mbuf[(size_t)s->mcount * s->words], s->words * sizeof(intptr_t));
		r = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

static int mx_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	int dup = 0;

	for (int i = 0; i < s->mcount; i++) {
		intptr_t *v = &s->mbuf[(size_t)i * s->words];
		for (size_t w = 1; w < s->words; w++)
			s->torn += v[w] != v[0];
		dup |= xfer_seen(s, v[0]);
	}
	return xfer_finish(s, t, n, dup, err, len);
}

/* Fill an item with its id, check one that came back. */
#define ITEM_FILL(v, words, id)                                                \
	for (size_t w_ = 0; w_ < (words); w_++)                                \
	(v)[w_] = (id)
#define ITEM_TORN(v, words)                                                    \
	({                                                                     \
		int t_ = 0;                                                    \
		for (size_t w_ = 1; w_ < (words); w_++)                        \
			t_ |= (v)[w_] != (v)[0];                               \
		t_;                                                            \
	})

static void xfer_mutex_ptr(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
#define MX_PUSH1(id) mx_push(s, &(id))
#define MX_POP1(p) mx_pop(s, (p))
	XFER_LOOP(s, t, n, MX_PUSH1, MX_POP1);
}

#define COPY_FNS(W)                                                            \
	static void xfer_mutex_copy##W(void *sh, struct thr *t, unsigned n)    \
	{                                                                      \
		struct xfer_state *s = sh;                                     \
		intptr_t v_[W];                                                \
		int torn_ = 0;                                                 \
		XFER_LOOP(s, t, n, MXC_PUSH##W, MXC_POP##W);                   \
		if (torn_)                                                     \
			__atomic_fetch_add(&s->torn, torn_, __ATOMIC_RELAXED); \
	}
#define MXC_PUSH2(id) ({ ITEM_FILL(v_, 2, id); mx_push(s, v_); })
#define MXC_POP2(p) ({ int r_ = mx_pop(s, v_); torn_ |= ITEM_TORN(v_, 2); *(p) = v_[0]; r_; })
#define MXC_PUSH8(id) ({ ITEM_FILL(v_, 8, id); mx_push(s, v_); })
#define MXC_POP8(p) ({ int r_ = mx_pop(s, v_); torn_ |= ITEM_TORN(v_, 8); *(p) = v_[0]; r_; })
COPY_FNS(2)
COPY_FNS(8)

#ifdef BENCH_HAVE_RSK_STACK
static void *rstack_setup(int nthreads)
{
	struct xfer_state *s = xfer_setup(nthreads, 1);
	die_on(rsk_stack_create(&s->rs, RSK_INDEX_CPU), "rsk_stack_create");
	return s;
}

static inline int rstack_push(struct xfer_state *s, intptr_t id, struct thr *t)
{
	int r = rsk_stack_push(s->rs, &s->nodes[id].rn);
	if (__builtin_expect(r < 0, 0))
		t->aux = r;
	return r < 0 ? -1 : 0;
}

static inline int rstack_pop(struct xfer_state *s, intptr_t *id, struct thr *t)
{
	struct rsk_stack_node *nd;
	int r = rsk_stack_pop(s->rs, &nd);

	if (r < 0) {
		if (r != -ENOENT)
			t->aux = r;
		return -1;
	}
	*id = ((struct snode *)(void *)((char *)nd - offsetof(struct snode, rn)))->id;
	return 0;
}

static void xfer_rstack(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
#define RS_PUSH(id) rstack_push(s, id, t)
#define RS_POP(p) rstack_pop(s, p, t)
	XFER_LOOP(s, t, n, RS_PUSH, RS_POP);
}

static int rstack_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	int dup = 0;

	for (int c = 0; c < s->rs->nr; c++) {
		struct rsk_stack_node *nd;
		if (rsk_stack_pop_all_cpu(s->rs, c, &nd) < 0)
			continue;
		for (; nd; nd = nd->next)
			dup |= xfer_seen(s, ((struct snode *)(void *)((char *)nd -
						offsetof(struct snode, rn)))->id);
	}
	return xfer_finish(s, t, n, dup, err, len);
}
#endif

#ifdef BENCH_HAVE_RSK_PTRBUF
static void *rptr_setup(int nthreads)
{
	struct xfer_state *s = xfer_setup(nthreads, 1);
	die_on(rsk_ptrbuf_create(&s->rp, RSK_INDEX_CPU, s->nids, 0), "rsk_ptrbuf_create");
	return s;
}

static void xfer_rptr(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
#define RP_PUSH(id) ({ int r_ = rsk_ptrbuf_push(s->rp, &s->nodes[id]); \
	if (r_ < 0 && r_ != -ENOSPC) { t->aux = r_; } r_ < 0 ? -1 : 0; })
#define RP_POP(p) ({ void *o_; int r_ = rsk_ptrbuf_pop(s->rp, &o_); \
	if (r_ < 0 && r_ != -ENOENT) { t->aux = r_; } \
	if (r_ >= 0) { *(p) = ((struct snode *)o_)->id; } r_ < 0 ? -1 : 0; })
	XFER_LOOP(s, t, n, RP_PUSH, RP_POP);
}

static int rptr_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	int dup = 0;
	void *o;

	for (int c = 0; c < s->rp->nr; c++)
		while (rsk_ptrbuf_pop_cpu(s->rp, c, &o) == 0)
			dup |= xfer_seen(s, ((struct snode *)o)->id);
	return xfer_finish(s, t, n, dup, err, len);
}
#endif

#ifdef BENCH_HAVE_RSK_COPYBUF
static void *rcopy_setup(int nthreads, size_t words)
{
	struct xfer_state *s = xfer_setup(nthreads, words);
	die_on(rsk_copybuf_create(&s->rc, RSK_INDEX_CPU, words * sizeof(intptr_t), s->nids, 0),
	       "rsk_copybuf_create");
	return s;
}
static void *rcopy_setup2(int nthreads)
{
	return rcopy_setup(nthreads, 2);
}
static void *rcopy_setup8(int nthreads)
{
	return rcopy_setup(nthreads, 8);
}

#define RCOPY_FN(W)                                                            \
	static void xfer_rcopy##W(void *sh, struct thr *t, unsigned n)         \
	{                                                                      \
		struct xfer_state *s = sh;                                     \
		intptr_t v_[W];                                                \
		int torn_ = 0;                                                 \
		XFER_LOOP(s, t, n, RC_PUSH##W, RC_POP##W);                     \
		if (torn_)                                                     \
			__atomic_fetch_add(&s->torn, torn_, __ATOMIC_RELAXED); \
	}
#define RC_PUSH(W, id) ({ ITEM_FILL(v_, W, id); int r_ = rsk_copybuf_push(s->rc, v_); \
	if (r_ < 0 && r_ != -ENOSPC) { t->aux = r_; } r_ < 0 ? -1 : 0; })
#define RC_POP(W, p) ({ int r_ = rsk_copybuf_pop(s->rc, v_); \
	if (r_ < 0 && r_ != -ENOENT) { t->aux = r_; } \
	if (r_ >= 0) { torn_ |= ITEM_TORN(v_, W); *(p) = v_[0]; } r_ < 0 ? -1 : 0; })
#define RC_PUSH2(id) RC_PUSH(2, id)
#define RC_POP2(p) RC_POP(2, p)
#define RC_PUSH8(id) RC_PUSH(8, id)
#define RC_POP8(p) RC_POP(8, p)
RCOPY_FN(2)
RCOPY_FN(8)

static int rcopy_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	intptr_t v[MAX_WORDS];
	int dup = 0;

	for (int c = 0; c < s->rc->nr; c++)
		while (rsk_copybuf_pop_cpu(s->rc, c, v) == 0) {
			s->torn += ITEM_TORN(v, s->words);
			dup |= xfer_seen(s, v[0]);
		}
	return xfer_finish(s, t, n, dup, err, len);
}
#endif

#ifdef BENCH_HAVE_CK
#ifdef CK_F_STACK_POP_MPMC
static void xfer_ckstack(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
#define CKS_PUSH(id) (ck_stack_push_mpmc(&s->cks, &s->nodes[id].ce), 0)
#define CKS_POP(p) ({ ck_stack_entry_t *e_ = ck_stack_pop_mpmc(&s->cks); \
	if (e_) { *(p) = ((struct snode *)(void *)((char *)e_ - offsetof(struct snode, ce)))->id; } \
	e_ ? 0 : -1; })
	XFER_LOOP(s, t, n, CKS_PUSH, CKS_POP);
}

static int ckstack_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	ck_stack_entry_t *e;
	int dup = 0;

	while ((e = ck_stack_pop_upmc(&s->cks)) != NULL)
		dup |= xfer_seen(s, ((struct snode *)(void *)((char *)e -
					offsetof(struct snode, ce)))->id);
	return xfer_finish(s, t, n, dup, err, len);
}
#endif

static __attribute__((unused)) void xfer_ckring(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
#define CKR_PUSH(id) (ck_ring_enqueue_mpmc(&s->ring, s->ringbuf, &s->nodes[id]) ? 0 : -1)
#define CKR_POP(p) ({ void *o_; bool k_ = ck_ring_dequeue_mpmc(&s->ring, s->ringbuf, &o_); \
	if (k_) { *(p) = ((struct snode *)o_)->id; } k_ ? 0 : -1; })
	XFER_LOOP(s, t, n, CKR_PUSH, CKR_POP);
}

static __attribute__((unused)) int ckring_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	void *o;
	int dup = 0;

	while (ck_ring_dequeue_mpmc(&s->ring, s->ringbuf, &o))
		dup |= xfer_seen(s, ((struct snode *)o)->id);
	return xfer_finish(s, t, n, dup, err, len);
}
#endif

/* ------------------------------------------------------------------ */
/* Protocol cost: the structures' fast paths without the gate check.
 *
 * rseqkit-ungated rows are local copies of the library's inline fast
 * paths (counter.h, spinlock.h, stack.h, ptrbuf.h, copybuf.h) that call
 * the plain rsk_arch_<op>_at sections instead of rsk_arch_gated_<op>_at:
 * the same index load, the same loads and commit, no load of the part's
 * gate and no branch on it.  For the benchmark only: without the gate a
 * slow path elsewhere would not stop these sections, so on an abort they
 * simply retry (pure rseq, no give-up); where the thread cannot run a
 * section at all (no rseq in the process) they call the library's
 * operation, whose slow path is then the only path any thread takes.
 */
#if defined(BENCH_HAVE_RSK_COUNTER) && defined(BENCH_HAVE_RSK_STACK) &&                    \
	defined(BENCH_HAVE_RSK_PTRBUF) && defined(BENCH_HAVE_RSK_COPYBUF) &&              \
	defined(BENCH_HAVE_RSK_SPINLOCK)
#define BENCH_HAVE_UNGATED 1

static inline __attribute__((always_inline)) int ug_counter_add(struct rsk_counter *c,
								intptr_t count)
{
	for (;;) {
		uint32_t idx;
		rsk_arch_area_t area;
		int ready = rsk_percpu_enter_(rsk_area_offset_(), c->index_offset_, c->fast_nr_,
						  &area, &idx);

		if (RSK_PERCPU_UNLIKELY(!ready))
			return rsk_counter_add(c, count);
		if (RSK_PERCPU_LIKELY(rsk_arch_add_at(area, c->index_offset_, (int)idx, &c->part[idx].count, count) ==
				      RSK_OK))
			return (int)idx;
		rsk_note_abort();
	}
}

static void ug_rcounter_add(void *sh, struct thr *t, unsigned n)
{
	(void)t;
	for (unsigned i = 0; i < n; i++)
		ug_counter_add(sh, 1);
}

static inline __attribute__((always_inline)) int ug_spinlock_lock(struct rsk_spinlock *l)
{
	unsigned round = 0;

	for (;;) {
		uint32_t idx;
		rsk_arch_area_t area;
		int ready = rsk_percpu_enter_(rsk_area_offset_(), l->index_offset_, l->fast_nr_,
						  &area, &idx);
		int ret;

		if (RSK_PERCPU_UNLIKELY(!ready))
			return rsk_spinlock_lock(l);
		ret = rsk_arch_cmpstore_at(area, l->index_offset_, (int)idx, &l->part[idx].locked, 0, 1);
		if (RSK_PERCPU_LIKELY(ret == RSK_OK)) {
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			return (int)idx;
		}
		if (ret == RSK_CMPFAIL)
			rsk_spinlock_wait_(l, idx, round++);
		else
			rsk_note_abort();
	}
}

static void ug_lock(void *sh, struct thr *t, unsigned n)
{
	struct lock_state *s = sh;

	for (unsigned i = 0; i < n; i++) {
		int idx = ug_spinlock_lock(s->rl);
		if (__builtin_expect(idx < 0 || idx >= ncpus_possible, 0)) {
			t->aux = idx < 0 ? idx : -ERANGE;
			return;
		}
		s->c.slots[idx].v++;
		rsk_spinlock_unlock(s->rl, idx);
	}
}

static inline __attribute__((always_inline)) int ug_stack_push(struct rsk_stack *s,
							       struct rsk_stack_node *node)
{
	for (;;) {
		uint32_t idx;
		rsk_arch_area_t area;
		int ready = rsk_percpu_enter_(rsk_area_offset_(), s->index_offset_, s->fast_nr_,
						  &area, &idx);
		intptr_t head;

		if (RSK_PERCPU_UNLIKELY(!ready))
			return rsk_stack_push(s, node);
		head = __atomic_load_n(&s->part[idx].head, __ATOMIC_RELAXED);
		node->next = (struct rsk_stack_node *)head;
		if (RSK_PERCPU_LIKELY(rsk_arch_cmpstore_release_at(area, s->index_offset_, (int)idx, &s->part[idx].head,
								     head, (intptr_t)node) == RSK_OK))
			return (int)idx;
		rsk_note_abort();
	}
}

static inline __attribute__((always_inline)) int ug_stack_pop(struct rsk_stack *s,
							      struct rsk_stack_node **out)
{
	for (;;) {
		uint32_t idx;
		rsk_arch_area_t area;
		int ready = rsk_percpu_enter_(rsk_area_offset_(), s->index_offset_, s->fast_nr_,
						  &area, &idx);
		intptr_t node;
		int ret;

		if (RSK_PERCPU_UNLIKELY(!ready))
			return rsk_stack_pop(s, out);
		ret = rsk_arch_pop_at(area, s->index_offset_, (int)idx, &s->part[idx].head, 0,
				       (intptr_t)offsetof(struct rsk_stack_node, next), &node);
		if (RSK_PERCPU_LIKELY(ret == RSK_OK)) {
			*out = (struct rsk_stack_node *)node;
			return (int)idx;
		}
		if (ret == RSK_CMPFAIL) {
			*out = NULL;
			return -ENOENT;
		}
		rsk_note_abort();
	}
}

static void ug_xfer_stack(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
#define UGS_PUSH(id) ({ int r_ = ug_stack_push(s->rs, &s->nodes[id].rn); \
	if (r_ < 0) { t->aux = r_; } r_ < 0 ? -1 : 0; })
#define UGS_POP(p) ({ struct rsk_stack_node *nd_; int r_ = ug_stack_pop(s->rs, &nd_); \
	if (r_ < 0 && r_ != -ENOENT) { t->aux = r_; } \
	if (r_ >= 0) { *(p) = ((struct snode *)(void *)((char *)nd_ - \
				offsetof(struct snode, rn)))->id; } r_ < 0 ? -1 : 0; })
	XFER_LOOP(s, t, n, UGS_PUSH, UGS_POP);
}

static inline __attribute__((always_inline)) int ug_ptrbuf_push(struct rsk_ptrbuf *b, void *ptr)
{
	for (;;) {
		uint32_t idx;
		rsk_arch_area_t area;
		int ready = rsk_percpu_enter_(rsk_area_offset_(), b->index_offset_, b->fast_nr_,
						  &area, &idx);
		struct rsk_ptrbuf_part *p;
		intptr_t count;

		if (RSK_PERCPU_UNLIKELY(!ready))
			return rsk_ptrbuf_push(b, ptr);
		p = rsk_ptrbuf_part_(b, idx);
		count = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
		if (RSK_PERCPU_UNLIKELY((uintptr_t)count >= (uintptr_t)b->capacity))
			return -ENOSPC;
		if (RSK_PERCPU_LIKELY(rsk_arch_cmpstorestore_at(area, b->index_offset_, (int)idx, &p->count, count,
								  &p->slot[count], (intptr_t)ptr,
								  count + 1) == RSK_OK))
			return (int)idx;
		rsk_note_abort();
	}
}

static inline __attribute__((always_inline)) int ug_ptrbuf_pop(struct rsk_ptrbuf *b, void **out)
{
	for (;;) {
		uint32_t idx;
		rsk_arch_area_t area;
		int ready = rsk_percpu_enter_(rsk_area_offset_(), b->index_offset_, b->fast_nr_,
						  &area, &idx);
		struct rsk_ptrbuf_part *p;
		intptr_t count, ptr;

		if (RSK_PERCPU_UNLIKELY(!ready))
			return rsk_ptrbuf_pop(b, out);
		p = rsk_ptrbuf_part_(b, idx);
		count = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
		if (RSK_PERCPU_UNLIKELY((uintptr_t)(count - 1) >= (uintptr_t)b->capacity)) {
			*out = NULL;
			return -ENOENT;
		}
		ptr = __atomic_load_n(&p->slot[count - 1], __ATOMIC_RELAXED);
		if (RSK_PERCPU_LIKELY(rsk_arch_cmpcmpstore_at(area, b->index_offset_, (int)idx, &p->count, count,
								&p->slot[count - 1], ptr,
								count - 1) == RSK_OK)) {
			*out = (void *)ptr;
			return (int)idx;
		}
		rsk_note_abort();
	}
}

static void ug_xfer_ptr(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
#define UGP_PUSH(id) ({ int r_ = ug_ptrbuf_push(s->rp, &s->nodes[id]); \
	if (r_ < 0 && r_ != -ENOSPC) { t->aux = r_; } r_ < 0 ? -1 : 0; })
#define UGP_POP(p) ({ void *o_; int r_ = ug_ptrbuf_pop(s->rp, &o_); \
	if (r_ < 0 && r_ != -ENOENT) { t->aux = r_; } \
	if (r_ >= 0) { *(p) = ((struct snode *)o_)->id; } r_ < 0 ? -1 : 0; })
	XFER_LOOP(s, t, n, UGP_PUSH, UGP_POP);
}

/* Items are word-aligned whole words here: the in-place case only. */
static inline __attribute__((always_inline)) int ug_copybuf_push(struct rsk_copybuf *b,
								 const intptr_t *src)
{
	for (;;) {
		uint32_t idx;
		rsk_arch_area_t area;
		int ready = rsk_percpu_enter_(rsk_area_offset_(), b->index_offset_, b->fast_nr_,
						  &area, &idx);
		struct rsk_copybuf_part *p;
		intptr_t count;

		if (RSK_PERCPU_UNLIKELY(!ready))
			return rsk_copybuf_push(b, src);
		p = rsk_copybuf_part_(b, idx);
		count = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
		if (RSK_PERCPU_UNLIKELY((uintptr_t)count >= (uintptr_t)b->capacity))
			return -ENOSPC;
		if (RSK_PERCPU_LIKELY(rsk_arch_cmpcopystore_at(area, b->index_offset_, (int)idx, &p->count, count,
								 &p->item[(size_t)count * b->words],
								 src, (intptr_t)b->words,
								 count + 1) == RSK_OK))
			return (int)idx;
		rsk_note_abort();
	}
}

static inline __attribute__((always_inline)) int ug_copybuf_pop(struct rsk_copybuf *b,
								intptr_t *dst)
{
	for (;;) {
		uint32_t idx;
		rsk_arch_area_t area;
		int ready = rsk_percpu_enter_(rsk_area_offset_(), b->index_offset_, b->fast_nr_,
						  &area, &idx);
		struct rsk_copybuf_part *p;
		intptr_t count;

		if (RSK_PERCPU_UNLIKELY(!ready))
			return rsk_copybuf_pop(b, dst);
		p = rsk_copybuf_part_(b, idx);
		count = __atomic_load_n(&p->count, __ATOMIC_RELAXED);
		if (RSK_PERCPU_UNLIKELY((uintptr_t)(count - 1) >= (uintptr_t)b->capacity))
			return -ENOENT;
		if (RSK_PERCPU_LIKELY(rsk_arch_cmpcopystore_at(area, b->index_offset_, (int)idx, &p->count, count, dst,
					      &p->item[(size_t)(count - 1) * b->words],
					      (intptr_t)b->words, count - 1) == RSK_OK))
			return (int)idx;
		rsk_note_abort();
	}
}

#define UG_COPY_FN(W)                                                          \
	static void ug_xfer_copy##W(void *sh, struct thr *t, unsigned n)       \
	{                                                                      \
		struct xfer_state *s = sh;                                     \
		intptr_t v_[W];                                                \
		int torn_ = 0;                                                 \
		XFER_LOOP(s, t, n, UGC_PUSH##W, UGC_POP##W);                   \
		if (torn_)                                                     \
			__atomic_fetch_add(&s->torn, torn_, __ATOMIC_RELAXED); \
	}
#define UGC_PUSH(W, id) ({ ITEM_FILL(v_, W, id); int r_ = ug_copybuf_push(s->rc, v_); \
	if (r_ < 0 && r_ != -ENOSPC) { t->aux = r_; } r_ < 0 ? -1 : 0; })
#define UGC_POP(W, p) ({ int r_ = ug_copybuf_pop(s->rc, v_); \
	if (r_ < 0 && r_ != -ENOENT) { t->aux = r_; } \
	if (r_ >= 0) { torn_ |= ITEM_TORN(v_, W); *(p) = v_[0]; } r_ < 0 ? -1 : 0; })
#define UGC_PUSH2(id) UGC_PUSH(2, id)
#define UGC_POP2(p) UGC_POP(2, p)
#define UGC_PUSH8(id) UGC_PUSH(8, id)
#define UGC_POP8(p) UGC_POP(8, p)
UG_COPY_FN(2)
UG_COPY_FN(8)
#endif /* BENCH_HAVE_UNGATED */

/* ------------------------------------------------------------------ */
/* Fence latency: rsk_fence_cpu() of another CPU, rsk_fence_all().
 *
 * One measured thread (pinned, as every 1-thread row) calls the fence in
 * its loop; meanwhile one busy thread per other allowed CPU (pinned there)
 * runs rsk_counter_add() sections without pause, so the fence has real
 * sections to restart.  The check: the busy threads' counter equals the
 * adds they did (a fence restarts sections, it never loses one), and
 * every fence returned 0.
 */
#ifdef BENCH_HAVE_RSK_COUNTER
struct fence_state;

struct fence_busy_arg {
	struct fence_state *s;
	int cpu;
};

struct fence_state {
	struct rsk_counter *c;
	int target; /* the CPU fence-cpu fences */
	int nbusy;
	int stop;
	pthread_t busy[CPU_SETSIZE];
	struct fence_busy_arg arg[CPU_SETSIZE];
	uint64_t busy_ops; /* summed at join */
	pthread_barrier_t ready;
};

static void *fence_busy(void *p)
{
	struct fence_busy_arg *a = p;
	struct fence_state *s = a->s;
	uint64_t n = 0;

	pin_self(a->cpu);
	pthread_barrier_wait(&s->ready);
	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		for (int k = 0; k < 64; k++)
			rsk_counter_add(s->c, 1);
		n += 64;
	}
	__atomic_fetch_add(&s->busy_ops, n, __ATOMIC_RELAXED);
	return NULL;
}

static void *fence_setup(int nthreads)
{
	struct fence_state *s = calloc(1, sizeof(*s));

	(void)nthreads;
	if (!s)
		exit(1);
	die_on(rsk_counter_create(&s->c, RSK_INDEX_CPU), "rsk_counter_create");
	/* The measured thread runs on allowed_cpus[0] (1-thread rows are
	 * pinned there); the busy threads on every other allowed CPU. */
	s->target = nallowed > 1 ? allowed_cpus[1] : allowed_cpus[0];
	s->nbusy = nallowed - 1;
	pthread_barrier_init(&s->ready, NULL, (unsigned)s->nbusy + 1);
	for (int i = 0; i < s->nbusy; i++) {
		s->arg[i].s = s;
		s->arg[i].cpu = allowed_cpus[i + 1];
		if (pthread_create(&s->busy[i], NULL, fence_busy, &s->arg[i])) {
			fprintf(stderr, "rseqkit-bench: cannot create a busy thread\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&s->ready);
	return s;
}

static void fence_stop(struct fence_state *s)
{
	if (__atomic_exchange_n(&s->stop, 1, __ATOMIC_RELAXED))
		return;
	for (int i = 0; i < s->nbusy; i++)
		pthread_join(s->busy[i], NULL);
}

static void fence_cpu_fn(void *sh, struct thr *t, unsigned n)
{
	struct fence_state *s = sh;

	for (unsigned i = 0; i < n; i++) {
		int r = rsk_fence_cpu(s->target);
		if (__builtin_expect(r < 0, 0))
			t->aux = r;
	}
}

static void fence_all_fn(void *sh, struct thr *t, unsigned n)
{
	(void)sh;
	for (unsigned i = 0; i < n; i++) {
		int r = rsk_fence_all();
		if (__builtin_expect(r < 0, 0))
			t->aux = r;
	}
}

static int fence_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct fence_state *s = sh;
	intptr_t sum = 0;

	fence_stop(s);
	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: fence failed: %s", i, strerror((int)-t[i].aux));
			return -1;
		}
	rsk_counter_sum(s->c, &sum);
	if ((uintptr_t)sum != (uintptr_t)s->busy_ops) {
		snprintf(err, len, "busy threads' counter %jd, adds done %ju", (intmax_t)sum,
			 (uintmax_t)s->busy_ops);
		return -1;
	}
	return 0;
}

static void fence_teardown(void *sh)
{
	struct fence_state *s = sh;

	fence_stop(s);
	pthread_barrier_destroy(&s->ready);
	rsk_counter_destroy(s->c);
	free(s);
}
#endif

/* ------------------------------------------------------------------ */
/* workload: a real-world pattern, three designs of one program.
 *
 * Worker threads (by default 4 x CPUs) process events.  One event: take
 * an object (pop from the per-CPU buffer, else allocate from the
 * preallocated pool), process it (five multiply-adds over its payload,
 * a light touch: the rows compare the designs, not the work), add to WL_STATS statistics counters (events, bytes, objects
 * allocated from the pool, objects recycled from a buffer), give the
 * object back (push on the per-CPU buffer, else free it to the pool).  A
 * reader thread sums the statistics every millisecond.
 *
 *   rseqkit        rsk_counter x 4, rsk_ptrbuf (WL_CAP per CPU)
 *   atomic-getcpu  sched_getcpu()-indexed slots of 4 counters updated with
 *                  atomics; per-CPU free lists (WL_CAP) under per-CPU mutexes
 *   mutex          one mutex around the 4 shared counters and one shared
 *                  free list (taken twice per event: get, put back + stats)
 *
 * The pool (rseqkit, atomic-getcpu) is a mutex-protected array stack of
 * the preallocated objects: the path of an empty or full per-CPU part.
 *
 * Latency: every WL_EVERY-th event of each thread is timed on its own
 * (CLOCK_MONOTONIC before and after); p50 and p99 come from those samples
 * (merged over the threads, median over the repetitions).  A timed event
 * includes the time its thread spent preempted, which is the tail an
 * oversubscribed server sees.  The clock reads cost about 2 x 20 ns per
 * WL_EVERY events, well under 1 ns per event.
 *
 * The check: events counted by the statistics == events processed (every
 * thread's operations, warm-up touch included); allocated + recycled ==
 * events; bytes == the bytes the threads counted themselves; every object
 * is found exactly once in the pool and the buffers afterwards.
 */
#define WL_STATS 4
#define WL_CAP 32
#define WL_EVERY 64
#define WL_MAX_SAMPLES (1 << 16) /* per thread and run */

enum { WL_RSEQKIT, WL_GETCPU, WL_MUTEX };
enum { WS_EVENTS, WS_BYTES, WS_ALLOC, WS_RECYCLED };

struct wl_obj {
	intptr_t id;
	struct wl_obj *next; /* free lists */
	uint64_t uses;
	uint64_t data[5];
} __attribute__((aligned(64)));

struct wl_pcpu {
	intptr_t stat[WL_STATS];
	pthread_mutex_t mu;
	struct wl_obj *obj[WL_CAP];
	int n;
} __attribute__((aligned(CACHE_LINE)));

struct wl_thr {
	uint64_t n;
	uint32_t *lat;
	size_t nlat;
};

struct wl_state {
	int design;
	int nobj;
	struct wl_obj *objs;
	unsigned char *seen;
	/* the pool (and the mutex design's shared free list) */
	pthread_mutex_t pool_mu __attribute__((aligned(CACHE_LINE)));
	struct wl_obj **pool;
	int npool;
	intptr_t stat[WL_STATS]; /* mutex design, under pool_mu */
#ifdef BENCH_HAVE_WORKLOAD_RSK
	struct rsk_counter *rc[WL_STATS];
	struct rsk_ptrbuf *rb;
#endif
	struct wl_pcpu *pc;
	/* reader */
	pthread_t reader;
	int stop;
	uint64_t passes;
	intptr_t last_sum;
	/* latency samples of the run */
	pthread_mutex_t lat_mu;
	uint32_t *lat;
	size_t nlat, caplat;
};

static void wl_sum(struct wl_state *s, intptr_t out[WL_STATS])
{
	memset(out, 0, sizeof(intptr_t) * WL_STATS);
	switch (s->design) {
#ifdef BENCH_HAVE_WORKLOAD_RSK
	case WL_RSEQKIT:
		for (int k = 0; k < WL_STATS; k++)
			rsk_counter_sum(s->rc[k], &out[k]);
		break;
#endif
	case WL_GETCPU:
		for (int c = 0; c < ncpus_possible; c++)
			for (int k = 0; k < WL_STATS; k++)
				out[k] += __atomic_load_n(&s->pc[c].stat[k], __ATOMIC_RELAXED);
		break;
	default:
		pthread_mutex_lock(&s->pool_mu);
		memcpy(out, s->stat, sizeof(intptr_t) * WL_STATS);
		pthread_mutex_unlock(&s->pool_mu);
		break;
	}
}

static void *wl_reader(void *arg)
{
	struct wl_state *s = arg;
	intptr_t st[WL_STATS];

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		struct timespec d = {0, 1000000};
		nanosleep(&d, NULL);
		wl_sum(s, st);
		s->last_sum = st[WS_EVENTS];
		s->passes++;
	}
	return NULL;
}

static void *wl_setup(int nthreads, int design)
{
	struct wl_state *s = aligned_alloc(CACHE_LINE, sizeof(*s));

	if (!s)
		exit(1);
	memset(s, 0, sizeof(*s));
	s->design = design;
	/* Enough that neither the buffers nor the pool run dry: every part
	 * full, and one object in flight per thread, twice over. */
	s->nobj = ncpus_possible * WL_CAP + 2 * nthreads + 64;
	s->objs = aligned_alloc(64, sizeof(*s->objs) * (size_t)s->nobj);
	s->seen = calloc((size_t)s->nobj, 1);
	s->pool = calloc((size_t)s->nobj, sizeof(*s->pool));
	s->pc = aligned_alloc(CACHE_LINE, sizeof(*s->pc) * (size_t)ncpus_possible);
	if (!s->objs || !s->seen || !s->pool || !s->pc)
		exit(1);
	memset(s->objs, 0, sizeof(*s->objs) * (size_t)s->nobj);
	memset(s->pc, 0, sizeof(*s->pc) * (size_t)ncpus_possible);
	for (int c = 0; c < ncpus_possible; c++)
		pthread_mutex_init(&s->pc[c].mu, NULL);
	for (int i = 0; i < s->nobj; i++) {
		s->objs[i].id = i;
		s->pool[i] = &s->objs[i];
	}
	s->npool = s->nobj;
	pthread_mutex_init(&s->pool_mu, NULL);
	pthread_mutex_init(&s->lat_mu, NULL);
#ifdef BENCH_HAVE_WORKLOAD_RSK
	if (design == WL_RSEQKIT) {
		for (int k = 0; k < WL_STATS; k++)
			die_on(rsk_counter_create(&s->rc[k], RSK_INDEX_CPU), "rsk_counter_create");
		die_on(rsk_ptrbuf_create(&s->rb, RSK_INDEX_CPU, WL_CAP, 0), "rsk_ptrbuf_create");
	}
#endif
	if (pthread_create(&s->reader, NULL, wl_reader, s)) {
		fprintf(stderr, "rseqkit-bench: cannot create the reader thread\n");
		exit(1);
	}
	return s;
}

#ifdef BENCH_HAVE_WORKLOAD_RSK
static void *wl_setup_rsk(int nthreads)
{
	return wl_setup(nthreads, WL_RSEQKIT);
}
#endif
static void *wl_setup_getcpu(int nthreads)
{
	return wl_setup(nthreads, WL_GETCPU);
}
static void *wl_setup_mutex(int nthreads)
{
	return wl_setup(nthreads, WL_MUTEX);
}

static void wl_reader_stop(struct wl_state *s)
{
	if (__atomic_exchange_n(&s->stop, 1, __ATOMIC_RELAXED))
		return;
	pthread_join(s->reader, NULL);
}

static void wl_teardown(void *sh)
{
	struct wl_state *s = sh;

	wl_reader_stop(s);
#ifdef BENCH_HAVE_WORKLOAD_RSK
	if (s->design == WL_RSEQKIT) {
		for (int k = 0; k < WL_STATS; k++)
			rsk_counter_destroy(s->rc[k]);
		rsk_ptrbuf_destroy(s->rb);
	}
#endif
	for (int c = 0; c < ncpus_possible; c++)
		pthread_mutex_destroy(&s->pc[c].mu);
	pthread_mutex_destroy(&s->pool_mu);
	pthread_mutex_destroy(&s->lat_mu);
	free(s->objs);
	free(s->seen);
	free(s->pool);
	free(s->pc);
	free(s->lat);
	free(s);
}

static void wl_thread_init(void *sh, struct thr *t)
{
	struct wl_thr *w = calloc(1, sizeof(*w));

	(void)sh;
	if (!w || !(w->lat = malloc(sizeof(*w->lat) * WL_MAX_SAMPLES)))
		exit(1);
	w->n = 1; /* the first sample is event WL_EVERY, not the cold first one */
	t->priv = w;
}

static void wl_thread_fini(void *sh, struct thr *t)
{
	struct wl_state *s = sh;
	struct wl_thr *w = t->priv;

	pthread_mutex_lock(&s->lat_mu);
	if (s->nlat + w->nlat > s->caplat) {
		size_t cap = (s->nlat + w->nlat) * 2;
		uint32_t *p = realloc(s->lat, cap * sizeof(*p));
		if (!p)
			exit(1);
		s->lat = p;
		s->caplat = cap;
	}
	memcpy(s->lat + s->nlat, w->lat, w->nlat * sizeof(*w->lat));
	s->nlat += w->nlat;
	pthread_mutex_unlock(&s->lat_mu);
	free(w->lat);
	free(w);
	t->priv = NULL;
}

static inline struct wl_obj *wl_pool_get(struct wl_state *s)
{
	struct wl_obj *o = NULL;

	pthread_mutex_lock(&s->pool_mu);
	if (s->npool > 0)
		o = s->pool[--s->npool];
	pthread_mutex_unlock(&s->pool_mu);
	return o;
}

static inline void wl_pool_put(struct wl_state *s, struct wl_obj *o)
{
	pthread_mutex_lock(&s->pool_mu);
	s->pool[s->npool++] = o;
	pthread_mutex_unlock(&s->pool_mu);
}

/* The processing of one event: deterministic work on the object; returns
 * the event's size in bytes (a statistic). */
static inline intptr_t wl_touch(struct wl_obj *o, uint64_t seq)
{
	uint64_t x = seq ^ (uint64_t)o->id;

	o->uses++;
	for (int k = 0; k < 5; k++) {
		x = x * 6364136223846793005u + 1442695040888963407u;
		o->data[k] ^= x >> 17;
	}
	return 64 + (intptr_t)(x >> 60) * 8;
}

/* One event of each design; 0, or -1 when no object was to be had (the
 * check reports it; cannot happen with nobj as sized). */
static inline int wl_event(struct wl_state *s, struct thr *t, uint64_t seq)
{
	struct wl_obj *o = NULL;
	intptr_t bytes;
	int recycled = 0;

	switch (s->design) {
#ifdef BENCH_HAVE_WORKLOAD_RSK
	case WL_RSEQKIT: {
		void *p;
		if (rsk_ptrbuf_pop(s->rb, &p) >= 0) {
			o = p;
			recycled = 1;
		} else if (!(o = wl_pool_get(s))) {
			return -1;
		}
		bytes = wl_touch(o, seq);
		rsk_counter_add(s->rc[WS_EVENTS], 1);
		rsk_counter_add(s->rc[WS_BYTES], bytes);
		rsk_counter_add(s->rc[recycled ? WS_RECYCLED : WS_ALLOC], 1);
		if (rsk_ptrbuf_push(s->rb, o) < 0)
			wl_pool_put(s, o);
		break;
	}
#endif
	case WL_GETCPU: {
		int cpu = sched_getcpu();
		if ((unsigned)cpu >= (unsigned)ncpus_possible)
			cpu = 0;
		struct wl_pcpu *pc = &s->pc[cpu];
		pthread_mutex_lock(&pc->mu);
		if (pc->n > 0) {
			o = pc->obj[--pc->n];
			recycled = 1;
		}
		pthread_mutex_unlock(&pc->mu);
		if (!o && !(o = wl_pool_get(s)))
			return -1;
		bytes = wl_touch(o, seq);
		cpu = sched_getcpu();
		if ((unsigned)cpu >= (unsigned)ncpus_possible)
			cpu = 0;
		pc = &s->pc[cpu];
		__atomic_fetch_add(&pc->stat[WS_EVENTS], 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&pc->stat[WS_BYTES], bytes, __ATOMIC_RELAXED);
		__atomic_fetch_add(&pc->stat[recycled ? WS_RECYCLED : WS_ALLOC], 1,
				   __ATOMIC_RELAXED);
		pthread_mutex_lock(&pc->mu);
		if (pc->n < WL_CAP) {
			pc->obj[pc->n++] = o;
			o = NULL;
		}
		pthread_mutex_unlock(&pc->mu);
		if (o)
			wl_pool_put(s, o);
		break;
	}
	default:
		/* One shared free list (the pool itself) and shared stats. */
		pthread_mutex_lock(&s->pool_mu);
		if (s->npool > 0)
			o = s->pool[--s->npool];
		pthread_mutex_unlock(&s->pool_mu);
		if (!o)
			return -1;
		bytes = wl_touch(o, seq);
		pthread_mutex_lock(&s->pool_mu);
		s->stat[WS_EVENTS]++;
		s->stat[WS_BYTES] += bytes;
		s->stat[WS_RECYCLED]++; /* every object comes from the one list */
		s->pool[s->npool++] = o;
		pthread_mutex_unlock(&s->pool_mu);
		break;
	}
	t->acc += bytes;
	return 0;
}

static void wl_fn(void *sh, struct thr *t, unsigned n)
{
	struct wl_state *s = sh;
	struct wl_thr *w = t->priv;
	uint64_t seq = w->n;

	for (unsigned i = 0; i < n; i++, seq++) {
		int r;
		if (__builtin_expect(seq % WL_EVERY == 0, 0) && w->nlat < WL_MAX_SAMPLES) {
			uint64_t a = now_ns();
			r = wl_event(s, t, seq);
			uint64_t d = now_ns() - a;
			w->lat[w->nlat++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		} else {
			r = wl_event(s, t, seq);
		}
		if (__builtin_expect(r < 0, 0))
			t->aux = -ENOMEM;
	}
	w->n = seq;
}

static int wl_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct wl_state *s = sh;
	intptr_t st[WL_STATS], bytes = 0;
	uint64_t events = ops_all(t, n);
	int dup = 0, missing = 0;

	wl_reader_stop(s);
	for (int i = 0; i < n; i++) {
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: no object to be had", i);
			return -1;
		}
		bytes += t[i].acc;
	}
	wl_sum(s, st);
	if ((uintptr_t)st[WS_EVENTS] != (uintptr_t)events ||
	    (uintptr_t)(st[WS_ALLOC] + st[WS_RECYCLED]) != (uintptr_t)events ||
	    st[WS_BYTES] != bytes) {
		snprintf(err, len,
			 "statistics: events %jd, allocated+recycled %jd, bytes %jd; processed "
			 "%ju events of %jd bytes",
			 (intmax_t)st[WS_EVENTS], (intmax_t)(st[WS_ALLOC] + st[WS_RECYCLED]),
			 (intmax_t)st[WS_BYTES], (uintmax_t)events, (intmax_t)bytes);
		return -1;
	}
#define WL_SEEN(o) (dup |= (o)->id < 0 || (o)->id >= s->nobj || s->seen[(o)->id]++)
	for (int i = 0; i < s->npool; i++)
		WL_SEEN(s->pool[i]);
	for (int c = 0; c < ncpus_possible; c++)
		for (int i = 0; i < s->pc[c].n; i++)
			WL_SEEN(s->pc[c].obj[i]);
#ifdef BENCH_HAVE_WORKLOAD_RSK
	if (s->design == WL_RSEQKIT) {
		void *p;
		for (int c = 0; c < s->rb->nr; c++)
			while (rsk_ptrbuf_pop_cpu(s->rb, c, &p) == 0)
				WL_SEEN((struct wl_obj *)p);
	}
#endif
	for (int i = 0; i < s->nobj; i++)
		missing += !s->seen[i];
	if (dup || missing) {
		snprintf(err, len, "objects: %d missing, %s duplicated or invalid", missing,
			 dup ? "some" : "none");
		return -1;
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void wl_extra(void *sh, struct sample *out)
{
	struct wl_state *s = sh;

	if (s->nlat == 0)
		return;
	qsort(s->lat, s->nlat, sizeof(*s->lat), cmp_u32);
	out->p50 = s->lat[(s->nlat - 1) / 2];
	out->p99 = s->lat[(size_t)((double)(s->nlat - 1) * 0.99)];
}

/* ------------------------------------------------------------------ */
/* Object pool: 64-byte objects.
 *
 *   pool     one operation = allocate an object, write a tag into its
 *            first and last words, read them back, free it (same thread).
 *            rseqkit: rsk_pool_alloc() + rsk_pool_free() (RSK_INDEX_CPU,
 *            cache capacity POOL_CAP); malloc: glibc malloc(64) + free();
 *            mutex: a free list under one pthread mutex, grown by chunks
 *            of POOL_CHUNK objects from malloc (never shrunk).
 *   pool-pc  threads in pairs (thread 2k produces, 2k+1 consumes), each
 *            pair joined by a single-producer single-consumer ring of
 *            PC_RING pointers (the same ring for every impl).  The
 *            producer allocates an object, writes its pair and sequence
 *            number into it and enqueues it; the consumer dequeues it,
 *            checks pair and sequence (FIFO: each is the next one) and
 *            frees it.  A full (empty) ring is waited for by spinning
 *            PC_SPIN times, then with sched_yield().  One operation = one
 *            object from allocation to free: ns/op is the time of all the
 *            threads (producers and consumers) per object consumed, Mops/s
 *            objects consumed per microsecond of wall time.
 *
 * The checks: every thread freed what it allocated (pool: allocations ==
 * frees == operations, per thread; pool-pc: per pair, allocated by the
 * producer == freed by the producer (the object in hand at the stop) +
 * freed by the consumer + left in the ring, freed in order by the check);
 * no tag or sequence number came back wrong; rsk_pool_stats() in_use == 0
 * at the end (rseqkit), the free list's count 0 (mutex).
 *
 * pool_memory_run(): the memory figures (below; doc/BENCHMARKS.md).
 */
#define POOL_OBJ 64
#define POOL_WORDS (POOL_OBJ / 8)
#define POOL_CAP 64
#define POOL_CHUNK 64
#define PC_RING 256
#define PC_SPIN 64

enum { PK_RSK, PK_MALLOC, PK_MUTEX };

struct pool_thr {
	uint64_t allocs, frees;
} __attribute__((aligned(CACHE_LINE)));

struct pc_ring {
	struct {
		size_t head; /* next slot to take; written by the consumer */
		size_t tail_seen; /* the consumer's copy of tail */
		uint64_t want;	  /* the sequence number expected next */
	} c __attribute__((aligned(CACHE_LINE)));
	struct {
		size_t tail; /* next slot to fill; written by the producer */
		size_t head_seen;
		uint64_t seq;
	} p __attribute__((aligned(CACHE_LINE)));
	uint64_t *slot[PC_RING] __attribute__((aligned(CACHE_LINE)));
};

struct pool_state {
	int kind;
	int nthreads;
	int bad; /* objects that came back with a wrong tag or sequence */
#ifdef BENCH_HAVE_RSK_POOL
	struct rsk_pool *rp;
#endif
	struct pool_thr *pt;
	struct pc_ring *rings; /* nthreads / 2, pool-pc only */
	/* the mutex rival */
	pthread_mutex_t mu __attribute__((aligned(CACHE_LINE)));
	void *mfree; /* free objects, linked through their first word */
	size_t m_in_use;
	void **chunks;
	size_t nchunks, capchunks;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

static void *pool_setup(int nthreads, int kind, bool pc)
{
	struct pool_state *s = aligned_alloc(CACHE_LINE, sizeof(*s));

	if (!s)
		exit(1);
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->nthreads = nthreads;
	s->pt = aligned_alloc(CACHE_LINE, sizeof(*s->pt) * (size_t)nthreads);
	if (!s->pt)
		exit(1);
	memset(s->pt, 0, sizeof(*s->pt) * (size_t)nthreads);
	if (pc) {
		size_t sz = sizeof(*s->rings) * (size_t)(nthreads / 2 > 0 ? nthreads / 2 : 1);
		if (!(s->rings = aligned_alloc(CACHE_LINE, sz)))
			exit(1);
		memset(s->rings, 0, sz);
	}
	pthread_mutex_init(&s->mu, NULL);
#ifdef BENCH_HAVE_RSK_POOL
	if (kind == PK_RSK) {
		struct rsk_pool_config cfg = {.size = POOL_OBJ, .cache_capacity = POOL_CAP,
					      .mode = RSK_INDEX_CPU};
		die_on(rsk_pool_create(&s->rp, &cfg), "rsk_pool_create");
	}
#endif
	return s;
}

#ifdef BENCH_HAVE_RSK_POOL
static void *pool_setup_rsk(int nthreads)
{
	return pool_setup(nthreads, PK_RSK, false);
}
static void *pc_setup_rsk(int nthreads)
{
	return pool_setup(nthreads, PK_RSK, true);
}
#endif
static void *pool_setup_malloc(int nthreads)
{
	return pool_setup(nthreads, PK_MALLOC, false);
}
static void *pool_setup_mutex(int nthreads)
{
	return pool_setup(nthreads, PK_MUTEX, false);
}
static void *pc_setup_malloc(int nthreads)
{
	return pool_setup(nthreads, PK_MALLOC, true);
}

/* The mutex rival: a free list, grown by a chunk when empty. */
static void *mxp_alloc(struct pool_state *s)
{
	void *o;

	pthread_mutex_lock(&s->mu);
	if (!s->mfree) {
		char *c = aligned_alloc(CACHE_LINE, (size_t)POOL_OBJ * POOL_CHUNK);
		if (!c || (s->nchunks == s->capchunks &&
			   !(s->chunks = realloc(s->chunks, sizeof(void *) *
						 (s->capchunks = s->capchunks * 2 + 16))))) {
			pthread_mutex_unlock(&s->mu);
			free(c);
			return NULL;
		}
		s->chunks[s->nchunks++] = c;
		for (int i = POOL_CHUNK - 1; i >= 0; i--) {
			*(void **)(c + (size_t)i * POOL_OBJ) = s->mfree;
			s->mfree = c + (size_t)i * POOL_OBJ;
		}
	}
	o = s->mfree;
	s->mfree = *(void **)o;
	s->m_in_use++;
	pthread_mutex_unlock(&s->mu);
	return o;
}

static void mxp_free(struct pool_state *s, void *o)
{
	pthread_mutex_lock(&s->mu);
	*(void **)o = s->mfree;
	s->mfree = o;
	s->m_in_use--;
	pthread_mutex_unlock(&s->mu);
}

/* kind is a constant in every caller: each impl gets its own loop. */
static inline __attribute__((always_inline)) uint64_t *po_alloc(struct pool_state *s, int kind)
{
	switch (kind) {
#ifdef BENCH_HAVE_RSK_POOL
	case PK_RSK:
		return rsk_pool_alloc(s->rp);
#endif
	case PK_MALLOC:
		return malloc(POOL_OBJ);
	default:
		return mxp_alloc(s);
	}
}

static inline __attribute__((always_inline)) int po_free(struct pool_state *s, int kind, void *o)
{
	switch (kind) {
#ifdef BENCH_HAVE_RSK_POOL
	case PK_RSK:
		return rsk_pool_free(s->rp, o);
#endif
	case PK_MALLOC:
		free(o);
		return 0;
	default:
		mxp_free(s, o);
		return 0;
	}
}

static inline __attribute__((always_inline)) void pool_pairs(struct pool_state *s, struct thr *t,
							     unsigned n, int kind)
{
	struct pool_thr *pt = &s->pt[t->id];
	uint64_t allocs = pt->allocs, frees = pt->frees;
	int bad = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t *o = po_alloc(s, kind);
		if (__builtin_expect(o == NULL, 0)) {
			t->aux = -ENOMEM;
			break;
		}
		allocs++;
		uint64_t tag = ((uint64_t)(t->id + 1) << 40) + allocs;
		o[0] = tag;
		o[POOL_WORDS - 1] = tag;
		/* The object escapes: the stores happen, the loads reload. */
		__asm__ __volatile__("" : : "r"(o) : "memory");
		bad |= o[0] != tag || o[POOL_WORDS - 1] != tag;
		int r = po_free(s, kind, o);
		if (__builtin_expect(r < 0, 0)) {
			t->aux = r;
			break;
		}
		frees++;
	}
	pt->allocs = allocs;
	pt->frees = frees;
	if (bad)
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
}

#ifdef BENCH_HAVE_RSK_POOL
static __attribute__((noinline)) void pool_fn_rsk(void *sh, struct thr *t, unsigned n)
{
	pool_pairs(sh, t, n, PK_RSK);
}
#endif
static __attribute__((noinline)) void pool_fn_malloc(void *sh, struct thr *t, unsigned n)
{
	pool_pairs(sh, t, n, PK_MALLOC);
}
static __attribute__((noinline)) void pool_fn_mutex(void *sh, struct thr *t, unsigned n)
{
	pool_pairs(sh, t, n, PK_MUTEX);
}

/* Room in the ring for slot `tail`: false if the run stopped first. */
static bool pc_wait_room(struct pc_ring *q, size_t tail, const int *stop)
{
	for (unsigned k = 0;; k++) {
		q->p.head_seen = __atomic_load_n(&q->c.head, __ATOMIC_ACQUIRE);
		if (tail - q->p.head_seen < PC_RING)
			return true;
		if (__atomic_load_n(stop, __ATOMIC_RELAXED))
			return false;
		if (k < PC_SPIN)
			cpu_relax();
		else
			sched_yield();
	}
}

/* An object at slot `head`: false if the run stopped first. */
static bool pc_wait_item(struct pc_ring *q, size_t head, const int *stop)
{
	for (unsigned k = 0;; k++) {
		q->c.tail_seen = __atomic_load_n(&q->p.tail, __ATOMIC_ACQUIRE);
		if (q->c.tail_seen != head)
			return true;
		if (__atomic_load_n(stop, __ATOMIC_RELAXED))
			return false;
		if (k < PC_SPIN)
			cpu_relax();
		else
			sched_yield();
	}
}

static inline int pc_bad(struct pc_ring *q, const uint64_t *o, int pair)
{
	return o[0] != q->c.want++ || o[1] != (uint64_t)pair || o[POOL_WORDS - 1] != o[0];
}

static inline __attribute__((always_inline)) void pc_objects(struct pool_state *s, struct thr *t,
							     unsigned n, int kind)
{
	int pair = t->id / 2;
	struct pc_ring *q = &s->rings[pair];
	struct pool_thr *pt = &s->pt[t->id];
	const int *stop = &t->run->stop;
	uint64_t done = 0;
	int bad = 0;

	if (t->id % 2 == 0) { /* producer */
		size_t tail = q->p.tail;
		for (unsigned i = 0; i < n; i++) {
			uint64_t *o = po_alloc(s, kind);
			if (__builtin_expect(o == NULL, 0)) {
				t->aux = -ENOMEM;
				break;
			}
			pt->allocs++;
			o[0] = o[POOL_WORDS - 1] = q->p.seq;
			o[1] = (uint64_t)pair;
			if (tail - q->p.head_seen >= PC_RING && !pc_wait_room(q, tail, stop)) {
				/* stopped with the object in hand */
				if (po_free(s, kind, o) == 0)
					pt->frees++;
				break;
			}
			q->p.seq++;
			q->slot[tail % PC_RING] = o;
			__atomic_store_n(&q->p.tail, ++tail, __ATOMIC_RELEASE);
		}
	} else { /* consumer */
		size_t head = q->c.head;
		for (unsigned i = 0; i < n; i++) {
			if (head == q->c.tail_seen && !pc_wait_item(q, head, stop))
				break;
			uint64_t *o = q->slot[head % PC_RING];
			bad |= pc_bad(q, o, pair);
			int r = po_free(s, kind, o);
			if (__builtin_expect(r < 0, 0)) {
				t->aux = r;
				break;
			}
			pt->frees++;
			done++;
			__atomic_store_n(&q->c.head, ++head, __ATOMIC_RELEASE);
		}
	}
	t->objs += done;
	if (bad)
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
}

#ifdef BENCH_HAVE_RSK_POOL
static __attribute__((noinline)) void pc_fn_rsk(void *sh, struct thr *t, unsigned n)
{
	pc_objects(sh, t, n, PK_RSK);
}
#endif
static __attribute__((noinline)) void pc_fn_malloc(void *sh, struct thr *t, unsigned n)
{
	pc_objects(sh, t, n, PK_MALLOC);
}

/* Free what is left in the rings, in order (checked); the count. */
static uint64_t pc_drain(struct pool_state *s, int pair)
{
	struct pc_ring *q = &s->rings[pair];
	uint64_t left = 0;

	while (q->c.head != q->p.tail) {
		uint64_t *o = q->slot[q->c.head % PC_RING];
		if (pc_bad(q, o, pair))
			s->bad++;
		if (po_free(s, s->kind, o) < 0)
			s->bad++;
		q->c.head++;
		left++;
	}
	return left;
}

static int pool_in_use_check(struct pool_state *s, char *err, size_t len)
{
	if (s->bad) {
		snprintf(err, len, "%d object(s) came back with a wrong tag or sequence number",
			 s->bad);
		return -1;
	}
#ifdef BENCH_HAVE_RSK_POOL
	if (s->kind == PK_RSK) {
		struct rsk_pool_stats st;
		rsk_pool_stats(s->rp, &st);
		if (st.in_use != 0) {
			snprintf(err, len, "rsk_pool_stats: in_use %zu at the end, expected 0",
				 st.in_use);
			return -1;
		}
	}
#endif
	if (s->kind == PK_MUTEX && s->m_in_use != 0) {
		snprintf(err, len, "free list: %zu objects in use at the end, expected 0",
			 s->m_in_use);
		return -1;
	}
	return 0;
}

static int pool_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct pool_state *s = sh;

	for (int i = 0; i < n; i++) {
		const struct pool_thr *pt = &s->pt[i];
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: %s failed: %s", i,
				 t[i].aux == -ENOMEM ? "alloc" : "free", strerror((int)-t[i].aux));
			return -1;
		}
		if (pt->allocs != pt->frees || pt->allocs != t[i].ops_all) {
			snprintf(err, len, "thread %d: allocated %ju, freed %ju, operations %ju", i,
				 (uintmax_t)pt->allocs, (uintmax_t)pt->frees,
				 (uintmax_t)t[i].ops_all);
			return -1;
		}
	}
	return pool_in_use_check(s, err, len);
}

static int pc_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct pool_state *s = sh;

	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: %s failed: %s", i,
				 t[i].aux == -ENOMEM ? "alloc" : "free", strerror((int)-t[i].aux));
			return -1;
		}
	for (int k = 0; k < n / 2; k++) {
		const struct pool_thr *p = &s->pt[2 * k], *c = &s->pt[2 * k + 1];
		uint64_t left = pc_drain(s, k);
		if (p->allocs != p->frees + c->frees + left || c->allocs != 0) {
			snprintf(err, len,
				 "pair %d: allocated %ju, freed %ju by the producer, %ju by the "
				 "consumer, %ju left in the ring",
				 k, (uintmax_t)p->allocs, (uintmax_t)p->frees, (uintmax_t)c->frees,
				 (uintmax_t)left);
			return -1;
		}
	}
	return pool_in_use_check(s, err, len);
}

static void pool_teardown(void *sh)
{
	struct pool_state *s = sh;

	if (s->rings)
		for (int k = 0; k < s->nthreads / 2; k++)
			pc_drain(s, k);
#ifdef BENCH_HAVE_RSK_POOL
	if (s->rp)
		rsk_pool_destroy(s->rp);
#endif
	for (size_t i = 0; i < s->nchunks; i++)
		free(s->chunks[i]);
	free(s->chunks);
	pthread_mutex_destroy(&s->mu);
	free(s->rings);
	free(s->pt);
	free(s);
}

/* Memory: `threads` threads (4 x CPUs) each allocate POOL_CAP objects
 * then free them, over and over for `ms` (--ms, at least 100); the main thread samples
 * rsk_pool_stats() every millisecond (the peak of cached objects), then
 * reads it once more after the threads are done, drains every cache and
 * trims.  A per-thread cache design of the same capacity would keep up to
 * threads x POOL_CAP objects; the pool keeps at most parts x POOL_CAP. */
struct pool_mem {
	bool valid;
	int threads, cpus;
	uint64_t ops;
	size_t caches, cached, cached_max, peak_cached, in_use, depot;
	size_t slabs, mapped, mapped_trimmed;
};
static struct pool_mem pmem;

#ifdef BENCH_HAVE_RSK_POOL
struct pm_thr {
	struct rsk_pool *p;
	const int *stop;
	pthread_barrier_t *start;
	uint64_t ops;
	int err;
	pthread_t tid;
} __attribute__((aligned(CACHE_LINE)));

static void *pm_thread(void *arg)
{
	struct pm_thr *a = arg;
	void *held[POOL_CAP];

	pthread_barrier_wait(a->start);
	while (!__atomic_load_n(a->stop, __ATOMIC_RELAXED) && !a->err) {
		int k;
		for (k = 0; k < POOL_CAP; k++) {
			if (!(held[k] = rsk_pool_alloc(a->p))) {
				a->err = errno ? errno : ENOMEM;
				break;
			}
			*(uint64_t *)held[k] = a->ops + (uint64_t)k;
		}
		for (int j = 0; j < k; j++)
			if (rsk_pool_free(a->p, held[j]) < 0)
				a->err = EINVAL;
		a->ops += (uint64_t)k;
	}
	return NULL;
}

static int pool_memory_run(int threads, unsigned ms)
{
	struct rsk_pool_config cfg = {.size = POOL_OBJ, .cache_capacity = POOL_CAP,
				      .mode = RSK_INDEX_CPU};
	struct rsk_pool *p;
	struct rsk_pool_stats st;
	struct pm_thr *a = aligned_alloc(CACHE_LINE, sizeof(*a) * (size_t)threads);
	pthread_barrier_t start;
	int stop = 0, err = 0;

	if (!a)
		exit(1);
	memset(a, 0, sizeof(*a) * (size_t)threads);
	memset(&pmem, 0, sizeof(pmem));
	die_on(rsk_pool_create(&p, &cfg), "rsk_pool_create");
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		a[i].p = p;
		a[i].stop = &stop;
		a[i].start = &start;
		if (pthread_create(&a[i].tid, NULL, pm_thread, &a[i])) {
			fprintf(stderr, "rseqkit-bench: cannot create thread %d\n", i);
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	uint64_t end = now_ns() + (uint64_t)ms * 1000000u;
	while (now_ns() < end) {
		struct timespec d = {0, 1000000};
		nanosleep(&d, NULL);
		rsk_pool_stats(p, &st);
		if (st.cached > pmem.peak_cached)
			pmem.peak_cached = st.cached;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < threads; i++) {
		pthread_join(a[i].tid, NULL);
		pmem.ops += a[i].ops;
		err = err ? err : a[i].err;
	}
	rsk_pool_stats(p, &st);
	pmem.threads = threads;
	pmem.cpus = nallowed;
	pmem.caches = st.caches;
	pmem.cached = st.cached;
	pmem.cached_max = st.cached_max;
	pmem.peak_cached = st.cached > pmem.peak_cached ? st.cached : pmem.peak_cached;
	pmem.in_use = st.in_use;
	pmem.depot = st.depot;
	pmem.slabs = st.slabs;
	pmem.mapped = st.bytes_mapped;
	if (rsk_pool_drain(p, -1) < 0 || rsk_pool_trim(p) < 0)
		err = err ? err : EINVAL;
	rsk_pool_stats(p, &st);
	pmem.mapped_trimmed = st.bytes_mapped;
	rsk_pool_destroy(p);
	pthread_barrier_destroy(&start);
	free(a);
	if (err || pmem.in_use != 0) {
		fprintf(stderr, "rseqkit-bench: pool memory run: %s%s\n",
			err ? strerror(err) : "", pmem.in_use ? " objects still in use" : "");
		return -1;
	}
	pmem.valid = true;
	return 0;
}
#endif

/* ------------------------------------------------------------------ */
/* The yardstick (issue 13): hand-written rows and thread-local twins.
 *
 * "hand-written" rows are the limit: the same operation written directly
 * on the kernel ABI for that one structure (tools/yardstick.h: x86-64
 * asm, fields addressed off %fs, one index mode per row - "-cid" rows
 * index by mm_cid - no gate, no bound check), on the same kind of parts
 * (128-byte aligned, the word at +0; buffers: count at +0, slots from
 * +16).  They keep the rows' checks (sums exact, every item found once)
 * at every thread count.  "rseqkit-cid" rows are the library's structure
 * created in RSK_INDEX_CID mode.  "thread-local" rows do the same work on
 * the thread's own data (a TLS list, buffer, lock word, 4 counters): the
 * physical limit.  counter-add4 adds 1 to 4 independent counters in turn
 * (ns per add): a one-counter loop is bound by the store-to-load chain of
 * its one slot and hides the per-op cost.  The summary after the tables
 * sets each rseqkit row beside its hand-written twin.
 */
#include "yardstick.h"

#define IMPL_HAND 32u /* needs glibc's rseq registration (tools/yardstick.h) */
#define YS_TL_CAP 255 /* thread-local buffers: items */

/* The hand-written rows run where glibc registered rseq. */
static bool ys_rows_available(void)
{
#ifdef YS_HAVE_HAND
	return ys_available();
#else
	return false;
#endif
}

#ifdef YS_HAVE_HAND
static int ys_cid_ok; /* mm_cid written by the kernel (else -cid rows index by cpu_id) */

static void ys_thread_init(void *sh, struct thr *t)
{
	(void)sh;
	if (!ys_thread_ok())
		t->aux = -ENOSYS; /* the check reports it; nothing is run */
}

static int ys_aux_check(struct thr *t, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: cannot run a section: %s", i,
				 strerror((int)-t[i].aux));
			return -1;
		}
	return 0;
}
#endif

static void *ys_alloc(size_t bytes)
{
	void *p = aligned_alloc(CACHE_LINE, (bytes + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE);

	if (!p) {
		perror("rseqkit-bench: malloc");
		exit(1);
	}
	memset(p, 0, bytes);
	return p;
}

/* n operations spread over 4 independent counters, in turn. */
#define YS_BY4(n, OP)                                                          \
	do {                                                                   \
		unsigned i_ = 0;                                               \
		for (; i_ + 4 <= (n); i_ += 4) {                               \
			OP(0);                                                 \
			OP(1);                                                 \
			OP(2);                                                 \
			OP(3);                                                 \
		}                                                              \
		for (; i_ < (n); i_++)                                         \
			OP(0);                                                 \
	} while (0)

/* ---- counter-add4 ---- */

struct ys_c4 {
	char *parts; /* 4 counters x ncpus_possible parts of 128 bytes */
	size_t span; /* bytes of one counter's parts */
#ifdef BENCH_HAVE_RSK_COUNTER
	struct rsk_counter *rc[4];
#endif
};

static void *ys_c4_setup(int nthreads)
{
	struct ys_c4 *s = ys_alloc(sizeof(*s));

	(void)nthreads;
	s->span = (size_t)ncpus_possible * CACHE_LINE;
	s->parts = ys_alloc(4 * s->span);
#ifdef YS_HAVE_HAND
	ys_cid_ok = ys_cid_available();
#endif
	return s;
}

static void ys_c4_teardown(void *sh)
{
	struct ys_c4 *s = sh;

#ifdef BENCH_HAVE_RSK_COUNTER
	for (int k = 0; k < 4; k++)
		if (s->rc[k])
			rsk_counter_destroy(s->rc[k]);
#endif
	free(s->parts);
	free(s);
}

#ifdef BENCH_HAVE_RSK_COUNTER
static void *ys_c4_setup_rsk(int nthreads, enum rsk_index_mode mode)
{
	struct ys_c4 *s = ys_c4_setup(nthreads);

	for (int k = 0; k < 4; k++)
		die_on(rsk_counter_create(&s->rc[k], mode), "rsk_counter_create");
	return s;
}
static void *ys_c4_setup_rsk_cpu(int nthreads)
{
	return ys_c4_setup_rsk(nthreads, RSK_INDEX_CPU);
}
static void *ys_c4_setup_rsk_cid(int nthreads)
{
	return ys_c4_setup_rsk(nthreads, RSK_INDEX_CID);
}

static __attribute__((noinline)) void ys_c4_rsk(void *sh, struct thr *t, unsigned n)
{
	struct ys_c4 *s = sh;
	struct rsk_counter *c0 = s->rc[0], *c1 = s->rc[1], *c2 = s->rc[2], *c3 = s->rc[3];

	(void)t;
	(void)c1, (void)c2, (void)c3;
#define YS_RSK_ADD(k) rsk_counter_add(c##k, 1)
	YS_BY4(n, YS_RSK_ADD);
}

static int ys_c4_check_rsk(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_c4 *s = sh;
	uintptr_t total = 0;

	for (int k = 0; k < 4; k++) {
		intptr_t sum = 0;
		rsk_counter_sum(s->rc[k], &sum);
		total += (uintptr_t)sum;
	}
	return counter_expect((intptr_t)total, t, n, err, len);
}
#endif

#ifdef YS_HAVE_HAND
#define YS_C4_FN(MODE, OTHER)                                                  \
	static __attribute__((noinline)) void ys_c4_hand_##MODE(void *sh, struct thr *t, \
								 unsigned n)   \
	{                                                                      \
		struct ys_c4 *s = sh;                                          \
		ptrdiff_t off = ys_offset();                                   \
		char *p0 = s->parts, *p1 = p0 + s->span, *p2 = p1 + s->span,   \
		     *p3 = p2 + s->span;                                       \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER;                                                         \
		(void)p1, (void)p2, (void)p3;                                  \
		YS_BY4(n, YS_HAND_ADD_##MODE);                                 \
	}
#define YS_HAND_ADD_cpu(k) ys_add_cpu(off, p##k, 1)
#define YS_HAND_ADD_cid(k) ys_add_cid(off, p##k, 1)
YS_C4_FN(cpu, (void)0)
YS_C4_FN(cid, if (!ys_cid_ok) {
	ys_c4_hand_cpu(sh, t, n);
	return;
})

static int ys_c4_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_c4 *s = sh;
	uintptr_t total = 0;

	if (ys_aux_check(t, n, err, len))
		return -1;
	for (size_t o = 0; o < 4 * s->span; o += CACHE_LINE)
		total += *(uintptr_t *)(void *)(s->parts + o);
	return counter_expect((intptr_t)total, t, n, err, len);
}
#endif

static __thread intptr_t ys_tl_c4[4];

static __attribute__((noinline)) void ys_c4_tl(void *sh, struct thr *t, unsigned n)
{
	(void)sh;
	(void)t;
	/* One add to memory per operation, as counter-add's thread-local row. */
#define YS_TL_ADD(k)                                                           \
	do {                                                                   \
		ys_tl_c4[k]++;                                                 \
		__asm__ __volatile__("" ::: "memory");                         \
	} while (0)
	YS_BY4(n, YS_TL_ADD);
}

static void ys_c4_tl_fini(void *sh, struct thr *t)
{
	(void)sh;
	t->acc = ys_tl_c4[0] + ys_tl_c4[1] + ys_tl_c4[2] + ys_tl_c4[3];
}

/* ---- spinlock ---- */

struct ys_lock {
	struct lock_state *ls; /* the guarded counters (ls->c.slots) */
	char *locks;	       /* ncpus_possible lock words, 128 bytes apart */
};

static void *ys_lock_setup(int nthreads)
{
	struct ys_lock *s = ys_alloc(sizeof(*s));

	s->ls = lock_setup(nthreads);
	s->locks = ys_alloc((size_t)ncpus_possible * CACHE_LINE);
#ifdef YS_HAVE_HAND
	ys_cid_ok = ys_cid_available();
#endif
	return s;
}

static void ys_lock_teardown(void *sh)
{
	struct ys_lock *s = sh;

	lock_teardown(s->ls);
	free(s->locks);
	free(s);
}

#ifdef BENCH_HAVE_RSK_SPINLOCK
static void *ys_rlock_setup_cid(int nthreads)
{
	struct lock_state *s = lock_setup(nthreads);

	rsk_spinlock_destroy(s->rl);
	die_on(rsk_spinlock_create(&s->rl, RSK_INDEX_CID), "rsk_spinlock_create");
	return s;
}
#endif

#ifdef YS_HAVE_HAND
#define YS_LOCK_FN(MODE, OTHER)                                                \
	static __attribute__((noinline)) void ys_lock_hand_##MODE(void *sh, struct thr *t, \
								   unsigned n) \
	{                                                                      \
		struct ys_lock *s = sh;                                        \
		ptrdiff_t off = ys_offset();                                   \
		char *locks = s->locks, *slots = (char *)s->ls->c.slots;       \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER;                                                         \
		for (unsigned i = 0; i < n; i++) {                             \
			uintptr_t o = ys_lock_##MODE(off, locks);              \
			(*(intptr_t *)(void *)(slots + o))++;                  \
			ys_unlock(locks, o);                                   \
		}                                                              \
	}
YS_LOCK_FN(cpu, (void)0)
YS_LOCK_FN(cid, if (!ys_cid_ok) {
	ys_lock_hand_cpu(sh, t, n);
	return;
})

static int ys_lock_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_lock *s = sh;

	if (ys_aux_check(t, n, err, len))
		return -1;
	for (int c = 0; c < ncpus_possible; c++)
		if (*(intptr_t *)(void *)(s->locks + (size_t)c * CACHE_LINE) != 0) {
			snprintf(err, len, "lock %d still held after the run", c);
			return -1;
		}
	return counter_check_slots(&s->ls->c, t, n, err, len);
}
#endif

/* The thread-local twin: a lock word only this thread takes. */
static __thread intptr_t ys_tl_lock, ys_tl_locked;

static __attribute__((noinline)) void ys_lock_tl(void *sh, struct thr *t, unsigned n)
{
	(void)sh;
	for (unsigned i = 0; i < n; i++) {
		if (__builtin_expect(__atomic_load_n(&ys_tl_lock, __ATOMIC_RELAXED) != 0, 0)) {
			t->aux = -EDEADLK;
			return;
		}
		__atomic_store_n(&ys_tl_lock, 1, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_ACQUIRE);
		ys_tl_locked++;
		__atomic_store_n(&ys_tl_lock, 0, __ATOMIC_RELEASE);
		__asm__ __volatile__("" ::: "memory");
	}
}

static void ys_lock_tl_fini(void *sh, struct thr *t)
{
	(void)sh;
	t->acc = ys_tl_locked;
}

static int ys_lock_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: its own lock was found held", i);
			return -1;
		}
	return counter_check_tl(sh, t, n, err, len);
}

/* ---- stack, ptrbuf, copybuf16, copybuf64 ---- */

struct ys_xfer {
	struct xfer_state *x; /* hands, ids, the seen map */
	char *parts;	      /* hand-written: ncpus_possible parts */
	size_t part_bytes;
	struct ys_node *nodes; /* one per id */
	int nthreads;
	/* thread-local rows: what each thread held at the end */
	struct ys_node **tl_head;
	intptr_t *tl_items; /* nthreads x YS_TL_CAP x words */
	int *tl_count;
};

static struct ys_xfer *ys_xfer_setup(int nthreads, size_t words, int shift)
{
	struct ys_xfer *s = ys_alloc(sizeof(*s));

	s->x = xfer_setup(nthreads, words);
	s->part_bytes = (size_t)1 << shift;
	s->parts = ys_alloc((size_t)ncpus_possible << shift);
	s->nodes = ys_alloc(sizeof(*s->nodes) * (size_t)s->x->nids);
	for (int i = 0; i < s->x->nids; i++)
		s->nodes[i].id = i;
	s->nthreads = nthreads;
	s->tl_head = ys_alloc(sizeof(*s->tl_head) * (size_t)nthreads);
	s->tl_items = ys_alloc(sizeof(intptr_t) * (size_t)nthreads * YS_TL_CAP * words);
	s->tl_count = ys_alloc(sizeof(int) * (size_t)nthreads);
#ifdef YS_HAVE_HAND
	ys_cid_ok = ys_cid_available();
#endif
	return s;
}

static void *ys_stack_setup(int nthreads)
{
	return ys_xfer_setup(nthreads, 1, 7);
}
static void *ys_ptr_setup(int nthreads)
{
#ifdef YS_HAVE_HAND
	return ys_xfer_setup(nthreads, 1, YS_PTR_SHIFT);
#else
	return ys_xfer_setup(nthreads, 1, 7);
#endif
}
static void *ys_copy2_setup(int nthreads)
{
#ifdef YS_HAVE_HAND
	return ys_xfer_setup(nthreads, 2, YS_C16_SHIFT);
#else
	return ys_xfer_setup(nthreads, 2, 7);
#endif
}
static void *ys_copy8_setup(int nthreads)
{
#ifdef YS_HAVE_HAND
	return ys_xfer_setup(nthreads, 8, YS_C64_SHIFT);
#else
	return ys_xfer_setup(nthreads, 8, 7);
#endif
}

static void ys_xfer_teardown(void *sh)
{
	struct ys_xfer *s = sh;

	xfer_teardown(s->x);
	free(s->parts);
	free(s->nodes);
	free(s->tl_head);
	free(s->tl_items);
	free(s->tl_count);
	free(s);
}

/* An id from a node pointer found in a structure; -1 if it is none. */
static intptr_t ys_node_id(struct ys_xfer *s, const void *p)
{
	const struct ys_node *nd = p;

	if (nd < s->nodes || nd >= s->nodes + s->x->nids)
		return -1;
	return nd->id;
}

/* The library's structures in RSK_INDEX_CID mode (fns and checks: the
 * rseqkit rows'). */
#ifdef BENCH_HAVE_RSK_STACK
static void *ys_rstack_setup_cid(int nthreads)
{
	struct xfer_state *s = xfer_setup(nthreads, 1);
	die_on(rsk_stack_create(&s->rs, RSK_INDEX_CID), "rsk_stack_create");
	return s;
}
#endif
#ifdef BENCH_HAVE_RSK_PTRBUF
static void *ys_rptr_setup_cid(int nthreads)
{
	struct xfer_state *s = xfer_setup(nthreads, 1);
	die_on(rsk_ptrbuf_create(&s->rp, RSK_INDEX_CID, s->nids, 0), "rsk_ptrbuf_create");
	return s;
}
#endif
#ifdef BENCH_HAVE_RSK_COPYBUF
static void *ys_rcopy_setup_cid(int nthreads, size_t words)
{
	struct xfer_state *s = xfer_setup(nthreads, words);
	die_on(rsk_copybuf_create(&s->rc, RSK_INDEX_CID, words * sizeof(intptr_t), s->nids, 0),
	       "rsk_copybuf_create");
	return s;
}
static void *ys_rcopy2_setup_cid(int nthreads)
{
	return ys_rcopy_setup_cid(nthreads, 2);
}
static void *ys_rcopy8_setup_cid(int nthreads)
{
	return ys_rcopy_setup_cid(nthreads, 8);
}
#endif

#ifdef YS_HAVE_HAND
/* Hand-written transfers, one function per structure and mode. */
#define YS_XFER_FNS(MODE, OTHER)                                               \
	static void ys_stack_hand_##MODE(void *sh, struct thr *t, unsigned n)  \
	{                                                                      \
		struct ys_xfer *s = sh;                                        \
		ptrdiff_t off = ys_offset();                                   \
		char *parts = s->parts;                                        \
		struct ys_node *nodes = s->nodes;                              \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER(ys_stack_hand);                                          \
		XFER_LOOP(s->x, t, n, YSS_PUSH_##MODE, YSS_POP_##MODE);        \
	}                                                                      \
	static void ys_ptr_hand_##MODE(void *sh, struct thr *t, unsigned n)    \
	{                                                                      \
		struct ys_xfer *s = sh;                                        \
		ptrdiff_t off = ys_offset();                                   \
		char *parts = s->parts;                                        \
		struct ys_node *nodes = s->nodes;                              \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER(ys_ptr_hand);                                            \
		XFER_LOOP(s->x, t, n, YSP_PUSH_##MODE, YSP_POP_##MODE);        \
	}                                                                      \
	YS_COPY_FN(MODE, OTHER, 2)                                             \
	YS_COPY_FN(MODE, OTHER, 8)
#define YS_COPY_FN(MODE, OTHER, W)                                             \
	static void ys_copy##W##_hand_##MODE(void *sh, struct thr *t, unsigned n) \
	{                                                                      \
		struct ys_xfer *s = sh;                                        \
		ptrdiff_t off = ys_offset();                                   \
		char *parts = s->parts;                                        \
		intptr_t v_[W];                                                \
		int torn_ = 0;                                                 \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER(ys_copy##W##_hand);                                      \
		XFER_LOOP(s->x, t, n, YSC_PUSH##W##_##MODE, YSC_POP##W##_##MODE); \
		if (torn_)                                                     \
			__atomic_fetch_add(&s->x->torn, torn_, __ATOMIC_RELAXED); \
	}
#define YSS_PUSH(MODE, id) (ys_push_##MODE(off, parts, &nodes[id]), 0)
#define YSS_POP(MODE, p) ({ struct ys_node *nd_ = ys_pop_##MODE(off, parts); \
	if (nd_) { *(p) = nd_->id; } nd_ ? 0 : -1; })
#define YSP_PUSH(MODE, id) ys_ppush_##MODE(off, parts, &nodes[id])
#define YSP_POP(MODE, p) ({ void *o_; int r_ = ys_ppop_##MODE(off, parts, &o_); \
	if (r_ == 0) { *(p) = ((struct ys_node *)o_)->id; } r_; })
#define YSC_PUSH(MODE, W, id) ({ ITEM_FILL(v_, W, id); ys_cpush##W##_##MODE(off, parts, v_); })
#define YSC_POP(MODE, W, p) ({ int r_ = ys_cpop##W##_##MODE(off, parts, v_); \
	if (r_ == 0) { torn_ |= ITEM_TORN(v_, W); *(p) = v_[0]; } r_; })
#define YSS_PUSH_cpu(id) YSS_PUSH(cpu, id)
#define YSS_POP_cpu(p) YSS_POP(cpu, p)
#define YSS_PUSH_cid(id) YSS_PUSH(cid, id)
#define YSS_POP_cid(p) YSS_POP(cid, p)
#define YSP_PUSH_cpu(id) YSP_PUSH(cpu, id)
#define YSP_POP_cpu(p) YSP_POP(cpu, p)
#define YSP_PUSH_cid(id) YSP_PUSH(cid, id)
#define YSP_POP_cid(p) YSP_POP(cid, p)
#define YSC_PUSH2_cpu(id) YSC_PUSH(cpu, 2, id)
#define YSC_POP2_cpu(p) YSC_POP(cpu, 2, p)
#define YSC_PUSH8_cpu(id) YSC_PUSH(cpu, 8, id)
#define YSC_POP8_cpu(p) YSC_POP(cpu, 8, p)
#define YSC_PUSH2_cid(id) YSC_PUSH(cid, 2, id)
#define YSC_POP2_cid(p) YSC_POP(cid, 2, p)
#define YSC_PUSH8_cid(id) YSC_PUSH(cid, 8, id)
#define YSC_POP8_cid(p) YSC_POP(cid, 8, p)
#define YS_NO_OTHER(fn) (void)0
/* -cid rows where the kernel writes no mm_cid: the cpu_id row's code. */
#define YS_CPU_IF_NO_CID(fn)                                                   \
	do {                                                                   \
		if (!ys_cid_ok) {                                              \
			fn##_cpu(sh, t, n);                                    \
			return;                                                \
		}                                                              \
	} while (0)
YS_XFER_FNS(cpu, YS_NO_OTHER)
YS_XFER_FNS(cid, YS_CPU_IF_NO_CID)

/* What is left in the hand-written parts, then the common finish. */
static int ys_stack_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_xfer *s = sh;
	int dup = 0;

	if (ys_aux_check(t, n, err, len))
		return -1;
	for (int c = 0; c < ncpus_possible; c++) {
		const struct ys_node *nd = *(struct ys_node **)(void *)(s->parts + c * s->part_bytes);
		for (int steps = 0; nd; nd = nd->next) {
			if (++steps > s->x->nids) {
				dup = 1; /* a cycle */
				break;
			}
			dup |= xfer_seen(s->x, ys_node_id(s, nd));
		}
	}
	return xfer_finish(s->x, t, n, dup, err, len);
}

static int ys_buf_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_xfer *s = sh;
	size_t words = s->x->words;
	intptr_t cap = (intptr_t)((s->part_bytes - 16) / (words * sizeof(intptr_t)));
	int dup = 0;

	if (ys_aux_check(t, n, err, len))
		return -1;
	if (words == 1)
		cap = YS_PTR_CAP;
	for (int c = 0; c < ncpus_possible; c++) {
		intptr_t *p = (intptr_t *)(void *)(s->parts + c * s->part_bytes);
		if (p[0] < 0 || p[0] > cap) {
			snprintf(err, len, "part %d: count %jd outside [0, %jd]", c, (intmax_t)p[0],
				 (intmax_t)cap);
			return -1;
		}
		for (intptr_t k = 0; k < p[0]; k++) {
			intptr_t *v = &p[2 + k * (intptr_t)words];
			if (words == 1) {
				dup |= xfer_seen(s->x, ys_node_id(s, (void *)v[0]));
			} else {
				s->x->torn += ITEM_TORN(v, words);
				dup |= xfer_seen(s->x, v[0]);
			}
		}
	}
	return xfer_finish(s->x, t, n, dup, err, len);
}
#endif /* YS_HAVE_HAND */

/* Thread-local twins: a TLS list, a TLS buffer of pointers or items.
 * The compiler barrier after each operation keeps it one operation on
 * memory, as the other thread-local rows. */
static __thread struct ys_node *ys_tl_head;
static __thread intptr_t ys_tl_buf[YS_TL_CAP * MAX_WORDS];
static __thread int ys_tl_n;

static void ys_stack_tl(void *sh, struct thr *t, unsigned n)
{
	struct ys_xfer *s = sh;
	struct ys_node *nodes = s->nodes;
#define YST_PUSH(id) ({ nodes[id].next = ys_tl_head; ys_tl_head = &nodes[id]; \
	__asm__ __volatile__("" ::: "memory"); 0; })
#define YST_POP(p) ({ struct ys_node *nd_ = ys_tl_head; \
	if (nd_) { ys_tl_head = nd_->next; *(p) = nd_->id; } \
	__asm__ __volatile__("" ::: "memory"); nd_ ? 0 : -1; })
	XFER_LOOP(s->x, t, n, YST_PUSH, YST_POP);
}

static void ys_ptr_tl(void *sh, struct thr *t, unsigned n)
{
	struct ys_xfer *s = sh;
	struct ys_node *nodes = s->nodes;
#define YSTP_PUSH(id) ({ int r_ = -1; if (ys_tl_n < YS_TL_CAP) { \
	ys_tl_buf[ys_tl_n++] = (intptr_t)&nodes[id]; r_ = 0; } \
	__asm__ __volatile__("" ::: "memory"); r_; })
#define YSTP_POP(p) ({ int r_ = -1; if (ys_tl_n > 0) { \
	*(p) = ((struct ys_node *)ys_tl_buf[--ys_tl_n])->id; r_ = 0; } \
	__asm__ __volatile__("" ::: "memory"); r_; })
	XFER_LOOP(s->x, t, n, YSTP_PUSH, YSTP_POP);
}

#define YS_TL_COPY_FN(W)                                                       \
	static void ys_copy##W##_tl(void *sh, struct thr *t, unsigned n)       \
	{                                                                      \
		struct ys_xfer *s = sh;                                        \
		intptr_t v_[W];                                                \
		int torn_ = 0;                                                 \
		XFER_LOOP(s->x, t, n, YSTC_PUSH##W, YSTC_POP##W);              \
		if (torn_)                                                     \
			__atomic_fetch_add(&s->x->torn, torn_, __ATOMIC_RELAXED); \
	}
#define YSTC_PUSH(W, id) ({ int r_ = -1; ITEM_FILL(v_, W, id); if (ys_tl_n < YS_TL_CAP) { \
	memcpy(&ys_tl_buf[ys_tl_n * (W)], v_, sizeof(v_)); ys_tl_n++; r_ = 0; } \
	__asm__ __volatile__("" ::: "memory"); r_; })
#define YSTC_POP(W, p) ({ int r_ = -1; if (ys_tl_n > 0) { \
	ys_tl_n--; memcpy(v_, &ys_tl_buf[ys_tl_n * (W)], sizeof(v_)); \
	torn_ |= ITEM_TORN(v_, W); *(p) = v_[0]; r_ = 0; } \
	__asm__ __volatile__("" ::: "memory"); r_; })
#define YSTC_PUSH2(id) YSTC_PUSH(2, id)
#define YSTC_POP2(p) YSTC_POP(2, p)
#define YSTC_PUSH8(id) YSTC_PUSH(8, id)
#define YSTC_POP8(p) YSTC_POP(8, p)
YS_TL_COPY_FN(2)
YS_TL_COPY_FN(8)

/* At the end of the window: what the thread holds, for the check. */
static void ys_xfer_tl_fini(void *sh, struct thr *t)
{
	struct ys_xfer *s = sh;
	size_t words = s->x->words;

	s->tl_head[t->id] = ys_tl_head;
	ys_tl_head = NULL;
	s->tl_count[t->id] = ys_tl_n;
	memcpy(&s->tl_items[(size_t)t->id * YS_TL_CAP * words], ys_tl_buf,
	       sizeof(intptr_t) * words * (size_t)ys_tl_n);
	ys_tl_n = 0;
}

static int ys_xfer_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_xfer *s = sh;
	size_t words = s->x->words;
	int dup = 0;

	for (int i = 0; i < n; i++) {
		int steps = 0;
		for (const struct ys_node *nd = s->tl_head[i]; nd; nd = nd->next) {
			if (++steps > s->x->nids) {
				dup = 1; /* a cycle */
				break;
			}
			dup |= xfer_seen(s->x, ys_node_id(s, nd));
		}
		intptr_t *items = &s->tl_items[(size_t)i * YS_TL_CAP * words];
		for (int k = 0; k < s->tl_count[i]; k++) {
			intptr_t *v = &items[(size_t)k * words];
			if (words == 1) {
				dup |= xfer_seen(s->x, ys_node_id(s, (void *)v[0]));
			} else {
				s->x->torn += ITEM_TORN(v, words);
				dup |= xfer_seen(s->x, v[0]);
			}
		}
	}
	return xfer_finish(s->x, t, n, dup, err, len);
}

/* ---- cpu-read, mm-cid-read ---- */

#ifdef YS_HAVE_HAND
static void ys_cpu_init(void *sh, struct thr *t)
{
	cpu_read_init(sh, t);
	if (!ys_thread_ok())
		t->aux = -ENOSYS;
}

static void ys_cpu_hand(void *sh, struct thr *t, unsigned n)
{
	ptrdiff_t off = ys_offset();
	int64_t acc = 0;

	(void)sh;
	if (t->aux < 0)
		return;
	for (unsigned i = 0; i < n; i++)
		acc += ys_read_cpu(off);
	t->acc += acc;
}

static int ys_cpu_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	return ys_aux_check(t, n, err, len) ? -1 : cpu_read_check(sh, t, n, err, len);
}

static void ys_cid_init(void *sh, struct thr *t)
{
	(void)sh;
	ys_cid_ok = ys_cid_available();
	if (!ys_thread_ok())
		t->aux = -ENOSYS;
}

static void ys_cid_hand(void *sh, struct thr *t, unsigned n)
{
	ptrdiff_t off = ys_offset();
	int64_t acc = 0;

	(void)sh;
	if (t->aux < 0)
		return;
	if (!ys_cid_ok) {
		ys_cpu_hand(sh, t, n);
		return;
	}
	for (unsigned i = 0; i < n; i++)
		acc += ys_read_cid(off);
	t->acc += acc;
}
#endif

static void ys_cid_rsk(void *sh, struct thr *t, unsigned n)
{
	int64_t acc = 0;

	(void)sh;
	for (unsigned i = 0; i < n; i++)
		acc += rsk_mm_cid();
	t->acc += acc;
}

static __thread int ys_tl_cid;

static void ys_cid_tl_init(void *sh, struct thr *t)
{
	(void)sh;
	ys_tl_cid = rsk_mm_cid();
	t->aux = ys_tl_cid < 0 ? 0 : ys_tl_cid;
	ys_tl_cid = (int)t->aux;
}

static void ys_cid_tl(void *sh, struct thr *t, unsigned n)
{
	int64_t acc = 0;

	(void)sh;
	for (unsigned i = 0; i < n; i++)
		acc += *(volatile int *)&ys_tl_cid;
	t->acc += acc;
}

/* Every value read is an index below the possible CPUs: the sum is in
 * [0, ops x (cpus - 1)]; the thread-local value exactly ops x it. */
static int ys_cid_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	(void)sh;
	for (int i = 0; i < n; i++) {
		int64_t ops = (int64_t)t[i].ops_all;
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: cannot run a section: %s", i,
				 strerror((int)-t[i].aux));
			return -1;
		}
		if (t[i].acc < 0 || t[i].acc > ops * (ncpus_possible - 1)) {
			snprintf(err, len, "thread %d: sum of mm_cids read %jd is outside [0, %jd]", i,
				 (intmax_t)t[i].acc, (intmax_t)(ops * (ncpus_possible - 1)));
			return -1;
		}
	}
	return 0;
}

static int ys_cid_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	(void)sh;
	for (int i = 0; i < n; i++)
		if (t[i].acc != (int64_t)t[i].ops_all * t[i].aux) {
			snprintf(err, len, "thread %d: sum %jd, expected %jd", i, (intmax_t)t[i].acc,
				 (intmax_t)((int64_t)t[i].ops_all * t[i].aux));
			return -1;
		}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The table                                                           */

/* One row: op, impl, setup, thread_init, fn, thread_fini, check, teardown;
 * ROWF adds the flags and the extra-figures hook. */
#define ROW(op, name, setup, init, fn, fini, check, teardown) \
	{op, name, setup, init, fn, fini, check, teardown, 0, NULL}
#define ROWF(op, name, setup, init, fn, fini, check, teardown, flags, extra) \
	{op, name, setup, init, fn, fini, check, teardown, flags, extra}
#define COUNTER(name, fn, check) \
	ROW("counter-add", name, counter_setup, NULL, fn, NULL, check, counter_teardown)

static const struct impl impls[] = {
	ROW("cpu-read", "rseqkit", NULL, cpu_read_init, cpu_read_rseqkit, NULL, cpu_read_check, NULL),
	ROW("cpu-read", "thread-local", NULL, cpu_read_init, cpu_read_tl, NULL, cpu_read_check_tl, NULL),
	ROW("cpu-read", "getcpu", NULL, cpu_read_init, cpu_read_getcpu, NULL, cpu_read_check, NULL),

	COUNTER("rseqkit", counter_add_rseqkit, counter_check_slots),
#ifdef BENCH_HAVE_RSK_COUNTER
	ROW("counter-add", "rseqkit-counter", rcounter_setup, NULL, rcounter_add, NULL, rcounter_check,
	    rcounter_teardown),
#endif
#ifdef BENCH_HAVE_UNGATED
	ROW("counter-add", "rseqkit-ungated", rcounter_setup, NULL, ug_rcounter_add, NULL,
	    rcounter_check, rcounter_teardown),
#endif
#ifdef BENCH_HAVE_RSK_COUNTER
	/* rsk_counter_add() in a child started with RSEQKIT_DISABLE=1 */
	ROWF("counter-add", "rseqkit-fallback", rcounter_setup, NULL, rcounter_add, NULL,
	     rcounter_check, rcounter_teardown, IMPL_FALLBACK, NULL),
#endif
	ROW("counter-add", "thread-local", counter_setup, NULL, counter_add_tl, counter_tl_fini,
	    counter_check_tl, counter_teardown),
	COUNTER("atomic-shared", counter_add_atomic, counter_check_shared),
	COUNTER("atomic-getcpu", counter_add_getcpu, counter_check_slots),
	COUNTER("mutex", counter_add_mutex, counter_check_shared),
	COUNTER("spinlock", counter_add_spin, counter_check_shared),

	/* Data structures (see the plan above); a new row is one line. */
#ifdef BENCH_HAVE_RSK_SPINLOCK
	ROW("spinlock", "rseqkit", lock_setup, NULL, lock_rseqkit, NULL, lock_check_slots, lock_teardown),
#endif
#ifdef BENCH_HAVE_UNGATED
	ROW("spinlock", "rseqkit-ungated", lock_setup, NULL, ug_lock, NULL, lock_check_slots,
	    lock_teardown),
#endif
#ifdef BENCH_HAVE_RSK_SPINLOCK
	ROWF("spinlock", "rseqkit-fallback", lock_setup, NULL, lock_rseqkit, NULL, lock_check_slots,
	     lock_teardown, IMPL_FALLBACK, NULL),
#endif
	ROW("spinlock", "mutex", lock_setup, NULL, lock_mutex, NULL, lock_check_shared, lock_teardown),
	ROW("spinlock", "pthread-spin", lock_setup, NULL, lock_pspin, NULL, lock_check_shared, lock_teardown),
#ifdef BENCH_HAVE_CK
	ROW("spinlock", "ck", lock_setup, NULL, lock_ck, NULL, lock_check_shared, lock_teardown),
#endif

#ifdef BENCH_HAVE_RSK_STACK
	ROW("stack", "rseqkit", rstack_setup, NULL, xfer_rstack, NULL, rstack_check, xfer_teardown),
#endif
#ifdef BENCH_HAVE_UNGATED
	ROW("stack", "rseqkit-ungated", rstack_setup, NULL, ug_xfer_stack, NULL, rstack_check,
	    xfer_teardown),
#endif
#ifdef BENCH_HAVE_RSK_STACK
	ROWF("stack", "rseqkit-fallback", rstack_setup, NULL, xfer_rstack, NULL, rstack_check,
	     xfer_teardown, IMPL_FALLBACK, NULL),
#endif
	ROW("stack", "mutex", xfer_setup1, NULL, xfer_mutex_ptr, NULL, mx_check, xfer_teardown),
#if defined(BENCH_HAVE_CK) && defined(CK_F_STACK_POP_MPMC)
	ROW("stack", "ck", xfer_setup1, NULL, xfer_ckstack, NULL, ckstack_check, xfer_teardown),
#endif

#ifdef BENCH_HAVE_RSK_PTRBUF
	ROW("ptrbuf", "rseqkit", rptr_setup, NULL, xfer_rptr, NULL, rptr_check, xfer_teardown),
#endif
#ifdef BENCH_HAVE_UNGATED
	ROW("ptrbuf", "rseqkit-ungated", rptr_setup, NULL, ug_xfer_ptr, NULL, rptr_check,
	    xfer_teardown),
#endif
#ifdef BENCH_HAVE_RSK_PTRBUF
	ROWF("ptrbuf", "rseqkit-fallback", rptr_setup, NULL, xfer_rptr, NULL, rptr_check,
	     xfer_teardown, IMPL_FALLBACK, NULL),
#endif
	ROW("ptrbuf", "mutex", xfer_setup1, NULL, xfer_mutex_ptr, NULL, mx_check, xfer_teardown),
#if defined(BENCH_HAVE_CK) && defined(BENCH_CK_RING)
	/* Opt-in (-DBENCH_CK_RING): with 8 threads on 2 busy CPUs, four
	 * threads were seen spinning for minutes in ck_ring_enqueue_mpmc()
	 * (waiting for p_tail to reach their reservation; libck 0.7.1). */
	ROW("ptrbuf", "ck", xfer_setup1, NULL, xfer_ckring, NULL, ckring_check, xfer_teardown),
#endif

#ifdef BENCH_HAVE_RSK_COPYBUF
	ROW("copybuf16", "rseqkit", rcopy_setup2, NULL, xfer_rcopy2, NULL, rcopy_check, xfer_teardown),
#endif
#ifdef BENCH_HAVE_UNGATED
	ROW("copybuf16", "rseqkit-ungated", rcopy_setup2, NULL, ug_xfer_copy2, NULL, rcopy_check,
	    xfer_teardown),
#endif
#ifdef BENCH_HAVE_RSK_COPYBUF
	ROWF("copybuf16", "rseqkit-fallback", rcopy_setup2, NULL, xfer_rcopy2, NULL, rcopy_check,
	     xfer_teardown, IMPL_FALLBACK, NULL),
#endif
	ROW("copybuf16", "mutex", xfer_setup2, NULL, xfer_mutex_copy2, NULL, mx_check, xfer_teardown),
#ifdef BENCH_HAVE_RSK_COPYBUF
	ROW("copybuf64", "rseqkit", rcopy_setup8, NULL, xfer_rcopy8, NULL, rcopy_check, xfer_teardown),
#endif
#ifdef BENCH_HAVE_UNGATED
	ROW("copybuf64", "rseqkit-ungated", rcopy_setup8, NULL, ug_xfer_copy8, NULL, rcopy_check,
	    xfer_teardown),
#endif
	ROW("copybuf64", "mutex", xfer_setup8, NULL, xfer_mutex_copy8, NULL, mx_check, xfer_teardown),

	/* Object pool: alloc+free pairs, and producer/consumer pairs of
	 * threads (at 2 threads and the largest count). */
#ifdef BENCH_HAVE_RSK_POOL
	ROW("pool", "rseqkit", pool_setup_rsk, NULL, pool_fn_rsk, NULL, pool_check, pool_teardown),
	ROWF("pool", "rseqkit-fallback", pool_setup_rsk, NULL, pool_fn_rsk, NULL, pool_check,
	     pool_teardown, IMPL_FALLBACK, NULL),
#endif
	ROW("pool", "malloc", pool_setup_malloc, NULL, pool_fn_malloc, NULL, pool_check, pool_teardown),
	ROW("pool", "mutex", pool_setup_mutex, NULL, pool_fn_mutex, NULL, pool_check, pool_teardown),
#ifdef BENCH_HAVE_RSK_POOL
	ROWF("pool-pc", "rseqkit", pc_setup_rsk, NULL, pc_fn_rsk, NULL, pc_check, pool_teardown,
	     IMPL_PAIRS | IMPL_COUNTS, NULL),
#endif
	ROWF("pool-pc", "malloc", pc_setup_malloc, NULL, pc_fn_malloc, NULL, pc_check, pool_teardown,
	     IMPL_PAIRS | IMPL_COUNTS, NULL),

#ifdef BENCH_HAVE_RSK_COUNTER
	/* Fence latency: 1 thread, busy threads on the other CPUs. */
	ROWF("fence-cpu", "rseqkit", fence_setup, NULL, fence_cpu_fn, NULL, fence_check,
	     fence_teardown, IMPL_ONE_THREAD, NULL),
	ROWF("fence-all", "rseqkit", fence_setup, NULL, fence_all_fn, NULL, fence_check,
	     fence_teardown, IMPL_ONE_THREAD, NULL),
#endif

	/* The workload: at the largest thread count (default 4 x CPUs). */
#ifdef BENCH_HAVE_WORKLOAD_RSK
	ROWF("workload", "rseqkit", wl_setup_rsk, wl_thread_init, wl_fn, wl_thread_fini, wl_check,
	     wl_teardown, IMPL_MAX_THREADS, wl_extra),
#endif
	ROWF("workload", "atomic-getcpu", wl_setup_getcpu, wl_thread_init, wl_fn, wl_thread_fini,
	     wl_check, wl_teardown, IMPL_MAX_THREADS, wl_extra),
	ROWF("workload", "mutex", wl_setup_mutex, wl_thread_init, wl_fn, wl_thread_fini, wl_check,
	     wl_teardown, IMPL_MAX_THREADS, wl_extra),

	/* The yardstick (issue 13): rseqkit in both index modes beside the
	 * hand-written limit (tools/yardstick.h) and the thread-local twin;
	 * summed up after the tables ("yardstick:"). */
#define YS_HAND(op, name, setup, init, fn, check, teardown) \
	ROWF(op, name, setup, init, fn, NULL, check, teardown, IMPL_HAND, NULL)
#ifdef YS_HAVE_HAND
	YS_HAND("cpu-read", "hand-written", NULL, ys_cpu_init, ys_cpu_hand, ys_cpu_check_hand, NULL),
#endif
	ROW("mm-cid-read", "rseqkit", NULL, NULL, ys_cid_rsk, NULL, ys_cid_check, NULL),
#ifdef YS_HAVE_HAND
	YS_HAND("mm-cid-read", "hand-written", NULL, ys_cid_init, ys_cid_hand, ys_cid_check, NULL),
#endif
	ROW("mm-cid-read", "thread-local", NULL, ys_cid_tl_init, ys_cid_tl, NULL, ys_cid_check_tl,
	    NULL),
#ifdef BENCH_HAVE_RSK_COUNTER
	ROW("counter-add4", "rseqkit", ys_c4_setup_rsk_cpu, NULL, ys_c4_rsk, NULL, ys_c4_check_rsk,
	    ys_c4_teardown),
	ROW("counter-add4", "rseqkit-cid", ys_c4_setup_rsk_cid, NULL, ys_c4_rsk, NULL,
	    ys_c4_check_rsk, ys_c4_teardown),
#endif
#ifdef YS_HAVE_HAND
	YS_HAND("counter-add4", "hand-written", ys_c4_setup, ys_thread_init, ys_c4_hand_cpu,
		ys_c4_check_hand, ys_c4_teardown),
	YS_HAND("counter-add4", "hand-written-cid", ys_c4_setup, ys_thread_init, ys_c4_hand_cid,
		ys_c4_check_hand, ys_c4_teardown),
#endif
	ROW("counter-add4", "thread-local", ys_c4_setup, NULL, ys_c4_tl, ys_c4_tl_fini,
	    counter_check_tl, ys_c4_teardown),
#ifdef BENCH_HAVE_RSK_SPINLOCK
	ROW("spinlock", "rseqkit-cid", ys_rlock_setup_cid, NULL, lock_rseqkit, NULL,
	    lock_check_slots, lock_teardown),
#endif
#ifdef YS_HAVE_HAND
	YS_HAND("spinlock", "hand-written", ys_lock_setup, ys_thread_init, ys_lock_hand_cpu,
		ys_lock_check_hand, ys_lock_teardown),
	YS_HAND("spinlock", "hand-written-cid", ys_lock_setup, ys_thread_init, ys_lock_hand_cid,
		ys_lock_check_hand, ys_lock_teardown),
#endif
	ROW("spinlock", "thread-local", ys_lock_setup, NULL, ys_lock_tl, ys_lock_tl_fini,
	    ys_lock_check_tl, ys_lock_teardown),
#ifdef BENCH_HAVE_RSK_STACK
	ROW("stack", "rseqkit-cid", ys_rstack_setup_cid, NULL, xfer_rstack, NULL, rstack_check,
	    xfer_teardown),
#endif
#ifdef YS_HAVE_HAND
	YS_HAND("stack", "hand-written", ys_stack_setup, ys_thread_init, ys_stack_hand_cpu,
		ys_stack_check_hand, ys_xfer_teardown),
	YS_HAND("stack", "hand-written-cid", ys_stack_setup, ys_thread_init, ys_stack_hand_cid,
		ys_stack_check_hand, ys_xfer_teardown),
#endif
	ROW("stack", "thread-local", ys_stack_setup, NULL, ys_stack_tl, ys_xfer_tl_fini,
	    ys_xfer_check_tl, ys_xfer_teardown),
#ifdef BENCH_HAVE_RSK_PTRBUF
	ROW("ptrbuf", "rseqkit-cid", ys_rptr_setup_cid, NULL, xfer_rptr, NULL, rptr_check,
	    xfer_teardown),
#endif
#ifdef YS_HAVE_HAND
	YS_HAND("ptrbuf", "hand-written", ys_ptr_setup, ys_thread_init, ys_ptr_hand_cpu,
		ys_buf_check_hand, ys_xfer_teardown),
	YS_HAND("ptrbuf", "hand-written-cid", ys_ptr_setup, ys_thread_init, ys_ptr_hand_cid,
		ys_buf_check_hand, ys_xfer_teardown),
#endif
	ROW("ptrbuf", "thread-local", ys_ptr_setup, NULL, ys_ptr_tl, ys_xfer_tl_fini,
	    ys_xfer_check_tl, ys_xfer_teardown),
#ifdef BENCH_HAVE_RSK_COPYBUF
	ROW("copybuf16", "rseqkit-cid", ys_rcopy2_setup_cid, NULL, xfer_rcopy2, NULL, rcopy_check,
	    xfer_teardown),
#endif
#ifdef YS_HAVE_HAND
	YS_HAND("copybuf16", "hand-written", ys_copy2_setup, ys_thread_init, ys_copy2_hand_cpu,
		ys_buf_check_hand, ys_xfer_teardown),
	YS_HAND("copybuf16", "hand-written-cid", ys_copy2_setup, ys_thread_init, ys_copy2_hand_cid,
		ys_buf_check_hand, ys_xfer_teardown),
#endif
	ROW("copybuf16", "thread-local", ys_copy2_setup, NULL, ys_copy2_tl, ys_xfer_tl_fini,
	    ys_xfer_check_tl, ys_xfer_teardown),
#ifdef BENCH_HAVE_RSK_COPYBUF
	ROW("copybuf64", "rseqkit-cid", ys_rcopy8_setup_cid, NULL, xfer_rcopy8, NULL, rcopy_check,
	    xfer_teardown),
#endif
#ifdef YS_HAVE_HAND
	YS_HAND("copybuf64", "hand-written", ys_copy8_setup, ys_thread_init, ys_copy8_hand_cpu,
		ys_buf_check_hand, ys_xfer_teardown),
	YS_HAND("copybuf64", "hand-written-cid", ys_copy8_setup, ys_thread_init, ys_copy8_hand_cid,
		ys_buf_check_hand, ys_xfer_teardown),
#endif
	ROW("copybuf64", "thread-local", ys_copy8_setup, NULL, ys_copy8_tl, ys_xfer_tl_fini,
	    ys_xfer_check_tl, ys_xfer_teardown),
};
#define NIMPLS (sizeof(impls) / sizeof(impls[0]))

/* ------------------------------------------------------------------ */
/* Results                                                             */

struct row {
	const struct impl *im;
	int threads;
	bool pinned;
	bool failed;
	int nsamples;
	struct sample *s;
	double ns_per_op, mops, spread_pct; /* medians and spread */
	double p50, p99;		    /* medians of the sampled latencies, or 0 */
	double x_tl, x_alt;		    /* ratios; 0 when there is none */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void summarise(struct row *r)
{
	double v[r->nsamples > 0 ? r->nsamples : 1];

	for (int i = 0; i < r->nsamples; i++)
		v[i] = r->s[i].ns_per_op;
	r->ns_per_op = median(v, r->nsamples);
	r->spread_pct = (v[r->nsamples - 1] - v[0]) / r->ns_per_op * 100.0;
	for (int i = 0; i < r->nsamples; i++)
		v[i] = r->s[i].mops;
	r->mops = median(v, r->nsamples);
	for (int i = 0; i < r->nsamples; i++)
		v[i] = r->s[i].p50;
	r->p50 = median(v, r->nsamples);
	for (int i = 0; i < r->nsamples; i++)
		v[i] = r->s[i].p99;
	r->p99 = median(v, r->nsamples);
}

/* ------------------------------------------------------------------ */
/* Fallback rows: measured in a child process started with
 * RSEQKIT_DISABLE=1 (the library decides its mode once, at start-up).
 * The child is this program, re-executed with the hidden option
 * --fallback-server RFD WFD; it answers one request per line:
 *   request  "<impl index> <threads> <ms> <pinned 0|1>"
 *   answer   "<rc> <ns_per_op> <mops> <p50> <p99>"
 * with rc as run_once() returns it.  The parent sends a request where the
 * round-robin comes to a fallback row, so those rows interleave with the
 * others as any row does. */
static FILE *fb_to, *fb_from; /* parent's ends; NULL: no child */
static pid_t fb_pid = -1;

static int fallback_start(const char *argv0)
{
	int down[2], up[2];

	if (pipe(down) || pipe(up))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char rfd[16], wfd[16];
		close(down[1]);
		close(up[0]);
		snprintf(rfd, sizeof(rfd), "%d", down[0]);
		snprintf(wfd, sizeof(wfd), "%d", up[1]);
		setenv("RSEQKIT_DISABLE", "1", 1);
		execl("/proc/self/exe", argv0, "--fallback-server", rfd, wfd, (char *)NULL);
		_exit(127);
	}
	close(down[0]);
	close(up[1]);
	fcntl(down[1], F_SETFD, FD_CLOEXEC);
	fcntl(up[0], F_SETFD, FD_CLOEXEC);
	fb_to = fdopen(down[1], "w");
	fb_from = fdopen(up[0], "r");
	fb_pid = pid;
	if (!fb_to || !fb_from)
		return -1;
	/* The child says hello once it knows it runs without rseq. */
	char line[256];
	if (!fgets(line, sizeof(line), fb_from) || strncmp(line, "ready", 5)) {
		fprintf(stderr, "rseqkit-bench: fallback child: %s",
			line[0] ? line : "no answer\n");
		fclose(fb_to);
		fclose(fb_from);
		fb_to = fb_from = NULL;
		waitpid(pid, NULL, 0);
		fb_pid = -1;
		return -1;
	}
	return 0;
}

static void fallback_stop(void)
{
	if (fb_to)
		fclose(fb_to); /* EOF: the child exits */
	if (fb_from)
		fclose(fb_from);
	if (fb_pid > 0)
		waitpid(fb_pid, NULL, 0);
	fb_to = fb_from = NULL;
	fb_pid = -1;
}

static int run_once(const struct impl *im, int nthreads, const int *pins, unsigned ms,
		    struct sample *out);

/* The child's loop. */
static int fallback_serve(int rfd, int wfd)
{
	FILE *in = fdopen(rfd, "r"), *out = fdopen(wfd, "w");
	char line[256];
	struct rsk_status st;

	if (!in || !out)
		return 1;
	rsk_init();
	rsk_status(&st);
	if (st.available) {
		fprintf(out, "error: rseq still available with RSEQKIT_DISABLE=1\n");
		fclose(out);
		return 1;
	}
	fprintf(out, "ready\n");
	fflush(out);
	while (fgets(line, sizeof(line), in)) {
		unsigned k, ms;
		int nt, pin;
		struct sample smp = {0, 0, 0, 0};
		if (sscanf(line, "%u %d %u %d", &k, &nt, &ms, &pin) != 4 || k >= NIMPLS || nt < 1 ||
		    nt > 1024) {
			fprintf(out, "-1 0 0 0 0\n");
			fflush(out);
			continue;
		}
		int *pins = NULL;
		if (pin) {
			pins = malloc(sizeof(int) * (size_t)nt);
			for (int i = 0; i < nt; i++)
				pins[i] = allowed_cpus[i % nallowed];
		}
		int rc = run_once(&impls[k], nt, pins, ms, &smp);
		free(pins);
		fprintf(out, "%d %.17g %.17g %.17g %.17g\n", rc, smp.ns_per_op, smp.mops, smp.p50,
			smp.p99);
		fflush(out);
	}
	return 0;
}

/* run_once(), here or in the fallback child. */
static int run_row(const struct impl *im, int nthreads, const int *pins, unsigned ms,
		   struct sample *out)
{
	if (!(im->flags & IMPL_FALLBACK))
		return run_once(im, nthreads, pins, ms, out);
	if (!fb_to) {
		fprintf(stderr, "rseqkit-bench: %s/%s: no fallback child (see above)\n", im->op,
			im->name);
		return -1;
	}
	char line[256];
	int rc;
	fprintf(fb_to, "%u %d %u %d\n", (unsigned)(im - impls), nthreads, ms, pins ? 1 : 0);
	fflush(fb_to);
	if (!fgets(line, sizeof(line), fb_from) ||
	    sscanf(line, "%d %lf %lf %lf %lf", &rc, &out->ns_per_op, &out->mops, &out->p50,
		   &out->p99) != 5) {
		fprintf(stderr, "rseqkit-bench: %s/%s: the fallback child died\n", im->op, im->name);
		fallback_stop();
		return -1;
	}
	return rc;
}

/* Rivals: neither an rseqkit row ("rseqkit", "rseqkit-...") nor the limit. */
static bool is_alternative(const struct impl *im)
{
	return strncmp(im->name, "rseqkit", 7) != 0 && strcmp(im->name, "thread-local") != 0 &&
	       strncmp(im->name, "hand-written", 12) != 0; /* the yardstick: a limit */
}

/* Ratios within each (op, threads) group. */
static void ratios(struct row *rows, int nrows)
{
	for (int i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		double tl = 0, alt = 0;
		if (r->failed)
			continue;
		for (int j = 0; j < nrows; j++) {
			struct row *o = &rows[j];
			if (o->failed || o->threads != r->threads || strcmp(o->im->op, r->im->op))
				continue;
			if (strcmp(o->im->name, "thread-local") == 0)
				tl = o->ns_per_op;
			else if (is_alternative(o->im) && (alt == 0 || o->ns_per_op < alt))
				alt = o->ns_per_op;
		}
		r->x_tl = tl > 0 ? r->ns_per_op / tl : 0;
		r->x_alt = alt > 0 ? r->ns_per_op / alt : 0;
	}
}

/* ------------------------------------------------------------------ */
/* Machine facts                                                       */

static char cpu_model[256] = "unknown";
static struct utsname uts;
static struct rsk_status rst;
static int ncpus_online;

static void machine_facts(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];

	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) == 0) {
			char *p = strchr(line, ':');
			if (p) {
				p++;
				while (*p == ' ' || *p == '\t')
					p++;
				p[strcspn(p, "\n")] = 0;
				snprintf(cpu_model, sizeof(cpu_model), "%s", p);
			}
			break;
		}
	}
	if (f)
		fclose(f);
	uname(&uts);
	rsk_status(&rst);
	ncpus_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* ------------------------------------------------------------------ */
/* Output                                                              */

static const char *opnote(const char *op)
{
	if (!strcmp(op, "cpu-read"))
		return "read the current CPU number";
	if (!strcmp(op, "counter-add"))
		return "add 1 to a counter shared by all threads";
	if (!strcmp(op, "spinlock"))
		return "lock, add 1 to the guarded counter, unlock";
	if (!strcmp(op, "stack"))
		return "push one node, pop one node";
	if (!strcmp(op, "ptrbuf"))
		return "push one pointer, pop one pointer";
	if (!strcmp(op, "copybuf16"))
		return "push a 16-byte item by copy, pop one";
	if (!strcmp(op, "copybuf64"))
		return "push a 64-byte item by copy, pop one";
	if (!strcmp(op, "mm-cid-read"))
		return "read the current concurrency id (mm_cid)";
	if (!strcmp(op, "counter-add4"))
		return "add 1 to 4 independent counters in turn (ns per add)";
	if (!strcmp(op, "fence-cpu"))
		return "rsk_fence_cpu() of another CPU, busy threads running sections there";
	if (!strcmp(op, "fence-all"))
		return "rsk_fence_all(), busy threads running sections on the other CPUs";
	if (!strcmp(op, "pool"))
		return "allocate a 64-byte object, tag it, free it (same thread)";
	if (!strcmp(op, "pool-pc"))
		return "one 64-byte object allocated by a producer, passed through a ring, freed "
		       "by its consumer (ns/op: all threads' time per object)";
	if (!strcmp(op, "workload"))
		return "one event: object from a per-CPU buffer, 4 statistics counters, object "
		       "back; a reader sums every 1 ms";
	return "";
}

static void print_table(const char *op, struct row *rows, int nrows)
{
	printf("\n%s: %s\n", op, opnote(op));
	printf("  %-7s %-8s %-16s %9s %8s %10s %8s %8s\n", "threads", "cpus", "impl", "ns/op",
	       "spread%", "Mops/s", "x tl", "x best");
	int last = -1;
	for (int i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		if (strcmp(r->im->op, op))
			continue;
		if (last != -1 && r->threads != last)
			printf("\n");
		last = r->threads;
		if (r->failed) {
			printf("  %-7d %-8s %-16s   FAILED (see the error above)\n", r->threads,
			       r->pinned ? "pinned" : "unpinned", r->im->name);
			continue;
		}
		char xtl[16] = "-", xalt[16] = "-";
		if (r->x_tl > 0)
			snprintf(xtl, sizeof(xtl), "%.2f", r->x_tl);
		if (r->x_alt > 0)
			snprintf(xalt, sizeof(xalt), "%.2f", r->x_alt);
		printf("  %-7d %-8s %-16s %9.3f %8.1f %10.1f %8s %8s\n", r->threads,
		       r->pinned ? "pinned" : "unpinned", r->im->name, r->ns_per_op, r->spread_pct,
		       r->mops, xtl, xalt);
	}
	for (int i = 0; i < nrows; i++)
		if (!strcmp(rows[i].im->op, op) && (rows[i].im->flags & IMPL_HAND)) {
			printf("  (hand-written: the limit - this operation written on the ABI for "
			       "this structure alone; see \"yardstick\" below)\n");
			break;
		}
}

static int write_csv(const char *path, struct row *rows, int nrows)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "rseqkit-bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "op,impl,threads,ns_per_op,mops,spread_pct\n");
	for (int i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		if (!r->failed)
			fprintf(f, "%s,%s,%d,%.4f,%.3f,%.2f\n", r->im->op, r->im->name, r->threads,
				r->ns_per_op, r->mops, r->spread_pct);
	}
	return fclose(f) ? -1 : 0;
}

struct config {
	int reps;
	unsigned ms, warm_ms;
	bool quick;
	int pin_mode; /* 0: only 1-thread runs, 1: all, -1: none */
};

static int write_json(const char *path, struct row *rows, int nrows, const struct config *c)
{
	FILE *f = fopen(path, "w");
	char date[64];
	time_t now = time(NULL);

	if (!f) {
		fprintf(stderr, "rseqkit-bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	fprintf(f, "{\n  \"tool\": \"rseqkit-bench\",\n  \"date\": \"%s\",\n", date);
	fprintf(f, "  \"machine\": {\n    \"cpu_model\": ");
	json_str(f, cpu_model);
	fprintf(f, ",\n    \"cpus_online\": %d,\n    \"cpus_possible\": %d,\n", ncpus_online,
		ncpus_possible);
	fprintf(f, "    \"kernel\": ");
	json_str(f, uts.release);
	fprintf(f, ",\n    \"kernel_version\": ");
	json_str(f, uts.version);
	fprintf(f, ",\n    \"arch\": ");
	json_str(f, uts.machine);
	fprintf(f, ",\n    \"build_arch\": \"%s\",\n    \"libc\": ", RSK_ARCH_NAME);
	json_str(f, gnu_get_libc_version());
	fprintf(f, ",\n    \"compiler\": ");
	json_str(f, __VERSION__);
	fprintf(f, ",\n    \"rseq_available\": %s,\n    \"rseq_owner\": \"%s\",\n    \"rseq_reason\": ",
		rst.available ? "true" : "false", rsk_owner_name(rst.owner));
	json_str(f, rst.reason ? rst.reason : "");
	fprintf(f, "\n  },\n  \"method\": {\"reps\": %d, \"run_ms\": %u, \"warmup_ms\": %u, "
		   "\"batch_ns\": %u, \"quick\": %s, \"statistic\": \"median\", "
		   "\"spread\": \"(max-min)/median*100 of ns_per_op\", "
		   "\"ns_per_op\": \"sum of thread time / sum of operations\", "
		   "\"mops\": \"all operations / wall time / 1e6\"},\n",
		c->reps, c->ms, c->warm_ms, BATCH_NS, c->quick ? "true" : "false");
	fprintf(f, "  \"results\": [");
	const char *sep = "\n";
	for (int i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		if (r->failed)
			continue;
		fprintf(f, "%s    {\"op\": \"%s\", \"impl\": \"%s\", \"threads\": %d, "
			   "\"ns_per_op\": %.4f, \"mops\": %.3f, \"spread_pct\": %.2f, "
			   "\"pinned\": %s, \"reps\": %d",
			sep, r->im->op, r->im->name, r->threads, r->ns_per_op, r->mops,
			r->spread_pct, r->pinned ? "true" : "false", r->nsamples);
		if (r->x_tl > 0)
			fprintf(f, ", \"x_thread_local\": %.3f", r->x_tl);
		if (r->x_alt > 0)
			fprintf(f, ", \"x_best_alternative\": %.3f", r->x_alt);
		if (r->p50 > 0)
			fprintf(f, ", \"p50_ns\": %.1f, \"p99_ns\": %.1f", r->p50, r->p99);
		fprintf(f, "}");
		sep = ",\n";
	}
	/* The workload, in its own words. */
	fprintf(f, "\n  ],\n  \"workload\": {\"description\": \"worker threads process events: "
		   "each takes an object from a per-CPU buffer (or a preallocated pool), touches "
		   "it, adds to 4 statistics counters and puts the object back; a reader thread "
		   "sums the statistics every 1 ms\", \"latency\": \"every %d-th event of each "
		   "thread timed alone with CLOCK_MONOTONIC; p50/p99 over all threads' samples, "
		   "median over the repetitions\", \"checked\": \"events counted by the "
		   "statistics == events processed; allocated + recycled == events; bytes; every "
		   "object found once\", \"results\": [",
		WL_EVERY);
	sep = "";
	for (int i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		if (r->failed || strcmp(r->im->op, "workload"))
			continue;
		fprintf(f, "%s\n    {\"impl\": \"%s\", \"threads\": %d, \"events_per_s\": %.0f, "
			   "\"ns_per_event\": %.4f, \"p50_ns\": %.1f, \"p99_ns\": %.1f, "
			   "\"spread_pct\": %.2f, \"reps\": %d, \"totals_verified\": true}",
			sep, r->im->name, r->threads, r->mops * 1e6, r->ns_per_op, r->p50, r->p99,
			r->spread_pct, r->nsamples);
		sep = ",";
	}
	fprintf(f, "\n  ]");
	fprintf(f, "},\n");
	if (pmem.valid) {
		size_t obj = POOL_OBJ;
		fprintf(f, "  \"pool_memory\": {\"description\": \"threads each allocate "
			   "cache_capacity objects and free them, over and over for run_ms; "
			   "rsk_pool_stats() sampled every 1 ms (peak) and after the threads are "
			   "done; per_thread_design_bytes = threads x cache_capacity x object_size "
			   "(computed)\", \"threads\": %d, \"cpus\": %d, \"object_size\": %zu, "
			   "\"cache_capacity\": %d, \"mode\": \"cpu\", \"alloc_free_pairs\": %ju, "
			   "\"caches\": %zu, \"cached_objects\": %zu, \"cached_bytes\": %zu, "
			   "\"cached_bytes_peak\": %zu, \"cached_max_one_cache\": %zu, "
			   "\"bound_bytes\": %zu, \"per_thread_design_bytes\": %zu, "
			   "\"depot_objects\": %zu, \"slabs\": %zu, \"bytes_mapped\": %zu, "
			   "\"bytes_mapped_after_drain_trim\": %zu, \"in_use\": %zu},\n",
			pmem.threads, pmem.cpus, obj, POOL_CAP, (uintmax_t)pmem.ops, pmem.caches,
			pmem.cached, pmem.cached * obj, pmem.peak_cached * obj, pmem.cached_max,
			(size_t)pmem.cpus * POOL_CAP * obj, (size_t)pmem.threads * POOL_CAP * obj,
			pmem.depot, pmem.slabs, pmem.mapped, pmem.mapped_trimmed, pmem.in_use);
	}
	fprintf(f, "  \"failed\": [");
	sep = "";
	for (int i = 0; i < nrows; i++)
		if (rows[i].failed) {
			fprintf(f, "%s{\"op\": \"%s\", \"impl\": \"%s\", \"threads\": %d}", sep,
				rows[i].im->op, rows[i].im->name, rows[i].threads);
			sep = ", ";
		}
	fprintf(f, "]\n}\n");
	return fclose(f) ? -1 : 0;
}

static const struct row *find_row(const struct row *rows, int nrows, const char *op,
				  const char *name, int threads)
{
	for (int i = 0; i < nrows; i++)
		if (!rows[i].failed && rows[i].threads == threads && !strcmp(rows[i].im->op, op) &&
		    !strcmp(rows[i].im->name, name))
			return &rows[i];
	return NULL;
}

/* The progress-protocol figures and the workload, after the targets. */
static void extra_report(const struct row *rows, int nrows)
{
	static const char *const sops[] = {"counter-add", "spinlock", "stack", "ptrbuf",
					    "copybuf16", "copybuf64"};
	bool head = false;

	for (int i = 0; i < nrows; i++) {
		const struct row *fb = &rows[i];
		if (fb->failed || strcmp(fb->im->name, "rseqkit-fallback"))
			continue;
		const struct row *mx = find_row(rows, nrows, fb->im->op, "mutex", fb->threads);
		if (!mx)
			continue;
		if (!head)
			printf("\nfallback (no rseq, RSEQKIT_DISABLE=1 child) / mutex, ns per op "
			       "(target <= 1.00x):\n");
		head = true;
		double x = fb->ns_per_op / mx->ns_per_op;
		printf("  %-12s %2d threads  %9.3f / %9.3f ns = %.2fx: %s\n", fb->im->op,
		       fb->threads, fb->ns_per_op, mx->ns_per_op, x, x <= 1.0 ? "met" : "NOT met");
	}
	head = false;
	for (size_t o = 0; o < sizeof(sops) / sizeof(sops[0]); o++)
		for (int i = 0; i < nrows; i++) {
			const struct row *ug = &rows[i];
			if (ug->failed || strcmp(ug->im->name, "rseqkit-ungated") ||
			    strcmp(ug->im->op, sops[o]))
				continue;
			/* the counter's gated twin is the library counter */
			const char *gname = strcmp(sops[o], "counter-add") ? "rseqkit" : "rseqkit-counter";
			const struct row *g = find_row(rows, nrows, sops[o], gname, ug->threads);
			if (!g)
				continue;
			if (!head)
				printf("\nprotocol cost: gated fast path / ungated copy, ns per op "
				       "(target <= 1.15x):\n");
			head = true;
			double x = g->ns_per_op / ug->ns_per_op;
			printf("  %-12s %2d threads  %9.3f / %9.3f ns = %.2fx: %s\n", sops[o],
			       ug->threads, g->ns_per_op, ug->ns_per_op, x,
			       x <= 1.15 ? "met" : "NOT met");
		}
	head = false;
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (r->failed || strcmp(r->im->name, "rseqkit") ||
		    (strcmp(r->im->op, "pool") && strcmp(r->im->op, "pool-pc")))
			continue;
		const struct row *m = find_row(rows, nrows, r->im->op, "malloc", r->threads);
		if (!m)
			continue;
		if (!head)
			printf("\npool: rseqkit / glibc malloc, ns per op (targets: alloc+free at 1 "
			       "thread <= 1.50x, producer/consumer < 1.00x):\n");
		head = true;
		double x = r->ns_per_op / m->ns_per_op;
		bool pc = !strcmp(r->im->op, "pool-pc");
		printf("  %-12s %2d threads  %9.3f / %9.3f ns = %.2fx%s\n", r->im->op, r->threads,
		       r->ns_per_op, m->ns_per_op, x,
		       pc ? (x < 1.0 ? ": met" : ": NOT met")
		       : r->threads == 1 ? (x <= 1.5 ? ": met" : ": NOT met") : "");
	}
	if (pmem.valid) {
		size_t obj = POOL_OBJ, bound = (size_t)pmem.cpus * POOL_CAP * obj;
		size_t per_thread = (size_t)pmem.threads * POOL_CAP * obj;
		printf("\npool memory (%d threads on %d CPUs, each allocating %d objects of %zu "
		       "bytes and freeing them; cache capacity %d):\n",
		       pmem.threads, pmem.cpus, POOL_CAP, obj, POOL_CAP);
		printf("  rseqkit pool cached:  %zu objects = %zu bytes at the end, peak seen %zu "
		       "bytes, in %zu caches\n",
		       pmem.cached, pmem.cached * obj, pmem.peak_cached * obj, pmem.caches);
		printf("  bound CPUs x capacity x size = %d x %d x %zu = %zu bytes: %s\n", pmem.cpus,
		       POOL_CAP, obj, bound, pmem.peak_cached * obj <= bound ? "met" : "NOT met");
		printf("  per-thread cache design, same capacity: threads x capacity x size = %d x "
		       "%d x %zu = %zu bytes (%.2fx the pool's peak)\n",
		       pmem.threads, POOL_CAP, obj, per_thread,
		       pmem.peak_cached ? (double)per_thread / (double)(pmem.peak_cached * obj) : 0.0);
		printf("  mapped %zu bytes in %zu slabs, %zu after drain + trim; in use at the end: "
		       "%zu\n",
		       pmem.mapped, pmem.slabs, pmem.mapped_trimmed, pmem.in_use);
	}
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (!r->failed && !strncmp(r->im->op, "fence-", 6))
			printf("%s%-9s latency %.0f ns (median), spread %.0f%%\n",
			       strcmp(r->im->op, "fence-cpu") ? "" : "\nfences (1 thread, busy threads on the other CPUs):\n  ",
			       r->im->op, r->ns_per_op, r->spread_pct);
	}
	head = false;
	const struct row *base = NULL;
	for (int i = 0; i < nrows; i++)
		if (!rows[i].failed && !strcmp(rows[i].im->op, "workload") &&
		    !strcmp(rows[i].im->name, "atomic-getcpu"))
			base = &rows[i];
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (r->failed || strcmp(r->im->op, "workload"))
			continue;
		if (!head)
			printf("\nworkload (totals verified; latency: every %d-th event timed):\n"
			       "  %-14s %7s %12s %10s %10s %12s\n",
			       WL_EVERY, "impl", "threads", "events/s", "p50 ns", "p99 ns",
			       "x getcpu");
		head = true;
		char xb[16] = "-";
		if (base && base->threads == r->threads)
			snprintf(xb, sizeof(xb), "%.2f", r->mops / base->mops);
		printf("  %-14s %7d %12.0f %10.0f %10.0f %12s\n", r->im->name, r->threads,
		       r->mops * 1e6, r->p50, r->p99, xb);
	}
	if (head && base) {
		const struct row *r = find_row(rows, nrows, "workload", "rseqkit", base->threads);
		if (r)
			printf("  target: rseqkit >= 2x the events/s of atomic-getcpu: %.2fx, %s\n",
			       r->mops / base->mops, r->mops >= 2 * base->mops ? "met" : "NOT met");
	}
}

/* The yardstick summary: each rseqkit row beside its hand-written twin,
 * same run, at 1 thread (or the fewest threads measured). */
#ifdef __clang__
#define YS_TARGET 1.20 /* issue 13: within 1.20x with clang */
#else
#define YS_TARGET 1.10 /* issue 13: within 1.10x with gcc */
#endif
static void ys_report(const struct row *rows, int nrows)
{
	static const struct {
		const char *op, *mode, *rsk, *hand;
	} pairs[] = {
		{"counter-add4", "cpu", "rseqkit", "hand-written"},
		{"counter-add4", "cid", "rseqkit-cid", "hand-written-cid"},
		{"spinlock", "cpu", "rseqkit", "hand-written"},
		{"spinlock", "cid", "rseqkit-cid", "hand-written-cid"},
		{"stack", "cpu", "rseqkit", "hand-written"},
		{"stack", "cid", "rseqkit-cid", "hand-written-cid"},
		{"ptrbuf", "cpu", "rseqkit", "hand-written"},
		{"ptrbuf", "cid", "rseqkit-cid", "hand-written-cid"},
		{"copybuf16", "cpu", "rseqkit", "hand-written"},
		{"copybuf16", "cid", "rseqkit-cid", "hand-written-cid"},
		{"copybuf64", "cpu", "rseqkit", "hand-written"},
		{"copybuf64", "cid", "rseqkit-cid", "hand-written-cid"},
		{"mm-cid-read", "cid", "rseqkit", "hand-written"},
		{"cpu-read", "cpu", "rseqkit", "hand-written"},
	};
	int tlow = 0;
	bool head = false;

	for (int i = 0; i < nrows; i++)
		if (!rows[i].failed && (rows[i].im->flags & IMPL_HAND) &&
		    (tlow == 0 || rows[i].threads < tlow))
			tlow = rows[i].threads;
	for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
		const struct row *r = NULL, *h = NULL, *tl = NULL;
		bool op_ran = false;
		for (int i = 0; i < nrows; i++)
			op_ran |= !strcmp(rows[i].im->op, pairs[k].op);
		if (!op_ran)
			continue;
		if (!head) {
			printf("\nyardstick: rseqkit / hand-written (the limit: the same operation "
			       "written on the ABI, one mode, no gate),\n  ns per op, %d thread%s, "
			       "this run; target <= %.2fx (%s)\n",
			       tlow ? tlow : 1, tlow > 1 ? "s" : "", YS_TARGET,
#ifdef __clang__
			       "clang"
#else
			       "gcc"
#endif
			);
			printf("  %-12s %-4s %9s %13s %7s %13s   %s\n", "op", "mode", "rseqkit",
			       "hand-written", "ratio", "thread-local", "target");
			head = true;
		}
		if (tlow) {
			r = find_row(rows, nrows, pairs[k].op, pairs[k].rsk, tlow);
			h = find_row(rows, nrows, pairs[k].op, pairs[k].hand, tlow);
			tl = find_row(rows, nrows, pairs[k].op, "thread-local", tlow);
		}
		char rs[16] = "-", hs[16] = "-", ts[16] = "-", xs[16] = "-", tgt[96];
		if (r)
			snprintf(rs, sizeof(rs), "%.3f", r->ns_per_op);
		if (h)
			snprintf(hs, sizeof(hs), "%.3f", h->ns_per_op);
		if (tl)
			snprintf(ts, sizeof(ts), "%.3f", tl->ns_per_op);
		if (r && h) {
			double x = r->ns_per_op / h->ns_per_op;
			snprintf(xs, sizeof(xs), "%.2fx", x);
			snprintf(tgt, sizeof(tgt), "target <= %.2fx: %.2fx %s", YS_TARGET, x,
				 x <= YS_TARGET ? "met" : "not met");
		} else if (!ys_rows_available()) {
#ifdef YS_HAVE_HAND
			snprintf(tgt, sizeof(tgt), "n/a: glibc has not registered rseq here");
#else
			snprintf(tgt, sizeof(tgt), "n/a: %s", YS_HAND_NA);
#endif
		} else {
			snprintf(tgt, sizeof(tgt), "n/a: %s row not measured (failed or not selected)",
				 r ? "hand-written" : "rseqkit");
		}
#ifdef YS_HAVE_HAND
		if (!strcmp(pairs[k].mode, "cid") && !ys_cid_ok)
			strncat(tgt, " (no mm_cid here: indexed by cpu_id)", sizeof(tgt) - strlen(tgt) - 1);
#endif
		printf("  %-12s %-4s %9s %13s %7s %13s   %s\n", pairs[k].op, pairs[k].mode, rs, hs, xs,
		       ts, tgt);
	}
}

static bool on_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	while (path && *path) {
		size_t n = strcspn(path, ":");
		if (n > 0 && n + strlen(prog) + 2 < sizeof(buf)) {
			snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog);
			if (access(buf, X_OK) == 0)
				return true;
		}
		path += n;
		if (*path == ':')
			path++;
	}
	return false;
}

/* path = outdir/name; -1 (nothing written) if it would not fit. */
static int plot_path(char *path, size_t len, const char *outdir, const char *name)
{
	int n = snprintf(path, len, "%s/%s", outdir, name);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Data files, a gnuplot script and SVGs in outdir; 0 if gnuplot ran. */
static int plots(const char *outdir, const char **ops, int nops, struct row *rows, int nrows,
		 const int *tcounts, int ntc)
{
	char path[4096], name[160];

	if (plot_path(path, sizeof(path), outdir, "plots.gp") < 0)
		return -1;
	FILE *gp = fopen(path, "w");
	if (!gp)
		return -1;
	fprintf(gp, "# written by rseqkit-bench; run in %s\n", outdir);
	fprintf(gp, "set terminal svg size 760,420 dynamic font 'sans,11' background rgb 'white'\n"
		    "set grid ytics\nset datafile missing '?'\n");
	for (int o = 0; o < nops; o++) {
		const char *op = ops[o];
		/* ns/op per implementation at 1 thread (or the fewest threads
		 * the op was measured with: the workload) */
		int tlow = 0;
		for (int i = 0; i < nrows; i++)
			if (!rows[i].failed && !strcmp(rows[i].im->op, op) &&
			    (tlow == 0 || rows[i].threads < tlow))
				tlow = rows[i].threads;
		char tname[32] = "1thread";
		if (tlow > 1)
			snprintf(tname, sizeof(tname), "%dthreads", tlow);
		snprintf(name, sizeof(name), "%.100s-%s.dat", op, tname);
		FILE *d = plot_path(path, sizeof(path), outdir, name) < 0 ? NULL : fopen(path, "w");
		int nbar = 0;
		bool pinned = false;
		if (!d)
			break;
		for (int i = 0; i < nrows; i++) {
			struct row *r = &rows[i];
			if (r->failed || r->threads != tlow || strcmp(r->im->op, op))
				continue;
			fprintf(d, "\"%s\" %.4f\n", r->im->name, r->ns_per_op);
			pinned = r->pinned;
			nbar++;
		}
		fclose(d);
		if (nbar) {
			fprintf(gp, "\nset output '%s-%s.svg'\n", op, tname);
			fprintf(gp, "set title '%s, %d thread%s (%s): ns per operation, lower is better'\n",
				op, tlow, tlow > 1 ? "s" : "", pinned ? "pinned" : "unpinned");
			fprintf(gp, "set style fill solid 0.7 border -1\nset boxwidth 0.6\n"
				    "unset logscale\nset ylabel 'ns/op'\nset xlabel ''\n"
				    "set yrange [0:*]\nset xrange [-0.6:%d.6]\n"
				    "set xtics auto rotate by -25 noenhanced\n",
				nbar - 1);
			fprintf(gp, "plot '%s-%s.dat' using 0:2:xtic(1) with boxes notitle, "
				    "'' using 0:2:(sprintf('%%.2f', $2)) with labels offset 0,0.8 notitle\n",
				op, tname);
		}
		/* Mops/s against threads, one line per implementation */
		snprintf(name, sizeof(name), "%.100s-scaling.dat", op);
		d = plot_path(path, sizeof(path), outdir, name) < 0 ? NULL : fopen(path, "w");
		if (!d)
			break;
		int ncol = 0;
		fprintf(d, "threads");
		for (size_t k = 0; k < NIMPLS; k++)
			if (!strcmp(impls[k].op, op)) {
				fprintf(d, " \"%s\"", impls[k].name);
				ncol++;
			}
		fprintf(d, "\n");
		for (int c = 0; c < ntc; c++) {
			fprintf(d, "%d", tcounts[c]);
			for (size_t k = 0; k < NIMPLS; k++) {
				if (strcmp(impls[k].op, op))
					continue;
				const struct row *found = NULL;
				for (int i = 0; i < nrows; i++)
					if (rows[i].im == &impls[k] && rows[i].threads == tcounts[c] &&
					    !rows[i].failed)
						found = &rows[i];
				if (found)
					fprintf(d, " %.4f", found->mops);
				else
					fprintf(d, " ?");
			}
			fprintf(d, "\n");
		}
		fclose(d);
		int tmin = tcounts[0], tmax = tcounts[0];
		for (int c = 1; c < ntc; c++) {
			tmin = tcounts[c] < tmin ? tcounts[c] : tmin;
			tmax = tcounts[c] > tmax ? tcounts[c] : tmax;
		}
		int opcounts = 0; /* thread counts this op was measured at */
		for (int c = 0; c < ntc; c++)
			for (int i = 0; i < nrows; i++)
				if (!rows[i].failed && rows[i].threads == tcounts[c] &&
				    !strcmp(rows[i].im->op, op)) {
					opcounts++;
					break;
				}
		if (opcounts > 1 && ncol) {
			fprintf(gp, "\nset output '%s-scaling.svg'\n", op);
			fprintf(gp, "set title '%s: total throughput against threads (%d CPUs), higher is better'\n",
				op, ncpus_online);
			fprintf(gp, "set xrange [%g:%g]\nset yrange [*:*]\nset logscale xy 2\n"
				    "set xtics norotate (", tmin / 1.3, tmax * 1.3);
			for (int c = 0; c < ntc; c++)
				fprintf(gp, "%s%d", c ? ", " : "", tcounts[c]);
			fprintf(gp, ")\nset xlabel 'threads'\nset ylabel 'Mops/s (all threads, log)'\n"
				    "set key outside right\n");
			fprintf(gp, "plot for [c=2:%d] '%s-scaling.dat' using 1:c with linespoints "
				    "lw 2 title columnheader(c)\nunset logscale\nset key default\n",
				ncol + 1, op);
		}
	}
	fclose(gp);

	if (!on_path("gnuplot"))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);
		if (chdir(outdir) != 0)
			_exit(127);
		if (nul >= 0)
			dup2(nul, 1);
		execlp("gnuplot", "gnuplot", "plots.gp", (char *)NULL);
		_exit(127);
	}
	int status;
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	return 0;
}

static int mkdir_p(const char *dir)
{
	char buf[4096];

	snprintf(buf, sizeof(buf), "%s", dir);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0777) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0777) && errno != EEXIST)
		return -1;
	return 0;
}

/* $(BUILD)/bench when run as $(BUILD)/bin/rseqkit-bench, else ./bench. */
static void default_outdir(char *buf, size_t len)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = 0;
		char *s = strrchr(exe, '/');
		if (s) {
			*s = 0;
			s = strrchr(exe, '/');
			if (s && !strcmp(s, "/bin")) {
				*s = 0;
				if (strlen(exe) + sizeof("/bench") <= len) {
					strcpy(buf, exe);
					strcat(buf, "/bench");
					return;
				}
			}
		}
	}
	snprintf(buf, len, "bench");
}

/* ------------------------------------------------------------------ */
/* Command line                                                        */

static void usage(FILE *f, const char *argv0)
{
	fprintf(f,
		"usage: %s [options]\n"
		"  --quick          short runs for a smoke test (seconds, not minutes)\n"
		"  --ops LIST       operations, comma-separated (default: all; see --list)\n"
		"  --threads LIST   thread counts, comma-separated (default: 1,CPUS,4*CPUS)\n"
		"  --pin            pin every thread (thread i to the i-th allowed CPU, round-robin)\n"
		"  --no-pin         pin nothing (default: only 1-thread runs are pinned)\n"
		"  --reps N         timed repetitions per row (default 7, quick 3)\n"
		"  --ms N           length of one run in ms (default 150, quick 10)\n"
		"  --outdir DIR     where results.csv, results.json and plots go\n"
		"                   (default: BUILD/bench next to BUILD/bin)\n"
		"  --csv FILE       CSV path (default OUTDIR/results.csv)\n"
		"  --json FILE      JSON path (default OUTDIR/results.json)\n"
		"  --no-plots       no gnuplot script, data or SVGs\n"
		"  --list           print every op,impl pair and exit\n"
		"  --version        print the version and exit\n"
		"  -h, --help       this text\n",
		argv0);
}

static int parse_uint(const char *s, int lo, int hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	return (int)v;
}

/* Whether a row runs at nt threads (tmax: the largest count of the run). */
static bool row_runs_at(const struct impl *im, int nt, int tmax)
{
	if ((im->flags & IMPL_HAND) && !ys_rows_available())
		return false;
	if ((im->flags & IMPL_ONE_THREAD) && nt != 1)
		return false;
	if ((im->flags & IMPL_MAX_THREADS) && nt != tmax)
		return false;
	if ((im->flags & IMPL_PAIRS) && (nt % 2 || (nt != 2 && nt != tmax)))
		return false;
	return true;
}

static bool op_known(const char *op)
{
	for (size_t i = 0; i < NIMPLS; i++)
		if (!strcmp(impls[i].op, op))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	struct config cfg = {.reps = -1, .ms = 0};
	const char *ops_arg = NULL, *threads_arg = NULL, *csv = NULL, *json = NULL;
	char outdir[4096] = "";
	bool no_plots = false;
	int ms = -1, fb_rfd = -1, fb_wfd = -1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDS_VALUE                                                                    \
	do {                                                                           \
		if (!v) {                                                              \
			fprintf(stderr, "%s: %s needs a value\n", argv[0], a);         \
			usage(stderr, argv[0]);                                        \
			return 2;                                                      \
		}                                                                      \
		i++;                                                                   \
	} while (0)
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout, argv[0]);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("rseqkit-bench %s\n", rsk_version(NULL, NULL, NULL));
			return 0;
		} else if (!strcmp(a, "--quick")) {
			cfg.quick = true;
		} else if (!strcmp(a, "--pin")) {
			cfg.pin_mode = 1;
		} else if (!strcmp(a, "--no-pin")) {
			cfg.pin_mode = -1;
		} else if (!strcmp(a, "--no-plots")) {
			no_plots = true;
		} else if (!strcmp(a, "--fallback-server") && i + 2 < argc) {
			/* hidden: the fallback child (see fallback_start) */
			fb_rfd = atoi(argv[i + 1]);
			fb_wfd = atoi(argv[i + 2]);
			i += 2;
		} else if (!strcmp(a, "--list")) {
			for (size_t k = 0; k < NIMPLS; k++)
				if (!(impls[k].flags & IMPL_HAND) || ys_rows_available())
					printf("%s,%s\n", impls[k].op, impls[k].name);
			return 0;
		} else if (!strcmp(a, "--ops")) {
			NEEDS_VALUE;
			ops_arg = v;
		} else if (!strcmp(a, "--threads")) {
			NEEDS_VALUE;
			threads_arg = v;
		} else if (!strcmp(a, "--outdir")) {
			NEEDS_VALUE;
			snprintf(outdir, sizeof(outdir), "%s", v);
		} else if (!strcmp(a, "--csv")) {
			NEEDS_VALUE;
			csv = v;
		} else if (!strcmp(a, "--json")) {
			NEEDS_VALUE;
			json = v;
		} else if (!strcmp(a, "--reps")) {
			NEEDS_VALUE;
			if ((cfg.reps = parse_uint(v, 1, 1000)) < 0) {
				fprintf(stderr, "%s: bad --reps '%s'\n", argv[0], v);
				usage(stderr, argv[0]);
				return 2;
			}
		} else if (!strcmp(a, "--ms")) {
			NEEDS_VALUE;
			if ((ms = parse_uint(v, 1, 60000)) < 0) {
				fprintf(stderr, "%s: bad --ms '%s'\n", argv[0], v);
				usage(stderr, argv[0]);
				return 2;
			}
		} else {
			fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], a);
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (cfg.reps < 0)
		cfg.reps = cfg.quick ? 3 : 7;
	cfg.ms = ms > 0 ? (unsigned)ms : cfg.quick ? 10 : 150;
	cfg.warm_ms = cfg.ms / 3 ? cfg.ms / 3 : 1;

	/* CPUs this process may run on: the pinning targets. */
	cpu_set_t allowed;
	int cpus[CPU_SETSIZE], ncpus = 0;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &allowed))
				cpus[ncpus++] = c;
	}
	if (ncpus == 0) {
		cpus[0] = 0;
		ncpus = 1;
	}
	ncpus_possible = rsk_possible_cpus();
	memcpy(allowed_cpus, cpus, sizeof(int) * (size_t)ncpus);
	nallowed = ncpus;
	if (fb_rfd >= 0)
		return fallback_serve(fb_rfd, fb_wfd);

	/* Operations, in table order unless listed. */
	const char *ops[MAX_IMPLS];
	int nops = 0;
	char *opsbuf = ops_arg ? strdup(ops_arg) : NULL;
	if (opsbuf) {
		for (char *save, *tok = strtok_r(opsbuf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			if (!op_known(tok)) {
				fprintf(stderr, "%s: unknown operation '%s' (see --list)\n", argv[0], tok);
				usage(stderr, argv[0]);
				return 2;
			}
			if (nops < MAX_IMPLS)
				ops[nops++] = tok;
		}
	} else {
		for (size_t k = 0; k < NIMPLS; k++) {
			bool seen = false;
			for (int o = 0; o < nops; o++)
				seen |= !strcmp(ops[o], impls[k].op);
			if (!seen)
				ops[nops++] = impls[k].op;
		}
	}
	if (nops == 0) {
		fprintf(stderr, "%s: no operation selected\n", argv[0]);
		usage(stderr, argv[0]);
		return 2;
	}

	int tcounts[MAX_THREAD_COUNTS], ntc = 0;
	if (threads_arg) {
		char *buf = strdup(threads_arg);
		for (char *save, *tok = strtok_r(buf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			int t = parse_uint(tok, 1, 1024);
			if (t < 0 || ntc == MAX_THREAD_COUNTS) {
				fprintf(stderr, "%s: bad thread count '%s'\n", argv[0], tok);
				usage(stderr, argv[0]);
				return 2;
			}
			tcounts[ntc++] = t;
		}
		free(buf);
		if (ntc == 0) {
			fprintf(stderr, "%s: empty --threads\n", argv[0]);
			usage(stderr, argv[0]);
			return 2;
		}
	} else {
		tcounts[ntc++] = 1;
		if (ncpus > 1)
			tcounts[ntc++] = ncpus;
		tcounts[ntc++] = 4 * ncpus;
	}

	if (!outdir[0])
		default_outdir(outdir, sizeof(outdir));
	char csvpath[4200], jsonpath[4200];
	snprintf(csvpath, sizeof(csvpath), "%s", csv ? csv : "");
	snprintf(jsonpath, sizeof(jsonpath), "%s", json ? json : "");
	if (!csv)
		snprintf(csvpath, sizeof(csvpath), "%s/results.csv", outdir);
	if (!json)
		snprintf(jsonpath, sizeof(jsonpath), "%s/results.json", outdir);
	bool need_outdir = !csv || !json || !no_plots;
	if (need_outdir && mkdir_p(outdir)) {
		fprintf(stderr, "%s: cannot create %s: %s\n", argv[0], outdir, strerror(errno));
		return 1;
	}

	machine_facts();
	rsk_init();
	printf("rseqkit-bench: %s, %d CPUs, Linux %s, glibc %s, rseq %s (owner %s)\n", cpu_model,
	       ncpus_online, uts.release, gnu_get_libc_version(),
	       rst.available ? "available" : "UNAVAILABLE", rsk_owner_name(rst.owner));
	printf("method: %d reps x %u ms per row after a %u ms warm-up, implementations "
	       "round-robin; median, spread = (max-min)/median\n",
	       cfg.reps, cfg.ms, cfg.warm_ms);
	printf("ns/op = thread time per operation (lower is better); Mops/s = all threads; "
	       "x tl = ns/op over thread-local; x best = over the best alternative\n");
	if (!rst.available)
		printf("NOTE: rseq is unavailable (%s): rseqkit rows measure the slow paths\n",
		       rst.reason);

	/* The fallback child, if a fallback row is selected. */
	int tmax = tcounts[0];
	for (int c = 1; c < ntc; c++)
		tmax = tcounts[c] > tmax ? tcounts[c] : tmax;
	bool want_fb = false;
	for (size_t k = 0; k < NIMPLS; k++)
		for (int o = 0; o < nops; o++)
			if ((impls[k].flags & IMPL_FALLBACK) && !strcmp(impls[k].op, ops[o]))
				want_fb = true;
	if (want_fb && fallback_start(argv[0]))
		fprintf(stderr, "rseqkit-bench: cannot start the fallback child: the "
				"rseqkit-fallback rows fail\n");

	/* Rows: for each op, for each thread count, every implementation. */
	struct row *rows = calloc(NIMPLS * (size_t)(ntc + 1), sizeof(*rows));
	int nrows = 0, failures = 0;
	for (int o = 0; o < nops; o++) {
		/* The op's thread counts: the run's, or 2 and the largest
		 * (when even) for producer/consumer pairs. */
		int opc[MAX_THREAD_COUNTS], nopc = 0;
		bool pairs = false;
		for (size_t k = 0; k < NIMPLS; k++)
			if (!strcmp(impls[k].op, ops[o]) && (impls[k].flags & IMPL_PAIRS))
				pairs = true;
		if (pairs) {
			opc[nopc++] = 2;
			if (tmax > 2 && tmax % 2 == 0)
				opc[nopc++] = tmax;
		} else {
			memcpy(opc, tcounts, sizeof(int) * (size_t)ntc);
			nopc = ntc;
		}
		for (int c = 0; c < nopc; c++) {
			int nt = opc[c];
			bool any = false;
			for (size_t k = 0; k < NIMPLS; k++)
				if (!strcmp(impls[k].op, ops[o]) && row_runs_at(&impls[k], nt, tmax))
					any = true;
			if (!any)
				continue;
			bool pin = cfg.pin_mode > 0 || (cfg.pin_mode == 0 && nt == 1);
			int *pins = NULL;
			if (pin) {
				pins = malloc(sizeof(int) * (size_t)nt);
				for (int i = 0; i < nt; i++)
					pins[i] = cpus[i % ncpus];
			}
			int first = nrows;
			for (size_t k = 0; k < NIMPLS; k++) {
				if (strcmp(impls[k].op, ops[o]) || !row_runs_at(&impls[k], nt, tmax))
					continue;
				struct row *r = &rows[nrows++];
				r->im = &impls[k];
				r->threads = nt;
				r->pinned = pin;
				r->s = calloc((size_t)cfg.reps, sizeof(*r->s));
				struct sample warm;
				if (run_row(r->im, nt, pins, cfg.warm_ms, &warm) < 0)
					r->failed = true;
			}
			/* Round-robin: rep 1 of every impl, then rep 2, ... */
			for (int rep = 0; rep < cfg.reps; rep++)
				for (int i = first; i < nrows; i++) {
					struct row *r = &rows[i];
					if (r->failed)
						continue;
					int rc = 1;
					for (int try = 0; try < 3 && rc == 1; try++)
						rc = run_row(r->im, nt, pins, cfg.ms, &r->s[r->nsamples]);
					if (rc == 1)
						fprintf(stderr, "rseqkit-bench: %s/%s, %d threads: no operation done\n",
							r->im->op, r->im->name, nt);
					if (rc != 0)
						r->failed = true;
					else
						r->nsamples++;
				}
			for (int i = first; i < nrows; i++) {
				if (rows[i].failed)
					failures++;
				else
					summarise(&rows[i]);
			}
			free(pins);
		}
	}
	ratios(rows, nrows);
#ifdef BENCH_HAVE_RSK_POOL
	for (int o = 0; o < nops; o++)
		if (!strcmp(ops[o], "pool") &&
		    pool_memory_run(4 * ncpus, cfg.ms < 100 ? 100 : cfg.ms) < 0)
			failures++;
#endif
	for (int o = 0; o < nops; o++)
		print_table(ops[o], rows, nrows);
	ys_report(rows, nrows);

	/* The targets (reported, never asserted). */
	printf("\ntargets (1 thread):\n");
	for (int i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		if (r->failed || r->threads != 1 || strcmp(r->im->name, "rseqkit") || r->x_tl <= 0)
			continue;
		double target = !strcmp(r->im->op, "counter-add") ? 2.0
				: !strcmp(r->im->op, "cpu-read") ? 1.2
								  : 0;
		if (target > 0)
			printf("  %-12s rseqkit = %.2fx thread-local (target <= %.1fx): %s\n", r->im->op,
			       r->x_tl, target, r->x_tl <= target ? "met" : "NOT met");
		else
			printf("  %-12s rseqkit = %.2fx thread-local\n", r->im->op, r->x_tl);
	}

	extra_report(rows, nrows);

	int rc = failures ? 1 : 0;
	if (write_csv(csvpath, rows, nrows) || write_json(jsonpath, rows, nrows, &cfg))
		rc = 1;
	printf("\nwrote %s, %s", csvpath, jsonpath);
	if (!no_plots) {
		if (plots(outdir, ops, nops, rows, nrows, tcounts, ntc) == 0)
			printf(", %s/*.svg", outdir);
		else
			printf(" (no SVG: gnuplot missing or failed; script in %s/plots.gp)", outdir);
	}
	printf("\n");
	if (failures)
		fprintf(stderr, "rseqkit-bench: %d row(s) failed their check\n", failures);
	for (int i = 0; i < nrows; i++)
		free(rows[i].s);
	free(rows);
	free(opsbuf);
	return rc;
}
