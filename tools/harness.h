/* SPDX-License-Identifier: MIT */
/*
 * tools/harness.h - the timing pieces every bench tool shares
 * (rseqkit-bench's tools/bench/harness.c, mempool-bench, slice-bench), so
 * that their figures are taken the same way:
 *
 *   harness_now_ns()      CLOCK_MONOTONIC in ns (the vDSO: no system call
 *                         where the kernel has a vDSO clock source)
 *   harness_now_s()       the same in seconds
 *   harness_pin_thread()  pin the calling thread to one CPU
 *   harness_median()      the median of n samples (sorts them)
 *   harness_round_robin() repetitions interleaved over the rivals: rep 0
 *                         of every rival, then rep 1, ..., so that
 *                         frequency changes and background noise hit them
 *                         all alike
 *
 * Header-only: each tool is one program built from its own sources.
 */
#ifndef RSEQKIT_TOOLS_HARNESS_H
#define RSEQKIT_TOOLS_HARNESS_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t harness_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double harness_now_s(void)
{
	return (double)harness_now_ns() * 1e-9;
}

/* 0, or an errno value (the CPU is not allowed, ...). */
static inline int harness_pin_thread(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static inline int harness_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n-1], n > 0; v is left sorted (v[0] the smallest,
 * v[n-1] the largest).  An even n gives the mean of the middle two. */
static inline double harness_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), harness_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* reps repetitions of nrivals rivals, interleaved: fn(arg, rival, rep)
 * does one run of one rival and keeps its sample. */
static inline void harness_round_robin(int nrivals, int reps,
				       void (*fn)(void *arg, int rival, int rep), void *arg)
{
	for (int rep = 0; rep < reps; rep++)
		for (int r = 0; r < nrivals; r++)
			fn(arg, r, rep);
}

#endif /* RSEQKIT_TOOLS_HARNESS_H */
