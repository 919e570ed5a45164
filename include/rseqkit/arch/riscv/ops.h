/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/riscv/ops.h - the operations on RV64, each once, as the
 * contract in <rseqkit/arch.h> states them.  No include guard:
 * arch/variant.h includes this once per variant (plain or gated, cpu or
 * cid, relaxed or _release); the building blocks are in arch/riscv.h.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/riscv/ops.h"
#endif

/* if (*v == expect) *v = newv */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
				     intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_RV_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_RV_HEAD
		"ld %[tmp], 0(%[v])\n\t"
		"bne %[tmp], %[expect], %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		RSK_RELEASED("fence rw, w\n\t")
		"sd %[newv], 0(%[v])\n"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "r"(idx), [v] "r"(v), [expect] "r"(expect),
		  [newv] "r"(newv) RSK_RV_GATE_IN RSK_ARCH_INJECT_IN
		: "memory"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

/* if (*v == expect) { *v2 = newv2; *v = newv; } */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstorestore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					  intptr_t *v2, intptr_t newv2,
					  intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_RV_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_RV_HEAD
		"ld %[tmp], 0(%[v])\n\t"
		"bne %[tmp], %[expect], %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"sd %[newv2], 0(%[v2])\n\t" RSK_INJECT_ASM(4)
		RSK_RELEASED("fence rw, w\n\t")
		"sd %[newv], 0(%[v])\n"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "r"(idx), [v] "r"(v), [expect] "r"(expect),
		  [v2] "r"(v2), [newv2] "r"(newv2),
		  [newv] "r"(newv) RSK_RV_GATE_IN RSK_ARCH_INJECT_IN
		: "memory"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

/* if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * doublewords, first to last. */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcopystore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					 intptr_t *dst, const intptr_t *src, intptr_t nwords,
					 intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_RV_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_RV_HEAD
		"ld %[tmp], 0(%[v])\n\t"
		"bne %[tmp], %[expect], %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"beqz %[n], 6f\n"
		"7:\n\t"
		"ld %[tmp], 0(%[src])\n\t"
		"sd %[tmp], 0(%[dst])\n\t"
		"addi %[src], %[src], 8\n\t"
		"addi %[dst], %[dst], 8\n\t"
		"addi %[n], %[n], -1\n\t"
		"bnez %[n], 7b\n"
		"6:\n\t" RSK_INJECT_ASM(4)
		RSK_RELEASED("fence rw, w\n\t")
		"sd %[newv], 0(%[v])\n"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp), [src] "+&r"(src), [dst] "+&r"(dst),
		  [n] "+&r"(nwords) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "r"(idx), [v] "r"(v), [expect] "r"(expect),
		  [newv] "r"(newv) RSK_RV_GATE_IN RSK_ARCH_INJECT_IN
		: "memory"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

#if !RSK_ARCH_RELEASE /* the operations without a _release twin */

/* if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					intptr_t *v2, intptr_t expect2,
					intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_RV_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_RV_HEAD
		"ld %[tmp], 0(%[v])\n\t"
		"bne %[tmp], %[expect], %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"ld %[tmp], 0(%[v2])\n\t"
		"bne %[tmp], %[expect2], %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
		"sd %[newv], 0(%[v])\n"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "r"(idx), [v] "r"(v), [expect] "r"(expect),
		  [v2] "r"(v2), [expect2] "r"(expect2),
		  [newv] "r"(newv) RSK_RV_GATE_IN RSK_ARCH_INJECT_IN
		: "memory"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

/* *v += count: a load, an add and the commit store; the delay between
 * load and store (point 3) is the window a lost update needs. */
RSK_ARCH_OP_FN RSK_ARCH_OP(add)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t count RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_RV_DESCRIBE RSK_RV_HEAD
		"ld %[tmp], 0(%[v])\n\t"
		"add %[tmp], %[tmp], %[count]\n\t" RSK_INJECT_ASM(3)
		"sd %[tmp], 0(%[v])\n"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),
		  [count] "r"(count) RSK_RV_GATE_IN RSK_ARCH_INJECT_IN
		: "memory"
		: aborted, stopped);
	RSK_ARCH_RETURN
}

/* if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); } */
RSK_ARCH_OP_FN RSK_ARCH_OP(pop)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expectnot,
				intptr_t offset, intptr_t *out RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_RV_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_RV_HEAD
		"ld %[tmp], 0(%[v])\n\t"
		"beq %[tmp], %[expectnot], %l[cmpfail]\n\t"
		"sd %[tmp], 0(%[out])\n\t" RSK_INJECT_ASM(3)
		"add %[tmp], %[tmp], %[offset]\n\t"
		"ld %[tmp], 0(%[tmp])\n\t"
		"sd %[tmp], 0(%[v])\n"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "r"(idx), [v] "r"(v), [expectnot] "r"(expectnot),
		  [offset] "r"(offset), [out] "r"(out) RSK_RV_GATE_IN RSK_ARCH_INJECT_IN
		: "memory"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

/* *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_OP_FN RSK_ARCH_OP(derefadd)(RSK_ARCH_INDEX_PARAMS, intptr_t *const *ptr, intptr_t off,
				     intptr_t inc RSK_GATE_PARAM)
{
	intptr_t tmp, tmp2;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_RV_DESCRIBE RSK_RV_HEAD
		"ld %[tmp], 0(%[ptr])\n\t"
		"add %[tmp], %[tmp], %[off]\n\t"
		"ld %[tmp2], 0(%[tmp])\n\t"
		"add %[tmp2], %[tmp2], %[inc]\n\t" RSK_INJECT_ASM(3)
		"sd %[tmp2], 0(%[tmp])\n"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp), [tmp2] "=&r"(tmp2) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "r"(idx), [ptr] "r"(ptr), [off] "r"(off),
		  [inc] "r"(inc) RSK_RV_GATE_IN RSK_ARCH_INJECT_IN
		: "memory"
		: aborted, stopped);
	RSK_ARCH_RETURN
}

#endif /* !RSK_ARCH_RELEASE */
