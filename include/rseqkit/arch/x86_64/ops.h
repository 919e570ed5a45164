/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/x86_64/ops.h - the operations on x86-64, each once, in the
 * contract's `_at` form (<rseqkit/arch.h>).  No include guard:
 * arch/variant.h includes this once per variant (plain and gated); the
 * _release twins are derived there (TSO), the building blocks are in
 * arch/x86_64.h.  The relaxed operations clobber no memory (see there),
 * those that touch memory they do not name clobber "memory".
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/x86_64/ops.h"
#endif

/* if (*v == expect) *v = newv */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
				     intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_EXIT("cmpfail") RSK_X64_PROLOGUE
		"cmpq %[expect], %[v]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"movq %[newv], %[v]\n"
		"2:\n\t" RSK_ASM_ABORT
		: RSK_X64_COMMON_OUT RSK_ARCH_INJECT_OUT
		: RSK_X64_COMMON_IN, [v] "m"(*v), [expect] "re"(expect),
		  [newv] "re"(newv) RSK_X64_GATE_IN RSK_ARCH_INJECT_IN
		: "cc"
		: cmpfail, aborted RSK_X64_GATE_LABELS);
	return 0;
cmpfail:
	return 1;
aborted:
	return -1;
	RSK_X64_STOPPED
}

/* if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					intptr_t *v2, intptr_t expect2,
					intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_EXIT("cmpfail") RSK_X64_PROLOGUE
		"cmpq %[expect], %[v]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"cmpq %[expect2], %[v2]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
		"movq %[newv], %[v]\n"
		"2:\n\t" RSK_ASM_ABORT
		: RSK_X64_COMMON_OUT RSK_ARCH_INJECT_OUT
		: RSK_X64_COMMON_IN, [v] "m"(*v), [expect] "re"(expect), [v2] "m"(*v2),
		  [expect2] "re"(expect2), [newv] "re"(newv) RSK_X64_GATE_IN RSK_ARCH_INJECT_IN
		: "cc"
		: cmpfail, aborted RSK_X64_GATE_LABELS);
	return 0;
cmpfail:
	return 1;
aborted:
	return -1;
	RSK_X64_STOPPED
}

/* if (*v == expect) { *v2 = newv2; *v = newv; } */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstorestore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					  intptr_t *v2, intptr_t newv2,
					  intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_EXIT("cmpfail") RSK_X64_PROLOGUE
		"cmpq %[expect], %[v]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"movq %[newv2], %[v2]\n\t" RSK_INJECT_ASM(4)
		"movq %[newv], %[v]\n"
		"2:\n\t" RSK_ASM_ABORT
		: RSK_X64_COMMON_OUT RSK_ARCH_INJECT_OUT
		: RSK_X64_COMMON_IN, [v] "m"(*v), [expect] "re"(expect), [v2] "m"(*v2),
		  [newv2] "re"(newv2), [newv] "re"(newv) RSK_X64_GATE_IN RSK_ARCH_INJECT_IN
		: "cc"
		: cmpfail, aborted RSK_X64_GATE_LABELS);
	return 0;
cmpfail:
	return 1;
aborted:
	return -1;
	RSK_X64_STOPPED
}

/* if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * words, last to first, indexed by a counter. */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcopystore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					 intptr_t *dst, const intptr_t *src, intptr_t nwords,
					 intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_EXIT("cmpfail") RSK_X64_PROLOGUE
		"cmpq %[expect], %[v]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"testq %[n], %[n]\n\t"
		"jz 6f\n"
		"7:\n\t"
		"movq -8(%[src], %[n], 8), %[tmp]\n\t"
		"movq %[tmp], -8(%[dst], %[n], 8)\n\t"
		"decq %[n]\n\t"
		"jnz 7b\n"
		"6:\n\t" RSK_INJECT_ASM(4)
		"movq %[newv], %[v]\n"
		"2:\n\t" RSK_ASM_ABORT
		: RSK_X64_COMMON_OUT, [n] "+&r"(nwords) RSK_ARCH_INJECT_OUT
		: RSK_X64_COMMON_IN, [v] "m"(*v), [expect] "re"(expect), [dst] "r"(dst),
		  [src] "r"(src), [newv] "re"(newv) RSK_X64_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
		: cmpfail, aborted RSK_X64_GATE_LABELS);
	return 0;
cmpfail:
	return 1;
aborted:
	return -1;
	RSK_X64_STOPPED
}

/* *v += count: one add to memory is the commit. */
RSK_ARCH_OP_FN RSK_ARCH_OP(add)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t count RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_X64_PROLOGUE
		"addq %[count], %[v]\n"
		"2:\n\t" RSK_ASM_ABORT
		: RSK_X64_COMMON_OUT RSK_ARCH_INJECT_OUT
		: RSK_X64_COMMON_IN, [v] "m"(*v), [count] "re"(count) RSK_X64_GATE_IN
		  RSK_ARCH_INJECT_IN
		: "cc"
		: aborted RSK_X64_GATE_LABELS);
	return 0;
aborted:
	return -1;
	RSK_X64_STOPPED
}

/* if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); }.
 * The popped word is stored to *out inside the section, before the commit
 * (rsk_pop(3) allows that).  Not as an output read after the asm: gcc 12
 * -O1 copied such an output to *out from a register that did not hold it
 * yet (tests/primitives.c at -O1, check-opt). */
RSK_ARCH_OP_FN RSK_ARCH_OP(pop)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expectnot,
				intptr_t offset, intptr_t *out RSK_GATE_PARAM)
{
	intptr_t tmp, head;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_EXIT("cmpfail") RSK_X64_PROLOGUE
		"movq %[v], %[head]\n\t"
		"cmpq %[expectnot], %[head]\n\t"
		"jz %l[cmpfail]\n\t"
		"movq %[head], (%[out])\n\t" RSK_INJECT_ASM(3)
		"movq (%[head], %[offset]), %[tmp]\n\t"
		"movq %[tmp], %[v]\n"
		"2:\n\t" RSK_ASM_ABORT
		: RSK_X64_COMMON_OUT, [head] "=&r"(head) RSK_ARCH_INJECT_OUT
		: RSK_X64_COMMON_IN, [v] "m"(*v), [expectnot] "re"(expectnot),
		  [offset] "r"(offset), [out] "r"(out) RSK_X64_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
		: cmpfail, aborted RSK_X64_GATE_LABELS);
	return 0;
cmpfail:
	return 1;
aborted:
	return -1;
	RSK_X64_STOPPED
}

/* *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_OP_FN RSK_ARCH_OP(derefadd)(RSK_ARCH_INDEX_PARAMS, intptr_t *const *ptr, intptr_t off,
				     intptr_t inc RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_X64_PROLOGUE
		"movq %[ptr], %[tmp]\n\t"
		"addq %[inc], (%[tmp], %[off])\n"
		"2:\n\t" RSK_ASM_ABORT
		: RSK_X64_COMMON_OUT RSK_ARCH_INJECT_OUT
		: RSK_X64_COMMON_IN, [ptr] "m"(*ptr), [off] "r"(off),
		  [inc] "re"(inc) RSK_X64_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
		: aborted RSK_X64_GATE_LABELS);
	return 0;
aborted:
	return -1;
	RSK_X64_STOPPED
}
