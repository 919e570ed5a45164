/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/mempool.h - per-CPU memory for your own data (stride allocator),
 * and a counter that lives in it.
 *
 * rsk_mempool is per-CPU copies of your own data: every object exists
 * once per CPU (or concurrency id).  Not to be confused with rsk_pool
 * (<rseqkit/pool.h>): a per-CPU cache of fixed-size objects, each object
 * one piece of memory as from malloc().
 *
 * A mempool hands out per-CPU objects: one allocation gives every CPU (or
 * concurrency id) its own copy of an object of the pool's size.  Copy i of
 * the object at `obj` is at
 *
 *	rsk_percpu_ptr(obj, i)  ==  (char *)obj + ((size_t)i << RSK_MEMPOOL_SHIFT)
 *
 * inline arithmetic (a shift and an add, no memory load), so the address
 * of the current CPU's copy can be the `v` of any primitive of
 * <rseqkit/ops.h>.  `obj` itself is copy 0.  Interior pointers work too:
 * rsk_percpu_ptr(&obj->field, i) is copy i of that field.
 *
 * Layout.  A pool is made of ranges; a range reserves nr x stride bytes of
 * virtual memory (nr = rsk_possible_cpus(), stride = RSK_MEMPOOL_STRIDE =
 * 64 KiB) with mmap(MAP_NORESERVE), copy i of its objects in the i-th
 * stride.  One CPU's copies of all the pool's objects pack densely in its
 * own pages and never share a cache line (or a page) with another CPU's.
 * Nothing is committed up front (but two guard pages on x86-64: see
 * rsk_mempool_stats): a page costs memory only once something writes it,
 * so copies of CPUs (in RSK_INDEX_CID mode: of concurrency
 * ids) that never write the pool cost nothing; reading an untouched copy
 * maps the kernel's shared zero page.  When a range is full, the pool
 * reserves another.  Why 64 KiB: it is a multiple of every page size in
 * use (4 KiB, 16 KiB, 64 KiB on arm64 and ppc64), so no page is shared by
 * two CPUs' copies and each stride can be bound to its CPU's NUMA node;
 * it holds 8191 intptr_t objects per range; and 4096 possible CPUs
 * reserve 256 MiB of address space per range, nothing of RAM.
 *
 * NUMA.  In RSK_INDEX_CPU mode on a machine with more than one memory
 * node, each CPU's stride of every range is bound (mbind(MPOL_PREFERRED))
 * to that CPU's node when the range is reserved, so copies land there
 * whichever thread writes them first (the library's own zeroing or
 * template copy included).  A CPU on a node without memory is not bound
 * (first touch takes the nearest node with memory).  When binding a CPU's
 * stride fails, that CPU's copies are placed by first touch in this range
 * and every later one, the failure is reported once on stderr, and the
 * other CPUs stay bound; only ENOSYS or EPERM (a kernel without NUMA, a
 * seccomp filter) ends the binding of the whole pool, and then
 * rsk_mempool_stats() reports numa_nodes 0.  In RSK_INDEX_CID mode a
 * concurrency id runs on any CPU: placement is by first touch.
 *
 * Initial values.  Every copy of a new object starts zeroed, as the
 * template says (`init_template`: every copy starts as these `size`
 * bytes), or as the init callback leaves it (called for every copy after
 * the template, with the copy's index).  Zeroing writes nothing to fresh
 * memory (mmap gives zero pages); a reused slot is re-zeroed only in the
 * copies that are not zero already (read first), so untouched copies stay
 * uncommitted.  A template or an init callback writes every copy of the
 * object, which commits the object's page in every copy: use them when
 * every copy will be used anyway.  rsk_mempool_zalloc() ignores both and
 * zeroes.
 *
 * Robust pools (RSK_MEMPOOL_ROBUST).  A freed object's non-zero copies are
 * filled with RSK_MEMPOOL_POISON bytes; when the slot is handed out again,
 * a copy that is neither all zero nor all poison is reported as a write
 * after free.  Freeing an object twice, freeing a pointer that is not an
 * object of the pool, and objects still live at destroy are reported too.
 * Each report is one line on standard error,
 *	"rseqkit: mempool <pool>: <what> <pointer>"
 * and the call returns an error code; nothing aborts.  Every pool (robust
 * or not) rejects double frees and foreign pointers with an error code;
 * only robust pools print, poison and check.
 *
 * Synchronization:
 *
 *   operation              may run concurrently with     ordering
 *   ---------------------  ----------------------------  --------------------
 *   rsk_percpu_ptr         everything                    pure arithmetic
 *   rsk_mempool_alloc,     everything but destroy        pool mutex: the new
 *   rsk_mempool_zalloc                                   object's initial
 *                                                        copies are visible
 *                                                        to any thread that
 *                                                        gets the pointer
 *                                                        through a release/
 *                                                        acquire (or mutex)
 *   rsk_mempool_free       everything but destroy, and   pool mutex; no
 *                          anything on the same object   access to obj after
 *   rsk_mempool_for_each   everything but destroy and    visits copies 0 ..
 *                          free of the same object       nr-1 in order with
 *                                                        the callback's own
 *                                                        loads: not a
 *                                                        snapshot (use the
 *                                                        gate for exact
 *                                                        per-copy reads)
 *   rsk_mempool_stats      everything but destroy        a snapshot of the
 *                                                        counts; committed
 *                                                        bytes are sampled
 *   rsk_pcounter_add       add, read, sum, exchange      relaxed
 *   rsk_pcounter_read,     add, read, sum, exchange      relaxed loads; sum
 *   rsk_pcounter_sum                                     is not a snapshot
 *   rsk_pcounter_exchange  add, read, sum, exchange      exact: gate + fence
 *   rsk_mempool_create     -                             -
 *   rsk_mempool_destroy    nothing                       -
 *
 * Signals: rsk_percpu_ptr(), rsk_mempool_gate() and the pool counter's
 * functions are async-signal-safe; the others take the pool's mutex (not
 * async-signal-safe).  Where no thread runs sections the counter's add
 * and exchange are atomic instructions and never fail in a handler;
 * otherwise a handler whose thread holds a gate or lock waits for no
 * gate: see rsk_pcounter_add() and rsk_pcounter_exchange().  fork(): the child has a copy of every pool with
 * the parent's values and may allocate, free and destroy, provided no
 * other thread of the parent was inside a function of that pool at the
 * fork (its mutex would stay locked, as with any mutex).  Thread exit: a
 * pool keeps nothing per thread; the copies a thread wrote stay.
 * dlclose(): a pool is ordinary mapped memory and outlives the code; a
 * pool not destroyed before librseqkit is unloaded is leaked.
 *
 * Injection points (test builds): rsk_pcounter_add - 7 between reading the
 * index and the section; its slow path and rsk_pcounter_exchange - 8
 * between the load and the store made under the gate.
 */
#ifndef RSEQKIT_MEMPOOL_H
#define RSEQKIT_MEMPOOL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <rseqkit/thread.h>
#include <rseqkit/ops.h>
#include <rseqkit/progress.h>
#include <rseqkit/percpu.h>
#include <rseqkit/inject.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Distance between two copies of an object: 1 << RSK_MEMPOOL_SHIFT bytes. */
#define RSK_MEMPOOL_SHIFT  16
#define RSK_MEMPOOL_STRIDE ((size_t)1 << RSK_MEMPOOL_SHIFT)
/* Largest alignment; the largest size is RSK_MEMPOOL_STRIDE - align
 * (the first align bytes of each range's strides are the pool's). */
#define RSK_MEMPOOL_MAX_ALIGN ((size_t)4096)
/* The byte freed copies of a robust pool are filled with. */
#define RSK_MEMPOOL_POISON 0x5a

/* rsk_mempool_config.flags */
#define RSK_MEMPOOL_ROBUST  1u /* report misuse, poison freed copies */
#define RSK_MEMPOOL_NO_NUMA 2u /* never mbind: first touch places the copies */

/*
 * rsk_percpu_ptr - copy `idx` of the per-CPU object (or field) at `ptr`,
 * with ptr's type.  No check: idx must be in [0, pool->nr) and ptr inside
 * a live object of a pool.  Two instructions once ptr and idx are in
 * registers (a shift and an add).
 */
#ifdef __cplusplus /* +ptr: the pointer's type without top-level qualifiers */
#define RSK_MEMPOOL_PTR_TYPE_(ptr) __typeof__(+(ptr))
#else
#define RSK_MEMPOOL_PTR_TYPE_(ptr) __typeof__(ptr)
#endif
#define rsk_percpu_ptr(ptr, idx) \
	((RSK_MEMPOOL_PTR_TYPE_(ptr))((char *)(ptr) + ((size_t)(unsigned)(idx) << RSK_MEMPOOL_SHIFT)))

/* Zero (NULL) is the default of every field but size, which has none. */
struct rsk_mempool_config {
	size_t size;		/* object size, 1 .. RSK_MEMPOOL_STRIDE - align */
	size_t align;		/* power of two <= RSK_MEMPOOL_MAX_ALIGN; 0: 8 */
	enum rsk_index_mode mode; /* RSK_INDEX_CID becomes CPU without mm_cid */
	unsigned flags;		/* RSK_MEMPOOL_* */
	size_t max_items;	/* live objects at most; 0: no limit */
	size_t max_bytes;	/* address space reserved at most; 0: no limit */
	const void *init_template; /* NULL, or size bytes every copy starts as */
	/* NULL, or called for every copy of a new object (after the template):
	 * copy, its index, init_arg.  A nonzero return fails the allocation
	 * (errno = that value if positive, else EINVAL). */
	int (*init)(void *copy, int idx, void *arg);
	void *init_arg;
};

struct rsk_mempool_stats {
	size_t live;		/* objects allocated and not freed */
	size_t capacity;	/* objects the reserved ranges hold */
	size_t ranges;		/* ranges reserved */
	size_t reserved_bytes;	/* address space: ranges x nr x stride */
	size_t committed_bytes;	/* of it, pages backed by memory (see the man page) */
	size_t item_stride;	/* bytes per object in a copy (size rounded to align) */
	size_t items_per_range;
	size_t stride;		/* RSK_MEMPOOL_STRIDE */
	int copies;		/* nr */
	int numa_nodes;		/* nodes the strides are bound to (0: not bound) */
	unsigned long errors;	/* misuse reported (robust) or rejected */
};

/* The public head of a pool; the rest is private. */
struct rsk_mempool {
	RSK_PERCPU_HEAD;	  /* mode, nr (copies per object): read-only */
	intptr_t *gate;		  /* read-only: copy 0 of the pool's gate word */
	size_t size;		  /* read-only: object size */
	uint32_t robust_;	  /* Not API: RSK_MEMPOOL_ROBUST (rsk_pcounter_add) */
};

/*
 * rsk_mempool_create - make a pool as *cfg says and store it in *out.
 * The first range is reserved here (its strides' first words are the
 * pool's gates), untouched and so uncommitted; on x86-64 two guard
 * strides are mapped below it, of which the pages of their two gate words
 * are written here (see rsk_mempool_stats).  Returns 0, -EINVAL (out
 * or cfg NULL, size 0 or too large, align not 0 and not a power of two or
 * > RSK_MEMPOOL_MAX_ALIGN, unknown mode or flag, a max_bytes below one
 * range), -ENOMEM.
 */
int rsk_mempool_create(struct rsk_mempool **out, const struct rsk_mempool_config *cfg);

/*
 * rsk_mempool_destroy - unmap every range (munmap: all the memory goes back
 * to the system) and free the pool, objects still live included.
 * Returns 0, -EINVAL (p NULL, or destroyed already: the pool's magic word
 * says so while the freed memory is not reused), or in a robust pool
 * -EBUSY when objects were still live (each reported on stderr; the pool
 * is destroyed all the same).  No other call on p may run or follow: the
 * out-of-line functions check the magic word and return -EINVAL (alloc:
 * NULL, errno EINVAL), but the inline rsk_pcounter_add() and
 * rsk_mempool_gate() cannot.
 */
int rsk_mempool_destroy(struct rsk_mempool *p);

/*
 * rsk_mempool_alloc - a new object, every copy initialised as the pool's
 * configuration says (zero, template, init callback).  Returns copy 0, or
 * NULL with errno ENOMEM (max_items or max_bytes reached, or mmap failed),
 * EINVAL (p NULL), or the init callback's error.
 * rsk_mempool_zalloc - the same with every copy zeroed, whatever the
 * template and callback.
 */
void *rsk_mempool_alloc(struct rsk_mempool *p);
void *rsk_mempool_zalloc(struct rsk_mempool *p);

/*
 * rsk_mempool_free - give obj (copy 0, as allocated) back.  Returns 0,
 * -EINVAL (p or obj NULL, obj not an object of this pool), -EALREADY (obj
 * is already free).  Robust pools also report both on stderr and poison
 * the freed copies that are not zero.
 */
int rsk_mempool_free(struct rsk_mempool *p, void *obj);

/*
 * rsk_mempool_for_each - call fn(copy, idx, arg) for idx = 0 .. nr-1 with
 * copy = rsk_percpu_ptr(ptr, idx), in that order, until fn returns
 * nonzero.  ptr is an object of the pool or a pointer inside one.
 * Returns fn's nonzero value, 0 after the last copy, -EINVAL (p, ptr or fn
 * NULL, ptr not inside a live object of p).  The pool's mutex is not held
 * while fn runs.
 */
int rsk_mempool_for_each(struct rsk_mempool *p, const void *ptr,
			 int (*fn)(void *copy, int idx, void *arg), void *arg);

/*
 * rsk_mempool_stats - fill *st.  committed_bytes counts the reserved pages
 * that have memory of their own (written, or swapped out); pages that map
 * the shared zero page (read, never written) are not counted.  On x86-64
 * the pool also holds two guard strides below its first range (for
 * rsk_pcounter_add's section, src/alloc/percpu_memory.c): two pages of them are
 * written at creation, and neither those 2 pages nor the guards' 128 KiB
 * of address space are counted (in committed_bytes, reserved_bytes or
 * max_bytes).  Returns 0, -EINVAL (p or st NULL).
 */
int rsk_mempool_stats(struct rsk_mempool *p, struct rsk_mempool_stats *st);

/* rsk_mempool_gate - the pool's gate word for index idx (in [0, nr)): one
 * per copy of the pool, 8 bytes per CPU per pool, in the pool's first
 * range.  Gated operations on the pool's data use it (see rsk_gated_add(3),
 * rsk_gate_close(3)); every structure in the pool may share it. */
static inline intptr_t *rsk_mempool_gate(const struct rsk_mempool *p, int idx)
{
	return rsk_percpu_ptr(p->gate, idx);
}

/*
 * A counter that lives in a pool: any intptr_t inside a live object of the
 * pool (an object of size sizeof(intptr_t), or a field of a larger one) is
 * a per-CPU counter, 8 bytes per copy.  Its gate is the pool's.
 */

/* Not API: rsk_pcounter_add after a first attempt that returned ret
 * (-EINVAL for a NULL p or ctr).  Cold to its callers: gcc then takes
 * every path that calls it as rare, lays those calls out of the caller's
 * loop and keeps the loop's values in registers for the fast path (gcc 12,
 * `make insn-count`: 2 instructions fewer per 4 adds; clang: no change).
 * src/alloc/percpu_memory.c defines it without the attribute (RSK_PCOUNTER_SLOW_ATTR_
 * empty), which would also optimise the function itself for size: it is
 * every add of a thread without rseq. */
#ifndef RSK_PCOUNTER_SLOW_ATTR_
#define RSK_PCOUNTER_SLOW_ATTR_ __attribute__((cold))
#endif
RSK_PCOUNTER_SLOW_ATTR_ int rsk_pcounter_slow_(struct rsk_mempool *p, intptr_t *ctr, intptr_t v,
					       enum rsk_result ret);
/* Not API: rsk_pcounter_add of a robust pool, which checks ctr first. */
RSK_PCOUNTER_SLOW_ATTR_ int rsk_pcounter_robust_add_(struct rsk_mempool *p, intptr_t *ctr,
						     intptr_t v);

/*
 * rsk_pcounter_add - add v (any sign) to the current CPU's copy of *ctr.
 * Returns 0, -EINVAL (p or ctr NULL), -ENXIO
 * (a slow path's fence failed), -EDEADLK (where threads run sections: a
 * signal handler whose thread holds a gate or lock, when every copy's
 * gate is held at that moment; it takes none it would wait for),
 * -EOWNERDEAD (the gate's holder exited holding it); on an error nothing
 * is added.  One gated restartable add on rsk_percpu_ptr(ctr, idx); with
 * the gate closed, or after rsk_abort_limit() aborts, the slow path adds
 * under a copy's gate (the current one, else the next free at once);
 * where no thread of the process runs sections, with an atomic add and
 * no gate (it never fails there).
 * Precondition (not checked on the fast path): ctr is an intptr_t-aligned
 * word whose bytes all lie inside one live object of p.  A robust pool
 * (RSK_MEMPOOL_ROBUST) checks it, out of line: -EINVAL, and a line on
 * stderr, for a pointer that is not (another pool's object, say).
 */
/* Not API: one attempt in a mode known at compile time (so that each of
 * rsk_index() and rsk_gated_add() folds to its one form). */
static inline __attribute__((always_inline)) int
rsk_pcounter_try_(struct rsk_mempool *p, intptr_t *ctr, intptr_t v, enum rsk_index_mode mode,
		  int *idx)
{
	int i = rsk_index(mode);

	if (__builtin_expect((unsigned)i >= (unsigned)p->nr, 0))
		return RSK_NO_INDEX;
	*idx = i;
	RSK_INJECT_C(7);
	return rsk_gated_add(mode, i, rsk_mempool_gate(p, i), rsk_percpu_ptr(ctr, i), v);
}

/* The section reads the index itself (no bound check, no sign test, no
 * mode branch): the arch's stride operation.  An unregistered thread's
 * index (-1, -2) selects a guard stride below the pool's gates, whose gate
 * word is never 0 (src/alloc/percpu_memory.c, "Guard strides"), so the
 * section leaves through `stopped` and the slow path sees the thread has
 * no index.  It is used where the arch has it because it costs fewer
 * instructions than the generic form below (mempool-bench compares
 * rsk_pcounter_add with rsk_counter_add). */
#if defined(RSK_ARCH_HAS_STRIDE_OPS) && !defined(RSK_TSAN) && \
	!defined(RSEQKIT_ANALYZER)
#define RSK_PCOUNTER_STRIDE_SECTION_ 1 /* Not API: for the tests */
static inline __attribute__((always_inline)) int
rsk_pcounter_add(struct rsk_mempool *p, intptr_t *ctr, intptr_t v)
{
	ptrdiff_t off = rsk_area_offset_();
	enum rsk_result r;
	uintptr_t pos;

	/* A NULL p goes to the slow path, which returns -EINVAL for it,
	 * rather than returning -EINVAL here: with a bare return, gcc 12
	 * splits a loop of adds into an empty loop for p == NULL, laid out
	 * as the fall-through, and the real one behind a taken jump, an
	 * instruction longer per round; with the call, p is tested once
	 * before the loop (the loads of p->index_offset_ and p->gate tell
	 * gcc it is not NULL after that).  The two tests are apart: written
	 * `p == NULL || ctr == NULL`, gcc 12 kept both results as flags on
	 * the stack and tested them at every add. */
	if (__builtin_expect(p == NULL, 0))
		return rsk_pcounter_slow_(p, ctr, v, RSK_NO_INDEX);
	if (__builtin_expect(ctr == NULL, 0))
		return -EINVAL;
	/* A robust pool checks the pointer, out of line. */
	if (__builtin_expect(p->robust_ != 0, 0))
		return rsk_pcounter_robust_add_(p, ctr, v);
	/* No area yet (first use) or no rseq: arming would write the TCB. */
	if (__builtin_expect(off == 0, 0))
		return rsk_pcounter_slow_(p, ctr, v, RSK_NO_INDEX);
	RSK_INJECT_C(7);
	r = RSK_PERCPU_SECTION_(RSK_ARCH_STRIDE_GATED_ADD(rsk_arch_area_of(off), p->index_offset_,
							  ctr, p->gate, RSK_MEMPOOL_SHIFT, pos, v));
	(void)pos;
	if (__builtin_expect(r == RSK_OK, 1))
		return 0;
	return rsk_pcounter_slow_(p, ctr, v, r);
}
#else
static inline __attribute__((always_inline)) int
rsk_pcounter_add(struct rsk_mempool *p, intptr_t *ctr, intptr_t v)
{
	int idx = -1, ret;

	if (__builtin_expect(p == NULL || ctr == NULL, 0))
		return -EINVAL;
	/* A robust pool checks the pointer, out of line. */
	if (__builtin_expect(p->robust_ != 0, 0))
		return rsk_pcounter_robust_add_(p, ctr, v);
	if (p->mode == RSK_INDEX_CPU)
		ret = rsk_pcounter_try_(p, ctr, v, RSK_INDEX_CPU, &idx);
	else
		ret = rsk_pcounter_try_(p, ctr, v, RSK_INDEX_CID, &idx);
	if (__builtin_expect(ret == RSK_OK, 1))
		return 0;
	return rsk_pcounter_slow_(p, ctr, v, (enum rsk_result)ret);
}
#endif

/*
 * rsk_pcounter_read - *value = copy idx of *ctr.  rsk_pcounter_sum - *sum
 * = the sum of all copies (wrapping, computed unsigned).
 * rsk_pcounter_exchange - replace copy idx with value and store the old
 * one in *old, exactly, while other threads keep adding (gate + fence).
 * Return 0, -EINVAL (NULL argument, idx outside [0, nr), ctr not an
 * intptr_t-aligned word whose bytes all lie inside one live object of p);
 * exchange also -ENXIO (the fence failed), -EDEADLK
 * (from a handler whose thread holds a gate or lock, when that copy's
 * gate is not free at once; never where no thread runs sections, where
 * it is an atomic exchange), -EOWNERDEAD (the gate's holder is gone); on
 * an error nothing is changed.
 */
int rsk_pcounter_read(struct rsk_mempool *p, const intptr_t *ctr, int idx, intptr_t *value);
int rsk_pcounter_sum(struct rsk_mempool *p, const intptr_t *ctr, intptr_t *sum);
int rsk_pcounter_exchange(struct rsk_mempool *p, intptr_t *ctr, int idx, intptr_t value,
			  intptr_t *old);

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_MEMPOOL_H */
