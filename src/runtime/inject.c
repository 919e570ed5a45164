/* SPDX-License-Identifier: MIT */
/*
 * Injection points (see <rseqkit/inject.h>): only in the test build of the
 * library (-DRSEQKIT_INJECT), never in the installed one.
 */
#include <errno.h>
#include <stdlib.h>
#include "internal.h"

#ifdef RSEQKIT_INJECT
RSK_EXPORT int rsk_inject_loops[RSK_INJECT_POINTS];

/* Default C-level hook: spin.  Test programs that want yields, signals or
 * sleeps define their own rsk_inject_hook(). */
RSK_EXPORT __attribute__((weak)) void rsk_inject_hook(int point)
{
	if (point <= 0 || point >= RSK_INJECT_POINTS)
		return;
	for (int i = __atomic_load_n(&rsk_inject_loops[point], __ATOMIC_RELAXED); i > 0; i--)
		__asm__ __volatile__("" ::: "memory");
}

/* Default activation hook (see internal.h): nothing. */
RSK_EXPORT __attribute__((weak)) void rsk_inject_activation(int step)
{
	(void)step;
}

/* See internal.h (rsk_spill_add_()): decided once, from the environment. */
static int broken_spill = -1;

int rsk_inject_broken_spill_(void)
{
	int v = __atomic_load_n(&broken_spill, __ATOMIC_RELAXED);

	if (__builtin_expect(v < 0, 0)) {
		const char *e = getenv("RSEQKIT_INJECT_BROKEN_SPILL");

		v = e != NULL && e[0] == '1';
		__atomic_store_n(&broken_spill, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* The broken add: another thread's add between the load and the store
 * is lost.  The delay makes that common. */
void rsk_inject_spill_plain_(intptr_t *word, intptr_t v)
{
	intptr_t old = __atomic_load_n(word, __ATOMIC_RELAXED);

	for (int i = 0; i < 200; i++)
		__asm__ __volatile__("" ::: "memory");
	__atomic_store_n(word, (intptr_t)((uintptr_t)old + (uintptr_t)v), __ATOMIC_RELAXED);
}

/* Default NUMA stand-ins (see internal.h): the machine's own. */
RSK_EXPORT __attribute__((weak)) int rsk_inject_numa_nodes(void)
{
	return 0;
}

RSK_EXPORT __attribute__((weak)) int rsk_inject_numa_cpu_node(int cpu)
{
	(void)cpu;
	return -1;
}

RSK_EXPORT __attribute__((weak)) int rsk_inject_numa_mbind(int cpu, int node)
{
	(void)cpu;
	(void)node;
	return ENOSYS;
}
#else
typedef int rsk_inject_unused; /* ISO C wants something in a file */
#endif
