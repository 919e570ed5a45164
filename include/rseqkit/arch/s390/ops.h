/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/s390/ops.h - the operations on s390x, each once, as the
 * contract in <rseqkit/arch.h> states them.  No include guard:
 * arch/variant.h includes this once per variant (plain or gated, cpu or
 * cid); the _release twins are derived there (TSO), the building blocks
 * and the register rules are in arch/s390.h.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/s390/ops.h"
#endif

/* cmpstore(v, expect, newv): if (*v == expect) *v = newv */
RSK_ARCH_DEFINE(cmpstore)
{
	RSK_ARCH_SECTION_CMP("cg %[expect], 0(%[v])\n\t"
			     "jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "stg %[newv], 0(%[v])\n",
			     (), ([v] "a"(v), [expect] "d"(expect), [newv] "d"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpstorestore(v, expect, v2, newv2, newv):
 * if (*v == expect) { *v2 = newv2; *v = newv; } */
RSK_ARCH_DEFINE(cmpstorestore)
{
	RSK_ARCH_SECTION_CMP("cg %[expect], 0(%[v])\n\t"
			     "jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "stg %[newv2], 0(%[v2])\n\t" RSK_INJECT_ASM(4)
			     "stg %[newv], 0(%[v])\n",
			     (), ([v] "a"(v), [expect] "d"(expect), [v2] "a"(v2),
				  [newv2] "d"(newv2), [newv] "d"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcopystore(v, expect, dst, src, nwords, newv):
 * if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * doublewords, first to last. */
RSK_ARCH_DEFINE(cmpcopystore)
{
	RSK_ARCH_SECTION_CMP("cg %[expect], 0(%[v])\n\t"
			     "jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "ltgr %[n], %[n]\n\t"
			     "jz 6f\n"
			     "7:\n\t"
			     "lg %[tmp], 0(%[src])\n\t"
			     "stg %[tmp], 0(%[dst])\n\t"
			     "la %[src], 8(%[src])\n\t"
			     "la %[dst], 8(%[dst])\n\t"
			     "brctg %[n], 7b\n"
			     "6:\n\t" RSK_INJECT_ASM(4)
			     "stg %[newv], 0(%[v])\n",
			     (, [src] "+&a"(src), [dst] "+&a"(dst), [n] "+&d"(nwords)),
			     ([v] "a"(v), [expect] "d"(expect), [newv] "d"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcmpstore(v, expect, v2, expect2, newv):
 * if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_DEFINE(cmpcmpstore)
{
	RSK_ARCH_SECTION_CMP("cg %[expect], 0(%[v])\n\t"
			     "jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "cg %[expect2], 0(%[v2])\n\t"
			     "jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
			     "stg %[newv], 0(%[v])\n",
			     (), ([v] "a"(v), [expect] "d"(expect), [v2] "a"(v2),
				  [expect2] "d"(expect2), [newv] "d"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* add(v, count):
 * *v += count: a load, an add and the commit store; the delay between
 * load and store (point 3) is the window a lost update needs. */
RSK_ARCH_DEFINE(add)
{
	RSK_ARCH_SECTION("lg %[tmp], 0(%[v])\n\t"
			 "agr %[tmp], %[count]\n\t" RSK_INJECT_ASM(3)
			 "stg %[tmp], 0(%[v])\n",
			 (), ([v] "a"(v), [count] "d"(count)), ());
	RSK_ARCH_RETURN
}

/* pop(v, expectnot, offset, out):
 * if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); } */
RSK_ARCH_DEFINE(pop)
{
	RSK_ARCH_SECTION_CMP("lg %[tmp], 0(%[v])\n\t"
			     "cgr %[tmp], %[expectnot]\n\t"
			     "jge %l[cmpfail]\n\t" /* brcl if equal */
			     "stg %[tmp], 0(%[out])\n\t" RSK_INJECT_ASM(3)
			     "lg %[tmp], 0(%[offset], %[tmp])\n\t"
			     "stg %[tmp], 0(%[v])\n",
			     (), ([v] "a"(v), [expectnot] "d"(expectnot), [offset] "a"(offset),
				  [out] "a"(out)), ());
	RSK_ARCH_RETURN_CMP
}

/* derefadd(ptr, off, inc): *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_DEFINE(derefadd)
{
	intptr_t tmp2;
	RSK_ARCH_SECTION("lg %[tmp], 0(%[ptr])\n\t"
			 "lg %[tmp2], 0(%[off], %[tmp])\n\t"
			 "agr %[tmp2], %[inc]\n\t" RSK_INJECT_ASM(3)
			 "stg %[tmp2], 0(%[off], %[tmp])\n",
			 (, [tmp2] "=&d"(tmp2)), ([ptr] "a"(ptr), [off] "a"(off), [inc] "d"(inc)), ());
	RSK_ARCH_RETURN
}
