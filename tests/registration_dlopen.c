/* SPDX-License-Identifier: MIT */
/*
 * dlopen + use + dlclose of a plugin that uses rseqkit, in every
 * registration mode, two ways:
 *   shared    plugin-shared.so needs librseqkit.so: both are loaded by
 *             dlopen() and unloaded by dlclose(); this program uses its
 *             own (static) copy of rseqkit only afterwards;
 *   embedded  plugin-embedded.so carries its own hidden copy of rseqkit
 *             while this program uses its copy before and after.
 * The plugin runs per-CPU adds in several threads, each calling
 * rsk_prepare_unload() when done, and rsk_prepare_unload() in the calling
 * thread before dlclose().  Afterwards the process must keep running:
 * more threads, preemption, migration, sleeping, heap intact - then load
 * the plugin a second time, and finally use its own copy of rseqkit.
 * The plugins are built by the Makefile next to this test's binary.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include "harness.h"
#include "plugin_api.h"

#define MAX_CPUS 1024
static int cpus[MAX_CPUS], ncpus;
static const struct test_mode *mode;
static char dir[PATH_MAX];

/* ---- the plugin ---- */

static void run_plugin(const char *path, const char *what, int round)
{
	struct plugin_report r;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!tap_ok(h != NULL, "%s %d: dlopen %s", what, round, h ? "" : dlerror()))
		return;
	plugin_run_fn *run = (plugin_run_fn *)dlsym(h, "plugin_run");
	plugin_fini_fn *fini = (plugin_fini_fn *)dlsym(h, "plugin_fini");
	if (!tap_ok(run && fini, "%s %d: plugin entry points found", what, round))
		return;

	int ret = run(8, 2000, &r);
	tap_ok(ret == 0 && r.threads == 9, "%s %d: plugin ran 8 threads + caller (%d, %d)", what,
	       round, ret, r.threads);
	tap_ok(r.sum == r.expected, "%s %d: plugin's per-CPU adds exact (%ld == %ld)", what, round,
	       r.sum, r.expected);
	tap_ok(r.cpu_bad == 0, "%s %d: plugin's rsk_cpu() always a possible CPU", what, round);
	if (mode->owner == RSK_OWNER_LIBRARY) {
		/* A dlopen'ed copy's own area is in dynamic TLS, at no fixed
		 * offset from the thread pointer: it must not use it. */
		tap_ok(!r.available && r.owner == RSK_OWNER_NONE,
		       "%s %d: plugin's copy declines its dynamic-TLS area (owner %s)", what, round,
		       rsk_owner_name(r.owner));
		tap_ok(r.registered == 0 && r.fallbacks == r.expected,
		       "%s %d: plugin threads all take the slow path (%d registered, %d fallbacks)",
		       what, round, r.registered, r.fallbacks);
	} else {
		tap_ok(r.available && r.owner == mode->owner, "%s %d: plugin sees owner %s (got %s)",
		       what, round, rsk_owner_name(mode->owner), rsk_owner_name(r.owner));
		tap_ok(r.registered == r.threads && r.fallbacks == 0,
		       "%s %d: every plugin thread registered, no slow path (%d/%d, %d fallbacks)",
		       what, round, r.registered, r.threads, r.fallbacks);
	}

	fini();
	tap_ok(dlclose(h) == 0, "%s %d: dlclose", what, round);
	/* Make sure the code really went away, or this test tests nothing. */
	void *again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	void *lib = dlopen("librseqkit.so.1", RTLD_NOW | RTLD_NOLOAD);
	tap_ok(again == NULL && lib == NULL, "%s %d: plugin and librseqkit.so unloaded", what, round);
	if (again)
		dlclose(again);
	if (lib)
		dlclose(lib);
}

/* ---- life after dlclose ---- */

#define SURVIVORS 16
#define HEAP_BLOCKS 256

static void *survivor(void *arg)
{
	struct timespec ms = { 0, 1000000 };
	int *ok = arg;

	for (int i = 0; i < 200; i++) {
		if (ncpus > 1)
			pin_to(cpus[i % ncpus]); /* migrate: the kernel rewrites cpu_id */
		sched_yield();
		if (i % 20 == 0)
			nanosleep(&ms, NULL);
		if (sched_getcpu() < 0)
			return NULL;
	}
	*ok = 1;
	return NULL;
}

/* Threads come and go, everyone is preempted, migrated and sleeps; heap
 * blocks must keep their contents (a stale registration of freed TLS
 * would have the kernel write into them). */
static void survive(const char *what)
{
	pthread_t th[SURVIVORS];
	int ok[SURVIVORS + 1] = { 0 }, started = 0, good = 0, damaged = 0;
	unsigned char *blocks[HEAP_BLOCKS];
	size_t sizes[HEAP_BLOCKS];

	for (int b = 0; b < HEAP_BLOCKS; b++) {
		sizes[b] = 16 + (size_t)(b * 37) % 2048;
		blocks[b] = malloc(sizes[b]);
		if (blocks[b])
			memset(blocks[b], 0xa5, sizes[b]);
	}
	for (int t = 0; t < SURVIVORS; t++)
		if (pthread_create(&th[t], NULL, survivor, &ok[t]) == 0)
			started++;
	survivor(&ok[SURVIVORS]);
	unpin();
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t <= SURVIVORS; t++)
		good += ok[t];
	tap_ok(started == SURVIVORS && good == SURVIVORS + 1,
	       "%s: %d new threads and the main thread migrate, yield and sleep", what, good);
	for (int b = 0; b < HEAP_BLOCKS; b++) {
		if (blocks[b] == NULL) {
			damaged++;
			continue;
		}
		for (size_t i = 0; i < sizes[b]; i++)
			if (blocks[b][i] != 0xa5) {
				damaged++;
				break;
			}
		free(blocks[b]);
	}
	tap_ok(damaged == 0, "%s: heap blocks intact (%d damaged)", what, damaged);
}

/* ---- this program's own copy ---- */

static void own_copy(const char *what)
{
	struct rsk_status st;
	int possible = rsk_possible_cpus(), bad = 0;
	intptr_t *slots = calloc((size_t)possible, sizeof(intptr_t));

	rsk_status(&st);
	tap_ok(st.available && (int)st.owner == mode->owner && st.thread_registered,
	       "%s: this program's rseqkit: owner %s, registered (%s, %d)", what,
	       rsk_owner_name(mode->owner), rsk_owner_name(st.owner), st.thread_registered);
	for (int i = 0; i < ncpus; i++) {
		int c = cpus[i];
		if (pin_to(c) != 0 || rsk_cpu() != c || rsk_index(RSK_INDEX_CPU) != c) {
			bad++;
			continue;
		}
		for (int k = 0; k < 500; k++) {
			int idx;
			while ((idx = rsk_index(RSK_INDEX_CPU)) >= 0 &&
			       rsk_add(RSK_INDEX_CPU, idx, &slots[idx], 1) != RSK_OK)
				;
			if (idx < 0)
				break;
		}
		if (slots[c] != 500)
			bad++;
	}
	unpin();
	tap_ok(bad == 0, "%s: this program's identity and per-CPU adds exact on each CPU", what);
	free(slots);
}

static void body(const struct test_mode *m, int argc, char **argv)
{
	char path[PATH_MAX + 32];
	int embedded;

	mode = m;
	if (argc < 1 || m->owner == OWNER_ANY) {
		tap_skip("rseq(2) unavailable (or no variant given)", "dlopen test");
		return;
	}
	embedded = strcmp(argv[0], "embedded") == 0;
	ncpus = allowed_cpus(cpus, MAX_CPUS);
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	dir[n > 0 ? n : 0] = '\0';
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	snprintf(path, sizeof(path), "%s/plugin-%s.so", dir, embedded ? "embedded" : "shared");

	if (embedded)
		own_copy("before dlopen");
	run_plugin(path, "load", 1);
	survive("after dlclose");
	run_plugin(path, "reload", 2);
	survive("after the second dlclose");
	own_copy("at the end");
}

int main(int argc, char **argv)
{
	static const char *const variants[] = { "shared", "embedded", NULL };

	return run_modes_variants(argc, argv, body, variants);
}
