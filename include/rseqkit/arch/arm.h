/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/arm.h - restartable sequences for 32-bit ARM (ARMv7-A and
 * later, A32 or Thumb-2; little- or big-endian (BE8)).
 *
 * The constants, the thread pointer, the instruction building blocks and
 * the end of a section with its result stubs; the operations are in
 * arch/arm/ops.h, the contract in <rseqkit/arch.h>, the section layout in
 * arch/common.h.
 *
 * No asm goto on this architecture: GCC (12 at least) counts an asm goto
 * as one instruction when it places literal pools and picks branch forms,
 * so a function that inlines a few sections fails to assemble ("bad
 * immediate value for offset": the literal pool placed out of reach of
 * its loads - seen with tests/primitives.c).  A plain asm is counted per
 * line (4 bytes each), an overestimate here, which is safe.  So each
 * section leaves its result in tmp (RSK_ARM_END below).
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
 * the gated cmpcmpstore, cmpstorestore and cmpcopystore of an injection
 * build fail there with "impossible constraints" (and the gated
 * cmpcopystore of one does in some callers at -O2 too: tests/structures.c,
 * the negative control of tests/primitives.c); and a Thumb conditional
 * branch reaches +-1 MiB, so a program whose text between a section and
 * __rseq_failure (placed after .text) exceeds that fails to link
 * ("relocation truncated to fit").  A32 branches reach +-32 MiB.
 *
 * Memory ordering (ARM is weakly ordered):
 *   - The relaxed operations order nothing but their own accesses.
 *   - The _release variants put `dmb ish` before the commit store
 *     (RSK_ARM_COMMIT): every earlier load and store of the thread (the
 *     section's speculative stores included) is observed before the
 *     commit.
 *   - The gate of the gated twins is a load-acquire (RSK_ASM_GATE).
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
#else
#define RSK_ARCH_SIGNATURE 0xe7f5def3
#endif

#define RSK_ARCH_OPS_H "rseqkit/arch/arm/ops.h"

/* TPIDRURO, the thread pointer glibc's __rseq_offset is relative to. */
#define RSK_ARCH_TP_ASM "mrc p15, 0, %0, c13, c0, 3"

/* The building blocks arch/common.h asks for.  A u64 is two words in the
 * data byte order; RSK_ARM_CS_LOW is the low word of area->rseq_cs, the
 * one the arming stores (the high word stays 0). */
#ifdef __ARMEB__
#define RSK_ASM_U64(x) ".long 0, " x "\n\t" /* high word first */
#define RSK_ARM_CS_LOW "12"
#else
#define RSK_ASM_U64(x) ".long " x ", 0\n\t"
#define RSK_ARM_CS_LOW "8"
#endif
#define RSK_ASM_PTR_ALIGN ".balign 8\n\t"

/* The signature (see RSK_ARCH_SIGNATURE), and how the arming reads the pc:
 * it reads as the address of its own instruction plus RSK_ARM_PC_BIAS. */
#ifdef __thumb__
#ifdef __ARMEB__
#define RSK_ARM_SIG ".word 0xf3def5e7\n"
#else
#define RSK_ARM_SIG ".word 0xe7f5def3\n"
#endif
#define RSK_ARM_PC_BIAS "4"
/* 16-bit ADD (register) is the Thumb form that may read the pc. */
#define RSK_ARM_ADD_PC "add %[tmp], pc\n\t"
#else
#define RSK_ARM_SIG	".inst 0xe7f5def3\n"
#define RSK_ARM_PC_BIAS "8"
#define RSK_ARM_ADD_PC	"add %[tmp], pc, %[tmp]\n\t"
#endif
#define RSK_ASM_SIGNATURE ".balign 4\n\t" RSK_ARM_SIG

/* RSK_ASM_JUMP is left undefined: no section here leaves for a C label
 * (no asm goto), so nothing expands RSK_ASM_ABORT; RSK_ARM_END is its
 * counterpart. */

/* The descriptor is found pc-relatively (movw/movt of the distance to it
 * from label 5, then an add of the pc), so the same code serves static,
 * PIE and shared builds without a literal pool or a GOT register. */
#define RSK_ASM_ARMING                                                         \
	"movw %[tmp], #:lower16:(3b - (5f + " RSK_ARM_PC_BIAS "))\n\t"         \
	"movt %[tmp], #:upper16:(3b - (5f + " RSK_ARM_PC_BIAS "))\n"           \
	"5:\n\t" RSK_ARM_ADD_PC "str %[tmp], [%[area], #" RSK_ARM_CS_LOW "]\n"

/*
 * The result convention (instead of asm goto, see the top of this file):
 * tmp ends as the result.  0 is set after the commit (label 2), falling
 * through to the join at 12; the other results are set by stubs in
 * __rseq_failure, next to the abort handler and off the fast path, that
 * branch back to 12:
 *   10: compare failed (1)   11: gate closed (3)   4: abort_ip (2)
 * The exit-point pairs name 10 and 11, where control leaves the section.
 * RSK_ARM_END(stubs) follows label 2; stubs is RSK_ARM_CMPFAIL_STUB for
 * the operations that compare, "" for the others.
 */
#define RSK_ARM_END(stubs)                                                     \
	"mov %[tmp], #0\n"                                                     \
	"12:\n\t" RSK_ASM_FAILURE_ENTRY "mov %[tmp], #2\n\t"                   \
	"b 12b\n" stubs RSK_ARM_GATE_STUB ".popsection\n\t"
#define RSK_ARM_CMPFAIL_STUB                                                   \
	"10:\n\t"                                                              \
	"mov %[tmp], #1\n\t"                                                   \
	"b 12b\n"

/*
 * The sections of arch/common.h (RSK_ARCH_SECTION_CMP / RSK_ARCH_SECTION,
 * the same arguments), as plain asm statements with that convention; the
 * result tails return tmp.
 */
#define RSK_ARCH_SECTION_CMP(body, out, in, more)                              \
	RSK_ARM_SECTION(RSK_ASM_EXIT_PAIR("1f", "10f"), RSK_ARM_CMPFAIL_STUB, body, out, in, more)
#define RSK_ARCH_SECTION(body, out, in, more) RSK_ARM_SECTION(, "", body, out, in, more)
#define RSK_ARM_SECTION(exits, stubs, body, out, in, more)                     \
	intptr_t tmp;                                                          \
	RSK_ARCH_INJECT_DECL                                                   \
	__asm__ __volatile__(RSK_ASM_ENTER(exits) body "2:\n\t" RSK_ARM_END(stubs) \
			     : RSK_ASM_OUTPUTS(out)                            \
			     : RSK_ASM_INPUTS(in)                              \
			     : RSK_ARCH_CLOBBERS RSK_ARCH_LIST(more))
#define RSK_ARCH_RETURN_CMP return (int)tmp;
#define RSK_ARCH_RETURN	    return (int)tmp;

/* RSK_ASM_CHECK_INDEX: leave as an abort unless the area still holds the
 * index the caller used. */
#define RSK_ASM_CHECK_INDEX                                                    \
	"ldr %[tmp], [%[area], #" RSK_ARCH_OFF "]\n\t"                         \
	"cmp %[tmp], %[idx]\n\t"                                               \
	"bne 4f\n\t"

/*
 * RSK_ASM_GATE: load *gate and leave through the stub at 11 (result 2)
 * unless it is 0.  The load is a load-acquire: the load, its compare and
 * branch, then `dmb ish`.  Closing the gate needs no ordering from the
 * section: the slow path closes it with a CAS and then fences the CPU
 * (membarrier RSEQ); the IPI handler runs a full barrier on that CPU, and
 * a section that read the gate open either committed before the interrupt
 * - its commit is then visible to the slow path when membarrier returns -
 * or had not, and is restarted; its rerun loads the gate program-order
 * after the handler's barrier and sees it closed.  Reopening is what
 * needs the acquire: the slow path writes the part with plain stores and
 * then store-releases gate = 0.  A section that reads that 0 must not use
 * values of the part loaded before it (ARM may satisfy a later plain load
 * first, and the commit would then erase the slow path's update); the
 * barrier orders every later load after the gate load.  Stores were
 * already safe behind the control dependency of the branch.
 */
#define RSK_ASM_GATE                                                           \
	RSK_GATED(RSK_ASM_EXIT_PAIR("1b", "11f")                               \
		  "ldr %[tmp], [%[gate]]\n\t"                                  \
		  "cmp %[tmp], #0\n\t"                                         \
		  "bne 11f\n\t"                                                \
		  "dmb ish\n\t")
#define RSK_ARM_GATE_STUB                                                      \
	RSK_GATED("11:\n\t"                                                    \
		  "mov %[tmp], #3\n\t"                                         \
		  "b 12b\n")

/* The commit store: after a full barrier in the _release twins (ARMv7 has
 * no store-release instruction). */
#define RSK_ARM_COMMIT(val, dst)                                               \
	RSK_RELEASED("dmb ish\n\t") "str %[" val "], [%[" dst "]]\n"

#if RSK_INJECTING
/* A delay loop on its own scratch register; the counts are read through
 * one base register holding rsk_inject_loops (the "memory" clobber covers
 * the read): one register for all points instead of one per "m" operand. */
#define RSK_INJECT_ASM(n)                                                      \
	"ldr %[inj], [%[injbase], #(4 * " #n ")]\n\t"                          \
	"cmp %[inj], #0\n\t"                                                   \
	"beq 8f\n"                                                             \
	"9:\n\t"                                                               \
	"subs %[inj], %[inj], #1\n\t"                                          \
	"bne 9b\n"                                                             \
	"8:\n\t"
#define RSK_ARCH_INJECT_DECL int rsk_inj;
#define RSK_ARCH_INJECT_OUT  , [inj] "=&r"(rsk_inj)
#define RSK_ARCH_INJECT_IN   , [injbase] "r"(rsk_inject_loops)
#endif

#include <rseqkit/arch/common.h>
