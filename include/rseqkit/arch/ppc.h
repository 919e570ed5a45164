/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/ppc.h - restartable sequences for 64-bit PowerPC
 * (ppc64le, ELFv2; and big-endian ppc64, ELFv1 or ELFv2).
 *
 * The constants, the thread pointer and the instruction building blocks;
 * the operations are in arch/ppc/ops.h, the contract in <rseqkit/arch.h>,
 * the section layout in arch/common.h.
 *
 * Registers: every register used as a base (RA) of a load, store or addi
 * is constrained with "b" - r0 there reads as the constant 0.
 *
 * Conditional branches reach +-32 KiB only, so every early exit (compare
 * failed, wrong index, closed gate) branches to its C label in the same
 * function; only the abort stub, in its own section, uses `b` (+-32 MiB,
 * and the linker adds a stub beyond that).  All exits but the abort are
 * listed in __rseq_exit_point_array.
 *
 * Memory ordering: POWER is weakly ordered.  The relaxed operations order
 * nothing beyond their own dependencies; the _release variants execute
 * lwsync just before the commit store, which orders every earlier load
 * and store of the thread (the speculative stores of the section
 * included) before it: a store-release.  The gated twins load the gate
 * with acquire ordering (ld; cmpdi; bne-; isync; see RSK_ASM_GATE).
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/ppc.h"
#endif
#ifndef __powerpc64__
#error "rseqkit: rseqkit/arch/ppc.h supports 64-bit PowerPC only"
#endif

#define RSK_ARCH_SIGNATURE 0x0fe5000b /* twi 31,r5,11: an unconditional trap */
#define RSK_ARCH_NR_RSEQ   387
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RSK_ARCH_NAME "ppc64le"
#else
#define RSK_ARCH_NAME "ppc64"
#endif

#define RSK_ARCH_OPS_H "rseqkit/arch/ppc/ops.h"

/* The 64-bit ABIs keep the thread pointer in r13 (TCB end + 0x7000);
 * glibc's __rseq_offset is relative to it.  gcc 12 has no
 * __builtin_thread_pointer for ppc64, so read the register. */
#define RSK_ARCH_TP_ASM "mr %0, 13"

/* The building blocks arch/common.h asks for (RSK_ASM_U64: its .quad). */
#define RSK_ASM_PTR_ALIGN ".balign 8\n\t"
/* RSK_ARCH_SIGNATURE as data: a u32 in the CPU's byte order, as the kernel
 * reads it. */
#define RSK_ASM_SIGNATURE                                                      \
	".balign 4\n\t"                                                        \
	".long 0x0fe5000b\n"
/* `b`: +-32 MiB, and the linker adds a stub beyond that. */
#define RSK_ASM_JUMP(to) "b " to "\n\t"
/*
 * The descriptor's address, computed from the program counter so that
 * the same code is right in executables, PIEs and shared objects without
 * text relocations and without relying on r2 (an inlined section may sit
 * in a function that never set up its TOC pointer).  `bcl 20,31` to the
 * next instruction is the form the branch predictor does not push on its
 * return stack.  It sets LR: every section clobbers "lr".
 */
#define RSK_ASM_ARMING                                                         \
	"bcl 20, 31, 5f\n"                                                     \
	"5:\n\t"                                                               \
	"mflr %[tmp]\n\t"                                                      \
	"addis %[tmp], %[tmp], (3b - 5b)@ha\n\t"                               \
	"addi %[tmp], %[tmp], (3b - 5b)@l\n\t"                                 \
	"std %[tmp], 8(%[area])\n"

/* RSK_ASM_CHECK_INDEX: leave as aborted unless the area still holds the
 * index the caller used (a 32-bit load and compare: right in either byte
 * order); its exit point is listed before the section's other exits. */
#define RSK_ASM_INDEX_EXIT RSK_ASM_EXIT("aborted")
#define RSK_ASM_CHECK_INDEX                                                    \
	"lwz %[tmp], " RSK_ARCH_OFF "(%[area])\n\t"                            \
	"cmpw %[tmp], %[idx]\n\t"                                              \
	"bne- %l[aborted]\n\t"

/*
 * RSK_ASM_GATE: load *gate and leave through `stopped` unless it is 0.
 *
 * Closing the gate needs no ordering from the section: the slow path
 * closes it with a CAS and then fences the CPU with membarrier
 * (PRIVATE_EXPEDITED_RSEQ, FLAG_CPU).  The interrupt is precise, so a
 * section of ours running there has either retired its commit store (the
 * kernel's full barrier on that CPU makes it visible before membarrier
 * returns) or not (it is restarted, whatever its gate load returned); a
 * section that starts after the interrupt runs after the handler's
 * barrier, so its load sees the gate closed.
 *
 * Reopening is what needs ordering: the slow path writes the part with
 * plain stores and then store-releases gate = 0.  POWER may satisfy the
 * section's load of *v before its gate load (loads after a conditional
 * branch execute speculatively), so a section that reads the 0 could
 * still hold the value *v had before the slow path and commit over its
 * update.  The gate load is therefore an acquire, the usual POWER idiom:
 * ld; cmpdi; bne- (the control dependency) followed by isync, which keeps
 * every later instruction from executing before the branch resolves.
 */
#define RSK_ASM_GATE                                                           \
	RSK_GATED(RSK_ASM_GATE_EXIT "ld %[tmp], 0(%[gate])\n\t"                \
				    "cmpdi %[tmp], 0\n\t"                      \
				    "bne- %l[stopped]\n\t"                     \
				    "isync\n\t")

/* Base registers ("b", see the top of this file); every section clobbers
 * the link register (the arming's bcl) and cr0. */
#define RSK_ARCH_SCRATCH  "=&b"
#define RSK_ARCH_INDEX_IN [area] "b"(area), [idx] "r"(idx)
#define RSK_ARCH_GATE_IN  RSK_GATED(, [gate] "b"(gate))
#define RSK_ARCH_CLOBBERS "memory", "cc", "cr0", "lr"

#if RSK_INJECTING
/* A delay loop of rsk_inject_loops[n] iterations, read through one base
 * register for all points; the counter is a scratch register of its own. */
#define RSK_INJECT_ASM(n)                                                      \
	"lwz %[cnt], (4 * " #n ")(%[inj])\n\t"                                 \
	"cmpwi %[cnt], 0\n\t"                                                  \
	"ble 8f\n"                                                             \
	"9:\n\t"                                                               \
	"addi %[cnt], %[cnt], -1\n\t"                                          \
	"cmpwi %[cnt], 0\n\t"                                                  \
	"bgt 9b\n"                                                             \
	"8:\n\t"
#define RSK_ARCH_INJECT_DECL intptr_t rsk_cnt;
#define RSK_ARCH_INJECT_OUT  , [cnt] "=&b"(rsk_cnt)
#define RSK_ARCH_INJECT_IN   , [inj] "b"(rsk_inject_loops)
#endif

#include <rseqkit/arch/common.h>
