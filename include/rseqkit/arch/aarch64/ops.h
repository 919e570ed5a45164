/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/aarch64/ops.h - the operations on AArch64, each once, as
 * the contract in <rseqkit/arch.h> states them.  No include guard:
 * arch/variant.h includes this once per variant (plain or gated, cpu or
 * cid, relaxed or _release); the building blocks are in arch/aarch64.h.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/aarch64/ops.h"
#endif

/* cmpstore(v, expect, newv): if (*v == expect) *v = newv */
RSK_ARCH_DEFINE(cmpstore)
{
	RSK_ARCH_SECTION_CMP("ldr %[tmp], [%[v]]\n\t"
			     "cmp %[tmp], %[expect]\n\t"
			     "b.ne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     RSK_A64_COMMIT("newv", "v"),
			     (), ([v] "r"(v), [expect] "r"(expect), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpstorestore(v, expect, v2, newv2, newv):
 * if (*v == expect) { *v2 = newv2; *v = newv; } */
RSK_ARCH_DEFINE(cmpstorestore)
{
	RSK_ARCH_SECTION_CMP("ldr %[tmp], [%[v]]\n\t"
			     "cmp %[tmp], %[expect]\n\t"
			     "b.ne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "str %[newv2], [%[v2]]\n\t" RSK_INJECT_ASM(4)
			     RSK_A64_COMMIT("newv", "v"),
			     (), ([v] "r"(v), [expect] "r"(expect), [v2] "r"(v2),
				  [newv2] "r"(newv2), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* cmpcopystore(v, expect, dst, src, nwords, newv):
 * if (*v == expect) { copy nwords words src -> dst; *v = newv; }: whole
 * words, last to first, indexed by the count register. */
RSK_ARCH_DEFINE(cmpcopystore)
{
	RSK_ARCH_SECTION_CMP("ldr %[tmp], [%[v]]\n\t"
			     "cmp %[tmp], %[expect]\n\t"
			     "b.ne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "cbz %[n], 6f\n"
			     "7:\n\t"
			     "sub %[n], %[n], #1\n\t"
			     "ldr %[tmp], [%[src], %[n], lsl #3]\n\t"
			     "str %[tmp], [%[dst], %[n], lsl #3]\n\t"
			     "cbnz %[n], 7b\n"
			     "6:\n\t" RSK_INJECT_ASM(4)
			     RSK_A64_COMMIT("newv", "v"),
			     (, [n] "+&r"(nwords)),
			     ([v] "r"(v), [expect] "r"(expect), [dst] "r"(dst), [src] "r"(src),
			      [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

#if !RSK_ARCH_RELEASE /* the operations without a _release twin */

/* cmpcmpstore(v, expect, v2, expect2, newv):
 * if (*v == expect && *v2 == expect2) *v = newv */
RSK_ARCH_DEFINE(cmpcmpstore)
{
	RSK_ARCH_SECTION_CMP("ldr %[tmp], [%[v]]\n\t"
			     "cmp %[tmp], %[expect]\n\t"
			     "b.ne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)
			     "ldr %[tmp], [%[v2]]\n\t"
			     "cmp %[tmp], %[expect2]\n\t"
			     "b.ne %l[cmpfail]\n\t" RSK_INJECT_ASM(4)
			     "str %[newv], [%[v]]\n",
			     (), ([v] "r"(v), [expect] "r"(expect), [v2] "r"(v2),
				  [expect2] "r"(expect2), [newv] "r"(newv)), ());
	RSK_ARCH_RETURN_CMP
}

/* add(v, count):
 * *v += count: a load, an add and the commit store; the delay between
 * load and store (point 3) is the window a lost update needs. */
RSK_ARCH_DEFINE(add)
{
	RSK_ARCH_SECTION("ldr %[tmp], [%[v]]\n\t"
			 "add %[tmp], %[tmp], %[count]\n\t" RSK_INJECT_ASM(3)
			 "str %[tmp], [%[v]]\n",
			 (), ([v] "r"(v), [count] "r"(count)), ());
	RSK_ARCH_RETURN
}

/* pop(v, expectnot, offset, out):
 * if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); } */
RSK_ARCH_DEFINE(pop)
{
	RSK_ARCH_SECTION_CMP("ldr %[tmp], [%[v]]\n\t"
			     "cmp %[tmp], %[expectnot]\n\t"
			     "b.eq %l[cmpfail]\n\t"
			     "str %[tmp], [%[out]]\n\t" RSK_INJECT_ASM(3)
			     "ldr %[tmp], [%[tmp], %[offset]]\n\t"
			     "str %[tmp], [%[v]]\n",
			     (), ([v] "r"(v), [expectnot] "r"(expectnot), [offset] "r"(offset),
				  [out] "r"(out)), ());
	RSK_ARCH_RETURN_CMP
}

/* derefadd(ptr, off, inc): *(intptr_t *)(*ptr + off) += inc */
RSK_ARCH_DEFINE(derefadd)
{
	intptr_t val;
	RSK_ARCH_SECTION("ldr %[tmp], [%[ptr]]\n\t"
			 "add %[tmp], %[tmp], %[off]\n\t"
			 "ldr %[val], [%[tmp]]\n\t"
			 "add %[val], %[val], %[inc]\n\t" RSK_INJECT_ASM(3)
			 "str %[val], [%[tmp]]\n",
			 (, [val] "=&r"(val)), ([ptr] "r"(ptr), [off] "r"(off), [inc] "r"(inc)), ());
	RSK_ARCH_RETURN
}

#endif /* !RSK_ARCH_RELEASE */
