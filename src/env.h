/* SPDX-License-Identifier: MIT */
/*
 * src/env.h - the one reader of boolean environment variables, for the
 * library, the malloc and the tools (which link the library statically),
 * so that every switch takes the same values (rseqkit(7), ENVIRONMENT).
 * Not installed, not exported from the shared objects.
 */
#ifndef RSEQKIT_ENV_H
#define RSEQKIT_ENV_H

/* The switch `name`: 1 for 1, yes, true or on, 0 for 0, no, false or off
 * (ASCII, any case).  Unset or empty: dflt.  Anything else: dflt, after
 * one line on standard error naming the variable, the value and what is
 * used instead.  Allocates nothing (malloc's initialisation calls it). */
int rsk_env_bool_(const char *name, int dflt);

#endif /* RSEQKIT_ENV_H */
