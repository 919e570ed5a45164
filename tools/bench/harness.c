/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/harness.c - timing, pinning, repetitions, interleaving, on
 * the clock, pinning, median and round-robin of ../harness.h (which
 * mempool-bench and slice-bench use too).
 *
 *   - one row = (operation, implementation, thread count);
 *   - a run starts the threads, releases them together, lets them loop for
 *     a fixed time, and stops them with a flag read once per batch of
 *     operations: the clock is read twice per thread per run, never
 *     inside the measured loop;
 *   - every implementation of an operation gets one untimed warm-up run,
 *     then the repetitions go round-robin over the implementations, so that
 *     frequency and noise drift hit them all alike;
 *   - each row reports the median over its repetitions, the extremes and
 *     the spread (max - min) / median;
 *   - after every run the result is checked (counter sums equal the
 *     operations done, values read are possible CPU numbers, ...): a row
 *     that fails its check is dropped with an error and the exit status
 *     becomes 1.
 */
#include <stdarg.h>
#include <time.h>
#include <unistd.h>
#include "bench.h"
#include "../harness.h"

uint64_t now_ns(void)
{
	return harness_now_ns();
}

void pin_self(int cpu)
{
	harness_pin_thread(cpu);
}

void *bench_alloc(size_t bytes)
{
	size_t sz = (bytes + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
	void *p = aligned_alloc(CACHE_LINE, sz ? sz : CACHE_LINE);

	if (!p) {
		perror("rseqkit-bench: malloc");
		exit(1);
	}
	memset(p, 0, bytes);
	return p;
}

void bench_free(int n, ...)
{
	va_list ap;

	va_start(ap, n);
	while (n-- > 0)
		free(va_arg(ap, void *));
	va_end(ap);
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
int run_once(const struct impl *im, int nthreads, const int *pins, unsigned ms,
	     struct sample *out)
{
	struct run r = {.im = im, .nthreads = nthreads};
	char err[256] = "";
	int rc = 0;

	r.thr = bench_alloc(sizeof(*r.thr) * (size_t)nthreads);
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
		progress_clear();
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
uint64_t ops_all(const struct thr *t, int n)
{
	uint64_t s = 0;

	for (int i = 0; i < n; i++)
		s += t[i].ops_all;
	return s;
}

/* Whether a row runs at nt threads (tmax: the largest count of the run). */
bool row_runs_at(const struct impl *im, int nt, int tmax)
{
	if ((im->flags & IMPL_HAND) && !ys_rows_available())
		return false;
	if (bench_fallback_set && !fallback_row(im))
		return false;
	/* A rival whose library is missing: named under the table. */
	if (im->helper && helper_missing(im->helper))
		return false;
	if ((im->flags & IMPL_ONE_THREAD) && nt != 1)
		return false;
	if ((im->flags & IMPL_MAX_THREADS) && nt != tmax)
		return false;
	if ((im->flags & IMPL_PAIRS) && (nt % 2 || (nt != 2 && nt != tmax)))
		return false;
	return true;
}

static void summarise(struct row *r)
{
	double v[r->nsamples > 0 ? r->nsamples : 1];

	for (int i = 0; i < r->nsamples; i++)
		v[i] = r->s[i].ns_per_op;
	r->ns_per_op = harness_median(v, r->nsamples);
	r->ns_min = v[0];
	r->ns_max = v[r->nsamples - 1];
	r->spread_pct = (v[r->nsamples - 1] - v[0]) / r->ns_per_op * 100.0;
	for (int i = 0; i < r->nsamples; i++)
		v[i] = r->s[i].mops;
	r->mops = harness_median(v, r->nsamples);
	for (int i = 0; i < r->nsamples; i++)
		v[i] = r->s[i].p50;
	r->p50 = harness_median(v, r->nsamples);
	for (int i = 0; i < r->nsamples; i++)
		v[i] = r->s[i].p99;
	r->p99 = harness_median(v, r->nsamples);
}

/* The progress line: on a terminal (stderr) only, rewritten in place. */
static int progress_tty = -1;
static bool progress_shown;

void progress(const char *fmt, ...)
{
	va_list ap;

	if (progress_tty < 0)
		progress_tty = isatty(2) && !rsk_env_bool_("RSEQKIT_BENCH_NO_PROGRESS", 0);
	if (!progress_tty)
		return;
	fflush(stdout);
	fputs("\r\033[K", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	progress_shown = true;
}

void progress_clear(void)
{
	if (!progress_shown)
		return;
	fputs("\r\033[K", stderr);
	fflush(stderr);
	progress_shown = false;
}

static bool op_selected(const char *op, const char *const *ops, int nops)
{
	for (int o = 0; o < nops; o++)
		if (!strcmp(ops[o], op))
			return true;
	return false;
}

/* One repetition of one row of run_op(). */
struct op_reps {
	const struct family *fam;
	const char *op;
	int nt;
	const int *pins;
	const struct config *cfg;
	struct row *rows;
};

static void one_rep(void *arg, int i, int rep)
{
	const struct op_reps *a = arg;
	struct row *r = &a->rows[i];
	int rc = 1;

	if (r->failed)
		return;
	progress("%s: %s, %s, %d thread%s, repetition %d/%d", a->fam->name, a->op, r->im->name,
		 a->nt, a->nt > 1 ? "s" : "", rep + 1, a->cfg->reps);
	for (int try = 0; try < 3 && rc == 1; try++)
		rc = run_row(r->im, a->nt, a->pins, a->cfg->ms, &r->s[r->nsamples]);
	if (rc == 1) {
		progress_clear();
		fprintf(stderr, "rseqkit-bench: %s/%s, %d threads: no operation done\n", r->im->op,
			r->im->name, a->nt);
	}
	if (rc != 0)
		r->failed = true;
	else
		r->nsamples++;
}

/* One op of a family at one thread count: warm-up, then the repetitions
 * round-robin over its rows.  Returns the rows that failed. */
static int run_op(const struct family *fam, const char *op, int nt, int tmax,
		  const struct config *cfg, const int *cpus, int ncpus, struct row *rows,
		  int *nrows)
{
	bool pin = cfg->pin_mode > 0 || (cfg->pin_mode == 0 && nt == 1);
	int *pins = NULL, first = *nrows, failures = 0;

	if (pin) {
		pins = malloc(sizeof(int) * (size_t)nt);
		if (!pins)
			exit(1);
		for (int i = 0; i < nt; i++)
			pins[i] = cpus[i % ncpus];
	}
	for (size_t k = 0; k < fam->nimpls; k++) {
		const struct impl *im = &fam->impls[k];
		if (strcmp(im->op, op) || !row_runs_at(im, nt, tmax))
			continue;
		struct row *r = &rows[(*nrows)++];
		r->im = im;
		r->fam = fam;
		r->threads = nt;
		r->pinned = pin;
		r->s = calloc((size_t)cfg->reps, sizeof(*r->s));
		struct sample warm;
		progress("%s: %s, %s, %d thread%s, warm-up", fam->name, op, im->name, nt,
			 nt > 1 ? "s" : "");
		if (run_row(im, nt, pins, cfg->warm_ms, &warm) < 0)
			r->failed = true;
	}
	/* Round-robin: rep 1 of every impl, then rep 2, ... */
	struct op_reps a = {fam, op, nt, pins, cfg, rows + first};
	harness_round_robin(*nrows - first, cfg->reps, one_rep, &a);
	for (int i = first; i < *nrows; i++) {
		if (rows[i].failed)
			failures++;
		else
			summarise(&rows[i]);
	}
	free(pins);
	return failures;
}

/* Every selected op of a family at every thread count it runs at.
 * Returns the failures. */
int run_family(const struct family *fam, const char *const *ops, int nops, const int *tcounts,
	       int ntc, const struct config *cfg, struct row *rows, int *nrows)
{
	int tmax = tcounts[0], failures = 0;

	for (int c = 1; c < ntc; c++)
		tmax = tcounts[c] > tmax ? tcounts[c] : tmax;
	for (size_t k = 0; k < fam->nimpls; k++) {
		const char *op = fam->impls[k].op;
		bool done = false, pairs = false;
		for (size_t j = 0; j < k; j++)
			done |= !strcmp(fam->impls[j].op, op);
		if (done || !op_selected(op, ops, nops))
			continue;
		/* The op's thread counts: the run's, or 2 and the largest
		 * (when even) for producer/consumer pairs. */
		int opc[MAX_THREAD_COUNTS], nopc = 0;
		for (size_t j = 0; j < fam->nimpls; j++)
			if (!strcmp(fam->impls[j].op, op) && (fam->impls[j].flags & IMPL_PAIRS))
				pairs = true;
		if (pairs) {
			opc[nopc++] = 2;
			if (tmax > 2 && tmax % 2 == 0)
				opc[nopc++] = tmax;
		} else {
			memcpy(opc, tcounts, sizeof(int) * (size_t)ntc);
			nopc = ntc;
		}
		for (int c = 0; c < nopc; c++)
			failures += run_op(fam, op, opc[c], tmax, cfg, allowed_cpus, nallowed, rows,
					   nrows);
	}
	progress_clear();
	return failures;
}
