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

/* cmpstore(v, expect, newv): if (*v == expect) *v = newv */
RSK_ARCH_DEFINE(cmpstore)
{
	RSK_ARCH_SECTION_CMP("cmpq %[expect], %[v]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "movq %[newv], %[v]\n",
			     (), ([v] "m"(*v), [expect] "re"(expect), [newv] "re"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcmpstore(v, expect, v2, expect2, newv):
 * if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_DEFINE(cmpcmpstore)
{
	RSK_ARCH_SECTION_CMP("cmpq %[expect], %[v]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "cmpq %[expect2], %[v2]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
			     "movq %[newv], %[v]\n",
			     (), ([v] "m"(*v), [expect] "re"(expect), [v2] "m"(*v2),
				  [expect2] "re"(expect2), [newv] "re"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpstorestore(v, expect, v2, newv2, newv):
 * if (*v == expect) { *v2 = newv2; *v = newv; } */
RSK_ARCH_DEFINE(cmpstorestore)
{
	RSK_ARCH_SECTION_CMP("cmpq %[expect], %[v]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "movq %[newv2], %[v2]\n\t" RSK_INJECT_ASM(4)
			     "movq %[newv], %[v]\n",
			     (), ([v] "m"(*v), [expect] "re"(expect), [v2] "m"(*v2),
				  [newv2] "re"(newv2), [newv] "re"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcopystore(v, expect, dst, src, nwords, newv):
 * if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * words, last to first, indexed by a counter. */
RSK_ARCH_DEFINE(cmpcopystore)
{
	RSK_ARCH_SECTION_CMP("cmpq %[expect], %[v]\n\t"
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "testq %[n], %[n]\n\t"
			     "jz 6f\n"
			     "7:\n\t"
			     "movq -8(%[src], %[n], 8), %[tmp]\n\t"
			     "movq %[tmp], -8(%[dst], %[n], 8)\n\t"
			     "decq %[n]\n\t"
			     "jnz 7b\n"
			     "6:\n\t" RSK_INJECT_ASM(4)
			     "movq %[newv], %[v]\n",
			     (, [n] "+&r"(nwords)),
			     ([v] "m"(*v), [expect] "re"(expect), [dst] "r"(dst), [src] "r"(src),
			      [newv] "re"(newv)), (, "memory"));
	RSK_ARCH_RETURN_CMP
}

/* add(v, count): *v += count: one add to memory is the commit. */
RSK_ARCH_DEFINE(add)
{
	RSK_ARCH_SECTION("addq %[count], %[v]\n",
			 (), ([v] "m"(*v), [count] "re"(count)), ());
	RSK_ARCH_RETURN
}

/* pop(v, expectnot, offset, out):
 * if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); }.
 * The popped word is stored to *out inside the section, before the commit
 * (rsk_pop(3) allows that).  Not as an output read after the asm: gcc 12
 * -O1 copied such an output to *out from a register that did not hold it
 * yet (tests/primitives.c at -O1, check-opt). */
RSK_ARCH_DEFINE(pop)
{
	intptr_t head;
	RSK_ARCH_SECTION_CMP("movq %[v], %[head]\n\t"
			     "cmpq %[expectnot], %[head]\n\t"
			     "jz %l[cmpfail]\n\t"
			     "movq %[head], (%[out])\n\t" RSK_INJECT_ASM(3)
			     "movq (%[head], %[offset]), %[tmp]\n\t"
			     "movq %[tmp], %[v]\n",
			     (, [head] "=&r"(head)),
			     ([v] "m"(*v), [expectnot] "re"(expectnot), [offset] "r"(offset),
			      [out] "r"(out)), (, "memory"));
	RSK_ARCH_RETURN_CMP
}

/* derefadd(ptr, off, inc): *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_DEFINE(derefadd)
{
	RSK_ARCH_SECTION("movq %[ptr], %[tmp]\n\t"
			 "addq %[inc], (%[tmp], %[off])\n",
			 (), ([ptr] "m"(*ptr), [off] "r"(off), [inc] "re"(inc)), (, "memory"));
	RSK_ARCH_RETURN
}
