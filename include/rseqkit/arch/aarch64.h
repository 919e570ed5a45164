/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/aarch64.h - restartable sequences for AArch64 (LP64).
 *
 * The constants, the thread pointer and the instruction building blocks;
 * the operations are in arch/aarch64/ops.h, the contract in
 * <rseqkit/arch.h>, the section layout in arch/common.h.
 *
 * Sections are asm goto.  (GCC sizes an asm goto as one
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

#define RSK_ARCH_OPS_H "rseqkit/arch/aarch64/ops.h"

/* TPIDR_EL0: the thread pointer glibc's __rseq_offset is relative to. */
#define RSK_ARCH_TP_ASM "mrs %0, tpidr_el0"

/* The building blocks arch/common.h asks for. */
#define RSK_ASM_PTR_ALIGN ".balign 8\n\t"
/* A brk: see RSK_ARCH_SIGNATURE. */
#define RSK_ASM_SIGNATURE ".inst " RSK_A64_SIG_INSN "\n"
#define RSK_ASM_JUMP(to)  "b " to "\n\t"
/* The descriptor's address, pc-relative (adrp + :lo12:), so that the same
 * code serves static, PIE and shared-library builds. */
#define RSK_ASM_ARMING                                                         \
	"adrp %[tmp], 3b\n\t"                                                  \
	"add %[tmp], %[tmp], :lo12:3b\n\t"                                     \
	"str %[tmp], [%[area], #8]\n"

/*
 * RSK_ASM_CHECK_INDEX: leave as an abort unless the area still holds the
 * index the caller used.  The branch goes straight to the C label (an exit
 * point like the others) rather than to abort_ip: a conditional branch
 * reaches +-1 MiB only, and __rseq_failure is placed after all of .text,
 * which may be farther away in a large program; the abort handler leaves
 * with an unconditional `b` (+-128 MiB, and the linker adds veneers beyond).
 */
#define RSK_ASM_CHECK_INDEX                                                    \
	RSK_ASM_EXIT_PAIR("1b", "%l[aborted]")                                 \
	"ldr %w[tmp], [%[area], #" RSK_ARCH_OFF "]\n\t"                        \
	"cmp %w[tmp], %w[idx]\n\t"                                             \
	"b.ne %l[aborted]\n\t"

/* RSK_ASM_GATE: load *gate with `ldar` (load-acquire, see the top of this
 * file) and leave through `stopped` unless it is 0. */
#define RSK_ASM_GATE                                                           \
	RSK_GATED(RSK_ASM_GATE_EXIT "ldar %[tmp], [%[gate]]\n\t"               \
				    "cbnz %[tmp], %l[stopped]\n\t")

/* The commit store: `stlr` (store-release) in the _release twins. */
#define RSK_A64_COMMIT(val, dst)                                               \
	RSK_RELAXED("str %[" val "], [%[" dst "]]\n")                          \
	RSK_RELEASED("stlr %[" val "], [%[" dst "]]\n")

#if RSK_INJECTING
/* A delay loop on its own scratch register (AArch64 has registers to
 * spare); the counts are read through one base register holding
 * rsk_inject_loops (the "memory" clobber covers the read). */
#define RSK_INJECT_ASM(n)                                                      \
	"ldr %w[inj], [%[injbase], #(4 * " #n ")]\n\t"                         \
	"cbz %w[inj], 8f\n"                                                    \
	"9:\n\t"                                                               \
	"subs %w[inj], %w[inj], #1\n\t"                                        \
	"b.ne 9b\n"                                                            \
	"8:\n\t"
#define RSK_ARCH_INJECT_DECL int rsk_inj;
#define RSK_ARCH_INJECT_OUT  , [inj] "=&r"(rsk_inj)
#define RSK_ARCH_INJECT_IN   , [injbase] "r"(rsk_inject_loops)
#endif

#include <rseqkit/arch/common.h>
