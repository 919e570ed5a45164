/* SPDX-License-Identifier: MIT */
/*
 * Identity: what rsk_cpu(), rsk_index(), rsk_mm_cid(), rsk_node() and
 * rsk_possible_cpus() answer, checked against the kernel's own answers
 * (sched_getcpu(), getcpu(2), sysfs) while pinned to each allowed CPU in
 * turn, in the main thread and in a new thread, in every registration mode
 * (libc-owned, library-owned, library-owned with its own TLS area).
 *
 * "identity.t --child auto" runs one pass in the environment as it is
 * (the valgrind and seccomp tests use that): then rseq may be unavailable
 * and the checks expect the documented fallbacks instead.
 */
#include <pthread.h>
#include <sys/auxv.h>
#include "harness.h"

#define MAX_CPUS 1024
static int cpus[MAX_CPUS], ncpus;
static int possible;

/* ---- mm_cid with a known number of live threads ---- */

#define CID_THREADS 8
struct cid_sample {
	int cid, index;
};
static pthread_barrier_t cid_barrier;
static struct cid_sample cid_samples[CID_THREADS];

static void *cid_worker(void *arg)
{
	struct cid_sample *s = arg;

	pthread_barrier_wait(&cid_barrier); /* everyone is alive now */
	s->cid = rsk_mm_cid();
	s->index = rsk_index(RSK_INDEX_CID);
	pthread_barrier_wait(&cid_barrier); /* nobody leaves before all read */
	return NULL;
}

static void check_mm_cid(void)
{
	int avail = rsk_mm_cid_available();
	int live = CID_THREADS, limit;
	pthread_t th[CID_THREADS];
	int bad = 0, badidx = 0;

	/* Single-threaded (this runs before any other thread exists). */
	if (avail) {
		tap_ok(rsk_mm_cid() == 0, "single thread: rsk_mm_cid() == 0 (got %d)", rsk_mm_cid());
		tap_ok(rsk_index(RSK_INDEX_CID) == 0, "single thread: rsk_index(CID) == 0 (got %d)",
		       rsk_index(RSK_INDEX_CID));
	} else {
		int c = rsk_mm_cid();
		tap_ok(c >= 0 && c < possible,
		       "mm_cid unavailable: rsk_mm_cid() falls back to a CPU number (got %d)", c);
		tap_ok(rsk_index(RSK_INDEX_CID) == -1, "mm_cid unavailable: rsk_index(CID) == -1 (got %d)",
		       rsk_index(RSK_INDEX_CID));
	}

	pthread_barrier_init(&cid_barrier, NULL, CID_THREADS);
	for (int t = 1; t < CID_THREADS; t++)
		if (pthread_create(&th[t], NULL, cid_worker, &cid_samples[t]) != 0)
			live = -1;
	if (live < 0) {
		tap_ok(0, "could not start %d threads", CID_THREADS);
		return;
	}
	cid_worker(&cid_samples[0]);
	for (int t = 1; t < CID_THREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&cid_barrier);

	limit = avail ? (live < ncpus ? live : ncpus) : possible;
	for (int t = 0; t < CID_THREADS; t++) {
		struct cid_sample *s = &cid_samples[t];
		if (s->cid < 0 || s->cid >= limit) {
			bad++;
			tap_diag("thread %d: mm_cid %d, limit %d", t, s->cid, limit);
		}
		if (avail ? (s->index < 0 || s->index >= limit) : s->index != -1) {
			badidx++;
			tap_diag("thread %d: rsk_index(CID) %d", t, s->index);
		}
	}
	if (avail) {
		tap_ok(bad == 0, "%d live threads: every rsk_mm_cid() < min(threads, allowed CPUs) = %d",
		       live, limit);
		tap_ok(badidx == 0, "%d live threads: every rsk_index(CID) in [0, %d)", live, limit);
	} else {
		tap_ok(bad == 0, "%d threads: fallback rsk_mm_cid() is a CPU below %d", live, limit);
		tap_ok(badidx == 0, "%d threads: rsk_index(CID) == -1 without mm_cid", live);
	}
}

/* ---- pinned to each CPU ---- */

struct pin_result {
	int pin_failed, cpu_bad, index_bad, cid_bad, node_bad, start_bad, add_bad;
	int registered, available;
};

static void pinned_pass(struct pin_result *r)
{
	struct rsk_status st;
	int nodes = read_list_bound("/sys/devices/system/node/possible");

	rsk_status(&st);
	r->registered = st.thread_registered;
	r->available = st.available;
	for (int i = 0; i < ncpus; i++) {
		int c = cpus[i];
		unsigned gc = 0, gn = 0;

		if (pin_to(c) != 0) {
			r->pin_failed++;
			continue;
		}
		int cpu = rsk_cpu(), sc = sched_getcpu();
		if (cpu != c || sc != c) {
			r->cpu_bad++;
			tap_diag("pinned to %d: rsk_cpu() %d, sched_getcpu() %d", c, cpu, sc);
		}
		int idx = rsk_index(RSK_INDEX_CPU);
		if (idx != (st.thread_registered ? c : -1)) {
			r->index_bad++;
			tap_diag("pinned to %d: rsk_index(CPU) %d", c, idx);
		}
		int start = rsk_cpu_start();
		if (start < 0 || start >= possible) {
			r->start_bad++;
			tap_diag("pinned to %d: rsk_cpu_start() %d", c, start);
		}
		if (!rsk_mm_cid_available()) {
			int cid = rsk_mm_cid();
			if (cid != c || rsk_index(RSK_INDEX_CID) != -1) {
				r->cid_bad++;
				tap_diag("pinned to %d: fallback rsk_mm_cid() %d", c, cid);
			}
		}
		int node = rsk_node();
		if (raw_getcpu(&gc, &gn) != 0 || node != (int)gn || node < 0 ||
		    node >= (nodes > 0 ? nodes : 1)) {
			r->node_bad++;
			tap_diag("pinned to %d: rsk_node() %d, getcpu node %u, nodes %d", c, node, gn,
				 nodes);
		}
		/* A per-CPU add on this CPU's slot commits while registered;
		 * without a registration the section must refuse (abort). */
		intptr_t v = 0;
		int ret = RSK_ABORTED;
		for (int k = 0; k < 1000 && ret == RSK_ABORTED; k++)
			ret = rsk_add(RSK_INDEX_CPU, c, &v, 1);
		if (st.thread_registered ? ret != RSK_OK || v != 1 : ret != RSK_ABORTED || v != 0) {
			r->add_bad++;
			tap_diag("pinned to %d: rsk_add returned %d, value %ld", c, ret, (long)v);
		}
	}
	unpin();
}

static void *pinned_thread(void *arg)
{
	pinned_pass(arg);
	return NULL;
}

static void report_pinned(const char *who, const struct pin_result *r)
{
	tap_ok(r->pin_failed == 0, "%s: pinned to each of %d allowed CPUs", who, ncpus);
	tap_ok(r->available ? r->registered : !r->registered,
	       "%s: thread_registered %d matches available %d", who, r->registered, r->available);
	tap_ok(r->cpu_bad == 0, "%s: rsk_cpu() == sched_getcpu() == the pinned CPU", who);
	tap_ok(r->index_bad == 0, "%s: rsk_index(CPU) is the pinned CPU (or -1 unregistered)", who);
	tap_ok(r->start_bad == 0, "%s: rsk_cpu_start() is a possible CPU", who);
	tap_ok(r->node_bad == 0, "%s: rsk_node() == getcpu(2) node, below the possible nodes", who);
	tap_ok(r->add_bad == 0, "%s: per-CPU add on the pinned CPU's index (commits iff registered)",
	       who);
	if (rsk_mm_cid_available())
		tap_skip("mm_cid is the kernel's", "%s: fallback rsk_mm_cid() is the pinned CPU", who);
	else
		tap_ok(r->cid_bad == 0, "%s: fallback rsk_mm_cid() is the pinned CPU", who);
}

static void body(const struct test_mode *m, int argc, char **argv)
{
	struct rsk_status st;
	(void)argc, (void)argv;

	ncpus = allowed_cpus(cpus, MAX_CPUS);
	rsk_status(&st);
	possible = rsk_possible_cpus();
	tap_diag("owner %s, reason: %s, feature size %u, registered %u, cid %d, node %d",
		 rsk_owner_name(st.owner), st.reason, st.feature_size, st.registered_size,
		 st.mm_cid_available, st.node_id_available);

	if (m->owner != OWNER_ANY) {
		tap_ok(st.available && (int)st.owner == m->owner,
		       "owner is %s (got %s, available %d)", rsk_owner_name(m->owner),
		       rsk_owner_name(st.owner), st.available);
		tap_ok(st.reason && strstr(st.reason, m->reason),
		       "reason mentions \"%s\" (\"%s\")", m->reason, st.reason);
	}

	/* mm_cid first: no other thread has existed yet. */
	check_mm_cid();

	int bound = read_list_bound("/sys/devices/system/cpu/possible");
	if (bound > 0)
		tap_ok(possible == bound && st.possible_cpus == bound,
		       "rsk_possible_cpus() %d == /sys/devices/system/cpu/possible bound %d", possible,
		       bound);
	else
		tap_skip("no /sys/devices/system/cpu/possible", "rsk_possible_cpus() matches sysfs");
	tap_ok(ncpus > 0 && cpus[ncpus - 1] < possible,
	       "every allowed CPU (%d, highest %d) is below rsk_possible_cpus()", ncpus,
	       ncpus ? cpus[ncpus - 1] : -1);

	unsigned long fs = getauxval(RSK_ABI_AT_RSEQ_FEATURE_SIZE);
	tap_ok(st.feature_size == (fs ? fs : 20), "feature_size %u matches the auxv (%lu)",
	       st.feature_size, fs);
	tap_ok(st.available ? st.registered_size >= 32 : st.registered_size == 0,
	       "registered_size %u fits availability %d", st.registered_size, st.available);
	tap_ok(st.mm_cid_available == rsk_mm_cid_available() &&
		       st.node_id_available == rsk_node_id_available(),
	       "rsk_status() and the *_available() functions agree");
	tap_ok(st.mm_cid_available ? st.available && st.feature_size >= 28 : 1,
	       "mm_cid only claimed with rseq and a kernel feature size >= 28");

	struct pin_result r = { 0 };
	pinned_pass(&r);
	report_pinned("main thread", &r);

	pthread_t th;
	struct pin_result rt = { 0 };
	if (pthread_create(&th, NULL, pinned_thread, &rt) == 0) {
		pthread_join(th, NULL);
		report_pinned("new thread", &rt);
	} else {
		tap_ok(0, "could not create a thread");
	}
}

int main(int argc, char **argv)
{
	return run_modes(argc, argv, body);
}
