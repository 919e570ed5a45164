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

/* cmpstore(v, expect, newv): if (*v == expect) *v = newv */
RSK_ARCH_DEFINE(cmpstore)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "bne %[tmp], %[expect], %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     RSK_RELEASED("fence rw, w\n\t")
			     "sd %[newv], 0(%[v])\n",
			     (), ([v] "r"(v), [expect] "r"(expect), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpstorestore(v, expect, v2, newv2, newv):
 * if (*v == expect) { *v2 = newv2; *v = newv; } */
RSK_ARCH_DEFINE(cmpstorestore)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "bne %[tmp], %[expect], %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "sd %[newv2], 0(%[v2])\n\t" RSK_INJECT_ASM(4)
			     RSK_RELEASED("fence rw, w\n\t")
			     "sd %[newv], 0(%[v])\n",
			     (), ([v] "r"(v), [expect] "r"(expect), [v2] "r"(v2),
				  [newv2] "r"(newv2), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcopystore(v, expect, dst, src, nwords, newv):
 * if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * doublewords, first to last. */
RSK_ARCH_DEFINE(cmpcopystore)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
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
			     "sd %[newv], 0(%[v])\n",
			     (, [src] "+&r"(src), [dst] "+&r"(dst), [n] "+&r"(nwords)),
			     ([v] "r"(v), [expect] "r"(expect), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

#if !RSK_ARCH_RELEASE /* the operations without a _release twin */

/* cmpcmpstore(v, expect, v2, expect2, newv):
 * if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_DEFINE(cmpcmpstore)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "bne %[tmp], %[expect], %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "ld %[tmp], 0(%[v2])\n\t"
			     "bne %[tmp], %[expect2], %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
			     "sd %[newv], 0(%[v])\n",
			     (), ([v] "r"(v), [expect] "r"(expect), [v2] "r"(v2),
				  [expect2] "r"(expect2), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* add(v, count):
 * *v += count: a load, an add and the commit store; the delay between
 * load and store (point 3) is the window a lost update needs. */
RSK_ARCH_DEFINE(add)
{
	RSK_ARCH_SECTION("ld %[tmp], 0(%[v])\n\t"
			 "add %[tmp], %[tmp], %[count]\n\t" RSK_INJECT_ASM(3)
			 "sd %[tmp], 0(%[v])\n",
			 (), ([v] "r"(v), [count] "r"(count)), ());
	RSK_ARCH_RETURN
}

/* pop(v, expectnot, offset, out):
 * if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); } */
RSK_ARCH_DEFINE(pop)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "beq %[tmp], %[expectnot], %l[cmpfail]\n\t"
			     "sd %[tmp], 0(%[out])\n\t" RSK_INJECT_ASM(3)
			     "add %[tmp], %[tmp], %[offset]\n\t"
			     "ld %[tmp], 0(%[tmp])\n\t"
			     "sd %[tmp], 0(%[v])\n",
			     (), ([v] "r"(v), [expectnot] "r"(expectnot), [offset] "r"(offset),
				  [out] "r"(out)), ());
	RSK_ARCH_RETURN_CMP
}

/* derefadd(ptr, off, inc): *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_DEFINE(derefadd)
{
	intptr_t tmp2;
	RSK_ARCH_SECTION("ld %[tmp], 0(%[ptr])\n\t"
			 "add %[tmp], %[tmp], %[off]\n\t"
			 "ld %[tmp2], 0(%[tmp])\n\t"
			 "add %[tmp2], %[tmp2], %[inc]\n\t" RSK_INJECT_ASM(3)
			 "sd %[tmp2], 0(%[tmp])\n",
			 (, [tmp2] "=&r"(tmp2)), ([ptr] "r"(ptr), [off] "r"(off), [inc] "r"(inc)), ());
	RSK_ARCH_RETURN
}

#endif /* !RSK_ARCH_RELEASE */
