/* SPDX-License-Identifier: MIT */
/*
 * dlclose() of a plugin whose sections ran in threads that do nothing to
 * prepare for it (issue 14, item 6), in every registration mode, for both
 * plugins of tests/plugin/ (plugin-embedded.so carries its own copy of
 * rseqkit, plugin-shared.so needs librseqkit.so and calls
 * rsk_prepare_unload() once, in its destructor):
 *
 *   8 host threads run for the whole test; in each of CYCLES cycles the
 *   main thread loads the plugin, lets every thread run its sections
 *   (plugin_use()) a few times, takes it away from them, unloads it, and
 *   lets them sleep, yield and migrate while nothing is mapped there.
 *
 * A descriptor pointer left armed into the unmapped plugin makes the kernel
 * kill the process at that thread's next preemption: the child dies and
 * the driver reports it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include "harness.h"
#include "plugin_api.h"

#define MAX_CPUS 1024
#define HOST_THREADS 8
#define CYCLES 100
#define USES_PER_CYCLE 3

static int cpus[MAX_CPUS], ncpus;

static pthread_rwlock_t plugin_lock = PTHREAD_RWLOCK_INITIALIZER;
static plugin_use_fn *use; /* under plugin_lock */
static int cycle, stop;
static int used[HOST_THREADS];	   /* uses in the current cycle */
static long fallbacks, uses_total;

static void *host_thread(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct timespec nap = { 0, 20000 };

	for (unsigned i = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); i++) {
		pthread_rwlock_rdlock(&plugin_lock);
		if (use != NULL && __atomic_load_n(&used[me], __ATOMIC_RELAXED) < USES_PER_CYCLE) {
			int f = use(50);
			__atomic_add_fetch(&fallbacks, f, __ATOMIC_RELAXED);
			__atomic_add_fetch(&uses_total, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&used[me], 1, __ATOMIC_RELEASE);
		}
		pthread_rwlock_unlock(&plugin_lock);
		/* Be preempted, block, migrate: each makes the kernel read the
		 * thread's descriptor pointer. */
		if (i % 4 == 0)
			nanosleep(&nap, NULL);
		else
			sched_yield();
		if (ncpus > 1 && i % 16 == 0)
			pin_to(cpus[(i / 16 + (unsigned)me) % (unsigned)ncpus]);
	}
	return NULL;
}

static void body(const struct test_mode *m, int argc, char **argv)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	pthread_t th[HOST_THREADS];
	int started = 0, loaded = 0, gone = 0;

	if (argc < 1 || m->owner == OWNER_ANY) {
		tap_skip("rseq(2) unavailable (or no variant given)", "unload test");
		return;
	}
	int embedded = strcmp(argv[0], "embedded") == 0;
	ncpus = allowed_cpus(cpus, MAX_CPUS);
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	dir[n > 0 ? n : 0] = '\0';
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	snprintf(path, sizeof(path), "%s/plugin-%s.so", dir, embedded ? "embedded" : "shared");

	for (int t = 0; t < HOST_THREADS; t++)
		if (pthread_create(&th[t], NULL, host_thread, (void *)(intptr_t)t) == 0)
			started++;
	tap_ok(started == HOST_THREADS, "%d host threads running", started);

	long armed_cycles = 0;
	for (cycle = 0; cycle < CYCLES; cycle++) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (h == NULL) {
			tap_diag("cycle %d: dlopen: %s", cycle, dlerror());
			break;
		}
		plugin_use_fn *fn = (plugin_use_fn *)dlsym(h, "plugin_use");
		if (fn == NULL) {
			dlclose(h);
			break;
		}
		loaded++;
		pthread_rwlock_wrlock(&plugin_lock);
		for (int t = 0; t < HOST_THREADS; t++)
			used[t] = 0;
		long before = __atomic_load_n(&fallbacks, __ATOMIC_RELAXED);
		use = fn;
		pthread_rwlock_unlock(&plugin_lock);
		/* Every host thread runs the plugin's sections. */
		for (int t = 0; t < started; t++)
			while (__atomic_load_n(&used[t], __ATOMIC_ACQUIRE) < USES_PER_CYCLE)
				sched_yield();
		pthread_rwlock_wrlock(&plugin_lock);
		use = NULL; /* no thread runs plugin code from here on */
		if (__atomic_load_n(&fallbacks, __ATOMIC_RELAXED) == before)
			armed_cycles++;
		pthread_rwlock_unlock(&plugin_lock);
		dlclose(h);
		void *again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
		if (again == NULL)
			gone++;
		else
			dlclose(again);
		/* The threads go on with the plugin unmapped. */
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	tap_ok(loaded == CYCLES && gone == CYCLES,
	       "%d cycles of load, use by %d threads, unload: %d loaded, %d really unloaded", CYCLES,
	       started, loaded, gone);
	tap_ok(uses_total == (long)CYCLES * started * USES_PER_CYCLE,
	       "every thread ran the plugin %d times per cycle (%ld uses)", USES_PER_CYCLE,
	       uses_total);
	/* Where the plugin's copy of rseqkit runs sections at all (libc's
	 * registration; its own area is in dynamic TLS: slow paths), every
	 * cycle left descriptors armed in the threads - or this test tests
	 * nothing. */
	if (m->owner == RSK_OWNER_LIBC)
		tap_ok(armed_cycles == CYCLES && fallbacks == 0,
		       "the plugin's sections ran on their fast path in every cycle (%ld of %d, %ld "
		       "fallbacks)",
		       armed_cycles, CYCLES, fallbacks);
	else
		tap_ok(fallbacks == (long)CYCLES * started * USES_PER_CYCLE * 50,
		       "the plugin's copy declines its dynamic-TLS area: every add on the slow path "
		       "(%ld)",
		       fallbacks);
	tap_ok(1, "the process survived (alive after %d unloads)", gone);
}

int main(int argc, char **argv)
{
	static const char *const variants[] = { "embedded", "shared", NULL };

	return run_modes_variants(argc, argv, body, variants);
}
