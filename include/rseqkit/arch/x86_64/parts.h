/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/x86_64/parts.h - x86-64's part operations: sections that
 * read the index themselves, on per-index slots whose layout (slot size,
 * word displacements, capacity) the caller gives: no structure is known
 * here.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/x86_64/parts.h"
#endif
#ifndef RSEQKIT_ARCH_X86_64_PARTS_H
#define RSEQKIT_ARCH_X86_64_PARTS_H

/*
 * Part operations (optional in the contract: RSK_ARCH_HAS_PART_OPS).  For
 * slots of 1 << SHIFT bytes at `base`, the section itself reads the index
 * after arming - a read inside the section needs no re-check: the kernel
 * restarts the section if the thread moves - and works on the slot's
 * words at base + DISP + (index << SHIFT), the gate at GDISP.  The index
 * is read as a signed 32-bit value and not compared with the number of
 * slots: a registered thread's cpu_id and mm_cid are below the kernel's
 * nr_cpu_ids, which the caller's slots cover, and the only other values
 * an area holds, -1 and -2 (not registered, registration failed), land on
 * the two slots before slot 0, whose gates the caller keeps closed (the
 * structures' guard parts, <rseqkit/percpu.h>): the section leaves
 * through `stopped`.  On commit,
 * pos holds index << SHIFT.  These are statements, not functions: the
 * displacements must be constants in the instruction, and the exits are
 * the caller's labels, by name: cmpfail (CAS, POP), aborted, stopped.
 *
 *   RSK_ARCH_PART_ADD:    *(slot + VDISP) += count, with no gate (no GDISP):
 *                         a negative index leaves through `stopped`
 *   RSK_ARCH_PART_CAS:    if (*(slot + VDISP) == expect) *(slot + VDISP) = newv
 *                         (else leave through `cmpfail`)
 *   RSK_ARCH_PART_CAS_UNGATED: the same with no gate (no GDISP): a negative
 *                         index (-1, -2) leaves through `stopped` instead
 *   RSK_ARCH_PART_PUSH:   node->next = *(slot + VDISP); *(slot + VDISP) = node,
 *                         with release ordering (next at byte NEXT of node)
 *   RSK_ARCH_PART_POP:    head = *(slot + VDISP); if 0 leave through `cmpfail`;
 *                         *(slot + VDISP) = *(head + NEXT)
 */
#ifndef RSEQKIT_ANALYZER /* see percpu.h: the analyser gets a C model */
#define RSK_ARCH_HAS_PART_OPS 1
#endif

/*
 * The frame every statement below shares: a scratch register (tmp), the
 * injection counts, and one asm goto whose `enter` is the statement's
 * start (descriptor, exits, arming, index read and gate check), whose
 * `body` ends with the commit store, and which leaves for the caller's
 * labels.  out, in, clobbers: parenthesized lists (out and in with a
 * leading comma where not empty).  `pre`: the statement's own locals and
 * what runs before the section (a push's release barrier).
 */
#define RSK_X64_PART_SECTION(pre, enter, body, out, in, clobbers, ...)         \
	do {                                                                   \
		intptr_t tmp;                                                  \
		RSK_ARCH_INJECT_DECL                                           \
		pre;                                                           \
		__asm__ __volatile__ goto(enter body "2:\n\t" RSK_ASM_ABORT     \
					  : [tmp] "=&r"(tmp) RSK_ARCH_LIST(out)  \
						RSK_ARCH_INJECT_OUT            \
					  : RSK_ARCH_LIST(in) RSK_ARCH_INJECT_IN \
					  : RSK_ARCH_LIST(clobbers)            \
					  : __VA_ARGS__);                      \
	} while (0)

#define RSK_X64_PART_ENTER                                            \
	RSK_ASM_EXIT("stopped") RSK_ASM_DESCRIBE RSK_ASM_ARM "1:\n\t" RSK_INJECT_ASM(1) \
	"movslq %%fs:(%[area], %[ioff]), %[pos]\n\t"                            \
	"shlq %[shift], %[pos]\n\t" RSK_INJECT_ASM(2)                          \
	"cmpq $0, %c[gdisp](%[base], %[pos])\n\t"                              \
	"jnz %l[stopped]\n\t"
/* The ungated part operations' start: a sign test instead of the gate. */
#define RSK_X64_PART_ENTER_UNGATED                                             \
	RSK_ASM_EXIT("stopped") RSK_ASM_DESCRIBE RSK_ASM_ARM "1:\n\t" RSK_INJECT_ASM(1) \
	"movslq %%fs:(%[area], %[ioff]), %[pos]\n\t"                            \
	"shlq %[shift], %[pos]\n\t"                                            \
	"js %l[stopped]\n\t" RSK_INJECT_ASM(2)
/* The inputs of the ungated operations, and with the gate's displacement
 * those of the gated ones. */
#define RSK_X64_PART_IN_UNGATED(area_, ioff_, base_, shift_, vdisp_)            \
	[area] "r"(area_), [ioff] "r"((uintptr_t)(ioff_)), [base] "r"(base_),  \
		[shift] "i"(shift_), [vdisp] "i"(vdisp_)
#define RSK_X64_PART_IN(area_, ioff_, base_, shift_, vdisp_, gdisp_)            \
	RSK_X64_PART_IN_UNGATED(area_, ioff_, base_, shift_, vdisp_), [gdisp] "i"(gdisp_)

#define RSK_ARCH_PART_ADD(area_, ioff_, base_, pos_, shift_, vdisp_, count_)  \
	RSK_X64_PART_SECTION(, RSK_X64_PART_ENTER_UNGATED,                      \
			     "addq %[count], %c[vdisp](%[base], %[pos])\n",     \
			     (, [pos] "=&r"(pos_)),                             \
			     (RSK_X64_PART_IN_UNGATED(area_, ioff_, base_, shift_, vdisp_), \
			      [count] "re"(count_)),                            \
			     ("cc"), aborted, stopped)

/*
 * Stride operation (optional in the contract: RSK_ARCH_HAS_STRIDE_OPS),
 * for per-CPU memory whose copy i of an object is at obj + (i << SHIFT)
 * (<rseqkit/mempool.h>): the section reads the index as a signed 32-bit
 * value, scales it by the stride, leaves through `stopped` if the gate's
 * copy i (gate + pos) is not 0, and adds count to obj + pos.  The index
 * is neither compared with the number of copies nor tested for its sign,
 * for the reasons the part operations give: the copies cover every
 * possible CPU, and -1 and -2 (not registered) select the two guard
 * strides below the gate's copy 0, whose gate words are never 0
 * (src/alloc/percpu_memory.c, "Guard strides").  The gate must be such a guarded
 * array: the pool's.  On commit, pos holds index << SHIFT.
 * RSK_ARCH_HAS_STRIDE_OPS also turns on the counted-array operations
 * below.
 */
#define RSK_ARCH_HAS_STRIDE_OPS 1
#define RSK_ARCH_STRIDE_GATED_ADD(area_, ioff_, obj_, gate_, shift_, pos_, count_)        \
	RSK_X64_PART_SECTION(,                                                 \
			     RSK_ASM_EXIT("stopped") RSK_ASM_DESCRIBE RSK_ASM_ARM \
			     "1:\n\t" RSK_INJECT_ASM(1)                         \
			     "movslq %%fs:(%[area], %[ioff]), %[pos]\n\t"       \
			     "shlq %[shift], %[pos]\n\t"                        \
			     "cmpq $0, (%[gate], %[pos])\n\t"                   \
			     "jnz %l[stopped]\n\t"                              \
			     RSK_INJECT_ASM(2), /* as rsk_gated_add: after the gate */ \
			     "addq %[count], (%[obj], %[pos])\n",               \
			     (, [pos] "=&r"(pos_)),                             \
			     ([area] "r"(area_), [ioff] "r"((uintptr_t)(ioff_)), \
			      [obj] "r"(obj_), [gate] "r"(gate_), [shift] "i"(shift_), \
			      [count] "re"(count_)),                            \
			     ("cc"), aborted, stopped)

/*
 * Counted arrays (with RSK_ARCH_HAS_STRIDE_OPS): part i at parts + i *
 * stride holds a count (at CDISP), a gate (GDISP) and up to CAP words
 * (from SDISP).  The section reads the index, leaves through `stopped`
 * if it is negative or the part's gate is closed, reads the count and
 * leaves through `cmpfail` if the part is full (push) or empty (pop);
 * otherwise it stores the word above the count (push) or loads the top
 * one (pop) and commits the new count.  idx is the index on success.
 * No "memory" clobber (so the caller's fields stay in registers across a
 * loop): the push is preceded by a compiler barrier (what the word points
 * to is written first), and what a pop's caller reads through the word
 * depends on it.
 */
#define RSK_X64_STRIDE_PART_ENTER                                              \
	RSK_ASM_EXIT("cmpfail")                                                \
	RSK_ASM_EXIT("stopped") RSK_ASM_DESCRIBE RSK_ASM_ARM "1:\n\t" RSK_INJECT_ASM(1) \
	"movslq %%fs:(%[area], %[ioff]), %[idx]\n\t"                           \
	"testq %[idx], %[idx]\n\t"                                             \
	"js %l[stopped]\n\t"                                                   \
	"movq %[idx], %[p]\n\t"                                                \
	"imulq %[stride], %[p]\n\t"                                            \
	"addq %[parts], %[p]\n\t"                                              \
	"cmpq $0, %c[gdisp](%[p])\n\t"                                         \
	"jnz %l[stopped]\n\t" RSK_INJECT_ASM(2)                                \
	"movq %c[cdisp](%[p]), %[cnt]\n\t"
#define RSK_X64_STRIDE_PART_IN(area_, ioff_, parts_, stride_, cdisp_, gdisp_, sdisp_) \
	[area] "r"(area_), [ioff] "r"((uintptr_t)(ioff_)), [parts] "r"(parts_),  \
		[stride] "r"((uintptr_t)(stride_)), [cdisp] "i"(cdisp_),        \
		[gdisp] "i"(gdisp_), [sdisp] "i"(sdisp_)

#define RSK_ARCH_COUNTED_PUSH(area_, ioff_, parts_, stride_, cdisp_, gdisp_, sdisp_, cap_, \
				 ptr_, idx_)                                   \
	RSK_X64_PART_SECTION(intptr_t p_; intptr_t cnt_;                        \
			     RSK_X64_BARRIER() /* release: what ptr_ points to first */, \
			     RSK_X64_STRIDE_PART_ENTER,                         \
			     "cmpq %[cap], %[cnt]\n\t"                          \
			     "jae %l[cmpfail]\n\t"                              \
			     "movq %[ptr], %c[sdisp](%[p], %[cnt], 8)\n\t"      \
			     "incq %[cnt]\n\t" RSK_INJECT_ASM(3)                \
			     "movq %[cnt], %c[cdisp](%[p])\n",                  \
			     (, [idx] "=&r"(idx_), [p] "=&r"(p_), [cnt] "=&r"(cnt_)), \
			     (RSK_X64_STRIDE_PART_IN(area_, ioff_, parts_, stride_, cdisp_, \
						     gdisp_, sdisp_),           \
			      [cap] "r"(cap_), [ptr] "r"(ptr_)),                \
			     ("cc"), cmpfail, aborted, stopped)

#define RSK_ARCH_COUNTED_POP(area_, ioff_, parts_, stride_, cdisp_, gdisp_, sdisp_, out_, \
				idx_)                                          \
	RSK_X64_PART_SECTION(intptr_t p_; intptr_t cnt_, RSK_X64_STRIDE_PART_ENTER, \
			     "testq %[cnt], %[cnt]\n\t"                         \
			     "jz %l[cmpfail]\n\t"                               \
			     "movq %c[sdisp]-8(%[p], %[cnt], 8), %[out]\n\t"    \
			     "decq %[cnt]\n\t" RSK_INJECT_ASM(3)                \
			     "movq %[cnt], %c[cdisp](%[p])\n",                  \
			     (, [idx] "=&r"(idx_), [p] "=&r"(p_), [cnt] "=&r"(cnt_), \
			      [out] "=&r"(out_)),                               \
			     (RSK_X64_STRIDE_PART_IN(area_, ioff_, parts_, stride_, cdisp_, \
						     gdisp_, sdisp_)),          \
			     ("cc"), cmpfail, aborted, stopped)

#define RSK_ARCH_PART_CAS(area_, ioff_, base_, pos_, shift_, vdisp_, gdisp_, expect_, newv_) \
	RSK_X64_PART_SECTION(, RSK_ASM_EXIT("cmpfail") RSK_X64_PART_ENTER,      \
			     "cmpq %[expect], %c[vdisp](%[base], %[pos])\n\t"   \
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)            \
			     "movq %[newv], %c[vdisp](%[base], %[pos])\n",      \
			     (, [pos] "=&r"(pos_)),                             \
			     (RSK_X64_PART_IN(area_, ioff_, base_, shift_, vdisp_, gdisp_), \
			      [expect] "re"(expect_), [newv] "re"(newv_)),      \
			     ("cc"), cmpfail, aborted, stopped)

#define RSK_ARCH_PART_CAS_UNGATED(area_, ioff_, base_, pos_, shift_, vdisp_, expect_, newv_) \
	RSK_X64_PART_SECTION(, RSK_ASM_EXIT("cmpfail") RSK_X64_PART_ENTER_UNGATED, \
			     "cmpq %[expect], %c[vdisp](%[base], %[pos])\n\t"   \
			     "jnz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)            \
			     "movq %[newv], %c[vdisp](%[base], %[pos])\n",      \
			     (, [pos] "=&r"(pos_)),                             \
			     (RSK_X64_PART_IN_UNGATED(area_, ioff_, base_, shift_, vdisp_), \
			      [expect] "re"(expect_), [newv] "re"(newv_)),      \
			     ("cc"), cmpfail, aborted, stopped)

#define RSK_ARCH_PART_PUSH(area_, ioff_, base_, pos_, shift_, vdisp_, gdisp_, node_, next_) \
	RSK_X64_PART_SECTION(RSK_X64_BARRIER() /* release: what the node_ holds first */, \
			     RSK_X64_PART_ENTER,                                \
			     "movq %c[vdisp](%[base], %[pos]), %[tmp]\n\t"      \
			     "movq %[tmp], %c[next](%[node])\n\t" RSK_INJECT_ASM(3) \
			     "movq %[node], %c[vdisp](%[base], %[pos])\n",      \
			     (, [pos] "=&r"(pos_)),                             \
			     (RSK_X64_PART_IN(area_, ioff_, base_, shift_, vdisp_, gdisp_), \
			      [node] "r"(node_), [next] "i"(next_)),            \
			     ("memory", "cc"), aborted, stopped)

#define RSK_ARCH_PART_POP(area_, ioff_, base_, pos_, shift_, vdisp_, gdisp_, head_, next_) \
	RSK_X64_PART_SECTION(, RSK_ASM_EXIT("cmpfail") RSK_X64_PART_ENTER,      \
			     "movq %c[vdisp](%[base], %[pos]), %[head]\n\t"     \
			     "testq %[head], %[head]\n\t"                       \
			     "jz %l[cmpfail]\n\t" RSK_INJECT_ASM(3)             \
			     "movq %c[next](%[head]), %[tmp]\n\t"               \
			     "movq %[tmp], %c[vdisp](%[base], %[pos])\n",       \
			     (, [pos] "=&r"(pos_), [head] "=&r"(head_)),        \
			     (RSK_X64_PART_IN(area_, ioff_, base_, shift_, vdisp_, gdisp_), \
			      [next] "i"(next_)),                               \
			     ("memory", "cc"), cmpfail, aborted, stopped)

/*
 * Region caches (optional in the contract: RSK_ARCH_HAS_REGION_OPS), for
 * one region of 1 << SHIFT bytes per index at `base`, holding a cache at
 * the same place in each: at cache = base + (index << SHIFT) + koff (koff
 * a register, the caller's choice of cache; the displacements below are
 * from there) a count (CDISP, a word), a gate (GDISP), slots (from
 * SDISP) and a 32-bit capacity (LDISP) that may change at any time.  The
 * section reads the index as a signed 32-bit value, leaves through
 * `stopped` if it is negative (the shift keeps the sign: no guard region
 * is needed) or the gate is not 0, and compares the count with the
 * capacity it reads inside: the push leaves through `cmpfail` if count >=
 * capacity, the pop if count - 1 >= capacity (unsigned: empty, or above a
 * capacity that shrank); otherwise the push stores ptr in slot count and
 * commits count + 1, the pop loads slot count - 1 and commits count - 1.
 * The count is compared in its low 32 bits: it is in [0, capacity], below
 * 2^31.  Neither the index nor koff is compared with a bound: a
 * registered thread's index is below nr_cpu_ids, which the caller's
 * regions cover.  No index is returned and there is no "memory" clobber,
 * as for the counted arrays: the push is preceded by a compiler barrier
 * (release on x86-64), and what a pop's caller reads through the word
 * depends on it.
 */
#define RSK_ARCH_HAS_REGION_OPS 1
#define RSK_X64_REGION_ENTER                                                   \
	RSK_ASM_EXIT("cmpfail")                                                \
	RSK_ASM_EXIT("stopped") RSK_ASM_DESCRIBE RSK_ASM_ARM "1:\n\t" RSK_INJECT_ASM(1) \
	"movslq %%fs:(%[area], %[ioff]), %[p]\n\t"                             \
	"shlq %[shift], %[p]\n\t"                                              \
	"js %l[stopped]\n\t"                                                   \
	"addq %[base], %[p]\n\t"                                               \
	"addq %[koff], %[p]\n\t"                                               \
	"cmpq $0, %c[gdisp](%[p])\n\t"                                         \
	"jnz %l[stopped]\n\t" RSK_INJECT_ASM(2)                                \
	"movq %c[cdisp](%[p]), %[cnt]\n\t"
/* koff is added last: a free's koff depends on the object's address,
 * which comes from a malloc just before; base and the index do not. */
#define RSK_X64_REGION_IN(area_, ioff_, base_, koff_, shift_, cdisp_, gdisp_, sdisp_, ldisp_) \
	[area] "r"(area_), [ioff] "r"((uintptr_t)(ioff_)), [base] "r"((uintptr_t)(base_)), \
		[koff] "r"((uintptr_t)(koff_)), [shift] "i"(shift_),           \
		[cdisp] "i"(cdisp_), [gdisp] "i"(gdisp_), [sdisp] "i"(sdisp_), [ldisp] "i"(ldisp_)

#define RSK_ARCH_REGION_PUSH(area_, ioff_, base_, koff_, shift_, cdisp_, gdisp_, sdisp_, ldisp_, \
			     ptr_)                                             \
	RSK_X64_PART_SECTION(intptr_t p_; intptr_t cnt_;                        \
			     RSK_X64_BARRIER() /* release: what ptr_ points to first */, \
			     RSK_X64_REGION_ENTER,                              \
			     "cmpl %c[ldisp](%[p]), %k[cnt]\n\t"                \
			     "jae %l[cmpfail]\n\t"                              \
			     "movq %[ptr], %c[sdisp](%[p], %[cnt], 8)\n\t"      \
			     "incq %[cnt]\n\t" RSK_INJECT_ASM(3)                \
			     "movq %[cnt], %c[cdisp](%[p])\n",                  \
			     (, [p] "=&r"(p_), [cnt] "=&r"(cnt_)),              \
			     (RSK_X64_REGION_IN(area_, ioff_, base_, koff_, shift_, cdisp_, gdisp_, \
						sdisp_, ldisp_),                \
			      [ptr] "r"(ptr_)),                                 \
			     ("cc"), cmpfail, aborted, stopped)

#define RSK_ARCH_REGION_POP(area_, ioff_, base_, koff_, shift_, cdisp_, gdisp_, sdisp_, ldisp_, \
			    out_)                                              \
	RSK_X64_PART_SECTION(intptr_t p_; intptr_t cnt_, RSK_X64_REGION_ENTER,  \
			     "decq %[cnt]\n\t"                                  \
			     "cmpl %c[ldisp](%[p]), %k[cnt]\n\t"                \
			     "jae %l[cmpfail]\n\t"                              \
			     "movq %c[sdisp](%[p], %[cnt], 8), %[out]\n\t" RSK_INJECT_ASM(3) \
			     "movq %[cnt], %c[cdisp](%[p])\n",                  \
			     (, [p] "=&r"(p_), [cnt] "=&r"(cnt_), [out] "=&r"(out_)), \
			     (RSK_X64_REGION_IN(area_, ioff_, base_, koff_, shift_, cdisp_, gdisp_, \
						sdisp_, ldisp_)),               \
			     ("cc"), cmpfail, aborted, stopped)

#endif /* RSEQKIT_ARCH_X86_64_PARTS_H */

/* The counted copy operations (a file of their own). */
#include <rseqkit/arch/x86_64/copy.h>
