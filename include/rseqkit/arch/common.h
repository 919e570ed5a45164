/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/common.h - what the sections of every architecture share,
 * stated once: the operations' signatures, the descriptor and its exit
 * points, the negative control, the abort entry, the section's frame (entry,
 * common operands, exits), the result conventions, the injection fallbacks
 * and the names of the variants.
 *
 * Included by each arch/<arch>.h after it has defined its building blocks:
 *
 *   RSK_ASM_U64(x)       data, 32-bit archs only: one u64 holding x (two
 *                        .longs in the arch's byte order); without it,
 *                        .quad from here
 *   RSK_ASM_PTR_ALIGN    data: alignment before an entry of the pointer and
 *                        exit-point arrays ("" where entries fall aligned)
 *   RSK_ASM_SIGNATURE    code: the signature word just before abort_ip
 *                        (with whatever alignment it needs)
 *   RSK_ASM_JUMP(to)     code: an unconditional branch to a C label, from
 *                        __rseq_failure (asm goto architectures)
 *   RSK_ASM_ARMING       code: store the address of the descriptor (label
 *                        3) into area->rseq_cs
 *   RSK_ASM_CHECK_INDEX  code: leave as an abort unless the area's index
 *                        field (at RSK_ARCH_OFF, or ioff) still holds idx
 *   RSK_ASM_GATE         code: the gated twins' load-acquire of *gate,
 *                        leaving through `stopped` unless it is 0
 *                        (RSK_GATED(...): nothing in the plain variants)
 * and, where the defaults below do not fit it:
 *   RSK_ASM_INDEX_EXIT   the exit-point pair of a RSK_ASM_CHECK_INDEX that
 *                        leaves for the C label `aborted` (ppc, riscv)
 *   RSK_ASM_OPEN(exits)  the descriptor and the exit points, in the order
 *                        the arch's sections emit them (see RSK_ASM_ENTER)
 *   RSK_ARCH_SCRATCH     the constraint of tmp, the scratch register
 *   RSK_ARCH_INDEX_IN    the input operands area and idx (x86-64: and ioff)
 *   RSK_ARCH_GATE_IN     the input operand gate, in the gated twins
 *   RSK_ARCH_CLOBBERS    what every section clobbers
 *   RSK_ARCH_STOP_ONLY_GATED  only the gated twins name `stopped` (x86-64)
 *
 * Labels inside a section's asm (local to the statement):
 *   1:  start_ip, the first instruction after arming
 *   2:  the end of the commit store (post_commit_offset = 2b - 1b)
 *   3:  the struct rseq_cs descriptor, in __rseq_cs
 *   4:  abort_ip, in __rseq_failure, right after the signature
 *   5:  free for the arming code (pc-relative tricks)
 *   6, 7: the copy loop of cmpcopystore; 8, 9: an injected delay loop
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/common.h"
#endif
#ifndef RSEQKIT_ARCH_COMMON_H
#define RSEQKIT_ARCH_COMMON_H

/*
 * Data words.  GCC sizes an asm statement by its lines (for inlining, and
 * for branch ranges on some archs), so a 64-bit arch lists its words on
 * one line, as it always has: the same asm, the same code.
 */
#ifndef RSK_ASM_U64 /* a 64-bit arch */
#define RSK_ASM_U64(x)		 ".quad " x "\n\t"
#define RSK_ASM_U64_2(a, b)	 ".quad " a ", " b "\n\t"
#define RSK_ASM_U64_3(a, b, c) ".quad " a ", " b ", " c "\n\t"
#else
#define RSK_ASM_U64_2(a, b)	 RSK_ASM_U64(a) RSK_ASM_U64(b)
#define RSK_ASM_U64_3(a, b, c) RSK_ASM_U64(a) RSK_ASM_U64(b) RSK_ASM_U64(c)
#endif

/* The descriptor (struct rseq_cs: version 0, flags 0, start_ip,
 * post_commit_offset, abort_ip) and its entry in __rseq_cs_ptr_array, the
 * list debuggers and DynamoRIO read. */
#define RSK_ASM_DESCRIBE                                                       \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n"                                                         \
	"3:\n\t"                                                               \
	".long 0, 0\n\t" RSK_ASM_U64_3("1f", "(2f - 1f)", "4f")               \
	".popsection\n\t"                                                      \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t" RSK_ASM_PTR_ALIGN      \
		RSK_ASM_U64("3b") ".popsection\n\t"

/* A way out of a section other than its commit and abort: a (start, exit)
 * pair in __rseq_exit_point_array, for debuggers. */
#define RSK_ASM_EXIT_PAIR(start, exit)                                         \
	".pushsection __rseq_exit_point_array, \"aw\"\n\t" RSK_ASM_PTR_ALIGN  \
		RSK_ASM_U64_2(start, exit) ".popsection\n\t"
/* An early exit of a section that is yet to start (label 1 comes later)
 * to the C label `label` of an asm goto. */
#define RSK_ASM_EXIT(label)  RSK_ASM_EXIT_PAIR("1f", "%l[" label "]")
/* The closed-gate exit, written after label 1. */
#define RSK_ASM_GATE_EXIT    RSK_ASM_EXIT_PAIR("1b", "%l[stopped]")

/* The signature and abort_ip, opening __rseq_failure (the caller closes it
 * with .popsection); RSK_ASM_ABORT: leave for the C label `aborted`. */
#define RSK_ASM_FAILURE_ENTRY                                                  \
	".pushsection __rseq_failure, \"ax\"\n\t" RSK_ASM_SIGNATURE "4:\n\t"
#define RSK_ASM_ABORT RSK_ASM_FAILURE_ENTRY RSK_ASM_JUMP("%l[aborted]") ".popsection\n\t"

/* Test builds only (RSEQKIT_NEGATIVE_CONTROL): never arm the descriptor,
 * so the kernel never restarts a section - the negative control that
 * shows the tests detect loss. */
#ifdef RSEQKIT_NEGATIVE_CONTROL
#define RSK_ASM_ARM "\n"
#else
#define RSK_ASM_ARM RSK_ASM_ARMING
#endif

/* Without RSEQKIT_INJECT the injection points are empty. */
#if !RSK_INJECTING
#define RSK_INJECT_ASM(n) ""
#define RSK_ARCH_INJECT_DECL
#define RSK_ARCH_INJECT_OUT
#define RSK_ARCH_INJECT_IN
#endif

/*
 * The start of every section, up to the operation's own instructions: the
 * descriptor and the early exits (RSK_ASM_OPEN: the index check's, where
 * it leaves for a C label, then the operation's `exits`), arming, start_ip,
 * and the re-checks of the index and the gate between injection points 1
 * and 2.
 */
#ifndef RSK_ASM_INDEX_EXIT
#define RSK_ASM_INDEX_EXIT
#endif
#ifndef RSK_ASM_OPEN
#define RSK_ASM_OPEN(exits) RSK_ASM_DESCRIBE RSK_ASM_INDEX_EXIT exits
#endif
#define RSK_ASM_ENTER(exits)                                                   \
	RSK_ASM_OPEN(exits) RSK_ASM_ARM "1:\n\t" RSK_INJECT_ASM(1) RSK_ASM_CHECK_INDEX \
		RSK_ASM_GATE RSK_INJECT_ASM(2)

/*
 * The operands every section has, around an operation's own (`out`, a
 * parenthesized list with a leading comma or `()`; `in`, a parenthesized
 * list): tmp, the scratch register, first; area and idx, the gate, and
 * the injection points' operands.
 */
#ifndef RSK_ARCH_SCRATCH
#define RSK_ARCH_SCRATCH "=&r"
#endif
#ifndef RSK_ARCH_INDEX_IN
#define RSK_ARCH_INDEX_IN [area] "r"(area), [idx] "r"(idx)
#endif
#ifndef RSK_ARCH_GATE_IN
#define RSK_ARCH_GATE_IN RSK_GATED(, [gate] "r"(gate))
#endif
#ifndef RSK_ARCH_CLOBBERS
#define RSK_ARCH_CLOBBERS "memory", "cc"
#endif
/* The elements of a parenthesized list (through RSK_ARCH_ID, so that
 * cppcheck's preprocessor expands it too). */
#define RSK_ARCH_LIST(list)  RSK_ARCH_ID(RSK_ARCH_UNPACK list)
#define RSK_ARCH_UNPACK(...) __VA_ARGS__
#define RSK_ARCH_ID(...)     __VA_ARGS__
#define RSK_ASM_OUTPUTS(out) [tmp] RSK_ARCH_SCRATCH(tmp) RSK_ARCH_LIST(out) RSK_ARCH_INJECT_OUT
#define RSK_ASM_INPUTS(in)                                                     \
	RSK_ARCH_INDEX_IN, RSK_ARCH_LIST(in) RSK_ARCH_GATE_IN RSK_ARCH_INJECT_IN

/*
 * The results of an operation (the contract in <rseqkit/arch.h>): 0
 * committed, 1 a compare failed, 2 aborted or the index moved, 3 the gate
 * was closed.  `stopped` is a label of every section, or (x86-64:
 * RSK_ARCH_STOP_ONLY_GATED) of the gated twins' only: a plain section then
 * has one exit fewer for the compiler to lay out.
 */
#ifdef RSK_ARCH_STOP_ONLY_GATED
#define RSK_ARCH_STOP_LABEL  RSK_GATED(, stopped)
#define RSK_ARCH_STOP_RETURN RSK_GATED(stopped : return 3;)
#else
#define RSK_ARCH_STOP_LABEL  , stopped
#define RSK_ARCH_STOP_RETURN stopped : return 3;
#endif

/*
 * An operation's section: one asm goto from the descriptor to the abort
 * handler, in the operation's function (RSK_ARCH_DEFINE), which then ends
 * with the result tail of the same kind - the C labels the asm leaves for:
 *
 *   RSK_ARCH_SECTION_CMP(body, out, in, more);  RSK_ARCH_RETURN_CMP
 *       an operation that compares: `cmpfail` is an early exit too
 *   RSK_ARCH_SECTION(body, out, in, more);      RSK_ARCH_RETURN
 *
 * body: the operation's instructions after RSK_ASM_ENTER, ending with its
 * commit (label 2 and the abort handler follow); out, in: its operands
 * (see RSK_ASM_OUTPUTS); more: clobbers beyond RSK_ARCH_CLOBBERS, a
 * parenthesized list with a leading comma or `()` (ISO C++ includes these
 * headers: no empty variadic arguments).  It declares tmp.  32-bit ARM,
 * which has no asm goto, defines its own (arch/arm.h).
 */
#ifndef RSK_ARCH_SECTION
#define RSK_ARCH_SECTION_CMP(body, out, in, more)                              \
	RSK_ARCH_SECTION_(RSK_ASM_EXIT("cmpfail"), (cmpfail, ), body, out, in, more)
#define RSK_ARCH_SECTION(body, out, in, more) RSK_ARCH_SECTION_(, (), body, out, in, more)
#define RSK_ARCH_SECTION_(exits, first, body, out, in, more)                   \
	intptr_t tmp;                                                          \
	RSK_ARCH_INJECT_DECL                                                   \
	__asm__ __volatile__ goto(RSK_ASM_ENTER(exits) body "2:\n\t" RSK_ASM_ABORT \
				  : RSK_ASM_OUTPUTS(out)                       \
				  : RSK_ASM_INPUTS(in)                         \
				  : RSK_ARCH_CLOBBERS RSK_ARCH_LIST(more)     \
				  : RSK_ARCH_LIST(first) aborted RSK_ARCH_STOP_LABEL)
#define RSK_ARCH_RETURN_CMP                                                    \
	return 0;                                                              \
	cmpfail:                                                               \
	return 1;                                                              \
	RSK_ARCH_RETURN_EXITS
#define RSK_ARCH_RETURN                                                        \
	return 0;                                                              \
	RSK_ARCH_RETURN_EXITS
#define RSK_ARCH_RETURN_EXITS                                                  \
	aborted:                                                               \
	return 2;                                                              \
	RSK_ARCH_STOP_RETURN
#endif

/* Every operation is a function of this kind. */
#define RSK_ARCH_OP_FN static inline __attribute__((always_inline)) int

/*
 * The operations' parameters after the index ones (the contract in
 * <rseqkit/arch.h>), and the same as arguments.  RSK_ARCH_DEFINE(op) is the
 * head of op's function in the variant being instantiated (a gated twin
 * takes `gate` last), RSK_ARCH_DEFINE_RELEASE(op) its _release twin's;
 * RSK_ARCH_CALL(fn, op) calls fn with the parameters of op's function.
 */
#define RSK_ARCH_PARAMS_cmpstore    intptr_t *v, intptr_t expect, intptr_t newv
#define RSK_ARCH_PARAMS_cmpcmpstore                                            \
	intptr_t *v, intptr_t expect, intptr_t *v2, intptr_t expect2, intptr_t newv
#define RSK_ARCH_PARAMS_cmpstorestore                                          \
	intptr_t *v, intptr_t expect, intptr_t *v2, intptr_t newv2, intptr_t newv
#define RSK_ARCH_PARAMS_cmpcopystore                                           \
	intptr_t *v, intptr_t expect, intptr_t *dst, const intptr_t *src, intptr_t nwords,  \
		intptr_t newv
#define RSK_ARCH_PARAMS_add	    intptr_t *v, intptr_t count
#define RSK_ARCH_PARAMS_pop	    intptr_t *v, intptr_t expectnot, intptr_t offset, intptr_t *out
#define RSK_ARCH_PARAMS_derefadd    intptr_t *const *ptr, intptr_t off, intptr_t inc
#define RSK_ARCH_ARGS_cmpstore	    v, expect, newv
#define RSK_ARCH_ARGS_cmpcmpstore   v, expect, v2, expect2, newv
#define RSK_ARCH_ARGS_cmpstorestore v, expect, v2, newv2, newv
#define RSK_ARCH_ARGS_cmpcopystore  v, expect, dst, src, nwords, newv
#define RSK_ARCH_ARGS_add	    v, count
#define RSK_ARCH_ARGS_pop	    v, expectnot, offset, out
#define RSK_ARCH_ARGS_derefadd	    ptr, off, inc

#define RSK_ARCH_DEFINE(op)	    RSK_ARCH_HEAD(RSK_ARCH_OP(op), op)
#define RSK_ARCH_DEFINE_RELEASE(op) RSK_ARCH_HEAD(RSK_ARCH_OP_RELEASE(op), op)
#define RSK_ARCH_HEAD(fn, op)                                                  \
	RSK_ARCH_OP_FN fn(RSK_ARCH_INDEX_PARAMS, RSK_ARCH_PARAMS_##op RSK_GATE_PARAM)
#define RSK_ARCH_CALL(fn, op)	    fn(RSK_ARCH_INDEX_ARGS, RSK_ARCH_ARGS_##op RSK_GATE_ARG)

/* The operations with a _release twin, and those without: F(op) for each. */
#define RSK_ARCH_RELEASE_OPS(F) F(cmpstore) F(cmpstorestore) F(cmpcopystore)
#define RSK_ARCH_RELAXED_OPS(F) F(cmpcmpstore) F(add) F(pop) F(derefadd)

/*
 * The variant being instantiated (see <rseqkit/arch.h>, which includes an
 * arch's ops.h once per variant):
 *   RSK_ARCH_GATED    1 for the gated twins (one more parameter, `gate`)
 *   RSK_ARCH_RELEASE  1 for the _release twins (weakly ordered archs)
 *   RSK_ARCH_X        cpu or cid (the index field), or at (x86-64's form)
 *   RSK_ARCH_OFF      the index field's offset in the area, as a string
 * RSK_GATED(...) and RSK_RELEASED(...) are their arguments in the variant
 * named and nothing otherwise; RSK_ARCH_OP(op) is the op's function name.
 */
#define RSK_GATED(...)		RSK_GATED_(RSK_ARCH_GATED, __VA_ARGS__)
#define RSK_GATED_(g, ...)	RSK_GATED__(g, __VA_ARGS__)
#define RSK_GATED__(g, ...)	RSK_IF_##g(__VA_ARGS__)
#define RSK_RELEASED(...)	RSK_RELEASED_(RSK_ARCH_RELEASE, __VA_ARGS__)
#define RSK_RELEASED_(r, ...)	RSK_RELEASED__(r, __VA_ARGS__)
#define RSK_RELEASED__(r, ...)	RSK_IF_##r(__VA_ARGS__)
#define RSK_RELAXED(...)	RSK_RELAXED_(RSK_ARCH_RELEASE, __VA_ARGS__)
#define RSK_RELAXED_(r, ...)	RSK_RELAXED__(r, __VA_ARGS__)
#define RSK_RELAXED__(r, ...)	RSK_UNLESS_##r(__VA_ARGS__)
#define RSK_IF_0(...)
#define RSK_IF_1(...)		__VA_ARGS__
#define RSK_UNLESS_0(...)	__VA_ARGS__
#define RSK_UNLESS_1(...)
#define RSK_GATE_PARAM		RSK_GATED(, const intptr_t *gate)
#define RSK_GATE_ARG		RSK_GATED(, gate)

#define RSK_ARCH_OP(op)		   RSK_ARCH_NAMED(op, RSK_ARCH_RELEASE, RSK_ARCH_X)
#define RSK_ARCH_OP_RELEASE(op)	   RSK_ARCH_NAMED(op, 1, RSK_ARCH_X)
#define RSK_ARCH_NAMED(op, r, X)   RSK_ARCH_NAMED_(RSK_ARCH_GATED, r, op, X)
#define RSK_ARCH_NAMED_(g, r, op, X) RSK_ARCH_NAMED__(g, r, op, X)
#define RSK_ARCH_NAMED__(g, r, op, X) RSK_ARCH_NAME_##g##r(op, X)
#define RSK_ARCH_NAME_00(op, X)	  rsk_arch_##op##_##X
#define RSK_ARCH_NAME_01(op, X)	  rsk_arch_##op##_release_##X
#define RSK_ARCH_NAME_10(op, X)	  rsk_arch_gated_##op##_##X
#define RSK_ARCH_NAME_11(op, X)	  rsk_arch_gated_##op##_release_##X

#endif /* RSEQKIT_ARCH_COMMON_H */
