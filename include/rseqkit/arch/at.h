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

#define RSK_ARCH_FIELD(op, X) RSK_ARCH_NAMED(op, RSK_ARCH_RELEASE, X)

RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
				     intptr_t newv RSK_GATE_PARAM)
{
	if (ioff == RSK_ABI_OFF_MM_CID)
		return RSK_ARCH_FIELD(cmpstore, cid)(area, idx, v, expect, newv RSK_GATE_ARG);
	return RSK_ARCH_FIELD(cmpstore, cpu)(area, idx, v, expect, newv RSK_GATE_ARG);
}

RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstorestore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					  intptr_t *v2, intptr_t newv2,
					  intptr_t newv RSK_GATE_PARAM)
{
	if (ioff == RSK_ABI_OFF_MM_CID)
		return RSK_ARCH_FIELD(cmpstorestore, cid)(area, idx, v, expect, v2, newv2,
							  newv RSK_GATE_ARG);
	return RSK_ARCH_FIELD(cmpstorestore, cpu)(area, idx, v, expect, v2, newv2,
						  newv RSK_GATE_ARG);
}

RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcopystore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					 intptr_t *dst, const intptr_t *src, intptr_t nwords,
					 intptr_t newv RSK_GATE_PARAM)
{
	if (ioff == RSK_ABI_OFF_MM_CID)
		return RSK_ARCH_FIELD(cmpcopystore, cid)(area, idx, v, expect, dst, src, nwords,
							 newv RSK_GATE_ARG);
	return RSK_ARCH_FIELD(cmpcopystore, cpu)(area, idx, v, expect, dst, src, nwords,
						 newv RSK_GATE_ARG);
}

#if !RSK_ARCH_RELEASE
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					intptr_t *v2, intptr_t expect2,
					intptr_t newv RSK_GATE_PARAM)
{
	if (ioff == RSK_ABI_OFF_MM_CID)
		return RSK_ARCH_FIELD(cmpcmpstore, cid)(area, idx, v, expect, v2, expect2,
							newv RSK_GATE_ARG);
	return RSK_ARCH_FIELD(cmpcmpstore, cpu)(area, idx, v, expect, v2, expect2,
						newv RSK_GATE_ARG);
}

RSK_ARCH_OP_FN RSK_ARCH_OP(add)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t count RSK_GATE_PARAM)
{
	if (ioff == RSK_ABI_OFF_MM_CID)
		return RSK_ARCH_FIELD(add, cid)(area, idx, v, count RSK_GATE_ARG);
	return RSK_ARCH_FIELD(add, cpu)(area, idx, v, count RSK_GATE_ARG);
}

RSK_ARCH_OP_FN RSK_ARCH_OP(pop)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expectnot,
				intptr_t offset, intptr_t *out RSK_GATE_PARAM)
{
	if (ioff == RSK_ABI_OFF_MM_CID)
		return RSK_ARCH_FIELD(pop, cid)(area, idx, v, expectnot, offset, out RSK_GATE_ARG);
	return RSK_ARCH_FIELD(pop, cpu)(area, idx, v, expectnot, offset, out RSK_GATE_ARG);
}

RSK_ARCH_OP_FN RSK_ARCH_OP(derefadd)(RSK_ARCH_INDEX_PARAMS, intptr_t *const *ptr, intptr_t off,
				     intptr_t inc RSK_GATE_PARAM)
{
	if (ioff == RSK_ABI_OFF_MM_CID)
		return RSK_ARCH_FIELD(derefadd, cid)(area, idx, ptr, off, inc RSK_GATE_ARG);
	return RSK_ARCH_FIELD(derefadd, cpu)(area, idx, ptr, off, inc RSK_GATE_ARG);
}
#endif

#undef RSK_ARCH_FIELD
