/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/x86.h - restartable sequences for x86-64 and i386.
 *
 * Implements the contract written in <rseqkit/arch.h>.  x86 is TSO: every
 * store is already a release store, so the _release_ variants are the
 * relaxed ones (the "memory" clobber keeps the compiler from sinking
 * earlier stores below the commit).
 *
 * Layout of one section (labels are local to each asm statement):
 *   1:  start_ip  - first instruction after arming rseq_cs
 *   2:  end of the commit store (post_commit_offset = 2b - 1b)
 *   3:  the struct rseq_cs descriptor, in __rseq_cs
 *   4:  abort_ip, in __rseq_failure, right after the signature
 *   5:  (i386 PIC) the program counter, to find the descriptor
 *   6, 7: copy loop; 8, 9: injected delay loop
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/x86.h"
#endif

#define RSK_ARCH_SIGNATURE 0x53053053

#ifdef __x86_64__
#define RSK_ARCH_NAME	 "x86_64"
#define RSK_ARCH_NR_RSEQ 334
#define RSK_X86_SFX	 "q"	/* operand-size suffix of a word */
#define RSK_X86_WORD	 "8"	/* bytes per word */
#define RSK_X86_U64(x)	 ".quad " x "\n\t"
#define RSK_X86_VAL	 "rme"	/* a word operand: reg, mem or imm32 */
#define RSK_X86_TP	 "movq %%fs:0, %0"
#define RSK_X86_ARM                                                            \
	"leaq 3b(%%rip), %[tmp]\n\t"                                           \
	"movq %[tmp], 8(%[area])\n"
#else
#define RSK_ARCH_NAME	 "i386"
#define RSK_ARCH_NR_RSEQ 386
#define RSK_X86_SFX	 "l"
#define RSK_X86_WORD	 "4"
#define RSK_X86_U64(x)	 ".long " x ", 0\n\t"
#define RSK_X86_VAL	 "rmi"
#define RSK_X86_TP	 "movl %%gs:0, %0"
#if defined(__PIC__)
/* No pc-relative addressing on i386: a call to the next instruction is the
 * one way to learn the pc without a GOT register.  It runs before the
 * section is armed, so the push it makes can never be restarted. */
#define RSK_X86_ARM                                                            \
	"call 5f\n"                                                            \
	"5:\n\t"                                                               \
	"popl %[tmp]\n\t"                                                      \
	"leal (3b - 5b)(%[tmp]), %[tmp]\n\t"                                   \
	"movl %[tmp], 8(%[area])\n"
#else
#define RSK_X86_ARM "movl $3b, 8(%[area])\n"
#endif
#endif

#ifdef RSEQKIT_NEGATIVE_CONTROL
/* Test builds only: never arm the descriptor, so the kernel never restarts
 * a section - the negative control that shows the tests detect loss. */
#undef RSK_X86_ARM
#define RSK_X86_ARM "\n"
#endif

static inline __attribute__((always_inline)) void *rsk_arch_thread_pointer(void)
{
	void *tp;
	/* glibc and musl both keep the TCB's self pointer at %fs:0 / %gs:0. */
	__asm__(RSK_X86_TP : "=r"(tp));
	return tp;
}

/* The descriptor and its entry in the pointer array. */
#define RSK_X86_DESCRIBE                                                       \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n"                                                         \
	"3:\n\t"                                                               \
	".long 0, 0\n\t" RSK_X86_U64("1f") RSK_X86_U64("(2f - 1f)")            \
		RSK_X86_U64("4f") ".popsection\n\t"                            \
				  ".pushsection __rseq_cs_ptr_array, \"aw\"\n\t" \
		RSK_X86_U64("3b") ".popsection\n\t"

/* An early exit (compare failed): a (start, exit) pair for debuggers. */
#define RSK_X86_EXIT(label)                                                    \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t" RSK_X86_U64("1f")   \
		RSK_X86_U64("%l[" label "]") ".popsection\n\t"

/* The signature, then abort_ip: leave for the C abort label. */
#define RSK_X86_ABORT                                                          \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	".byte 0x0f, 0xb9, 0x3d\n\t" /* ud1 ...: the signature is its disp32 */ \
	".long 0x53053053\n"                                                   \
	"4:\n\t"                                                               \
	"jmp %l[aborted]\n\t"                                                  \
	".popsection\n\t"

/* Leave as an abort unless the area still holds the index the caller used. */
#define RSK_X86_CHECK_INDEX(off)                                               \
	"movl " off "(%[area]), %k[tmp]\n\t"                                   \
	"cmpl %[idx], %k[tmp]\n\t"                                             \
	"jnz 4f\n\t"

#if RSK_INJECTING
/* The delay loop borrows tmp, parking its value in a stack slot (a plain
 * store: a push could be cut in half by an abort). */
#define RSK_INJECT_ASM(n)                                                      \
	"mov" RSK_X86_SFX " %[tmp], %[injspill]\n\t"                           \
	"movl %[inj" #n "], %k[tmp]\n\t"                                    \
	"testl %k[tmp], %k[tmp]\n\t"                                           \
	"jz 8f\n"                                                              \
	"9:\n\t"                                                               \
	"decl %k[tmp]\n\t"                                                     \
	"jnz 9b\n"                                                             \
	"8:\n\t"                                                               \
	"mov" RSK_X86_SFX " %[injspill], %[tmp]\n\t"
/*
 * The counts are copied to the stack before the section: as memory operands
 * they then cost no register.  Read in place, each would need the address
 * of rsk_inject_loops in one under -fpie (a GOT load, and at -O0 one per
 * operand), and the gated copy, which already holds six, had none left:
 * "impossible constraints", or cc1 searching for minutes.
 */
#define RSK_X86_INJECT_DECL                                                    \
	intptr_t rsk_injspill;                                                 \
	int rsk_inj[5];                                                        \
	__builtin_memcpy(rsk_inj, rsk_inject_loops, sizeof(rsk_inj));
#define RSK_X86_INJECT_OUT , [injspill] "=m"(rsk_injspill)
#define RSK_X86_INJECT_IN                                                      \
	, [inj1] "m"(rsk_inj[1]), [inj2] "m"(rsk_inj[2]), [inj3] "m"(rsk_inj[3]), \
		[inj4] "m"(rsk_inj[4])
#else
#define RSK_INJECT_ASM(n) ""
#define RSK_X86_INJECT_DECL
#define RSK_X86_INJECT_OUT
#define RSK_X86_INJECT_IN
#endif

#define RSK_X86_LOAD(src) "mov" RSK_X86_SFX " " src ", %[tmp]\n\t"
#define RSK_X86_STORE(dst) "mov" RSK_X86_SFX " %[tmp], " dst "\n\t"
#define RSK_X86_CMP(val) "cmp" RSK_X86_SFX " " val ", %[tmp]\n\t"

/*
 * The copy of cmpcopystore: whole words, last to first.  x86-64 indexes by
 * a counter register; i386 has too few registers for that next to the
 * section's own, so it walks the pointers and keeps the count in memory.
 */
#ifdef __x86_64__
#define RSK_X86_COPY                                                           \
	"testq %[n], %[n]\n\t"                                                 \
	"jz 6f\n"                                                              \
	"7:\n\t"                                                               \
	"movq -8(%[src], %[n], 8), %[tmp]\n\t"                                 \
	"movq %[tmp], -8(%[dst], %[n], 8)\n\t"                                 \
	"decq %[n]\n\t"                                                        \
	"jnz 7b\n"                                                             \
	"6:\n\t"
#define RSK_X86_COPY_OUT [n] "+&r"(nwords)
#define RSK_X86_COPY_IN	 , [dst] "r"(dst), [src] "r"(src)
#else
#define RSK_X86_COPY                                                           \
	"cmpl $0, %[n]\n\t"                                                    \
	"jz 6f\n"                                                              \
	"7:\n\t"                                                               \
	"movl (%[src]), %[tmp]\n\t"                                            \
	"movl %[tmp], (%[dst])\n\t"                                            \
	"addl $4, %[src]\n\t"                                                  \
	"addl $4, %[dst]\n\t"                                                  \
	"decl %[n]\n\t"                                                        \
	"jnz 7b\n"                                                             \
	"6:\n\t"
#define RSK_X86_COPY_OUT [n] "+m"(nwords), [src] "+&r"(src), [dst] "+&r"(dst)
#define RSK_X86_COPY_IN
#endif

#define RSK_X86_FN static inline __attribute__((always_inline)) int

/*
 * One set of operations per index field.  X names the variant (cpu, cid),
 * OFF is the field's byte offset in struct rsk_abi_area as a string.
 */
#define RSK_ARCH_DEFINE_OPS(X, OFF)                                             \
	RSK_X86_FN RSK_ARCH_FN(cmpstore, X)(struct rsk_abi_area *area, int idx,   \
					 intptr_t *v, intptr_t expect,         \
					 intptr_t newv RSK_GATE_PARAM)                        \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X86_INJECT_DECL                                            \
		__asm__ __volatile__ goto(RSK_X86_DESCRIBE RSK_X86_EXIT("cmpfail")          \
				     RSK_X86_ARM "1:\n\t" RSK_INJECT_ASM(1)    \
					     RSK_X86_CHECK_INDEX(OFF) RSK_X86_GATE_ASM          \
						     RSK_INJECT_ASM(2)         \
							     RSK_X86_LOAD("(%[v])") \
								     RSK_X86_CMP("%[expect]") \
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)           \
				     RSK_X86_LOAD("%[newv]")                   \
					     RSK_X86_STORE("(%[v])") "2:\n\t"  \
						     RSK_X86_ABORT             \
			     : [tmp] "=&r"(tmp)RSK_X86_INJECT_OUT              \
			     : [area] "r"(area), [idx] "rm"(idx), [v] "r"(v),  \
			       [expect] RSK_X86_VAL(expect),                   \
			       [newv] RSK_X86_VAL(newv)RSK_X86_GATE_IN RSK_X86_INJECT_IN       \
			     : "memory", "cc"                                  \
			     : cmpfail, aborted, stopped);                              \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
	stopped:                                                               \
		return 2;                                                      \
	}                                                                      \
                                                                               \
	RSK_X86_FN RSK_ARCH_FN(cmpcmpstore, X)(                                   \
		struct rsk_abi_area *area, int idx, intptr_t *v,               \
		intptr_t expect, intptr_t *v2, intptr_t expect2, intptr_t newv RSK_GATE_PARAM) \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X86_INJECT_DECL                                            \
		__asm__ __volatile__ goto(RSK_X86_DESCRIBE RSK_X86_EXIT("cmpfail")          \
				     RSK_X86_ARM "1:\n\t" RSK_INJECT_ASM(1)    \
					     RSK_X86_CHECK_INDEX(OFF) RSK_X86_GATE_ASM          \
						     RSK_INJECT_ASM(2)         \
							     RSK_X86_LOAD("(%[v])") \
								     RSK_X86_CMP("%[expect]") \
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)           \
				     RSK_X86_LOAD("(%[v2])")                   \
					     RSK_X86_CMP("%[expect2]")         \
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(4)           \
				     RSK_X86_LOAD("%[newv]")                   \
					     RSK_X86_STORE("(%[v])") "2:\n\t"  \
						     RSK_X86_ABORT             \
			     : [tmp] "=&r"(tmp)RSK_X86_INJECT_OUT              \
			     : [area] "r"(area), [idx] "rm"(idx), [v] "r"(v),  \
			       [expect] RSK_X86_VAL(expect), [v2] "r"(v2),     \
			       [expect2] RSK_X86_VAL(expect2),                 \
			       [newv] RSK_X86_VAL(newv)RSK_X86_GATE_IN RSK_X86_INJECT_IN       \
			     : "memory", "cc"                                  \
			     : cmpfail, aborted, stopped);                              \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
	stopped:                                                               \
		return 2;                                                      \
	}                                                                      \
                                                                               \
	RSK_X86_FN RSK_ARCH_FN(cmpstorestore, X)(                                 \
		struct rsk_abi_area *area, int idx, intptr_t *v,               \
		intptr_t expect, intptr_t *v2, intptr_t newv2, intptr_t newv RSK_GATE_PARAM)  \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X86_INJECT_DECL                                            \
		__asm__ __volatile__ goto(RSK_X86_DESCRIBE RSK_X86_EXIT("cmpfail")          \
				     RSK_X86_ARM "1:\n\t" RSK_INJECT_ASM(1)    \
					     RSK_X86_CHECK_INDEX(OFF) RSK_X86_GATE_ASM          \
						     RSK_INJECT_ASM(2)         \
							     RSK_X86_LOAD("(%[v])") \
								     RSK_X86_CMP("%[expect]") \
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)           \
				     RSK_X86_LOAD("%[newv2]")                  \
					     RSK_X86_STORE("(%[v2])")          \
						     RSK_INJECT_ASM(4)         \
							     RSK_X86_LOAD("%[newv]") \
								     RSK_X86_STORE("(%[v])") \
			     "2:\n\t" RSK_X86_ABORT                            \
			     : [tmp] "=&r"(tmp)RSK_X86_INJECT_OUT              \
			     : [area] "r"(area), [idx] "rm"(idx), [v] "r"(v),  \
			       [expect] RSK_X86_VAL(expect), [v2] "r"(v2),     \
			       [newv2] RSK_X86_VAL(newv2),                     \
			       [newv] RSK_X86_VAL(newv)RSK_X86_GATE_IN RSK_X86_INJECT_IN       \
			     : "memory", "cc"                                  \
			     : cmpfail, aborted, stopped);                              \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
	stopped:                                                               \
		return 2;                                                      \
	}                                                                      \
                                                                               \
	RSK_X86_FN RSK_ARCH_FN(cmpcopystore, X)(                                  \
		struct rsk_abi_area *area, int idx, intptr_t *v,               \
		intptr_t expect, intptr_t *dst, const intptr_t *src,           \
		intptr_t nwords, intptr_t newv RSK_GATE_PARAM)                                \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X86_INJECT_DECL                                            \
		__asm__ __volatile__ goto(RSK_X86_DESCRIBE RSK_X86_EXIT("cmpfail")          \
				     RSK_X86_ARM "1:\n\t" RSK_INJECT_ASM(1)    \
					     RSK_X86_CHECK_INDEX(OFF) RSK_X86_GATE_ASM          \
						     RSK_INJECT_ASM(2)         \
							     RSK_X86_LOAD("(%[v])") \
								     RSK_X86_CMP("%[expect]") \
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)           \
			     RSK_X86_COPY                                      \
			     "6:\n\t" RSK_INJECT_ASM(4)                        \
				     RSK_X86_LOAD("%[newv]")                   \
					     RSK_X86_STORE("(%[v])") "2:\n\t"  \
						     RSK_X86_ABORT             \
			     : [tmp] "=&r"(tmp),                               \
			       RSK_X86_COPY_OUT RSK_X86_INJECT_OUT             \
			     : [area] "r"(area), [idx] "rm"(idx), [v] "r"(v),  \
			       [expect] RSK_X86_VAL(expect),                   \
			       [newv] RSK_X86_VAL(newv)RSK_X86_COPY_IN         \
				       RSK_X86_GATE_IN RSK_X86_INJECT_IN                       \
			     : "memory", "cc"                                  \
			     : cmpfail, aborted, stopped);                              \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
	stopped:                                                               \
		return 2;                                                      \
	}                                                                      \
                                                                               \
	RSK_X86_FN RSK_ARCH_FN(add, X)(struct rsk_abi_area *area, int idx,        \
				    intptr_t *v, intptr_t count RSK_GATE_PARAM)               \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X86_INJECT_DECL                                            \
		__asm__ __volatile__ goto(RSK_X86_DESCRIBE RSK_X86_ARM                      \
			     "1:\n\t" RSK_INJECT_ASM(1)                        \
				     RSK_X86_CHECK_INDEX(OFF) RSK_X86_GATE_ASM                  \
					     RSK_INJECT_ASM(2)                 \
				     "add" RSK_X86_SFX " %[count], (%[v])\n\t" \
			     "2:\n\t" RSK_X86_ABORT                            \
			     : [tmp] "=&r"(tmp)RSK_X86_INJECT_OUT              \
			     : [area] "r"(area), [idx] "rm"(idx), [v] "r"(v),  \
			       [count] RSK_X86_ADDEND(count)RSK_X86_GATE_IN RSK_X86_INJECT_IN  \
			     : "memory", "cc"                                  \
			     : aborted, stopped);                                       \
		return 0;                                                      \
	aborted:                                                               \
		return -1;                                                     \
	stopped:                                                               \
		return 2;                                                      \
	}                                                                      \
                                                                               \
	RSK_X86_FN RSK_ARCH_FN(pop, X)(struct rsk_abi_area *area, int idx,        \
				    intptr_t *v, intptr_t expectnot,           \
				    intptr_t offset, intptr_t *out RSK_GATE_PARAM)            \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X86_INJECT_DECL                                            \
		__asm__ __volatile__ goto(RSK_X86_DESCRIBE RSK_X86_EXIT("cmpfail")          \
				     RSK_X86_ARM "1:\n\t" RSK_INJECT_ASM(1)    \
					     RSK_X86_CHECK_INDEX(OFF) RSK_X86_GATE_ASM          \
						     RSK_INJECT_ASM(2)         \
							     RSK_X86_LOAD("(%[v])") \
								     RSK_X86_CMP("%[expectnot]") \
			     "jz %l[cmpfail]\n\t"                              \
			     RSK_X86_STORE("%[out]") RSK_INJECT_ASM(3)         \
			     "add" RSK_X86_SFX " %[offset], %[tmp]\n\t"        \
				     RSK_X86_LOAD("(%[tmp])")                  \
					     RSK_X86_STORE("(%[v])") "2:\n\t"  \
						     RSK_X86_ABORT             \
			     : [tmp] "=&r"(tmp), [out] "=m"(*out)RSK_X86_INJECT_OUT \
			     : [area] "r"(area), [idx] "rm"(idx), [v] "r"(v),  \
			       [expectnot] RSK_X86_VAL(expectnot),             \
			       [offset] RSK_X86_VAL(offset)RSK_X86_GATE_IN     \
				       RSK_X86_INJECT_IN                       \
			     : "memory", "cc"                                  \
			     : cmpfail, aborted, stopped);                              \
		return 0;                                                      \
	cmpfail:                                                               \
		return 1;                                                      \
	aborted:                                                               \
		return -1;                                                     \
	stopped:                                                               \
		return 2;                                                      \
	}                                                                      \
                                                                               \
	RSK_X86_FN RSK_ARCH_FN(derefadd, X)(struct rsk_abi_area *area, int idx,   \
					 intptr_t *const *ptr, intptr_t off,   \
					 intptr_t inc RSK_GATE_PARAM)                         \
	{                                                                      \
		intptr_t tmp;                                                  \
		RSK_X86_INJECT_DECL                                            \
		__asm__ __volatile__ goto(RSK_X86_DESCRIBE RSK_X86_ARM                      \
			     "1:\n\t" RSK_INJECT_ASM(1)                        \
				     RSK_X86_CHECK_INDEX(OFF) RSK_X86_GATE_ASM                  \
					     RSK_INJECT_ASM(2)                 \
						     RSK_X86_LOAD("(%[ptr])")  \
			     "add" RSK_X86_SFX " %[off], %[tmp]\n\t"           \
			     "add" RSK_X86_SFX " %[inc], (%[tmp])\n\t"         \
			     "2:\n\t" RSK_X86_ABORT                            \
			     : [tmp] "=&r"(tmp)RSK_X86_INJECT_OUT              \
			     : [area] "r"(area), [idx] "rm"(idx),              \
			       [ptr] "r"(ptr), [off] RSK_X86_VAL(off),         \
			       [inc] RSK_X86_ADDEND(inc)RSK_X86_GATE_IN RSK_X86_INJECT_IN      \
			     : "memory", "cc"                                  \
			     : aborted, stopped);                                       \
		return 0;                                                      \
	aborted:                                                               \
		return -1;                                                     \
	stopped:                                                               \
		return 2;                                                      \
	}                                                                      \
                                                                               \
	/* TSO: a plain store already orders after earlier loads and stores. */ \
	RSK_X86_FN RSK_ARCH_FN(cmpstore_release, X)(struct rsk_abi_area *area,    \
						 int idx, intptr_t *v,         \
						 intptr_t expect,              \
						 intptr_t newv RSK_GATE_PARAM)                \
	{                                                                      \
		return RSK_ARCH_FN(cmpstore, X)(area, idx, v, expect, newv RSK_GATE_ARG);      \
	}                                                                      \
	RSK_X86_FN RSK_ARCH_FN(cmpstorestore_release, X)(                         \
		struct rsk_abi_area *area, int idx, intptr_t *v,               \
		intptr_t expect, intptr_t *v2, intptr_t newv2, intptr_t newv RSK_GATE_PARAM)  \
	{                                                                      \
		return RSK_ARCH_FN(cmpstorestore, X)(area, idx, v, expect, v2,    \
						  newv2, newv RSK_GATE_ARG);                \
	}                                                                      \
	RSK_X86_FN RSK_ARCH_FN(cmpcopystore_release, X)(                          \
		struct rsk_abi_area *area, int idx, intptr_t *v,               \
		intptr_t expect, intptr_t *dst, const intptr_t *src,           \
		intptr_t nwords, intptr_t newv RSK_GATE_PARAM)                                \
	{                                                                      \
		return RSK_ARCH_FN(cmpcopystore, X)(area, idx, v, expect, dst,    \
						 src, nwords, newv RSK_GATE_ARG);           \
	}

/* add's addend: a register or an immediate (no mem-to-mem add). */
#define RSK_X86_ADDEND(x) "r" RSK_X86_IMM(x)
#ifdef __x86_64__
#define RSK_X86_IMM(x) "e"(x)
#else
#define RSK_X86_IMM(x) "i"(x)
#endif

/*
 * Each operation exists twice: plain (rsk_arch_<op>_<X>) and gated
 * (rsk_arch_gated_<op>_<X>, one more argument `gate`).  A gated section
 * loads *gate after arming and leaves through `stopped` (return 2) unless
 * it is 0: the progress protocol closes a gate, fences the CPU, and then
 * owns that CPU's data with ordinary code (see <rseqkit/progress.h>).
 */
#define RSK_X86_GATE_ASM RSK_GATED(                                           \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t"                     \
	RSK_X86_U64("1b") RSK_X86_U64("%l[stopped]")                          \
	".popsection\n\t"                                                      \
	"cmp" RSK_X86_SFX " $0, (%[gate])\n\t"                                \
	"jnz %l[stopped]\n\t")
#define RSK_X86_GATE_IN RSK_GATED(, [gate] "r"(gate))
