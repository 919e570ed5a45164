/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/cpu.c - the cpu family: which CPU (and concurrency id) am I on?
 *
 *   cpu-read     rsk_cpu() beside a TLS load (the limit), sched_getcpu()
 *                and the hand-written read of the rseq area
 *   mm-cid-read  rsk_mm_cid() beside the same
 *
 * Also the yardstick's shared pieces (tools/yardstick.h): the
 * hand-written rows of every family run where glibc registered rseq.
 */
#include <sched.h>
#include "bench.h"
#include "../yardstick.h"


static __thread int tl_cpu; /* thread-local stand-in: one TLS load */

static void cpu_read_init(void *sh, struct thr *t)
{
	(void)sh;
	int c = t->pin_cpu >= 0 ? t->pin_cpu : sched_getcpu();
	tl_cpu = c < 0 ? 0 : c;
	t->aux = tl_cpu;
}

/* A loop summing what READ gives, n times, into t->acc; PRE first. */
#define READ_LOOP(name, PRE, READ)                                             \
	static void name(void *sh, struct thr *t, unsigned n)                  \
	{                                                                      \
		int64_t acc = 0;                                               \
		(void)sh;                                                      \
		PRE;                                                           \
		for (unsigned i = 0; i < n; i++)                               \
			acc += READ;                                           \
		t->acc += acc;                                                 \
	}

READ_LOOP(cpu_read_rseqkit, (void)0, rsk_cpu())
/* volatile: one load per operation, as rsk_cpu() does. */
READ_LOOP(cpu_read_tl, (void)0, *(volatile int *)&tl_cpu)
READ_LOOP(cpu_read_getcpu, (void)0, sched_getcpu())

/* Thread i read ops_all indexes below the possible CPUs: their sum is in
 * [0, ops x (cpus - 1)]. */
static int read_sum_check(const struct thr *t, int i, const char *what, char *err, size_t len)
{
	int64_t max = (int64_t)t[i].ops_all * (ncpus_possible - 1);

	if (t[i].acc >= 0 && t[i].acc <= max)
		return 0;
	snprintf(err, len, "thread %d: sum of %s read %jd is outside [0, %jd]", i, what,
		 (intmax_t)t[i].acc, (intmax_t)max);
	return -1;
}

/* The sum of the CPU numbers read: exact for a pinned thread (and for the
 * thread-local value), within [0, ops * (cpus - 1)] otherwise. */
static int cpu_read_check_common(struct thr *t, int n, bool exact_tl, char *err, size_t len)
{
	for (int i = 0; i < n; i++) {
		int64_t ops = (int64_t)t[i].ops_all;
		if (exact_tl || t[i].pin_cpu >= 0) {
			int64_t want = ops * (exact_tl ? t[i].aux : t[i].pin_cpu);
			if (t[i].acc != want) {
				snprintf(err, len, "thread %d: sum of CPUs read %jd, expected %jd", i,
					 (intmax_t)t[i].acc, (intmax_t)want);
				return -1;
			}
		} else if (read_sum_check(t, i, "CPUs", err, len)) {
			return -1;
		}
	}
	return 0;
}

static int cpu_read_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	(void)sh;
	return cpu_read_check_common(t, n, false, err, len);
}

static int cpu_read_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	(void)sh;
	return cpu_read_check_common(t, n, true, err, len);
}

/* The hand-written rows run where glibc registered rseq. */
bool ys_rows_available(void)
{
#ifdef YS_HAVE_HAND
	return ys_available();
#else
	return false;
#endif
}

int ys_cid_ok; /* mm_cid written by the kernel (else -cid rows index by cpu_id) */

/* At a yardstick row's setup: whether the kernel writes mm_cid here. */
void ys_note_cid(void)
{
#ifdef YS_HAVE_HAND
	ys_cid_ok = ys_cid_available();
#endif
}

#ifdef YS_HAVE_HAND
void ys_thread_init(void *sh, struct thr *t)
{
	(void)sh;
	if (!ys_thread_ok())
		t->aux = -ENOSYS; /* the check reports it; nothing is run */
}

int ys_aux_check(struct thr *t, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: cannot run a section: %s", i,
				 strerror((int)-t[i].aux));
			return -1;
		}
	return 0;
}
#endif
/* ---- cpu-read, mm-cid-read ---- */

#ifdef YS_HAVE_HAND
static void ys_cpu_init(void *sh, struct thr *t)
{
	cpu_read_init(sh, t);
	if (!ys_thread_ok())
		t->aux = -ENOSYS;
}

READ_LOOP(ys_cpu_hand, ptrdiff_t off = ys_offset(); if (t->aux < 0) return, ys_read_cpu(off))

static int ys_cpu_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	return ys_aux_check(t, n, err, len) ? -1 : cpu_read_check(sh, t, n, err, len);
}

static void ys_cid_init(void *sh, struct thr *t)
{
	(void)sh;
	ys_note_cid();
	if (!ys_thread_ok())
		t->aux = -ENOSYS;
}

/* Where the kernel writes no mm_cid: the cpu_id read. */
READ_LOOP(ys_cid_hand, ptrdiff_t off = ys_offset(); if (t->aux < 0) return;
	  if (!ys_cid_ok) {
		  ys_cpu_hand(sh, t, n);
		  return;
	  },
	  ys_read_cid(off))
#endif

READ_LOOP(ys_cid_rsk, (void)0, rsk_mm_cid())

static __thread int ys_tl_cid;

static void ys_cid_tl_init(void *sh, struct thr *t)
{
	(void)sh;
	ys_tl_cid = rsk_mm_cid();
	t->aux = ys_tl_cid < 0 ? 0 : ys_tl_cid;
	ys_tl_cid = (int)t->aux;
}

READ_LOOP(ys_cid_tl, (void)0, *(volatile int *)&ys_tl_cid)

/* Every value read is an index below the possible CPUs: the sum is in
 * [0, ops x (cpus - 1)]; the thread-local value exactly ops x it. */
static int ys_cid_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	(void)sh;
	for (int i = 0; i < n; i++) {
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: cannot run a section: %s", i,
				 strerror((int)-t[i].aux));
			return -1;
		}
		if (read_sum_check(t, i, "mm_cids", err, len))
			return -1;
	}
	return 0;
}

static int ys_cid_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	(void)sh;
	for (int i = 0; i < n; i++)
		if (t[i].acc != (int64_t)t[i].ops_all * t[i].aux) {
			snprintf(err, len, "thread %d: sum %jd, expected %jd", i, (intmax_t)t[i].acc,
				 (intmax_t)((int64_t)t[i].ops_all * t[i].aux));
			return -1;
		}
	return 0;
}

static const struct impl cpu_impls[] = {
	ROW("cpu-read", "rseqkit", NULL, cpu_read_init, cpu_read_rseqkit, NULL, cpu_read_check, NULL),
	ROW("cpu-read", "thread-local", NULL, cpu_read_init, cpu_read_tl, NULL, cpu_read_check_tl, NULL),
	ROW("cpu-read", "getcpu", NULL, cpu_read_init, cpu_read_getcpu, NULL, cpu_read_check, NULL),
#ifdef YS_HAVE_HAND
	HAND_ROW("cpu-read", "hand-written", NULL, ys_cpu_init, ys_cpu_hand, ys_cpu_check_hand, NULL),
#endif
	ROW("mm-cid-read", "rseqkit", NULL, NULL, ys_cid_rsk, NULL, ys_cid_check, NULL),
#ifdef YS_HAVE_HAND
	HAND_ROW("mm-cid-read", "hand-written", NULL, ys_cid_init, ys_cid_hand, ys_cid_check, NULL),
#endif
	ROW("mm-cid-read", "thread-local", NULL, ys_cid_tl_init, ys_cid_tl, NULL, ys_cid_check_tl,
	    NULL),
};

const struct family fam_cpu = {
	.name = "cpu", .title = "the current CPU and concurrency id", FAMILY_IMPLS(cpu_impls),
};
