/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/i386.h - restartable sequences for i386.
 *
 * The constants, the thread pointer and the instruction building blocks;
 * the operations are in arch/i386/ops.h, the contract in <rseqkit/arch.h>,
 * the section layout in arch/common.h.
 *
 * x86 is TSO: every store is already a release store, so a release
 * variant is the relaxed one (RSK_ARCH_TSO: arch/variant.h writes them).
 * Every section clobbers "memory", which keeps the compiler from sinking
 * the thread's earlier stores below the commit: no barrier before them.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/i386.h"
#endif

#define RSK_ARCH_SIGNATURE 0x53053053
#define RSK_ARCH_NAME	   "i386"
#define RSK_ARCH_NR_RSEQ   386
#define RSK_ARCH_TSO	   1
#define RSK_ARCH_RELEASE_BARRIER(op) ((void)0)
#define RSK_ARCH_OPS_H "rseqkit/arch/i386/ops.h"

/* %gs:0, the TCB's self pointer under glibc and musl. */
#define RSK_ARCH_TP_ASM "movl %%gs:0, %0"

/* The building blocks arch/common.h asks for. */
#define RSK_ASM_U64(x)	  ".long " x ", 0\n\t"
#define RSK_ASM_PTR_ALIGN ""
/* ud1 ...: the signature is its disp32 */
#define RSK_ASM_SIGNATURE ".byte 0x0f, 0xb9, 0x3d\n\t.long 0x53053053\n"
#define RSK_ASM_JUMP(to)  "jmp " to "\n\t"
#if defined(__PIC__)
/* No pc-relative addressing on i386: a call to the next instruction is the
 * one way to learn the pc without a GOT register.  It runs before the
 * section is armed, so the push it makes can never be restarted. */
#define RSK_ASM_ARMING                                                         \
	"call 5f\n"                                                            \
	"5:\n\t"                                                               \
	"popl %[tmp]\n\t"                                                      \
	"leal (3b - 5b)(%[tmp]), %[tmp]\n\t"                                   \
	"movl %[tmp], 8(%[area])\n"
#else
#define RSK_ASM_ARMING "movl $3b, 8(%[area])\n"
#endif

/* RSK_ASM_CHECK_INDEX: leave as an abort unless the area still holds the
 * index the caller used. */
#define RSK_ASM_CHECK_INDEX                                                   \
	"movl " RSK_ARCH_OFF "(%[area]), %[tmp]\n\t"                           \
	"cmpl %[idx], %[tmp]\n\t"                                              \
	"jnz 4f\n\t"

/* RSK_ASM_GATE: a closed gate (nonzero) leaves through `stopped`.  A
 * plain load is a load-acquire on x86 (TSO), as the gate load must be. */
#define RSK_ASM_GATE                                                           \
	RSK_GATED(RSK_ASM_GATE_EXIT "cmpl $0, (%[gate])\n\t"                   \
				    "jnz %l[stopped]\n\t")
/* The index may stay in memory (i386 is short of registers). */
#define RSK_ARCH_INDEX_IN [area] "r"(area), [idx] "rm"(idx)

/* A word operand: register, memory or immediate. */
#define RSK_I386_VAL "rmi"
/* add's addend: a register or an immediate (no mem-to-mem add). */
#define RSK_I386_ADDEND "ri"

#if RSK_INJECTING
/* The delay loop borrows tmp, parking its value in a stack slot (a plain
 * store: a push could be cut in half by an abort). */
#define RSK_INJECT_ASM(n)                                                      \
	"movl %[tmp], %[injspill]\n\t"                                         \
	"movl %[inj" #n "], %[tmp]\n\t"                                        \
	"testl %[tmp], %[tmp]\n\t"                                             \
	"jz 8f\n"                                                              \
	"9:\n\t"                                                               \
	"decl %[tmp]\n\t"                                                      \
	"jnz 9b\n"                                                             \
	"8:\n\t"                                                               \
	"movl %[injspill], %[tmp]\n\t"
/*
 * The counts are copied to the stack before the section: as memory operands
 * they then cost no register.  Read in place, each would need the address
 * of rsk_inject_loops in one under -fpie (a GOT load, and at -O0 one per
 * operand), and the gated copy, which already holds six, had none left:
 * "impossible constraints", or cc1 searching for minutes.
 */
#define RSK_ARCH_INJECT_DECL                                                   \
	intptr_t rsk_injspill;                                                 \
	int rsk_inj[5];                                                        \
	__builtin_memcpy(rsk_inj, rsk_inject_loops, sizeof(rsk_inj));
#define RSK_ARCH_INJECT_OUT , [injspill] "=m"(rsk_injspill)
#define RSK_ARCH_INJECT_IN                                                     \
	, [inj1] "m"(rsk_inj[1]), [inj2] "m"(rsk_inj[2]), [inj3] "m"(rsk_inj[3]), \
		[inj4] "m"(rsk_inj[4])
#endif

#include <rseqkit/arch/common.h>
