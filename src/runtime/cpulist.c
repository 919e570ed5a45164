/* SPDX-License-Identifier: MIT */
/*
 * The kernel's CPU and node lists ("0-3,8-11\n"): the possible CPUs
 * (topology.c), the online ones (the fence's fallback, fence.c) and the
 * nodes with memory (the per-CPU memory pools' NUMA binding) are all read
 * with this one parser.
 */
#include "internal.h"

/* The number at *s (digits only: no sign, no blank), at most `limit` (a
 * larger one reads as limit); *s moves past it.  -1 if *s is no digit. */
static long cpulist_number(const char **s, long limit)
{
	long v = 0;

	if (**s < '0' || **s > '9')
		return -1;
	for (; **s >= '0' && **s <= '9'; (*s)++)
		v = v >= limit ? limit : v * 10 + (**s - '0');
	return v < limit ? v : limit;
}

/* See internal.h. */
int rsk_cpulist_parse(const char *s, unsigned long *bits, int nbits)
{
	int bound = 0;

	if (*s == '\n')
		s++;
	if (*s == '\0')
		return 0;
	for (;;) {
		long lo = cpulist_number(&s, RSK_CPULIST_MAX), hi = lo;

		if (lo < 0)
			return -1;
		if (*s == '-') {
			s++;
			hi = cpulist_number(&s, RSK_CPULIST_MAX);
			if (hi < lo)
				return -1;
		}
		for (long c = lo; c <= hi && c < nbits; c++)
			bits[c / RSK_LONG_BITS] |= 1ul << (c % RSK_LONG_BITS);
		if (hi >= bound)
			bound = hi < RSK_CPULIST_MAX ? (int)hi + 1 : RSK_CPULIST_MAX;
		if (*s != ',')
			break;
		s++;
	}
	if (*s == '\n')
		s++;
	return *s == '\0' ? bound : -1;
}
