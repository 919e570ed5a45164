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
 *   For X in {cpu, cid} (the area field the section re-checks: cpu_id at
 *   offset 4, mm_cid at offset 24), each returning 0 (committed),
 *   1 (a compare failed, nothing stored) or -1 (aborted, or the index
 *   was not `idx` when the section started: nothing stored):
 *
 *   rsk_arch_cmpstore_X(area, idx, v, expect, newv)
 *       if (*v == expect) *v = newv;
 *   rsk_arch_cmpcmpstore_X(area, idx, v, expect, v2, expect2, newv)
 *       if (*v == expect && *v2 == expect2) *v = newv;
 *   rsk_arch_cmpstorestore_X(area, idx, v, expect, v2, newv2, newv)
 *       if (*v == expect) { *v2 = newv2; *v = newv; }   (*v2 speculative)
 *   rsk_arch_cmpcopystore_X(area, idx, v, expect, dst, src, nwords, newv)
 *       if (*v == expect) { copy nwords intptr_t words src -> dst; *v = newv; }
 *   rsk_arch_add_X(area, idx, v, count)
 *       *v += count;
 *   rsk_arch_pop_X(area, idx, v, expectnot, offset, out)
 *       if (*v != expectnot) { *out = *v; *v = *(intptr_t *)(*v + offset); }
 *       else compare failed
 *   rsk_arch_derefadd_X(area, idx, ptr, off, inc)
 *       *(intptr_t *)(*ptr + off) += inc;
 *
 *   For every one of those, a gated twin rsk_arch_gated_<op>_X taking one
 *   more (last) argument `const intptr_t *gate`, which loads *gate after
 *   arming and returns 2 (stopped, nothing stored) unless it is 0.  That
 *   load is a load-acquire: the section's later loads of the data must not
 *   be satisfied before it, or a section that reads the gate reopened
 *   (rsk_gate_open is a store-release after a slow path's plain stores)
 *   could commit a value computed from the data as it was before that slow
 *   path ran.
 *
 *   and _release_ variants of cmpstore, cmpstorestore and cmpcopystore
 *   (rsk_arch_cmpstore_release_X ...) whose commit store is ordered after
 *   every earlier load and store of the thread (a store-release), so that a
 *   consumer on another CPU that acquires the committed word sees the data.
 *
 * Each operation is one asm statement from arming area->rseq_cs to the
 * commit store, whose descriptor is emitted into __rseq_cs, listed in
 * __rseq_cs_ptr_array, and whose early exits are listed as (start, exit)
 * pairs in __rseq_exit_point_array - the sections that debuggers and
 * DynamoRIO read.  Injection points RSK_INJECT_ASM(1..6) are in each.
 */
#ifndef RSEQKIT_ARCH_H
#define RSEQKIT_ARCH_H

#include <stdint.h>
#include <rseqkit/abi.h>
#include <rseqkit/inject.h>

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
#if defined(__x86_64__) || defined(__i386__)
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

#define RSK_ARCH_GATED 0
RSK_ARCH_DEFINE_OPS(cpu, "4")
RSK_ARCH_DEFINE_OPS(cid, "24")
#undef RSK_ARCH_GATED
#define RSK_ARCH_GATED 1
RSK_ARCH_DEFINE_OPS(cpu, "4")
RSK_ARCH_DEFINE_OPS(cid, "24")
#undef RSK_ARCH_GATED

#endif /* RSEQKIT_ARCH_H */
