/* SPDX-License-Identifier: MIT */
/*
 * Library-private declarations shared across the library's folders
 * (src/runtime, src/progress, src/percpu, src/alloc, src/malloc): every
 * function one file defines and another calls is declared here, or, within
 * the progress layer, in src/progress/progress_internal.h.
 */
#ifndef RSEQKIT_INTERNAL_H
#define RSEQKIT_INTERNAL_H

/* The library writes rsk_fast (at initialisation): it sees it plain, users'
 * code const (<rseqkit/thread.h>). */
#define RSEQKIT_WRITES_FAST_ 1
#include <rseqkit/rseqkit.h>

#define RSK_EXPORT __attribute__((visibility("default")))

/* Process-wide facts, written once by rsk_init() (under its lock). */
struct rsk_process {
	int initialised;	/* acquire/release flag */
	enum rsk_owner owner;
	int error;		/* errno that made rseq unavailable */
	const char *reason;
	unsigned feature_size, kernel_align, registered_size;
	int own_area;		/* library-owned: our TLS area (always, then) */
	int possible_cpus;
	int membarrier_rseq;
	/* RSK_INDEX_CID structures are possible: mm_cid is written, and an
	 * unregistered thread's mm_cid field reads as (uint32_t)-1 (see
	 * percpu.h): libc-owned areas and rseqkit's own TLS area. */
	int cid_for_structures;
	int unloadable;		/* this copy was dlopen'ed: its destructor cleans up */
	unsigned env_abort_limit; /* RSEQKIT_ABORT_LIMIT, or the default */
	/* RSEQKIT_CHECK_THREADS=1: no thread runs sections (the owner is
	 * none) and every operation checks its thread first
	 * (rsk_check_thread_()) against the area the fast paths would use:
	 * its offset from the thread pointer (0: no area to check) and the
	 * length it was registered with. */
	int check_threads;
	ptrdiff_t check_offset;
	unsigned check_size;
};
/* Hidden also where it is declared: the other files then reach it
 * directly, not through the GOT (the check_threads test is on every plain
 * path). */
extern struct rsk_process rsk_process __attribute__((visibility("hidden")));

#define RSK_DEFAULT_ABORT_LIMIT 16

void rsk_init_once(void);
/*
 * The gates' fork() handlers registered (src/progress/gate.c), before
 * rsk_init_once() takes its lock and before any part of rseqkit that
 * takes a lock of its own in a fork() prepare handler (the thread caches
 * of the pool and of the allocator) registers its handlers.  Prepare
 * handlers run in the reverse order of registration, so such a lock is
 * taken before the gates' handler makes other threads wait for the fork:
 * a thread that holds it and then waits for the fork (at a gate) would
 * otherwise never let the fork go on.  Child handlers run in the order of
 * registration: the gates are the child's again before the others run.
 * Idempotent; the library's constructor calls it too, but the first
 * malloc of a static program comes before the constructors.
 */
void rsk_progress_init_(void);
/* In a fork() child, before the other handlers: the thread registry holds
 * the calling thread alone (src/runtime/runtime.c; run by the gates'
 * child handler). */
void rsk_registry_fork_child_(void);
/* RSEQKIT_DEBUG (rseqkit(7)): the checking modes an unmodified binary
 * asks for, a comma list read once at initialisation (src/runtime.c). */
#define RSK_DEBUG_POOL_	    1u /* every pool is created with RSK_POOL_DEBUG */
#define RSK_DEBUG_SPINLOCK_ 2u /* spinlocks check their holder (spinlock.c) */
extern unsigned rsk_debug_ __attribute__((visibility("hidden")));
/* Write "rseqkit: <text><addr><more>" to stderr (addr in hex, left out
 * when NULL), async-signal-safe (src/progress.c). */
void rsk_report_(const char *text, const void *addr, const char *more);
/* RSEQKIT_CHECK_THREADS=1: stop the process, with a message, when the
 * calling thread is not one rseqkit supports (src/runtime/runtime.c).  Called,
 * when rsk_process.check_threads is set, where every operation's
 * out-of-line path begins (rsk_percpu_home_(), rsk_thread_ensure(),
 * rsk_percpu_on_cpu()), before it touches TLS. */
void rsk_check_thread_(void);
/* Time-slice extension (slice.c): offered to this process's registrations
 * (at initialisation), and a thread's registration is new. */
int rsk_slice_offered_(const struct rsk_process *p);
void rsk_slice_forget_(void);
long rsk_sys_rseq(struct rsk_abi_area *area, uint32_t len, int flags);
int rsk_read_possible_cpus(void);
/* Memory nodes (topology.c), for the per-CPU memory pools' NUMA binding:
 * the entries below nhas of a sysfs list such as "0-3,8" at path, as bits
 * of has[], and their number; and the node of a CPU (-1: not known). */
#define RSK_LONG_BITS ((int)(8 * sizeof(unsigned long)))
/*
 * Parse a kernel CPU or node list (cpulist.c): "0-3,8-11", "" (none), with
 * or without a trailing newline.  Sets in bits[] (may be NULL when nbits
 * is 0) the bit of each listed id below nbits, leaving the others as they
 * were; returns the highest id listed plus one (0 for an empty list; ids
 * at or above RSK_CPULIST_MAX read as RSK_CPULIST_MAX - 1, beyond any
 * kernel's NR_CPUS), or -1 if s is malformed (bits[] may then hold the
 * ranges before the error).
 */
#define RSK_CPULIST_MAX (1 << 20)
int rsk_cpulist_parse(const char *s, unsigned long *bits, int nbits);
int rsk_count_list_(const char *path, unsigned long *has, int nhas);
int rsk_node_of_cpu_(int cpu);
/* Allocate the process statistics' per-CPU slots (at init, so that no
 * event counted later - possibly in a signal handler - allocates). */
void rsk_stats_init(int ncpus);

/*
 * Injection builds: rsk_inject_activation(step) runs at each step of a
 * thread's activation (its first call), so that tests can fire a signal
 * there whose handler makes the first call itself.  Step 6 runs with the
 * registry lock held and every signal blocked, so that a test can fork()
 * while a thread holds that lock.  The library's default does nothing.
 */
#if RSK_INJECTING
void rsk_inject_activation(int step);
#define RSK_INJECT_ACTIVATION(step) rsk_inject_activation(step)
#else
#define RSK_INJECT_ACTIVATION(step) ((void)0)
#endif

/*
 * Injection builds: a test may stand in for the NUMA topology and mbind(2)
 * of the memory pools (src/alloc/percpu_memory.c), so that a machine of one node runs
 * the binding and its failures.  rsk_inject_numa_nodes(): 0 (the
 * library's default) to use the machine's, or n: nodes 0 to n - 1 have
 * memory, rsk_inject_numa_cpu_node(cpu) is cpu's node (-1: none; n or
 * more: a node without memory) and rsk_inject_numa_mbind(cpu, node) is
 * the result of binding cpu's stride to node (0, or the errno mbind fails
 * with) instead of the call.
 */
#if RSK_INJECTING
int rsk_inject_numa_nodes(void);
int rsk_inject_numa_cpu_node(int cpu);
int rsk_inject_numa_mbind(int cpu, int node);
#endif

/*
 * The add that needs no lock, of a thread that runs no section (the
 * counter's spill word, the mempool counter's copy where no thread runs
 * sections): one atomic add.  Injection builds have a negative control:
 * with RSEQKIT_INJECT_BROKEN_SPILL=1 in the environment it is a plain load
 * and store with a delay between them, which loses concurrent adds
 * (tests/stress_negative.sh shows that rseqkit-stress sees the loss).
 */
#if RSK_INJECTING
int rsk_inject_broken_spill_(void);
void rsk_inject_spill_plain_(intptr_t *word, intptr_t v);
#endif
static inline void rsk_spill_add_(intptr_t *word, intptr_t v)
{
#if RSK_INJECTING
	if (__builtin_expect(rsk_inject_broken_spill_(), 0)) {
		rsk_inject_spill_plain_(word, v);
		return;
	}
#endif
	__atomic_fetch_add(word, v, __ATOMIC_RELAXED);
}

/*
 * After an abort (a cold path): count it and tell whether the operation
 * has now aborted rsk_abort_limit() times in a row and must finish on its
 * slow path - the progress guarantee when a debugger single-steps.
 * Injection builds also report it as point 0 of rsk_inject_hook(), a
 * notification rather than a delay (rseqkit-stress counts aborts per
 * thread with it; the library's default hook ignores it).
 */
static inline int rsk_percpu_give_up(unsigned *aborts)
{
#if RSK_INJECTING
	rsk_inject_hook(0);
#endif
	rsk_note_abort();
	return ++*aborts >= rsk_abort_limit();
}

/*
 * The retry rule of rsk_percpu_retry_(), for code that retries sections
 * of its own outside the framework (rseqkit-malloc's thread caches,
 * src/malloc/): after an attempt of a fast
 * path returned `ret`, whether to run the section again - after
 * RSK_CMPFAIL (the part changed under it; also what a caller passes when
 * it made no attempt yet), and after RSK_ABORTED until the abort limit.
 * RSK_STOPPED (or the limit) sends the operation to the gate.  The
 * attempts (rsk_<name>_try_*_()) return those results, another code of
 * enum rsk_result (RSK_NO_INDEX, RSK_EMPTY, ...) that is not retried, or
 * a negative errno (-ENOSPC, -ENOENT) that ends the operation.
 */
static inline int rsk_percpu_again(int ret, unsigned *aborts)
{
	if (ret == RSK_CMPFAIL)
		return 1;
	return ret == RSK_ABORTED && !rsk_percpu_give_up(aborts);
}

/* The part a slow path works on: the current index when the thread has
 * one inside the structure, else the thread's home part (any part is
 * correct under its gate; the current CPU's is the one whose cache lines
 * are near). */
int rsk_percpu_slow_index(enum rsk_index_mode mode, int nr);
/* The part for an add that needs no lock (the counter's spill): the
 * thread's index if it has one, else the CPU sched_getcpu() names (a
 * thread's home part would put the threads of both CPUs on one line,
 * which then moves between them at every add), else the home part. */
int rsk_percpu_spill_index_(enum rsk_index_mode mode, int nr);

/* ---- The structures' framework (src/percpu/percpu.c) ---- */

/* Values of a structure's magic_: alive (allocated by aligned_alloc or by
 * mmap), and destroyed. */
#define RSK_PERCPU_MAGIC	0x7273636bu /* "rsck" */
#define RSK_PERCPU_MAGIC_MAPPED 0x7273636du

/* Whether h is a live structure (not destroyed: its mark is intact). */
static inline int rsk_percpu_alive_(const struct rsk_percpu_head *h)
{
	return h->magic_ == RSK_PERCPU_MAGIC || h->magic_ == RSK_PERCPU_MAGIC_MAPPED;
}
#define RSK_PERCPU_MAGIC_DEAD	0x64656164u

/* The mode a structure gets for `mode` (see percpu.h). */
enum rsk_index_mode rsk_percpu_effective_mode(enum rsk_index_mode mode);

/* rsk_gate_close() for a gate whose RSEQKIT_GATE_WARN_MS reports name
 * "<what> <obj>" (src/progress/gate.c). */
int rsk_gate_close_named_(intptr_t *gate, enum rsk_index_mode mode, int idx, const char *what,
			  const void *obj);

/* For the structures whose sections read their index unchecked (the
 * part operations of <rseqkit/percpu.h>): part[-1]'s gate word is the
 * head's index_offset_ (4 or 24, never 0) and fast_nr_, so a thread whose
 * index is -1 finds it closed. */
#ifdef RSK_ARCH_HAS_PART_OPS
#define RSK_PERCPU_GUARDED_(T)                                                 \
	_Static_assert(offsetof(T, part[0].gate) - offsetof(T, part[0]) ==     \
			       offsetof(struct rsk_percpu_head, index_offset_), \
		       #T ": part[-1]'s gate must be the head's index_offset_");  \
	_Static_assert(offsetof(T, part) == RSK_PERCPU_ALIGN, #T ": part[-1] must be the head")
#else /* sections that bound-check their index need no guard */
#define RSK_PERCPU_GUARDED_(T) _Static_assert(1, #T)
#endif

/* Fill the fast path's fields of a head whose mode and nr are set. */
void rsk_percpu_init_head(struct rsk_percpu_head *h);

/* A zeroed, 128-aligned structure of `size` bytes whose head is filled
 * (mode, nr, index offset, magic), or NULL (bad mode, no memory).  The
 * caller has checked that size covers the head and rsk_possible_cpus()
 * parts. */
void *rsk_percpu_create(size_t size, enum rsk_index_mode mode);

/* Free s (of the size it was created with).  Returns 0, or -EINVAL if s is
 * NULL or not a live structure (destroyed twice). */
int rsk_percpu_destroy(void *s, size_t size);

/* What the slow path needs to know of a structure. */
struct rsk_percpu_kind {
	/* The structure's type name, for RSEQKIT_GATE_WARN_MS reports. */
	const char *name;
	/* One attempt of the fast path (the inline one, called from here). */
	enum rsk_result (*attempt)(void *s, void *arg, int *idx);
	/* The operation on part idx with plain code while its gate is
	 * closed: RSK_OK, RSK_EMPTY, RSK_FULL, or
	 * RSK_CMPFAIL for "busy: wait and try again" (with `wait`).
	 * For a structure without gates: the operation done safely while
	 * sections run on part idx (atomics, its own lock). */
	enum rsk_result (*locked)(void *s, int idx, void *arg);
	/* The gate of part idx; NULL for a structure whose sections need no
	 * gate (the counter): then nothing is closed or fenced, and `locked`
	 * runs beside the sections. */
	intptr_t *(*gate)(void *s, int idx);
	/* NULL, or how to wait for a busy part (a held lock) before the
	 * next attempt: round counts the waits of this operation. */
	void (*wait)(void *s, int idx, unsigned round);
	/* NULL, or a look at part idx without its gate, for operations on
	 * another CPU's part: RSK_EMPTY or RSK_FULL end the operation
	 * there (it was so when looked at), without a gate or a fence. */
	enum rsk_result (*peek)(const void *s, int idx, const void *arg);
	/* NULL, or the slow phase of a structure whose slow work may not be
	 * done under a gate (the object pool: its depot lock, mmap, other
	 * parts' caches), in place of the gate phase: after the retries
	 * end (RSK_STOPPED, the abort limit, an RSK_NO_INDEX registration
	 * did not cure, RSK_NO_PART, and RSK_EMPTY or RSK_FULL, which then
	 * do not end the operation), called with no gate held, once, on
	 * part idx (rsk_percpu_slow_index(), counted as a slow path).  It
	 * takes the gates and locks it needs itself, and returns what the
	 * slow path returns: >= 0 or a negative errno.  `locked` and `gate`
	 * are then not used by the framework (gate NULL). */
	int (*outside)(void *s, void *arg, int idx);
};

/*
 * The slow path of every structure operation on the current CPU's part:
 * after a first attempt that returned `first`, the retries (after
 * RSK_CMPFAIL, and after RSK_ABORTED until the abort limit), the
 * lazy registration of the thread (after RSK_NO_INDEX), then the
 * operation under a part's gate (or the kind's `outside` phase).  Returns
 * the index of the part used, or -ENOENT, -ENOSPC, -EINVAL (a destroyed
 * structure), or the gate's error (with `outside`: what it returns).
 */
int rsk_percpu_retry_(void *s, const struct rsk_percpu_kind *k, void *arg, enum rsk_result first);
/* The error of an operation that ended with r (not RSK_OK). */
static inline int rsk_percpu_final_error_(enum rsk_result r)
{
	return r == RSK_EMPTY ? -ENOENT : r == RSK_FULL ? -ENOSPC : -EINVAL;
}

/* The part of a thread that runs no sections (its first use chooses it
 * from the CPU; a gate held by its own interrupted slow path moves it),
 * below nr. */
int rsk_percpu_home_(int nr);

/* Where no thread runs sections (rsk_fast's offset is 0), part idx's gate
 * as a plain lock: rsk_gate_close() less the fence and the time-slice
 * region, which only sections need.  0, -EDEADLK or -EOWNERDEAD. */
int rsk_gate_take_plain_(intptr_t *gate, int idx, const char *what, const void *obj);
/* Open it again, and count a slow path on part idx when `count`
 * (rsk_note_slow_path_at()). */
void rsk_gate_drop_plain_(intptr_t *gate, int idx, int count);
/* The calling thread's gate state (src/progress/gate.c), and the two above for
 * a caller that has it: a caller making several gate calls looks its
 * thread up once (in position-independent code each look-up is a call,
 * which also makes its caller save registers).  Valid in the thread that
 * asked only - and in its signal handlers, and in a fork child. */
struct gate_self;
struct gate_self *rsk_gate_self_(void);
int rsk_gate_take_plain_at_(struct gate_self *g, intptr_t *gate, int idx, const char *what,
			    const void *obj);
void rsk_gate_drop_plain_at_(struct gate_self *g, intptr_t *gate, int idx, int count);

/*
 * Where no thread of the process runs sections (the structure's fast_nr_
 * is 0: rseq unavailable or disabled), every operation comes here: the
 * thread's home part under its gate, taken as a plain lock (no retries,
 * registration or fence, which only sections need).
 *
 * rsk_percpu_plain() is the first try, inline in each structure's slow
 * path: there k is a constant, so its gate and locked calls are direct
 * and inlined, and one operation makes four calls (home, the thread's
 * gate state, take, drop: the last two then need no look-up of their own).
 * rsk_percpu_plain_() does the rest: a destroyed structure, a gate held
 * by this thread's own interrupted slow path or, while this thread holds
 * a gate, by anyone (the next part), and a busy part (`busy`, its index;
 * -1 when the first try did not run locked).
 */
int rsk_percpu_plain_(void *s, const struct rsk_percpu_kind *k, void *arg, int busy);

static inline __attribute__((always_inline)) int
rsk_percpu_plain(void *s, const struct rsk_percpu_kind *k, void *arg)
{
	const struct rsk_percpu_head *h = s;
	struct gate_self *g;
	intptr_t *gate;
	enum rsk_result r;
	int idx;

	if (__builtin_expect(!rsk_percpu_alive_(h), 0))
		return rsk_percpu_plain_(s, k, arg, -1);
	idx = rsk_percpu_home_(h->nr);
	gate = k->gate(s, idx);
	g = rsk_gate_self_();
	if (__builtin_expect(rsk_gate_take_plain_at_(g, gate, idx, k->name, s) != 0, 0))
		return rsk_percpu_plain_(s, k, arg, -1);
	r = k->locked(s, idx, arg);
	rsk_gate_drop_plain_at_(g, gate, idx, 1);
	if (__builtin_expect(r == RSK_OK, 1))
		return idx;
	if (r == RSK_CMPFAIL && k->wait != NULL)
		return rsk_percpu_plain_(s, k, arg, idx);
	return rsk_percpu_final_error_(r);
}

static inline int rsk_percpu_slow(void *s, const struct rsk_percpu_kind *k, void *arg,
				  enum rsk_result first)
{
	const struct rsk_percpu_head *h = s;

	/* Dispatched here, before the retry path's frame is set up: in a
	 * process without rseq this is every operation's path. */
	if (__builtin_expect(h->fast_nr_ == 0, 0) && k->gate != NULL)
		return rsk_percpu_plain(s, k, arg);
	return rsk_percpu_retry_(s, k, arg, first);
}

/* An operation on part `cpu` from anywhere (rsk_<name>_*_cpu): under its
 * gate (k->gate is not NULL).  Returns 0, -EINVAL (s NULL or destroyed, cpu outside the
 * structure), -ENOENT, -ENOSPC, or the gate's error. */
int rsk_percpu_on_cpu(void *s, const struct rsk_percpu_kind *k, int cpu, void *arg);

/* A gate without a fence (src/progress/gate.c): a lock between slow paths
 * that fork() waits for, and that reports -EDEADLK (the caller holds it:
 * a handler interrupted its own thread) and -EOWNERDEAD as gates do.
 * `what` and `obj` name it in RSEQKIT_GATE_WARN_MS reports. */
int rsk_lock_take_(intptr_t *lock, const char *what, const void *obj);
void rsk_lock_drop_(intptr_t *lock);

/* A hold without a word (src/progress/gate.c): the object pool's objects
 * in transit between a cache and the depot, which fork() waits for as for
 * a held gate. */
void rsk_hold_enter_(void);
void rsk_hold_leave_(void);

/* For rseqkit's malloc (src/malloc/), on pools (src/alloc/object_pool.c): hook(arg,
 * base, bytes, 1) after each slab of p is mapped (nonzero: the slab is
 * unmapped again, as if mmap had failed), hook(arg, base, bytes, 0)
 * before it is unmapped (set before p's first allocation); and the state
 * of obj in a debug pool without changing it: 1 allocated, 0 free, -1 not
 * an object of p. */
struct rsk_pool;
struct rsk_pool_config;
/* rsk_pool_create(), with the pool itself mapped (mapped = 1) rather than
 * from malloc. */
int rsk_pool_create_in_(struct rsk_pool **out, const struct rsk_pool_config *cfg, int mapped);
void rsk_pool_set_slab_hook_(struct rsk_pool *p, int (*hook)(void *arg, void *base, size_t bytes,
							       int mapped),
			     void *arg);
int rsk_pool_debug_state_(struct rsk_pool *p, const void *obj);
#if RSK_INJECTING
/* Tests (injection builds only): a pool's depot lock, to hold it the way
 * the depot's own code does. */
intptr_t *rsk_pool_depot_lock_(struct rsk_pool *p);
#endif

/* Before any use of p: its caches are the caller's zeroed memory, part i
 * at base + i * stride (at least the pool's part size), every one in use
 * at once; limits (or NULL) gives each a soft capacity, part i's at
 * limits[i * limit_stride], which the slow paths refill and flush by
 * (half of it per batch) and the caller's own fast paths compare with.
 * rseqkit's malloc (src/malloc/) puts all its classes' caches of one CPU
 * in one region this way. */
void rsk_pool_set_parts_(struct rsk_pool *p, char *base, size_t stride, const uint32_t *limits,
			 size_t limit_stride);

/* Whether the calling thread holds *lock (a gate or such a lock). */
int rsk_lock_mine_(const intptr_t *lock);

/* Whether the calling thread holds any gate or such lock: then a gate or
 * lock it cannot take at once is -EDEADLK, never waited for (a signal
 * handler on top of its thread's hold: see src/progress/gate.c), and a slow
 * path moves on to what it can have without waiting. */
int rsk_holding_(void);

/* rsk_note_slow_path() for a slow path that knows its part's index. */
void rsk_note_slow_path_at(int idx);

/* USDT probes (rseqkit:slow_path, ...) where <sys/sdt.h> exists: a no-op
 * instruction each until a tracer attaches. */
#if defined(__has_include)
#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define RSK_PROBE1(name, a)    STAP_PROBE1(rseqkit, name, a)
#define RSK_PROBE2(name, a, b) STAP_PROBE2(rseqkit, name, a, b)
#endif
#endif
#ifndef RSK_PROBE1
#define RSK_PROBE1(name, a)    ((void)(a))
#define RSK_PROBE2(name, a, b) ((void)(a), (void)(b))
#endif

/* The calling thread's count of slow paths in its own holder slot
 * (src/progress/gate.c), or NULL: the thread has not counted yet, or has
 * no slot of its own.  Only its thread writes it, and the slot stays the
 * thread's until it exits. */
extern __thread uint64_t *rsk_slow_tally_ __attribute__((visibility("hidden")));

/* rsk_note_slow_path_at(), inline: where no thread runs sections, every
 * operation is a slow path, and a call that looks the thread's state up
 * costs as much as the operation.  A load, an add and a store, the
 * thread's first count excepted (out of line: it claims the slot). */
static inline __attribute__((always_inline)) void rsk_count_slow_path_(int idx)
{
	uint64_t *t = rsk_slow_tally_;

	if (__builtin_expect(t != NULL, 1)) {
		__atomic_store_n(t, __atomic_load_n(t, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
		RSK_PROBE1(slow_path, idx);
	} else {
		rsk_note_slow_path_at(idx);
	}
}

/* Per-thread state, reached only from slow paths (global-dynamic TLS, so
 * the library can be dlopen'ed). */
enum rsk_thread_state {
	RSK_THREAD_NEW = 0,	/* not looked at yet */
	RSK_THREAD_ACTIVE,	/* registered (by libc or by us) */
	RSK_THREAD_OPTED_OUT,	/* explicitly unregistered */
	RSK_THREAD_FAILED,	/* cannot run sections (reason in errno) */
};
/* Make sure the calling thread's state is decided; returns it. */
enum rsk_thread_state rsk_thread_ensure(void);

#endif
