/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/progress.h - progress everywhere: gates, fences, statistics.
 *
 * A critical section only ever touches the part of per-CPU data that
 * belongs to the CPU (or concurrency id) it runs on, and a section that is
 * interrupted restarts.  Two things follow that pure rseq cannot do: a
 * thread whose sections keep aborting (a debugger single-stepping it) never
 * finishes, and code that is not a section (a thread without rseq, a
 * process without rseq, an operation on another CPU's part) cannot touch
 * the data safely.  The progress protocol closes both holes:
 *
 *   - Every CPU part carries a gate word, loaded by every gated section
 *     right after it is armed (rsk_gated_* in <rseqkit/ops.h>); a closed
 *     gate makes the section leave with RSK_STOPPED.
 *   - A slow path closes the part's gate (compare-and-swap 0 -> its kernel
 *     thread id, waiting while another thread holds it), fences the CPU so
 *     that no section that passed the gate before it closed is still in
 *     flight, works on the part with ordinary code, and reopens the gate.
 *
 * After the fence, every section that read the gate open has either
 * committed (and its effect is visible to the slow path, which the fence
 * orders after it) or been restarted and will read it closed.  The fast
 * path pays one load and one branch.
 *
 * Fences: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ), with
 * MEMBARRIER_CMD_FLAG_CPU for one CPU, registered once on first use.  Where
 * the kernel lacks it (or a seccomp filter denies it) the calling thread
 * migrates itself onto each CPU (being scheduled there means whatever ran
 * there was preempted, which restarts its section) and back; offline CPUs,
 * CPUs no thread of the process may run on (their affinity) and the CPU
 * the caller is on need nothing, and a CPU it must reach but cannot is
 * reported (-ENXIO).  Where no thread can run sections (rseq unavailable
 * in the process) a fence is free: it returns at once.
 *
 * Signals: rsk_gate_close(), rsk_gate_open(), rsk_fence_*() are
 * async-signal-safe (no malloc, no pthread lock, errno preserved).  A
 * handler that interrupted its own thread while it holds a gate gets
 * -EDEADLK from closing that gate, never a self-deadlock.  And a thread
 * that holds a gate or lock (such a handler, or code between close and
 * open) never waits for another: a held gate is -EDEADLK at once, or two
 * threads' handlers, each on top of its thread's hold, could wait for
 * each other for ever.  The structures then use a part free at once.
 * fork(): pthread_atfork handlers make the child's gates usable: fork()
 * waits until no other thread holds (or is taking) a gate or a pool's
 * depot lock - at most 2 s for a stuck holder, reported on stderr - and
 * closes made meanwhile wait for the fork to finish; in the child the
 * forking thread's own gates carry its new thread id.  vfork(), _Fork()
 * and raw clone() run no handlers: such a child must not use rseqkit.
 * Thread exit: a thread that exits holding a gate leaves it closed; the
 * next close reports it and returns -EOWNERDEAD.  dlclose(): glibc drops
 * the fork handlers with the library; nothing else is registered.
 */
#ifndef RSEQKIT_PROGRESS_H
#define RSEQKIT_PROGRESS_H

#include <stdint.h>
#include <rseqkit/thread.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * rsk_fence_cpu - return once no critical section of this process that
 * was running on `cpu` before the call is still in flight (each was either
 * committed or restarted).  An offline CPU, and without membarrier a CPU
 * where no thread of this process may run, is fenced by definition.
 * Returns 0, -EINVAL if cpu is outside [0, rsk_possible_cpus()), or
 * -ENXIO: membarrier is unavailable (or failed) and the fallback could not
 * migrate the caller onto an online CPU where a thread of this process may
 * run (another cpuset, sched_setaffinity denied): that CPU is not fenced.
 * No other errno is returned.  Async-signal-safe.
 */
int rsk_fence_cpu(int cpu);

/* rsk_fence_all - rsk_fence_cpu() for every CPU at once.  Returns 0 or
 * -ENXIO as above (every reachable CPU is fenced even then). */
int rsk_fence_all(void);

/*
 * Gate words.  An open gate is 0.  A closed gate holds its holder's kernel
 * thread id in the low 28 bits (RSK_GATE_TID), plus flag bits of the
 * waiting protocol in bits 28-31 (waiters asleep on the futex of the
 * word's 32-bit half, reports made, a holder that opens it with a plain
 * store); the upper half of a 64-bit word stays 0.  Gated sections only
 * test the word against 0.
 */
#define RSK_GATE_TID 0x0fffffff

/*
 * rsk_gate_close - take exclusive ownership of the per-CPU part guarded by
 * *gate, whose index (in `mode`) is idx: waits while another thread holds
 * the gate (spins and yields for about 50 us, then sleeps on a futex that
 * rsk_gate_open() wakes), closes it with the caller's thread id, then
 * fences - the CPU idx in RSK_INDEX_CPU mode, every CPU in RSK_INDEX_CID
 * mode (a concurrency id may be on any CPU).  Afterwards no gated section
 * touches the part until rsk_gate_open().  Returns 0 or a negative errno,
 * and on error owns nothing (the gate is as it was, or open again):
 *   -EINVAL      gate NULL, unknown mode, idx outside [0, rsk_possible_cpus())
 *   -EDEADLK     the calling thread holds this gate already (closed twice,
 *                or a signal handler interrupted its own thread's holder),
 *                or another thread holds it while the calling thread holds
 *                a gate or lock of rseqkit (see Signals below): nothing
 *                changed
 *   -EOWNERDEAD  the holder no longer exists (it exited holding the gate,
 *                or the gate was inherited through fork() from a thread
 *                that was stuck): reported once on stderr
 *   -ENXIO       the fence failed (see rsk_fence_cpu)
 * Async-signal-safe; a gate must be opened by the thread that closed it.
 * RSEQKIT_GATE_WARN_MS=n reports on stderr a gate that a waiter found
 * held for more than n ms (address, part index, holder thread id).
 */
int rsk_gate_close(intptr_t *gate, enum rsk_index_mode mode, int idx);

/* rsk_gate_open - release a gate closed by the calling thread with
 * rsk_gate_close() (an atomic exchange with release ordering; the waiters,
 * if any, are woken): every store made while it was closed is visible to
 * the sections that follow.  Async-signal-safe. */
void rsk_gate_open(intptr_t *gate);

/*
 * rsk_abort_limit - how many consecutive aborts a data-structure operation
 * accepts before it takes the slow path (default 16; the progress
 * guarantee under single-stepping).  rsk_set_abort_limit() changes it for
 * the whole process (n >= 1; 1 means: fall back at the first abort).
 * Returns 0 or -EINVAL.  Also settable with RSEQKIT_ABORT_LIMIT=n.
 */
unsigned rsk_abort_limit(void);
int rsk_set_abort_limit(unsigned n);

/* Counters of the progress layer. */
struct rsk_stats {
	uint64_t aborts;     /* sections restarted (or stale index) */
	uint64_t slow_paths; /* operations completed by a slow path */
	uint64_t fences;     /* fences that did work (membarrier or migration) */
	uint64_t gate_waits; /* times a slow path found a gate closed */
};

/* rsk_stats_thread / rsk_stats_process - the calling thread's counts, or
 * the process's total (all threads, also those that exited).  Return 0,
 * -EINVAL if st is NULL. */
int rsk_stats_thread(struct rsk_stats *st);
int rsk_stats_process(struct rsk_stats *st);

/* Called by inline fast paths on their (cold) abort and slow paths;
 * exported for them and for users building their own structures. */
void rsk_note_abort(void);
void rsk_note_slow_path(void);

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_PROGRESS_H */
