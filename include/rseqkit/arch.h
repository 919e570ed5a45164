/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch.h - selects the architecture layer.
 *
 * THE CONTRACT every include/rseqkit/arch/<arch>.h implements
 * ----------------------------------------------------------
 * Constants:
 *   RSK_ARCH_NAME        "x86_64", "i386", ...
 *   RSK_ARCH_SIGNATURE   the u32 placed before every abort handler; the
 *                        value glibc registers with (RSEQ_SIG), since one
 *                        registration per thread serves every section.
 *   RSK_ARCH_NR_RSEQ     the rseq system call number.
 *
 * Functions (static inline, always inlined):
 *   void *rsk_arch_thread_pointer(void);
 *
 * The operations come in one of two forms; an arch writes one, and this
 * file derives the other parts of the interface from it.
 *
 *   The `_at` form (x86-64; RSK_ARCH_DEFINE_AT_OPS and
 *   RSK_ARCH_HAS_AREA_OFFSET): rsk_arch_area_t is how a section reaches
 *   the thread's area (x86-64: its offset from %fs), with
 *       rsk_arch_area_t rsk_arch_area_of(ptrdiff_t offset_from_tp);
 *       uint32_t rsk_arch_area_u32(rsk_arch_area_t area, uint32_t field);
 *   and each operation takes the area, the offset `ioff` of the index
 *   field it re-checks (RSK_ABI_OFF_CPU_ID or RSK_ABI_OFF_MM_CID) and the
 *   index:  rsk_arch_<op>_at(area, ioff, idx, ...).
 *
 *   The cpu/cid form (every other arch; RSK_ARCH_DEFINE_OPS): an area
 *   pointer, and one function per index field X in {cpu, cid}:
 *   rsk_arch_<op>_X(area, idx, ...).  Here rsk_arch_area_t is the
 *   pointer, and rsk_arch_<op>_at() chooses the X of ioff.
 *
 * Whichever the form, each operation returns 0 (committed), 1 (a compare
 * failed, nothing stored) or -1 (aborted, or the index was not `idx` when
 * the section started: nothing stored):
 *
 *   cmpstore(v, expect, newv)
 *       if (*v == expect) *v = newv;
 *   cmpcmpstore(v, expect, v2, expect2, newv)
 *       if (*v == expect && *v2 == expect2) *v = newv;
 *   cmpstorestore(v, expect, v2, newv2, newv)
 *       if (*v == expect) { *v2 = newv2; *v = newv; }   (*v2 speculative)
 *   cmpcopystore(v, expect, dst, src, nwords, newv)
 *       if (*v == expect) { copy nwords intptr_t words src -> dst; *v = newv; }
 *   add(v, count)
 *       *v += count;
 *   pop(v, expectnot, offset, out)
 *       if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); }
 *       else compare failed
 *   derefadd(ptr, off, inc)
 *       *(intptr_t *)(*ptr + off) += inc;
 *
 *   For every one of those, a gated twin rsk_arch_gated_<op>_... taking
 *   one more (last) argument `const intptr_t *gate`, which loads *gate
 *   after arming and returns 2 (stopped, nothing stored) unless it is 0.
 *   That load is a load-acquire: the section's later loads of the data
 *   must not be satisfied before it, or a section that reads the gate
 *   reopened (rsk_gate_open is a store-release after a slow path's plain
 *   stores) could commit a value computed from the data as it was before
 *   that slow path ran.
 *
 *   and _release_ variants of cmpstore, cmpstorestore and cmpcopystore
 *   (rsk_arch_cmpstore_release_... ) whose commit store is ordered after
 *   every earlier load and store of the thread (a store-release), so that a
 *   consumer on another CPU that acquires the committed word sees the data.
 *
 *   Compiler ordering: an operation of the `_at` form may leave memory it
 *   does not name unclobbered (x86-64's relaxed ones do, so that the
 *   compiler keeps values in registers across them); <rseqkit/ops.h> puts
 *   compiler barriers around the public primitives, and the structures
 *   read their data only through atomics or out of line.
 *
 * Each operation is one asm statement from arming area->rseq_cs to the
 * commit store, whose descriptor is emitted into __rseq_cs, listed in
 * __rseq_cs_ptr_array, and whose early exits are listed as (start, exit)
 * pairs in __rseq_exit_point_array - the sections that debuggers and
 * DynamoRIO read.  Injection points RSK_INJECT_ASM(1..6) are in each.
 */
#ifndef RSEQKIT_ARCH_H
#define RSEQKIT_ARCH_H

#include <stddef.h>
#include <stdint.h>
#include <rseqkit/abi.h>
#include <rseqkit/inject.h>
#include <rseqkit/tsan.h>

/*
 * How an arch header writes its operations: one macro,
 * RSK_ARCH_DEFINE_OPS(X, OFF), defines every operation for the index field
 * X (cpu or cid; OFF is the field's offset in struct rseq, as a string).
 * It is expanded four times below: plain and gated, for each field.  The
 * body names its functions RSK_ARCH_FN(op, X) and writes whatever only the
 * gated twins have (the `gate` parameter, its asm operand, the gate load)
 * inside RSK_GATED(...), which is empty in the plain expansion.
 */
#define RSK_GATED(...)		 RSK_GATED_(RSK_ARCH_GATED, __VA_ARGS__)
#define RSK_GATED_(g, ...)	 RSK_GATED__(g, __VA_ARGS__)
#define RSK_GATED__(g, ...)	 RSK_GATED_##g(__VA_ARGS__)
#define RSK_GATED_0(...)
#define RSK_GATED_1(...)	 __VA_ARGS__
#define RSK_ARCH_FN(op, X)	 RSK_ARCH_FN_(RSK_ARCH_GATED, op, X)
#define RSK_ARCH_FN_(g, op, X)	 RSK_ARCH_FN__(g, op, X)
#define RSK_ARCH_FN__(g, op, X)	 RSK_ARCH_FN_##g(op, X)
#define RSK_ARCH_FN_0(op, X)	 rsk_arch_##op##_##X
#define RSK_ARCH_FN_1(op, X)	 rsk_arch_gated_##op##_##X
#define RSK_GATE_PARAM		 RSK_GATED(, const intptr_t *gate)
#define RSK_GATE_ARG		 RSK_GATED(, gate)

#define RSK_ARCH_INSIDE 1
#if defined(__x86_64__)
#include <rseqkit/arch/x86_64.h>
#elif defined(__i386__)
#include <rseqkit/arch/x86.h>
#elif defined(__aarch64__)
#include <rseqkit/arch/aarch64.h>
#elif defined(__arm__)
#include <rseqkit/arch/arm.h>
#elif defined(__powerpc64__)
#include <rseqkit/arch/ppc.h>
#elif defined(__s390x__)
#include <rseqkit/arch/s390.h>
#elif defined(__riscv) && __riscv_xlen == 64
#include <rseqkit/arch/riscv.h>
#else
#error "rseqkit: no restartable-sequence layer for this architecture (supported: x86_64, i386, aarch64, arm (A32/T32, ARMv7+), ppc64 (LE and BE), s390x, riscv64)"
#endif
#undef RSK_ARCH_INSIDE

#ifndef RSK_ARCH_HAS_AREA_OFFSET
/* Sections reach the area by its address. */
typedef struct rsk_abi_area *rsk_arch_area_t;

static inline __attribute__((always_inline)) rsk_arch_area_t rsk_arch_area_of(ptrdiff_t off)
{
	return (rsk_arch_area_t)(void *)((char *)rsk_arch_thread_pointer() + off);
}

static inline __attribute__((always_inline)) uint32_t rsk_arch_area_u32(rsk_arch_area_t area,
									uint32_t field)
{
	return *(const volatile uint32_t *)(const void *)((const char *)area + field);
}
#endif

#ifdef RSK_ARCH_DEFINE_AT_OPS
/* The arch writes each operation once, in the `_at` form. */
#define RSK_ARCH_GATED 0
RSK_ARCH_DEFINE_AT_OPS()
#undef RSK_ARCH_GATED
#define RSK_ARCH_GATED 1
RSK_ARCH_DEFINE_AT_OPS()
#undef RSK_ARCH_GATED
#else
/* Generic `_at` form: a choice between the arch's cpu and cid variants
 * (a constant branch where ioff is a constant; one compare otherwise). */
#define RSK_ARCH_AT_UNPAREN(...) __VA_ARGS__
#define RSK_ARCH_AT_FROM_XY(op, PARAMS, ARGS)                                  \
	static inline __attribute__((always_inline)) int RSK_ARCH_FN(op, at)(  \
		rsk_arch_area_t area, uint32_t ioff, int idx,                  \
		RSK_ARCH_AT_UNPAREN PARAMS RSK_GATE_PARAM)                     \
	{                                                                      \
		if (ioff == RSK_ABI_OFF_MM_CID)                                \
			return RSK_ARCH_FN(op, cid)(area, idx,                 \
						    RSK_ARCH_AT_UNPAREN ARGS RSK_GATE_ARG); \
		return RSK_ARCH_FN(op, cpu)(area, idx, RSK_ARCH_AT_UNPAREN ARGS RSK_GATE_ARG); \
	}
#define RSK_ARCH_DEFINE_AT_FALLBACK()                                          \
	RSK_ARCH_AT_FROM_XY(cmpstore, (intptr_t *v, intptr_t expect, intptr_t newv), \
			    (v, expect, newv))                                 \
	RSK_ARCH_AT_FROM_XY(cmpstore_release,                                  \
			    (intptr_t *v, intptr_t expect, intptr_t newv), (v, expect, newv)) \
	RSK_ARCH_AT_FROM_XY(cmpcmpstore,                                       \
			    (intptr_t *v, intptr_t expect, intptr_t *v2, intptr_t expect2, \
			     intptr_t newv),                                   \
			    (v, expect, v2, expect2, newv))                    \
	RSK_ARCH_AT_FROM_XY(cmpstorestore,                                     \
			    (intptr_t *v, intptr_t expect, intptr_t *v2, intptr_t newv2, \
			     intptr_t newv),                                   \
			    (v, expect, v2, newv2, newv))                      \
	RSK_ARCH_AT_FROM_XY(cmpstorestore_release,                             \
			    (intptr_t *v, intptr_t expect, intptr_t *v2, intptr_t newv2, \
			     intptr_t newv),                                   \
			    (v, expect, v2, newv2, newv))                      \
	RSK_ARCH_AT_FROM_XY(cmpcopystore,                                      \
			    (intptr_t *v, intptr_t expect, intptr_t *dst, const intptr_t *src, \
			     intptr_t nwords, intptr_t newv),                  \
			    (v, expect, dst, src, nwords, newv))               \
	RSK_ARCH_AT_FROM_XY(cmpcopystore_release,                              \
			    (intptr_t *v, intptr_t expect, intptr_t *dst, const intptr_t *src, \
			     intptr_t nwords, intptr_t newv),                  \
			    (v, expect, dst, src, nwords, newv))               \
	RSK_ARCH_AT_FROM_XY(add, (intptr_t *v, intptr_t count), (v, count))    \
	RSK_ARCH_AT_FROM_XY(pop,                                               \
			    (intptr_t *v, intptr_t expectnot, intptr_t offset, intptr_t *out), \
			    (v, expectnot, offset, out))                       \
	RSK_ARCH_AT_FROM_XY(derefadd, (intptr_t *const *ptr, intptr_t off, intptr_t inc), \
			    (ptr, off, inc))
#define RSK_ARCH_GATED 0
RSK_ARCH_DEFINE_OPS(cpu, "4")
RSK_ARCH_DEFINE_OPS(cid, "24")
RSK_ARCH_DEFINE_AT_FALLBACK()
#undef RSK_ARCH_GATED
#define RSK_ARCH_GATED 1
RSK_ARCH_DEFINE_OPS(cpu, "4")
RSK_ARCH_DEFINE_OPS(cid, "24")
RSK_ARCH_DEFINE_AT_FALLBACK()
#undef RSK_ARCH_GATED
#endif

#endif /* RSEQKIT_ARCH_H */
