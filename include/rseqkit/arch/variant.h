/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/variant.h - one variant of the operations.  No include
 * guard: <rseqkit/arch.h> includes this once for each variant, with
 * RSK_ARCH_GATED, RSK_ARCH_X (and RSK_ARCH_OFF) set and RSK_ARCH_OPS_FILE
 * naming the file that defines the operations (an arch's ops.h, or
 * arch/at.h for the `_at` dispatch).
 *
 * It declares the prototypes (RSK_ARCH_DEFINE: the signatures of
 * arch/common.h, which the definitions use too), includes the operations,
 * and gives the _release twins:
 *   - a TSO architecture (RSK_ARCH_TSO) gets them here, as the relaxed
 *     operation behind RSK_ARCH_RELEASE_BARRIER(op): a compiler barrier
 *     where the relaxed op does not clobber memory itself, nothing where
 *     it does (an extra barrier there changes what GCC lays out, for
 *     nothing);
 *   - a weakly ordered one writes them in its ops.h, which is included
 *     again with RSK_ARCH_RELEASE 1 (its RSK_RELEASED(...) parts then in,
 *     its ops without a _release twin skipped with #if !RSK_ARCH_RELEASE).
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/variant.h"
#endif

#define RSK_ARCH_RELEASE 0

/* The prototypes: every operation, and the _release twins. */
#define RSK_ARCH_DECLARE(op)	     RSK_ARCH_DEFINE(op);
#define RSK_ARCH_DECLARE_TWINS(op) RSK_ARCH_DEFINE(op); RSK_ARCH_DEFINE_RELEASE(op);
RSK_ARCH_RELEASE_OPS(RSK_ARCH_DECLARE_TWINS)
RSK_ARCH_RELAXED_OPS(RSK_ARCH_DECLARE)
#undef RSK_ARCH_DECLARE
#undef RSK_ARCH_DECLARE_TWINS

#include RSK_ARCH_OPS_FILE

#if defined(RSK_ARCH_TSO) && !defined(RSK_ARCH_AT_DISPATCH)
/* Every store is a store-release already: the compiler must only not move
 * the thread's earlier accesses past the section. */
#define RSK_ARCH_TSO_TWIN(op)                                                  \
	RSK_ARCH_DEFINE_RELEASE(op)                                            \
	{                                                                      \
		RSK_ARCH_RELEASE_BARRIER(op);                                  \
		return RSK_ARCH_CALL(RSK_ARCH_OP(op), op);                     \
	}
RSK_ARCH_RELEASE_OPS(RSK_ARCH_TSO_TWIN)
#undef RSK_ARCH_TSO_TWIN
#else
#undef RSK_ARCH_RELEASE
#define RSK_ARCH_RELEASE 1
#include RSK_ARCH_OPS_FILE
#endif

#undef RSK_ARCH_RELEASE
