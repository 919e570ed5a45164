/* SPDX-License-Identifier: MIT */
/*
 * rseqkit's malloc: the per-CPU caches' adaptive capacity
 * (rseqkit-malloc(7), "Cache capacity").  A burst on every size class,
 * on one CPU, asks its caches for more than the per-CPU bound: their
 * capacity grows (to at least half the bound) and stays within it, and
 * so do the bytes they hold.  Then, idle, two timed releases (a second
 * apart: the release interval) halve the quiet caches' capacity, and
 * malloc_trim() empties them.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rseqkit/malloc.h>
#include "tap.h"

#define NCLASS 52
#define ROUNDS 12

static void *(*volatile malloc_v)(size_t) = malloc;
static void (*volatile free_v)(void *) = free;
static void *slots[2 * 126];

static size_t class_size(unsigned c)
{
	if (c < 8)
		return (size_t)(c + 1) * 16;
	return (size_t)((c - 8) % 4 + 5) << (7 + (c - 8) / 4 - 2);
}

/* A release of free memory is looked for where memory moves in bulk: a
 * large block freed. */
static void idle_release(void)
{
	void *p;

	usleep(1100 * 1000);
	p = malloc_v((size_t)1 << 20);
	free_v(p);
}

static void stats(struct rsk_malloc_stats *st)
{
	memset(st, 0, sizeof(*st));
	rsk_malloc_stats(st, -1);
}

int main(void)
{
	struct rsk_malloc_stats st;
	cpu_set_t set;
	size_t cap1;

	alarm(120);
	/* One CPU, so that the burst's misses all land in one CPU's caches. */
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set)) {
				CPU_ZERO(&set);
				CPU_SET(i, &set);
				sched_setaffinity(0, sizeof(set), &set);
				break;
			}
	}
	tap_plan(5);
	for (int r = 0; r < ROUNDS; r++)
		for (unsigned c = 0; c < NCLASS; c++) {
			size_t sz = class_size(c), k = sz <= 512 ? 2 * 126 : sz <= ((size_t)32 << 10) ? 32 : 4;
			for (size_t i = 0; i < k; i++) {
				slots[i] = malloc_v(sz);
				if (slots[i] == NULL) {
					tap_diag("malloc(%zu) failed", sz);
					return 1;
				}
				memset(slots[i], (int)i, 16);
			}
			for (size_t i = 0; i < k; i++)
				free_v(slots[i]);
		}
	stats(&st);
	tap_ok(st.cpu_bound > 0 && st.cpu_capacity_max <= st.cpu_bound && st.cpu_cached_max <= st.cpu_bound,
	       "after a burst on %d classes: a CPU's caches hold %zu bytes, capacity %zu, within the bound %zu",
	       NCLASS, st.cpu_cached_max, st.cpu_capacity_max, st.cpu_bound);
	tap_ok(st.cpu_capacity_max >= st.cpu_bound / 2,
	       "the burst's misses grew the capacity to %zu bytes (at least half the bound)",
	       st.cpu_capacity_max);
	cap1 = st.cpu_capacity_max;
	idle_release();
	idle_release();
	stats(&st);
	tap_ok(st.cpu_capacity_max < cap1, "idle, the timed release shrank the capacity: %zu -> %zu bytes", cap1,
	       st.cpu_capacity_max);
	tap_ok(st.cpu_cached_max <= st.cpu_capacity_max, "and the caches hold %zu bytes, within it",
	       st.cpu_cached_max);
	rsk_malloc_trim(0);
	stats(&st);
	tap_ok(st.cpu_cached_max == 0, "malloc_trim empties the caches (%zu bytes left, capacity %zu)",
	       st.cpu_cached_max, st.cpu_capacity_max);
	return tap_done();
}
