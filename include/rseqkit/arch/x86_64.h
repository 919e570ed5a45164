/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/x86_64.h - restartable sequences for x86-64.
 *
 * The constants, the thread pointer, the area and the instruction
 * building blocks; the operations are in arch/x86_64/ops.h (the contract's
 * `_at` form) and the part operations in arch/x86_64/parts.h.  A section
 * reaches the thread's area through %fs, by the area's offset from the
 * thread pointer (rsk_arch_area_t is that offset), and re-checks the index
 * field whose offset in the area it is given (cpu_id or mm_cid): one code
 * path for both index modes, and no area pointer to build.
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
 * variant is the relaxed one behind a compiler barrier (RSK_ARCH_TSO:
 * arch/variant.h writes them).
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/x86_64.h"
#endif

#define RSK_ARCH_SIGNATURE 0x53053053
#define RSK_ARCH_NAME	   "x86_64"
#define RSK_ARCH_NR_RSEQ   334
#define RSK_ARCH_TSO	   1
#define RSK_ARCH_OPS_H	   "rseqkit/arch/x86_64/ops.h"
#define RSK_ARCH_PARTS_H   "rseqkit/arch/x86_64/parts.h"

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

/* A byte of the area at byte `field`: loaded afresh, or stored (the
 * time-slice extension's request and granted bytes).  As for the 32-bit
 * load, the offset is an immediate where the compiler knows it (not at
 * -O0). */
static inline __attribute__((always_inline)) uint8_t rsk_arch_area_u8(rsk_arch_area_t area,
								      uint32_t field)
{
	uint8_t v;

	if (__builtin_constant_p(field))
		__asm__ __volatile__("movb %%fs:%c2(%1), %0" : "=q"(v) : "r"(area), "i"(field));
	else
		__asm__ __volatile__("movb %%fs:(%1, %2), %0"
				     : "=q"(v)
				     : "r"(area), "r"((uintptr_t)field));
	return v;
}

static inline __attribute__((always_inline)) void rsk_arch_area_set_u8(rsk_arch_area_t area,
								       uint32_t field, uint8_t v)
{
	if (__builtin_constant_p(field))
		__asm__ __volatile__("movb %2, %%fs:%c1(%0)" : : "r"(area), "i"(field), "iq"(v));
	else
		__asm__ __volatile__("movb %2, %%fs:(%0, %1)"
				     :
				     : "r"(area), "r"((uintptr_t)field), "iq"(v));
}

/* The building blocks arch/common.h asks for. */
#define RSK_ASM_PTR_ALIGN ""
/* ud1 ...: the signature is its disp32 */
#define RSK_ASM_SIGNATURE ".byte 0x0f, 0xb9, 0x3d\n\t.long 0x53053053\n"
#define RSK_ASM_JUMP(to)  "jmp " to "\n\t"
#define RSK_ASM_ARMING                                                         \
	"leaq 3b(%%rip), %[tmp]\n\t"                                           \
	"movq %[tmp], %%fs:8(%[area])\n"

/* RSK_ASM_CHECK_INDEX: leave as an abort unless the area still holds the
 * index the caller used: one compare of the index field in memory. */
#define RSK_ASM_CHECK_INDEX                                                    \
	"cmpl %[idx], %%fs:(%[area], %[ioff])\n\t"                             \
	"jnz 4f\n\t"

/* RSK_ASM_GATE: a closed gate (nonzero) leaves through `stopped`.  A plain
 * load is an acquire on x86.  Only the gated twins name the label: a plain
 * section has one exit fewer for the compiler to lay out. */
#define RSK_ASM_GATE                                                           \
	RSK_GATED(RSK_ASM_GATE_EXIT "cmpq $0, %[gate]\n\t"                     \
				    "jnz %l[stopped]\n\t")
#define RSK_ARCH_STOP_ONLY_GATED 1

/* A section's exit points come before its descriptor: the order in which
 * x86-64's sections have always opened __rseq_exit_point_array and
 * __rseq_cs, which decides the order of those sections in the binary. */
#define RSK_ASM_OPEN(exits) exits RSK_ASM_DESCRIBE

/* The operands every section has: the area (an offset from %fs) and the
 * index field's offset in it, the index it must still hold; the gate and
 * the words a section works on are memory operands.  The relaxed sections
 * clobber no memory (see the top of this file): those that touch memory
 * they do not name add "memory". */
#define RSK_ARCH_INDEX_IN [area] "r"(area), [ioff] "r"((uintptr_t)ioff), [idx] "r"(idx)
#define RSK_ARCH_GATE_IN  RSK_GATED(, [gate] "m"(*gate))
#define RSK_ARCH_CLOBBERS "cc"
#define RSK_X64_BARRIER() __asm__ __volatile__("" ::: "memory")

/* The _release twins (arch/variant.h): a compiler barrier before the
 * relaxed ops that clobber no memory; the copy clobbers it already. */
#define RSK_ARCH_RELEASE_BARRIER(op)	       RSK_X64_RELEASE_BARRIER_##op
#define RSK_X64_RELEASE_BARRIER_cmpstore      RSK_X64_BARRIER()
#define RSK_X64_RELEASE_BARRIER_cmpstorestore RSK_X64_BARRIER()
#define RSK_X64_RELEASE_BARRIER_cmpcopystore  ((void)0)

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
#define RSK_ARCH_INJECT_DECL intptr_t rsk_injspill;
#define RSK_ARCH_INJECT_OUT  , [injspill] "=m"(rsk_injspill)
#define RSK_ARCH_INJECT_IN                                                     \
	, [inj1] "m"(rsk_inject_loops[1]), [inj2] "m"(rsk_inject_loops[2]),    \
		[inj3] "m"(rsk_inject_loops[3]), [inj4] "m"(rsk_inject_loops[4])
#endif

#include <rseqkit/arch/common.h>
