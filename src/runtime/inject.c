/* SPDX-License-Identifier: MIT */
/*
 * Injection points (see <rseqkit/inject.h>): only in the test build of the
 * library (-DRSEQKIT_INJECT), never in the installed one.
 */
#include <errno.h>
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
