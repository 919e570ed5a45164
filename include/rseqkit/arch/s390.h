/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/s390.h - restartable sequences for s390x (z/Architecture).
 *
 * The constants, the thread pointer and the instruction building blocks;
 * the operations are in arch/s390/ops.h, the contract in <rseqkit/arch.h>,
 * the section layout in arch/common.h.
 *
 * Registers: every register used as a base or index of an address is
 * constrained with "a" - r0 there reads as the constant 0.  Values use
 * "d".  Compares take the expected value against memory directly (cg), so
 * most sections need a single scratch register: this matters at -O0,
 * where r11 (frame), r12 (GOT) and r15 (stack) are taken.
 *
 * Branches: jg<cond> (brcl, +-4 GiB) for every exit, so distance never
 * matters; the wrong-index exit goes to abort_ip itself, the other early
 * exits (compare failed, closed gate) are listed in
 * __rseq_exit_point_array.  Instructions are 2-byte aligned; the abort
 * stubs are kept 4-byte aligned.
 *
 * Memory ordering: z/Architecture is strongly ordered - loads are not
 * reordered with loads, stores not with stores, and no store passes an
 * earlier load (only a load may pass an earlier store, as on x86).  A
 * plain store is therefore already a store-release, and the _release
 * variants are the relaxed ones (RSK_ARCH_TSO: arch/variant.h writes
 * them); every section's "memory" clobber keeps the compiler from sinking
 * earlier stores below the commit, so no barrier goes before them.
 *
 * Byte order: big-endian.  The 32-bit index fields are read with 32-bit
 * loads/compares at their own offsets (cpu_id 4, mm_cid 24), never as a
 * part of a 64-bit load.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/s390.h"
#endif
#ifndef __s390x__
#error "rseqkit: rseqkit/arch/s390.h supports 64-bit s390x only"
#endif

/* trap4 0xfff(%r0); stored big-endian: B2 FF 0F FF.  Same as glibc's. */
#define RSK_ARCH_SIGNATURE 0xB2FF0FFF
#define RSK_ARCH_NR_RSEQ   383
#define RSK_ARCH_NAME	   "s390x"
#define RSK_ARCH_TSO	   1
#define RSK_ARCH_RELEASE_BARRIER(op) ((void)0)

#define RSK_ARCH_OPS_H "rseqkit/arch/s390/ops.h"

static inline __attribute__((always_inline)) void *rsk_arch_thread_pointer(void)
{
	unsigned long tp;
	/* The thread pointer is access registers a0 (high word) : a1 (low);
	 * ear fills only bits 32-63 of the general register. */
	__asm__("ear %0, %%a0\n\t"
		"sllg %0, %0, 32\n\t"
		"ear %0, %%a1"
		: "=&d"(tp));
	return (void *)tp;
}

/* The building blocks arch/common.h asks for (RSK_ASM_U64: its .quad). */
#define RSK_ASM_PTR_ALIGN ".balign 8\n\t"
/* RSK_ARCH_SIGNATURE as data (a big-endian u32, as the kernel reads it),
 * 4-byte aligned. */
#define RSK_ASM_SIGNATURE                                                      \
	".balign 4\n\t"                                                        \
	".long 0xB2FF0FFF\n"
#define RSK_ASM_JUMP(to) "jg " to "\n\t"
/* The descriptor's pc-relative address (larl: the descriptor is 32-byte
 * aligned, larl needs 2), right in executables, PIEs and shared objects
 * alike. */
#define RSK_ASM_ARMING                                                         \
	"larl %[tmp], 3b\n\t"                                                  \
	"stg %[tmp], 8(%[area])\n"

/* RSK_ASM_CHECK_INDEX: leave as an abort unless the area still holds the
 * index the caller used: c compares the low 32 bits of idx with the 32-bit field.  The exit is
 * abort_ip itself (within reach of jg), so it needs no exit point. */
#define RSK_ASM_CHECK_INDEX                                                   \
	"c %[idx], " RSK_ARCH_OFF "(%[area])\n\t"                              \
	"jgne 4f\n\t"

/*
 * RSK_ASM_GATE: compare *gate with 0 in memory and leave through
 * `stopped` unless it is 0.
 *
 * Why the gate load needs no serialization: the slow path closes the gate
 * with a CAS and then fences the CPU with membarrier
 * (PRIVATE_EXPEDITED_RSEQ, FLAG_CPU).  The fence interrupts that CPU;
 * interrupts are precise, so a section of ours that is running there has
 * either completed its commit store (it is finished, and the serialization
 * the kernel performs on that CPU makes the store visible before
 * membarrier returns) or not (its address is inside [start_ip, commit]
 * and it is restarted, whatever its gate load returned).  A section that
 * starts after the interrupt runs after the serialization that membarrier
 * places between the CAS and the interrupt, so its load sees the gate
 * closed.  No section can commit on a gate it read open once the fence
 * has returned.
 */
#define RSK_ASM_GATE                                                          \
	RSK_GATED(RSK_ASM_GATE_EXIT "cghsi 0(%[gate]), 0\n\t"                  \
				    "jgne %l[stopped]\n\t")

/* Addresses in "a", values in "d" (see the top of this file). */
#define RSK_ARCH_SCRATCH  "=&a"
#define RSK_ARCH_INDEX_IN [area] "a"(area), [idx] "d"(idx)
#define RSK_ARCH_GATE_IN  RSK_GATED(, [gate] "a"(gate))

#if RSK_INJECTING
/* A delay loop of rsk_inject_loops[n] iterations, read through one base
 * register for all points; the counter is a scratch register of its own. */
#define RSK_INJECT_ASM(n)                                                      \
	"lt %[cnt], (4 * " #n ")(%[inj])\n\t"                                  \
	"jnh 8f\n"                                                             \
	"9:\n\t"                                                               \
	"brct %[cnt], 9b\n"                                                    \
	"8:\n\t"
#define RSK_ARCH_INJECT_DECL long rsk_cnt;
#define RSK_ARCH_INJECT_OUT  , [cnt] "=&d"(rsk_cnt)
#define RSK_ARCH_INJECT_IN   , [inj] "a"(rsk_inject_loops)
#endif

#include <rseqkit/arch/common.h>
