/* SPDX-License-Identifier: MIT */
/*
 * rseqkit-stress - hammer the per-CPU data structures from many threads,
 * with delays, yields, signals and sleeps injected into the critical
 * sections, and check that nothing was lost or duplicated.
 *
 * Built only against the injection build of the library (-DRSEQKIT_INJECT);
 * its twin rseqkit-stress-noarm uses sections whose descriptor is never
 * armed, and must report FAILED: the proof that the checks catch loss.
 *
 * Exit: 0 OK, 1 FAILED, 2 usage error or nothing to test here.
 * See rseqkit-stress(1).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <rseqkit/rseqkit.h>
#include "../src/env.h" /* rsk_env_bool_: the library's reader of switches */

#ifndef RSEQKIT_INJECT
#error "rseqkit-stress needs the injection build (-DRSEQKIT_INJECT)"
#endif
#ifdef RSEQKIT_NEGATIVE_CONTROL
#define RSK_NOARM_BUILD 1 /* the unarmed twin: it never aborts */
#else
#define RSK_NOARM_BUILD 0
#endif

/*
 * The injection points each test passes: RSK_INJECT_ASM(n) inside the
 * sections of the operations its structure uses (the arch headers; only
 * 1-4 exist, and x86's add has no 3), RSK_INJECT_C(n) in the structure's
 * header (7-9) and, for -T s and -T r, point 9 in this tool.  A delay at
 * a point the test never passes would widen no window: -1..-9 for such a
 * point is refused.  The string is also what scripts read, from the
 * binary of any architecture without running it (tests/qemu/check-cross.sh):
 * "rseqkit-stress injection points: " then TEST=POINTS;... .
 *
 * A new test letter goes in: this string; struct options' comment; the
 * -T check, usage() and test_name[] (main() and above it); the switch
 * that creates the structure in main(), its worker in one_rep(), its
 * check after the run and its destroy at the end of main().  The two
 * switches end in `default:` for the copy buffer (-T m), and the item
 * check after the run covers every letter not excluded there: give a new
 * letter its own case, and exclude it from check_items() unless its
 * structure holds the items.  seed_items() and handler_ops() take it if
 * its structure holds items.  The scripts and the man page that name the
 * letters: doc/HACKING.md, "Adding a structure".
 */
#if defined(__x86_64__) || defined(__i386__)
#define POINTS_ADD "1 2"
#else
#define POINTS_ADD "1 2 3"
#endif
/* Where the pointer buffer's sections read the count and the slot inside
 * (<rseqkit/ptrbuf.h>, RSK_PTRBUF_SECTION_): no 4, 8 or 9. */
#ifdef RSK_PTRBUF_SECTION_
#define POINTS_PTRBUF "1 2 3 7"
#else
#define POINTS_PTRBUF "1 2 3 4 7 8 9"
#endif
/* The same for the copy buffer's counted copy sections (<rseqkit/copybuf.h>,
 * RSK_COPYBUF_SECTION_), which this tool's 16-byte item takes: no 4 or 8. */
#ifdef RSK_COPYBUF_SECTION_
#define POINTS_COPYBUF "1 2 3 7"
#else
#define POINTS_COPYBUF "1 2 3 4 7 8"
#endif
__attribute__((used)) static const char inject_points[] =
	"rseqkit-stress injection points: "
	"s=1 2 3 7 8 9;l=1 2 3 7 8;b=" POINTS_PTRBUF ";m=" POINTS_COPYBUF ";i=" POINTS_ADD " 7;"
	"r=1 2 3 4 7 8 9;p=1 2 3 4 7 8 9;a=" POINTS_ADD " 7 8;";

/* The points of test t ("1 2 7"), copied into buf; NULL if the table has
 * no entry for t (every point is then accepted). */
static const char *test_points(char t, char *buf, size_t len)
{
	const char *tab = strchr(inject_points, ':') + 2, *e;

	for (; *tab; tab = e + 1) {
		e = strchr(tab, ';');
		if (tab[0] == t && tab[1] == '=') {
			snprintf(buf, len, "%.*s", (int)(e - tab - 2), tab + 2);
			return buf;
		}
	}
	return NULL;
}

static int has_point(const char *points, int p)
{
	for (; *points; points++)
		if (*points == '0' + p)
			return 1;
	return 0;
}

/* Items each thread brings into the list / buffer tests. */
#define ITEMS_PER_THREAD 4

struct options {
	char test;		/* s l b m i r p a */
	long threads, reps;
	enum rsk_index_mode mode;
	int release;		/* -M */
	long modulo;		/* -m */
	int yield, sig;		/* -y, -k */
	long sleep_ms;		/* -s */
	long migrate_us;	/* -g */
	int disable;		/* -d: no rseq in the whole process */
	long unregistered;	/* -D M: every M-th thread runs unregistered */
	long abort_limit;	/* -f N */
	int verbose;
};
static struct options opt = { .test = 'i', .threads = 200, .reps = 5000 };

/* ---- injection hook (points 7-9 are called from the inline fast paths;
 * point 0 notifies an aborted section) ---- */

static __thread long t_aborts, t_signals, t_passes, t_holds;
static __thread int t_in_handler;
static __thread int t_worker; /* a worker inside its repetitions (-T l b m p) */
static int signal_peers; /* -T l b m p: handlers use the structure */
#define HELD_EVERY 64	 /* holds between two signals raised on top of one */

void rsk_inject_hook(int point)
{
	int loops;

	if (point == 0) {
		t_aborts++;
		return;
	}
	if (point == RSK_INJECT_HELD) {
		/* A gate or lock just taken: now and then a handler on top of it. */
		if (t_worker && !t_in_handler && ++t_holds % HELD_EVERY == 0)
			raise(SIGUSR1);
		return;
	}
	if (point < 0 || point >= RSK_INJECT_POINTS)
		return;
	loops = __atomic_load_n(&rsk_inject_loops[point], __ATOMIC_RELAXED);
	if (loops > 0) {
		for (int i = 0; i < loops; i++)
			__asm__ __volatile__("" ::: "memory");
	} else if (loops == -1 && opt.modulo > 0 && ++t_passes % opt.modulo == 0) {
		if (opt.sleep_ms > 0)
			poll(NULL, 0, (int)opt.sleep_ms);
		if (opt.yield)
			sched_yield();
		/* Not from a handler's own operation: the signal would be
		 * delivered as it returns, and each handler would raise the
		 * next one, for ever. */
		if (opt.sig && !t_in_handler)
			raise(SIGUSR1);
	}
}

/* Signal handlers that use the structure (-T l b m p), wherever the
 * interrupted thread is - also holding a part's gate or the pool's depot
 * lock, on the plain path with -d: the handler must neither wait for it
 * nor for another thread's handler.  In every run of those tests each
 * worker signals the next one every SIGNAL_EVERY repetitions, and raises
 * one on itself every HELD_EVERY-th gate or lock it takes (the library's
 * RSK_INJECT_HELD); -k adds more at the C points. */
static int sig_ready;		     /* the structure exists (atomic) */
#define SIGNAL_EVERY 32		     /* repetitions between two such signals */
static struct worker *workers;
static long sig_ops, sig_fails;	     /* handler operations, and failures (atomics) */
static __thread void *t_pocket;	     /* an item a handler popped and could not push */
static __thread int t_pocketed;	     /* copybuf: t_pocket_val is one */
static __thread struct value_ { uint64_t a, b; } t_pocket_val;

static void handler_ops(void);

/* Counts, in the interrupted thread; then (-T l b m p) an operation on
 * the structure. */
static void on_signal(int sig)
{
	int saved = errno;

	(void)sig;
	t_signals++;
	if (__atomic_load_n(&sig_ready, __ATOMIC_ACQUIRE) && !t_in_handler) {
		t_in_handler = 1;
		handler_ops();
		t_in_handler = 0;
	}
	errno = saved;
}

/* ---- the structures under test and their items ---- */

struct item {
	struct rsk_stack_node node; /* list test */
	long id;
};

struct value {		/* the copy buffer's 16-byte item */
	uint64_t id;
	uint64_t check; /* derived from id: a torn copy shows */
};

static uint64_t check_of(uint64_t id)
{
	return (id + 1) * 0x9e3779b97f4a7c15ull;
}

struct shard {
	intptr_t v;
} __attribute__((aligned(128)));

static struct rsk_counter *counter;
static struct rsk_spinlock *lock;
static struct shard *shards;
static struct rsk_stack *stack;
static struct rsk_ptrbuf *ptrbuf;
static struct rsk_copybuf *copybuf;
static struct rsk_pool *pool;
/* -T a: three counters in one object of a per-CPU memory pool. */
static struct rsk_mempool *apool;
static intptr_t *aobj;
static struct item *items;
static long nitems;
static pthread_barrier_t start_barrier;
static long finished; /* workers done (atomic) */

struct worker {
	pthread_t th;
	int tid;  /* kernel thread id while in its repetitions, else 0 (atomic) */
	long id;
	long ops, aborts, slow_paths, signals, empty, errors;
};

/* -T p: every pool object carries a token.  Fresh slabs are zero, so a
 * free object says P_FREE; whoever allocates it must find P_FREE there. */
enum { P_FREE = 0, P_OWNED = 1, P_TRANSIT = 2 };
struct ptoken {
	long state;
	long owner;  /* thread that allocated it */
	long serial; /* its allocation count */
	char payload[40];
};
static struct ptoken **handoff;	    /* nitems slots, exchanged atomically */
static long p_allocs, p_frees, p_dups, p_bad; /* atomics */

/* -T r: what the manager threads took out of the counter (exchanged to 0)
 * and how often they moved items between CPUs. */
static long drained, moves;
static long nmanagers;

/* A result that is neither success nor an expected condition. */
static void unexpected(struct worker *w, const char *what, int ret)
{
	if (w->errors++ == 0)
		fprintf(stderr, "rseqkit-stress: thread %ld: %s returned %d (%s)\n", w->id, what, ret,
			strerror(-ret));
}

/* Put a thread's items in at the start (list, buffer, memcpy tests). */
static void seed_items(struct worker *w)
{
	for (long k = 0; k < ITEMS_PER_THREAD; k++) {
		long id = w->id * ITEMS_PER_THREAD + k;
		struct value val = { (uint64_t)id, check_of((uint64_t)id) };
		int ret = 0;

		switch (opt.test) {
		case 'l':
			ret = rsk_stack_push(stack, &items[id].node);
			break;
		case 'b':
			ret = rsk_ptrbuf_push(ptrbuf, &items[id]);
			break;
		case 'm':
			ret = rsk_copybuf_push(copybuf, &val);
			break;
		}
		if (opt.test == 'r') {
			ret = rsk_stack_push(stack, &items[id].node);
			if (ret >= 0)
				ret = rsk_ptrbuf_push(ptrbuf, &items[nitems / 2 + id]);
		}
		if (ret < 0)
			unexpected(w, "seeding push", ret);
	}
}

/*
 * A handler's operation: pop an item and push it back (l, b, m), or
 * allocate an object, check its token and free it (p).  Where every part
 * is held by some thread (-EDEADLK: a handler on top of its thread's hold
 * waits for none) the popped item goes into the thread's pocket, which
 * the thread pushes back after its repetition.  A failed allocation or
 * free in a handler is an error: the pool always has a way that needs no
 * waiting (another cache, the overflow, a slab of the handler's own).
 */
static void handler_ops(void)
{
	struct rsk_stack_node *node;
	void *p;
	int ret;

	switch (opt.test) {
	case 'l':
		if (t_pocket != NULL || rsk_stack_pop(stack, &node) < 0)
			return;
		__atomic_add_fetch(&sig_ops, 1, __ATOMIC_RELAXED);
		if (rsk_stack_push(stack, node) < 0)
			t_pocket = node;
		break;
	case 'b':
		if (t_pocket != NULL || rsk_ptrbuf_pop(ptrbuf, &p) < 0)
			return;
		__atomic_add_fetch(&sig_ops, 1, __ATOMIC_RELAXED);
		if (rsk_ptrbuf_push(ptrbuf, p) < 0)
			t_pocket = p;
		break;
	case 'm': {
		struct value val;
		if (t_pocketed || rsk_copybuf_pop(copybuf, &val) < 0)
			return;
		__atomic_add_fetch(&sig_ops, 1, __ATOMIC_RELAXED);
		if (rsk_copybuf_push(copybuf, &val) < 0) {
			t_pocket_val.a = val.id;
			t_pocket_val.b = val.check;
			t_pocketed = 1;
		}
		break;
	}
	case 'p': {
		struct ptoken *t = rsk_pool_alloc(pool);
		__atomic_add_fetch(&sig_ops, 1, __ATOMIC_RELAXED);
		if (t == NULL) {
			__atomic_add_fetch(&sig_fails, 1, __ATOMIC_RELAXED);
			return;
		}
		if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != P_FREE)
			__atomic_add_fetch(&p_dups, 1, __ATOMIC_RELAXED);
		if ((ret = rsk_pool_free(pool, t)) != 0)
			__atomic_add_fetch(&sig_fails, 1, __ATOMIC_RELAXED);
		break;
	}
	}
}

/* Push back what a handler of this thread left in its pocket. */
static void empty_pocket(struct worker *w)
{
	int ret = 0;

	if (t_pocket != NULL) {
		if (opt.test == 'l')
			ret = rsk_stack_push(stack, t_pocket);
		else
			ret = rsk_ptrbuf_push(ptrbuf, t_pocket);
		t_pocket = NULL;
	} else if (t_pocketed) {
		struct value val = { t_pocket_val.a, t_pocket_val.b };
		ret = rsk_copybuf_push(copybuf, &val);
		t_pocketed = 0;
	}
	if (ret < 0)
		unexpected(w, "pushing back a handler's item", ret);
}

/* Count one result; -ENOENT (an empty part) is expected. */
static void account(struct worker *w, int ret, const char *what)
{
	if (ret >= 0)
		w->ops++;
	else if (ret == -ENOENT)
		w->empty++;
	else
		unexpected(w, what, ret);
}

/* -T p: an object just allocated by w. */
static void p_take(struct worker *w, struct ptoken *t, long serial)
{
	long want = P_FREE;

	if (!__atomic_compare_exchange_n(&t->state, &want, P_OWNED, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED)) {
		if (__atomic_add_fetch(&p_dups, 1, __ATOMIC_RELAXED) == 1)
			fprintf(stderr, "rseqkit-stress: thread %ld: object %p handed out while "
				"state %ld (owner %ld)\n", w->id, (void *)t, want, t->owner);
	}
	t->owner = w->id;
	t->serial = serial;
	__atomic_add_fetch(&p_allocs, 1, __ATOMIC_RELAXED);
}

/* -T p: give t back to the pool; its token must say `expect`. */
static void p_give(struct worker *w, struct ptoken *t, long expect)
{
	long was = __atomic_exchange_n(&t->state, P_FREE, __ATOMIC_ACQ_REL);
	int ret;

	if (was != expect)
		__atomic_add_fetch(&p_bad, 1, __ATOMIC_RELAXED);
	if ((ret = rsk_pool_free(pool, t)) < 0)
		unexpected(w, "rsk_pool_free", ret);
	else
		w->ops++;
	__atomic_add_fetch(&p_frees, 1, __ATOMIC_RELAXED);
}

/* -T p, one repetition: allocate 1-3 objects; every other repetition free
 * them here (local), else hand them to other threads through the handoff
 * array, freeing whatever was there (producer/consumer across CPUs).  Now
 * and then drain a cache or trim the pool while everyone works. */
static void pool_rep(struct worker *w, long rep, int n)
{
	struct ptoken *t[3];
	unsigned seed = (unsigned)(w->id * 1000003 + rep);

	for (int k = 0; k < n; k++) {
		t[k] = rsk_pool_alloc(pool);
		if (t[k] == NULL) {
			unexpected(w, "rsk_pool_alloc", -errno);
			n = k;
			break;
		}
		w->ops++;
		p_take(w, t[k], rep);
	}
	for (int k = 0; k < n; k++) {
		if (rep % 2 == 0) {
			p_give(w, t[k], P_OWNED);
			continue;
		}
		__atomic_store_n(&t[k]->state, P_TRANSIT, __ATOMIC_RELEASE);
		struct ptoken *old = __atomic_exchange_n(&handoff[rand_r(&seed) % (unsigned)nitems],
							 t[k], __ATOMIC_ACQ_REL);
		if (old != NULL)
			p_give(w, old, P_TRANSIT);
	}
	if (rep % 97 == 96) {
		int ret = rsk_pool_drain(pool, (int)((rep / 97) % pool->nr));
		if (ret < 0)
			unexpected(w, "rsk_pool_drain", ret);
	}
	if (rep % 1009 == 1008 && rsk_pool_trim(pool) < 0)
		unexpected(w, "rsk_pool_trim", -EINVAL);
}

/* -T a, one repetition: add 1 to one of three pool-backed counters (the
 * sum checks them); every 16th, exchange one copy of it to 0, as a
 * cross-CPU reader would (gate + fence); every 64th, allocate a private
 * object, which must come back zeroed whoever freed its slot last, add to
 * two of its counters, check their sums and free it. */
static void mempool_rep(struct worker *w, long rep)
{
	int k = (int)(rep % 3), ret;

	account(w, rsk_pcounter_add(apool, &aobj[k], 1), "rsk_pcounter_add");
	if (rep % 16 == 15) {
		intptr_t old;
		int cpu = (int)((w->id + rep / 16) % apool->nr);
		if ((ret = rsk_pcounter_exchange(apool, &aobj[k], cpu, 0, &old)) < 0)
			unexpected(w, "rsk_pcounter_exchange", ret);
		else
			__atomic_add_fetch(&drained, (long)old, __ATOMIC_RELAXED);
	}
	if (rep % 64 == 63) {
		intptr_t *mine = rsk_mempool_zalloc(apool), s0 = -1, s2 = -1;
		if (mine == NULL) {
			unexpected(w, "rsk_mempool_zalloc", -errno);
			return;
		}
		rsk_pcounter_add(apool, &mine[0], 1);
		rsk_pcounter_add(apool, &mine[2], 2);
		if (rsk_pcounter_sum(apool, &mine[0], &s0) != 0 || s0 != 1 ||
		    rsk_pcounter_sum(apool, &mine[2], &s2) != 0 || s2 != 2) {
			if (w->errors++ == 0)
				fprintf(stderr, "rseqkit-stress: thread %ld: private counters %ld, %ld "
					"(want 1, 2)\n", w->id, (long)s0, (long)s2);
		}
		if ((ret = rsk_mempool_free(apool, mine)) < 0)
			unexpected(w, "rsk_mempool_free", ret);
	}
}

/* Pop a batch of 1-3 items, push them back: the parts' counts move by
 * more than one, which is what makes a stale commit lose or duplicate. */
#define BATCH 3

static void one_rep(struct worker *w, long rep)
{
	int ret = 0, n = (int)(rep % BATCH) + 1, got = 0;

	switch (opt.test) {
	case 'i':
		account(w, rsk_counter_add(counter, 1), "rsk_counter_add");
		break;
	case 'p':
		pool_rep(w, rep, n);
		break;
	case 'a':
		mempool_rep(w, rep);
		break;
	case 'r': { /* owners: the same as i, l, b at once, one item each */
		struct rsk_stack_node *node;
		void *p;
		ret = rsk_counter_add(counter, 1);
		if (ret < 0)
			unexpected(w, "rsk_counter_add", ret);
		else
			w->ops++; /* only adds count as ops: the sum checks them */
		if (rsk_stack_pop(stack, &node) >= 0 && (ret = rsk_stack_push(stack, node)) < 0)
			unexpected(w, "rsk_stack_push", ret);
		if (rsk_ptrbuf_pop(ptrbuf, &p) >= 0 && (ret = rsk_ptrbuf_push(ptrbuf, p)) < 0)
			unexpected(w, "rsk_ptrbuf_push", ret);
		break;
	}
	case 's': {
		int idx = ret = rsk_spinlock_lock(lock);
		account(w, ret, "rsk_spinlock_lock");
		if (ret < 0)
			break;
		/* A read-modify-write with a window: only the lock keeps
		 * other threads of this index out of it. */
		intptr_t v = *(volatile intptr_t *)&shards[idx].v;
		RSK_INJECT_C(9);
		*(volatile intptr_t *)&shards[idx].v = v + 1;
		ret = rsk_spinlock_unlock(lock, idx);
		if (ret < 0)
			unexpected(w, "rsk_spinlock_unlock", ret);
		break;
	}
	case 'l': {
		struct rsk_stack_node *node[BATCH];
		while (got < n && (ret = rsk_stack_pop(stack, &node[got])) >= 0)
			account(w, ret, "rsk_stack_pop"), got++;
		if (got < n)
			account(w, ret, "rsk_stack_pop");
		while (got > 0)
			account(w, rsk_stack_push(stack, node[--got]), "rsk_stack_push");
		break;
	}
	case 'b': {
		void *p[BATCH];
		while (got < n && (ret = rsk_ptrbuf_pop(ptrbuf, &p[got])) >= 0)
			account(w, ret, "rsk_ptrbuf_pop"), got++;
		if (got < n)
			account(w, ret, "rsk_ptrbuf_pop");
		while (got > 0)
			account(w, rsk_ptrbuf_push(ptrbuf, p[--got]), "rsk_ptrbuf_push");
		break;
	}
	default: { /* 'm' */
		struct value val[BATCH];
		while (got < n && (ret = rsk_copybuf_pop(copybuf, &val[got])) >= 0) {
			account(w, ret, "rsk_copybuf_pop");
			if (val[got].id >= (uint64_t)nitems ||
			    val[got].check != check_of(val[got].id))
				w->errors++; /* torn or foreign: kept out, shows as lost */
			else
				got++;
		}
		if (ret < 0)
			account(w, ret, "rsk_copybuf_pop");
		while (got > 0)
			account(w, rsk_copybuf_push(copybuf, &val[--got]), "rsk_copybuf_push");
		break;
	}
	}
}

/* -D M: take this thread's registration away (whoever made it, libc or
 * rseqkit), as a thread that never registered would be.  The kernel then
 * writes mm_cid 0; a thread that never registered has (uint32_t)-1 there
 * in the areas whose mm_cid the structures use (rsk_unregister(3) says
 * why), so the field is set back as rsk_unregister() does it. */
static void unregister_self(void)
{
	struct rsk_status st;
	struct rsk_abi_area *area = rsk_area();
	sigset_t all, old;

	rsk_status(&st);
	if (area == NULL || rsk_area_cpu_id(area) < 0)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, RSK_ABI_FLAG_UNREGISTER,
		    RSK_ARCH_SIGNATURE) == 0)
		__atomic_store_n(&area->mm_cid, UINT32_MAX, __ATOMIC_RELAXED);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* SIGUSR1 to a worker that is still in its repetitions.  By its kernel
 * thread id, not pthread_kill(): the worker may have been joined (its
 * pthread_t then names freed memory).  If it ends meanwhile, the signal
 * finds it blocked, or no thread. */
static void signal_peer(struct worker *peer)
{
	int tid = __atomic_load_n(&peer->tid, __ATOMIC_ACQUIRE);

	if (tid != 0)
		syscall(SYS_tgkill, getpid(), tid, SIGUSR1);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct rsk_stats stats;

	if (opt.unregistered > 0 && w->id % opt.unregistered == 0)
		unregister_self();
	seed_items(w);
	pthread_barrier_wait(&start_barrier);
	__atomic_store_n(&w->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	t_worker = signal_peers;
	for (long r = 0; r < opt.reps; r++) {
		one_rep(w, r);
		empty_pocket(w);
		/* The next worker gets a signal at whatever point it is,
		 * often holding a gate or the depot lock (also with -d). */
		if (signal_peers && r % SIGNAL_EVERY == SIGNAL_EVERY - 1)
			signal_peer(&workers[(w->id + 1) % opt.threads]);
	}
	{
		/* No handler after the last pocket check. */
		sigset_t usr1;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &usr1, NULL);
		__atomic_store_n(&w->tid, 0, __ATOMIC_RELEASE);
		t_worker = 0;
		empty_pocket(w);
	}
	w->aborts = t_aborts;
	w->signals = t_signals;
	rsk_stats_thread(&stats);
	w->slow_paths = (long)stats.slow_paths;
	__atomic_add_fetch(&finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* -T r: managers work on other CPUs' parts while their owners run: take a
 * part's count out exactly, move a part's whole list, move one pointer. */
static void *manager_main(void *arg)
{
	struct worker *w = arg;
	int nr = rsk_possible_cpus();
	unsigned seed = (unsigned)w->id * 7919u + 1;

	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < opt.threads) {
		int from = (int)(rand_r(&seed) % (unsigned)nr), to = (int)(rand_r(&seed) % (unsigned)nr);
		struct rsk_stack_node *list, *next;
		intptr_t old;
		void *p;
		int ret;

		if ((ret = rsk_counter_exchange(counter, from, 0, &old)) < 0)
			unexpected(w, "rsk_counter_exchange", ret);
		else
			__atomic_add_fetch(&drained, (long)old, __ATOMIC_RELAXED);
		if (rsk_stack_pop_all_cpu(stack, from, &list) == 0) {
			/* No further than all items: a broken list (the
			 * unarmed twin's) may have become a cycle. */
			for (long walked = 0; list != NULL && walked <= nitems; list = next, walked++) {
				next = list->next;
				if ((ret = rsk_stack_push_cpu(stack, to, list)) < 0)
					unexpected(w, "rsk_stack_push_cpu", ret);
			}
			w->ops++;
		}
		if (rsk_ptrbuf_pop_cpu(ptrbuf, from, &p) == 0) {
			if ((ret = rsk_ptrbuf_push_cpu(ptrbuf, to, p)) < 0)
				unexpected(w, "rsk_ptrbuf_push_cpu", ret);
			w->ops++;
		}
		RSK_INJECT_C(9);
	}
	return NULL;
}

/* -g: move a random worker to a random allowed CPU every migrate_us
 * microseconds, so that migrations land inside critical sections.  Runs
 * until every worker finished (they are joined only after it). */
static void *migrator_main(void *arg)
{
	struct worker *w = arg;
	cpu_set_t allowed;
	int cpus[CPU_SETSIZE], ncpus = 0;
	unsigned seed = 12345;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
		return NULL;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed))
			cpus[ncpus++] = c;
	if (ncpus < 2)
		return NULL;
	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < opt.threads) {
		struct timespec ts = { 0, opt.migrate_us * 1000 };
		cpu_set_t one;
		long t = rand_r(&seed) % opt.threads;

		CPU_ZERO(&one);
		CPU_SET(cpus[rand_r(&seed) % ncpus], &one);
		pthread_setaffinity_np(w[t].th, sizeof(one), &one); /* ESRCH once it ended */
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- checks after the run ---- */

/* Mark id as seen; count what is wrong. */
static void see(unsigned char *seen, long id, long *dup, long *bad)
{
	if (id < 0 || id >= nitems)
		(*bad)++;
	else if (seen[id]++)
		(*dup)++;
}

/* Drain every part of the structure of test `kind` (l, b or m); every
 * item of [first, first + count) must be there exactly once. */
static int check_items(char kind, long first, long count, char *what, size_t len)
{
	unsigned char *seen = calloc((size_t)nitems, 1);
	long dup = 0, bad = 0, missing = 0, found = 0;
	int nr = rsk_possible_cpus();

	if (seen == NULL) {
		snprintf(what, len, "out of memory for the check");
		return -1;
	}
	for (int cpu = 0; cpu < nr; cpu++) {
		if (kind == 'l') {
			struct rsk_stack_node *n;
			long walked = 0;
			if (rsk_stack_pop_all_cpu(stack, cpu, &n) < 0)
				continue;
			/* A broken list may loop: walk no further than all items. */
			for (; n != NULL && walked <= nitems; n = n->next, walked++) {
				struct item *it = (struct item *)n;
				found++;
				if (it < items || it >= items + nitems) {
					bad++; /* not ours: do not follow its link */
					n = NULL;
					break;
				}
				see(seen, it->id, &dup, &bad);
			}
			if (n != NULL)
				bad++;
		} else if (kind == 'b') {
			void *p;
			while (rsk_ptrbuf_pop_cpu(ptrbuf, cpu, &p) == 0) {
				struct item *it = p;
				see(seen, it >= items && it < items + nitems ? it->id : -1, &dup,
				    &bad);
				found++;
			}
		} else {
			struct value val;
			while (rsk_copybuf_pop_cpu(copybuf, cpu, &val) == 0) {
				long id = val.id < (uint64_t)nitems && val.check == check_of(val.id)
						  ? (long)val.id
						  : -1;
				see(seen, id, &dup, &bad);
				found++;
			}
		}
	}
	for (long i = first; i < first + count; i++)
		missing += seen[i] == 0;
	free(seen);
	if (dup == 0 && bad == 0 && missing == 0)
		return 0;
	snprintf(what, len, "%ld of %ld items missing, %ld duplicated, %ld corrupt (%ld found)",
		 missing, count, dup, bad, found);
	return -1;
}

/* ---- command line ---- */

static void usage(FILE *f, const char *argv0)
{
	fprintf(f,
		"usage: %s [-T s|l|b|m|i|r|p|a] [-t threads] [-r reps] [-1..-9 loops] [-m N]\n"
		"       [-y] [-k] [-s ms] [-g us] [-I cpu|cid] [-M] [-d] [-D M] [-f N]\n"
		"       [-c] [-P] [-v] [-h] [--version]\n"
		"  -T test     s spinlock (sharded counter under the per-CPU lock),\n"
		"              l list (stack pop/push), b buffer (pointer buffer),\n"
		"              m memcpy (copy buffer), i increment (counter),\n"
		"              r remote (owners add, pop and push while managers\n"
		"              drain, move and reset other CPUs' parts),\n"
		"              p pool (object pool: local and cross-thread alloc/free,\n"
		"              drains and trims, an ownership token per object),\n"
		"              a mempool (counters in a per-CPU memory pool, exchanged\n"
		"              across CPUs, private objects allocated and freed); default i\n"
		"  -t N        threads (default 200)\n"
		"  -r N        repetitions per thread (default 5000)\n"
		"  -1 .. -9 N  delay loops at injection point N (1-4 inside the asm,\n"
		"              7-9 in C before it); -1 at points 7-9: act (-y -k -s)\n"
		"              every -m'th pass.  Only the points the test passes\n"
		"              are accepted (-P lists them)\n"
		"  -m N        act every N-th pass at points set to -1\n"
		"  -y          sched_yield()        -k  raise SIGUSR1\n"
		"  -s MS       sleep MS milliseconds\n"
		"  -g US       migrate a random thread every US microseconds\n"
		"  -I mode     index by cpu (default) or cid (mm_cid)\n"
		"  -M          release-ordered variants (buffer, memcpy)\n"
		"  -d          do not use rseq at all (every operation on a slow path)\n"
		"  -D M        every M-th thread runs without an rseq registration\n"
		"  -f N        take the slow path after N consecutive aborts\n"
		"  -c          exit 0 if rseq can be used here, else 2\n"
		"  -P          print the injection points of the -T test and exit\n"
		"  --version   print the version and exit\n"
		"  -v          verbose\n"
		"  -h          this help\n",
		argv0);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

#define BAD(...)                                                               \
	do {                                                                   \
		fprintf(stderr, "%s: ", argv[0]);                              \
		fprintf(stderr, __VA_ARGS__);                                  \
		fputc('\n', stderr);                                           \
		usage(stderr, argv[0]);                                        \
		return 2;                                                      \
	} while (0)

int main(int argc, char **argv)
{
	static const char *test_name[128] = {
		['s'] = "spinlock", ['l'] = "list", ['b'] = "buffer", ['m'] = "memcpy",
		['i'] = "increment", ['r'] = "remote", ['p'] = "pool", ['a'] = "mempool",
	};
	struct rsk_status st;
	int check_only = 0, list_points = 0, c, ret;
	long v;
	char pbuf[64];
	const char *points;

	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--version") == 0) {
			printf("rseqkit-stress %s\n", rsk_version(NULL, NULL, NULL));
			return 0;
		}
	opterr = 0;
	while ((c = getopt(argc, argv, ":T:t:r:1:2:3:4:5:6:7:8:9:m:yks:g:I:MdD:f:cPvh")) != -1) {
		switch (c) {
		case 'T':
			if (strlen(optarg) != 1 || !strchr("slbmirpa", optarg[0]))
				BAD("-T wants one of s l b m i r p a, not '%s'", optarg);
			opt.test = optarg[0];
			break;
		case 't':
			if (parse_long(optarg, 1, 100000, &opt.threads))
				BAD("-t wants a thread count in [1, 100000], not '%s'", optarg);
			break;
		case 'r':
			if (parse_long(optarg, 0, LONG_MAX / 2, &opt.reps))
				BAD("-r wants a repetition count >= 0, not '%s'", optarg);
			break;
		case '1': case '2': case '3': case '4': case '5': case '6':
		case '7': case '8': case '9':
			if (parse_long(optarg, c >= '7' ? -1 : 0, INT_MAX, &v))
				BAD("-%c wants a loop count >= 0%s, not '%s'", c,
				    c >= '7' ? " (or -1)" : "", optarg);
			rsk_inject_loops[c - '0'] = (int)v;
			break;
		case 'm':
			if (parse_long(optarg, 1, INT_MAX, &opt.modulo))
				BAD("-m wants N >= 1, not '%s'", optarg);
			break;
		case 'y':
			opt.yield = 1;
			break;
		case 'k':
			opt.sig = 1;
			break;
		case 's':
			if (parse_long(optarg, 0, 60000, &opt.sleep_ms))
				BAD("-s wants milliseconds in [0, 60000], not '%s'", optarg);
			break;
		case 'g':
			if (parse_long(optarg, 1, 999999, &opt.migrate_us))
				BAD("-g wants microseconds in [1, 999999], not '%s'", optarg);
			break;
		case 'I':
			if (strcmp(optarg, "cpu") == 0)
				opt.mode = RSK_INDEX_CPU;
			else if (strcmp(optarg, "cid") == 0)
				opt.mode = RSK_INDEX_CID;
			else
				BAD("-I wants cpu or cid, not '%s'", optarg);
			break;
		case 'M':
			opt.release = 1;
			break;
		case 'd':
			opt.disable = 1;
			break;
		case 'D':
			if (parse_long(optarg, 1, INT_MAX, &opt.unregistered))
				BAD("-D wants M >= 1, not '%s'", optarg);
			break;
		case 'f':
			if (parse_long(optarg, 1, INT_MAX, &opt.abort_limit))
				BAD("-f wants N >= 1, not '%s'", optarg);
			break;
		case 'c':
			check_only = 1;
			break;
		case 'P':
			list_points = 1;
			break;
		case 'v':
			opt.verbose = 1;
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		case ':':
			BAD("-%c needs a value", optopt);
		default:
			BAD("unknown option -%c", optopt);
		}
	}
	if (optind < argc)
		BAD("unexpected argument '%s'", argv[optind]);
	points = test_points(opt.test, pbuf, sizeof(pbuf));
	if (list_points) {
		printf("%s\n", points != NULL ? points : "1 2 3 4 5 6 7 8 9");
		return 0;
	}
	for (int p = 1; p < RSK_INJECT_POINTS && points != NULL; p++)
		if (rsk_inject_loops[p] != 0 && !has_point(points, p)) {
			fprintf(stderr,
				"%s: -%d: the %s test (-T %c) never passes injection point %d, "
				"so a delay there would change nothing.\n"
				"%s: the points of -T %c are: %s (see -P)\n",
				argv[0], p, test_name[(int)opt.test], opt.test, p, argv[0], opt.test,
				points);
			return 2;
		}

	/* -d: the library decides at start-up whether to use rseq; tell it
	 * not to, and start again. */
	if (opt.disable && !rsk_env_bool_("RSEQKIT_DISABLE", 0)) {
		setenv("RSEQKIT_DISABLE", "1", 1);
		execv("/proc/self/exe", argv);
		fprintf(stderr, "%s: cannot re-execute itself for -d: %s\n", argv[0], strerror(errno));
		return 2;
	}
	rsk_status(&st);
	if (check_only)
		return st.available && st.thread_registered ? 0 : 2;
	if (opt.abort_limit > 0)
		rsk_set_abort_limit((unsigned)opt.abort_limit);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);

	int nr = rsk_possible_cpus();
	enum rsk_index_mode mode = opt.mode;
	nitems = opt.threads * ITEMS_PER_THREAD * (opt.test == 'r' ? 2 : 1);
	switch (opt.test) {
	case 'r': /* counter + stack + buffer, items split between the two */
		ret = rsk_counter_create(&counter, opt.mode);
		if (ret == 0)
			ret = rsk_stack_create(&stack, opt.mode);
		if (ret == 0)
			ret = rsk_ptrbuf_create(&ptrbuf, opt.mode, nitems, RSK_PTRBUF_RELEASE);
		if (ret == 0)
			mode = counter->mode;
		break;
	case 'i':
		ret = rsk_counter_create(&counter, opt.mode);
		if (ret == 0)
			mode = counter->mode;
		break;
	case 'a': {
		struct rsk_mempool_config cfg = { .size = 3 * sizeof(intptr_t), .mode = opt.mode };
		ret = rsk_mempool_create(&apool, &cfg);
		if (ret == 0 && (aobj = rsk_mempool_zalloc(apool)) == NULL)
			ret = -errno;
		if (ret == 0)
			mode = apool->mode;
		break;
	}
	case 's':
		ret = rsk_spinlock_create(&lock, opt.mode);
		shards = aligned_alloc(128, sizeof(*shards) * (size_t)nr);
		if (ret == 0 && shards == NULL)
			ret = -ENOMEM;
		if (ret == 0) {
			memset(shards, 0, sizeof(*shards) * (size_t)nr);
			mode = lock->mode;
		}
		break;
	case 'l':
		ret = rsk_stack_create(&stack, opt.mode);
		if (ret == 0)
			mode = stack->mode;
		break;
	case 'p': {
		struct rsk_pool_config cfg = { .size = sizeof(struct ptoken), .cache_capacity = 8, .mode = opt.mode };
		ret = rsk_pool_create(&pool, &cfg);
		handoff = calloc((size_t)nitems, sizeof(*handoff));
		if (ret == 0 && handoff == NULL)
			ret = -ENOMEM;
		if (ret == 0)
			mode = pool->mode;
		break;
	}
	case 'b':
		ret = rsk_ptrbuf_create(&ptrbuf, opt.mode, nitems,
					opt.release ? RSK_PTRBUF_RELEASE : 0);
		if (ret == 0)
			mode = ptrbuf->mode;
		break;
	default:
		ret = rsk_copybuf_create(&copybuf, opt.mode, sizeof(struct value), nitems,
					 opt.release ? RSK_COPYBUF_RELEASE : 0);
		if (ret == 0)
			mode = copybuf->mode;
		break;
	}
	items = calloc((size_t)nitems, sizeof(*items));
	struct worker *w = calloc((size_t)opt.threads, sizeof(*w));
	if (ret < 0 || items == NULL || w == NULL) {
		fprintf(stderr, "%s: cannot create the structure: %s\n", argv[0],
			strerror(ret < 0 ? -ret : ENOMEM));
		return 2;
	}
	for (long i = 0; i < nitems; i++)
		items[i].id = i;
	workers = w;
	/* Not in the unarmed twin: its structures are broken on purpose,
	 * and a handler's operation on them could crash before the checks
	 * report the damage. */
	signal_peers = !RSK_NOARM_BUILD && strchr("lbmp", opt.test) != NULL;
	__atomic_store_n(&sig_ready, 1, __ATOMIC_RELEASE);

	pthread_barrier_init(&start_barrier, NULL, (unsigned)opt.threads + 1);
	long started = 0;
	for (long t = 0; t < opt.threads; t++) {
		w[t].id = t;
		if ((errno = pthread_create(&w[t].th, NULL, worker_main, &w[t])) != 0) {
			/* The barrier counts on every thread: cannot continue. */
			fprintf(stderr, "%s: thread %ld: %s\n", argv[0], t, strerror(errno));
			return 2;
		}
		started++;
	}
	struct timespec t0, t1;
	pthread_t migrator;
	int migrating = 0;
	/* -T r: one manager per 4 workers (at least one). */
	nmanagers = opt.test == 'r' ? (opt.threads + 3) / 4 : 0;
	struct worker *mgr = calloc((size_t)nmanagers + 1, sizeof(*mgr));
	/* Before the barrier: the workers may run to the end before this
	 * thread is scheduled again after it. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_barrier_wait(&start_barrier);
	for (long m = 0; m < nmanagers; m++) {
		mgr[m].id = opt.threads + m;
		if (pthread_create(&mgr[m].th, NULL, manager_main, &mgr[m]) != 0)
			nmanagers = m;
	}
	if (opt.migrate_us > 0)
		migrating = pthread_create(&migrator, NULL, migrator_main, w) == 0;
	if (migrating)
		pthread_join(migrator, NULL);
	for (long t = 0; t < started; t++)
		pthread_join(w[t].th, NULL);
	for (long m = 0; m < nmanagers; m++) {
		pthread_join(mgr[m].th, NULL);
		moves += mgr[m].ops;
		if (mgr[m].errors)
			w[0].errors += mgr[m].errors;
	}
	free(mgr);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double elapsed = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	long ops = 0, aborts = 0, slow_paths = 0, signals = 0, empty = 0, errors = 0;
	for (long t = 0; t < opt.threads; t++) {
		ops += w[t].ops;
		aborts += w[t].aborts;
		slow_paths += w[t].slow_paths;
		signals += w[t].signals;
		empty += w[t].empty;
		errors += w[t].errors;
		if (opt.verbose)
			printf("thread %ld: ops %ld aborts %ld empty %ld slow_paths %ld signals %ld "
			       "errors %ld\n",
			       t, w[t].ops, w[t].aborts, w[t].empty, w[t].slow_paths, w[t].signals,
			       w[t].errors);
	}

	char what[200] = "";
	int failed = 0;
	if (opt.test == 'i' || opt.test == 's' || opt.test == 'r' || opt.test == 'a') {
		intptr_t sum = 0;
		if (opt.test == 'a') {
			for (int k = 0; k < 3; k++) {
				intptr_t s = 0;
				rsk_pcounter_sum(apool, &aobj[k], &s);
				sum += s;
			}
			sum += drained; /* what the exchanges took out */
		} else if (opt.test != 's') {
			rsk_counter_sum(counter, &sum);
			sum += drained; /* -T r: what the managers took out */
		} else {
			for (int i = 0; i < nr; i++)
				sum += shards[i].v;
		}
		if (sum != ops) {
			failed = 1;
			snprintf(what, sizeof(what), "sum %ld != %ld operations (%ld lost)",
				 (long)sum, ops, ops - (long)sum);
		}
	}
	if (!failed && opt.test == 'p') {
		struct rsk_pool_stats ps;
		long left = 0;
		for (long i = 0; i < nitems; i++)
			if (handoff[i] != NULL) {
				p_give(&w[0], handoff[i], P_TRANSIT);
				left++;
			}
		rsk_pool_stats(pool, &ps);
		if (p_dups != 0 || p_bad != 0) {
			failed = 1;
			snprintf(what, sizeof(what), "%ld objects handed out twice, %ld bad tokens",
				 p_dups, p_bad);
		} else if (p_allocs != p_frees || ps.in_use != 0) {
			failed = 1;
			snprintf(what, sizeof(what), "%ld allocations, %ld frees, pool says %zu in use",
				 p_allocs, p_frees, ps.in_use);
		} else if (rsk_pool_drain(pool, -1) != 0 || rsk_pool_trim(pool) < 0 ||
			   rsk_pool_stats(pool, &ps) != 0 || ps.slabs != 0 || ps.bytes_mapped != 0) {
			failed = 1;
			snprintf(what, sizeof(what), "after drain and trim: %zu slabs, %zu bytes mapped",
				 ps.slabs, ps.bytes_mapped);
		}
		if (opt.verbose)
			printf("pool: %ld allocations, %ld handed over at the end, %zu caches\n",
			       p_allocs, left, ps.caches);
	} else if (!failed && opt.test == 'r') {
		long half = nitems / 2;
		failed = check_items('l', 0, half, what, sizeof(what)) < 0 ||
			 check_items('b', half, half, what, sizeof(what)) < 0;
	} else if (!failed && opt.test != 'i' && opt.test != 's' && opt.test != 'p' && opt.test != 'a') {
		failed = check_items(opt.test, 0, nitems, what, sizeof(what)) < 0;
	}
	if (!failed && errors) {
		failed = 1;
		snprintf(what, sizeof(what), "%ld unexpected results or corrupt items", errors);
	}
	if (!failed && sig_fails) {
		failed = 1;
		snprintf(what, sizeof(what), "%ld of %ld handler allocations or frees failed",
			 sig_fails, sig_ops);
	}
	if (opt.verbose)
		printf("empty pops: %ld, remote moves: %ld, drained: %ld, handler ops: %ld\n", empty,
		       moves, drained, sig_ops);

	/* No section restarted: the run exercised no abort path.  Say so
	 * (before the summary, which scripts read as the last line). */
	if (!failed && aborts == 0 && st.available && !opt.disable && ops > 0 && !RSK_NOARM_BUILD)
		fprintf(stderr,
			"%s: note: 0 aborts: no critical section was restarted, so this run "
			"checked\n  little beyond the fast path.  Make restarts happen: a delay "
			"inside the sections\n  (-%c 2000), signals or yields at a C point "
			"(-7 -1 -m 8 -k), migrations (-g 100).\n",
			argv[0], points != NULL && has_point(points, 3) ? '3' : '2');
	fflush(stderr);
	printf("rseqkit-stress: test=%s mode=%s%s release=%s threads=%ld reps=%ld ops=%ld "
	       "aborts=%ld slow_paths=%ld signals=%ld handler_ops=%ld elapsed=%.3fs %s%s\n",
	       test_name[(int)opt.test], mode == RSK_INDEX_CID ? "cid" : "cpu",
	       mode != opt.mode ? "(cid unavailable)" : "", opt.release ? "yes" : "no",
	       opt.threads, opt.reps, ops, aborts, slow_paths, signals, sig_ops, elapsed,
	       failed ? "FAILED: " : "OK", what);

	rsk_counter_destroy(counter);
	rsk_spinlock_destroy(lock);
	rsk_stack_destroy(stack);
	rsk_ptrbuf_destroy(ptrbuf);
	rsk_copybuf_destroy(copybuf);
	if (pool != NULL)
		rsk_pool_destroy(pool);
	if (apool != NULL)
		rsk_mempool_destroy(apool);
	free(handoff);
	free(shards);
	free(items);
	free(w);
	return failed ? 1 : 0;
}
