/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/ppc.h - restartable sequences for 64-bit PowerPC
 * (ppc64le, ELFv2; and big-endian ppc64, ELFv1 or ELFv2).
 *
 * Implements the contract written in <rseqkit/arch.h>.
 *
 * Layout of one section (labels are local to each asm statement):
 *   1:  start_ip  - first instruction after arming rseq_cs
 *   2:  end of the commit store (post_commit_offset = 2b - 1b)
 *   3:  the struct rseq_cs descriptor, in __rseq_cs
 *   4:  abort_ip, in __rseq_failure, right after the signature
 *   5:  the program counter, to find the descriptor (see RSK_PPC_ARM)
 *   6, 7: copy loop; 8, 9: injected delay loop
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
 * with acquire ordering (ld; cmpdi; bne-; isync; see below).
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

static inline __attribute__((always_inline)) void *rsk_arch_thread_pointer(void)
{
	void *tp;
	/* The 64-bit ABIs keep the thread pointer in r13 (TCB end + 0x7000);
	 * glibc's __rseq_offset is relative to it.  gcc 12 has no
	 * __builtin_thread_pointer for ppc64, so read the register. */
	__asm__("mr %0, 13" : "=r"(tp));
	return tp;
}

/*
 * Arming: the descriptor's address, computed from the program counter so
 * that the same code is right in executables, PIEs and shared objects
 * without text relocations and without relying on r2 (an inlined section
 * may sit in a function that never set up its TOC pointer).  `bcl 20,31`
 * to the next instruction is the form the branch predictor does not push
 * on its return stack.  All of this runs before start_ip.
 */
#define RSK_PPC_ARM                                                            \
	"bcl 20, 31, 5f\n"                                                     \
	"5:\n\t"                                                               \
	"mflr %[tmp]\n\t"                                                      \
	"addis %[tmp], %[tmp], (3b - 5b)@ha\n\t"                               \
	"addi %[tmp], %[tmp], (3b - 5b)@l\n\t"                                 \
	"std %[tmp], 8(%[area])\n"

#ifdef RSEQKIT_NEGATIVE_CONTROL
/* Test builds only: never arm the descriptor, so the kernel never restarts
 * a section - the negative control that shows the tests detect loss. */
#undef RSK_PPC_ARM
#define RSK_PPC_ARM "\n"
#endif

/* An early exit: a (start, exit) pair for debuggers. */
#define RSK_PPC_EXIT(label)                                                    \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                     \
	".balign 8\n\t"                                                        \
	".quad 1f, %l[" label "]\n\t"                                          \
	".popsection\n\t"

/* The descriptor, its entry in the pointer array, and the wrong-index exit
 * (see RSK_PPC_CHECK_INDEX). */
#define RSK_PPC_DESCRIBE                                                       \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n"                                                         \
	"3:\n\t"                                                               \
	".long 0, 0\n\t"                                                       \
	".quad 1f, (2f - 1f), 4f\n\t"                                          \
	".popsection\n\t"                                                      \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"                         \
	".balign 8\n\t"                                                        \
	".quad 3b\n\t"                                                         \
	".popsection\n\t" RSK_PPC_EXIT("aborted")

/* The signature (a u32 in the CPU's byte order, as the kernel reads it),
 * then abort_ip: leave for the C abort label. */
#define RSK_PPC_ABORT                                                          \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	".balign 4\n\t"                                                        \
	".long 0x0fe5000b\n"                                                   \
	"4:\n\t"                                                               \
	"b %l[aborted]\n\t"                                                    \
	".popsection\n\t"

/* Leave as aborted unless the area still holds the index the caller used
 * (a 32-bit load and compare: right in either byte order). */
#define RSK_PPC_CHECK_INDEX(off)                                               \
	"lwz %[tmp], " off "(%[area])\n\t"                                     \
	"cmpw %[tmp], %[idx]\n\t"                                              \
	"bne- %l[aborted]\n\t"

/* What the _release variants put just before the commit store. */
#define RSK_PPC_RELEASE "lwsync\n\t"

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
#define RSK_PPC_INJECT_DECL intptr_t rsk_cnt;
#define RSK_PPC_INJECT_OUT  , [cnt] "=&b"(rsk_cnt)
#define RSK_PPC_INJECT_IN   , [inj] "b"(rsk_inject_loops)
#else
#define RSK_INJECT_ASM(n) ""
#define RSK_PPC_INJECT_DECL
#define RSK_PPC_INJECT_OUT
#define RSK_PPC_INJECT_IN
#endif

/* The copy of cmpcopystore: whole doublewords, first to last, counted
 * in CTR. */
#define RSK_PPC_COPY                                                           \
	"cmpdi %[n], 0\n\t"                                                    \
	"beq 6f\n\t"                                                           \
	"mtctr %[n]\n"                                                         \
	"7:\n\t"                                                               \
	"ld %[tmp], 0(%[src])\n\t"                                             \
	"std %[tmp], 0(%[dst])\n\t"                                            \
	"addi %[src], %[src], 8\n\t"                                           \
	"addi %[dst], %[dst], 8\n\t"                                           \
	"bdnz 7b\n"                                                            \
	"6:\n\t"

#define RSK_PPC_FN	static inline __attribute__((always_inline)) int
#define RSK_PPC_CLOBBER "memory", "cc", "cr0", "lr"
#define RSK_PPC_TAIL_CMP                                                       \
	return 0;                                                              \
	cmpfail:                                                               \
	return 1;                                                              \
	aborted:                                                               \
	return -1;                                                             \
	stopped:                                                               \
	return 2;
#define RSK_PPC_TAIL                                                           \
	return 0;                                                              \
	aborted:                                                               \
	return -1;                                                             \
	stopped:                                                               \
	return 2;

/* The part every section starts with: describe, arm, re-check, gate. */
#define RSK_PPC_ENTER(off, exits)                                              \
	RSK_PPC_DESCRIBE exits RSK_PPC_ARM "1:\n\t" RSK_INJECT_ASM(1)          \
		RSK_PPC_CHECK_INDEX(off) RSK_PPC_GATE_ASM RSK_INJECT_ASM(2)

#define RSK_PPC_OP_CMPSTORE(OP, X, OFF, FENCE)                                 \
	RSK_PPC_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,     \
				       intptr_t *v, intptr_t expect,           \
				       intptr_t newv RSK_GATE_PARAM)       \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_PPC_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_PPC_ENTER(OFF, RSK_PPC_EXIT("cmpfail"))            \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"cmpd %[tmp], %[expect]\n\t"                           \
			"bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(3) FENCE         \
			"std %[newv], 0(%[v])\n"                               \
			"2:\n\t" RSK_PPC_ABORT                                 \
			: [tmp] "=&b"(tmp)RSK_PPC_INJECT_OUT                   \
			: [area] "b"(area), [idx] "r"(idx), [v] "b"(v),        \
			  [expect] "r"(expect),                                \
			  [newv] "r"(newv)RSK_PPC_GATE_IN RSK_PPC_INJECT_IN    \
			: RSK_PPC_CLOBBER                                      \
			: cmpfail, aborted, stopped);                          \
		RSK_PPC_TAIL_CMP                                               \
	}

#define RSK_PPC_OP_CMPCMPSTORE(OP, X, OFF)                                     \
	RSK_PPC_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,     \
				       intptr_t *v, intptr_t expect,           \
				       intptr_t *v2, intptr_t expect2,         \
				       intptr_t newv RSK_GATE_PARAM)       \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_PPC_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_PPC_ENTER(OFF, RSK_PPC_EXIT("cmpfail"))            \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"cmpd %[tmp], %[expect]\n\t"                           \
			"bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(3)               \
			"ld %[tmp], 0(%[v2])\n\t"                              \
			"cmpd %[tmp], %[expect2]\n\t"                          \
			"bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(4)               \
			"std %[newv], 0(%[v])\n"                               \
			"2:\n\t" RSK_PPC_ABORT                                 \
			: [tmp] "=&b"(tmp)RSK_PPC_INJECT_OUT                   \
			: [area] "b"(area), [idx] "r"(idx), [v] "b"(v),        \
			  [expect] "r"(expect), [v2] "b"(v2),                  \
			  [expect2] "r"(expect2),                              \
			  [newv] "r"(newv)RSK_PPC_GATE_IN RSK_PPC_INJECT_IN    \
			: RSK_PPC_CLOBBER                                      \
			: cmpfail, aborted, stopped);                          \
		RSK_PPC_TAIL_CMP                                               \
	}

#define RSK_PPC_OP_CMPSTORESTORE(OP, X, OFF, FENCE)                            \
	RSK_PPC_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,     \
				       intptr_t *v, intptr_t expect,           \
				       intptr_t *v2, intptr_t newv2,           \
				       intptr_t newv RSK_GATE_PARAM)       \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_PPC_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_PPC_ENTER(OFF, RSK_PPC_EXIT("cmpfail"))            \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"cmpd %[tmp], %[expect]\n\t"                           \
			"bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(3)               \
			"std %[newv2], 0(%[v2])\n\t" RSK_INJECT_ASM(4) FENCE   \
			"std %[newv], 0(%[v])\n"                               \
			"2:\n\t" RSK_PPC_ABORT                                 \
			: [tmp] "=&b"(tmp)RSK_PPC_INJECT_OUT                   \
			: [area] "b"(area), [idx] "r"(idx), [v] "b"(v),        \
			  [expect] "r"(expect), [v2] "b"(v2),                  \
			  [newv2] "r"(newv2),                                  \
			  [newv] "r"(newv)RSK_PPC_GATE_IN RSK_PPC_INJECT_IN    \
			: RSK_PPC_CLOBBER                                      \
			: cmpfail, aborted, stopped);                          \
		RSK_PPC_TAIL_CMP                                               \
	}

#define RSK_PPC_OP_CMPCOPYSTORE(OP, X, OFF, FENCE)                             \
	RSK_PPC_FN RSK_ARCH_FN(OP, X)(                                        \
		struct rsk_abi_area *area, int idx, intptr_t *v,               \
		intptr_t expect, intptr_t *dst, const intptr_t *src,           \
		intptr_t nwords, intptr_t newv RSK_GATE_PARAM)             \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_PPC_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_PPC_ENTER(OFF, RSK_PPC_EXIT("cmpfail"))            \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"cmpd %[tmp], %[expect]\n\t"                           \
			"bne- %l[cmpfail]\n\t" RSK_INJECT_ASM(3)               \
			RSK_PPC_COPY RSK_INJECT_ASM(4) FENCE                   \
			"std %[newv], 0(%[v])\n"                               \
			"2:\n\t" RSK_PPC_ABORT                                 \
			: [tmp] "=&b"(tmp), [src] "+&b"(src),                  \
			  [dst] "+&b"(dst)RSK_PPC_INJECT_OUT                   \
			: [area] "b"(area), [idx] "r"(idx), [v] "b"(v),        \
			  [expect] "r"(expect), [n] "r"(nwords),               \
			  [newv] "r"(newv)RSK_PPC_GATE_IN RSK_PPC_INJECT_IN    \
			: RSK_PPC_CLOBBER, "ctr"                               \
			: cmpfail, aborted, stopped);                          \
		RSK_PPC_TAIL_CMP                                               \
	}

#define RSK_PPC_OP_ADD(OP, X, OFF)                                             \
	RSK_PPC_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,     \
				       intptr_t *v,                            \
				       intptr_t count RSK_GATE_PARAM)      \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_PPC_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_PPC_ENTER(OFF, "")                                 \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"add %[tmp], %[tmp], %[count]\n\t" RSK_INJECT_ASM(3)   \
			"std %[tmp], 0(%[v])\n"                                \
			"2:\n\t" RSK_PPC_ABORT                                 \
			: [tmp] "=&b"(tmp)RSK_PPC_INJECT_OUT                   \
			: [area] "b"(area), [idx] "r"(idx), [v] "b"(v),        \
			  [count] "r"(count)RSK_PPC_GATE_IN RSK_PPC_INJECT_IN  \
			: RSK_PPC_CLOBBER                                      \
			: aborted, stopped);                                   \
		RSK_PPC_TAIL                                                   \
	}

#define RSK_PPC_OP_POP(OP, X, OFF)                                             \
	RSK_PPC_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,     \
				       intptr_t *v, intptr_t expectnot,        \
				       intptr_t offset,                        \
				       intptr_t *out RSK_GATE_PARAM)       \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_PPC_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_PPC_ENTER(OFF, RSK_PPC_EXIT("cmpfail"))            \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"cmpd %[tmp], %[expectnot]\n\t"                        \
			"beq- %l[cmpfail]\n\t"                                 \
			"std %[tmp], 0(%[out])\n\t" RSK_INJECT_ASM(3)          \
			"ldx %[tmp], %[tmp], %[offset]\n\t"                    \
			"std %[tmp], 0(%[v])\n"                                \
			"2:\n\t" RSK_PPC_ABORT                                 \
			: [tmp] "=&b"(tmp)RSK_PPC_INJECT_OUT                   \
			: [area] "b"(area), [idx] "r"(idx), [v] "b"(v),        \
			  [expectnot] "r"(expectnot), [offset] "r"(offset),    \
			  [out] "b"(out)RSK_PPC_GATE_IN RSK_PPC_INJECT_IN      \
			: RSK_PPC_CLOBBER                                      \
			: cmpfail, aborted, stopped);                          \
		RSK_PPC_TAIL_CMP                                               \
	}

#define RSK_PPC_OP_DEREFADD(OP, X, OFF)                                        \
	RSK_PPC_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,     \
				       intptr_t *const *ptr, intptr_t off,     \
				       intptr_t inc RSK_GATE_PARAM)        \
	{                                                                      \
		intptr_t tmp, tmp2;                                            \
		RSK_PPC_INJECT_DECL                                            \
		__asm__ __volatile__ goto(                                     \
			RSK_PPC_ENTER(OFF, "")                                 \
			"ld %[tmp], 0(%[ptr])\n\t"                             \
			"ldx %[tmp2], %[tmp], %[off]\n\t"                      \
			"add %[tmp2], %[tmp2], %[inc]\n\t" RSK_INJECT_ASM(3)   \
			"stdx %[tmp2], %[tmp], %[off]\n"                       \
			"2:\n\t" RSK_PPC_ABORT                                 \
			: [tmp] "=&b"(tmp),                                    \
			  [tmp2] "=&r"(tmp2)RSK_PPC_INJECT_OUT                 \
			: [area] "b"(area), [idx] "r"(idx), [ptr] "b"(ptr),    \
			  [off] "r"(off),                                      \
			  [inc] "r"(inc)RSK_PPC_GATE_IN RSK_PPC_INJECT_IN      \
			: RSK_PPC_CLOBBER                                      \
			: aborted, stopped);                                   \
		RSK_PPC_TAIL                                                   \
	}

/*
 * One set of operations per index field.  X names the variant (cpu, cid),
 * OFF is the field's byte offset in struct rsk_abi_area as a string.
 */
#define RSK_ARCH_DEFINE_OPS(X, OFF)                                             \
	RSK_PPC_OP_CMPSTORE(cmpstore, X, OFF, "")                              \
	RSK_PPC_OP_CMPSTORE(cmpstore_release, X, OFF, RSK_PPC_RELEASE)         \
	RSK_PPC_OP_CMPCMPSTORE(cmpcmpstore, X, OFF)                            \
	RSK_PPC_OP_CMPSTORESTORE(cmpstorestore, X, OFF, "")                    \
	RSK_PPC_OP_CMPSTORESTORE(cmpstorestore_release, X, OFF,                \
				 RSK_PPC_RELEASE)                              \
	RSK_PPC_OP_CMPCOPYSTORE(cmpcopystore, X, OFF, "")                      \
	RSK_PPC_OP_CMPCOPYSTORE(cmpcopystore_release, X, OFF, RSK_PPC_RELEASE) \
	RSK_PPC_OP_ADD(add, X, OFF)                                            \
	RSK_PPC_OP_POP(pop, X, OFF)                                            \
	RSK_PPC_OP_DEREFADD(derefadd, X, OFF)

/*
 * Each operation exists twice: plain (rsk_arch_<op>_<X>) and gated
 * (rsk_arch_gated_<op>_<X>, one more argument `gate`).  A gated section
 * loads *gate after arming and leaves through `stopped` (return 2) unless
 * it is 0 (see <rseqkit/progress.h>).
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
#define RSK_PPC_GATE_ASM RSK_GATED(                                           \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                    \
	".balign 8\n\t"                                                       \
	".quad 1b, %l[stopped]\n\t"                                           \
	".popsection\n\t"                                                     \
	"ld %[tmp], 0(%[gate])\n\t"                                           \
	"cmpdi %[tmp], 0\n\t"                                                 \
	"bne- %l[stopped]\n\t"                                                \
	"isync\n\t")
#define RSK_PPC_GATE_IN RSK_GATED(, [gate] "b"(gate))
