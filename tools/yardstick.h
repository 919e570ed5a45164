/* SPDX-License-Identifier: MIT */
/*
 * yardstick.h - the hand-written limit: each structure's operation written
 * directly on the kernel's rseq ABI, as a careful expert would write it for
 * that one structure, one index mode, no gate, no bound check.
 *
 * Used by rseqkit-bench ("hand-written" rows) and by the instruction-count
 * loops (tools/insn-loops.c).  Nothing here uses rseqkit: only glibc's
 * registration (__rseq_offset, __rseq_size, weak) and these ABI facts:
 *
 *   struct rseq at thread pointer (%fs base) + __rseq_offset:
 *     +4 u32 cpu_id, +8 u64 rseq_cs, +24 u32 mm_cid (kernel feature size
 *     >= 28, i.e. getauxval(AT_RSEQ_FEATURE_SIZE = 27) >= 28)
 *   struct rseq_cs (32-byte aligned): u32 version 0, u32 flags 0,
 *     u64 start_ip, u64 post_commit_offset, u64 abort_ip
 *   the u32 before abort_ip is the signature, 0x53053053 on x86
 *     (emitted as the ud1 instruction 0f b9 3d + the word)
 *
 * Shape of every section (numeric labels are local to one asm statement):
 *   0: arm       leaq 3b(%rip), t ; movq t, %fs:8(off)
 *   1: start     movl %fs:4(off) or %fs:24(off), t   - the index, read
 *                after arming: the one read is its own re-check (the
 *                kernel restarts the section if the thread is preempted,
 *                migrated or signalled from here to the commit, which is
 *                the only way cpu_id or mm_cid can change under it)
 *                ... loads, compares, speculative stores ...
 *                the commit store
 *   2: end       (post_commit_offset = 2b - 1b)
 *   3:           the descriptor, in __rseq_cs (and its pointer in
 *                __rseq_cs_ptr_array, for debuggers and tools)
 *   4: abort     in __rseq_failure, right after the signature: jmp 0b
 *                (the kernel clears rseq_cs on abort: re-arm, retry)
 * An early exit (lock held, list empty, buffer full) is a jump out of the
 * section to a C label (asm goto).
 *
 * Parts: every CPU (or concurrency id) has a part starting on a 128-byte
 * boundary: counter, lock and list parts are 128 bytes (the word at +0);
 * buffer parts are 1 << YS_*_SHIFT bytes, the count at +0 and the slots
 * from +16 (the library's layout), so the index becomes an offset with
 * one shift.  No index is bound-checked: cpu_id and mm_cid are below the
 * number of possible CPUs, for which the caller allocates parts, whenever
 * the thread is registered (checked once per thread: ys_thread_ok()).
 *
 * x86-64 only (YS_HAVE_HAND); elsewhere the rows say n/a.
 */
#ifndef RSEQKIT_YARDSTICK_H
#define RSEQKIT_YARDSTICK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/auxv.h>
#include <sys/syscall.h>

/* A list node of the hand-written and thread-local stack rows. */
struct ys_node {
	struct ys_node *next; /* at +0: the pop reads it there */
	intptr_t id;
};

#if defined(__x86_64__) && defined(__linux__)
#define YS_HAVE_HAND 1

extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

/* Offsets of struct rseq fields (DESIGN.md section 2). */
#define YS_OFF_CPU_ID "4"
#define YS_OFF_MM_CID "24"

/* Buffer parts: 1 << shift bytes, count at +0, slots from +16. */
#define YS_PTR_SHIFT 11 /* 2 KiB: 254 pointers */
#define YS_PTR_CAP 254
#define YS_C16_SHIFT 12 /* 4 KiB: 255 items of 16 bytes */
#define YS_C16_CAP 255
#define YS_C64_SHIFT 14 /* 16 KiB: 255 items of 64 bytes */
#define YS_C64_CAP 255
#define YS_STR_(x) #x
#define YS_STR(x) YS_STR_(x)

/* Arming: rseq_cs = the descriptor.  -DYS_NEGATIVE_CONTROL leaves it
 * out (the kernel then never restarts a section): the negative control
 * that shows the bench's checks catch a broken section. */
#ifdef YS_NEGATIVE_CONTROL
#define YS_ARM_STORE ""
#else
#define YS_ARM_STORE "movq %[t], %%fs:8(%[off])\n"
#endif

/* The descriptor, its pointer, arming; label 1 starts the section. */
#define YS_BEGIN                                                               \
	".pushsection __rseq_cs, \"aw\"\n\t"                                   \
	".balign 32\n"                                                         \
	"3:\n\t"                                                               \
	".long 0, 0\n\t"                                                       \
	".quad 1f, (2f - 1f), 4f\n\t"                                          \
	".popsection\n\t"                                                      \
	".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"                         \
	".quad 3b\n\t"                                                         \
	".popsection\n"                                                        \
	"0:\n\t"                                                               \
	"leaq 3b(%%rip), %[t]\n\t"                                             \
	YS_ARM_STORE                                                           \
	"1:\n\t"

/* Right after the commit store: the end label and the abort handler. */
#define YS_END                                                                 \
	"2:\n\t"                                                               \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                           \
	".long 0x53053053\n"                                                   \
	"4:\n\t"                                                               \
	"jmp 0b\n\t"                                                           \
	".popsection\n"

/* t = index << shift (a movl zero-extends into the whole register). */
#define YS_INDEX(FIELD, SHIFT)                                                 \
	"movl %%fs:" FIELD "(%[off]), %k[t]\n\t"                               \
	"shlq $" SHIFT ", %[t]\n\t"

/* One word of a copy: from k*8(s) to k*8(d) through x. */
#define YS_CW(k, s, d) "movq " #k "*8(%[" s "]), %[x]\n\t" "movq %[x], " #k "*8(%[" d "])\n\t"
#define YS_COPY2(s, d) YS_CW(0, s, d) YS_CW(1, s, d)
#define YS_COPY8(s, d)                                                         \
	YS_CW(0, s, d) YS_CW(1, s, d) YS_CW(2, s, d) YS_CW(3, s, d)            \
	YS_CW(4, s, d) YS_CW(5, s, d) YS_CW(6, s, d) YS_CW(7, s, d)

#define YS_INLINE static inline __attribute__((always_inline, unused))

/* The rseq area offset (valid in every thread once glibc registered). */
YS_INLINE ptrdiff_t ys_offset(void)
{
	return __rseq_offset;
}

/* glibc registered rseq in this process (so every thread is registered). */
static inline __attribute__((unused)) int ys_available(void)
{
	return &__rseq_size != NULL && &__rseq_offset != NULL && __rseq_size != 0;
}

/* The kernel writes mm_cid. */
static inline __attribute__((unused)) int ys_cid_available(void)
{
	return getauxval(27 /* AT_RSEQ_FEATURE_SIZE */) >= 28;
}

YS_INLINE int ys_read_cpu(ptrdiff_t off)
{
	int v;
	__asm__ __volatile__("movl %%fs:" YS_OFF_CPU_ID "(%[off]), %[v]" : [v] "=r"(v) : [off] "r"(off));
	return v;
}

YS_INLINE int ys_read_cid(ptrdiff_t off)
{
	int v;
	__asm__ __volatile__("movl %%fs:" YS_OFF_MM_CID "(%[off]), %[v]" : [v] "=r"(v) : [off] "r"(off));
	return v;
}

/* The calling thread can run sections (cpu_id >= 0). */
static inline __attribute__((unused)) int ys_thread_ok(void)
{
	return ys_available() && ys_read_cpu(ys_offset()) >= 0;
}

/*
 * The operations, once per index mode (MODE cpu / cid, FIELD the offset of
 * cpu_id / mm_cid).  `parts` is the first part; the part of index i is at
 * parts + (i << shift).
 */
#define YS_DEFINE_MODE(MODE, FIELD)                                            \
	/* *(intptr_t *)part += inc: the commit is the add itself. */          \
	YS_INLINE void ys_add_##MODE(ptrdiff_t off, char *parts, intptr_t inc) \
	{                                                                      \
		uintptr_t t;                                                   \
		__asm__ __volatile__(YS_BEGIN YS_INDEX(FIELD, "7")             \
				     "addq %[inc], (%[parts], %[t])\n" YS_END  \
				     : [t] "=&r"(t)                            \
				     : [off] "r"(off), [parts] "r"(parts),     \
				       [inc] "er"(inc)                         \
				     : "memory", "cc");                        \
	}                                                                      \
                                                                               \
	/* Take the part's lock word 0 -> 1; returns the part's byte offset    \
	 * (unlock: ys_unlock(parts, offset), from any CPU).  A held lock     \
	 * belongs to a thread that ran on this CPU: yield to it. */           \
	YS_INLINE uintptr_t ys_lock_##MODE(ptrdiff_t off, char *parts)         \
	{                                                                      \
		uintptr_t t;                                                   \
		for (;;) {                                                     \
			__asm__ __volatile__ goto(YS_BEGIN YS_INDEX(FIELD, "7")             \
				     "cmpq $0, (%[parts], %[t])\n\t"           \
				     "jne %l[busy]\n\t"                        \
				     "movq $1, (%[parts], %[t])\n" YS_END      \
				     : [t] "=&r"(t)                            \
				     : [off] "r"(off), [parts] "r"(parts)      \
				     : "memory", "cc"                          \
				     : busy);                                  \
			return t;                                              \
		busy:                                                          \
			ys_yield_();                                           \
		}                                                              \
	}                                                                      \
                                                                               \
	/* List push: node->next = head (speculative), head = node (commit). */ \
	YS_INLINE void ys_push_##MODE(ptrdiff_t off, char *parts, struct ys_node *node) \
	{                                                                      \
		uintptr_t t, h;                                                \
		__asm__ __volatile__(YS_BEGIN YS_INDEX(FIELD, "7")             \
				     "movq (%[parts], %[t]), %[h]\n\t"         \
				     "movq %[h], (%[node])\n\t"                \
				     "movq %[node], (%[parts], %[t])\n" YS_END \
				     : [t] "=&r"(t), [h] "=&r"(h)              \
				     : [off] "r"(off), [parts] "r"(parts),     \
				       [node] "r"(node)                        \
				     : "memory");                              \
	}                                                                      \
                                                                               \
	/* List pop: head = head->next (commit), the old head returned; NULL  \
	 * when empty.  head->next is read inside the section: no ABA. */     \
	YS_INLINE struct ys_node *ys_pop_##MODE(ptrdiff_t off, char *parts)    \
	{                                                                      \
		uintptr_t t;                                                   \
		struct ys_node *h, *nx;                                        \
		__asm__ __volatile__ goto(YS_BEGIN YS_INDEX(FIELD, "7")                     \
			     "movq (%[parts], %[t]), %[h]\n\t"                 \
			     "testq %[h], %[h]\n\t"                            \
			     "jz %l[empty]\n\t"                                \
			     "movq (%[h]), %[nx]\n\t"                          \
			     "movq %[nx], (%[parts], %[t])\n" YS_END           \
			     : [t] "=&r"(t), [h] "=&r"(h), [nx] "=&r"(nx)      \
			     : [off] "r"(off), [parts] "r"(parts)              \
			     : "memory", "cc"                                  \
			     : empty);                                         \
		if (h == NULL) /* never: tells the caller's NULL test */       \
			__builtin_unreachable();                               \
		return h;                                                      \
	empty:                                                                 \
		return NULL;                                                   \
	}                                                                      \
                                                                               \
	/* Pointer buffer push: slot[count] = ptr (speculative), count + 1    \
	 * (commit); -1 when full. */                                          \
	YS_INLINE int ys_ppush_##MODE(ptrdiff_t off, char *parts, void *ptr)   \
	{                                                                      \
		uintptr_t t, c;                                                \
		__asm__ __volatile__ goto(YS_BEGIN YS_INDEX(FIELD, YS_STR(YS_PTR_SHIFT))    \
			     "addq %[parts], %[t]\n\t"                         \
			     "movq (%[t]), %[c]\n\t"                           \
			     "cmpq $" YS_STR(YS_PTR_CAP) ", %[c]\n\t"          \
			     "jae %l[full]\n\t"                                \
			     "movq %[ptr], 16(%[t], %[c], 8)\n\t"              \
			     "addq $1, %[c]\n\t"                               \
			     "movq %[c], (%[t])\n" YS_END                      \
			     : [t] "=&r"(t), [c] "=&r"(c)                      \
			     : [off] "r"(off), [parts] "r"(parts), [ptr] "r"(ptr) \
			     : "memory", "cc"                                  \
			     : full);                                          \
		return 0;                                                      \
	full:                                                                  \
		return -1;                                                     \
	}                                                                      \
                                                                               \
	/* Pointer buffer pop: count - 1 (commit), slot[count - 1] returned  \
	 * in *out (read inside the section); -1 when empty. */                \
	YS_INLINE int ys_ppop_##MODE(ptrdiff_t off, char *parts, void **out)   \
	{                                                                      \
		uintptr_t t, c;                                                \
		void *p;                                                       \
		__asm__ __volatile__ goto(YS_BEGIN YS_INDEX(FIELD, YS_STR(YS_PTR_SHIFT))    \
			     "addq %[parts], %[t]\n\t"                         \
			     "movq (%[t]), %[c]\n\t"                           \
			     "subq $1, %[c]\n\t"                               \
			     "jb %l[empty]\n\t"                                \
			     "movq 16(%[t], %[c], 8), %[p]\n\t"                \
			     "movq %[c], (%[t])\n" YS_END                      \
			     : [t] "=&r"(t), [c] "=&r"(c), [p] "=&r"(p)        \
			     : [off] "r"(off), [parts] "r"(parts)              \
			     : "memory", "cc"                                  \
			     : empty);                                         \
		*out = p;                                                      \
		return 0;                                                      \
	empty:                                                                 \
		return -1;                                                     \
	}                                                                      \
	YS_DEFINE_COPY(MODE, FIELD, 2, YS_C16_SHIFT, YS_C16_CAP, "4", YS_COPY2) \
	YS_DEFINE_COPY(MODE, FIELD, 8, YS_C64_SHIFT, YS_C64_CAP, "6", YS_COPY8)

/* Copy buffer of W-word items (1 << LOG2SZ bytes): push copies src into
 * item[count] (speculative) and commits count + 1; pop copies
 * item[count - 1] into dst (speculative: dst is the caller's) and commits
 * count - 1.  -1 when full / empty. */
#define YS_DEFINE_COPY(MODE, FIELD, W, SHIFT, CAP, LOG2SZ, COPY)               \
	YS_INLINE int ys_cpush##W##_##MODE(ptrdiff_t off, char *parts, const intptr_t *src) \
	{                                                                      \
		uintptr_t t, c, d, x;                                          \
		__asm__ __volatile__ goto(YS_BEGIN YS_INDEX(FIELD, YS_STR(SHIFT))           \
			     "addq %[parts], %[t]\n\t"                         \
			     "movq (%[t]), %[c]\n\t"                           \
			     "cmpq $" YS_STR(CAP) ", %[c]\n\t"                 \
			     "jae %l[full]\n\t"                                \
			     "movq %[c], %[d]\n\t"                             \
			     "shlq $" LOG2SZ ", %[d]\n\t"                      \
			     "leaq 16(%[t], %[d]), %[d]\n\t"                   \
			     COPY("src", "d")                                  \
			     "addq $1, %[c]\n\t"                               \
			     "movq %[c], (%[t])\n" YS_END                      \
			     : [t] "=&r"(t), [c] "=&r"(c), [d] "=&r"(d), [x] "=&r"(x) \
			     : [off] "r"(off), [parts] "r"(parts), [src] "r"(src) \
			     : "memory", "cc"                                  \
			     : full);                                          \
		return 0;                                                      \
	full:                                                                  \
		return -1;                                                     \
	}                                                                      \
	YS_INLINE int ys_cpop##W##_##MODE(ptrdiff_t off, char *parts, intptr_t *dst) \
	{                                                                      \
		uintptr_t t, c, d, x;                                          \
		__asm__ __volatile__ goto(YS_BEGIN YS_INDEX(FIELD, YS_STR(SHIFT))           \
			     "addq %[parts], %[t]\n\t"                         \
			     "movq (%[t]), %[c]\n\t"                           \
			     "subq $1, %[c]\n\t"                               \
			     "jb %l[empty]\n\t"                                \
			     "movq %[c], %[d]\n\t"                             \
			     "shlq $" LOG2SZ ", %[d]\n\t"                      \
			     "leaq 16(%[t], %[d]), %[d]\n\t"                   \
			     COPY("d", "dst")                                  \
			     "movq %[c], (%[t])\n" YS_END                      \
			     : [t] "=&r"(t), [c] "=&r"(c), [d] "=&r"(d), [x] "=&r"(x) \
			     : [off] "r"(off), [parts] "r"(parts), [dst] "r"(dst) \
			     : "memory", "cc"                                  \
			     : empty);                                         \
		return 0;                                                      \
	empty:                                                                 \
		return -1;                                                     \
	}

/* Out of line: the contended wait is no part of the fast path. */
static __attribute__((noinline, cold, unused)) void ys_yield_(void)
{
	extern int sched_yield(void);
	sched_yield();
}

YS_DEFINE_MODE(cpu, YS_OFF_CPU_ID)
YS_DEFINE_MODE(cid, YS_OFF_MM_CID)

/*
 * The hand-written twins with the library's guarantees ("hand-guaranteed"
 * rows): the operations above with what a careful user adds by hand so
 * that a thread that cannot run sections still makes progress and a
 * single-stepped thread finishes, and nothing more:
 *
 *  - the index is read sign-extended and scaled; a negative one (-1, -2:
 *    the thread is not registered) leaves through `fallback` (js after
 *    the shift);
 *  - the abort handler counts aborts in a register zeroed before the
 *    section and leaves through `fallback` after YS_ABORT_LIMIT in a row
 *    (a debugger single-stepping the section aborts it every step);
 *  - the fallback does the operation without a section:
 *      counter: an atomic add to a second word of the part (+8; a sum
 *               reads both), no exclusion needed;
 *      spinlock: the lock word itself is the gate: a compare-and-swap
 *               0 -> a tag of the thread's own, a fence of every CPU
 *               (membarrier RSEQ: a section that had not committed is
 *               restarted and then sees the tag), then the word is
 *               re-read: still the tag, the lock is ours; anything else,
 *               a section committed between the swap and the fence and
 *               holds it;
 *      stack, buffers: a gate word in the part (+8) that the section
 *               tests; the fallback closes it with a compare-and-swap,
 *               fences every CPU, works with plain code and reopens it.
 */
#define YS_ABORT_LIMIT "16"

/* As YS_BEGIN, with the abort count zeroed before the arming label. */
#define YS_G_BEGIN "xorl %k[n], %k[n]\n\t" YS_BEGIN

/* As YS_END, the abort handler counting. */
#define YS_G_END                                                               \
	"2:\n\t"                                                               \
	".pushsection __rseq_failure, \"ax\"\n\t"                              \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                           \
	".long 0x53053053\n"                                                   \
	"4:\n\t"                                                               \
	"incl %k[n]\n\t"                                                       \
	"cmpl $" YS_ABORT_LIMIT ", %k[n]\n\t"                                  \
	"jae %l[fallback]\n\t"                                                 \
	"jmp 0b\n\t"                                                           \
	".popsection\n"

/* t = index << shift; a negative index leaves. */
#define YS_G_INDEX(FIELD, SHIFT)                                               \
	"movslq %%fs:" FIELD "(%[off]), %[t]\n\t"                              \
	"shlq $" SHIFT ", %[t]\n\t"                                            \
	"js %l[fallback]\n\t"

/* The fallbacks: out of line, no part of the fast path. */
#define YS_COLD static __attribute__((noinline, cold, unused))

/* A tag of the calling thread that no other thread's and no section's
 * value (0, 1) can equal: the address of a thread-local byte. */
static __thread char ys_tag_;

/* Fence every CPU that runs a thread of the process: a section in flight
 * there is restarted.  The registration is idempotent. */
YS_COLD void ys_fence_(void)
{
	const int rseq = MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ;

	if (syscall(SYS_membarrier, rseq, 0, 0) == 0)
		return;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0 &&
	    syscall(SYS_membarrier, rseq, 0, 0) == 0)
		return;
	abort(); /* no fence: the hand-written fallback cannot be safe */
}

/* The part of a thread without a section: its index if it has one. */
YS_INLINE uintptr_t ys_fb_part_(int idx, int shift)
{
	return (uintptr_t)(idx < 0 ? 0 : idx) << shift;
}

YS_COLD void ys_add_fb_(char *part, intptr_t inc)
{
	__atomic_fetch_add((intptr_t *)(void *)(part + 8), inc, __ATOMIC_RELAXED);
}

YS_COLD uintptr_t ys_lock_fb_(char *parts, uintptr_t o)
{
	intptr_t *w = (intptr_t *)(void *)(parts + o), tag = (intptr_t)&ys_tag_;

	for (;;) {
		intptr_t zero = 0;
		if (__atomic_compare_exchange_n(w, &zero, tag, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			ys_fence_();
			if (__atomic_load_n(w, __ATOMIC_ACQUIRE) == tag)
				return o;
		}
		ys_yield_();
	}
}

/* Close and open the gate at part + 8 (fallback threads wait for each
 * other; sections leave while it is closed). */
YS_COLD void ys_gate_close_(char *part)
{
	intptr_t *g = (intptr_t *)(void *)(part + 8);

	for (;;) {
		intptr_t zero = 0;
		if (__atomic_compare_exchange_n(g, &zero, 1, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			break;
		ys_yield_();
	}
	ys_fence_();
}

YS_INLINE void ys_gate_open_(char *part)
{
	__atomic_store_n((intptr_t *)(void *)(part + 8), 0, __ATOMIC_RELEASE);
}

YS_COLD void ys_push_fb_(char *part, struct ys_node *node)
{
	ys_gate_close_(part);
	node->next = *(struct ys_node **)(void *)part;
	*(struct ys_node **)(void *)part = node;
	ys_gate_open_(part);
}

YS_COLD struct ys_node *ys_pop_fb_(char *part)
{
	struct ys_node *h;

	ys_gate_close_(part);
	h = *(struct ys_node **)(void *)part;
	if (h != NULL)
		*(struct ys_node **)(void *)part = h->next;
	ys_gate_open_(part);
	return h;
}

/* Buffers: count at +0, the gate at +8, W-word items from +16. */
YS_COLD int ys_bpush_fb_(char *part, const intptr_t *src, int words, intptr_t cap)
{
	intptr_t *cnt = (intptr_t *)(void *)part, *items = cnt + 2;
	int r = -1;

	ys_gate_close_(part);
	if (*cnt < cap) {
		for (int k = 0; k < words; k++)
			items[*cnt * words + k] = src[k];
		++*cnt;
		r = 0;
	}
	ys_gate_open_(part);
	return r;
}

YS_COLD int ys_bpop_fb_(char *part, intptr_t *dst, int words)
{
	intptr_t *cnt = (intptr_t *)(void *)part, *items = cnt + 2;
	int r = -1;

	ys_gate_close_(part);
	if (*cnt > 0) {
		--*cnt;
		for (int k = 0; k < words; k++)
			dst[k] = items[*cnt * words + k];
		r = 0;
	}
	ys_gate_open_(part);
	return r;
}

#define YS_DEFINE_GMODE(MODE, FIELD)                                           \
	YS_INLINE void ys_add_g_##MODE(ptrdiff_t off, char *parts, intptr_t inc) \
	{                                                                      \
		uintptr_t t;                                                   \
		unsigned n;                                                    \
		__asm__ __volatile__ goto(YS_G_BEGIN YS_G_INDEX(FIELD, "7")     \
				     "addq %[inc], (%[parts], %[t])\n" YS_G_END \
				     : [t] "=&r"(t), [n] "=&r"(n)              \
				     : [off] "r"(off), [parts] "r"(parts),     \
				       [inc] "er"(inc)                         \
				     : "memory", "cc"                          \
				     : fallback);                              \
		return;                                                        \
	fallback:                                                              \
		ys_add_fb_(parts + ys_fb_part_(ys_read_##MODE(off), 7), inc);  \
	}                                                                      \
                                                                               \
	/* The lock: no gate (see above); a held word is 1 or a tag. */        \
	YS_INLINE uintptr_t ys_lock_g_##MODE(ptrdiff_t off, char *parts)       \
	{                                                                      \
		uintptr_t t;                                                   \
		unsigned n;                                                    \
		for (;;) {                                                     \
			__asm__ __volatile__ goto(YS_G_BEGIN YS_G_INDEX(FIELD, "7") \
				     "cmpq $0, (%[parts], %[t])\n\t"           \
				     "jne %l[busy]\n\t"                        \
				     "movq $1, (%[parts], %[t])\n" YS_G_END    \
				     : [t] "=&r"(t), [n] "=&r"(n)              \
				     : [off] "r"(off), [parts] "r"(parts)      \
				     : "memory", "cc"                          \
				     : busy, fallback);                        \
			return t;                                              \
		busy:                                                          \
			ys_yield_();                                           \
		}                                                              \
	fallback:                                                              \
		return ys_lock_fb_(parts, ys_fb_part_(ys_read_##MODE(off), 7)); \
	}                                                                      \
                                                                               \
	YS_INLINE void ys_push_g_##MODE(ptrdiff_t off, char *parts, struct ys_node *node) \
	{                                                                      \
		uintptr_t t, h;                                                \
		unsigned n;                                                    \
		__asm__ __volatile__ goto(YS_G_BEGIN YS_G_INDEX(FIELD, "7")     \
				     "cmpq $0, 8(%[parts], %[t])\n\t"          \
				     "jne %l[fallback]\n\t"                    \
				     "movq (%[parts], %[t]), %[h]\n\t"         \
				     "movq %[h], (%[node])\n\t"                \
				     "movq %[node], (%[parts], %[t])\n" YS_G_END \
				     : [t] "=&r"(t), [h] "=&r"(h), [n] "=&r"(n) \
				     : [off] "r"(off), [parts] "r"(parts),     \
				       [node] "r"(node)                        \
				     : "memory", "cc"                          \
				     : fallback);                              \
		return;                                                        \
	fallback:                                                              \
		ys_push_fb_(parts + ys_fb_part_(ys_read_##MODE(off), 7), node); \
	}                                                                      \
                                                                               \
	YS_INLINE struct ys_node *ys_pop_g_##MODE(ptrdiff_t off, char *parts)  \
	{                                                                      \
		uintptr_t t;                                                   \
		unsigned n;                                                    \
		struct ys_node *h, *nx;                                        \
		__asm__ __volatile__ goto(YS_G_BEGIN YS_G_INDEX(FIELD, "7")     \
			     "cmpq $0, 8(%[parts], %[t])\n\t"                  \
			     "jne %l[fallback]\n\t"                            \
			     "movq (%[parts], %[t]), %[h]\n\t"                 \
			     "testq %[h], %[h]\n\t"                            \
			     "jz %l[empty]\n\t"                                \
			     "movq (%[h]), %[nx]\n\t"                          \
			     "movq %[nx], (%[parts], %[t])\n" YS_G_END         \
			     : [t] "=&r"(t), [h] "=&r"(h), [nx] "=&r"(nx), [n] "=&r"(n) \
			     : [off] "r"(off), [parts] "r"(parts)              \
			     : "memory", "cc"                                  \
			     : empty, fallback);                               \
		if (h == NULL) /* never: tells the caller's NULL test */       \
			__builtin_unreachable();                               \
		return h;                                                      \
	empty:                                                                 \
		return NULL;                                                   \
	fallback:                                                              \
		return ys_pop_fb_(parts + ys_fb_part_(ys_read_##MODE(off), 7)); \
	}                                                                      \
                                                                               \
	YS_INLINE int ys_ppush_g_##MODE(ptrdiff_t off, char *parts, void *ptr) \
	{                                                                      \
		uintptr_t t, c;                                                \
		unsigned n;                                                    \
		intptr_t v_;                                                   \
		__asm__ __volatile__ goto(YS_G_BEGIN YS_G_INDEX(FIELD, YS_STR(YS_PTR_SHIFT)) \
			     "addq %[parts], %[t]\n\t"                         \
			     "cmpq $0, 8(%[t])\n\t"                            \
			     "jne %l[fallback]\n\t"                            \
			     "movq (%[t]), %[c]\n\t"                           \
			     "cmpq $" YS_STR(YS_PTR_CAP) ", %[c]\n\t"          \
			     "jae %l[full]\n\t"                                \
			     "movq %[ptr], 16(%[t], %[c], 8)\n\t"              \
			     "addq $1, %[c]\n\t"                               \
			     "movq %[c], (%[t])\n" YS_G_END                    \
			     : [t] "=&r"(t), [c] "=&r"(c), [n] "=&r"(n)        \
			     : [off] "r"(off), [parts] "r"(parts), [ptr] "r"(ptr) \
			     : "memory", "cc"                                  \
			     : full, fallback);                                \
		return 0;                                                      \
	full:                                                                  \
		return -1;                                                     \
	fallback:                                                              \
		v_ = (intptr_t)ptr;                                            \
		return ys_bpush_fb_(parts + ys_fb_part_(ys_read_##MODE(off), YS_PTR_SHIFT), \
				    &v_, 1, YS_PTR_CAP);                       \
	}                                                                      \
                                                                               \
	YS_INLINE int ys_ppop_g_##MODE(ptrdiff_t off, char *parts, void **out) \
	{                                                                      \
		uintptr_t t, c;                                                \
		unsigned n;                                                    \
		intptr_t v_;                                                   \
		void *p;                                                       \
		__asm__ __volatile__ goto(YS_G_BEGIN YS_G_INDEX(FIELD, YS_STR(YS_PTR_SHIFT)) \
			     "addq %[parts], %[t]\n\t"                         \
			     "cmpq $0, 8(%[t])\n\t"                            \
			     "jne %l[fallback]\n\t"                            \
			     "movq (%[t]), %[c]\n\t"                           \
			     "subq $1, %[c]\n\t"                               \
			     "jb %l[empty]\n\t"                                \
			     "movq 16(%[t], %[c], 8), %[p]\n\t"                \
			     "movq %[c], (%[t])\n" YS_G_END                    \
			     : [t] "=&r"(t), [c] "=&r"(c), [p] "=&r"(p), [n] "=&r"(n) \
			     : [off] "r"(off), [parts] "r"(parts)              \
			     : "memory", "cc"                                  \
			     : empty, fallback);                               \
		*out = p;                                                      \
		return 0;                                                      \
	empty:                                                                 \
		return -1;                                                     \
	fallback:                                                              \
		if (ys_bpop_fb_(parts + ys_fb_part_(ys_read_##MODE(off), YS_PTR_SHIFT), \
				&v_, 1) < 0)                                   \
			return -1;                                             \
		*out = (void *)v_;                                             \
		return 0;                                                      \
	}                                                                      \
	YS_DEFINE_GCOPY(MODE, FIELD, 2, YS_C16_SHIFT, YS_C16_CAP, "4", YS_COPY2) \
	YS_DEFINE_GCOPY(MODE, FIELD, 8, YS_C64_SHIFT, YS_C64_CAP, "6", YS_COPY8)

#define YS_DEFINE_GCOPY(MODE, FIELD, W, SHIFT, CAP, LOG2SZ, COPY)              \
	YS_INLINE int ys_cpush##W##_g_##MODE(ptrdiff_t off, char *parts, const intptr_t *src) \
	{                                                                      \
		uintptr_t t, c, d, x;                                          \
		unsigned n;                                                    \
		__asm__ __volatile__ goto(YS_G_BEGIN YS_G_INDEX(FIELD, YS_STR(SHIFT)) \
			     "addq %[parts], %[t]\n\t"                         \
			     "cmpq $0, 8(%[t])\n\t"                            \
			     "jne %l[fallback]\n\t"                            \
			     "movq (%[t]), %[c]\n\t"                           \
			     "cmpq $" YS_STR(CAP) ", %[c]\n\t"                 \
			     "jae %l[full]\n\t"                                \
			     "movq %[c], %[d]\n\t"                             \
			     "shlq $" LOG2SZ ", %[d]\n\t"                      \
			     "leaq 16(%[t], %[d]), %[d]\n\t"                   \
			     COPY("src", "d")                                  \
			     "addq $1, %[c]\n\t"                               \
			     "movq %[c], (%[t])\n" YS_G_END                    \
			     : [t] "=&r"(t), [c] "=&r"(c), [d] "=&r"(d), [x] "=&r"(x), \
			       [n] "=&r"(n)                                    \
			     : [off] "r"(off), [parts] "r"(parts), [src] "r"(src) \
			     : "memory", "cc"                                  \
			     : full, fallback);                                \
		return 0;                                                      \
	full:                                                                  \
		return -1;                                                     \
	fallback:                                                              \
		return ys_bpush_fb_(parts + ys_fb_part_(ys_read_##MODE(off), SHIFT), src, W, CAP); \
	}                                                                      \
	YS_INLINE int ys_cpop##W##_g_##MODE(ptrdiff_t off, char *parts, intptr_t *dst) \
	{                                                                      \
		uintptr_t t, c, d, x;                                          \
		unsigned n;                                                    \
		__asm__ __volatile__ goto(YS_G_BEGIN YS_G_INDEX(FIELD, YS_STR(SHIFT)) \
			     "addq %[parts], %[t]\n\t"                         \
			     "cmpq $0, 8(%[t])\n\t"                            \
			     "jne %l[fallback]\n\t"                            \
			     "movq (%[t]), %[c]\n\t"                           \
			     "subq $1, %[c]\n\t"                               \
			     "jb %l[empty]\n\t"                                \
			     "movq %[c], %[d]\n\t"                             \
			     "shlq $" LOG2SZ ", %[d]\n\t"                      \
			     "leaq 16(%[t], %[d]), %[d]\n\t"                   \
			     COPY("d", "dst")                                  \
			     "movq %[c], (%[t])\n" YS_G_END                    \
			     : [t] "=&r"(t), [c] "=&r"(c), [d] "=&r"(d), [x] "=&r"(x), \
			       [n] "=&r"(n)                                    \
			     : [off] "r"(off), [parts] "r"(parts), [dst] "r"(dst) \
			     : "memory", "cc"                                  \
			     : empty, fallback);                               \
		return 0;                                                      \
	empty:                                                                 \
		return -1;                                                     \
	fallback:                                                              \
		return ys_bpop_fb_(parts + ys_fb_part_(ys_read_##MODE(off), SHIFT), dst, W); \
	}

YS_DEFINE_GMODE(cpu, YS_OFF_CPU_ID)
YS_DEFINE_GMODE(cid, YS_OFF_MM_CID)

/*
 * The guarantee ladder (rseqkit-bench, counter-add4): the add above with
 * what the library's add pays for its guarantees, one at a time.  The
 * section stops (returns 1, nothing done) for a thread that is not
 * registered: by the sign of its index (js after the shift: the
 * library's add, and the hand-guaranteed one), or, in the "gate" forms,
 * by testing the part's word at +8 (a gate, closed in the library's
 * guard parts before part 0, and a cost of its own).  The field read is
 * cpu_id at a constant displacement (_cpu) or at a run-time one (_at: the
 * library's index mode, fixed at creation).
 */
#define YS_TESTED_ADD(INDEX, TEST, ...)                                        \
	__asm__ __volatile__ goto(YS_BEGIN INDEX "shlq $7, %[t]\n\t" TEST       \
				  "addq %[inc], (%[parts], %[t])\n" YS_END       \
				  : [t] "=&r"(t)                               \
				  : [off] "r"(off), [parts] "r"(parts),        \
				    [inc] "er"(inc), ##__VA_ARGS__              \
				  : "memory", "cc"                             \
				  : stopped)
#define YS_TEST_SIGN "js %l[stopped]\n\t"
#define YS_TEST_GATE "cmpq $0, 8(%[parts], %[t])\n\tjne %l[stopped]\n\t"
#define YS_INDEX_CPU "movslq %%fs:" YS_OFF_CPU_ID "(%[off]), %[t]\n\t"
#define YS_INDEX_AT "movslq %%fs:(%[off], %[field]), %[t]\n\t"

YS_INLINE int ys_add_gated_cpu(ptrdiff_t off, char *parts, intptr_t inc)
{
	uintptr_t t;

	YS_TESTED_ADD(YS_INDEX_CPU, YS_TEST_GATE);
	return 0;
stopped:
	return 1;
}

YS_INLINE int ys_add_signed_cpu(ptrdiff_t off, char *parts, intptr_t inc)
{
	uintptr_t t;

	YS_TESTED_ADD(YS_INDEX_CPU, YS_TEST_SIGN);
	return 0;
stopped:
	return 1;
}

YS_INLINE int ys_add_signed_at(ptrdiff_t off, uintptr_t field, char *parts, intptr_t inc)
{
	uintptr_t t;

	YS_TESTED_ADD(YS_INDEX_AT, YS_TEST_SIGN, [field] "r"(field));
	return 0;
stopped:
	return 1;
}

/* Release the lock taken at byte offset o (x86 stores are releases; the
 * atomic store keeps the compiler from sinking the section into it). */
YS_INLINE void ys_unlock(char *parts, uintptr_t o)
{
	__atomic_store_n((intptr_t *)(void *)(parts + o), 0, __ATOMIC_RELEASE);
}

#else
#define YS_HAND_NA "the hand-written sections are x86-64 inline asm only"
#endif /* __x86_64__ */

#endif /* RSEQKIT_YARDSTICK_H */
