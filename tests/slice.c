/* SPDX-License-Identifier: MIT */
/*
 * slice.t - the time-slice extension (<rseqkit/slice.h>).
 *
 * Everywhere: rsk_slice_available() agrees with the kernel's own word (the
 * SLICE_EXT_AVAILABLE flag it writes into a registered area), and where the
 * extension is not offered, begin/end, the spinlock and the gates leave the
 * area's slice_ctrl alone and rsk_slice_enable() says -EOPNOTSUPP.
 *
 * Where it is offered (make check-slice boots a kernel built with it):
 * enabling; the request byte set and cleared by begin/end, nested regions,
 * a spinlock holder's and a gate holder's regions; a grant observed while a
 * competing thread pinned to the same CPU wants the CPU, ended with the
 * yield and counted by the kernel (debugfs rseq/stats: sgrant, syield),
 * with a control loop that makes no request and must see no grant; a
 * system call inside a granted region ending the grant (sabort); fork.
 *
 *   slice.t [--expect available|absent]
 *
 * --expect makes the outcome a requirement (check-slice and check-kernels
 * know which kernel they booted); without it the test follows the kernel.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

static struct rsk_abi_area *area;

static uint8_t req(void)
{
	return __atomic_load_n((uint8_t *)area + RSK_ABI_OFF_SLICE_REQUEST, __ATOMIC_RELAXED);
}

static uint8_t granted(void)
{
	return __atomic_load_n((uint8_t *)area + RSK_ABI_OFF_SLICE_GRANTED, __ATOMIC_RELAXED);
}

static uint32_t ctrl(void)
{
	return __atomic_load_n(&area->slice_ctrl, __ATOMIC_RELAXED);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* ---- debugfs statistics (CONFIG_RSEQ_STATS) ---- */

static const char *stats_path = "/sys/kernel/debug/rseq/stats";

static int stat_read(const char *key, unsigned long *v)
{
	char line[128];
	FILE *f = fopen(stats_path, "r");
	size_t n = strlen(key);
	int found = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			*v = strtoul(line + n + 1, NULL, 10);
			found = 1;
		}
	fclose(f);
	return found ? 0 : -1;
}

static int stats_ready(void)
{
	unsigned long v;

	if (stat_read("sgrant", &v) == 0)
		return 1;
	/* As root in the test VM: mount debugfs ourselves. */
	(void)mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	return stat_read("sgrant", &v) == 0;
}

/* ---- a competitor on the same CPU ---- */

static volatile int stop_competitor;
static volatile unsigned long competitor_runs;

static void *competitor(void *arg)
{
	pin((int)(intptr_t)arg);
	while (!stop_competitor)
		competitor_runs++;
	return NULL;
}

/* Spin iterations that take about `us` microseconds here. */
static unsigned long calibrate(double us)
{
	unsigned long n = 1000;

	for (;;) {
		double t0 = now();
		for (volatile unsigned long i = 0; i < n; i++)
			;
		double dt = now() - t0;
		if (dt > 2e-3)
			return (unsigned long)((double)n * us * 1e-6 / dt) + 1;
		n *= 2;
	}
}

static void spin(unsigned long n)
{
	for (volatile unsigned long i = 0; i < n; i++)
		;
}

/*
 * Back-to-back regions of about 2 us while a competitor pinned to the same
 * CPU wants it, for at most `secs` or until `want` grants were seen (the
 * granted byte at a region's end).  With request == 0 the same loop makes
 * no request (the control).  Returns the grants seen; *runs is how far the
 * competitor got (it ran: the scheduler did want the CPU).
 */
static unsigned long grant_loop(int request, double secs, unsigned long want, unsigned long *runs)
{
	unsigned long n = calibrate(2.0), seen = 0;
	pthread_t th;
	double t0;

	stop_competitor = 0;
	competitor_runs = 0;
	pin(0);
	if (pthread_create(&th, NULL, competitor, (void *)(intptr_t)0) != 0)
		return 0;
	t0 = now();
	while (seen < want && now() - t0 < secs) {
		for (int i = 0; i < 1000; i++) {
			rsk_slice_t s = request ? rsk_slice_begin() : RSK_SLICE_NONE;
			spin(n);
			seen += granted() != 0;
			rsk_slice_end(s);
		}
	}
	stop_competitor = 1;
	pthread_join(th, NULL);
	*runs = competitor_runs;
	return seen;
}

/*
 * A system call inside a granted region: spin in regions until a grant is
 * seen, then call getppid() at once.  The kernel ends the grant (the word
 * reads 0 after the call) and counts it (sabort).  Returns 1 when it got
 * that far, 0 when no grant came within `secs`; *after is slice_ctrl
 * right after the call.
 */
static int syscall_in_grant(double secs, uint32_t *after)
{
	unsigned long n = calibrate(0.5);
	pthread_t th;
	double t0;
	int done = 0;

	stop_competitor = 0;
	pin(0);
	if (pthread_create(&th, NULL, competitor, (void *)(intptr_t)0) != 0)
		return 0;
	t0 = now();
	while (!done && now() - t0 < secs) {
		for (int i = 0; i < 1000 && !done; i++) {
			rsk_slice_t s = rsk_slice_begin();
			for (int k = 0; k < 8 && !done; k++) {
				spin(n);
				if (granted()) {
					(void)syscall(SYS_getppid);
					*after = ctrl();
					done = 1;
				}
			}
			rsk_slice_end(s);
		}
	}
	stop_competitor = 1;
	pthread_join(th, NULL);
	return done;
}

static void absent_checks(void)
{
	struct rsk_spinlock *l;
	intptr_t gate = 0;
	uint32_t before = ctrl();
	rsk_slice_t s = rsk_slice_begin();

	tap_ok(s == RSK_SLICE_NONE, "absent: rsk_slice_begin() returns RSK_SLICE_NONE (%d)", s);
	tap_ok(ctrl() == before, "absent: slice_ctrl left alone by begin (%#x)", ctrl());
	rsk_slice_end(s);
	tap_ok(rsk_slice_enable() == -EOPNOTSUPP || rsk_slice_enable() == -ENXIO,
	       "absent: rsk_slice_enable() = %d (-EOPNOTSUPP or -ENXIO)", rsk_slice_enable());
	if (rsk_spinlock_create(&l, RSK_INDEX_CPU) == 0) {
		int idx = rsk_spinlock_lock(l);
		uint32_t held = ctrl();
		rsk_spinlock_unlock(l, idx);
		tap_ok(idx >= 0 && held == before && ctrl() == before,
		       "absent: a spinlock holder leaves slice_ctrl alone (%#x, %#x)", held, ctrl());
		rsk_spinlock_destroy(l);
	} else {
		tap_ok(0, "absent: rsk_spinlock_create");
	}
	if (rsk_gate_close(&gate, RSK_INDEX_CPU, 0) == 0) {
		uint32_t held = ctrl();
		rsk_gate_open(&gate);
		tap_ok(held == before && ctrl() == before,
		       "absent: a gate holder leaves slice_ctrl alone (%#x)", held);
	} else {
		tap_ok(0, "absent: rsk_gate_close");
	}
}

static void available_checks(void)
{
	struct rsk_spinlock *l;
	intptr_t gate = 0;
	unsigned long runs = 0, g0 = 0, g1 = 0, y0 = 0, y1 = 0, a0 = 0, a1 = 0;
	int stats;

	tap_ok(rsk_slice_enable() == 0, "rsk_slice_enable() = 0");
	tap_ok(prctl(RSK_ABI_PR_RSEQ_SLICE_EXTENSION, RSK_ABI_PR_RSEQ_SLICE_EXTENSION_GET, 0, 0, 0) ==
		       RSK_ABI_PR_RSEQ_SLICE_EXT_ENABLE,
	       "the kernel says enabled (prctl GET)");
	tap_ok((area->flags & RSK_ABI_FLAG_SLICE_EXT_ENABLED) != 0,
	       "the area's flags say enabled (%#x)", area->flags);

	rsk_slice_t outer = rsk_slice_begin();
	uint8_t r1 = req();
	rsk_slice_t inner = rsk_slice_begin();
	rsk_slice_end(inner);
	uint8_t r2 = req();
	rsk_slice_end(outer);
	tap_ok(outer == RSK_SLICE_OUTER && r1 == 1, "begin: RSK_SLICE_OUTER, request set (%d, %d)",
	       outer, r1);
	tap_ok(inner == RSK_SLICE_NESTED && r2 == 1,
	       "nested begin: RSK_SLICE_NESTED, its end leaves the request (%d, %d)", inner, r2);
	tap_ok(req() == 0, "outer end clears the request");

	if (rsk_spinlock_create(&l, RSK_INDEX_CPU) == 0) {
		int idx = rsk_spinlock_lock(l);
		uint8_t held = req();
		rsk_spinlock_unlock(l, idx);
		tap_ok(idx >= 0 && held == 1 && req() == 0,
		       "a spinlock holder requests while it holds the lock (%d, then %d)", held, req());
		rsk_slice_t s = rsk_slice_begin();
		idx = rsk_spinlock_lock(l);
		rsk_spinlock_unlock(l, idx);
		tap_ok(req() == 1, "a lock inside a region leaves the region's request");
		rsk_slice_end(s);
		rsk_spinlock_destroy(l);
	} else {
		tap_ok(0, "rsk_spinlock_create");
		tap_ok(0, "rsk_spinlock_create");
	}
	if (rsk_gate_close(&gate, RSK_INDEX_CPU, 0) == 0) {
		uint8_t held = req();
		rsk_gate_open(&gate);
		tap_ok(held == 1 && req() == 0, "a gate holder requests while the gate is closed (%d)",
		       held);
	} else {
		tap_ok(0, "rsk_gate_close");
	}
	/* The structures' own gate work ends the region too: a drain closes
	 * and opens every cache's gate in the pool's code (src/alloc/object_pool.c), whose
	 * open once skipped the region's end (df2ccb0). */
	struct rsk_pool_config cfg = {.size = 64, .cache_capacity = 8, .mode = RSK_INDEX_CPU};
	struct rsk_pool *p;
	if (rsk_pool_create(&p, &cfg) == 0) {
		void *o = rsk_pool_alloc(p);
		int freed = o != NULL ? rsk_pool_free(p, o) : -1;
		int drained = rsk_pool_drain(p, -1);
		tap_ok(freed == 0 && drained == 0 && req() == 0,
		       "a pool drain (its caches' gates closed and opened) ends its region (%d, %d, "
		       "request %d)",
		       freed, drained, req());
		rsk_pool_destroy(p);
	} else {
		tap_ok(0, "rsk_pool_create");
	}

	stats = stats_ready();
	if (stats) {
		stat_read("sgrant", &g0);
		stat_read("syield", &y0);
	}
	unsigned long seen = grant_loop(1, 10.0, 20, &runs);
	tap_ok(seen > 0, "granted while a competitor on the same CPU wanted it: %lu grant(s) seen "
			 "(competitor ran %lu)", seen, runs);
	if (stats) {
		stat_read("sgrant", &g1);
		stat_read("syield", &y1);
	}
	tap_ok(stats && g1 > g0 && y1 > y0,
	       "the kernel counted grants and yields (debugfs rseq/stats: sgrant +%lu, syield +%lu)",
	       g1 - g0, y1 - y0);
	unsigned long control = grant_loop(0, 2.0, 1, &runs);
	tap_ok(control == 0 && runs > 0,
	       "control: without a request no grant (%lu), though the competitor ran (%lu)", control,
	       runs);

	/* The kernel counts the call (sabort) unless the grant had run out
	 * and the thread was switched out between our look at the granted
	 * byte and the call (under an emulator, 5 us are short): a few tries
	 * until it counts one; the grant must end every time. */
	uint32_t after = 0, worst = 0;
	int tries = 0, got = 0;
	if (stats)
		stat_read("sabort", &a0);
	a1 = a0;
	for (; tries < 20 && a1 == a0; tries++) {
		if (!syscall_in_grant(5.0, &after))
			break;
		got++;
		worst |= after;
		if (stats)
			stat_read("sabort", &a1);
	}
	tap_ok(got > 0 && worst == 0 && a1 > a0,
	       "a system call inside a granted region ends the grant (%d grant(s) with a call: "
	       "slice_ctrl %#x after each, sabort +%lu)", got, worst, a1 - a0);

	/* The child's exit status says what it saw: bit 0 the extension is
	 * not enabled, bit 1 a begin was not an outer region, bit 2 no region
	 * of 100 showed its request, bit 3 a request or grant was left after
	 * a region's end.  A tick between the begin and the look may grant
	 * the request (the kernel clears the request byte and sets the
	 * granted one, and clears both when the grant runs out), so a region
	 * that shows neither is tried again. */
	pid_t pid = fork();
	if (pid == 0) {
		int bad = 0, shown = 0;
		if (prctl(RSK_ABI_PR_RSEQ_SLICE_EXTENSION, RSK_ABI_PR_RSEQ_SLICE_EXTENSION_GET, 0,
			  0, 0) != RSK_ABI_PR_RSEQ_SLICE_EXT_ENABLE)
			bad |= 1;
		for (int i = 0; i < 100 && !shown && !(bad & (2 | 8)); i++) {
			rsk_slice_t s = rsk_slice_begin();
			shown = req() == 1;
			rsk_slice_end(s);
			if (s != RSK_SLICE_OUTER)
				bad |= 2;
			if (req() != 0 || granted() != 0)
				bad |= 8;
		}
		_exit(bad | (shown ? 0 : 4));
	}
	int status = -1;
	waitpid(pid, &status, 0);
	tap_ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "fork: the child keeps the thread's extension and regions work there (status %#x)",
	       status);
}

int main(int argc, char **argv)
{
	const char *expect = NULL;
	struct rsk_status st;

	if (argc == 3 && strcmp(argv[1], "--expect") == 0)
		expect = argv[2];
	else if (argc != 1) {
		fprintf(stderr, "usage: slice.t [--expect available|absent]\n");
		return 2;
	}
	rsk_init();
	rsk_status(&st);
	area = rsk_area();
	if (area == NULL) {
		/* No rseq at all: nothing can be offered. */
		tap_plan(2);
		tap_ok(!rsk_slice_available() && !st.slice_ext_available,
		       "no rseq here (%s): not available", st.reason);
		tap_ok(expect == NULL || strcmp(expect, "absent") == 0, "expected: %s",
		       expect ? expect : "(follow the kernel)");
		return tap_done();
	}
	int kernel_says = (area->flags & RSK_ABI_FLAG_SLICE_EXT_AVAILABLE) != 0 &&
			  rsk_area_cpu_id(area) >= 0;
	const char *off = getenv("RSEQKIT_NO_SLICE");
	int switched_off = off != NULL && strcmp(off, "1") == 0;
	int avail = rsk_slice_available();

	tap_diag("kernel feature size %lu, registered %u bytes (%s), area flags %#x; %s",
		 getauxval(RSK_ABI_AT_RSEQ_FEATURE_SIZE), st.registered_size,
		 rsk_owner_name(st.owner), area->flags, avail ? "offered" : "not offered");
	tap_plan(avail ? 18 : 8);
	tap_ok(avail == (kernel_says && !switched_off),
	       "rsk_slice_available() = %d: the kernel's flag says %d, RSEQKIT_NO_SLICE %s", avail,
	       kernel_says, switched_off ? "set" : "unset");
	tap_ok(st.slice_ext_available == avail, "rsk_status() agrees (%d)", st.slice_ext_available);
	tap_ok(expect == NULL || strcmp(expect, avail ? "available" : "absent") == 0,
	       "expected %s: %s", expect ? expect : "(follow the kernel)",
	       avail ? "available" : "absent");
	if (avail)
		available_checks();
	else
		absent_checks();
	return tap_done();
}
