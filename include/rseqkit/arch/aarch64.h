/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/aarch64.h - restartable sequences for AArch64 (LP64).
 *
 * Implements the contract written in <rseqkit/arch.h>, with the structure
 * of the x86 layer (arch/x86.h).
 *
 * Layout of one section (labels are local to each asm statement):
 *   1:  start_ip  - first instruction after arming rseq_cs
 *   2:  end of the commit store (post_commit_offset = 2b - 1b)
 *   3:  the struct rseq_cs descriptor, in __rseq_cs
 *   4:  abort_ip, in __rseq_failure, right after the signature
 *   6, 7: copy loop; 8, 9: injected delay loop
 *
 * The descriptor is found pc-relatively (adrp + :lo12:), so the same code
 * serves static, PIE and shared-library builds.
 *
 * Sections are asm goto, as on x86.  (GCC sizes an asm goto as one
 * instruction; on 32-bit ARM that misplaces literal pools, see arch/arm.h.
 * AArch64 GCC code has no literal pools by default, and the only choices
 * that depend on sizes are short branch forms - tbz, +-32 KiB - far beyond
 * what a function's inlined sections add.  The conditional branches of a
 * section (+-1 MiB) go only to C labels of the enclosing function, never
 * to __rseq_failure, which sits after all of .text.)
 *
 * Memory ordering (AArch64 is weakly ordered):
 *   - The relaxed operations order nothing but their own accesses: the
 *     index check, the compares and the commit are data- or control-
 *     dependent as the contract needs, nothing more.
 *   - The _release variants commit with `stlr`: every earlier load and
 *     store of the thread (the speculative stores of the section
 *     included) is observed before the commit.
 *   - The gate of the gated twins is loaded with `ldar` (load-acquire).
 *     Closing the gate needs no ordering from the section: the slow path
 *     closes it with a CAS and then fences the CPU (membarrier RSEQ); the
 *     IPI handler runs a full barrier on that CPU, and a section that read
 *     the gate open either committed before the interrupt - its commit is
 *     then visible to the slow path when membarrier returns - or had not,
 *     and is restarted; its rerun loads the gate program-order after the
 *     handler's barrier and sees it closed.  Reopening is what needs the
 *     acquire: the slow path writes the part with plain stores and then
 *     store-releases gate = 0.  A section that reads that 0 must not use
 *     values of the part loaded before it (a plain load could be satisfied
 *     early and return the pre-slow-path value of *v, and the commit would
 *     then erase the slow path's update).  `ldar` orders every later load
 *     (and store) of the section after the gate load; stores were already
 *     safe behind the `cbnz` control dependency.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/aarch64.h"
#endif
#ifdef __ILP32__
#error "rseqkit: AArch64 ILP32 is not supported (LP64 only)"
#endif

#define RSK_ARCH_NAME	 "aarch64"
#define RSK_ARCH_NR_RSEQ 293
/*
 * The signature is the instruction `brk #0x45e0` (0xd428bc00).  AArch64
 * instructions are always little-endian in memory, while the kernel reads
 * the word before abort_ip as data: on big-endian the registered value is
 * the byte-swapped encoding (glibc's RSEQ_SIG does the same).
 */
#define RSK_A64_SIG_INSN "0xd428bc00"
#ifdef __AARCH64EB__
#define RSK_ARCH_SIGNATURE 0x00bc28d4
#else
#define RSK_ARCH_SIGNATURE 0xd428bc00
#endif

#define RSK_A64_ARM							       \
	"adrp %[tmp], 3b\n\t"						       \
	"add %[tmp], %[tmp], :lo12:3b\n\t"				       \
	"str %[tmp], [%[area], #8]\n"

#ifdef RSEQKIT_NEGATIVE_CONTROL
/* Test builds only: never arm the descriptor, so the kernel never restarts
 * a section - the negative control that shows the tests detect loss. */
#undef RSK_A64_ARM
#define RSK_A64_ARM "\n"
#endif

static inline __attribute__((always_inline)) void *rsk_arch_thread_pointer(void)
{
	void *tp;
	/* TPIDR_EL0: the thread pointer glibc's __rseq_offset is relative to. */
	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
	return tp;
}

/* The descriptor and its entry in the pointer array. */
#define RSK_A64_DESCRIBE						       \
	".pushsection __rseq_cs, \"aw\"\n\t"				       \
	".balign 32\n"							       \
	"3:\n\t"							       \
	".long 0, 0\n\t"						       \
	".quad 1f, (2f - 1f), 4f\n\t"					       \
	".popsection\n\t"						       \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"			       \
	".balign 8\n\t"							       \
	".quad 3b\n\t"							       \
	".popsection\n\t"

/* An early exit (compare failed): a (start, exit) pair for debuggers. */
#define RSK_A64_EXIT(label)						       \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"		       \
	".balign 8\n\t"							       \
	".quad 1f, %l[" label "]\n\t"					       \
	".popsection\n\t"

/* The signature (a brk), then abort_ip: leave for the C abort label. */
#define RSK_A64_ABORT							       \
	".pushsection __rseq_failure, \"ax\"\n\t"			       \
	".inst " RSK_A64_SIG_INSN "\n"					       \
	"4:\n\t"							       \
	"b %l[aborted]\n\t"						       \
	".popsection\n\t"

/*
 * Leave as an abort unless the area still holds the index the caller used.
 * The branch goes straight to the C label (an exit point like the others)
 * rather than to abort_ip: a conditional branch reaches +-1 MiB only, and
 * __rseq_failure is placed after all of .text, which may be farther away
 * in a large program; the abort handler leaves with an unconditional `b`
 * (+-128 MiB, and the linker adds veneers beyond).
 */
#define RSK_A64_CHECK_INDEX(off)					       \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"		       \
	".balign 8\n\t"							       \
	".quad 1b, %l[aborted]\n\t"					       \
	".popsection\n\t"						       \
	"ldr %w[tmp], [%[area], #" off "]\n\t"				       \
	"cmp %w[tmp], %w[idx]\n\t"					       \
	"b.ne %l[aborted]\n\t"

#if RSK_INJECTING
/* A delay loop on its own scratch register (AArch64 has registers to
 * spare); the counts are read through one base register holding
 * rsk_inject_loops (the "memory" clobber covers the read). */
#define RSK_INJECT_ASM(n)						       \
	"ldr %w[inj], [%[injbase], #(4 * " #n ")]\n\t"			       \
	"cbz %w[inj], 8f\n"						       \
	"9:\n\t"							       \
	"subs %w[inj], %w[inj], #1\n\t"					       \
	"b.ne 9b\n"							       \
	"8:\n\t"
#define RSK_A64_INJECT_OUT , [inj] "=&r"(rsk_inj)
#define RSK_A64_INJECT_DECL int rsk_inj;
#define RSK_A64_INJECT_IN  , [injbase] "r"(rsk_inject_loops)
#else
#define RSK_INJECT_ASM(n) ""
#define RSK_A64_INJECT_OUT
#define RSK_A64_INJECT_DECL
#define RSK_A64_INJECT_IN
#endif

/* Commit stores: plain, or store-release for the _release variants. */
#define RSK_A64_COMMIT_PLAIN(val, dst)	 "str %[" val "], [%[" dst "]]\n"
#define RSK_A64_COMMIT_RELEASE(val, dst) "stlr %[" val "], [%[" dst "]]\n"

#define RSK_A64_FN static inline __attribute__((always_inline)) int

#define RSK_A64_HEAD(X, OFF)						       \
	RSK_A64_ARM "1:\n\t" RSK_INJECT_ASM(1) RSK_A64_CHECK_INDEX(OFF)	       \
		RSK_A64_GATE_ASM RSK_INJECT_ASM(2)

#define RSK_A64_TAIL_CMP						       \
	return 0;							       \
	cmpfail:							       \
	return 1;							       \
	aborted:							       \
	return -1;							       \
	stopped:							       \
	return 2;

#define RSK_A64_TAIL_NOCMP						       \
	return 0;							       \
	aborted:							       \
	return -1;							       \
	stopped:							       \
	return 2;

#define RSK_A64_DEF_CMPSTORE(NAME, X, OFF, COMMIT)			       \
	RSK_A64_FN NAME(struct rsk_abi_area *area, int idx, intptr_t *v,       \
			intptr_t expect, intptr_t newv RSK_GATE_PARAM)     \
	{								       \
		intptr_t tmp;						       \
		RSK_A64_INJECT_DECL					       \
		__asm__ __volatile__ goto(				       \
			RSK_A64_DESCRIBE RSK_A64_EXIT("cmpfail")	       \
			RSK_A64_HEAD(X, OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expect]\n\t"			       \
			"b.ne %l[cmpfail]\n\t"				       \
			RSK_INJECT_ASM(3)				       \
			COMMIT("newv", "v")				       \
			"2:\n\t" RSK_A64_ABORT				       \
			: [tmp] "=&r"(tmp)RSK_A64_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expect] "r"(expect),				       \
			  [newv] "r"(newv)RSK_A64_GATE_IN RSK_A64_INJECT_IN    \
			: "memory", "cc"				       \
			: cmpfail, aborted, stopped);			       \
		RSK_A64_TAIL_CMP					       \
	}

#define RSK_A64_DEF_CMPCMPSTORE(NAME, X, OFF, COMMIT)			       \
	RSK_A64_FN NAME(struct rsk_abi_area *area, int idx, intptr_t *v,       \
			intptr_t expect, intptr_t *v2, intptr_t expect2,       \
			intptr_t newv RSK_GATE_PARAM)		       \
	{								       \
		intptr_t tmp;						       \
		RSK_A64_INJECT_DECL					       \
		__asm__ __volatile__ goto(				       \
			RSK_A64_DESCRIBE RSK_A64_EXIT("cmpfail")	       \
			RSK_A64_HEAD(X, OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expect]\n\t"			       \
			"b.ne %l[cmpfail]\n\t"				       \
			RSK_INJECT_ASM(3)				       \
			"ldr %[tmp], [%[v2]]\n\t"			       \
			"cmp %[tmp], %[expect2]\n\t"			       \
			"b.ne %l[cmpfail]\n\t"				       \
			RSK_INJECT_ASM(4)				       \
			COMMIT("newv", "v")				       \
			"2:\n\t" RSK_A64_ABORT				       \
			: [tmp] "=&r"(tmp)RSK_A64_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expect] "r"(expect), [v2] "r"(v2),		       \
			  [expect2] "r"(expect2),			       \
			  [newv] "r"(newv)RSK_A64_GATE_IN RSK_A64_INJECT_IN    \
			: "memory", "cc"				       \
			: cmpfail, aborted, stopped);			       \
		RSK_A64_TAIL_CMP					       \
	}

#define RSK_A64_DEF_CMPSTORESTORE(NAME, X, OFF, COMMIT)			       \
	RSK_A64_FN NAME(struct rsk_abi_area *area, int idx, intptr_t *v,       \
			intptr_t expect, intptr_t *v2, intptr_t newv2,	       \
			intptr_t newv RSK_GATE_PARAM)		       \
	{								       \
		intptr_t tmp;						       \
		RSK_A64_INJECT_DECL					       \
		__asm__ __volatile__ goto(				       \
			RSK_A64_DESCRIBE RSK_A64_EXIT("cmpfail")	       \
			RSK_A64_HEAD(X, OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expect]\n\t"			       \
			"b.ne %l[cmpfail]\n\t"				       \
			RSK_INJECT_ASM(3)				       \
			"str %[newv2], [%[v2]]\n\t"			       \
			RSK_INJECT_ASM(4)				       \
			COMMIT("newv", "v")				       \
			"2:\n\t" RSK_A64_ABORT				       \
			: [tmp] "=&r"(tmp)RSK_A64_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expect] "r"(expect), [v2] "r"(v2),		       \
			  [newv2] "r"(newv2),				       \
			  [newv] "r"(newv)RSK_A64_GATE_IN RSK_A64_INJECT_IN    \
			: "memory", "cc"				       \
			: cmpfail, aborted, stopped);			       \
		RSK_A64_TAIL_CMP					       \
	}

/* The copy: whole words, last to first, indexed by the count register. */
#define RSK_A64_DEF_CMPCOPYSTORE(NAME, X, OFF, COMMIT)			       \
	RSK_A64_FN NAME(struct rsk_abi_area *area, int idx, intptr_t *v,       \
			intptr_t expect, intptr_t *dst, const intptr_t *src,   \
			intptr_t nwords, intptr_t newv RSK_GATE_PARAM)     \
	{								       \
		intptr_t tmp;						       \
		RSK_A64_INJECT_DECL					       \
		__asm__ __volatile__ goto(				       \
			RSK_A64_DESCRIBE RSK_A64_EXIT("cmpfail")	       \
			RSK_A64_HEAD(X, OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expect]\n\t"			       \
			"b.ne %l[cmpfail]\n\t"				       \
			RSK_INJECT_ASM(3)				       \
			"cbz %[n], 6f\n"				       \
			"7:\n\t"					       \
			"sub %[n], %[n], #1\n\t"			       \
			"ldr %[tmp], [%[src], %[n], lsl #3]\n\t"	       \
			"str %[tmp], [%[dst], %[n], lsl #3]\n\t"	       \
			"cbnz %[n], 7b\n"				       \
			"6:\n\t"					       \
			RSK_INJECT_ASM(4)				       \
			COMMIT("newv", "v")				       \
			"2:\n\t" RSK_A64_ABORT				       \
			: [tmp] "=&r"(tmp), [n] "+&r"(nwords)RSK_A64_INJECT_OUT \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expect] "r"(expect), [dst] "r"(dst), [src] "r"(src), \
			  [newv] "r"(newv)RSK_A64_GATE_IN RSK_A64_INJECT_IN    \
			: "memory", "cc"				       \
			: cmpfail, aborted, stopped);			       \
		RSK_A64_TAIL_CMP					       \
	}

/*
 * One set of operations per index field.  X names the variant (cpu, cid),
 * OFF is the field's byte offset in struct rsk_abi_area as a string.
 */
#define RSK_ARCH_DEFINE_OPS(X, OFF)					       \
	RSK_A64_DEF_CMPSTORE(RSK_ARCH_FN(cmpstore, X), X, OFF,		       \
			     RSK_A64_COMMIT_PLAIN)			       \
	RSK_A64_DEF_CMPSTORE(RSK_ARCH_FN(cmpstore_release, X), X, OFF,	       \
			     RSK_A64_COMMIT_RELEASE)			       \
	RSK_A64_DEF_CMPCMPSTORE(RSK_ARCH_FN(cmpcmpstore, X), X, OFF,	       \
				RSK_A64_COMMIT_PLAIN)			       \
	RSK_A64_DEF_CMPSTORESTORE(RSK_ARCH_FN(cmpstorestore, X), X, OFF,      \
				  RSK_A64_COMMIT_PLAIN)			       \
	RSK_A64_DEF_CMPSTORESTORE(RSK_ARCH_FN(cmpstorestore_release, X), X,   \
				  OFF, RSK_A64_COMMIT_RELEASE)		       \
	RSK_A64_DEF_CMPCOPYSTORE(RSK_ARCH_FN(cmpcopystore, X), X, OFF,	       \
				 RSK_A64_COMMIT_PLAIN)			       \
	RSK_A64_DEF_CMPCOPYSTORE(RSK_ARCH_FN(cmpcopystore_release, X), X,     \
				 OFF, RSK_A64_COMMIT_RELEASE)		       \
									       \
	/* A load, an add and the commit store: the delay between load and     \
	 * store (point 3) is the window a lost update needs. */               \
	RSK_A64_FN RSK_ARCH_FN(add, X)(struct rsk_abi_area *area, int idx,    \
					intptr_t *v,			       \
					intptr_t count RSK_GATE_PARAM)     \
	{								       \
		intptr_t tmp;						       \
		RSK_A64_INJECT_DECL					       \
		__asm__ __volatile__ goto(				       \
			RSK_A64_DESCRIBE RSK_A64_HEAD(X, OFF)		       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"add %[tmp], %[tmp], %[count]\n\t"		       \
			RSK_INJECT_ASM(3)				       \
			"str %[tmp], [%[v]]\n"				       \
			"2:\n\t" RSK_A64_ABORT				       \
			: [tmp] "=&r"(tmp)RSK_A64_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [count] "r"(count)RSK_A64_GATE_IN RSK_A64_INJECT_IN  \
			: "memory", "cc"				       \
			: aborted, stopped);				       \
		RSK_A64_TAIL_NOCMP					       \
	}								       \
									       \
	RSK_A64_FN RSK_ARCH_FN(pop, X)(struct rsk_abi_area *area, int idx,    \
					intptr_t *v, intptr_t expectnot,       \
					intptr_t offset,		       \
					intptr_t *out RSK_GATE_PARAM)      \
	{								       \
		intptr_t tmp;						       \
		RSK_A64_INJECT_DECL					       \
		__asm__ __volatile__ goto(				       \
			RSK_A64_DESCRIBE RSK_A64_EXIT("cmpfail")	       \
			RSK_A64_HEAD(X, OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expectnot]\n\t"			       \
			"b.eq %l[cmpfail]\n\t"				       \
			"str %[tmp], [%[out]]\n\t"			       \
			RSK_INJECT_ASM(3)				       \
			"ldr %[tmp], [%[tmp], %[offset]]\n\t"		       \
			"str %[tmp], [%[v]]\n"				       \
			"2:\n\t" RSK_A64_ABORT				       \
			: [tmp] "=&r"(tmp)RSK_A64_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expectnot] "r"(expectnot), [offset] "r"(offset),    \
			  [out] "r"(out)RSK_A64_GATE_IN RSK_A64_INJECT_IN      \
			: "memory", "cc"				       \
			: cmpfail, aborted, stopped);			       \
		RSK_A64_TAIL_CMP					       \
	}								       \
									       \
	RSK_A64_FN RSK_ARCH_FN(derefadd, X)(struct rsk_abi_area *area,	       \
					     int idx, intptr_t *const *ptr,    \
					     intptr_t off,		       \
					     intptr_t inc RSK_GATE_PARAM)  \
	{								       \
		intptr_t tmp, val;					       \
		RSK_A64_INJECT_DECL					       \
		__asm__ __volatile__ goto(				       \
			RSK_A64_DESCRIBE RSK_A64_HEAD(X, OFF)		       \
			"ldr %[tmp], [%[ptr]]\n\t"			       \
			"add %[tmp], %[tmp], %[off]\n\t"		       \
			"ldr %[val], [%[tmp]]\n\t"			       \
			"add %[val], %[val], %[inc]\n\t"		       \
			RSK_INJECT_ASM(3)				       \
			"str %[val], [%[tmp]]\n"			       \
			"2:\n\t" RSK_A64_ABORT				       \
			: [tmp] "=&r"(tmp), [val] "=&r"(val)RSK_A64_INJECT_OUT \
			: [area] "r"(area), [idx] "r"(idx), [ptr] "r"(ptr),    \
			  [off] "r"(off),				       \
			  [inc] "r"(inc)RSK_A64_GATE_IN RSK_A64_INJECT_IN      \
			: "memory", "cc"				       \
			: aborted, stopped);				       \
		RSK_A64_TAIL_NOCMP					       \
	}

/*
 * Each operation exists twice: plain (rsk_arch_<op>_<X>) and gated
 * (rsk_arch_gated_<op>_<X>, one more argument `gate`).  A gated section
 * loads *gate (load-acquire, see the top of this file) after arming and
 * leaves through `stopped` (return 2) unless it is 0.  The plain ones
 * never branch to `stopped`; the label only keeps one body for both.
 */
#define RSK_A64_GATE_ASM RSK_GATED(                                           \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                    \
	".balign 8\n\t"                                                       \
	".quad 1b, %l[stopped]\n\t"                                           \
	".popsection\n\t"                                                     \
	"ldar %[tmp], [%[gate]]\n\t"                                          \
	"cbnz %[tmp], %l[stopped]\n\t")
#define RSK_A64_GATE_IN RSK_GATED(, [gate] "r"(gate))
