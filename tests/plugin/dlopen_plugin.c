/* SPDX-License-Identifier: MIT */
/*
 * A plugin that uses rseqkit, for tests/registration_dlopen.c.  Built
 * twice by the Makefile: plugin-shared.so needs librseqkit.so (which is
 * then loaded and unloaded with it), plugin-embedded.so carries its own
 * hidden copy of librseqkit.a.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <rseqkit/thread.h>
#include <rseqkit/ops.h>
#include "../plugin_api.h"

static intptr_t *slots;
static int nslots;
static struct plugin_report *report;

static void work(int reps)
{
	struct rsk_status st;
	int fallbacks = 0, cpu_bad = 0;

	rsk_status(&st);
	if (st.thread_registered)
		__atomic_add_fetch(&report->registered, 1, __ATOMIC_RELAXED);
	for (int n = 0; n < reps; n++) {
		int c = rsk_cpu();
		if (c < 0 || c >= nslots)
			cpu_bad++;
		for (;;) {
			int cpu = rsk_index(RSK_INDEX_CPU);
			if (cpu < 0 || cpu >= nslots) {
				/* The documented slow path. */
				__atomic_add_fetch(&slots[0], 1, __ATOMIC_RELAXED);
				fallbacks++;
				break;
			}
			if (rsk_add(RSK_INDEX_CPU, cpu, &slots[cpu * 16], 1) == RSK_OK)
				break;
		}
	}
	__atomic_add_fetch(&report->fallbacks, fallbacks, __ATOMIC_RELAXED);
	__atomic_add_fetch(&report->cpu_bad, cpu_bad, __ATOMIC_RELAXED);
}

struct job {
	int reps;
};

static void *worker(void *arg)
{
	struct job *j = arg;

	work(j->reps);
	/* This thread ran sections from code about to be unloaded. */
	rsk_prepare_unload();
	return NULL;
}

PLUGIN_EXPORT int plugin_run(int nthreads, int reps, struct plugin_report *r)
{
	pthread_t th[PLUGIN_MAX_THREADS];
	struct job j = { reps };
	struct rsk_status st;
	int started = 0;

	memset(r, 0, sizeof(*r));
	report = r;
	rsk_status(&st);
	r->available = st.available;
	r->owner = st.owner;
	nslots = rsk_possible_cpus();
	slots = aligned_alloc(128, (size_t)nslots * 16 * sizeof(intptr_t));
	if (slots == NULL)
		return -1;
	memset(slots, 0, (size_t)nslots * 16 * sizeof(intptr_t));
	if (nthreads > PLUGIN_MAX_THREADS)
		nthreads = PLUGIN_MAX_THREADS;
	for (int t = 0; t < nthreads; t++)
		if (pthread_create(&th[t], NULL, worker, &j) == 0)
			started++;
	work(reps); /* the calling thread too */
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	r->threads = started + 1;
	r->expected = (long)(started + 1) * reps;
	for (int c = 0; c < nslots; c++)
		r->sum += slots[c * 16];
	free(slots);
	slots = NULL;
	return 0;
}

PLUGIN_EXPORT void plugin_fini(void)
{
	rsk_prepare_unload();
}

/* ---- for tests/registration_unload.c: sections run in the host's
 * threads, which never call anything to prepare the unload ---- */

static intptr_t use_slots[64 * 16];

PLUGIN_EXPORT int plugin_use(int reps)
{
	int n = rsk_possible_cpus() < 64 ? rsk_possible_cpus() : 64, fallbacks = 0;

	/* Makes the calling thread known to this copy (rsk_prepare_unload(3):
	 * in a libc-owned process, threads that made no out-of-line call are
	 * not). */
	rsk_init();
	for (int k = 0; k < reps; k++) {
		for (;;) {
			int cpu = rsk_index(RSK_INDEX_CPU);
			if (cpu < 0 || cpu >= n) {
				__atomic_add_fetch(&use_slots[0], 1, __ATOMIC_RELAXED);
				fallbacks++;
				break;
			}
			if (rsk_add(RSK_INDEX_CPU, cpu, &use_slots[cpu * 16], 1) == RSK_OK)
				break;
		}
	}
	return fallbacks;
}

#ifdef PLUGIN_SHARED
/* A plugin that uses librseqkit.so: the library may stay loaded after the
 * plugin is gone, so the plugin clears its own descriptors, in every
 * thread, once, naming itself by the address of one of its functions.
 * (rsk_prepare_unload() finds the caller from its return address, which a
 * compiler that makes the call a tail call turns into ld.so's.) */
__attribute__((destructor)) static void plugin_unload(void)
{
	rsk_prepare_unload_object((const void *)plugin_use);
}
#endif
