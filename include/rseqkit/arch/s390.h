/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/s390.h - restartable sequences for s390x (z/Architecture).
 *
 * Implements the contract written in <rseqkit/arch.h>.
 *
 * Layout of one section (labels are local to each asm statement):
 *   1:  start_ip  - first instruction after arming rseq_cs
 *   2:  end of the commit store (post_commit_offset = 2b - 1b)
 *   3:  the struct rseq_cs descriptor, in __rseq_cs
 *   4:  abort_ip, in __rseq_failure, right after the signature
 *   6, 7: copy loop; 8, 9: injected delay loop
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
 * variants are the relaxed ones; the "memory" clobber keeps the compiler
 * from sinking earlier stores below the commit.
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

/* Arming: the descriptor's pc-relative address (larl: the descriptor is
 * 32-byte aligned, larl needs 2), right in executables, PIEs and shared
 * objects alike. */
#define RSK_S390_ARM                                                           \
	"larl %[tmp], 3b\n\t"                                                  \
	"stg %[tmp], 8(%[area])\n"

#ifdef RSEQKIT_NEGATIVE_CONTROL
/* Test builds only: never arm the descriptor, so the kernel never restarts
 * a section - the negative control that shows the tests detect loss. */
#undef RSK_S390_ARM
#define RSK_S390_ARM "\n"
#endif

/* An early exit: a (start, exit) pair for debuggers. */
#define RSK_S390_EXIT(label)                                                   \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                     \
	".balign 8\n\t"                                                        \
	".quad 1f, %l[" label "]\n\t"                                          \
	".popsection\n\t"

/* The descriptor and its entry in the pointer array. */
#define RSK_S390_DESCRIBE                                                      \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n"                                                         \
	"3:\n\t"                                                               \
	".long 0, 0\n\t"                                                       \
	".quad 1f, (2f - 1f), 4f\n\t"                                          \
	".popsection\n\t"                                                      \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"                         \
	".balign 8\n\t"                                                        \
	".quad 3b\n\t"                                                         \
	".popsection\n\t"

/* The signature (a big-endian u32, as the kernel reads it), then
 * abort_ip: leave for the C abort label. */
#define RSK_S390_ABORT                                                         \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	".balign 4\n\t"                                                        \
	".long 0xB2FF0FFF\n"                                                   \
	"4:\n\t"                                                               \
	"jg %l[aborted]\n\t"                                                   \
	".popsection\n\t"

/* Leave as an abort unless the area still holds the index the caller used:
 * c compares the low 32 bits of idx with the 32-bit field. */
#define RSK_S390_CHECK_INDEX(off)                                              \
	"c %[idx], " off "(%[area])\n\t"                                       \
	"jgne 4f\n\t"

#if RSK_INJECTING
/* A delay loop of rsk_inject_loops[n] iterations, read through one base
 * register for all points; the counter is a scratch register of its own. */
#define RSK_INJECT_ASM(n)                                                      \
	"lt %[cnt], (4 * " #n ")(%[inj])\n\t"                                  \
	"jnh 8f\n"                                                             \
	"9:\n\t"                                                               \
	"brct %[cnt], 9b\n"                                                    \
	"8:\n\t"
#define RSK_S390_INJECT_DECL long rsk_cnt;
#define RSK_S390_INJECT_OUT  , [cnt] "=&d"(rsk_cnt)
#define RSK_S390_INJECT_IN   , [inj] "a"(rsk_inject_loops)
#else
#define RSK_INJECT_ASM(n) ""
#define RSK_S390_INJECT_DECL
#define RSK_S390_INJECT_OUT
#define RSK_S390_INJECT_IN
#endif

/* The copy of cmpcopystore: whole doublewords, first to last. */
#define RSK_S390_COPY                                                          \
	"ltgr %[n], %[n]\n\t"                                                  \
	"jz 6f\n"                                                              \
	"7:\n\t"                                                               \
	"lg %[tmp], 0(%[src])\n\t"                                             \
	"stg %[tmp], 0(%[dst])\n\t"                                            \
	"la %[src], 8(%[src])\n\t"                                             \
	"la %[dst], 8(%[dst])\n\t"                                             \
	"brctg %[n], 7b\n"                                                     \
	"6:\n\t"

#define RSK_S390_FN	 static inline __attribute__((always_inline)) int
#define RSK_S390_CLOBBER "memory", "cc"
#define RSK_S390_TAIL_CMP                                                      \
	return 0;                                                              \
	cmpfail:                                                               \
	return 1;                                                              \
	aborted:                                                               \
	return -1;                                                             \
	stopped:                                                               \
	return 2;
#define RSK_S390_TAIL                                                          \
	return 0;                                                              \
	aborted:                                                               \
	return -1;                                                             \
	stopped:                                                               \
	return 2;

/* The part every section starts with: describe, arm, re-check, gate. */
#define RSK_S390_ENTER(off, exits)                                             \
	RSK_S390_DESCRIBE exits RSK_S390_ARM "1:\n\t" RSK_INJECT_ASM(1)        \
		RSK_S390_CHECK_INDEX(off) RSK_S390_GATE_ASM RSK_INJECT_ASM(2)

#define RSK_S390_OP_CMPSTORE(OP, X, OFF)                                       \
	RSK_S390_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,   \
					 intptr_t *v, intptr_t expect,         \
					 intptr_t newv RSK_GATE_PARAM)    \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_S390_INJECT_DECL                                           \
		__asm__ __volatile__ goto(                                     \
			RSK_S390_ENTER(OFF, RSK_S390_EXIT("cmpfail"))          \
			"cg %[expect], 0(%[v])\n\t"                            \
			"jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)               \
			"stg %[newv], 0(%[v])\n"                               \
			"2:\n\t" RSK_S390_ABORT                                \
			: [tmp] "=&a"(tmp)RSK_S390_INJECT_OUT                  \
			: [area] "a"(area), [idx] "d"(idx), [v] "a"(v),        \
			  [expect] "d"(expect),                                \
			  [newv] "d"(newv)RSK_S390_GATE_IN RSK_S390_INJECT_IN  \
			: RSK_S390_CLOBBER                                     \
			: cmpfail, aborted, stopped);                          \
		RSK_S390_TAIL_CMP                                              \
	}

#define RSK_S390_OP_CMPCMPSTORE(OP, X, OFF)                                    \
	RSK_S390_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,   \
					 intptr_t *v, intptr_t expect,         \
					 intptr_t *v2, intptr_t expect2,       \
					 intptr_t newv RSK_GATE_PARAM)    \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_S390_INJECT_DECL                                           \
		__asm__ __volatile__ goto(                                     \
			RSK_S390_ENTER(OFF, RSK_S390_EXIT("cmpfail"))          \
			"cg %[expect], 0(%[v])\n\t"                            \
			"jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)               \
			"cg %[expect2], 0(%[v2])\n\t"                          \
			"jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(4)               \
			"stg %[newv], 0(%[v])\n"                               \
			"2:\n\t" RSK_S390_ABORT                                \
			: [tmp] "=&a"(tmp)RSK_S390_INJECT_OUT                  \
			: [area] "a"(area), [idx] "d"(idx), [v] "a"(v),        \
			  [expect] "d"(expect), [v2] "a"(v2),                  \
			  [expect2] "d"(expect2),                              \
			  [newv] "d"(newv)RSK_S390_GATE_IN RSK_S390_INJECT_IN  \
			: RSK_S390_CLOBBER                                     \
			: cmpfail, aborted, stopped);                          \
		RSK_S390_TAIL_CMP                                              \
	}

#define RSK_S390_OP_CMPSTORESTORE(OP, X, OFF)                                  \
	RSK_S390_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,   \
					 intptr_t *v, intptr_t expect,         \
					 intptr_t *v2, intptr_t newv2,         \
					 intptr_t newv RSK_GATE_PARAM)    \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_S390_INJECT_DECL                                           \
		__asm__ __volatile__ goto(                                     \
			RSK_S390_ENTER(OFF, RSK_S390_EXIT("cmpfail"))          \
			"cg %[expect], 0(%[v])\n\t"                            \
			"jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)               \
			"stg %[newv2], 0(%[v2])\n\t" RSK_INJECT_ASM(4)         \
			"stg %[newv], 0(%[v])\n"                               \
			"2:\n\t" RSK_S390_ABORT                                \
			: [tmp] "=&a"(tmp)RSK_S390_INJECT_OUT                  \
			: [area] "a"(area), [idx] "d"(idx), [v] "a"(v),        \
			  [expect] "d"(expect), [v2] "a"(v2),                  \
			  [newv2] "d"(newv2),                                  \
			  [newv] "d"(newv)RSK_S390_GATE_IN RSK_S390_INJECT_IN  \
			: RSK_S390_CLOBBER                                     \
			: cmpfail, aborted, stopped);                          \
		RSK_S390_TAIL_CMP                                              \
	}

#define RSK_S390_OP_CMPCOPYSTORE(OP, X, OFF)                                   \
	RSK_S390_FN RSK_ARCH_FN(OP, X)(                                      \
		struct rsk_abi_area *area, int idx, intptr_t *v,               \
		intptr_t expect, intptr_t *dst, const intptr_t *src,           \
		intptr_t nwords, intptr_t newv RSK_GATE_PARAM)            \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_S390_INJECT_DECL                                           \
		__asm__ __volatile__ goto(                                     \
			RSK_S390_ENTER(OFF, RSK_S390_EXIT("cmpfail"))          \
			"cg %[expect], 0(%[v])\n\t"                            \
			"jgne %l[cmpfail]\n\t" RSK_INJECT_ASM(3)               \
			RSK_S390_COPY RSK_INJECT_ASM(4)                        \
			"stg %[newv], 0(%[v])\n"                               \
			"2:\n\t" RSK_S390_ABORT                                \
			: [tmp] "=&a"(tmp), [src] "+&a"(src), [dst] "+&a"(dst), \
			  [n] "+&d"(nwords)RSK_S390_INJECT_OUT                 \
			: [area] "a"(area), [idx] "d"(idx), [v] "a"(v),        \
			  [expect] "d"(expect),                                \
			  [newv] "d"(newv)RSK_S390_GATE_IN RSK_S390_INJECT_IN  \
			: RSK_S390_CLOBBER                                     \
			: cmpfail, aborted, stopped);                          \
		RSK_S390_TAIL_CMP                                              \
	}

#define RSK_S390_OP_ADD(OP, X, OFF)                                            \
	RSK_S390_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,   \
					 intptr_t *v,                          \
					 intptr_t count RSK_GATE_PARAM)   \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_S390_INJECT_DECL                                           \
		__asm__ __volatile__ goto(                                     \
			RSK_S390_ENTER(OFF, "")                                \
			"lg %[tmp], 0(%[v])\n\t"                               \
			"agr %[tmp], %[count]\n\t" RSK_INJECT_ASM(3)           \
			"stg %[tmp], 0(%[v])\n"                                \
			"2:\n\t" RSK_S390_ABORT                                \
			: [tmp] "=&a"(tmp)RSK_S390_INJECT_OUT                  \
			: [area] "a"(area), [idx] "d"(idx), [v] "a"(v),        \
			  [count] "d"(count)RSK_S390_GATE_IN RSK_S390_INJECT_IN \
			: RSK_S390_CLOBBER                                     \
			: aborted, stopped);                                   \
		RSK_S390_TAIL                                                  \
	}

#define RSK_S390_OP_POP(OP, X, OFF)                                            \
	RSK_S390_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,   \
					 intptr_t *v, intptr_t expectnot,      \
					 intptr_t offset,                      \
					 intptr_t *out RSK_GATE_PARAM)    \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_S390_INJECT_DECL                                           \
		__asm__ __volatile__ goto(                                     \
			RSK_S390_ENTER(OFF, RSK_S390_EXIT("cmpfail"))          \
			"lg %[tmp], 0(%[v])\n\t"                               \
			"cgr %[tmp], %[expectnot]\n\t"                         \
			"jge %l[cmpfail]\n\t" /* brcl if equal */             \
			"stg %[tmp], 0(%[out])\n\t" RSK_INJECT_ASM(3)          \
			"lg %[tmp], 0(%[offset], %[tmp])\n\t"                  \
			"stg %[tmp], 0(%[v])\n"                                \
			"2:\n\t" RSK_S390_ABORT                                \
			: [tmp] "=&a"(tmp)RSK_S390_INJECT_OUT                  \
			: [area] "a"(area), [idx] "d"(idx), [v] "a"(v),        \
			  [expectnot] "d"(expectnot), [offset] "a"(offset),    \
			  [out] "a"(out)RSK_S390_GATE_IN RSK_S390_INJECT_IN    \
			: RSK_S390_CLOBBER                                     \
			: cmpfail, aborted, stopped);                          \
		RSK_S390_TAIL_CMP                                              \
	}

#define RSK_S390_OP_DEREFADD(OP, X, OFF)                                       \
	RSK_S390_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,   \
					 intptr_t *const *ptr, intptr_t off,   \
					 intptr_t inc RSK_GATE_PARAM)     \
	{                                                                      \
		intptr_t tmp, tmp2;                                            \
		RSK_S390_INJECT_DECL                                           \
		__asm__ __volatile__ goto(                                     \
			RSK_S390_ENTER(OFF, "")                                \
			"lg %[tmp], 0(%[ptr])\n\t"                             \
			"lg %[tmp2], 0(%[off], %[tmp])\n\t"                    \
			"agr %[tmp2], %[inc]\n\t" RSK_INJECT_ASM(3)            \
			"stg %[tmp2], 0(%[off], %[tmp])\n"                     \
			"2:\n\t" RSK_S390_ABORT                                \
			: [tmp] "=&a"(tmp), [tmp2] "=&d"(tmp2)RSK_S390_INJECT_OUT \
			: [area] "a"(area), [idx] "d"(idx), [ptr] "a"(ptr),    \
			  [off] "a"(off),                                      \
			  [inc] "d"(inc)RSK_S390_GATE_IN RSK_S390_INJECT_IN    \
			: RSK_S390_CLOBBER                                     \
			: aborted, stopped);                                   \
		RSK_S390_TAIL                                                  \
	}

/*
 * One set of operations per index field.  X names the variant (cpu, cid),
 * OFF is the field's byte offset in struct rsk_abi_area as a string.  The
 * _release variants share the relaxed bodies (see the ordering note at
 * the top).
 */
#define RSK_ARCH_DEFINE_OPS(X, OFF)                                            \
	RSK_S390_OP_CMPSTORE(cmpstore, X, OFF)                                 \
	RSK_S390_OP_CMPSTORE(cmpstore_release, X, OFF)                         \
	RSK_S390_OP_CMPCMPSTORE(cmpcmpstore, X, OFF)                           \
	RSK_S390_OP_CMPSTORESTORE(cmpstorestore, X, OFF)                       \
	RSK_S390_OP_CMPSTORESTORE(cmpstorestore_release, X, OFF)               \
	RSK_S390_OP_CMPCOPYSTORE(cmpcopystore, X, OFF)                         \
	RSK_S390_OP_CMPCOPYSTORE(cmpcopystore_release, X, OFF)                 \
	RSK_S390_OP_ADD(add, X, OFF)                                           \
	RSK_S390_OP_POP(pop, X, OFF)                                           \
	RSK_S390_OP_DEREFADD(derefadd, X, OFF)

/*
 * Each operation exists twice: plain (rsk_arch_<op>_<X>) and gated
 * (rsk_arch_gated_<op>_<X>, one more argument `gate`).  A gated section
 * loads *gate after arming and leaves through `stopped` (return 2) unless
 * it is 0 (see <rseqkit/progress.h>).
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
#define RSK_S390_GATE_ASM RSK_GATED(                                          \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                    \
	".balign 8\n\t"                                                       \
	".quad 1b, %l[stopped]\n\t"                                           \
	".popsection\n\t"                                                     \
	"cghsi 0(%[gate]), 0\n\t"                                             \
	"jgne %l[stopped]\n\t")
#define RSK_S390_GATE_IN RSK_GATED(, [gate] "a"(gate))
