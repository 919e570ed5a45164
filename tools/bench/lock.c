/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/lock.c - the lock family.
 *
 *   spinlock  lock, add 1 to a plain counter the lock guards, unlock; the
 *             counter total proves mutual exclusion.  rsk_spinlock
 *             (rseqkit, -ungated, -fallback, -cid), the hand-written
 *             limit and a lock word only its thread takes (thread-local),
 *             beside a mutex, a pthread spinlock and ck_spinlock
 *             (rival-ck.c)
 */
#include "bench.h"
#include "../yardstick.h"

struct lock_state {
	struct counter_state c; /* the guarded counters, mutex, pthread spinlock */
	struct rsk_spinlock *rl;
};

/* The loop the rseqkit, -ungated, -fallback and -cid rows share. */
BENCH_LOOP_DECL(lock_rseqkit);
void BENCH_LOOP(lock_rseqkit)(void *sh, struct thr *t, unsigned n)
{
	struct lock_state *s = sh;
	/* In locals, as the hand-written loop keeps its pointers: read
	 * through s, they would be reloaded after every section (its asm
	 * clobbers memory), a cost of this loop, not of the lock. */
	struct rsk_spinlock *rl = s->rl;
	struct pcpu_slot *slots = s->c.slots;
	int nr = ncpus_possible;

	for (unsigned i = 0; i < n; i++) {
		int idx = rsk_spinlock_lock(rl);
		if (__builtin_expect(idx < 0 || idx >= nr, 0)) {
			t->aux = idx < 0 ? idx : -ERANGE; /* the check reports it */
			return;
		}
		slots[idx].v++;
		rsk_spinlock_unlock(rl, idx);
	}
}

#ifndef BENCH_UNGATED
static void *lock_setup_mode(int nthreads, enum rsk_index_mode mode)
{
	struct lock_state *s = bench_alloc(sizeof(*s));

	(void)nthreads;
	counter_init(&s->c);
	die_on(rsk_spinlock_create(&s->rl, mode), "rsk_spinlock_create");
	return s;
}
MODE_SETUPS(lock_setup, lock_setup_mode)

static void lock_teardown(void *sh)
{
	struct lock_state *s = sh;

	rsk_spinlock_destroy(s->rl);
	counter_fini(&s->c);
	free(s);
}

static void lock_mutex(void *sh, struct thr *t, unsigned n)
{
	counter_add_mutex(&((struct lock_state *)sh)->c, t, n);
}

static void lock_pspin(void *sh, struct thr *t, unsigned n)
{
	counter_add_spin(&((struct lock_state *)sh)->c, t, n);
}

static int lock_check_slots(void *sh, struct thr *t, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: lock failed: %s", i, strerror((int)-t[i].aux));
			return -1;
		}
	return counter_check_slots(&((struct lock_state *)sh)->c, t, n, err, len);
}

static int lock_check_shared(void *sh, struct thr *t, int n, char *err, size_t len)
{
	return counter_check_shared(&((struct lock_state *)sh)->c, t, n, err, len);
}

/* ---- spinlock ---- */

struct ys_lock {
	struct lock_state *ls; /* the guarded counters (ls->c.slots) */
	char *locks;	       /* ncpus_possible lock words, 128 bytes apart */
};

static void *ys_lock_setup(int nthreads)
{
	struct ys_lock *s = bench_alloc(sizeof(*s));

	s->ls = lock_setup(nthreads);
	s->locks = bench_alloc((size_t)ncpus_possible * CACHE_LINE);
	ys_note_cid();
	return s;
}

static void ys_lock_teardown(void *sh)
{
	struct ys_lock *s = sh;

	lock_teardown(s->ls);
	free(s->locks);
	free(s);
}

#ifdef YS_HAVE_HAND
#define YS_LOCK_FN(MODE, OTHER) YS_LOCK_FN_(MODE, , OTHER)
#define YS_LOCK_FN_(MODE, G, OTHER)                                            \
	static __attribute__((noinline)) void ys_lock_hand##G##_##MODE(void *sh, struct thr *t, \
								   unsigned n) \
	{                                                                      \
		struct ys_lock *s = sh;                                        \
		ptrdiff_t off = ys_offset();                                   \
		char *locks = s->locks, *slots = (char *)s->ls->c.slots;       \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER(ys_lock_hand##G);                                        \
		for (unsigned i = 0; i < n; i++) {                             \
			uintptr_t o = ys_lock##G##_##MODE(off, locks);         \
			(*(intptr_t *)(void *)(slots + o))++;                  \
			ys_unlock(locks, o);                                   \
		}                                                              \
	}
YS_LOCK_FN(cpu, YS_NO_OTHER)
YS_LOCK_FN(cid, YS_CPU_IF_NO_CID)
YS_LOCK_FN_(cpu, _g, YS_NO_OTHER)
YS_LOCK_FN_(cid, _g, YS_CPU_IF_NO_CID)

static int ys_lock_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_lock *s = sh;

	if (ys_aux_check(t, n, err, len))
		return -1;
	for (int c = 0; c < ncpus_possible; c++)
		if (*(intptr_t *)(void *)(s->locks + (size_t)c * CACHE_LINE) != 0) {
			snprintf(err, len, "lock %d still held after the run", c);
			return -1;
		}
	return counter_check_slots(&s->ls->c, t, n, err, len);
}
#endif

/* The thread-local twin: a lock word only this thread takes. */
static __thread intptr_t ys_tl_lock, ys_tl_locked;

static __attribute__((noinline)) void ys_lock_tl(void *sh, struct thr *t, unsigned n)
{
	(void)sh;
	for (unsigned i = 0; i < n; i++) {
		if (__builtin_expect(__atomic_load_n(&ys_tl_lock, __ATOMIC_RELAXED) != 0, 0)) {
			t->aux = -EDEADLK;
			return;
		}
		__atomic_store_n(&ys_tl_lock, 1, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_ACQUIRE);
		ys_tl_locked++;
		__atomic_store_n(&ys_tl_lock, 0, __ATOMIC_RELEASE);
		__asm__ __volatile__("" ::: "memory");
	}
}

static void ys_lock_tl_fini(void *sh, struct thr *t)
{
	(void)sh;
	t->acc = ys_tl_locked;
}

static int ys_lock_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: its own lock was found held", i);
			return -1;
		}
	return counter_check_tl(sh, t, n, err, len);
}

static const struct impl lock_impls[] = {
	RSK_ROWS("spinlock", "rseqkit", lock_setup, lock_rseqkit, lock_check_slots, lock_teardown),
	ROW("spinlock", "mutex", lock_setup, NULL, lock_mutex, NULL, lock_check_shared, lock_teardown),
	ROW("spinlock", "pthread-spin", lock_setup, NULL, lock_pspin, NULL, lock_check_shared,
	    lock_teardown),
#ifdef BENCH_HAVE_CK
	ROW("spinlock", "ck", ck_lock_setup, NULL, ck_lock_fn, NULL, ck_lock_check, ck_lock_teardown),
#endif
	YS_ROWS("spinlock", lock_setup_cid, lock_rseqkit, lock_check_slots, lock_teardown, ys_lock,
		ys_lock_check_hand, ys_lock_teardown, ys_lock_tl_fini, ys_lock_check_tl),
};

const struct family fam_lock = {
	.name = "lock", .title = "a per-CPU lock", FAMILY_IMPLS(lock_impls),
};
#endif /* !BENCH_UNGATED */
