/* SPDX-License-Identifier: MIT */
/* Minimal TAP producer for the C tests (read by prove). */
#ifndef RSEQKIT_TESTS_TAP_H
#define RSEQKIT_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* FREED_READS_REPORTED: built with a sanitizer that reports a read of
 * freed memory (AddressSanitizer, ThreadSanitizer; gcc or clang), for the
 * checks that make one on purpose. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FREED_READS_REPORTED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FREED_READS_REPORTED 1
#endif
#endif

static int tap_n, tap_failed;

static inline void tap_plan(int n)
{
	printf("1..%d\n", n);
	fflush(stdout);
}

static inline void tap_plan_skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	exit(0);
}

__attribute__((format(printf, 2, 3))) static inline int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

__attribute__((format(printf, 1, 2))) static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static inline int tap_done(void)
{
	return tap_failed ? 1 : 0;
}

#endif
