/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/ppc/ops.h - the operations on 64-bit PowerPC, each once, as
 * the contract in <rseqkit/arch.h> states them.  No include guard:
 * arch/variant.h includes this once per variant (plain or gated, cpu or
 * cid, relaxed or _release); the building blocks and the register rules
 * are in arch/ppc.h.  Every section clobbers "lr" (the arming's bcl).
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/ppc/ops.h"
#endif

/* cmpstore(v, expect, newv): if (*v == expect) *v = newv */
RSK_ARCH_DEFINE(cmpstore)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "cmpd %[tmp], %[expect]\n\t"
			     "bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     RSK_RELEASED("lwsync\n\t")
			     "std %[newv], 0(%[v])\n",
			     (), ([v] "b"(v), [expect] "r"(expect), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpstorestore(v, expect, v2, newv2, newv):
 * if (*v == expect) { *v2 = newv2; *v = newv; } */
RSK_ARCH_DEFINE(cmpstorestore)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "cmpd %[tmp], %[expect]\n\t"
			     "bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "std %[newv2], 0(%[v2])\n\t" RSK_INJECT_ASM(4)
			     RSK_RELEASED("lwsync\n\t")
			     "std %[newv], 0(%[v])\n",
			     (), ([v] "b"(v), [expect] "r"(expect), [v2] "b"(v2),
				  [newv2] "r"(newv2), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcopystore(v, expect, dst, src, nwords, newv):
 * if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * doublewords, first to last, counted in CTR. */
RSK_ARCH_DEFINE(cmpcopystore)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "cmpd %[tmp], %[expect]\n\t"
			     "bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "cmpdi %[n], 0\n\t"
			     "beq 6f\n\t"
			     "mtctr %[n]\n"
			     "7:\n\t"
			     "ld %[tmp], 0(%[src])\n\t"
			     "std %[tmp], 0(%[dst])\n\t"
			     "addi %[src], %[src], 8\n\t"
			     "addi %[dst], %[dst], 8\n\t"
			     "bdnz 7b\n"
			     "6:\n\t" RSK_INJECT_ASM(4)
			     RSK_RELEASED("lwsync\n\t")
			     "std %[newv], 0(%[v])\n",
			     (, [src] "+&b"(src), [dst] "+&b"(dst)),
			     ([v] "b"(v), [expect] "r"(expect), [n] "r"(nwords),
			      [newv] "r"(newv)), (, "ctr"));
	RSK_ARCH_RETURN_CMP
}

#if !RSK_ARCH_RELEASE /* the operations without a _release twin */

/* cmpcmpstore(v, expect, v2, expect2, newv):
 * if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_DEFINE(cmpcmpstore)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "cmpd %[tmp], %[expect]\n\t"
			     "bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "ld %[tmp], 0(%[v2])\n\t"
			     "cmpd %[tmp], %[expect2]\n\t"
			     "bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
			     "std %[newv], 0(%[v])\n",
			     (), ([v] "b"(v), [expect] "r"(expect), [v2] "b"(v2),
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
			 "std %[tmp], 0(%[v])\n",
			 (), ([v] "b"(v), [count] "r"(count)), ());
	RSK_ARCH_RETURN
}

/* pop(v, expectnot, offset, out):
 * if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); } */
RSK_ARCH_DEFINE(pop)
{
	RSK_ARCH_SECTION_CMP("ld %[tmp], 0(%[v])\n\t"
			     "cmpd %[tmp], %[expectnot]\n\t"
			     "beq- %l[cmpfail]\n\t"
			     "std %[tmp], 0(%[out])\n\t" RSK_INJECT_ASM(3)
			     "ldx %[tmp], %[tmp], %[offset]\n\t"
			     "std %[tmp], 0(%[v])\n",
			     (), ([v] "b"(v), [expectnot] "r"(expectnot), [offset] "r"(offset),
				  [out] "b"(out)), ());
	RSK_ARCH_RETURN_CMP
}

/* derefadd(ptr, off, inc): *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_DEFINE(derefadd)
{
	intptr_t tmp2;
	RSK_ARCH_SECTION("ld %[tmp], 0(%[ptr])\n\t"
			 "ldx %[tmp2], %[tmp], %[off]\n\t"
			 "add %[tmp2], %[tmp2], %[inc]\n\t" RSK_INJECT_ASM(3)
			 "stdx %[tmp2], %[tmp], %[off]\n",
			 (, [tmp2] "=&r"(tmp2)), ([ptr] "b"(ptr), [off] "r"(off), [inc] "r"(inc)), ());
	RSK_ARCH_RETURN
}

#endif /* !RSK_ARCH_RELEASE */
