/* SPDX-License-Identifier: MIT */
/*
 * The progress protocol's gates: the gate word, holder slots, waiting,
 * fork() handling and each thread's statistics (fence.c has the fences,
 * stats.c the process totals, msg.h and msg.c the messages).  See
 * <rseqkit/progress.h> for the protocol and why it is safe.
 *
 * Gates.  A closed gate holds its holder's kernel thread id (cached in
 * TLS), so a thread that closes a gate it already holds - a signal handler
 * that interrupted its own thread's slow path - gets -EDEADLK instead of
 * waiting for itself; and a thread that holds a gate or lock already
 * never waits for another one (also -EDEADLK): two threads' signal
 * handlers, each on top of its own thread's hold, would otherwise each
 * wait for the other's.  Callers move on to another part instead.  Waiters spin for about 50 us (yielding), then set
 * GATE_WAITERS and sleep on a futex on the 32-bit half of the word that
 * holds the id and the flags; rsk_gate_open() exchanges the word with 0
 * and wakes them if the bit was set.  Sleepers wake every 500 ms to check
 * that the holder still exists (tgkill(pid, tid, 0)) and, with
 * RSEQKIT_GATE_WARN_MS, to report a long hold.  The pool's depot locks are
 * the same machinery without the fence (rsk_lock_take_()).  In a process
 * without rseq the structures' gates are plain locks (no fence) that open
 * with a plain store instead of the exchange (rsk_gate_drop_plain_()); a
 * wake-up that store loses is bounded by GATE_PLAIN's shorter sleeps.
 *
 * fork().  A child must not inherit a gate or a depot lock held by a
 * thread that does not exist in it: the part behind it may be half
 * updated.  Every thread that holds (or is about to take) a gate or lock
 * counts it in its holder slot, a 128-byte record in a table that is
 * never freed (the fork handler reads the slots of every thread; a slot
 * whose thread is gone is reused).  The count is a plain store by its
 * owner; the fork handler sets CTL_FORKING, issues a process-wide barrier
 * (membarrier PRIVATE_EXPEDITED: every thread of ours gets a full barrier,
 * so either its count is visible to the handler or it sees CTL_FORKING -
 * the asymmetric Dekker of liburcu), then waits until no other thread
 * counts a hold.  A thread that sees CTL_FORKING before taking its first
 * gate waits for the fork to finish - except the forking thread itself (a
 * signal handler that interrupted the prepare handler's wait), which goes
 * on: the fork waits for the other threads' holds only, and the handler's
 * end before the fork goes on.  Without membarrier at start-up,
 * CTL_SYM makes every close pay a full fence instead.  In the child the
 * other threads' slots are freed and the forking thread's own gates are
 * rewritten with its new id.
 *
 * Async-signal-safety: nothing here allocates with malloc (mmap only),
 * takes a pthread mutex, or formats with stdio on a path a handler can
 * reach; errno is preserved.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
/* futex(2) operations (the kernel's uapi values; musl-gcc's include path
 * has no <linux/futex.h>). */
#define RSK_FUTEX_PRIVATE 128
#ifndef FUTEX_WAIT_PRIVATE
#define FUTEX_WAIT_PRIVATE (0 | RSK_FUTEX_PRIVATE)
#endif
#ifndef FUTEX_WAKE_PRIVATE
#define FUTEX_WAKE_PRIVATE (1 | RSK_FUTEX_PRIVATE)
#endif
#include <sys/mman.h>
#include <sys/syscall.h>
#include "progress_internal.h"

static __thread struct gate_self gself;
/* See internal.h: &gself.slot->counts[ST_SLOW_PATHS] once the thread has
 * a slot of its own. */
__thread uint64_t *rsk_slow_tally_;

/* The calling thread's own counts (NULL: it has no slot of its own),
 * with the holder slots below. */
static uint64_t *own_counts(void);

/* Count an event of the calling thread, on CPU (or index) `cpu`. */
static void count_event(uint64_t *mine, int which, int cpu)
{
	uint64_t *own = own_counts();

	(*mine)++;
	if (LIKELY(own != NULL)) /* only this thread writes it */
		__atomic_store_n(&own[which], __atomic_load_n(&own[which], __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&stat_slot_for(cpu)->v[which], 1, __ATOMIC_RELAXED);
}

RSK_EXPORT void rsk_note_abort(void)
{
	int cpu = rsk_cpu();

	count_event(&gself.stats.aborts, ST_ABORTS, cpu);
	RSK_PROBE1(abort, cpu);
}

RSK_EXPORT void rsk_note_slow_path(void)
{
	rsk_note_slow_path_at(rsk_cpu());
}

/* Negative control (injection builds, tests/stats_fallback.c):
 * RSEQKIT_INJECT_BROKEN_TALLY=1 makes rsk_stats_thread() forget the slot's
 * base, so that a thread counts the slow paths of the slot's earlier
 * owners as its own. */
#if RSK_INJECTING
static int tally_broken(void)
{
	static int v = -1;

	if (__atomic_load_n(&v, __ATOMIC_RELAXED) < 0) {
		const char *e = getenv("RSEQKIT_INJECT_BROKEN_TALLY");
		__atomic_store_n(&v, e != NULL && e[0] == '1', __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&v, __ATOMIC_RELAXED);
}
#endif

RSK_EXPORT int rsk_stats_thread(struct rsk_stats *st)
{
	uint64_t *t = rsk_slow_tally_, base = gself.slow_base;

	if (st == NULL)
		return -EINVAL;
	*st = gself.stats;
#if RSK_INJECTING
	if (tally_broken())
		base = 0;
#endif
	/* The slow paths counted in the thread's own slot: since it became
	 * the thread's (a slot keeps the counts of its earlier owners). */
	if (t != NULL)
		st->slow_paths += __atomic_load_n(t, __ATOMIC_RELAXED) - base;
	return 0;
}

/* ---- the gate word ---- */

#define GATE_WARNED  ((intptr_t)0x10000000) /* a long hold was reported */
#define GATE_DEAD    ((intptr_t)0x20000000) /* the holder's death was reported */
#define GATE_WAITERS ((intptr_t)0x40000000) /* waiters may sleep on the futex */
/* The holder opens it with a plain store (a plain-path gate: see
 * rsk_gate_drop_plain_()), which can lose a wake-up: waiters sleep at most
 * PLAIN_SLEEP_MS at a time. */
#define GATE_PLAIN   ((intptr_t)(uint32_t)0x80000000u)
#define PLAIN_SLEEP_MS 10

/* The 32-bit half of the word that holds the id and the flags. */
static uint32_t *gate_futex(intptr_t *gate)
{
#if __SIZEOF_POINTER__ == 8 && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return (uint32_t *)(void *)gate + 1;
#else
	return (uint32_t *)(void *)gate;
#endif
}

static __attribute__((noinline)) void gate_wake(intptr_t *gate)
{
	int saved = errno;

	sys_futex(gate_futex(gate), FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
	errno = saved;
}

/* ---- holder slots ---- */

/*
 * Every gate a thread holds is remembered, for the fork child, which
 * rewrites them with its new id: the first GATE_TRACK in the slot itself,
 * the rest in pages mapped on demand (struct held_more), chained from the
 * slot and kept with it (the next owner of the slot reuses them).  Entry i
 * of a thread's holds is held_entry(s, i); an entry a page could not be
 * mapped for is not known (NULL), as is a hold without a word.
 */
#define GATE_TRACK 10
#define HELD_MORE_BYTES 4096
#define HELD_MORE ((HELD_MORE_BYTES - sizeof(void *)) / sizeof(intptr_t *))

struct held_more {
	struct held_more *next;
	intptr_t *held[HELD_MORE];
};
_Static_assert(sizeof(struct held_more) == HELD_MORE_BYTES, "a page of holds");

struct gate_slot {
	int32_t owner;		    /* thread id of its owner, 0 when free */
	int32_t nheld;		    /* gates and locks held or being taken */
	intptr_t *held[GATE_TRACK]; /* the first GATE_TRACK of them (NULL: not known) */
	struct held_more *more;	    /* the rest, HELD_MORE a page */
	uint64_t counts[ST_N];	    /* events of its owners, past and present */
} __attribute__((aligned(128)));
_Static_assert(sizeof(struct gate_slot) == 128, "a holder slot is one 128-byte line pair");

#define SLOT_CHUNK_BYTES 8192
struct slot_chunk {
	struct slot_chunk *next;
	int nslots;
	struct gate_slot slot[] __attribute__((aligned(128)));
};
static struct slot_chunk *slot_chunks;
/* When no slot could be mapped: shared, counted with atomic operations. */
static struct gate_slot shared_slot;

static struct gate_slot *slot_claim(int32_t tid)
{
	struct slot_chunk *c, *head;
	pid_t pid = getpid();

	/* A free slot; failing that, one whose thread is gone (one failed
	 * search maps a new chunk, so its cost is shared by 63 threads). */
	for (int pass = 0; pass < 2; pass++) {
		for (c = __atomic_load_n(&slot_chunks, __ATOMIC_ACQUIRE); c != NULL; c = c->next) {
			for (int i = 0; i < c->nslots; i++) {
				struct gate_slot *s = &c->slot[i];
				int32_t o = __atomic_load_n(&s->owner, __ATOMIC_RELAXED);

				if (o == 0 || (pass == 1 && o != tid && thread_gone(pid, o))) {
					if (__atomic_compare_exchange_n(&s->owner, &o, tid, 0,
									__ATOMIC_ACQUIRE,
									__ATOMIC_RELAXED)) {
						__atomic_store_n(&s->nheld, 0, __ATOMIC_RELAXED);
						return s;
					}
				}
			}
		}
	}
	c = mmap(NULL, SLOT_CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		 0);
	if (c == MAP_FAILED)
		return &shared_slot;
	c->nslots = (int)((SLOT_CHUNK_BYTES - offsetof(struct slot_chunk, slot)) /
			  sizeof(struct gate_slot));
	c->slot[0].owner = tid;
	head = __atomic_load_n(&slot_chunks, __ATOMIC_RELAXED);
	do
		c->next = head;
	while (!__atomic_compare_exchange_n(&slot_chunks, &head, c, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	return &c->slot[0];
}

static __attribute__((noinline)) void self_init(struct gate_self *g)
{
	int saved = errno;
	int32_t tid = sys_gettid();

	g->slot = slot_claim(tid);
	if (g->slot != &shared_slot) {
		g->slow_base = __atomic_load_n(&g->slot->counts[ST_SLOW_PATHS], __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		rsk_slow_tally_ = &g->slot->counts[ST_SLOW_PATHS];
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&g->tid, tid, __ATOMIC_RELAXED);
	errno = saved;
}

static inline struct gate_self *self(void)
{
	struct gate_self *g = &gself;

	if (UNLIKELY(__atomic_load_n(&g->tid, __ATOMIC_RELAXED) == 0))
		self_init(g);
	return g;
}

static uint64_t *own_counts(void)
{
	struct gate_slot *s = self()->slot;

	return s == &shared_slot ? NULL : s->counts;
}

uint64_t rsk_slot_counts_total_(int which)
{
	uint64_t t = 0;

	for (struct slot_chunk *c = __atomic_load_n(&slot_chunks, __ATOMIC_ACQUIRE); c != NULL;
	     c = c->next)
		for (int i = 0; i < c->nslots; i++)
			t += __atomic_load_n(&c->slot[i].counts[which], __ATOMIC_RELAXED);
	return t;
}

/* Count one more hold (before the compare-and-swap); returns the count
 * before.  The slot is the thread's own: plain loads and stores, ordered
 * against a signal handler of the same thread by the compiler barrier. */
static inline int slot_enter(struct gate_slot *s)
{
	int n;

	if (UNLIKELY(s == &shared_slot))
		return __atomic_fetch_add(&s->nheld, 1, __ATOMIC_SEQ_CST);
	n = __atomic_load_n(&s->nheld, __ATOMIC_RELAXED);
	__atomic_store_n(&s->nheld, n + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return n;
}

/* Undo slot_enter() (n: the count it returned). */
static inline void slot_leave_to(struct gate_slot *s, int n)
{
	if (UNLIKELY(s == &shared_slot))
		__atomic_fetch_sub(&s->nheld, 1, __ATOMIC_RELEASE);
	else
		__atomic_store_n(&s->nheld, n, __ATOMIC_RELEASE);
}

/*
 * Where entry i of the slot's holds is kept, or NULL: not in a page that
 * exists (create: map the pages it needs; NULL if that fails).  The slot
 * is its thread's own, but a signal handler of that thread may interrupt
 * a page's mapping and map one too: a page is linked in with a
 * compare-and-swap, and the loser unmaps its own.
 */
static __attribute__((noinline)) intptr_t **held_entry(struct gate_slot *s, int i, int create)
{
	struct held_more **link = &s->more, *m;
	size_t k;

	if (i < GATE_TRACK)
		return &s->held[i];
	for (k = (size_t)i - GATE_TRACK;; k -= HELD_MORE, link = &m->next) {
		m = __atomic_load_n(link, __ATOMIC_ACQUIRE);
		if (m == NULL) {
			struct held_more *none = NULL;

			if (!create)
				return NULL;
			m = mmap(NULL, HELD_MORE_BYTES, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				return NULL;
			if (!__atomic_compare_exchange_n(link, &none, m, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE)) {
				munmap(m, HELD_MORE_BYTES);
				m = none;
			}
		}
		if (k < HELD_MORE)
			return &m->held[k];
	}
}

static intptr_t *held_get(struct gate_slot *s, int i)
{
	intptr_t **e = held_entry(s, i, 0);

	return e != NULL ? *e : NULL;
}

static void held_set(struct gate_slot *s, int i, intptr_t *word)
{
	intptr_t **e = held_entry(s, i, word != NULL);

	if (e != NULL)
		*e = word;
}

/* Remember `word` as entry n (the count slot_enter() returned). */
static inline void slot_track(struct gate_slot *s, int n, intptr_t *word)
{
	if (LIKELY(n < GATE_TRACK)) {
		if (s != &shared_slot)
			s->held[n] = word;
	} else if (s != &shared_slot) {
		held_set(s, n, word);
	}
}

/* The thread released `word`, which it held: forget it.  The entries
 * [0, nheld) are the gates held, NULL for one not known. */
static __attribute__((noinline)) void slot_untrack(struct gate_slot *s, const intptr_t *word)
{
	int n = __atomic_load_n(&s->nheld, __ATOMIC_RELAXED);
	int top = n - 1, i;
	intptr_t *last;

	if (UNLIKELY(s == &shared_slot)) {
		__atomic_fetch_sub(&s->nheld, 1, __ATOMIC_RELEASE);
		return;
	}
	if (n <= 0)
		return;
	last = held_get(s, top);
	if (LIKELY(last == word)) {
		i = top;
	} else {
		for (i = top; i >= 0 && held_get(s, i) != word; i--)
			;
		if (i < 0) /* not known: it stands behind a NULL entry */
			for (i = top; i >= 0 && held_get(s, i) != NULL; i--)
				;
	}
	if (i >= 0 && i != top)
		held_set(s, i, last);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&s->nheld, n - 1, __ATOMIC_RELEASE);
}

/*
 * Does the thread whose slot is s, with n holds counted before the one it
 * is taking, hold a gate or a lock (a word others wait for)?  The holds
 * without a word (rsk_hold_enter_()) are tracked as NULL and make no one
 * wait.  A hold is tracked before its compare-and-swap, so a signal
 * handler that interrupted a take between the two sees it as held (and
 * waits for nothing: never a cycle).  An entry not known (a page of
 * entries could not be mapped) reads as a hold without a word.  The
 * shared slot (no slot could be mapped) counts every such thread's holds
 * together: it tells nothing, and says no.
 */
static __attribute__((noinline)) int holds_word(struct gate_slot *s, int n)
{
	if (s == &shared_slot || n <= 0)
		return 0;
	for (int i = 0; i < n; i++)
		if ((i < GATE_TRACK ? s->held[i] : held_get(s, i)) != NULL)
			return 1;
	return 0;
}

/* slot_untrack()'s common case: `word` is the last one taken.  Returns
 * whether it was (and is forgotten); otherwise it changed nothing. */
static inline int slot_release_last(struct gate_slot *s, const intptr_t *word)
{
	int n = __atomic_load_n(&s->nheld, __ATOMIC_RELAXED);

	if (LIKELY(n > 0 && n <= GATE_TRACK && s->held[n - 1] == word && s != &shared_slot)) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&s->nheld, n - 1, __ATOMIC_RELEASE);
		return 1;
	}
	return 0;
}

/* slot_untrack(), its common case inline. */
static inline void slot_release(struct gate_slot *s, const intptr_t *word)
{
	if (!slot_release_last(s, word))
		slot_untrack(s, word);
}

/* ---- process-wide control: start-up, fork ---- */

enum { CTL_READY = 1, CTL_FORKING = 2, CTL_SYM = 4, CTL_INIT = 8 };
static int gate_ctl;
static unsigned gate_warn_ms;		/* RSEQKIT_GATE_WARN_MS, 0: off */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static int32_t fork_tid;		/* the forking thread, while CTL_FORKING */
#define FORK_WAIT_MS 2000		/* the longest the fork handler waits */
static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

static void gate_init(void)
{
	int ctl = 0;

	if (!__atomic_compare_exchange_n(&gate_ctl, &ctl, CTL_INIT, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_ACQUIRE)) {
		while (!(__atomic_load_n(&gate_ctl, __ATOMIC_ACQUIRE) & CTL_READY))
			sched_yield();
		return;
	}
	const char *env = getenv("RSEQKIT_GATE_WARN_MS");
	if (env != NULL && env[0] != '\0') {
		char *end;
		long v = strtol(env, &end, 10);
		if (*end == '\0' && v >= 1 && v <= 1L << 30) {
			gate_warn_ms = (unsigned)v;
		} else {
			struct msg m = { .n = 0 };
			msg_str(&m, "rseqkit: RSEQKIT_GATE_WARN_MS=");
			msg_str(&m, env);
			msg_str(&m, " ignored (expected a number of milliseconds, 1 or more)");
			msg_out(&m);
		}
	}
	/* The fork handler's barrier; without it every close fences. */
	long q = sys_membarrier(RSK_ABI_MEMBARRIER_CMD_QUERY, 0, 0);
	int asym = q > 0 && (q & MB_CMD_PRIVATE_EXPEDITED) &&
		   sys_membarrier(MB_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	__atomic_store_n(&gate_ctl, CTL_READY | (asym ? 0 : CTL_SYM), __ATOMIC_RELEASE);
}

void rsk_progress_init_(void)
{
	int saved = errno;

	if (!(__atomic_load_n(&gate_ctl, __ATOMIC_ACQUIRE) & CTL_READY))
		gate_init();
	errno = saved;
}

static void progress_ctor(void) __attribute__((constructor));
static void progress_ctor(void)
{
	rsk_progress_init_();
}

/*
 * The close path found gate_ctl other than CTL_READY, after counting its
 * hold (n held before).  Returns 1 when it uncounted the hold and waited
 * for a fork to finish (retry), 0 to go on.
 */
static __attribute__((noinline)) int ctl_slow(struct gate_slot *s, int n, int ctl)
{
	if (!(ctl & CTL_READY)) {
		gate_init();
		ctl = __atomic_load_n(&gate_ctl, __ATOMIC_ACQUIRE);
	}
	if (ctl & CTL_SYM) {
		/* No process-wide barrier: pair with the fork handler's. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		ctl = __atomic_load_n(&gate_ctl, __ATOMIC_RELAXED);
	}
	/* Holding another gate already: go on, the fork handler waits. */
	if (!(ctl & CTL_FORKING) || n > 0 || s == &shared_slot)
		return 0;
	/* The forking thread: a signal handler interrupted fork()'s prepare
	 * handler, which waits for the other threads' holds, not this one's,
	 * and cannot go on before the handler returns.  Waiting here for the
	 * fork to finish would wait for itself. */
	if (__atomic_load_n(&fork_tid, __ATOMIC_RELAXED) == gself.tid)
		return 0;
	slot_leave_to(s, n);
	int saved = errno;
	while ((ctl = __atomic_load_n(&gate_ctl, __ATOMIC_ACQUIRE)) & CTL_FORKING)
		sys_futex(&gate_ctl, FUTEX_WAIT_PRIVATE, (uint32_t)ctl, NULL);
	errno = saved;
	return 1;
}

/* ---- waiting ---- */

static void describe(struct msg *m, intptr_t *word, int idx, const char *what, const void *obj)
{
	msg_str(m, "rseqkit: ");
	if (what != NULL) {
		msg_str(m, what);
		msg_str(m, " ");
		msg_num(m, (uintptr_t)obj, 16);
		msg_str(m, ": ");
	}
	msg_str(m, idx >= 0 ? "gate " : "lock ");
	msg_num(m, (uintptr_t)word, 16);
	if (idx >= 0) {
		msg_str(m, " of part ");
		msg_dec(m, idx);
	}
}

/* Does the holder recorded in v (still the value of *word) not exist? */
static int holder_gone(intptr_t *word, intptr_t v)
{
	int32_t tid = (int32_t)(v & RSK_GATE_TID);

	return tid != 0 && thread_gone(getpid(), tid) &&
	       __atomic_load_n(word, __ATOMIC_ACQUIRE) == v;
}

/*
 * *word was seen closed (`seen`) by another thread: wait until it looks
 * open.  Returns 0 (try again), -EDEADLK or -EOWNERDEAD.
 */
static __attribute__((noinline)) int gate_wait(intptr_t *word, intptr_t seen, intptr_t me, int idx,
					       const char *what, const void *obj)
{
	int saved = errno, err = 0;
	uint64_t t0;

	count_event(&gself.stats.gate_waits, ST_GATE_WAITS, idx);
	if (!(seen & GATE_DEAD)) {
		/* Bounded spinning: most holders are done within microseconds. */
		for (int i = 0; i < 64; i++) {
			cpu_relax();
			if (__atomic_load_n(word, __ATOMIC_RELAXED) == 0)
				goto out;
		}
		t0 = now_ns();
		while (now_ns() - t0 < 50000) {
			sched_yield(); /* the holder may be preempted */
			if (__atomic_load_n(word, __ATOMIC_RELAXED) == 0)
				goto out;
		}
	} else {
		t0 = now_ns();
	}
	for (;;) {
		intptr_t v = __atomic_load_n(word, __ATOMIC_RELAXED);
		uint64_t waited_ms;
		/* The holder's existence is checked this often. */
		long sleep_ms = (v & GATE_PLAIN) ? PLAIN_SLEEP_MS : 500;

		if (v == 0)
			break;
		if ((v & RSK_GATE_TID) == me) {
			err = -EDEADLK;
			break;
		}
		if (holder_gone(word, v)) {
			if (!(v & GATE_DEAD) &&
			    __atomic_compare_exchange_n(word, &v, v | GATE_DEAD, 0, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED)) {
				struct msg m = { .n = 0 };
				describe(&m, word, idx, what, obj);
				msg_str(&m, " is held by thread ");
				msg_dec(&m, (long)(v & RSK_GATE_TID));
				msg_str(&m, ", which no longer exists (it exited holding it, or the "
					    "gate was inherited through fork()): -EOWNERDEAD");
				msg_out(&m);
			}
			err = -EOWNERDEAD;
			break;
		}
		waited_ms = (now_ns() - t0) / 1000000;
		if (gate_warn_ms != 0 && !(v & GATE_WARNED)) {
			if (waited_ms >= gate_warn_ms) {
				if (__atomic_compare_exchange_n(word, &v, v | GATE_WARNED, 0,
								__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
					struct msg m = { .n = 0 };
					describe(&m, word, idx, what, obj);
					msg_str(&m, " held by thread ");
					msg_dec(&m, (long)(v & RSK_GATE_TID));
					msg_str(&m, " for more than ");
					msg_dec(&m, (long)gate_warn_ms);
					msg_str(&m, " ms (RSEQKIT_GATE_WARN_MS)");
					msg_out(&m);
				}
				continue;
			}
			if ((long)(gate_warn_ms - waited_ms) < sleep_ms)
				sleep_ms = (long)(gate_warn_ms - waited_ms);
		}
		if (!(v & GATE_WAITERS)) {
			if (!__atomic_compare_exchange_n(word, &v, v | GATE_WAITERS, 0,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				continue;
			v |= GATE_WAITERS;
		}
		struct timespec ts = { sleep_ms / 1000, (sleep_ms % 1000) * 1000000 };
		sys_futex(gate_futex(word), FUTEX_WAIT_PRIVATE, (uint32_t)v, &ts);
	}
out:
	errno = saved;
	return err;
}

/* gate_take() when the fast try failed: the gate is held, or a fork
 * (or the start-up) is in progress.  Out of line: the common case stays a
 * few instructions. */
static __attribute__((noinline)) int gate_take_wait(struct gate_self *g, intptr_t *word, int idx,
						    const char *what, const void *obj, intptr_t bits)
{
	struct gate_slot *s = g->slot;
	intptr_t me = g->tid, seen;
	int err;

	for (;;) {
		int ctl, n = slot_enter(s);

		slot_track(s, n, word); /* before the take: see holds_word() */
		ctl = __atomic_load_n(&gate_ctl, __ATOMIC_RELAXED);
		if (UNLIKELY(ctl != CTL_READY) && ctl_slow(s, n, ctl))
			continue;
		seen = 0;
		if (LIKELY(__atomic_compare_exchange_n(word, &seen, me | bits, 0, __ATOMIC_ACQUIRE,
						       __ATOMIC_RELAXED))) {
			RSK_INJECT_C(RSK_INJECT_HELD);
			return 0;
		}
		slot_leave_to(s, n);
		if ((seen & RSK_GATE_TID) == me)
			return -EDEADLK;
		/* Holding another gate or lock, the thread waits for none: a
		 * signal handler that interrupted its own thread's hold, whose
		 * waiting could close a cycle with another thread's handler
		 * doing the same.  Its caller moves on to another part, the
		 * depot or the overflow. */
		if (UNLIKELY(holds_word(s, n)))
			return -EDEADLK;
		err = gate_wait(word, seen, me, idx, what, obj);
		if (err != 0)
			return err;
	}
}

/* One try to take *word for the calling thread (g: self()), its common
 * case: no fork or start-up in progress, the gate open, fewer than
 * GATE_TRACK holds already (the wait path tracks the others).  The hold is
 * counted before the compare-and-swap, which fork_prepare() relies on
 * (see ctl_slow()).  The word gets the thread's id and `bits`.  Returns
 * whether it took the gate; when not, it changed nothing. */
static inline int gate_try(struct gate_self *g, intptr_t *word, intptr_t bits)
{
	struct gate_slot *s = g->slot;
	intptr_t seen = 0;
	int n;

	if (UNLIKELY(s == &shared_slot))
		return 0;
	n = slot_enter(s);
	if (LIKELY(n < GATE_TRACK)) {
		s->held[n] = word; /* before the take: see holds_word() */
		if (LIKELY(__atomic_load_n(&gate_ctl, __ATOMIC_RELAXED) == CTL_READY &&
			   __atomic_compare_exchange_n(word, &seen, (intptr_t)g->tid | bits, 0,
						       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
			RSK_INJECT_C(RSK_INJECT_HELD); /* tests: a signal on top of the hold */
			return 1;
		}
	}
	slot_leave_to(s, n);
	return 0;
}

/* Take *word for the calling thread: 0, -EDEADLK or -EOWNERDEAD. */
static inline int gate_take(intptr_t *word, int idx, const char *what, const void *obj)
{
	struct gate_self *g = self();

	if (LIKELY(gate_try(g, word, 0)))
		return 0;
	return gate_take_wait(g, word, idx, what, obj, 0);
}

/* What follows the opening of *word, which held `old`, by the calling
 * thread (g: its gself): its bookkeeping if it held it (a gate opened by a
 * thread that does not hold it - a recovery after -EOWNERDEAD - changes no
 * count), and the waiters' wake-up.  Returns whether it held it. */
static inline int gate_opened(struct gate_self *g, intptr_t *word, intptr_t old)
{
	int mine = (old & RSK_GATE_TID) == g->tid && g->tid != 0;

	if (LIKELY(mine))
		slot_release(g->slot, word);
	if (UNLIKELY(old & GATE_WAITERS))
		gate_wake(word);
	return mine;
}

/* Open *word; returns whether the calling thread held it. */
static inline int gate_release(intptr_t *word)
{
	return gate_opened(&gself, word, __atomic_exchange_n(word, 0, __ATOMIC_RELEASE));
}

/* While a thread holds a closed gate, others wait for it: it asks the
 * kernel not to preempt it (the time-slice extension, <rseqkit/slice.h>),
 * from the fence that closed the first gate (a system call: the region
 * starts after it) until the last one opens.  A signal handler's gates
 * nest inside: it closes and opens them before the interrupted code goes
 * on. */
static void slice_hold(void)
{
	struct gate_self *g = &gself;

	if (g->slice_gates++ == 0)
		g->slice = rsk_slice_begin();
}

static void slice_unhold(void)
{
	struct gate_self *g = &gself;
	/* Read first: a handler that runs between the count reaching 0 and
	 * the end would open a region of its own and leave its (nested)
	 * token in g->slice. */
	rsk_slice_t s = g->slice;

	if (g->slice_gates > 0 && --g->slice_gates == 0)
		rsk_slice_end(s);
}

/* The pool's depot locks: a gate without a fence. */
int rsk_lock_take_(intptr_t *lock, const char *what, const void *obj)
{
	return gate_take(lock, -1, what, obj);
}

void rsk_lock_drop_(intptr_t *lock)
{
	gate_release(lock);
}

/* rsk_gate_take_plain_() after its try failed (or before the thread's
 * first take): out of line, as gate_take_wait(). */
static __attribute__((noinline)) int take_plain_wait(intptr_t *gate, int idx, const char *what,
						     const void *obj)
{
	int err = gate_take_wait(self(), gate, idx, what, obj, GATE_PLAIN);

	RSK_PROBE2(gate_close, idx, err);
	return err;
}

/* See internal.h.  Nothing to fence and no time-slice region (the
 * extension needs a registration); traced and reported as the part's
 * gate. */
int rsk_gate_take_plain_at_(struct gate_self *g, intptr_t *gate, int idx, const char *what,
			    const void *obj)
{
	if (LIKELY(__atomic_load_n(&g->tid, __ATOMIC_RELAXED) != 0 && gate_try(g, gate, GATE_PLAIN))) {
		RSK_PROBE2(gate_close, idx, 0);
		return 0;
	}
	return take_plain_wait(gate, idx, what, obj);
}

int rsk_gate_take_plain_(intptr_t *gate, int idx, const char *what, const void *obj)
{
	return rsk_gate_take_plain_at_(&gself, gate, idx, what, obj);
}

struct gate_self *rsk_gate_self_(void)
{
	return &gself;
}

/* Count a slow path of the calling thread (g: its gself) on part idx:
 * count_event() with the slot already at hand. */
static inline __attribute__((always_inline)) void count_slow_path(struct gate_self *g, int idx)
{
	struct gate_slot *own = g->slot;

	/* In the thread's own slot (rsk_stats_thread() subtracts the base),
	 * as rsk_count_slow_path_() counts; else in the thread's state and
	 * the process's per-CPU slot. */
	if (LIKELY(own != &shared_slot)) { /* only this thread writes it */
		__atomic_store_n(&own->counts[ST_SLOW_PATHS],
				 __atomic_load_n(&own->counts[ST_SLOW_PATHS], __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELAXED);
	} else {
		g->stats.slow_paths++;
		__atomic_add_fetch(&stat_slot_for(idx)->v[ST_SLOW_PATHS], 1, __ATOMIC_RELAXED);
	}
	RSK_PROBE1(slow_path, idx);
}

/* See internal.h: count_slow_path(), the thread's state looked up once. */
void rsk_note_slow_path_at(int idx)
{
	count_slow_path(self(), idx);
}

/* rsk_gate_drop_plain_() past its common case: the gate had waiters, or
 * the thread's record of its holds is not the simple one. */
static __attribute__((noinline)) void drop_plain_rest(struct gate_self *g, intptr_t *gate,
						      intptr_t old, int idx, int count)
{
	gate_opened(g, gate, old);
	if (count)
		count_slow_path(g, idx);
}

/*
 * See internal.h.  gate_release() and the count in one call, with one
 * look-up of the thread's state: in a process without rseq this is every
 * operation's path.
 *
 * The gate opens with a plain store when it reads as the plain take left
 * it (no waiters bit): no atomic exchange, which costs as much as the rest
 * of the operation.  Nobody else writes a held gate
 * but a waiter setting GATE_WAITERS (or a report's flag), so the store
 * loses nothing but that: a waiter that set the bit between the load and
 * the store, and went to sleep on the futex before the store, is not
 * woken.  It sleeps PLAIN_SLEEP_MS at most, as GATE_PLAIN tells it, and
 * that needs this thread stopped between two instructions (preempted or
 * in a signal handler) while another spins, yields for 50 us and sleeps.
 */
void rsk_gate_drop_plain_at_(struct gate_self *g, intptr_t *gate, int idx, int count)
{
	intptr_t mine = (intptr_t)g->tid | GATE_PLAIN;
	intptr_t old = __atomic_load_n(gate, __ATOMIC_RELAXED);

	if (LIKELY(old == mine))
		__atomic_store_n(gate, 0, __ATOMIC_RELEASE);
	else
		old = __atomic_exchange_n(gate, 0, __ATOMIC_RELEASE);
	if (LIKELY(old == mine && g->tid != 0 && slot_release_last(g->slot, gate))) {
		if (count)
			count_slow_path(g, idx);
		return;
	}
	drop_plain_rest(g, gate, old, idx, count);
}

void rsk_gate_drop_plain_(intptr_t *gate, int idx, int count)
{
	rsk_gate_drop_plain_at_(&gself, gate, idx, count);
}

/* A hold without a word (the pool's objects in transit between a cache
 * and the depot): fork() waits for it as for a held gate. */
void rsk_hold_enter_(void)
{
	struct gate_self *g = self();
	struct gate_slot *s = g->slot;
	int n, ctl;

	do {
		n = slot_enter(s);
		ctl = __atomic_load_n(&gate_ctl, __ATOMIC_RELAXED);
	} while (UNLIKELY(ctl != CTL_READY) && ctl_slow(s, n, ctl));
	slot_track(s, n, NULL);
}

void rsk_hold_leave_(void)
{
	slot_release(gself.slot, NULL);
}

/* Does the calling thread hold *lock (a gate or a depot lock)? */
int rsk_lock_mine_(const intptr_t *lock)
{
	int32_t me = __atomic_load_n(&gself.tid, __ATOMIC_RELAXED);

	return me != 0 && (__atomic_load_n(lock, __ATOMIC_RELAXED) & RSK_GATE_TID) == me;
}

int rsk_holding_(void)
{
	struct gate_slot *s = self()->slot;

	return holds_word(s, __atomic_load_n(&s->nheld, __ATOMIC_RELAXED));
}

/* See progress_internal.h: fence.c's count. */
void rsk_count_fence_(int cpu)
{
	count_event(&gself.stats.fences, ST_FENCES, cpu);
}

/* ---- gates ---- */

/* rsk_gate_close() for a gate that reports can name: "<what> <obj>". */
int rsk_gate_close_named_(intptr_t *gate, enum rsk_index_mode mode, int idx, const char *what,
			  const void *obj)
{
	int err;

	if (UNLIKELY(!__atomic_load_n(&rsk_process.initialised, __ATOMIC_ACQUIRE)))
		rsk_init_once();
	if (UNLIKELY(gate == NULL || (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID) ||
		     (unsigned)idx >= (unsigned)rsk_process.possible_cpus))
		return -EINVAL;
	err = gate_take(gate, idx, what, obj);
	if (LIKELY(err == 0) && rsk_process.owner != RSK_OWNER_NONE) {
		err = rsk_fence_(mode == RSK_INDEX_CPU ? idx : -1);
		if (err != 0)
			gate_release(gate);
	}
	if (LIKELY(err == 0) && UNLIKELY(rsk_fast.slice_ok))
		slice_hold();
	RSK_PROBE2(gate_close, idx, err);
	return err;
}

RSK_EXPORT int rsk_gate_close(intptr_t *gate, enum rsk_index_mode mode, int idx)
{
	return rsk_gate_close_named_(gate, mode, idx, NULL, NULL);
}

RSK_EXPORT void rsk_gate_open(intptr_t *gate)
{
	if (UNLIKELY(gate == NULL))
		return;
	if (gate_release(gate) && UNLIKELY(rsk_fast.slice_ok))
		slice_unhold();
}

/* ---- fork ---- */

/* Make every thread's hold count visible here, or CTL_FORKING to it. */
static void fork_barrier(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&gate_ctl, __ATOMIC_RELAXED) & CTL_SYM)
		return; /* every close fences itself */
	if (sys_membarrier(MB_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return;
	if (sys_membarrier(MB_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
	    sys_membarrier(MB_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return;
	/* Denied since start-up: a context switch is a barrier too. */
	if (rsk_process.possible_cpus > 0 &&
	    rsk_fence_by_migration_(0, rsk_process.possible_cpus - 1) == 0)
		return;
	sleep_ns(1000000);
}

static void fork_prepare(void)
{
	struct gate_slot *mine;
	uint64_t t0;
	pid_t pid;
	int late = 0;

	pthread_mutex_lock(&fork_lock);
	rsk_init_once(); /* a concurrent first call finishes (the init lock) */
	if (!(__atomic_load_n(&gate_ctl, __ATOMIC_ACQUIRE) & CTL_READY))
		gate_init();
	/* This thread's id and slot now, so that a signal handler that runs
	 * here is known as the forking thread (see ctl_slow()); the compiler
	 * barrier orders the store before CTL_FORKING for that handler. */
	mine = self()->slot;
	__atomic_store_n(&fork_tid, gself.tid, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_or_fetch(&gate_ctl, CTL_FORKING, __ATOMIC_SEQ_CST);
	fork_barrier();
	/* Wait until no other thread holds (or is taking) a gate or lock. */
	pid = getpid();
	t0 = now_ns();
	for (struct slot_chunk *c = __atomic_load_n(&slot_chunks, __ATOMIC_ACQUIRE); c != NULL;
	     c = c->next) {
		for (int i = 0; i < c->nslots; i++) {
			struct gate_slot *s = &c->slot[i];

			for (unsigned spin = 0; s != mine && !late; spin++) {
				int32_t owner = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);

				if (owner == 0 || __atomic_load_n(&s->nheld, __ATOMIC_ACQUIRE) <= 0)
					break;
				if (spin >= 64 && thread_gone(pid, owner))
					break; /* exited holding it: the child will report */
				if (now_ns() - t0 > (uint64_t)FORK_WAIT_MS * 1000000) {
					struct msg m = { .n = 0 };
					msg_str(&m, "rseqkit: fork(): thread ");
					msg_dec(&m, owner);
					msg_str(&m, " has held a gate or pool lock for more than ");
					msg_dec(&m, FORK_WAIT_MS);
					msg_str(&m, " ms; the child inherits it closed");
					msg_out(&m);
					late = 1;
					break;
				}
				if (spin < 64)
					sched_yield();
				else
					sleep_ns(50000);
			}
		}
	}
	while (!late && mine != &shared_slot &&
	       __atomic_load_n(&shared_slot.nheld, __ATOMIC_ACQUIRE) > 0 &&
	       now_ns() - t0 < (uint64_t)FORK_WAIT_MS * 1000000)
		sleep_ns(50000);
}

static void fork_parent(void)
{
	__atomic_and_fetch(&gate_ctl, ~CTL_FORKING, __ATOMIC_SEQ_CST);
	__atomic_store_n(&fork_tid, 0, __ATOMIC_RELAXED);
	sys_futex(&gate_ctl, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
	pthread_mutex_unlock(&fork_lock);
}

static void fork_child(void)
{
	struct gate_self *g = &gself;
	int32_t old = g->tid, tid = sys_gettid();

	/* The other threads do not exist here: neither do their holds. */
	for (struct slot_chunk *c = slot_chunks; c != NULL; c = c->next)
		for (int i = 0; i < c->nslots; i++)
			if (old == 0 || &c->slot[i] != g->slot) {
				c->slot[i].owner = 0;
				c->slot[i].nheld = 0;
			}
	shared_slot.nheld = 0;
	if (old != 0) {
		struct gate_slot *s = g->slot;
		g->tid = tid;
		if (s != &shared_slot) {
			s->owner = tid;
			/* Every gate this thread holds carries its old id:
			 * the new one, and of the flags only GATE_PLAIN (the
			 * waiters and reports were the parent's). */
			for (int i = 0; i < s->nheld; i++) {
				intptr_t *w = held_get(s, i);

				if (w != NULL && (*w & RSK_GATE_TID) == old)
					*w = (*w & GATE_PLAIN) | tid;
			}
		}
	}
	__atomic_and_fetch(&gate_ctl, ~CTL_FORKING, __ATOMIC_SEQ_CST);
	fork_tid = 0;
	pthread_mutex_init(&fork_lock, NULL);
	rsk_registry_fork_child_();
}
