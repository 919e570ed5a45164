/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/riscv.h - restartable sequences for RV64 (riscv64).
 *
 * The constants, the thread pointer and the instruction building blocks;
 * the operations are in arch/riscv/ops.h, the contract in <rseqkit/arch.h>,
 * the section layout in arch/common.h.
 *
 * Conditional branches reach +-4 KiB (the assembler relaxes a too-far one
 * within a section, never across sections), so every early exit (compare
 * failed, wrong index, closed gate) branches to its C label in the same
 * function; all of them are listed in __rseq_exit_point_array.  The abort
 * stub reaches its C label with auipc + jalr (+-2 GiB, see RSK_ASM_JUMP).
 *
 * Memory ordering: RVWMO is weak.  The relaxed operations order nothing
 * beyond their own dependencies; the _release variants execute
 * `fence rw, w` just before the commit store, which orders every earlier
 * load and store of the thread (the section's speculative stores included)
 * before it: a store-release.  The gated twins load the gate with acquire
 * ordering (ld; fence r, rw; see RSK_ASM_GATE).
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/riscv.h"
#endif
#if __riscv_xlen != 64
#error "rseqkit: rseqkit/arch/riscv.h supports RV64 only"
#endif

/* csrw mhartid, zero: illegal in user mode; the same value as glibc's. */
#define RSK_ARCH_SIGNATURE 0xf1401073
#define RSK_ARCH_NR_RSEQ   293 /* asm-generic */
#define RSK_ARCH_NAME	   "riscv64"

#define RSK_ARCH_OPS_H "rseqkit/arch/riscv/ops.h"

/* The tp register; glibc's __rseq_offset is relative to it. */
#define RSK_ARCH_TP_ASM "mv %0, tp"

/* The building blocks arch/common.h asks for (RSK_ASM_U64: its .quad;
 * label differences such as post_commit_offset are emitted as ADD/SUB
 * relocation pairs, so linker relaxation of the section's code is
 * harmless). */
#define RSK_ASM_PTR_ALIGN ".balign 8\n\t"
/*
 * The abort stub is assembled with norelax and 4-byte aligned: it is the
 * signature word (RSK_ARCH_SIGNATURE as a little-endian u32, as the kernel
 * reads it) and two 4-byte instructions, so every signature stays 4-byte
 * aligned and every abort_ip decodable, whatever the linker does
 * elsewhere.  RSK_ASM_SIGNATURE opens that norelax region and
 * RSK_ASM_JUMP, which always follows it in RSK_ASM_ABORT, closes it.
 */
#define RSK_ASM_SIGNATURE                                                      \
	".option push\n\t"                                                     \
	".option norelax\n\t"                                                  \
	".balign 4\n\t"                                                        \
	".4byte 0xf1401073\n"
/* auipc + jalr (+-2 GiB) through the section's scratch register, which is
 * dead on the abort path; the auipc is at abort_ip (label 4). */
#define RSK_ASM_JUMP(to)                                                       \
	"auipc %[tmp], %%pcrel_hi(" to ")\n\t"                                 \
	"jalr zero, %%pcrel_lo(4b)(%[tmp])\n\t"                                \
	".option pop\n\t"
/* The descriptor's pc-relative address (auipc + addi), right in
 * executables, PIEs and shared objects alike. */
#define RSK_ASM_ARMING                                                         \
	"lla %[tmp], 3b\n\t"                                                   \
	"sd %[tmp], 8(%[area])\n"

/* RSK_ASM_CHECK_INDEX: leave as aborted unless the area still holds the
 * index the caller used (subw compares the low 32 bits whatever the upper
 * bits of idx are); its exit point is listed before the section's other
 * exits. */
#define RSK_ASM_INDEX_EXIT RSK_ASM_EXIT("aborted")
#define RSK_ASM_CHECK_INDEX                                                     \
	"lw %[tmp], " RSK_ARCH_OFF "(%[area])\n\t"                             \
	"subw %[tmp], %[tmp], %[idx]\n\t"                                      \
	"bnez %[tmp], %l[aborted]\n\t"

/*
 * RSK_ASM_GATE: load *gate and leave through `stopped` unless it is 0.
 *
 * Closing the gate needs no ordering from the section: the slow path
 * closes it with a CAS and then fences the CPU with membarrier
 * (PRIVATE_EXPEDITED_RSEQ, FLAG_CPU).  Traps are precise, so a section of
 * ours running there has either retired its commit store (the kernel's
 * full barrier on that CPU makes it visible before membarrier returns) or
 * not (it is restarted, whatever its gate load returned); a section that
 * starts after the interrupt runs after the handler's barrier, so its
 * load sees the gate closed.
 *
 * Reopening is what needs ordering: the slow path writes the part with
 * plain stores and then store-releases gate = 0.  RVWMO lets the section's
 * load of *v be satisfied before its gate load (a branch orders later
 * stores, not later loads), so a section that reads the 0 could still
 * hold the value *v had before the slow path and commit over its update.
 * The gate load is therefore an acquire: `ld` followed by `fence r, rw`.
 */
#define RSK_ASM_GATE                                                            \
	RSK_GATED(RSK_ASM_GATE_EXIT "ld %[tmp], 0(%[gate])\n\t"                \
				    "fence r, rw\n\t"                          \
				    "bnez %[tmp], %l[stopped]\n\t")

/* No flags register: "cc" is not a clobber here. */
#define RSK_ARCH_CLOBBERS "memory"

#if RSK_INJECTING
/* A delay loop of rsk_inject_loops[n] iterations, read through one base
 * register for all points; the counter is a scratch register of its own. */
#define RSK_INJECT_ASM(n)                                                      \
	"lw %[cnt], (4 * " #n ")(%[inj])\n\t"                                  \
	"blez %[cnt], 8f\n"                                                    \
	"9:\n\t"                                                               \
	"addiw %[cnt], %[cnt], -1\n\t"                                         \
	"bgtz %[cnt], 9b\n"                                                    \
	"8:\n\t"
#define RSK_ARCH_INJECT_DECL intptr_t rsk_cnt;
#define RSK_ARCH_INJECT_OUT  , [cnt] "=&r"(rsk_cnt)
#define RSK_ARCH_INJECT_IN   , [inj] "r"(rsk_inject_loops)
#endif

#include <rseqkit/arch/common.h>
