/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/at.h - the `_at` form of every operation, for the
 * architectures that write one function per index field: the field is
 * given by its offset in the area, and the call goes to the cpu or the cid
 * function (a constant branch where the offset is a constant, which is how
 * the structures call; one compare otherwise).  No include guard: included
 * through arch/variant.h once per variant, after the cpu and cid ones.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/at.h"
#endif

/* op's function of the variant being instantiated, for the index field X. */
#define RSK_ARCH_FIELD(op, X) RSK_ARCH_NAMED(op, RSK_ARCH_RELEASE, X)
#define RSK_ARCH_AT(op)                                                        \
	RSK_ARCH_DEFINE(op)                                                    \
	{                                                                      \
		if (ioff == RSK_ABI_OFF_MM_CID)                                \
			return RSK_ARCH_FIELD(op, cid)(area, idx, RSK_ARCH_ARGS_##op RSK_GATE_ARG); \
		return RSK_ARCH_FIELD(op, cpu)(area, idx, RSK_ARCH_ARGS_##op RSK_GATE_ARG); \
	}

RSK_ARCH_RELEASE_OPS(RSK_ARCH_AT)
#if !RSK_ARCH_RELEASE
RSK_ARCH_RELAXED_OPS(RSK_ARCH_AT)
#endif

#undef RSK_ARCH_AT
#undef RSK_ARCH_FIELD
