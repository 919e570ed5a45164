/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch.h - the restartable operations of this architecture.
 *
 * THE CONTRACT every architecture implements
 * ------------------------------------------
 * Files, for an architecture A:
 *   arch/A.h       its constants (RSK_ARCH_NAME, RSK_ARCH_SIGNATURE - the
 *                  u32 before every abort handler, glibc's RSEQ_SIG, since
 *                  one registration per thread serves every section -
 *                  RSK_ARCH_NR_RSEQ), its thread pointer
 *                  (void *rsk_arch_thread_pointer(void), or the one
 *                  instruction RSK_ARCH_TP_ASM that reads it), and the
 *                  instruction building blocks its sections are made of;
 *                  then it includes arch/common.h, which builds the
 *                  scaffolding all architectures share from them: the
 *                  signatures (RSK_ARCH_DEFINE), the section's frame
 *                  (RSK_ARCH_SECTION, RSK_ARCH_SECTION_CMP) and the
 *                  result tails.
 *   arch/A/ops.h   the operations below, each an ordinary static inline
 *                  function (its instructions and its own operands);
 *                  included once per variant (arch/variant.h)
 *                  through RSK_ARCH_OPS_H, which arch/A.h defines as the
 *                  string "rseqkit/arch/A/ops.h" (not <...>: the tokens
 *                  of a macro-expanded <...> name are expanded, and GNU C
 *                  predefines `i386`).
 *   arch/area.h    (shared) the area type and accessors; what
 *                  <rseqkit/thread.h> needs.
 *
 * The operations.  Each is one asm statement from arming area->rseq_cs to
 * the commit store; its descriptor goes to __rseq_cs, listed in
 * __rseq_cs_ptr_array, and its early exits to __rseq_exit_point_array as
 * (start, exit) pairs - the sections debuggers and DynamoRIO read.  The
 * delay loops RSK_INJECT_ASM(1..4) of test builds sit between its steps.
 * Each returns 0 (committed), 1 (a compare failed: nothing stored), 2
 * (aborted, or the area's index field did not hold `idx` when the section
 * started: nothing stored):
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
 * Names and leading parameters: rsk_arch_<op>_<X>(area, idx, ...) for the
 * index field X in {cpu, cid}, and rsk_arch_<op>_at(area, ioff, idx, ...),
 * where ioff is the field's offset (RSK_ABI_OFF_CPU_ID or
 * RSK_ABI_OFF_MM_CID): what the structures call.  An architecture writes
 * one of the two forms; x86-64 writes `_at` (RSK_ARCH_HAS_AREA_OFFSET:
 * its area is an offset from %fs, one code path serves both fields), the
 * others cpu/cid, and arch/at.h derives `_at` from them.
 *
 * Preconditions, the caller's to keep (nothing is checked in the asm):
 *   - area is the calling thread's registered area (rsk_arch_area_of of
 *     the registration's offset), and idx a value read from its field
 *     since the thread last could have moved - a stale idx only aborts;
 *   - every word named (v, v2, dst, src, the words pop and derefadd reach
 *     through memory) is an aligned intptr_t the caller may access, and
 *     words a section stores are ones no other CPU stores to while this
 *     index owns them (the per-CPU rule) - except through the protocol of
 *     the gated twins;
 *   - nwords >= 0, and a copy that small enough for a section to finish
 *     within a time slice (the structures bound it);
 *   - gate points to an aligned intptr_t that outlives the call.
 *
 * Variants.  For every operation a gated twin rsk_arch_gated_<op>_...
 * taking one more (last) argument `const intptr_t *gate`, which loads
 * *gate after arming and returns 3 (stopped, nothing stored) unless it is
 * 0.  That load is a load-acquire: the section's later loads of the data
 * must not be satisfied before it, or a section that reads the gate
 * reopened (rsk_gate_open is a store-release after a slow path's plain
 * stores) could commit a value computed from the data as it was before
 * that slow path ran.  And _release twins of cmpstore, cmpstorestore and
 * cmpcopystore (rsk_arch_cmpstore_release_...) whose commit store is
 * ordered after every earlier load and store of the thread (a
 * store-release), so that a consumer on another CPU that acquires the
 * committed word sees the data.  A TSO architecture (RSK_ARCH_TSO:
 * x86-64, i386, s390x) gets them from arch/variant.h, as the relaxed op
 * behind its RSK_ARCH_RELEASE_BARRIER(op) (a compiler barrier where the
 * relaxed op leaves memory unclobbered); the others write them in ops.h.
 *
 * Compiler ordering: an operation of the `_at` form may leave memory it
 * does not name unclobbered (x86-64's relaxed ones do, so that the
 * compiler keeps values in registers across them); <rseqkit/ops.h> puts
 * compiler barriers around the public primitives, and the structures read
 * their data only through atomics or out of line.
 *
 * Optional sections that read the index themselves, inside the section
 * (x86-64 has them all; other archs fall back to rsk_percpu_enter_() and
 * the `_at` operations, or to the generic form of the caller):
 *   RSK_ARCH_HAS_PART_OPS    add, compare-and-store, push and pop on
 *                            slots of 1 << SHIFT bytes (the structures'
 *                            parts): arch/x86_64/parts.h
 *   RSK_ARCH_HAS_STRIDE_OPS  the gated add of per-CPU memory (copies
 *                            1 << SHIFT apart) and the counted arrays of
 *                            a run-time stride (the pointer buffer's):
 *                            arch/x86_64/parts.h
 *   RSK_ARCH_HAS_COUNTED_COPY the counted arrays with items of 1, 2, 4 or
 *                            8 words copied unrolled (the copy buffer's),
 *                            and RSK_ARCH_COUNTED_COPY_RELEASE() to make
 *                            a push a release: arch/x86_64/copy.h
 *   RSK_ARCH_HAS_REGION_OPS  pop and push on the counted arrays of a
 *                            per-index region 1 << SHIFT bytes long (the
 *                            allocator's caches): arch/x86_64/parts.h
 * Each is a statement with exits to its caller's labels, made an
 * expression by RSK_PERCPU_SECTION_ (<rseqkit/percpu.h>).
 */
#ifndef RSEQKIT_ARCH_H
#define RSEQKIT_ARCH_H

#include <stddef.h>
#include <stdint.h>
#include <rseqkit/abi.h>
#include <rseqkit/inject.h>
#include <rseqkit/tsan.h>

#define RSK_ARCH_INSIDE 1
#include <rseqkit/arch/area.h>

/* Each variant of the operations: plain and gated, for each index field
 * (or the one `_at` form), through arch/variant.h. */
#ifdef RSK_ARCH_HAS_AREA_OFFSET
#define RSK_ARCH_OPS_FILE     RSK_ARCH_OPS_H
#define RSK_ARCH_INDEX_PARAMS rsk_arch_area_t area, uint32_t ioff, int idx
#define RSK_ARCH_INDEX_ARGS   area, ioff, idx
#define RSK_ARCH_X	      at
#define RSK_ARCH_GATED	      0
#include <rseqkit/arch/variant.h>
#undef RSK_ARCH_GATED
#define RSK_ARCH_GATED 1
#include <rseqkit/arch/variant.h>
#undef RSK_ARCH_GATED
#undef RSK_ARCH_X
#else
#define RSK_ARCH_OPS_FILE     RSK_ARCH_OPS_H
#define RSK_ARCH_INDEX_PARAMS rsk_arch_area_t area, int idx
#define RSK_ARCH_INDEX_ARGS   area, idx
#define RSK_ARCH_GATED	      0
#define RSK_ARCH_X	      cpu
#define RSK_ARCH_OFF	      "4"
#include <rseqkit/arch/variant.h>
#undef RSK_ARCH_X
#undef RSK_ARCH_OFF
#define RSK_ARCH_X   cid
#define RSK_ARCH_OFF "24"
#include <rseqkit/arch/variant.h>
#undef RSK_ARCH_X
#undef RSK_ARCH_OFF
#undef RSK_ARCH_GATED
#define RSK_ARCH_GATED 1
#define RSK_ARCH_X     cpu
#define RSK_ARCH_OFF   "4"
#include <rseqkit/arch/variant.h>
#undef RSK_ARCH_X
#undef RSK_ARCH_OFF
#define RSK_ARCH_X   cid
#define RSK_ARCH_OFF "24"
#include <rseqkit/arch/variant.h>
#undef RSK_ARCH_X
#undef RSK_ARCH_OFF
#undef RSK_ARCH_GATED
#undef RSK_ARCH_OPS_FILE
#undef RSK_ARCH_INDEX_PARAMS
#undef RSK_ARCH_INDEX_ARGS

/* `_at`: a choice between the cpu and cid functions. */
#define RSK_ARCH_OPS_FILE      "rseqkit/arch/at.h"
#define RSK_ARCH_INDEX_PARAMS  rsk_arch_area_t area, uint32_t ioff, int idx
#define RSK_ARCH_INDEX_ARGS    area, ioff, idx
#define RSK_ARCH_AT_DISPATCH   1
#define RSK_ARCH_X	       at
#define RSK_ARCH_GATED	       0
#include <rseqkit/arch/variant.h>
#undef RSK_ARCH_GATED
#define RSK_ARCH_GATED 1
#include <rseqkit/arch/variant.h>
#undef RSK_ARCH_GATED
#undef RSK_ARCH_X
#undef RSK_ARCH_AT_DISPATCH
#endif
#undef RSK_ARCH_OPS_FILE
#undef RSK_ARCH_INDEX_PARAMS
#undef RSK_ARCH_INDEX_ARGS

#ifdef RSK_ARCH_PARTS_H
#include RSK_ARCH_PARTS_H
#endif
#undef RSK_ARCH_INSIDE

#endif /* RSEQKIT_ARCH_H */
