/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/riscv.h - restartable sequences for RV64 (riscv64).
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
 * Conditional branches reach +-4 KiB (the assembler relaxes a too-far one
 * within a section, never across sections), so every early exit (compare
 * failed, wrong index, closed gate) branches to its C label in the same
 * function; all of them are listed in __rseq_exit_point_array.  The abort
 * stub reaches its C label with auipc + jalr (+-2 GiB) through the
 * section's scratch register, which is dead on that path.
 *
 * Linker relaxation: label differences (post_commit_offset) are emitted as
 * ADD/SUB relocation pairs, so relaxing the section's code is harmless.
 * The abort stubs are assembled with norelax and 4-byte aligned: each is
 * the signature word and two 4-byte instructions, so every signature stays
 * 4-byte aligned and every abort_ip decodable, whatever the linker does
 * elsewhere.
 *
 * Memory ordering: RVWMO is weak.  The relaxed operations order nothing
 * beyond their own dependencies; the _release variants execute
 * `fence rw, w` just before the commit store, which orders every earlier
 * load and store of the thread (the section's speculative stores included)
 * before it: a store-release.  The gated twins load the gate with acquire
 * ordering (ld; fence r, rw; see below).
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

static inline __attribute__((always_inline)) void *rsk_arch_thread_pointer(void)
{
	void *tp;
	/* The tp register; glibc's __rseq_offset is relative to it. */
	__asm__("mv %0, tp" : "=r"(tp));
	return tp;
}

/* Arming: the descriptor's pc-relative address (auipc + addi), right in
 * executables, PIEs and shared objects alike. */
#define RSK_RV_ARM                                                             \
	"lla %[tmp], 3b\n\t"                                                   \
	"sd %[tmp], 8(%[area])\n"

#ifdef RSEQKIT_NEGATIVE_CONTROL
/* Test builds only: never arm the descriptor, so the kernel never restarts
 * a section - the negative control that shows the tests detect loss. */
#undef RSK_RV_ARM
#define RSK_RV_ARM "\n"
#endif

/* An early exit: a (start, exit) pair for debuggers. */
#define RSK_RV_EXIT(label)                                                     \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                     \
	".balign 8\n\t"                                                        \
	".8byte 1f, %l[" label "]\n\t"                                         \
	".popsection\n\t"

/* The descriptor, its entry in the pointer array, and the wrong-index exit
 * (see RSK_RV_CHECK_INDEX). */
#define RSK_RV_DESCRIBE                                                        \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n"                                                         \
	"3:\n\t"                                                               \
	".4byte 0, 0\n\t"                                                      \
	".8byte 1f, (2f - 1f), 4f\n\t"                                         \
	".popsection\n\t"                                                      \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"                         \
	".balign 8\n\t"                                                        \
	".8byte 3b\n\t"                                                        \
	".popsection\n\t" RSK_RV_EXIT("aborted")

/* The signature (a little-endian u32, as the kernel reads it), then
 * abort_ip: leave for the C abort label. */
#define RSK_RV_ABORT                                                           \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	".option push\n\t"                                                     \
	".option norelax\n\t"                                                  \
	".balign 4\n\t"                                                        \
	".4byte 0xf1401073\n"                                                  \
	"4:\n\t"                                                               \
	"auipc %[tmp], %%pcrel_hi(%l[aborted])\n\t"                            \
	"jalr zero, %%pcrel_lo(4b)(%[tmp])\n\t"                                \
	".option pop\n\t"                                                      \
	".popsection\n\t"

/* Leave as aborted unless the area still holds the index the caller used.
 * subw compares the low 32 bits whatever the upper bits of idx are. */
#define RSK_RV_CHECK_INDEX(off)                                                \
	"lw %[tmp], " off "(%[area])\n\t"                                      \
	"subw %[tmp], %[tmp], %[idx]\n\t"                                      \
	"bnez %[tmp], %l[aborted]\n\t"

/* What the _release variants put just before the commit store. */
#define RSK_RV_RELEASE "fence rw, w\n\t"

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
#define RSK_RV_INJECT_DECL intptr_t rsk_cnt;
#define RSK_RV_INJECT_OUT  , [cnt] "=&r"(rsk_cnt)
#define RSK_RV_INJECT_IN   , [inj] "r"(rsk_inject_loops)
#else
#define RSK_INJECT_ASM(n) ""
#define RSK_RV_INJECT_DECL
#define RSK_RV_INJECT_OUT
#define RSK_RV_INJECT_IN
#endif

/* The copy of cmpcopystore: whole doublewords, first to last. */
#define RSK_RV_COPY                                                            \
	"beqz %[n], 6f\n"                                                      \
	"7:\n\t"                                                               \
	"ld %[tmp], 0(%[src])\n\t"                                             \
	"sd %[tmp], 0(%[dst])\n\t"                                             \
	"addi %[src], %[src], 8\n\t"                                           \
	"addi %[dst], %[dst], 8\n\t"                                           \
	"addi %[n], %[n], -1\n\t"                                              \
	"bnez %[n], 7b\n"                                                      \
	"6:\n\t"

#define RSK_RV_FN      static inline __attribute__((always_inline)) int
#define RSK_RV_CLOBBER "memory"
#define RSK_RV_TAIL_CMP                                                        \
	return 0;                                                              \
	cmpfail:                                                               \
	return 1;                                                              \
	aborted:                                                               \
	return -1;                                                             \
	stopped:                                                               \
	return 2;
#define RSK_RV_TAIL                                                            \
	return 0;                                                              \
	aborted:                                                               \
	return -1;                                                             \
	stopped:                                                               \
	return 2;

/* The part every section starts with: describe, arm, re-check, gate. */
#define RSK_RV_ENTER(off, exits)                                               \
	RSK_RV_DESCRIBE exits RSK_RV_ARM "1:\n\t" RSK_INJECT_ASM(1)            \
		RSK_RV_CHECK_INDEX(off) RSK_RV_GATE_ASM RSK_INJECT_ASM(2)

#define RSK_RV_OP_CMPSTORE(OP, X, OFF, FENCE)                                  \
	RSK_RV_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,       \
				     intptr_t *v, intptr_t expect,             \
				     intptr_t newv RSK_GATE_PARAM)          \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_RV_INJECT_DECL                                             \
		__asm__ __volatile__ goto(                                     \
			RSK_RV_ENTER(OFF, RSK_RV_EXIT("cmpfail"))              \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"bne %[tmp], %[expect], %l[cmpfail]\n\t"               \
			RSK_INJECT_ASM(3) FENCE                                \
			"sd %[newv], 0(%[v])\n"                                \
			"2:\n\t" RSK_RV_ABORT                                  \
			: [tmp] "=&r"(tmp)RSK_RV_INJECT_OUT                    \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),        \
			  [expect] "r"(expect),                                \
			  [newv] "r"(newv)RSK_RV_GATE_IN RSK_RV_INJECT_IN      \
			: RSK_RV_CLOBBER                                       \
			: cmpfail, aborted, stopped);                          \
		RSK_RV_TAIL_CMP                                                \
	}

#define RSK_RV_OP_CMPCMPSTORE(OP, X, OFF)                                      \
	RSK_RV_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,       \
				     intptr_t *v, intptr_t expect,             \
				     intptr_t *v2, intptr_t expect2,           \
				     intptr_t newv RSK_GATE_PARAM)          \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_RV_INJECT_DECL                                             \
		__asm__ __volatile__ goto(                                     \
			RSK_RV_ENTER(OFF, RSK_RV_EXIT("cmpfail"))              \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"bne %[tmp], %[expect], %l[cmpfail]\n\t"               \
			RSK_INJECT_ASM(3)                                      \
			"ld %[tmp], 0(%[v2])\n\t"                              \
			"bne %[tmp], %[expect2], %l[cmpfail]\n\t"              \
			RSK_INJECT_ASM(4)                                      \
			"sd %[newv], 0(%[v])\n"                                \
			"2:\n\t" RSK_RV_ABORT                                  \
			: [tmp] "=&r"(tmp)RSK_RV_INJECT_OUT                    \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),        \
			  [expect] "r"(expect), [v2] "r"(v2),                  \
			  [expect2] "r"(expect2),                              \
			  [newv] "r"(newv)RSK_RV_GATE_IN RSK_RV_INJECT_IN      \
			: RSK_RV_CLOBBER                                       \
			: cmpfail, aborted, stopped);                          \
		RSK_RV_TAIL_CMP                                                \
	}

#define RSK_RV_OP_CMPSTORESTORE(OP, X, OFF, FENCE)                             \
	RSK_RV_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,       \
				     intptr_t *v, intptr_t expect,             \
				     intptr_t *v2, intptr_t newv2,             \
				     intptr_t newv RSK_GATE_PARAM)          \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_RV_INJECT_DECL                                             \
		__asm__ __volatile__ goto(                                     \
			RSK_RV_ENTER(OFF, RSK_RV_EXIT("cmpfail"))              \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"bne %[tmp], %[expect], %l[cmpfail]\n\t"               \
			RSK_INJECT_ASM(3)                                      \
			"sd %[newv2], 0(%[v2])\n\t" RSK_INJECT_ASM(4) FENCE    \
			"sd %[newv], 0(%[v])\n"                                \
			"2:\n\t" RSK_RV_ABORT                                  \
			: [tmp] "=&r"(tmp)RSK_RV_INJECT_OUT                    \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),        \
			  [expect] "r"(expect), [v2] "r"(v2),                  \
			  [newv2] "r"(newv2),                                  \
			  [newv] "r"(newv)RSK_RV_GATE_IN RSK_RV_INJECT_IN      \
			: RSK_RV_CLOBBER                                       \
			: cmpfail, aborted, stopped);                          \
		RSK_RV_TAIL_CMP                                                \
	}

#define RSK_RV_OP_CMPCOPYSTORE(OP, X, OFF, FENCE)                              \
	RSK_RV_FN RSK_ARCH_FN(OP, X)(                                          \
		struct rsk_abi_area *area, int idx, intptr_t *v,               \
		intptr_t expect, intptr_t *dst, const intptr_t *src,           \
		intptr_t nwords, intptr_t newv RSK_GATE_PARAM)              \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_RV_INJECT_DECL                                             \
		__asm__ __volatile__ goto(                                     \
			RSK_RV_ENTER(OFF, RSK_RV_EXIT("cmpfail"))              \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"bne %[tmp], %[expect], %l[cmpfail]\n\t"               \
			RSK_INJECT_ASM(3) RSK_RV_COPY RSK_INJECT_ASM(4) FENCE  \
			"sd %[newv], 0(%[v])\n"                                \
			"2:\n\t" RSK_RV_ABORT                                  \
			: [tmp] "=&r"(tmp), [src] "+&r"(src), [dst] "+&r"(dst), \
			  [n] "+&r"(nwords)RSK_RV_INJECT_OUT                   \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),        \
			  [expect] "r"(expect),                                \
			  [newv] "r"(newv)RSK_RV_GATE_IN RSK_RV_INJECT_IN      \
			: RSK_RV_CLOBBER                                       \
			: cmpfail, aborted, stopped);                          \
		RSK_RV_TAIL_CMP                                                \
	}

#define RSK_RV_OP_ADD(OP, X, OFF)                                              \
	RSK_RV_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,       \
				     intptr_t *v,                              \
				     intptr_t count RSK_GATE_PARAM)         \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_RV_INJECT_DECL                                             \
		__asm__ __volatile__ goto(                                     \
			RSK_RV_ENTER(OFF, "")                                  \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"add %[tmp], %[tmp], %[count]\n\t" RSK_INJECT_ASM(3)   \
			"sd %[tmp], 0(%[v])\n"                                 \
			"2:\n\t" RSK_RV_ABORT                                  \
			: [tmp] "=&r"(tmp)RSK_RV_INJECT_OUT                    \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),        \
			  [count] "r"(count)RSK_RV_GATE_IN RSK_RV_INJECT_IN    \
			: RSK_RV_CLOBBER                                       \
			: aborted, stopped);                                   \
		RSK_RV_TAIL                                                    \
	}

#define RSK_RV_OP_POP(OP, X, OFF)                                              \
	RSK_RV_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,       \
				     intptr_t *v, intptr_t expectnot,          \
				     intptr_t offset,                          \
				     intptr_t *out RSK_GATE_PARAM)          \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_RV_INJECT_DECL                                             \
		__asm__ __volatile__ goto(                                     \
			RSK_RV_ENTER(OFF, RSK_RV_EXIT("cmpfail"))              \
			"ld %[tmp], 0(%[v])\n\t"                               \
			"beq %[tmp], %[expectnot], %l[cmpfail]\n\t"            \
			"sd %[tmp], 0(%[out])\n\t" RSK_INJECT_ASM(3)           \
			"add %[tmp], %[tmp], %[offset]\n\t"                    \
			"ld %[tmp], 0(%[tmp])\n\t"                             \
			"sd %[tmp], 0(%[v])\n"                                 \
			"2:\n\t" RSK_RV_ABORT                                  \
			: [tmp] "=&r"(tmp)RSK_RV_INJECT_OUT                    \
			: [area] "r"(area), [idx] "r"(idx), [v] "r"(v),        \
			  [expectnot] "r"(expectnot), [offset] "r"(offset),    \
			  [out] "r"(out)RSK_RV_GATE_IN RSK_RV_INJECT_IN        \
			: RSK_RV_CLOBBER                                       \
			: cmpfail, aborted, stopped);                          \
		RSK_RV_TAIL_CMP                                                \
	}

#define RSK_RV_OP_DEREFADD(OP, X, OFF)                                         \
	RSK_RV_FN RSK_ARCH_FN(OP, X)(struct rsk_abi_area *area, int idx,       \
				     intptr_t *const *ptr, intptr_t off,       \
				     intptr_t inc RSK_GATE_PARAM)           \
	{                                                                      \
		intptr_t tmp, tmp2;                                            \
		RSK_RV_INJECT_DECL                                             \
		__asm__ __volatile__ goto(                                     \
			RSK_RV_ENTER(OFF, "")                                  \
			"ld %[tmp], 0(%[ptr])\n\t"                             \
			"add %[tmp], %[tmp], %[off]\n\t"                       \
			"ld %[tmp2], 0(%[tmp])\n\t"                            \
			"add %[tmp2], %[tmp2], %[inc]\n\t" RSK_INJECT_ASM(3)   \
			"sd %[tmp2], 0(%[tmp])\n"                              \
			"2:\n\t" RSK_RV_ABORT                                  \
			: [tmp] "=&r"(tmp), [tmp2] "=&r"(tmp2)RSK_RV_INJECT_OUT \
			: [area] "r"(area), [idx] "r"(idx), [ptr] "r"(ptr),    \
			  [off] "r"(off),                                      \
			  [inc] "r"(inc)RSK_RV_GATE_IN RSK_RV_INJECT_IN        \
			: RSK_RV_CLOBBER                                       \
			: aborted, stopped);                                   \
		RSK_RV_TAIL                                                    \
	}

/*
 * One set of operations per index field.  X names the variant (cpu, cid),
 * OFF is the field's byte offset in struct rsk_abi_area as a string.
 */
#define RSK_ARCH_DEFINE_OPS(X, OFF)                                              \
	RSK_RV_OP_CMPSTORE(cmpstore, X, OFF, "")                               \
	RSK_RV_OP_CMPSTORE(cmpstore_release, X, OFF, RSK_RV_RELEASE)           \
	RSK_RV_OP_CMPCMPSTORE(cmpcmpstore, X, OFF)                             \
	RSK_RV_OP_CMPSTORESTORE(cmpstorestore, X, OFF, "")                     \
	RSK_RV_OP_CMPSTORESTORE(cmpstorestore_release, X, OFF, RSK_RV_RELEASE) \
	RSK_RV_OP_CMPCOPYSTORE(cmpcopystore, X, OFF, "")                       \
	RSK_RV_OP_CMPCOPYSTORE(cmpcopystore_release, X, OFF, RSK_RV_RELEASE)   \
	RSK_RV_OP_ADD(add, X, OFF)                                             \
	RSK_RV_OP_POP(pop, X, OFF)                                             \
	RSK_RV_OP_DEREFADD(derefadd, X, OFF)

/*
 * Each operation exists twice: plain (rsk_arch_<op>_<X>) and gated
 * (rsk_arch_gated_<op>_<X>, one more argument `gate`).  A gated section
 * loads *gate after arming and leaves through `stopped` (return 2) unless
 * it is 0 (see <rseqkit/progress.h>).
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
#define RSK_RV_GATE_ASM RSK_GATED(                                            \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                    \
	".balign 8\n\t"                                                       \
	".8byte 1b, %l[stopped]\n\t"                                          \
	".popsection\n\t"                                                     \
	"ld %[tmp], 0(%[gate])\n\t"                                           \
	"fence r, rw\n\t"                                                     \
	"bnez %[tmp], %l[stopped]\n\t")
#define RSK_RV_GATE_IN RSK_GATED(, [gate] "r"(gate))
