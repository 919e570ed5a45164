/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/variant.h - one variant of the operations.  No include
 * guard: <rseqkit/arch.h> includes this once for each variant, with
 * RSK_ARCH_GATED, RSK_ARCH_X (and RSK_ARCH_OFF) set and RSK_ARCH_OPS_FILE
 * naming the file that defines the operations (an arch's ops.h, or
 * arch/at.h for the `_at` dispatch).
 *
 * It declares the prototypes, so that a definition that strays from the
 * contract fails to compile; includes the operations; and gives the
 * _release twins: a TSO architecture (RSK_ARCH_TSO) gets them here, as
 * the relaxed operation behind RSK_ARCH_RELEASE_BARRIER(op) - a compiler
 * barrier where the relaxed op does not clobber memory itself, nothing
 * where it does (an extra barrier there changes what GCC lays out, for
 * nothing) - and a weakly ordered
 * one writes them in its ops.h, which is included again with
 * RSK_ARCH_RELEASE 1 (its RSK_RELEASED(...) parts then in, and its ops
 * without a _release twin skipped with #if !RSK_ARCH_RELEASE).
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/variant.h"
#endif

#define RSK_ARCH_RELEASE 0

RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
				     intptr_t newv RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP_RELEASE(cmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					     intptr_t newv RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					intptr_t *v2, intptr_t expect2,
					intptr_t newv RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstorestore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					  intptr_t *v2, intptr_t newv2,
					  intptr_t newv RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP_RELEASE(cmpstorestore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v,
						  intptr_t expect, intptr_t *v2, intptr_t newv2,
						  intptr_t newv RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcopystore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					 intptr_t *dst, const intptr_t *src, intptr_t nwords,
					 intptr_t newv RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP_RELEASE(cmpcopystore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v,
						 intptr_t expect, intptr_t *dst,
						 const intptr_t *src, intptr_t nwords,
						 intptr_t newv RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP(add)(RSK_ARCH_INDEX_PARAMS, intptr_t *v,
				intptr_t count RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP(pop)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expectnot,
				intptr_t offset, intptr_t *out RSK_GATE_PARAM);
RSK_ARCH_OP_FN RSK_ARCH_OP(derefadd)(RSK_ARCH_INDEX_PARAMS, intptr_t *const *ptr, intptr_t off,
				     intptr_t inc RSK_GATE_PARAM);

#include RSK_ARCH_OPS_FILE

#if defined(RSK_ARCH_TSO) && !defined(RSK_ARCH_AT_DISPATCH)
/* Every store is a store-release already: the compiler must only not move
 * the thread's earlier accesses past the section. */
RSK_ARCH_OP_FN RSK_ARCH_OP_RELEASE(cmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					     intptr_t newv RSK_GATE_PARAM)
{
	RSK_ARCH_RELEASE_BARRIER(cmpstore);
	return RSK_ARCH_OP(cmpstore)(RSK_ARCH_INDEX_ARGS, v, expect, newv RSK_GATE_ARG);
}

RSK_ARCH_OP_FN RSK_ARCH_OP_RELEASE(cmpstorestore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v,
						  intptr_t expect, intptr_t *v2, intptr_t newv2,
						  intptr_t newv RSK_GATE_PARAM)
{
	RSK_ARCH_RELEASE_BARRIER(cmpstorestore);
	return RSK_ARCH_OP(cmpstorestore)(RSK_ARCH_INDEX_ARGS, v, expect, v2, newv2,
					  newv RSK_GATE_ARG);
}

RSK_ARCH_OP_FN RSK_ARCH_OP_RELEASE(cmpcopystore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v,
						 intptr_t expect, intptr_t *dst,
						 const intptr_t *src, intptr_t nwords,
						 intptr_t newv RSK_GATE_PARAM)
{
	RSK_ARCH_RELEASE_BARRIER(cmpcopystore);
	return RSK_ARCH_OP(cmpcopystore)(RSK_ARCH_INDEX_ARGS, v, expect, dst, src, nwords,
					 newv RSK_GATE_ARG);
}
#else
#undef RSK_ARCH_RELEASE
#define RSK_ARCH_RELEASE 1
#include RSK_ARCH_OPS_FILE
#endif

#undef RSK_ARCH_RELEASE
