/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/x86_64/copy.h - x86-64's counted copy operations: the
 * counted arrays of arch/x86_64/parts.h (part i at parts + i * stride: a
 * count at CDISP, a gate at GDISP, slots from SDISP) whose slots are items
 * of W words, W a constant (1, 2, 4 or 8), copied unrolled inside the
 * section.  Included at the end of arch/x86_64/parts.h.
 *
 * RSK_ARCH_HAS_COUNTED_COPY (optional in the contract, with
 * RSK_ARCH_HAS_STRIDE_OPS):
 *
 *   RSK_ARCH_COUNTED_COPY_PUSH: the section reads the index, leaves
 *       through `stopped` if it is negative or the part's gate is closed,
 *       reads the count, leaves through `cmpfail` if it is cap or more,
 *       copies the W words at src to slot `count` and commits count + 1.
 *   RSK_ARCH_COUNTED_COPY_POP: the same up to the count, leaves through
 *       `cmpfail` if it is 0, copies slot count - 1 to the W words at dst
 *       and commits count - 1.
 *
 * The buffer's constants are words of its header, at hdr_ + PARTS (the
 * address of part 0), + STRIDE (bytes from one part to the next) and,
 * for the push, + CAP (items per part), written once before any
 * operation: the section reads them there.  part_ is the address of the
 * part on success: the index is not kept, so that clang can spare the
 * register (see RSK_X64_COPY_INDEX); callers that want it divide.
 * Both read the count inside the section, so nothing but the buffer's
 * constants is read before it, and the copy is of the slot the commit
 * publishes or releases.
 *
 * Neither clobbers "memory" (the slots and the count are read in C only
 * through atomics or out-of-line code), so the caller's values stay in
 * registers across them.  The item is a memory operand of type char,
 * which may alias whatever type the caller stored it as: an input of the
 * push (every store to it is emitted before the section) and an input
 * and output of the pop (what the caller has cached of it is read again
 * after).  With gcc its size is unknown: a sized operand would say the
 * item's bytes exactly, but gcc 12 then warns of the sizes that the
 * caller's buffer does not select, on the branches it cannot rule out.
 * clang takes no operand of an incomplete type: it gets the W words.
 * A pop that does not commit may have written part of dst.
 *
 * The push orders nothing else.  RSK_ARCH_COUNTED_COPY_RELEASE(), put
 * before it, makes its commit a release: a compiler barrier, so that
 * every store before it (and what the item points to) is emitted before
 * the section, which on x86 (TSO) is enough.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/arch.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/x86_64/copy.h"
#endif
#ifndef RSEQKIT_ARCH_X86_64_COPY_H
#define RSEQKIT_ARCH_X86_64_COPY_H

#ifdef RSK_ARCH_HAS_STRIDE_OPS
#define RSK_ARCH_HAS_COUNTED_COPY 1
#define RSK_ARCH_COUNTED_COPY_RELEASE() RSK_X64_BARRIER()

/* One word k of a copy: from k*8(s) to k*8(d), through tmp. */
#define RSK_X64_CW(k, s, d)                                                    \
	"movq " #k "*8(%[" s "]), %[tmp]\n\t"                                  \
	"movq %[tmp], " #k "*8(%[" d "])\n\t"
#define RSK_X64_COPY_1(s, d) RSK_X64_CW(0, s, d)
#define RSK_X64_COPY_2(s, d) RSK_X64_CW(0, s, d) RSK_X64_CW(1, s, d)
#define RSK_X64_COPY_4(s, d) RSK_X64_COPY_2(s, d) RSK_X64_CW(2, s, d) RSK_X64_CW(3, s, d)
#define RSK_X64_COPY_8(s, d)                                                   \
	RSK_X64_COPY_4(s, d) RSK_X64_CW(4, s, d) RSK_X64_CW(5, s, d)           \
	RSK_X64_CW(6, s, d) RSK_X64_CW(7, s, d)
/* The W-word item at p as a memory operand of char (see above). */
#ifdef __clang__
#define RSK_X64_ITEM(type, W, p) (*(type(*)[(W) * 8])(p))
#else
#define RSK_X64_ITEM(type, W, p) (*(type(*)[])(p))
#endif
/* The index, read into p to be scaled.  clang 14 spills the caller's
 * values around a section of 9 registers, so with clang p is the only
 * register the index takes; gcc's copy loops are no faster that way, and
 * it reads the index into a scratch register first (make bench, the
 * yardstick's copybuf rows). */
#ifdef __clang__
#define RSK_X64_COPY_INDEX                                                     \
	"movslq %%fs:(%[area], %[ioff]), %[p]\n\t"                             \
	"testq %[p], %[p]\n\t"                                                 \
	"js %l[stopped]\n\t"
#define RSK_X64_COPY_IDX_DECL
#define RSK_X64_COPY_IDX_OUT
#else
#define RSK_X64_COPY_INDEX                                                     \
	"movslq %%fs:(%[area], %[ioff]), %[idx]\n\t"                           \
	"testq %[idx], %[idx]\n\t"                                             \
	"js %l[stopped]\n\t"                                                   \
	"movq %[idx], %[p]\n\t"
#define RSK_X64_COPY_IDX_DECL intptr_t idx_scratch_;
#define RSK_X64_COPY_IDX_OUT , [idx] "=&r"(idx_scratch_)
#endif
/* log2 of a W-word item's bytes: the slot's offset is count << it. */
#define RSK_X64_ITEM_SHIFT_1 "3"
#define RSK_X64_ITEM_SHIFT_2 "4"
#define RSK_X64_ITEM_SHIFT_4 "5"
#define RSK_X64_ITEM_SHIFT_8 "6"

/* The start: the counted arrays' (RSK_X64_STRIDE_PART_ENTER), with the
 * parts' address and the stride read from the header where they are: the
 * header is one register, not three (clang 14 spills around the section
 * when they are registers or memory operands of their own). */
#define RSK_X64_COPY_ENTER                                                     \
	RSK_ASM_EXIT("cmpfail")                                                \
	RSK_ASM_EXIT("stopped") RSK_ASM_DESCRIBE RSK_ASM_ARM "1:\n\t" RSK_INJECT_ASM(1) \
	RSK_X64_COPY_INDEX                                                     \
	"imulq %c[stride](%[hdr]), %[p]\n\t"                                   \
	"addq %c[parts](%[hdr]), %[p]\n\t"                                     \
	"cmpq $0, %c[gdisp](%[p])\n\t"                                         \
	"jnz %l[stopped]\n\t" RSK_INJECT_ASM(2)                                \
	"movq %c[cdisp](%[p]), %[cnt]\n\t"
#define RSK_X64_COPY_IN(area_, ioff_, hdr_, parts_, stride_, cdisp_, gdisp_, sdisp_) \
	[area] "r"(area_), [ioff] "r"((uintptr_t)(ioff_)), [hdr] "r"(hdr_),     \
		[parts] "i"(parts_), [stride] "i"(stride_), [cdisp] "i"(cdisp_), \
		[gdisp] "i"(gdisp_), [sdisp] "i"(sdisp_)

/* slot = p + SDISP + (cnt << shift), into s_. */
#define RSK_X64_SLOT(W)                                                        \
	"movq %[cnt], %[s]\n\t"                                                \
	"shlq $" RSK_X64_ITEM_SHIFT_##W ", %[s]\n\t"                           \
	"leaq %c[sdisp](%[p], %[s]), %[s]\n\t"

#define RSK_ARCH_COUNTED_COPY_PUSH(area_, ioff_, hdr_, parts_, stride_, cap_, cdisp_, gdisp_, \
				   sdisp_, W, src_, part_)                      \
	RSK_X64_PART_SECTION(RSK_X64_COPY_IDX_DECL intptr_t cnt_; intptr_t s_, \
			     RSK_X64_COPY_ENTER,                                \
			     "cmpq %c[cap](%[hdr]), %[cnt]\n\t"                 \
			     "jae %l[cmpfail]\n\t"                              \
			     RSK_X64_SLOT(W)                                    \
			     RSK_X64_COPY_##W("src", "s")                       \
			     "incq %[cnt]\n\t" RSK_INJECT_ASM(3)                \
			     "movq %[cnt], %c[cdisp](%[p])\n",                  \
			     (RSK_X64_COPY_IDX_OUT, [p] "=&r"(part_), [cnt] "=&r"(cnt_), \
			      [s] "=&r"(s_)),                                   \
			     (RSK_X64_COPY_IN(area_, ioff_, hdr_, parts_, stride_, cdisp_, \
					      gdisp_, sdisp_),                  \
			      [cap] "i"(cap_), [src] "r"(src_),                 \
			      "m"(RSK_X64_ITEM(const char, W, src_))),          \
			     ("cc"), cmpfail, aborted, stopped)

#define RSK_ARCH_COUNTED_COPY_POP(area_, ioff_, hdr_, parts_, stride_, cdisp_, gdisp_, sdisp_, \
				  W, dst_, part_)                               \
	RSK_X64_PART_SECTION(RSK_X64_COPY_IDX_DECL intptr_t cnt_; intptr_t s_, \
			     RSK_X64_COPY_ENTER,                                \
			     "subq $1, %[cnt]\n\t"                              \
			     "jb %l[cmpfail]\n\t"                               \
			     RSK_X64_SLOT(W)                                    \
			     RSK_X64_COPY_##W("s", "dst")                       \
			     RSK_INJECT_ASM(3)                                  \
			     "movq %[cnt], %c[cdisp](%[p])\n",                  \
			     (RSK_X64_COPY_IDX_OUT, [p] "=&r"(part_), [cnt] "=&r"(cnt_), \
			      [s] "=&r"(s_), "+m"(RSK_X64_ITEM(char, W, dst_))), \
			     (RSK_X64_COPY_IN(area_, ioff_, hdr_, parts_, stride_, cdisp_, \
					      gdisp_, sdisp_),                  \
			      [dst] "r"(dst_)),                                 \
			     ("cc"), cmpfail, aborted, stopped)

#endif /* RSK_ARCH_HAS_STRIDE_OPS */
#endif /* RSEQKIT_ARCH_X86_64_COPY_H */
