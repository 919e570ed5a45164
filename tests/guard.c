/* SPDX-License-Identifier: MIT */
/*
 * Guard parts (<rseqkit/percpu.h>): the sections of the counter, the
 * spinlock and the stack read their index without comparing it with the
 * number of parts.  A thread whose area holds -1 (not registered) or -2
 * (registration failed) must take the slow path, with exact results and
 * nothing written outside the parts: the stack's sections land on
 * part[-1] or part[-2] and find a closed gate there; the counter's add
 * and the spinlock's lock, which test no gate, stop on the index's sign
 * (the spinlock's guard gates are closed all the same).  Likewise the
 * mempool counter's x86-64 stride section (rsk_pcounter_add, gcc builds:
 * RSK_PCOUNTER_STRIDE_SECTION_), whose -1 and -2 land on the guard strides
 * below the pool's gates (src/alloc/percpu_memory.c, "Guard strides").
 *
 * In every registration mode (harness.h): the guards' gate words are not
 * zero; a new thread's first operations are exact (and, where rseqkit
 * registers threads, register it).  Where rseqkit owns the registration,
 * a thread that unregistered (index -1) and one whose unregistered area
 * says -2 (glibc's "registration failed" mark, written by the test into
 * the area the kernel no longer knows) run every operation through the
 * guards: exact sums, an intact head.
 *
 * Shown to fail when broken: with the guard before the structure zeroed
 * (src/percpu/percpu.c), the -2 cases lose every add and push to part[-2]; with
 * the index read zero-extended, the -1 cases fault.  For the pool the
 * test shows it itself (the negative control, where the stride section
 * is in use): with the guard strides' gate words zeroed, the same adds of
 * an unregistered thread go to the guard stride instead of the counter,
 * and the sum the exactness check reads is short by every one of them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"
#include "harness.h"

#define OPS 1000

static int nr;

/* The gate word of part[k] (k = -1, -2) of a structure of type T. */
#define GUARD_GATE(s, k) (*(intptr_t *)(void *)((char *)&(s)->part[0] + (k) * RSK_PERCPU_ALIGN + \
						 offsetof(__typeof__((s)->part[0]), gate)))

/* The gate word of the pool's guard stride k (k = -1, -2): where the
 * stride section of an index k tests the gate. */
#define POOL_GUARD_GATE(p, k) (*(intptr_t *)(void *)((char *)(p)->gate + (k) * (ptrdiff_t)RSK_MEMPOOL_STRIDE))

/* The structures, and a counter in a mempool (pc, in the pool's first
 * range: a section with index k that found the guard's gate open would
 * add to pc's copy k, inside the guard stride k). */
struct trio {
	struct rsk_counter *c;
	struct rsk_spinlock *l;
	struct rsk_stack *s;
	struct rsk_mempool *pool;
	intptr_t *pc;
	struct rsk_stack_node nodes[2 * OPS]; /* one set per round */
	intptr_t locked_adds; /* guarded by l */
};

static int trio_create(struct trio *t, enum rsk_index_mode m)
{
	struct rsk_mempool_config pc = { .size = sizeof(intptr_t), .mode = m };

	memset(t, 0, sizeof(*t));
	return rsk_counter_create(&t->c, m) == 0 && rsk_spinlock_create(&t->l, m) == 0 &&
	       rsk_stack_create(&t->s, m) == 0 && rsk_mempool_create(&t->pool, &pc) == 0 &&
	       (t->pc = rsk_mempool_zalloc(t->pool)) != NULL;
}

static void trio_destroy(struct trio *t)
{
	rsk_counter_destroy(t->c);
	rsk_spinlock_destroy(t->l);
	rsk_stack_destroy(t->s);
	rsk_mempool_destroy(t->pool);
}

/* Round `round` (0 or 1): OPS adds, lock/unlock rounds and pushes; 0
 * when every operation succeeded. */
static int trio_work(struct trio *t, int round)
{
	for (int i = 0; i < OPS; i++) {
		if (rsk_counter_add(t->c, 1) < 0)
			return -1;
		int idx = rsk_spinlock_lock(t->l);
		if (idx < 0)
			return -2;
		t->locked_adds++;
		rsk_spinlock_unlock(t->l, idx);
		if (rsk_stack_push(t->s, &t->nodes[round * OPS + i]) < 0)
			return -3;
		if (rsk_pcounter_add(t->pool, t->pc, 1) < 0)
			return -4;
	}
	return 0;
}

/* Everything trio_work() did is in the parts, and the heads are intact. */
static int trio_exact(struct trio *t, int rounds, enum rsk_index_mode m, char *why, size_t len)
{
	intptr_t sum = -1, psum = -1;
	int popped = 0;
	struct rsk_stack_node *n;

	rsk_counter_sum(t->c, &sum);
	rsk_pcounter_sum(t->pool, t->pc, &psum);
	for (int cpu = 0; cpu < nr; cpu++)
		if (rsk_stack_pop_all_cpu(t->s, cpu, &n) >= 0)
			for (; n != NULL; n = n->next)
				popped++;
	snprintf(why, len, "(sum %ld, locked adds %ld, popped %d, pool sum %ld, of %d; nr %d %d %d %d)",
		 (long)sum, (long)t->locked_adds, popped, (long)psum, rounds * OPS, t->c->nr, t->l->nr,
		 t->s->nr, t->pool->nr);
	return sum == rounds * OPS && t->locked_adds == rounds * OPS && popped == rounds * OPS &&
	       psum == rounds * OPS && t->c->nr == nr && t->l->nr == nr && t->s->nr == nr &&
	       t->pool->nr == nr && t->c->mode == m && t->l->mode == m && t->s->mode == m &&
	       t->pool->mode == m;
}

static void guards_closed(const char *mn, enum rsk_index_mode m)
{
	struct trio t;

	if (!trio_create(&t, m)) {
		tap_ok(0, "%s: structures created", mn);
		return;
	}
	tap_ok(GUARD_GATE(t.l, -1) != 0 && GUARD_GATE(t.l, -2) != 0 && GUARD_GATE(t.s, -1) != 0 &&
		       GUARD_GATE(t.s, -2) != 0,
	       "%s: the gates of part[-1] and part[-2] are closed (spinlock, stack)", mn);
#ifdef RSK_ARCH_HAS_STRIDE_OPS
	tap_ok(POOL_GUARD_GATE(t.pool, -1) != 0 && POOL_GUARD_GATE(t.pool, -2) != 0,
	       "%s: the mempool's guard strides -1 and -2 have closed gates (%#lx %#lx)", mn,
	       (unsigned long)POOL_GUARD_GATE(t.pool, -1), (unsigned long)POOL_GUARD_GATE(t.pool, -2));
#endif
	trio_destroy(&t);
}

struct job {
	struct trio *t;
	int ret, registered_after;
};

static void *first_ops(void *arg)
{
	struct job *j = arg;
	struct rsk_status st;

	j->ret = trio_work(j->t, 0);
	rsk_status(&st);
	j->registered_after = st.thread_registered;
	return NULL;
}

static void new_thread(const char *mn, enum rsk_index_mode m, int expect_registered)
{
	struct trio t;
	struct job j = { &t, -100, -1 };
	pthread_t th;
	char why[160];

	if (!trio_create(&t, m)) {
		tap_ok(0, "%s: structures created", mn);
		return;
	}
	pthread_create(&th, NULL, first_ops, &j);
	pthread_join(th, NULL);
	tap_ok(j.ret == 0 && trio_exact(&t, 1, t.c->mode, why, sizeof(why)),
	       "%s: a new thread's first operations are exact %s (ret %d)", mn, why, j.ret);
	if (expect_registered)
		tap_ok(j.registered_after == 1, "%s: and they registered it (%d)", mn,
		       j.registered_after);
	trio_destroy(&t);
}

/* The calling thread's area field that structures of mode m index by. */
static volatile uint32_t *index_field(enum rsk_index_mode m)
{
	struct rsk_abi_area *a = rsk_area();

	return m == RSK_INDEX_CID ? &a->mm_cid : &a->cpu_id;
}

struct unreg_job {
	enum rsk_index_mode m;
	int32_t mark; /* the value the index field holds while unregistered */
	int ret, exact, saw_mark;
	char why[160];
	int control; /* the negative control's outcome: 1 lost as it must, -1 not run */
	char cwhy[200];
};

#ifdef RSK_PCOUNTER_STRIDE_SECTION_
/*
 * The negative control of the pool's guard: its strides' gate words set
 * to 0 (the pool maps them read-only: made writable for it), OPS adds by
 * this thread, whose index field reads `mark`, then the words put back.
 * With the gate "open", each section adds to pc's copy `mark`, inside the
 * guard stride, and returns `mark` as the copy's index: the pool
 * counter's sum, which trio_exact() checks, misses every one of them.
 * Returns 1 when that is what happened.
 */
static int broken_guard_loses(struct trio *t, int32_t mark, char *why, size_t len)
{
	char *guard = (char *)t->pool->gate - 2 * (ptrdiff_t)RSK_MEMPOOL_STRIDE;
	intptr_t *stray = (intptr_t *)(void *)((char *)t->pc + mark * (ptrdiff_t)RSK_MEMPOOL_STRIDE);
	intptr_t g1 = POOL_GUARD_GATE(t->pool, -1), g2 = POOL_GUARD_GATE(t->pool, -2);
	intptr_t before = -1, after = -1, strayed;
	int as_mark = 0;

	rsk_pcounter_sum(t->pool, t->pc, &before);
	if (mprotect(guard, 2 * RSK_MEMPOOL_STRIDE, PROT_READ | PROT_WRITE) != 0) {
		snprintf(why, len, "(mprotect: %s)", strerror(errno));
		return 0;
	}
	POOL_GUARD_GATE(t->pool, -1) = 0;
	POOL_GUARD_GATE(t->pool, -2) = 0;
	for (int i = 0; i < OPS; i++)
		as_mark += rsk_pcounter_add(t->pool, t->pc, 1) == 0; /* success claimed */
	POOL_GUARD_GATE(t->pool, -1) = g1;
	POOL_GUARD_GATE(t->pool, -2) = g2;
	strayed = *stray;
	*stray = 0;
	mprotect(guard, 2 * RSK_MEMPOOL_STRIDE, PROT_READ);
	rsk_pcounter_sum(t->pool, t->pc, &after);
	snprintf(why, len, "(sum %ld before, %ld after %d adds; %ld in the guard stride of index %d; %d returned 0)",
		 (long)before, (long)after, OPS, (long)strayed, (int)mark, as_mark);
	return after == before && strayed == OPS && as_mark == OPS;
}
#endif

static void *unregistered_ops(void *arg)
{
	struct unreg_job *u = arg;
	struct trio t;
	volatile uint32_t *field;
	uint32_t saved;

	u->ret = -100;
	if (!trio_create(&t, u->m) || rsk_register() != 0)
		return NULL;
	if (rsk_unregister(RSK_UNREGISTER_FORCE) != 0)
		return NULL;
	/* The kernel no longer knows this area: it is ours to write. */
	field = index_field(t.c->mode);
	saved = *field;
	*field = (uint32_t)u->mark;
	u->ret = trio_work(&t, 0);
	u->ret = u->ret == 0 ? trio_work(&t, 1) : u->ret;
	u->saw_mark = *field == (uint32_t)u->mark;
	*field = saved;
	u->exact = trio_exact(&t, 2, t.c->mode, u->why, sizeof(u->why));
#ifdef RSK_PCOUNTER_STRIDE_SECTION_
	*field = (uint32_t)u->mark;
	u->control = broken_guard_loses(&t, u->mark, u->cwhy, sizeof(u->cwhy));
	*field = saved;
#endif
	rsk_register();
	trio_destroy(&t);
	return NULL;
}

static void unregistered(const char *mn, enum rsk_index_mode m, int32_t mark)
{
	struct unreg_job u = { m, mark, -100, 0, 0, "", -1, "" };
	pthread_t th;

	pthread_create(&th, NULL, unregistered_ops, &u);
	pthread_join(th, NULL);
	tap_ok(u.ret == 0 && u.exact && u.saw_mark,
	       "%s: a thread whose index reads %d: every operation exact through the guard %s "
	       "(ret %d, index unchanged %d)",
	       mn, (int)mark, u.why, u.ret, u.saw_mark);
#ifdef RSK_PCOUNTER_STRIDE_SECTION_
	tap_ok(u.control == 1,
	       "%s: negative control: with the mempool's guard gates zeroed, the pool counter adds "
	       "of a thread whose index reads %d go to the guard stride, missing from the sum %s",
	       mn, (int)mark, u.cwhy);
#endif
}

static void body(const struct test_mode *mode, int argc, char **argv)
{
	struct rsk_status st;

	(void)argc;
	(void)argv;
	nr = rsk_possible_cpus();
	rsk_status(&st);
	for (int m = RSK_INDEX_CPU; m <= RSK_INDEX_CID; m++) {
		char mn[32];

		snprintf(mn, sizeof(mn), "%s", m == RSK_INDEX_CID ? "cid" : "cpu");
		guards_closed(mn, (enum rsk_index_mode)m);
		new_thread(mn, (enum rsk_index_mode)m, st.owner == RSK_OWNER_LIBRARY);
		if (st.owner != RSK_OWNER_LIBRARY) {
			tap_diag("%s: %s owns the registration: no unregistered thread to test", mn,
				 rsk_owner_name(st.owner));
			continue;
		}
		unregistered(mn, (enum rsk_index_mode)m, RSK_ABI_CPU_ID_UNINITIALIZED);
		unregistered(mn, (enum rsk_index_mode)m, RSK_ABI_CPU_ID_REGISTRATION_FAILED);
	}
	(void)mode;
}

int main(int argc, char **argv)
{
	return run_modes(argc, argv, body);
}
