/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/arm.h - restartable sequences for 32-bit ARM (ARMv7-A and
 * later, A32 or Thumb-2; little- or big-endian (BE8)).
 *
 * Implements the contract written in <rseqkit/arch.h>, with the structure
 * of the x86 layer (arch/x86.h).
 *
 * Layout of one section (labels are local to each asm statement):
 *   1:  start_ip  - first instruction after arming rseq_cs
 *   2:  end of the commit store (post_commit_offset = 2b - 1b)
 *   3:  the struct rseq_cs descriptor, in __rseq_cs
 *   4:  abort_ip, in __rseq_failure, right after the signature
 *   5:  the instruction that reads the pc, to find the descriptor
 *   6, 7: copy loop; 8, 9: injected delay loop
 *   10, 11, 12: result stubs and the join after them (see below)
 *
 * The descriptor is found pc-relatively (movw/movt of the distance to it,
 * then an add of the pc), so the same code serves static, PIE and shared
 * builds without a literal pool or a GOT register.
 *
 * No asm goto on this architecture: GCC (12 at least) counts an asm goto
 * as one instruction when it places literal pools and picks branch forms,
 * so a function that inlines a few sections fails to assemble ("bad
 * immediate value for offset": the literal pool placed out of reach of
 * its loads - seen with tests/primitives.c).  A plain asm is counted per
 * line (4 bytes each), an overestimate here, which is safe.  So
 * each section leaves its result in tmp: 0 after the commit, falling
 * through; the other results are set by stubs in __rseq_failure (next to
 * the abort handler, off the fast path) that branch back to label 12:
 *   10: compare failed (1)   11: gate closed (2)   4: abort_ip (-1)
 * The exit-point pairs name 10 and 11, where control leaves the section.
 *
 * Registers: the largest section (gated cmpcopystore of an injection
 * build) takes 12 registers; A32 has 13 free besides sp and pc once the
 * frame pointer (r11) is taken, so every section also builds at -O0.
 * Inputs are plain registers throughout.
 *
 * A32 is the instruction set this layer is written and tested for (build
 * with -marm; Debian's armhf compiler defaults to Thumb-2).  Thumb-2 also
 * works (tested with GCC -O1 and up, and with clang), with two limits:
 * GCC at -O0 gives asm statements in Thumb code at most 8 registers, so
 * cmpcopystore fails there with "impossible constraints"; and a Thumb
 * conditional branch reaches +-1 MiB, so a program whose text between a
 * section and __rseq_failure (placed after .text) exceeds that fails to
 * link ("relocation truncated to fit").  A32 branches reach +-32 MiB.
 *
 * Memory ordering (ARM is weakly ordered):
 *   - The relaxed operations order nothing but their own accesses.
 *   - The _release variants put `dmb ish` before the commit store: every
 *     earlier load and store of the thread (the section's speculative
 *     stores included) is observed before the commit.
 *   - The gate of the gated twins is a load-acquire: the load, its
 *     compare and branch, then `dmb ish`.  Closing the gate needs no
 *     ordering from the section: the slow path closes it with a CAS and
 *     then fences the CPU (membarrier RSEQ); the IPI handler runs a full
 *     barrier on that CPU, and a section that read the gate open either
 *     committed before the interrupt - its commit is then visible to the
 *     slow path when membarrier returns - or had not, and is restarted;
 *     its rerun loads the gate program-order after the handler's barrier
 *     and sees it closed.  Reopening is what needs the acquire: the slow
 *     path writes the part with plain stores and then store-releases
 *     gate = 0.  A section that reads that 0 must not use values of the
 *     part loaded before it (ARM may satisfy a later plain load first, and
 *     the commit would then erase the slow path's update); the barrier
 *     orders every later load after the gate load.  Stores were already
 *     safe behind the control dependency of the branch.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/arm.h"
#endif
#if !defined(__ARM_ARCH) || __ARM_ARCH < 7 || defined(__ARM_ARCH_7M__) ||      \
	defined(__ARM_ARCH_7EM__) || (defined(__thumb__) && !defined(__thumb2__))
#error "rseqkit: 32-bit ARM needs ARMv7-A or later (A32 or Thumb-2: movw/movt, dmb)"
#endif

#define RSK_ARCH_NAME	 "arm"
#define RSK_ARCH_NR_RSEQ 398

/*
 * The signature is the word 0xe7f5def3: in A32 `udf #24035`, whose first
 * halfword 0xdef3 is a Thumb `udf` too.  The kernel reads it as data: on
 * big-endian (BE8: instructions little-endian, data big-endian) the
 * registered value is the byte-swapped one, like glibc's RSEQ_SIG.  In A32
 * it is emitted as an instruction (.inst, swapped by the BE8 linker like
 * all code); in Thumb as the data word itself, which yields the same bytes.
 */
#ifdef __ARMEB__
#define RSK_ARCH_SIGNATURE 0xf3def5e7
#define RSK_ARM_U64(x)	   ".long 0, " x "\n\t" /* high word first */
#define RSK_ARM_CS_LOW	   "12"		     /* low word of area->rseq_cs */
#else
#define RSK_ARCH_SIGNATURE 0xe7f5def3
#define RSK_ARM_U64(x)	   ".long " x ", 0\n\t"
#define RSK_ARM_CS_LOW	   "8"
#endif

#ifdef __thumb__
#define RSK_ARM_PC_BIAS "4"
#ifdef __ARMEB__
#define RSK_ARM_SIG ".word 0xf3def5e7\n"
#else
#define RSK_ARM_SIG ".word 0xe7f5def3\n"
#endif
/* 16-bit ADD (register) is the Thumb form that may read the pc. */
#define RSK_ARM_ADD_PC "add %[tmp], pc\n\t"
#else
#define RSK_ARM_PC_BIAS "8"
#define RSK_ARM_SIG	".inst 0xe7f5def3\n"
#define RSK_ARM_ADD_PC	"add %[tmp], pc, %[tmp]\n\t"
#endif

#define RSK_ARM_ARM							       \
	"movw %[tmp], #:lower16:(3b - (5f + " RSK_ARM_PC_BIAS "))\n\t"	       \
	"movt %[tmp], #:upper16:(3b - (5f + " RSK_ARM_PC_BIAS "))\n"	       \
	"5:\n\t" RSK_ARM_ADD_PC						       \
	"str %[tmp], [%[area], #" RSK_ARM_CS_LOW "]\n"

#ifdef RSEQKIT_NEGATIVE_CONTROL
/* Test builds only: never arm the descriptor, so the kernel never restarts
 * a section - the negative control that shows the tests detect loss. */
#undef RSK_ARM_ARM
#define RSK_ARM_ARM "\n"
#endif

static inline __attribute__((always_inline)) void *rsk_arch_thread_pointer(void)
{
	void *tp;
	/* TPIDRURO, the thread pointer glibc's __rseq_offset is relative to. */
	__asm__("mrc p15, 0, %0, c13, c0, 3" : "=r"(tp));
	return tp;
}

/* The descriptor and its entry in the pointer array. */
#define RSK_ARM_DESCRIBE						       \
	".pushsection __rseq_cs, \"aw\"\n\t"				       \
	".balign 32\n"							       \
	"3:\n\t"							       \
	".long 0, 0\n\t"						       \
	RSK_ARM_U64("1f") RSK_ARM_U64("(2f - 1f)") RSK_ARM_U64("4f")	       \
	".popsection\n\t"						       \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"			       \
	".balign 8\n\t"							       \
	RSK_ARM_U64("3b")						       \
	".popsection\n\t"

/* An early exit (compare failed): a (start, exit) pair for debuggers. */
#define RSK_ARM_EXIT(label)						       \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"		       \
	".balign 8\n\t"							       \
	RSK_ARM_U64("1f") RSK_ARM_U64(label)				       \
	".popsection\n\t"

/*
 * The end of every section: the result (0) in tmp, and out of line, in
 * __rseq_failure, the signature (a udf) and abort_ip, then the other
 * results, each of which rejoins at 12.  (No asm goto here: see above.)
 */
#define RSK_ARM_END(stubs)						       \
	"2:\n\t"							       \
	"mov %[tmp], #0\n"						       \
	"12:\n\t"							       \
	".pushsection __rseq_failure, \"ax\"\n\t"			       \
	".balign 4\n\t" RSK_ARM_SIG "4:\n\t"				       \
	"mvn %[tmp], #0\n\t"						       \
	"b 12b\n" stubs RSK_ARM_GATE_STUB ".popsection\n\t"
#define RSK_ARM_CMPFAIL_STUB						       \
	"10:\n\t"							       \
	"mov %[tmp], #1\n\t"						       \
	"b 12b\n"

/* Leave as an abort unless the area still holds the index the caller used. */
#define RSK_ARM_CHECK_INDEX(off)					       \
	"ldr %[tmp], [%[area], #" off "]\n\t"				       \
	"cmp %[tmp], %[idx]\n\t"					       \
	"bne 4f\n\t"

#if RSK_INJECTING
/* A delay loop on its own scratch register; the counts are read through
 * one base register holding rsk_inject_loops (the "memory" clobber covers
 * the read): one register for all points instead of one per "m" operand. */
#define RSK_INJECT_ASM(n)						       \
	"ldr %[inj], [%[injbase], #(4 * " #n ")]\n\t"			       \
	"cmp %[inj], #0\n\t"						       \
	"beq 8f\n"							       \
	"9:\n\t"							       \
	"subs %[inj], %[inj], #1\n\t"					       \
	"bne 9b\n"							       \
	"8:\n\t"
#define RSK_ARM_INJECT_OUT  , [inj] "=&r"(rsk_inj)
#define RSK_ARM_INJECT_DECL int rsk_inj;
#define RSK_ARM_INJECT_IN   , [injbase] "r"(rsk_inject_loops)
#else
#define RSK_INJECT_ASM(n) ""
#define RSK_ARM_INJECT_OUT
#define RSK_ARM_INJECT_DECL
#define RSK_ARM_INJECT_IN
#endif

/* Commit stores: plain, or after a full barrier for the _release variants
 * (ARMv7 has no store-release instruction). */
#define RSK_ARM_COMMIT_PLAIN(val, dst) "str %[" val "], [%[" dst "]]\n"
#define RSK_ARM_COMMIT_RELEASE(val, dst)				       \
	"dmb ish\n\t"							       \
	"str %[" val "], [%[" dst "]]\n"

#define RSK_ARM_FN static inline __attribute__((always_inline)) int

#define RSK_ARM_HEAD(OFF)						       \
	RSK_ARM_ARM "1:\n\t" RSK_INJECT_ASM(1) RSK_ARM_CHECK_INDEX(OFF)	       \
		RSK_ARM_GATE_ASM RSK_INJECT_ASM(2)

/* tmp ends as the result: 0, 1 (compare failed), -1 (aborted), 2 (stopped). */
#define RSK_ARM_RESULT return (int)tmp;

#define RSK_ARM_DEF_CMPSTORE(NAME, OFF, COMMIT)				       \
	RSK_ARM_FN NAME(struct rsk_abi_area *area, int idx, intptr_t *v,       \
			intptr_t expect, intptr_t newv RSK_GATE_PARAM)     \
	{								       \
		intptr_t tmp;						       \
		RSK_ARM_INJECT_DECL					       \
		__asm__ __volatile__(					       \
			RSK_ARM_DESCRIBE RSK_ARM_EXIT("10f")		       \
			RSK_ARM_HEAD(OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expect]\n\t"			       \
			"bne 10f\n\t"					       \
			RSK_INJECT_ASM(3)				       \
			COMMIT("newv", "v")				       \
			RSK_ARM_END(RSK_ARM_CMPFAIL_STUB)		       \
			: [tmp] "=&r"(tmp)RSK_ARM_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expect] "r"(expect),				       \
			  [newv] "r"(newv)RSK_ARM_GATE_IN RSK_ARM_INJECT_IN    \
			: "memory", "cc");				       \
		RSK_ARM_RESULT						       \
	}

#define RSK_ARM_DEF_CMPCMPSTORE(NAME, OFF, COMMIT)			       \
	RSK_ARM_FN NAME(struct rsk_abi_area *area, int idx, intptr_t *v,       \
			intptr_t expect, intptr_t *v2, intptr_t expect2,       \
			intptr_t newv RSK_GATE_PARAM)		       \
	{								       \
		intptr_t tmp;						       \
		RSK_ARM_INJECT_DECL					       \
		__asm__ __volatile__(					       \
			RSK_ARM_DESCRIBE RSK_ARM_EXIT("10f")		       \
			RSK_ARM_HEAD(OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expect]\n\t"			       \
			"bne 10f\n\t"					       \
			RSK_INJECT_ASM(3)				       \
			"ldr %[tmp], [%[v2]]\n\t"			       \
			"cmp %[tmp], %[expect2]\n\t"			       \
			"bne 10f\n\t"					       \
			RSK_INJECT_ASM(4)				       \
			COMMIT("newv", "v")				       \
			RSK_ARM_END(RSK_ARM_CMPFAIL_STUB)		       \
			: [tmp] "=&r"(tmp)RSK_ARM_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expect] "r"(expect), [v2] "r"(v2),		       \
			  [expect2] "r"(expect2),			       \
			  [newv] "r"(newv)RSK_ARM_GATE_IN RSK_ARM_INJECT_IN    \
			: "memory", "cc");				       \
		RSK_ARM_RESULT						       \
	}

#define RSK_ARM_DEF_CMPSTORESTORE(NAME, OFF, COMMIT)			       \
	RSK_ARM_FN NAME(struct rsk_abi_area *area, int idx, intptr_t *v,       \
			intptr_t expect, intptr_t *v2, intptr_t newv2,	       \
			intptr_t newv RSK_GATE_PARAM)		       \
	{								       \
		intptr_t tmp;						       \
		RSK_ARM_INJECT_DECL					       \
		__asm__ __volatile__(					       \
			RSK_ARM_DESCRIBE RSK_ARM_EXIT("10f")		       \
			RSK_ARM_HEAD(OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expect]\n\t"			       \
			"bne 10f\n\t"					       \
			RSK_INJECT_ASM(3)				       \
			"str %[newv2], [%[v2]]\n\t"			       \
			RSK_INJECT_ASM(4)				       \
			COMMIT("newv", "v")				       \
			RSK_ARM_END(RSK_ARM_CMPFAIL_STUB)		       \
			: [tmp] "=&r"(tmp)RSK_ARM_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expect] "r"(expect), [v2] "r"(v2),		       \
			  [newv2] "r"(newv2),				       \
			  [newv] "r"(newv)RSK_ARM_GATE_IN RSK_ARM_INJECT_IN    \
			: "memory", "cc");				       \
		RSK_ARM_RESULT						       \
	}

/* The copy: whole words, last to first, indexed by the count register
 * (the flags of its decrement survive the load and store). */
#define RSK_ARM_DEF_CMPCOPYSTORE(NAME, OFF, COMMIT)			       \
	RSK_ARM_FN NAME(struct rsk_abi_area *area, int idx, intptr_t *v,       \
			intptr_t expect, intptr_t *dst, const intptr_t *src,   \
			intptr_t nwords, intptr_t newv RSK_GATE_PARAM)     \
	{								       \
		intptr_t tmp;						       \
		RSK_ARM_INJECT_DECL					       \
		__asm__ __volatile__(					       \
			RSK_ARM_DESCRIBE RSK_ARM_EXIT("10f")		       \
			RSK_ARM_HEAD(OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expect]\n\t"			       \
			"bne 10f\n\t"					       \
			RSK_INJECT_ASM(3)				       \
			"cmp %[n], #0\n\t"				       \
			"beq 6f\n"					       \
			"7:\n\t"					       \
			"subs %[n], %[n], #1\n\t"			       \
			"ldr %[tmp], [%[src], %[n], lsl #2]\n\t"	       \
			"str %[tmp], [%[dst], %[n], lsl #2]\n\t"	       \
			"bne 7b\n"					       \
			"6:\n\t"					       \
			RSK_INJECT_ASM(4)				       \
			COMMIT("newv", "v")				       \
			RSK_ARM_END(RSK_ARM_CMPFAIL_STUB)		       \
			: [tmp] "=&r"(tmp), [n] "+&r"(nwords)RSK_ARM_INJECT_OUT \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expect] "r"(expect), [dst] "r"(dst), [src] "r"(src), \
			  [newv] "r"(newv)RSK_ARM_GATE_IN RSK_ARM_INJECT_IN    \
			: "memory", "cc");				       \
		RSK_ARM_RESULT						       \
	}

/*
 * One set of operations per index field.  X names the variant (cpu, cid),
 * OFF is the field's byte offset in struct rsk_abi_area as a string.
 */
#define RSK_ARCH_DEFINE_OPS(X, OFF)					       \
	RSK_ARM_DEF_CMPSTORE(RSK_ARCH_FN(cmpstore, X), OFF,		       \
			     RSK_ARM_COMMIT_PLAIN)			       \
	RSK_ARM_DEF_CMPSTORE(RSK_ARCH_FN(cmpstore_release, X), OFF,	       \
			     RSK_ARM_COMMIT_RELEASE)			       \
	RSK_ARM_DEF_CMPCMPSTORE(RSK_ARCH_FN(cmpcmpstore, X), OFF,	       \
				RSK_ARM_COMMIT_PLAIN)			       \
	RSK_ARM_DEF_CMPSTORESTORE(RSK_ARCH_FN(cmpstorestore, X), OFF,	       \
				  RSK_ARM_COMMIT_PLAIN)			       \
	RSK_ARM_DEF_CMPSTORESTORE(RSK_ARCH_FN(cmpstorestore_release, X), OFF, \
				  RSK_ARM_COMMIT_RELEASE)		       \
	RSK_ARM_DEF_CMPCOPYSTORE(RSK_ARCH_FN(cmpcopystore, X), OFF,	       \
				 RSK_ARM_COMMIT_PLAIN)			       \
	RSK_ARM_DEF_CMPCOPYSTORE(RSK_ARCH_FN(cmpcopystore_release, X), OFF,   \
				 RSK_ARM_COMMIT_RELEASE)		       \
									       \
	/* A load, an add and the commit store: the delay between load and     \
	 * store (point 3) is the window a lost update needs. */               \
	RSK_ARM_FN RSK_ARCH_FN(add, X)(struct rsk_abi_area *area, int idx,    \
					intptr_t *v,			       \
					intptr_t count RSK_GATE_PARAM)     \
	{								       \
		intptr_t tmp;						       \
		RSK_ARM_INJECT_DECL					       \
		__asm__ __volatile__(					       \
			RSK_ARM_DESCRIBE RSK_ARM_HEAD(OFF)		       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"add %[tmp], %[tmp], %[count]\n\t"		       \
			RSK_INJECT_ASM(3)				       \
			"str %[tmp], [%[v]]\n"				       \
			RSK_ARM_END("")					       \
			: [tmp] "=&r"(tmp)RSK_ARM_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [count] "r"(count)RSK_ARM_GATE_IN RSK_ARM_INJECT_IN  \
			: "memory", "cc");				       \
		RSK_ARM_RESULT						       \
	}								       \
									       \
	RSK_ARM_FN RSK_ARCH_FN(pop, X)(struct rsk_abi_area *area, int idx,    \
					intptr_t *v, intptr_t expectnot,       \
					intptr_t offset,		       \
					intptr_t *out RSK_GATE_PARAM)      \
	{								       \
		intptr_t tmp;						       \
		RSK_ARM_INJECT_DECL					       \
		__asm__ __volatile__(					       \
			RSK_ARM_DESCRIBE RSK_ARM_EXIT("10f")		       \
			RSK_ARM_HEAD(OFF)				       \
			"ldr %[tmp], [%[v]]\n\t"			       \
			"cmp %[tmp], %[expectnot]\n\t"			       \
			"beq 10f\n\t"					       \
			"str %[tmp], [%[out]]\n\t"			       \
			RSK_INJECT_ASM(3)				       \
			"ldr %[tmp], [%[tmp], %[offset]]\n\t"		       \
			"str %[tmp], [%[v]]\n"				       \
			RSK_ARM_END(RSK_ARM_CMPFAIL_STUB)		       \
			: [tmp] "=&r"(tmp)RSK_ARM_INJECT_OUT		       \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),	       \
			  [expectnot] "r"(expectnot), [offset] "r"(offset),    \
			  [out] "r"(out)RSK_ARM_GATE_IN RSK_ARM_INJECT_IN      \
			: "memory", "cc");				       \
		RSK_ARM_RESULT						       \
	}								       \
									       \
	RSK_ARM_FN RSK_ARCH_FN(derefadd, X)(struct rsk_abi_area *area,	       \
					     int idx, intptr_t *const *ptr,    \
					     intptr_t off,		       \
					     intptr_t inc RSK_GATE_PARAM)  \
	{								       \
		intptr_t tmp, val;					       \
		RSK_ARM_INJECT_DECL					       \
		__asm__ __volatile__(					       \
			RSK_ARM_DESCRIBE RSK_ARM_HEAD(OFF)		       \
			"ldr %[tmp], [%[ptr]]\n\t"			       \
			"add %[tmp], %[tmp], %[off]\n\t"		       \
			"ldr %[val], [%[tmp]]\n\t"			       \
			"add %[val], %[val], %[inc]\n\t"		       \
			RSK_INJECT_ASM(3)				       \
			"str %[val], [%[tmp]]\n"			       \
			RSK_ARM_END("")					       \
			: [tmp] "=&r"(tmp), [val] "=&r"(val)RSK_ARM_INJECT_OUT \
			: [area] "r"(area), [idx] "r"(idx), [ptr] "r"(ptr),    \
			  [off] "r"(off),				       \
			  [inc] "r"(inc)RSK_ARM_GATE_IN RSK_ARM_INJECT_IN      \
			: "memory", "cc");				       \
		RSK_ARM_RESULT						       \
	}

/*
 * Each operation exists twice: plain (rsk_arch_<op>_<X>) and gated
 * (rsk_arch_gated_<op>_<X>, one more argument `gate`).  A gated section
 * loads *gate (load-acquire, see the top of this file) after arming and
 * leaves through the stub at 11 (result 2) unless it is 0.
 */
#define RSK_ARM_GATE_ASM RSK_GATED(                                           \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                    \
	".balign 8\n\t"                                                       \
	RSK_ARM_U64("1b") RSK_ARM_U64("11f")                                  \
	".popsection\n\t"                                                     \
	"ldr %[tmp], [%[gate]]\n\t"                                           \
	"cmp %[tmp], #0\n\t"                                                  \
	"bne 11f\n\t"                                                         \
	"dmb ish\n\t")
#define RSK_ARM_GATE_IN RSK_GATED(, [gate] "r"(gate))
#define RSK_ARM_GATE_STUB RSK_GATED(                                          \
	"11:\n\t"                                                             \
	"mov %[tmp], #2\n\t"                                                  \
	"b 12b\n")
