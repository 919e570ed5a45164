/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/version.h - the version of rseqkit.
 *
 * The three macros below are the one place the version is written: the
 * Makefile reads them (VERSION, the shared object's file name, rseqkit.pc)
 * and tests/install.sh checks that the man pages and rseqkit.pc agree.
 *
 * The macros give the version of the headers a program was compiled
 * against; rsk_version() gives the version of the library it runs with
 * (with the shared library, they can differ).  Versions follow semantic
 * versioning: the soname (librseqkit.so.1) changes only with an
 * incompatible ABI (abi/README.md says what changed).
 */
#ifndef RSEQKIT_VERSION_H
#define RSEQKIT_VERSION_H

#define RSEQKIT_VERSION_MAJOR 0
#define RSEQKIT_VERSION_MINOR 2
#define RSEQKIT_VERSION_PATCH 0

#define RSEQKIT_VERSION_STR_(x) #x
#define RSEQKIT_VERSION_STR(x)	RSEQKIT_VERSION_STR_(x)
/* "MAJOR.MINOR.PATCH", a string literal. */
#define RSEQKIT_VERSION_STRING                                                 \
	RSEQKIT_VERSION_STR(RSEQKIT_VERSION_MAJOR)                             \
	"." RSEQKIT_VERSION_STR(RSEQKIT_VERSION_MINOR) "." RSEQKIT_VERSION_STR(RSEQKIT_VERSION_PATCH)
/* One number that compares in order: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define RSEQKIT_VERSION_NUMBER                                                 \
	(RSEQKIT_VERSION_MAJOR * 10000 + RSEQKIT_VERSION_MINOR * 100 + RSEQKIT_VERSION_PATCH)
/* True when the headers are at least version major.minor.patch. */
#define RSEQKIT_VERSION_AT_LEAST(major, minor, patch)                          \
	(RSEQKIT_VERSION_NUMBER >= (major) * 10000 + (minor) * 100 + (patch))

#ifdef __cplusplus
extern "C" {
#endif

/*
 * rsk_version - the version of the library this program runs with.
 * Stores its three parts in *major, *minor and *patch (each may be NULL)
 * and returns it as a string "MAJOR.MINOR.PATCH" (static storage, never
 * NULL).  Any thread, any time, no initialisation; async-signal-safe.
 */
const char *rsk_version(int *major, int *minor, int *patch);

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_VERSION_H */
