/* SPDX-License-Identifier: MIT */
/*
 * The library's one parser of the kernel's CPU and node lists
 * (rsk_cpulist_parse(), src/runtime/cpulist.c), which sizes the per-CPU
 * arrays from /sys/devices/system/cpu/possible, finds the online CPUs
 * for the fence's fallback and the nodes with memory for the per-CPU
 * memory pools: its edge cases, one by one.  TAP.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include "tap.h"

/* The library's own (src/internal.h); the test links the static
 * library, where it is visible. */
#define RSK_CPULIST_MAX (1 << 20)
int rsk_cpulist_parse(const char *s, unsigned long *bits, int nbits);

#define NBITS 256
#define LB ((int)(8 * sizeof(unsigned long)))

/* The ids set in bits, as a list ("0-3,8"), for the messages. */
static const char *show(const unsigned long *bits)
{
	static char out[512];
	size_t n = 0;

	out[0] = '\0';
	for (int c = 0; c < NBITS; c++) {
		int e;

		if (!(bits[c / LB] & (1ul << (c % LB))))
			continue;
		for (e = c; e + 1 < NBITS && (bits[(e + 1) / LB] & (1ul << ((e + 1) % LB))); e++)
			;
		n += (size_t)snprintf(out + n, sizeof(out) - n, n ? ",%d" : "%d", c);
		if (e > c)
			n += (size_t)snprintf(out + n, sizeof(out) - n, "-%d", e);
		c = e;
	}
	return out;
}

/* Parse s into a fresh bitmap of nbits; the result and the bits set must
 * be `want` and `set` (a list as show() prints it). */
static void check(const char *s, int nbits, int want, const char *set)
{
	unsigned long bits[NBITS / LB];
	char shown[64];
	int got;

	memset(bits, 0, sizeof(bits));
	got = rsk_cpulist_parse(s, bits, nbits);
	for (size_t i = 0, k = 0; s[i] != '\0' && k + 3 < sizeof(shown); i++) {
		if (s[i] == '\n') {
			shown[k++] = '\\';
			shown[k++] = 'n';
		} else {
			shown[k++] = s[i];
		}
		shown[k] = '\0';
	}
	if (s[0] == '\0')
		strcpy(shown, "");
	tap_ok(got == want && strcmp(show(bits), set) == 0,
	       "\"%s\" (%d bits): %d, {%s} (expected %d, {%s})", shown, nbits, got, show(bits), want,
	       set);
}

int main(void)
{
	tap_plan(22);
	/* Well formed. */
	check("0", NBITS, 1, "0");
	check("0\n", NBITS, 1, "0");
	check("0-3,8-9", NBITS, 10, "0-3,8-9");
	check("0-3,8-9\n", NBITS, 10, "0-3,8-9");
	check("5,1-2", NBITS, 6, "1-2,5");
	check("7-7", NBITS, 8, "7");
	/* Empty: no CPUs (a node list with no node). */
	check("", NBITS, 0, "");
	check("\n", NBITS, 0, "");
	/* Malformed: -1. */
	check("x", NBITS, -1, "");
	check("-1", NBITS, -1, "");
	check("1-", NBITS, -1, "");
	check("3-1", NBITS, -1, "");
	check("1,,2", NBITS, -1, "1");
	check("0,", NBITS, -1, "0");
	check(" 1", NBITS, -1, "");
	check("1 2", NBITS, -1, "1");
	check("0-3\n\n", NBITS, -1, "0-3");
	/* Ids beyond the bitmap count in the bound, set no bit. */
	check("0-3,300", NBITS, 301, "0-3");
	check("254-300", NBITS, 301, "254-255");
	/* Ids beyond any kernel's NR_CPUS: the bound is capped, no overflow. */
	check("0,99999999999999999999999", NBITS, RSK_CPULIST_MAX, "0");
	check("2-2147483647", NBITS, RSK_CPULIST_MAX, "2-255");
	/* No bitmap: the bound only (the possible CPUs). */
	tap_ok(rsk_cpulist_parse("0-63\n", NULL, 0) == 64, "\"0-63\\n\" without a bitmap: 64");
	return tap_done();
}
