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

/* cmpstore(v, expect, newv): if (*v == expect) *v = newv */
RSK_ARCH_DEFINE(cmpstore)
{
	RSK_ARCH_SECTION_CMP("movl (%[v]), %[tmp]\n\t"
			     "cmpl %[expect], %[tmp]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "movl %[newv], %[tmp]\n\t"
			     "movl %[tmp], (%[v])\n\t",
			     (), ([v] "r"(v), [expect] RSK_I386_VAL(expect),
				  [newv] RSK_I386_VAL(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcmpstore(v, expect, v2, expect2, newv):
 * if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_DEFINE(cmpcmpstore)
{
	RSK_ARCH_SECTION_CMP("movl (%[v]), %[tmp]\n\t"
			     "cmpl %[expect], %[tmp]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "movl (%[v2]), %[tmp]\n\t"
			     "cmpl %[expect2], %[tmp]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
			     "movl %[newv], %[tmp]\n\t"
			     "movl %[tmp], (%[v])\n\t",
			     (), ([v] "r"(v), [expect] RSK_I386_VAL(expect), [v2] "r"(v2),
				  [expect2] RSK_I386_VAL(expect2), [newv] RSK_I386_VAL(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpstorestore(v, expect, v2, newv2, newv):
 * if (*v == expect) { *v2 = newv2; *v = newv; } */
RSK_ARCH_DEFINE(cmpstorestore)
{
	RSK_ARCH_SECTION_CMP("movl (%[v]), %[tmp]\n\t"
			     "cmpl %[expect], %[tmp]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "movl %[newv2], %[tmp]\n\t"
			     "movl %[tmp], (%[v2])\n\t" RSK_INJECT_ASM(4)
			     "movl %[newv], %[tmp]\n\t"
			     "movl %[tmp], (%[v])\n\t",
			     (), ([v] "r"(v), [expect] RSK_I386_VAL(expect), [v2] "r"(v2),
				  [newv2] RSK_I386_VAL(newv2), [newv] RSK_I386_VAL(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcopystore(v, expect, dst, src, nwords, newv):
 * if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * words.  i386 has too few registers to index by a counter register next
 * to the section's own (as x86-64 does), so the copy walks the pointers
 * and keeps the count in memory. */
RSK_ARCH_DEFINE(cmpcopystore)
{
	RSK_ARCH_SECTION_CMP("movl (%[v]), %[tmp]\n\t"
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
			     "movl %[tmp], (%[v])\n\t",
			     (, [n] "+m"(nwords), [src] "+&r"(src), [dst] "+&r"(dst)),
			     ([v] "r"(v), [expect] RSK_I386_VAL(expect),
			      [newv] RSK_I386_VAL(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* add(v, count): *v += count: one add to memory, the commit. */
RSK_ARCH_DEFINE(add)
{
	RSK_ARCH_SECTION("addl %[count], (%[v])\n\t",
			 (), ([v] "r"(v), [count] RSK_I386_ADDEND(count)), ());
	RSK_ARCH_RETURN
}

/* pop(v, expectnot, offset, out):
 * if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); } */
RSK_ARCH_DEFINE(pop)
{
	RSK_ARCH_SECTION_CMP("movl (%[v]), %[tmp]\n\t"
			     "cmpl %[expectnot], %[tmp]\n\t"
			     "jz %l[cmpfail]\n\t"
			     "movl %[tmp], %[out]\n\t" RSK_INJECT_ASM(3)
			     "addl %[offset], %[tmp]\n\t"
			     "movl (%[tmp]), %[tmp]\n\t"
			     "movl %[tmp], (%[v])\n\t",
			     (, [out] "=m"(*out)),
			     ([v] "r"(v), [expectnot] RSK_I386_VAL(expectnot),
			      [offset] RSK_I386_VAL(offset)), ());
	RSK_ARCH_RETURN_CMP
}

/* derefadd(ptr, off, inc): *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_DEFINE(derefadd)
{
	RSK_ARCH_SECTION("movl (%[ptr]), %[tmp]\n\t"
			 "addl %[off], %[tmp]\n\t"
			 "addl %[inc], (%[tmp])\n\t",
			 (), ([ptr] "r"(ptr), [off] RSK_I386_VAL(off), [inc] RSK_I386_ADDEND(inc)), ());
	RSK_ARCH_RETURN
}
