/* SPDX-License-Identifier: MIT */
/*
 * The registration matrix (tests/registration.c) linked with -static (see
 * TEST_LIBS_registration_static in the Makefile): glibc's __rseq_* symbols
 * must be found through the weak references in a static binary too, in
 * both owner modes.
 */
#include "registration.c"
