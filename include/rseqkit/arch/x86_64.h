/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/x86_64.h - restartable sequences for x86-64.
 *
 * Implements the contract written in <rseqkit/arch.h> in its `_at` form:
 * a section reaches the thread's area through %fs, by the area's offset
 * from the thread pointer (rsk_arch_area_t is that offset), and re-checks
 * the index field whose offset in the area it is given (cpu_id or mm_cid):
 * one code path for both index modes, and no area pointer to build.
 *
 * The words a section compares and commits and the gate are "m" operands,
 * so the compiler addresses them off the registers it already holds (a
 * part's base and index) and the section compares and stores memory
 * directly.  The relaxed operations clobber no memory: what they store
 * (the commit, a speculative store, the descriptor pointer in the area) is
 * read in C only through atomics, volatile loads or calls, and without the
 * clobber the compiler keeps the area offset and a structure's fields in
 * registers across operations instead of reloading them after each.
 * Operations that read or write memory they do not name (pop's link, the
 * copy, derefadd) clobber "memory"; the release variants put a compiler
 * barrier before the section.  <rseqkit/ops.h> adds barriers around the
 * public primitives.
 *
 * x86 is TSO: every store is already a release store, so a release
 * variant is the relaxed one behind a compiler barrier.
 *
 * Layout of one section (labels are local to each asm statement):
 *   1:  start_ip  - first instruction after arming rseq_cs
 *   2:  end of the commit store (post_commit_offset = 2b - 1b)
 *   3:  the struct rseq_cs descriptor, in __rseq_cs
 *   4:  abort_ip, in __rseq_failure, right after the signature
 *   6, 7: copy loop; 8, 9: injected delay loop
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/x86_64.h"
#endif

#define RSK_ARCH_SIGNATURE 0x53053053
#define RSK_ARCH_NAME	   "x86_64"
#define RSK_ARCH_NR_RSEQ   334

static inline __attribute__((always_inline)) void *rsk_arch_thread_pointer(void)
{
	/* %fs:0, the TCB's self pointer under glibc and musl. */
	return __builtin_thread_pointer();
}

/* The area, as sections reach it: its offset from %fs. */
#define RSK_ARCH_HAS_AREA_OFFSET 1
typedef uintptr_t rsk_arch_area_t;

static inline __attribute__((always_inline)) rsk_arch_area_t rsk_arch_area_of(ptrdiff_t off)
{
	return (rsk_arch_area_t)off;
}

/* A 32-bit field of the area at byte `field`: one load each time (the
 * kernel writes it).  An asm rather than a __seg_fs access, which GCC 12
 * cannot fold into a base + index address. */
static inline __attribute__((always_inline)) uint32_t rsk_arch_area_u32(rsk_arch_area_t area,
									uint32_t field)
{
	uint32_t v;

	if (__builtin_constant_p(field))
		__asm__ __volatile__("movl %%fs:%c2(%1), %0" : "=r"(v) : "r"(area), "i"(field));
	else
		__asm__ __volatile__("movl %%fs:(%1, %2), %0"
				     : "=r"(v)
				     : "r"(area), "r"((uintptr_t)field));
	return v;
}

#ifdef RSEQKIT_NEGATIVE_CONTROL
/* Test builds only: never arm the descriptor, so the kernel never restarts
 * a section - the negative control that shows the tests detect loss. */
#define RSK_X64_ARM "\n"
#else
#define RSK_X64_ARM                                                            \
	"leaq 3b(%%rip), %[tmp]\n\t"                                           \
	"movq %[tmp], %%fs:8(%[area])\n"
#endif

/* The descriptor and its entry in the pointer array. */
#define RSK_X64_DESCRIBE                                                       \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n"                                                         \
	"3:\n\t"                                                               \
	".long 0, 0\n\t"                                                       \
	".quad 1f, (2f - 1f), 4f\n\t"                                          \
	".popsection\n\t"                                                      \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"                         \
	".quad 3b\n\t"                                                         \
	".popsection\n\t"

/* An early exit (compare failed): a (start, exit) pair for debuggers. */
#define RSK_X64_EXIT(label)                                                    \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                     \
	".quad 1f, %l[" label "]\n\t"                                          \
	".popsection\n\t"

/* The signature, then abort_ip: leave for the C abort label. */
#define RSK_X64_ABORT                                                          \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	".byte 0x0f, 0xb9, 0x3d\n\t" /* ud1 ...: the signature is its disp32 */ \
	".long 0x53053053\n"                                                   \
	"4:\n\t"                                                               \
	"jmp %l[aborted]\n\t"                                                  \
	".popsection\n\t"

/* Leave as an abort unless the area still holds the index the caller used:
 * one compare of the index field in memory. */
#define RSK_X64_CHECK_INDEX                                                    \
	"cmpl %[idx], %%fs:(%[area], %[ioff])\n\t"                             \
	"jnz 4f\n\t"

/* The gated twins: a closed gate (nonzero) leaves through `stopped`.  A
 * plain load is an acquire on x86. */
#define RSK_X64_GATE_ASM RSK_GATED(                                            \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                     \
	".quad 1b, %l[stopped]\n\t"                                            \
	".popsection\n\t"                                                      \
	"cmpq $0, %[gate]\n\t"                                                 \
	"jnz %l[stopped]\n\t")
#define RSK_X64_GATE_IN	    RSK_GATED(, [gate] "m"(*gate))
#define RSK_X64_GATE_LABELS RSK_GATED(, stopped)
#define RSK_X64_STOPPED	    RSK_GATED(stopped : return 2;)

#if RSK_INJECTING
/* The delay loop borrows tmp, parking its value in a stack slot (a plain
 * store: a push could be cut in half by an abort). */
#define RSK_INJECT_ASM(n)                                                      \
	"movq %[tmp], %[injspill]\n\t"                                         \
	"movl %[inj" #n "], %k[tmp]\n\t"                                       \
	"testl %k[tmp], %k[tmp]\n\t"                                           \
	"jz 8f\n"                                                              \
	"9:\n\t"                                                               \
	"decl %k[tmp]\n\t"                                                     \
	"jnz 9b\n"                                                             \
	"8:\n\t"                                                               \
	"movq %[injspill], %[tmp]\n\t"
#define RSK_X64_INJECT_DECL intptr_t rsk_injspill;
#define RSK_X64_INJECT_OUT  , [injspill] "=m"(rsk_injspill)
#define RSK_X64_INJECT_IN                                                      \
	, [inj1] "m"(rsk_inject_loops[1]), [inj2] "m"(rsk_inject_loops[2]),    \
		[inj3] "m"(rsk_inject_loops[3]), [inj4] "m"(rsk_inject_loops[4])
#else
#define RSK_INJECT_ASM(n) ""
#define RSK_X64_INJECT_DECL
#define RSK_X64_INJECT_OUT
#define RSK_X64_INJECT_IN
#endif

/* The operands every section has: the area (an offset from %fs) and the
 * index field's offset in it, the index it must still hold, and scratch. */
#define RSK_X64_COMMON_OUT [tmp] "=&r"(tmp)
#define RSK_X64_COMMON_IN  [area] "r"(area), [ioff] "r"((uintptr_t)ioff), [idx] "r"(idx)
#define RSK_X64_BARRIER()  __asm__ __volatile__("" ::: "memory")
#define RSK_X64_PROLOGUE                                                       \
	RSK_X64_DESCRIBE RSK_X64_ARM "1:\n\t" RSK_INJECT_ASM(1)                \
		RSK_X64_CHECK_INDEX RSK_X64_GATE_ASM RSK_INJECT_ASM(2)

#define RSK_X64_FN static inline __attribute__((always_inline)) int

/*
 * The operations, once, in the `_at` form: `ioff` is the offset of the
 * index field in the area (RSK_ABI_OFF_CPU_ID or RSK_ABI_OFF_MM_CID).
 * Expanded twice by arch.h: plain and gated.
 */
#define RSK_ARCH_DEFINE_AT_OPS()                                               \
	RSK_X64_FN RSK_ARCH_FN(cmpstore, at)(rsk_arch_area_t area, uint32_t ioff, \
					     int idx, intptr_t *v, intptr_t expect, \
					     intptr_t newv RSK_GATE_PARAM)   \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_EXIT("cmpfail") RSK_X64_PROLOGUE               \
			"cmpq %[expect], %[v]\n\t"                             \
			"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)                \
			"movq %[newv], %[v]\n"                                 \
			"2:\n\t" RSK_X64_ABORT                                 \
			: RSK_X64_COMMON_OUT RSK_X64_INJECT_OUT                   \
			: RSK_X64_COMMON_IN, [v] "m"(*v), [expect] "re"(expect), \
			  [newv] "re"(newv)RSK_X64_GATE_IN RSK_X64_INJECT_IN   \
			: "cc"                                       \
			: cmpfail, aborted RSK_X64_GATE_LABELS);               \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
		RSK_X64_STOPPED                                                \
	}                                                                      \
                                                                               \
	RSK_X64_FN RSK_ARCH_FN(cmpcmpstore, at)(                               \
		rsk_arch_area_t area, uint32_t ioff, int idx, intptr_t *v, \
		intptr_t expect, intptr_t *v2, intptr_t expect2, intptr_t newv RSK_GATE_PARAM) \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_EXIT("cmpfail") RSK_X64_PROLOGUE               \
			"cmpq %[expect], %[v]\n\t"                             \
			"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)                \
			"cmpq %[expect2], %[v2]\n\t"                           \
			"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(4)                \
			"movq %[newv], %[v]\n"                                 \
			"2:\n\t" RSK_X64_ABORT                                 \
			: RSK_X64_COMMON_OUT RSK_X64_INJECT_OUT                   \
			: RSK_X64_COMMON_IN, [v] "m"(*v), [expect] "re"(expect), \
			  [v2] "m"(*v2), [expect2] "re"(expect2),              \
			  [newv] "re"(newv)RSK_X64_GATE_IN RSK_X64_INJECT_IN   \
			: "cc"                                       \
			: cmpfail, aborted RSK_X64_GATE_LABELS);               \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
		RSK_X64_STOPPED                                                \
	}                                                                      \
                                                                               \
	RSK_X64_FN RSK_ARCH_FN(cmpstorestore, at)(                             \
		rsk_arch_area_t area, uint32_t ioff, int idx, intptr_t *v, \
		intptr_t expect, intptr_t *v2, intptr_t newv2, intptr_t newv RSK_GATE_PARAM) \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_EXIT("cmpfail") RSK_X64_PROLOGUE               \
			"cmpq %[expect], %[v]\n\t"                             \
			"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)                \
			"movq %[newv2], %[v2]\n\t" RSK_INJECT_ASM(4)           \
			"movq %[newv], %[v]\n"                                 \
			"2:\n\t" RSK_X64_ABORT                                 \
			: RSK_X64_COMMON_OUT RSK_X64_INJECT_OUT                   \
			: RSK_X64_COMMON_IN, [v] "m"(*v), [expect] "re"(expect), \
			  [v2] "m"(*v2), [newv2] "re"(newv2),    \
			  [newv] "re"(newv)RSK_X64_GATE_IN RSK_X64_INJECT_IN   \
			: "cc"                                       \
			: cmpfail, aborted RSK_X64_GATE_LABELS);               \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
		RSK_X64_STOPPED                                                \
	}                                                                      \
                                                                               \
	/* The copy: whole words, last to first, indexed by a counter. */     \
	RSK_X64_FN RSK_ARCH_FN(cmpcopystore, at)(                              \
		rsk_arch_area_t area, uint32_t ioff, int idx, intptr_t *v, \
		intptr_t expect, intptr_t *dst, const intptr_t *src,           \
		intptr_t nwords, intptr_t newv RSK_GATE_PARAM)                 \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_EXIT("cmpfail") RSK_X64_PROLOGUE               \
			"cmpq %[expect], %[v]\n\t"                             \
			"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)                \
			"testq %[n], %[n]\n\t"                                 \
			"jz 6f\n"                                              \
			"7:\n\t"                                               \
			"movq -8(%[src], %[n], 8), %[tmp]\n\t"                 \
			"movq %[tmp], -8(%[dst], %[n], 8)\n\t"                 \
			"decq %[n]\n\t"                                        \
			"jnz 7b\n"                                             \
			"6:\n\t" RSK_INJECT_ASM(4)                             \
			"movq %[newv], %[v]\n"                                 \
			"2:\n\t" RSK_X64_ABORT                                 \
			: RSK_X64_COMMON_OUT, [n] "+&r"(nwords)RSK_X64_INJECT_OUT \
			: RSK_X64_COMMON_IN, [v] "m"(*v), [expect] "re"(expect), \
			  [dst] "r"(dst), [src] "r"(src),                      \
			  [newv] "re"(newv)RSK_X64_GATE_IN RSK_X64_INJECT_IN   \
			: "memory", "cc"                                       \
			: cmpfail, aborted RSK_X64_GATE_LABELS);               \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
		RSK_X64_STOPPED                                                \
	}                                                                      \
                                                                               \
	RSK_X64_FN RSK_ARCH_FN(add, at)(rsk_arch_area_t area, uint32_t ioff, \
					int idx, intptr_t *v, intptr_t count RSK_GATE_PARAM) \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_PROLOGUE                                       \
			"addq %[count], %[v]\n"                                \
			"2:\n\t" RSK_X64_ABORT                                 \
			: RSK_X64_COMMON_OUT RSK_X64_INJECT_OUT                   \
			: RSK_X64_COMMON_IN, [v] "m"(*v),                      \
			  [count] "re"(count)RSK_X64_GATE_IN RSK_X64_INJECT_IN \
			: "cc"                                       \
			: aborted RSK_X64_GATE_LABELS);                        \
		return 0;                                                      \
	aborted:                                                               \
		return -1;                                                     \
		RSK_X64_STOPPED                                                \
	}                                                                      \
                                                                               \
	/* The popped word is stored to *out inside the section, before the \
	 * commit (rsk_pop(3) allows that).  Not as an output read after the \
	 * asm: gcc 12 -O1 copied such an output to *out from a register that \
	 * did not hold it yet (tests/primitives.c at -O1, check-opt). */     \
	RSK_X64_FN RSK_ARCH_FN(pop, at)(rsk_arch_area_t area, uint32_t ioff, \
					int idx, intptr_t *v, intptr_t expectnot, \
					intptr_t offset, intptr_t *out RSK_GATE_PARAM) \
	{                                                                      \
		intptr_t tmp, head;                                            \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_EXIT("cmpfail") RSK_X64_PROLOGUE               \
			"movq %[v], %[head]\n\t"                               \
			"cmpq %[expectnot], %[head]\n\t"                       \
			"jz %l[cmpfail]\n\t"                                   \
			"movq %[head], (%[out])\n\t" RSK_INJECT_ASM(3)         \
			"movq (%[head], %[offset]), %[tmp]\n\t"                \
			"movq %[tmp], %[v]\n"                                  \
			"2:\n\t" RSK_X64_ABORT                                 \
			: RSK_X64_COMMON_OUT, [head] "=&r"(head)RSK_X64_INJECT_OUT \
			: RSK_X64_COMMON_IN, [v] "m"(*v), [expectnot] "re"(expectnot), \
			  [offset] "r"(offset), [out] "r"(out)RSK_X64_GATE_IN RSK_X64_INJECT_IN \
			: "memory", "cc"                                       \
			: cmpfail, aborted RSK_X64_GATE_LABELS);               \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
		RSK_X64_STOPPED                                                \
	}                                                                      \
                                                                               \
	RSK_X64_FN RSK_ARCH_FN(derefadd, at)(rsk_arch_area_t area, uint32_t ioff, \
					     int idx, intptr_t *const *ptr, intptr_t off, \
					     intptr_t inc RSK_GATE_PARAM)    \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_PROLOGUE                                       \
			"movq %[ptr], %[tmp]\n\t"                              \
			"addq %[inc], (%[tmp], %[off])\n"                      \
			"2:\n\t" RSK_X64_ABORT                                 \
			: RSK_X64_COMMON_OUT RSK_X64_INJECT_OUT                   \
			: RSK_X64_COMMON_IN, [ptr] "m"(*ptr), [off] "r"(off),  \
			  [inc] "re"(inc)RSK_X64_GATE_IN RSK_X64_INJECT_IN     \
			: "memory", "cc"                                       \
			: aborted RSK_X64_GATE_LABELS);                        \
		return 0;                                                      \
	aborted:                                                               \
		return -1;                                                     \
		RSK_X64_STOPPED                                                \
	}                                                                      \
                                                                               \
	/* TSO: a plain store already orders after earlier loads and stores; \
	 * the barrier keeps the compiler from moving them past it (the copy \
	 * clobbers "memory" anyway). */                                       \
	RSK_X64_FN RSK_ARCH_FN(cmpstore_release, at)(                          \
		rsk_arch_area_t area, uint32_t ioff, int idx, intptr_t *v, \
		intptr_t expect, intptr_t newv RSK_GATE_PARAM)                 \
	{                                                                      \
		RSK_X64_BARRIER();                                             \
		return RSK_ARCH_FN(cmpstore, at)(area, ioff, idx, v, expect, newv RSK_GATE_ARG); \
	}                                                                      \
	RSK_X64_FN RSK_ARCH_FN(cmpstorestore_release, at)(                     \
		rsk_arch_area_t area, uint32_t ioff, int idx, intptr_t *v, \
		intptr_t expect, intptr_t *v2, intptr_t newv2, intptr_t newv RSK_GATE_PARAM) \
	{                                                                      \
		RSK_X64_BARRIER();                                             \
		return RSK_ARCH_FN(cmpstorestore, at)(area, ioff, idx, v, expect, v2, newv2, \
						      newv RSK_GATE_ARG);      \
	}                                                                      \
	RSK_X64_FN RSK_ARCH_FN(cmpcopystore_release, at)(                      \
		rsk_arch_area_t area, uint32_t ioff, int idx, intptr_t *v, \
		intptr_t expect, intptr_t *dst, const intptr_t *src,           \
		intptr_t nwords, intptr_t newv RSK_GATE_PARAM)                 \
	{                                                                      \
		return RSK_ARCH_FN(cmpcopystore, at)(area, ioff, idx, v, expect, dst, src, \
						     nwords, newv RSK_GATE_ARG); \
	}

/*
 * Part operations (optional in the contract: RSK_ARCH_HAS_PART_OPS).  For
 * a structure whose parts are 128-byte slots at `base`, the section itself
 * reads the index after arming - a read inside the section needs no
 * re-check: the kernel restarts the section if the thread moves - and
 * works on the slot's words at base + DISP + (index << 7), the gate at
 * GDISP.  The index is read as a signed 32-bit value and not compared
 * with the number of parts: a registered thread's cpu_id and mm_cid are
 * below the kernel's nr_cpu_ids, which the parts cover, and the only other
 * values an area holds, -1 and -2 (not registered, registration failed),
 * land on the two guard parts before part 0, whose gates are never open
 * (<rseqkit/percpu.h>): the section leaves through `stopped`.  On commit,
 * pos holds index << 7.  These are statements, not functions: the
 * displacements must be constants in the instruction, and the exits are
 * the caller's labels, by name: cmpfail (CAS, POP), aborted, stopped.
 *
 *   RSK_ARCH_PART_ADD:    *(slot + VDISP) += count
 *   RSK_ARCH_PART_CAS:    if (*(slot + VDISP) == expect) *(slot + VDISP) = newv
 *                         (else leave through `cmpfail`)
 *   RSK_ARCH_PART_PUSH:   node->next = *(slot + VDISP); *(slot + VDISP) = node,
 *                         with release ordering (next at byte NEXT of node)
 *   RSK_ARCH_PART_POP:    head = *(slot + VDISP); if 0 leave through `cmpfail`;
 *                         *(slot + VDISP) = *(head + NEXT)
 */
#ifndef RSEQKIT_ANALYZER /* see percpu.h: the analyser gets a C model */
#define RSK_ARCH_HAS_PART_OPS 1
#endif

#define RSK_X64_PART_ENTER                                            \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                     \
	".quad 1f, %l[stopped]\n\t"                                            \
	".popsection\n\t" RSK_X64_DESCRIBE RSK_X64_ARM "1:\n\t" RSK_INJECT_ASM(1) \
	"movslq %%fs:(%[area], %[ioff]), %[pos]\n\t"                            \
	"shlq $7, %[pos]\n\t" RSK_INJECT_ASM(2)                                \
	"cmpq $0, %c[gdisp](%[base], %[pos])\n\t"                              \
	"jnz %l[stopped]\n\t"
#define RSK_X64_PART_IN(area_, ioff_, base_, vdisp_, gdisp_)                    \
	[area] "r"(area_), [ioff] "r"((uintptr_t)(ioff_)), [base] "r"(base_),  \
		[vdisp] "i"(vdisp_), [gdisp] "i"(gdisp_)

#define RSK_ARCH_PART_ADD(area_, ioff_, base_, pos_, vdisp_, gdisp_, count_)       \
	do {                                                                   \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_PART_ENTER                           \
			"addq %[count], %c[vdisp](%[base], %[pos])\n"          \
			"2:\n\t" RSK_X64_ABORT                                 \
			: [tmp] "=&r"(tmp), [pos] "=&r"(pos_)RSK_X64_INJECT_OUT \
			: RSK_X64_PART_IN(area_, ioff_, base_, vdisp_, gdisp_), \
			  [count] "re"(count_)RSK_X64_INJECT_IN                 \
			: "cc"                                                 \
			: aborted, stopped);                       \
	} while (0)

/*
 * Stride part operations on a pointer buffer (<rseqkit/ptrbuf.h>): part i
 * at parts + i * stride holds a count (at CDISP), a gate (GDISP) and the
 * slots (SDISP).  The section reads the index, leaves through `stopped`
 * if it is negative or the part's gate is closed, reads the count and
 * leaves through `cmpfail` if the part is full (push) or empty (pop);
 * otherwise it stores the pointer above the count (push) or loads the
 * top one (pop) and commits the new count.  idx is the index on success.
 * No "memory" clobber (so the buffer's fields stay in registers across a
 * loop): the push is preceded by a compiler barrier (the pointed-to object
 * is written first), and what a pop's caller reads through the pointer
 * depends on it.
 */
#define RSK_X64_STRIDE_PART_ENTER                                              \
	RSK_X64_EXIT("cmpfail")                                                \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                     \
	".quad 1f, %l[stopped]\n\t"                                            \
	".popsection\n\t" RSK_X64_DESCRIBE RSK_X64_ARM "1:\n\t" RSK_INJECT_ASM(1) \
	"movslq %%fs:(%[area], %[ioff]), %[idx]\n\t"                           \
	"testq %[idx], %[idx]\n\t"                                             \
	"js %l[stopped]\n\t"                                                   \
	"movq %[idx], %[p]\n\t"                                                \
	"imulq %[stride], %[p]\n\t"                                            \
	"addq %[parts], %[p]\n\t"                                              \
	"cmpq $0, %c[gdisp](%[p])\n\t"                                         \
	"jnz %l[stopped]\n\t" RSK_INJECT_ASM(2)                                \
	"movq %c[cdisp](%[p]), %[cnt]\n\t"
#define RSK_X64_STRIDE_PART_IN(area_, ioff_, parts_, stride_, cdisp_, gdisp_, sdisp_) \
	[area] "r"(area_), [ioff] "r"((uintptr_t)(ioff_)), [parts] "r"(parts_),  \
		[stride] "r"((uintptr_t)(stride_)), [cdisp] "i"(cdisp_),        \
		[gdisp] "i"(gdisp_), [sdisp] "i"(sdisp_)

#define RSK_ARCH_STRIDE_PTR_PUSH(area_, ioff_, parts_, stride_, cdisp_, gdisp_, sdisp_, cap_, \
				 ptr_, idx_)                                   \
	do {                                                                   \
		intptr_t tmp, p_, cnt_;                                        \
		RSK_X64_INJECT_DECL                                            \
		RSK_X64_BARRIER(); /* release: what ptr_ points to first */     \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_STRIDE_PART_ENTER                              \
			"cmpq %[cap], %[cnt]\n\t"                              \
			"jae %l[cmpfail]\n\t"                                  \
			"movq %[ptr], %c[sdisp](%[p], %[cnt], 8)\n\t"          \
			"incq %[cnt]\n\t" RSK_INJECT_ASM(3)                    \
			"movq %[cnt], %c[cdisp](%[p])\n"                       \
			"2:\n\t" RSK_X64_ABORT                                 \
			: [tmp] "=&r"(tmp), [idx] "=&r"(idx_), [p] "=&r"(p_),   \
			  [cnt] "=&r"(cnt_)RSK_X64_INJECT_OUT                    \
			: RSK_X64_STRIDE_PART_IN(area_, ioff_, parts_, stride_, cdisp_, gdisp_, \
						 sdisp_),                      \
			  [cap] "r"(cap_), [ptr] "r"(ptr_)RSK_X64_INJECT_IN      \
			: "cc"                                                 \
			: cmpfail, aborted, stopped);                          \
	} while (0)

#define RSK_ARCH_STRIDE_PTR_POP(area_, ioff_, parts_, stride_, cdisp_, gdisp_, sdisp_, out_, \
				idx_)                                          \
	do {                                                                   \
		intptr_t tmp, p_, cnt_;                                        \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_STRIDE_PART_ENTER                              \
			"testq %[cnt], %[cnt]\n\t"                             \
			"jz %l[cmpfail]\n\t"                                   \
			"movq %c[sdisp]-8(%[p], %[cnt], 8), %[out]\n\t"        \
			"decq %[cnt]\n\t" RSK_INJECT_ASM(3)                    \
			"movq %[cnt], %c[cdisp](%[p])\n"                       \
			"2:\n\t" RSK_X64_ABORT                                 \
			: [tmp] "=&r"(tmp), [idx] "=&r"(idx_), [p] "=&r"(p_),   \
			  [cnt] "=&r"(cnt_), [out] "=&r"(out_)RSK_X64_INJECT_OUT \
			: RSK_X64_STRIDE_PART_IN(area_, ioff_, parts_, stride_, cdisp_, gdisp_, \
						 sdisp_)RSK_X64_INJECT_IN      \
			: "cc"                                                 \
			: cmpfail, aborted, stopped);                          \
	} while (0)

#define RSK_ARCH_PART_CAS(area_, ioff_, base_, pos_, vdisp_, gdisp_, expect_, newv_)              \
	do {                                                                   \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_EXIT("cmpfail") RSK_X64_PART_ENTER   \
			"cmpq %[expect], %c[vdisp](%[base], %[pos])\n\t"       \
			"jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)          \
			"movq %[newv], %c[vdisp](%[base], %[pos])\n"           \
			"2:\n\t" RSK_X64_ABORT                                 \
			: [tmp] "=&r"(tmp), [pos] "=&r"(pos_)RSK_X64_INJECT_OUT \
			: RSK_X64_PART_IN(area_, ioff_, base_, vdisp_, gdisp_), \
			  [expect] "re"(expect_), [newv] "re"(newv_)RSK_X64_INJECT_IN \
			: "cc"                                                 \
			: cmpfail, aborted, stopped);             \
	} while (0)

#define RSK_ARCH_PART_PUSH(area_, ioff_, base_, pos_, vdisp_, gdisp_, node_, next_)                       \
	do {                                                                   \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		RSK_X64_BARRIER(); /* release: what the node_ holds first */    \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_PART_ENTER                           \
			"movq %c[vdisp](%[base], %[pos]), %[tmp]\n\t"          \
			"movq %[tmp], %c[next](%[node])\n\t" RSK_INJECT_ASM(3) \
			"movq %[node], %c[vdisp](%[base], %[pos])\n"           \
			"2:\n\t" RSK_X64_ABORT                                 \
			: [tmp] "=&r"(tmp), [pos] "=&r"(pos_)RSK_X64_INJECT_OUT \
			: RSK_X64_PART_IN(area_, ioff_, base_, vdisp_, gdisp_), \
			  [node] "r"(node_), [next] "i"(next_)RSK_X64_INJECT_IN  \
			: "memory", "cc"                                       \
			: aborted, stopped);                       \
	} while (0)

#define RSK_ARCH_PART_POP(area_, ioff_, base_, pos_, vdisp_, gdisp_, head_, next_)              \
	do {                                                                   \
		intptr_t tmp;                                                  \
		RSK_X64_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_X64_EXIT("cmpfail") RSK_X64_PART_ENTER   \
			"movq %c[vdisp](%[base], %[pos]), %[head]\n\t"         \
			"testq %[head], %[head]\n\t"                           \
			"jz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)           \
			"movq %c[next](%[head]), %[tmp]\n\t"                   \
			"movq %[tmp], %c[vdisp](%[base], %[pos])\n"            \
			"2:\n\t" RSK_X64_ABORT                                 \
			: [tmp] "=&r"(tmp), [pos] "=&r"(pos_),                  \
			  [head] "=&r"(head_)RSK_X64_INJECT_OUT                 \
			: RSK_X64_PART_IN(area_, ioff_, base_, vdisp_, gdisp_), \
			  [next] "i"(next_)RSK_X64_INJECT_IN                    \
			: "memory", "cc"                                       \
			: cmpfail, aborted, stopped);             \
	} while (0)

/* No cpu/cid variants: <rseqkit/arch.h> derives them from the `_at` form. */
#define RSK_ARCH_DEFINE_OPS(X, OFF)
