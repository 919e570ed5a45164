/* SPDX-License-Identifier: MIT */
/*
 * slice-bench - does the time-slice extension pay for rsk_spinlock?
 *
 * 4 x CPUs threads (unpinned) take an rsk_spinlock, do a short critical
 * section (a few dependent updates of the locked index's data, no system
 * calls) and unlock, for a fixed time.  Three rows in one run:
 *
 *   rsk_spinlock, extension   holders request the extension (where the
 *                             kernel offers it: <rseqkit/slice.h>)
 *   rsk_spinlock, without     the same, RSEQKIT_NO_SLICE=1 (a child
 *                             process: the switch is per process)
 *   pthread mutex             one mutex around the same section
 *
 * For each: throughput, the lock-hold time's p50/p99/p99.9 (from taking
 * the lock to releasing it, cycle counter on x86, a log histogram), the
 * holds longer than 50 us (a holder that lost the CPU while it held the
 * lock: the section itself takes well under a microsecond), and the
 * grants holders saw (the granted byte at the end of their region).
 * Ratios against the row without the extension are from the same run.
 *
 *   slice-bench [--secs S] [--threads N] [--check] [--row with|without|mutex]
 *
 * --check also verifies that every section's updates are there (exact
 * sums) and that the rows ran as labelled (extension enabled in the
 * "extension" row's threads where it is offered, never in "without"), and
 * exits 1 otherwise; it asserts nothing about time.  make check-slice
 * runs it on the kernel built with the extension; elsewhere the
 * "extension" row runs without it and says so.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rseqkit/rseqkit.h>
#include "harness.h"
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

enum row { ROW_WITH, ROW_WITHOUT, ROW_MUTEX, NROWS };
static const char *row_name[NROWS] = { "rsk_spinlock, extension", "rsk_spinlock, without",
				       "pthread mutex" };
static const char *row_arg[NROWS] = { "with", "without", "mutex" };

#define PREEMPTED_NS 50000.0 /* a hold this long lost the CPU */
#define SUB	     16	     /* histogram: sub-buckets per power of two */
#define NBUCKET	     (64 * SUB)

struct result {
	double secs, ns_per_tick;
	uint64_t ops, preempted, grants;
	uint64_t hist[NBUCKET];
	int enabled_threads, checked_ok;
};

struct shared {
	enum row row;
	double secs;
	struct rsk_spinlock *lock;
	pthread_mutex_t mutex;
	long *data; /* per index, 16 longs apart: [0] count, [1..3] work */
	int nr;
	volatile int go, stop;
	pthread_mutex_t merge;
	struct result *res;
};

static uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	/* No system call: a clock_gettime() that falls back to one (no vDSO
	 * clock source in a VM) would end a granted extension. */
	return __rdtsc();
#else
	return harness_now_ns();
#endif
}

static double now(void)
{
	return harness_now_s();
}

static unsigned bucket(uint64_t v)
{
	if (v < SUB)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* v in [2^e, 2^(e+1)) */
	unsigned sub = (unsigned)((v >> (e - 4)) & (SUB - 1));
	return (e - 3) * SUB + sub;
}

static double bucket_value(unsigned b)
{
	if (b < SUB)
		return b;
	unsigned e = b / SUB + 3, sub = b % SUB;
	return ldexp(1.0 + (sub + 0.5) / SUB, (int)e);
}

static double percentile(const struct result *r, double p)
{
	uint64_t total = 0, want, seen = 0;

	for (unsigned b = 0; b < NBUCKET; b++)
		total += r->hist[b];
	if (total == 0)
		return 0;
	want = (uint64_t)ceil(p * (double)total);
	for (unsigned b = 0; b < NBUCKET; b++) {
		seen += r->hist[b];
		if (seen >= want)
			return bucket_value(b) * r->ns_per_tick;
	}
	return 0;
}

/* The critical section: a short chain of updates to the index's data. */
static inline void section(long *d)
{
	d[0]++;
	for (int i = 0; i < 8; i++)
		d[1 + (i & 1)] += d[0] ^ i;
}

static void *worker(void *arg)
{
	struct shared *sh = arg;
	struct result *mine = calloc(1, sizeof(*mine));
	uint64_t ops = 0, preempted_ticks;
	struct rsk_abi_area *area;

	if (mine == NULL)
		return NULL;
	if (sh->row == ROW_WITH && rsk_slice_available() && rsk_slice_enable() == 0)
		mine->enabled_threads = 1;
	area = rsk_area();
	preempted_ticks = (uint64_t)(PREEMPTED_NS / sh->res->ns_per_tick);
	while (!sh->go)
		;
	while (!sh->stop) {
		uint64_t t0, t1;
		int grant = 0;

		if (sh->row == ROW_MUTEX) {
			pthread_mutex_lock(&sh->mutex);
			t0 = ticks();
			section(&sh->data[0]);
			t1 = ticks();
			pthread_mutex_unlock(&sh->mutex);
		} else {
			int idx = rsk_spinlock_lock(sh->lock);
			if (idx < 0)
				break;
			t0 = ticks();
			section(&sh->data[(size_t)idx * 16]);
			if (area != NULL)
				grant = __atomic_load_n((uint8_t *)area + RSK_ABI_OFF_SLICE_GRANTED,
							__ATOMIC_RELAXED) != 0;
			t1 = ticks();
			rsk_spinlock_unlock(sh->lock, idx);
		}
		ops++;
		mine->grants += (uint64_t)grant;
		mine->preempted += t1 - t0 > preempted_ticks;
		mine->hist[bucket(t1 - t0)]++;
	}
	pthread_mutex_lock(&sh->merge);
	sh->res->ops += ops;
	sh->res->preempted += mine->preempted;
	sh->res->grants += mine->grants;
	sh->res->enabled_threads += mine->enabled_threads;
	for (unsigned b = 0; b < NBUCKET; b++)
		sh->res->hist[b] += mine->hist[b];
	pthread_mutex_unlock(&sh->merge);
	free(mine);
	return NULL;
}

static double calibrate_ns_per_tick(void)
{
	double t0 = now();
	uint64_t c0 = ticks();

	while (now() - t0 < 0.05)
		;
	return (now() - t0) * 1e9 / (double)(ticks() - c0);
}

static int run_row(enum row row, int nthreads, double secs, struct result *res)
{
	struct shared sh = { .row = row, .secs = secs, .res = res };
	pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
	long want = 0;
	int err = 0;

	memset(res, 0, sizeof(*res));
	res->ns_per_tick = calibrate_ns_per_tick();
	pthread_mutex_init(&sh.mutex, NULL);
	pthread_mutex_init(&sh.merge, NULL);
	sh.nr = rsk_possible_cpus();
	sh.data = calloc((size_t)sh.nr * 16, sizeof(long));
	if (th == NULL || sh.data == NULL || rsk_spinlock_create(&sh.lock, RSK_INDEX_CPU) != 0) {
		fprintf(stderr, "slice-bench: out of memory\n");
		return -1;
	}
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, worker, &sh) != 0) {
			fprintf(stderr, "slice-bench: pthread_create failed\n");
			return -1;
		}
	double t0 = now();
	sh.go = 1;
	while (now() - t0 < secs)
		usleep(10000);
	sh.stop = 1;
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	res->secs = now() - t0;
	for (int i = 0; i < sh.nr; i++)
		want += sh.data[(size_t)i * 16];
	res->checked_ok = (uint64_t)want == res->ops;
	if (!res->checked_ok) {
		fprintf(stderr, "slice-bench: %s: %ld sections' updates for %" PRIu64 " sections\n",
			row_name[row], want, res->ops);
		err = -1;
	}
	rsk_spinlock_destroy(sh.lock);
	free(sh.data);
	free(th);
	return err;
}

/* The "without" row in a child with RSEQKIT_NO_SLICE=1; its result comes
 * back through a pipe. */
static int run_child(const char *self, enum row row, int nthreads, double secs,
		     struct result *res)
{
	int fds[2];
	pid_t pid;
	char nt[16], sc[32], fd[16];

	if (pipe(fds) != 0)
		return -1;
	snprintf(nt, sizeof(nt), "%d", nthreads);
	snprintf(sc, sizeof(sc), "%.3f", secs);
	snprintf(fd, sizeof(fd), "%d", fds[1]);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		setenv("RSEQKIT_NO_SLICE", "1", 1);
		execl(self, self, "--row", row_arg[row], "--threads", nt, "--secs", sc, "--result-fd",
		      fd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -1;
	}
	size_t got = 0;
	while (got < sizeof(*res)) {
		ssize_t n = read(fds[0], (char *)res + got, sizeof(*res) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fds[0]);
	int status;
	waitpid(pid, &status, 0);
	return got == sizeof(*res) && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void print_row(enum row row, const struct result *r, const struct result *base)
{
	double mops = (double)r->ops / r->secs / 1e6;
	printf("  %-24s %9.3f %9.3f %9.3f %9.3f %10" PRIu64 " %8.1f %9" PRIu64, row_name[row], mops,
	       percentile(r, 0.50) / 1e3, percentile(r, 0.99) / 1e3, percentile(r, 0.999) / 1e3,
	       r->preempted, r->ops ? 1e6 * (double)r->preempted / (double)r->ops : 0.0, r->grants);
	if (base != NULL && base->ops > 0 && r != base)
		printf("   %5.2fx", mops / ((double)base->ops / base->secs / 1e6));
	printf("\n");
}

/* The rows of one run, in order (tools/harness.h); the row without the
 * extension runs in a child (RSEQKIT_NO_SLICE=1: the switch is per
 * process). */
struct rows_run {
	int nthreads;
	double secs;
	struct result *res;
	int err;
};

static void one_row(void *arg, int r, int rep)
{
	struct rows_run *a = arg;

	(void)rep;
	if (r == ROW_WITHOUT)
		a->err |= run_child("/proc/self/exe", ROW_WITHOUT, a->nthreads, a->secs, &a->res[r]);
	else
		a->err |= run_row((enum row)r, a->nthreads, a->secs, &a->res[r]);
}

int main(int argc, char **argv)
{
	int nthreads = 0, check = 0, result_fd = -1;
	double secs = 2.0;
	const char *only = NULL;
	struct result *res = calloc(NROWS, sizeof(*res));
	int err = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--check") == 0)
			check = 1;
		else if (strcmp(argv[i], "--secs") == 0 && i + 1 < argc)
			secs = atof(argv[++i]);
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			nthreads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--row") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "--result-fd") == 0 && i + 1 < argc)
			result_fd = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: slice-bench [--secs S] [--threads N] [--check] "
					"[--row with|without|mutex]\n");
			return 2;
		}
	}
	if (res == NULL || secs <= 0 || secs > 3600 || nthreads < 0 || nthreads > 4096) {
		fprintf(stderr, "slice-bench: bad arguments\n");
		return 2;
	}
	if (nthreads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		nthreads = 4 * (int)(n > 0 ? n : 1);
	}
	if (only != NULL) { /* one row, in this process (the child of run_child) */
		enum row row = NROWS;
		for (int r = 0; r < NROWS; r++)
			if (strcmp(only, row_arg[r]) == 0)
				row = (enum row)r;
		if (row == NROWS) {
			fprintf(stderr, "slice-bench: unknown row %s\n", only);
			return 2;
		}
		err = run_row(row, nthreads, secs, &res[0]);
		if (result_fd >= 0) {
			if (write(result_fd, &res[0], sizeof(res[0])) != (ssize_t)sizeof(res[0]))
				err = -1;
		} else {
			print_row(row, &res[0], NULL);
		}
		return err != 0;
	}

	int offered = rsk_slice_available();
	printf("slice-bench: rsk_spinlock at %d threads on %ld online CPUs, %.1f s per row; "
	       "time-slice extension %s\n",
	       nthreads, sysconf(_SC_NPROCESSORS_ONLN), secs,
	       offered ? "offered" : "not offered here (the \"extension\" row runs without it)");
	struct rows_run rr = {nthreads, secs, res, 0};
	harness_round_robin(NROWS, 1, one_row, &rr);
	err |= rr.err;
	printf("  %-24s %9s %9s %9s %9s %10s %8s %9s   %s\n", "row", "Mops/s", "p50 us", "p99 us",
	       "p99.9 us", "preempted", "per Mop", "grants", "vs without");
	for (int r = 0; r < NROWS; r++)
		print_row((enum row)r, &res[r], &res[ROW_WITHOUT]);
	printf("  (hold: lock taken to released; preempted: holds over %.0f us; grants: the "
	       "kernel's grants holders saw at their region's end)\n",
	       PREEMPTED_NS / 1e3);
	if (check) {
		int ok = res[ROW_WITH].checked_ok && res[ROW_WITHOUT].checked_ok &&
			 res[ROW_MUTEX].checked_ok;
		int labelled = offered ? res[ROW_WITH].enabled_threads == nthreads :
					 res[ROW_WITH].enabled_threads == 0;
		labelled = labelled && res[ROW_WITHOUT].enabled_threads == 0 &&
			   res[ROW_WITHOUT].grants == 0;
		printf("slice-bench: check: sums %s; rows %s (extension enabled in %d of %d threads "
		       "of the extension row, %d of the row without; grants without: %" PRIu64 ")\n",
		       ok ? "exact" : "WRONG", labelled ? "as labelled" : "NOT as labelled",
		       res[ROW_WITH].enabled_threads, nthreads, res[ROW_WITHOUT].enabled_threads,
		       res[ROW_WITHOUT].grants);
		if (!ok || !labelled || err)
			return 1;
	}
	return err != 0;
}
