/* SPDX-License-Identifier: MIT */
/*
 * What the files of the progress layer (src/progress/) share: the calling
 * thread's state, the statistics' slots, the system calls and clocks of
 * the slow paths, and the entry points one file gives another.
 */
#ifndef RSEQKIT_PROGRESS_INTERNAL_H
#define RSEQKIT_PROGRESS_INTERNAL_H

#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "internal.h"
#include <rseqkit/progress.h>
#include "msg.h"

/* RSK_PROBE1(), RSK_PROBE2(): internal.h. */

#define LIKELY(x)   __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The calling thread's state: one TLS block, so that a function given
 * its address (internal.h: rsk_gate_self_()) reaches all of it without a
 * look-up of its own - in position-independent code each look-up is a
 * call, which makes its caller save registers. */
struct gate_slot;
struct gate_self {
	int32_t tid;		/* kernel thread id, 0 until first use */
	struct gate_slot *slot; /* this thread's holder slot */
	int32_t slice_gates;	/* gates closed in this thread's slice region */
	rsk_slice_t slice;	/* that region's token (<rseqkit/slice.h>) */
	struct rsk_stats stats; /* rsk_stats_thread(); slow_paths: those not in slot */
	uint64_t slow_base;	/* the slot's count of slow paths when it became ours */
};

/* The events counted (stats.c), in each thread's holder slot (gate.c) or
 * in a per-CPU slot. */
enum { ST_ABORTS, ST_SLOW_PATHS, ST_FENCES, ST_GATE_WAITS, ST_N };
struct stat_slot {
	uint64_t v[ST_N];
} __attribute__((aligned(128)));
/* stats.c: the per-CPU slots (NULL until rsk_stats_init() maps them),
 * their number, and the spare slot that counts the events until then. */
extern struct stat_slot *rsk_stat_slots_ __attribute__((visibility("hidden")));
extern int rsk_stat_nslots_ __attribute__((visibility("hidden")));
extern struct stat_slot rsk_spare_slot_ __attribute__((visibility("hidden")));

/* The per-CPU slot of `cpu` (the spare one until they are mapped).  Here,
 * not in stats.c: gate.c's count of a plain-path slow path takes it, and
 * out of line its call would cost that path registers. */
static __attribute__((unused)) struct stat_slot *stat_slot_for(int cpu)
{
	struct stat_slot *s = __atomic_load_n(&rsk_stat_slots_, __ATOMIC_ACQUIRE);

	if (s == NULL || (unsigned)cpu >= (unsigned)__atomic_load_n(&rsk_stat_nslots_, __ATOMIC_RELAXED))
		return &rsk_spare_slot_;
	return &s[cpu];
}
/* gate.c: the sum of every holder slot's count of event `which`. */
uint64_t rsk_slot_counts_total_(int which);
/* gate.c: count a fence of the calling thread, on CPU `cpu`. */
void rsk_count_fence_(int cpu);
/* fence.c: fence CPU cpu (-1: every CPU); 0 or -ENXIO, errno preserved. */
int rsk_fence_(int cpu);
/* fence.c: the fence without membarrier, by migrating onto each CPU of
 * [first, last]; 0 or -ENXIO. */
int rsk_fence_by_migration_(int first, int last);

/* ---- system calls and time ---- */

static __attribute__((unused)) long sys_membarrier(int cmd, unsigned flags, int cpu)
{
	return syscall(SYS_membarrier, cmd, flags, cpu);
}

#define MB_CMD_PRIVATE_EXPEDITED	  (1 << 3)
#define MB_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)

static __attribute__((unused)) long sys_futex(void *word, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

static __attribute__((unused)) int32_t sys_gettid(void)
{
	return (int32_t)syscall(SYS_gettid);
}

/* Is thread tid of this process gone?  (errno is the caller's to save.) */
static __attribute__((unused)) int thread_gone(pid_t pid, int32_t tid)
{
	return syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH;
}

static __attribute__((unused)) uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static __attribute__((unused)) void sleep_ns(long ns)
{
	struct timespec t = { ns / 1000000000, ns % 1000000000 };

	nanosleep(&t, NULL);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif
