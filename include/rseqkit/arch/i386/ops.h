/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/i386/ops.h - the operations on i386, each once, as the
 * contract in <rseqkit/arch.h> states them.  No include guard:
 * arch/variant.h includes this once per variant (plain or gated, cpu or
 * cid); the _release twins are derived there (TSO), the building blocks
 * are in arch/i386.h.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/i386/ops.h"
#endif

/* if (*v == expect) *v = newv */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
				     intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_I386_HEAD
		"movl (%[v]), %[tmp]\n\t"
		"cmpl %[expect], %[tmp]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"movl %[newv], %[tmp]\n\t"
		"movl %[tmp], (%[v])\n\t"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "rm"(idx), [v] "r"(v), [expect] RSK_I386_VAL(expect),
		  [newv] RSK_I386_VAL(newv) RSK_I386_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

/* if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcmpstore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					intptr_t *v2, intptr_t expect2,
					intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_I386_HEAD
		"movl (%[v]), %[tmp]\n\t"
		"cmpl %[expect], %[tmp]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"movl (%[v2]), %[tmp]\n\t"
		"cmpl %[expect2], %[tmp]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
		"movl %[newv], %[tmp]\n\t"
		"movl %[tmp], (%[v])\n\t"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "rm"(idx), [v] "r"(v), [expect] RSK_I386_VAL(expect),
		  [v2] "r"(v2), [expect2] RSK_I386_VAL(expect2),
		  [newv] RSK_I386_VAL(newv) RSK_I386_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
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
		RSK_ASM_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_I386_HEAD
		"movl (%[v]), %[tmp]\n\t"
		"cmpl %[expect], %[tmp]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"movl %[newv2], %[tmp]\n\t"
		"movl %[tmp], (%[v2])\n\t" RSK_INJECT_ASM(4)
		"movl %[newv], %[tmp]\n\t"
		"movl %[tmp], (%[v])\n\t"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "rm"(idx), [v] "r"(v), [expect] RSK_I386_VAL(expect),
		  [v2] "r"(v2), [newv2] RSK_I386_VAL(newv2),
		  [newv] RSK_I386_VAL(newv) RSK_I386_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

/* if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * words.  i386 has too few registers to index by a counter register next
 * to the section's own (as x86-64 does), so the copy walks the pointers
 * and keeps the count in memory. */
RSK_ARCH_OP_FN RSK_ARCH_OP(cmpcopystore)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t expect,
					 intptr_t *dst, const intptr_t *src, intptr_t nwords,
					 intptr_t newv RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_I386_HEAD
		"movl (%[v]), %[tmp]\n\t"
		"cmpl %[expect], %[tmp]\n\t"
		"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
		"cmpl $0, %[n]\n\t"
		"jz 6f\n"
		"7:\n\t"
		"movl (%[src]), %[tmp]\n\t"
		"movl %[tmp], (%[dst])\n\t"
		"addl $4, %[src]\n\t"
		"addl $4, %[dst]\n\t"
		"decl %[n]\n\t"
		"jnz 7b\n"
		"6:\n\t" RSK_INJECT_ASM(4)
		"movl %[newv], %[tmp]\n\t"
		"movl %[tmp], (%[v])\n\t"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp), [n] "+m"(nwords), [src] "+&r"(src),
		  [dst] "+&r"(dst) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "rm"(idx), [v] "r"(v), [expect] RSK_I386_VAL(expect),
		  [newv] RSK_I386_VAL(newv) RSK_I386_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

/* *v += count: one add to memory, the commit. */
RSK_ARCH_OP_FN RSK_ARCH_OP(add)(RSK_ARCH_INDEX_PARAMS, intptr_t *v, intptr_t count RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_DESCRIBE RSK_I386_HEAD
		"addl %[count], (%[v])\n\t"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "rm"(idx), [v] "r"(v),
		  [count] RSK_I386_ADDEND(count) RSK_I386_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
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
		RSK_ASM_DESCRIBE RSK_ASM_EXIT("cmpfail") RSK_I386_HEAD
		"movl (%[v]), %[tmp]\n\t"
		"cmpl %[expectnot], %[tmp]\n\t"
		"jz %l[cmpfail]\n\t"
		"movl %[tmp], %[out]\n\t" RSK_INJECT_ASM(3)
		"addl %[offset], %[tmp]\n\t"
		"movl (%[tmp]), %[tmp]\n\t"
		"movl %[tmp], (%[v])\n\t"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp), [out] "=m"(*out) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "rm"(idx), [v] "r"(v),
		  [expectnot] RSK_I386_VAL(expectnot),
		  [offset] RSK_I386_VAL(offset) RSK_I386_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
		: cmpfail, aborted, stopped);
	RSK_ARCH_RETURN_CMP
}

/* *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_OP_FN RSK_ARCH_OP(derefadd)(RSK_ARCH_INDEX_PARAMS, intptr_t *const *ptr, intptr_t off,
				     intptr_t inc RSK_GATE_PARAM)
{
	intptr_t tmp;
	RSK_ARCH_INJECT_DECL
	__asm__ __volatile__ goto(
		RSK_ASM_DESCRIBE RSK_I386_HEAD
		"movl (%[ptr]), %[tmp]\n\t"
		"addl %[off], %[tmp]\n\t"
		"addl %[inc], (%[tmp])\n\t"
		"2:\n\t" RSK_ASM_ABORT
		: [tmp] "=&r"(tmp) RSK_ARCH_INJECT_OUT
		: [area] "r"(area), [idx] "rm"(idx), [ptr] "r"(ptr), [off] RSK_I386_VAL(off),
		  [inc] RSK_I386_ADDEND(inc) RSK_I386_GATE_IN RSK_ARCH_INJECT_IN
		: "memory", "cc"
		: aborted, stopped);
	RSK_ARCH_RETURN
}
