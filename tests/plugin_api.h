/* SPDX-License-Identifier: MIT */
/* The interface between tests/registration_dlopen.c and its plugin. */
#ifndef RSEQKIT_TESTS_PLUGIN_API_H
#define RSEQKIT_TESTS_PLUGIN_API_H

#define PLUGIN_EXPORT __attribute__((visibility("default")))
#define PLUGIN_MAX_THREADS 64

struct plugin_report {
	int available, owner;	/* the plugin's rsk_status() */
	int threads;		/* threads that ran, the caller included */
	int registered;		/* of those, how many had thread_registered */
	int fallbacks;		/* adds that took the slow path */
	int cpu_bad;		/* rsk_cpu() answers outside the possible CPUs */
	long sum, expected;
};

/* Runs nthreads threads plus the caller, reps per-CPU adds each. */
typedef int plugin_run_fn(int nthreads, int reps, struct plugin_report *r);
/* rsk_prepare_unload() in the calling thread. */
typedef void plugin_fini_fn(void);
/* reps per-CPU adds in the calling thread, on the plugin's own slots (for
 * tests/registration_unload.c); returns the adds that took the slow path. */
typedef int plugin_use_fn(int reps);

#endif
