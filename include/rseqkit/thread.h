/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/thread.h - registration, identity and the process-wide picture.
 *
 * Every function here is correct from its first call in any thread libc
 * created (the main thread, pthread_create(), thrd_create()): the
 * library initialises itself lazily (and idempotently) and registers the
 * calling thread on first use if libc has not.  A thread made with
 * clone(2) directly is not supported, even after rsk_register(): the
 * fast paths read the rseq area at a fixed offset from the thread
 * pointer, which in such a thread is not one the kernel registered for
 * it; RSEQKIT_CHECK_THREADS=1 finds such threads (rseqkit(7), Threads).
 * No function aborts the process (but that checking mode, at such a
 * thread's first operation): without rseq (old kernel, seccomp,
 * valgrind, qemu-user) the accessors answer from sched_getcpu()/getcpu(2)
 * and rsk_index() reports -1 so that callers take their slow path.
 */
#ifndef RSEQKIT_THREAD_H
#define RSEQKIT_THREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <rseqkit/abi.h>
#define RSK_ARCH_INSIDE 1
#include <rseqkit/arch/area.h>
#undef RSK_ARCH_INSIDE

#ifdef __cplusplus
extern "C" {
#endif

/* Which per-thread value a critical section indexes per-CPU data by. */
enum rsk_index_mode {
	RSK_INDEX_CPU = 0, /* cpu_id: one slot per possible CPU */
	RSK_INDEX_CID = 1, /* mm_cid: dense, at most min(threads, CPUs) slots */
};

/* Who registered the calling process's rseq areas. */
enum rsk_owner {
	RSK_OWNER_NONE = 0,    /* rseq unavailable: everything takes slow paths */
	RSK_OWNER_LIBC = 1,    /* glibc registered; rseqkit uses its area */
	RSK_OWNER_LIBRARY = 2, /* rseqkit registers each thread itself */
};

/* The whole picture, filled by rsk_status(). */
struct rsk_status {
	bool available;		 /* rseq critical sections can run here */
	const char *reason;	 /* why not (or how), for people; static string */
	int error;		 /* errno of the failed probe or registration, or 0 */
	enum rsk_owner owner;
	unsigned feature_size;	 /* kernel's AT_RSEQ_FEATURE_SIZE (20 if absent) */
	unsigned kernel_align;	 /* kernel's AT_RSEQ_ALIGN (32 if absent) */
	unsigned registered_size; /* bytes of area registered (0 if none) */
	bool mm_cid_available;	 /* mm_cid is written by the kernel */
	bool node_id_available;	 /* node_id is written by the kernel */
	bool membarrier_rseq;	 /* membarrier PRIVATE_EXPEDITED_RSEQ supported */
	int possible_cpus;	 /* from /sys/devices/system/cpu/possible */
	int thread_registered;	 /* 1 if the calling thread can run sections */
	int thread_count;	 /* the calling thread's explicit registrations */
	bool slice_ext_available; /* time-slice extension (prctl 79) offered */
	bool cid_structures;	 /* RSK_INDEX_CID structures index by mm_cid */
};

/* rsk_unregister() flag: drop every registration of the thread at once. */
#define RSK_UNREGISTER_FORCE 1u

/*
 * Process-wide values read by the inline fast paths.  Not part of the API:
 * use the functions below.  area_offset is the rseq area's offset from the
 * thread pointer (never 0 for a real area), or 0 until the library is
 * initialised and where rseq is unavailable; cid_ok is nonzero when mm_cid
 * is written by the kernel, and then it is area_offset itself (an offset
 * within the static TLS block fits an int), so that rsk_mm_cid() tests one
 * word instead of two; slice_ok is nonzero when the kernel offers the
 * time-slice extension to this process's registrations (<rseqkit/slice.h>);
 * lock_slow is nonzero when rsk_spinlock_lock() and _unlock() take the
 * library's out-of-line copies: with the slice region, or with the checks
 * of RSEQKIT_DEBUG=spinlock (one test on the fast path for both).
 */
struct rsk_fast {
	ptrdiff_t area_offset;
	int cid_ok;
	int slice_ok;
	int lock_slow;
};
/* Users' code sees it const: it is written once, at initialisation (the
 * library's constructor, or the first call before that), and with a
 * const view the compiler keeps the offset in a register across calls
 * and barriers instead of reloading it after each operation.  (glibc's
 * __rseq_offset is declared the same way.)  The library's own files,
 * which write it, see it plain. */
#ifdef RSEQKIT_WRITES_FAST_
extern struct rsk_fast rsk_fast;
#else
extern const struct rsk_fast rsk_fast;
#endif

/*
 * rsk_init - initialise the library now (optional: every entry point does
 * it on first use).  It also decides the calling thread's state (registers
 * it where rseqkit owns the registrations, makes it known for unloading).
 * Returns 0; rseq being unavailable is not an error (see rsk_status()).
 * Safe to call any number of times from any thread; async-signal-safe once
 * the library's constructor has run.
 */
int rsk_init(void);

/*
 * rsk_status - fill *st with the process-wide picture and the calling
 * thread's state.  Returns 0, or -EINVAL if st is NULL.
 */
int rsk_status(struct rsk_status *st);

/* rsk_owner_name - "libc", "library" or "none". */
const char *rsk_owner_name(enum rsk_owner owner);

/*
 * rsk_register - register the calling thread (counted).  The first call
 * registers the thread if nobody has (libc-owned areas are adopted, never
 * re-registered; without libc's registration rseqkit uses an area of its
 * own TLS, never glibc's, since glibc would abort the process when it
 * cannot register a new thread); each call adds one to the thread's count.
 * Async-signal-safe: a handler may make the thread's first call inside the
 * thread's own.  Returns 0, or a negative errno when this thread cannot use
 * rseq (-ENOSYS, -EPERM, -EINVAL ...: the count is then unchanged and
 * callers still work through slow paths); never -EBUSY.
 */
int rsk_register(void);

/*
 * rsk_unregister - undo one rsk_register(), or all of them with
 * RSK_UNREGISTER_FORCE.  When the count reaches 0 and rseqkit owns the
 * registration, the thread is unregistered from the kernel and stays so
 * (critical sections then report -1 from rsk_index()) until the next
 * rsk_register().  The area's mm_cid, which the kernel resets to 0, is
 * set to (uint32_t)-1: RSK_INDEX_CID structures read that as "not
 * registered" (code that unregisters with rseq(2) directly must do the
 * same).  A libc-owned registration is never undone: libc needs
 * it.  Returns 0, -EINVAL for an unknown flag or when the count is already
 * 0 without RSK_UNREGISTER_FORCE, or a negative errno from the kernel.
 */
int rsk_unregister(unsigned flags);

/*
 * rsk_prepare_unload - before dlclose() of a shared object that uses
 * librseqkit.so and ran sections: clears, in every thread this copy of the
 * library knows (each thread that made an out-of-line call, each thread it
 * registered), the descriptor pointers into the calling object (found from
 * the return address; a tail call makes that the caller's caller, so
 * prefer rsk_prepare_unload_object()), and the calling thread's own
 * pointer.  Once, from any thread, after the object's code stopped
 * running.  Objects that embed librseqkit.a need nothing: the copy's
 * destructor does it.  In a process where libc owns the registrations, a
 * thread that only ran inline operations is not known: call rsk_init() at
 * the object's entry points.
 */
void rsk_prepare_unload(void);

/* rsk_prepare_unload_object - rsk_prepare_unload() for the object that
 * contains addr (any function of it), whoever calls it. */
void rsk_prepare_unload_object(const void *addr);

/* rsk_possible_cpus - number of possible CPUs (ids are below it), >= 1. */
int rsk_possible_cpus(void);

/* Slow paths of the inline accessors below (exported for them). */
int rsk_cpu_slow(void);
int rsk_index_slow(enum rsk_index_mode mode);
int rsk_mm_cid_slow(void);

/* The area offset.  A plain load, so that the compiler may keep it in a
 * register across operations and hoist it out of loops: it is written
 * once, by the library's constructor or by the first call, before the
 * code that reads it runs (glibc's own __rseq_offset is read the same
 * way).  Code that runs before the constructor (another constructor) and
 * inlines a loop of operations may keep seeing 0 for that loop: it takes
 * slow paths then, with the same results. */
static inline __attribute__((always_inline)) ptrdiff_t rsk_area_offset_(void)
{
	return rsk_fast.area_offset;
}

/* rsk_area - the calling thread's rseq area, or NULL before the library
 * is initialised or when rseq is unavailable in this process. */
static inline struct rsk_abi_area *rsk_area(void)
{
	ptrdiff_t off = rsk_area_offset_();

	if (__builtin_expect(off == 0, 0))
		return NULL;
	return (struct rsk_abi_area *)((char *)rsk_arch_thread_pointer() + off);
}

/* rsk_area_cpu_id - area->cpu_id, loaded once (the kernel writes it). */
static inline int32_t rsk_area_cpu_id(const struct rsk_abi_area *area)
{
	return (int32_t)*(const volatile uint32_t *)&area->cpu_id;
}

/*
 * rsk_cpu - the CPU the calling thread runs on (it may move at any time).
 * One load from the rseq area when the thread is registered; otherwise
 * sched_getcpu().  Returns -1 only if the kernel cannot tell.
 */
static inline int rsk_cpu(void)
{
	ptrdiff_t off = rsk_area_offset_();

	if (__builtin_expect(off != 0, 1)) {
		int32_t cpu = (int32_t)rsk_arch_area_u32(rsk_arch_area_of(off), RSK_ABI_OFF_CPU_ID);
		if (__builtin_expect(cpu >= 0, 1))
			return cpu;
	}
	return rsk_cpu_slow();
}

/*
 * rsk_cpu_start - cpu_id_start: the CPU at the start of the current
 * section in the kernel's sense; always a valid CPU number.  Falls back
 * to rsk_cpu() where the area is not registered.
 */
static inline int rsk_cpu_start(void)
{
	ptrdiff_t off = rsk_area_offset_();

	if (__builtin_expect(off != 0, 1)) {
		rsk_arch_area_t area = rsk_arch_area_of(off);
		if (__builtin_expect((int32_t)rsk_arch_area_u32(area, RSK_ABI_OFF_CPU_ID) >= 0, 1))
			return (int)rsk_arch_area_u32(area, RSK_ABI_OFF_CPU_ID_START);
	}
	return rsk_cpu_slow();
}

/*
 * rsk_mm_cid - the calling thread's concurrency id: unique among the
 * process's running threads, below min(threads, possible CPUs).  Where the
 * kernel has no mm_cid (before 6.3) or the thread is not registered it
 * returns the current CPU, which has the same uniqueness property (but is
 * not dense): per-CPU data sized by possible CPUs stays correct.
 */
static inline int rsk_mm_cid(void)
{
	ptrdiff_t off = rsk_fast.cid_ok; /* the area offset, or 0 */

	if (__builtin_expect(off != 0, 1)) {
		rsk_arch_area_t area = rsk_arch_area_of(off);
		if (__builtin_expect((int32_t)rsk_arch_area_u32(area, RSK_ABI_OFF_CPU_ID) >= 0, 1))
			return (int)rsk_arch_area_u32(area, RSK_ABI_OFF_MM_CID);
	}
	return rsk_mm_cid_slow();
}

/* rsk_mm_cid_available - true when rsk_mm_cid() is the kernel's mm_cid. */
bool rsk_mm_cid_available(void);

/* rsk_node - the NUMA node of the current CPU (node_id, else getcpu(2)). */
int rsk_node(void);

/* rsk_node_id_available - true when the kernel writes node_id. */
bool rsk_node_id_available(void);

/*
 * rsk_index - the index a critical section of the given mode must use now
 * (cpu_id or mm_cid), or -1 if the calling thread cannot run critical
 * sections (rseq unavailable, thread unregistered, or mm_cid asked for on a
 * kernel without it): take a slow path then.  A mode other than
 * RSK_INDEX_CPU and RSK_INDEX_CID is -1 too (rsk_index_slow() says so, and
 * the primitives of <rseqkit/ops.h> reject it with -EINVAL), so that a
 * retry loop with a bad mode ends on its slow path.
 */
static inline int rsk_index(enum rsk_index_mode mode)
{
	ptrdiff_t off = rsk_area_offset_();

	if (__builtin_expect(off != 0, 1)) {
		rsk_arch_area_t area = rsk_arch_area_of(off);
		int32_t cpu = (int32_t)rsk_arch_area_u32(area, RSK_ABI_OFF_CPU_ID);

		if (mode == RSK_INDEX_CPU) {
			if (__builtin_expect(cpu >= 0, 1))
				return cpu;
		} else if (mode == RSK_INDEX_CID && cpu >= 0 && rsk_fast.cid_ok) {
			return (int)rsk_arch_area_u32(area, RSK_ABI_OFF_MM_CID);
		}
	}
	return rsk_index_slow(mode);
}

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_THREAD_H */
