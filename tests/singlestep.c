/* SPDX-License-Identifier: MIT */
/*
 * The single-step guarantee.  A debugger that single-steps a thread traps
 * it at every instruction, and every trap restarts the critical section it
 * is in: on pure rseq the thread never completes an operation.  rseqkit's
 * structures fall back to their slow path after rsk_abort_limit()
 * consecutive aborts, which is plain code and steps through.
 *
 * A forked child runs a worker that does 200 operations on each structure
 * (counter adds, spinlock lock/unlock, stack, pointer buffer and copy
 * buffer push/pop pairs) while two other threads hammer the same
 * structures; the parent attaches to the worker with ptrace and
 * single-steps it until it is done.  Every operation must complete and
 * the invariants hold.  The control: the same child with the fallback
 * turned off (an abort limit of 2^30) makes no progress at all in the
 * number of steps the first run needed.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

#define OPS	  200  /* per structure: pairs count as two */
#define ITEMS	  16   /* stack / buffer items in circulation */
#define NOISE	  2    /* threads running beside the stepped one */
#define MAX_STEPS 20000000L

struct shared {
	volatile pid_t tid;   /* the worker, once it is ready */
	volatile int go;      /* the parent attached: start */
	volatile long done;   /* operations the worker completed */
	volatile int verdict; /* 1 invariants hold, -1 broken */
	char what[160];
};

static struct shared *sh;
static struct rsk_counter *counter;
static struct rsk_spinlock *lock;
static struct rsk_stack *stack;
static struct rsk_ptrbuf *ptrbuf;
static struct rsk_copybuf *copybuf;
static intptr_t locked_sum[1024];
static volatile int stop;
static long adds, locks; /* by all threads (atomic) */

struct item {
	struct rsk_stack_node node;
	long id;
};
static struct item items[3 * ITEMS]; /* stack, ptrbuf, copybuf sets */

/* One pass of every kind of operation.  Each thread holds at most one
 * item of each kind: it pushes the one it holds, or pops one when it holds
 * none (an empty part, -ENOENT, is a completed operation too: the thread
 * may have moved to another CPU's part). */
struct hand {
	struct rsk_stack_node *node;
	void *ptr;
	long value[2]; /* value[0] < 0: holds none */
};

static int done_op(int ret, long *ops)
{
	if (ret < 0 && ret != -ENOENT)
		return -1;
	(*ops)++;
	return 0;
}

static int pass(struct hand *h, long *ops)
{
	int idx, ret;

	if (done_op(rsk_counter_add(counter, 1), ops) < 0)
		return -1;
	__atomic_add_fetch(&adds, 1, __ATOMIC_RELAXED);
	if ((idx = rsk_spinlock_lock(lock)) < 0)
		return -1;
	locked_sum[idx]++;
	rsk_spinlock_unlock(lock, idx);
	__atomic_add_fetch(&locks, 1, __ATOMIC_RELAXED);
	(*ops)++;
	if (h->node != NULL) {
		ret = rsk_stack_push(stack, h->node);
		if (ret >= 0)
			h->node = NULL;
	} else {
		ret = rsk_stack_pop(stack, &h->node);
	}
	if (done_op(ret, ops) < 0)
		return -1;
	if (h->ptr != NULL) {
		ret = rsk_ptrbuf_push(ptrbuf, h->ptr);
		if (ret >= 0)
			h->ptr = NULL;
	} else {
		ret = rsk_ptrbuf_pop(ptrbuf, &h->ptr);
	}
	if (done_op(ret, ops) < 0)
		return -1;
	if (h->value[0] >= 0) {
		ret = rsk_copybuf_push(copybuf, h->value);
		if (ret >= 0)
			h->value[0] = -1;
	} else {
		ret = rsk_copybuf_pop(copybuf, h->value);
		if (ret < 0)
			h->value[0] = -1;
	}
	return done_op(ret, ops);
}

static struct hand hands[NOISE + 1];

static void *noise(void *arg)
{
	struct hand *h = arg;
	long ops = 0;

	while (!stop)
		if (pass(h, &ops) < 0)
			break;
	return NULL;
}

/* Every item exactly once: in a hand or in the structure. */
static int accounted(char *what, size_t len)
{
	int seen[3 * ITEMS] = { 0 };
	int nr = rsk_possible_cpus();

	for (int t = 0; t <= NOISE; t++) {
		if (hands[t].node != NULL)
			seen[((struct item *)hands[t].node)->id]++;
		if (hands[t].ptr != NULL)
			seen[((struct item *)hands[t].ptr)->id]++;
		if (hands[t].value[0] >= 0 && hands[t].value[0] < 3 * ITEMS)
			seen[hands[t].value[0]]++;
	}
	for (int cpu = 0; cpu < nr; cpu++) {
		struct rsk_stack_node *n;
		void *p;
		long v[2];

		if (rsk_stack_pop_all_cpu(stack, cpu, &n) == 0)
			for (; n != NULL; n = n->next)
				seen[((struct item *)n)->id]++;
		while (rsk_ptrbuf_pop_cpu(ptrbuf, cpu, &p) == 0)
			seen[((struct item *)p)->id]++;
		while (rsk_copybuf_pop_cpu(copybuf, cpu, v) == 0)
			if (v[0] >= 0 && v[0] < 3 * ITEMS && v[1] == -v[0])
				seen[v[0]]++;
	}
	for (int i = 0; i < 3 * ITEMS; i++)
		if (seen[i] != 1) {
			snprintf(what, len, "item %d seen %d times", i, seen[i]);
			return 0;
		}
	return 1;
}

static void child(unsigned abort_limit)
{
	pthread_t th[NOISE];
	struct hand *me = &hands[NOISE];
	long ops = 0;
	intptr_t sum = 0, lsum = 0;

	rsk_set_abort_limit(abort_limit);
	if (rsk_counter_create(&counter, RSK_INDEX_CPU) || rsk_spinlock_create(&lock, RSK_INDEX_CPU) ||
	    rsk_stack_create(&stack, RSK_INDEX_CPU) ||
	    rsk_ptrbuf_create(&ptrbuf, RSK_INDEX_CPU, 3 * ITEMS, RSK_PTRBUF_RELEASE) ||
	    rsk_copybuf_create(&copybuf, RSK_INDEX_CPU, 2 * sizeof(long), 3 * ITEMS, 0))
		_exit(3);
	for (int i = 0; i < 3 * ITEMS; i++)
		items[i].id = i;
	/* Each thread holds one item of each kind; the rest are in the
	 * structures (pushed now, from whatever CPU). */
	for (int t = 0; t <= NOISE; t++) {
		hands[t].node = &items[t].node;
		hands[t].ptr = &items[ITEMS + t];
		hands[t].value[0] = 2 * ITEMS + t;
		hands[t].value[1] = -(2 * ITEMS + t);
	}
	for (int i = NOISE + 1; i < ITEMS; i++) {
		long v[2] = { 2 * ITEMS + i, -(2 * ITEMS + i) };
		rsk_stack_push(stack, &items[i].node);
		rsk_ptrbuf_push(ptrbuf, &items[ITEMS + i]);
		rsk_copybuf_push(copybuf, v);
	}
	for (int t = 0; t < NOISE; t++)
		pthread_create(&th[t], NULL, noise, &hands[t]);

	sh->tid = (pid_t)syscall(SYS_gettid);
	while (!sh->go)
		sched_yield();
	/* Stepped from here: 5 structures x OPS operations. */
	while (ops < 5L * OPS) {
		if (pass(me, &ops) < 0) {
			snprintf(sh->what, sizeof(sh->what), "an operation failed at %ld", ops);
			sh->verdict = -1;
			_exit(1);
		}
		sh->done = ops;
	}
	stop = 1;
	for (int t = 0; t < NOISE; t++)
		pthread_join(th[t], NULL);
	rsk_counter_sum(counter, &sum);
	for (int i = 0; i < lock->nr && i < 1024; i++)
		lsum += locked_sum[i];
	if (sum != adds)
		snprintf(sh->what, sizeof(sh->what), "counter %ld != %ld adds", (long)sum, adds);
	else if (lsum != locks)
		snprintf(sh->what, sizeof(sh->what), "locked sum %ld != %ld locks", (long)lsum, locks);
	else if (accounted(sh->what, sizeof(sh->what)))
		sh->verdict = 1;
	if (sh->verdict == 0)
		sh->verdict = -1;
	_exit(0);
}

/* Fork a child with the given abort limit and single-step its worker for
 * at most max_steps steps.  Returns the steps taken; *done the worker's
 * completed operations then. */
static long stepped_run(unsigned abort_limit, long max_steps, long *done, int *verdict)
{
	long steps = 0;
	int status;
	pid_t pid, tid;

	memset(sh, 0, sizeof(*sh));
	pid = fork();
	if (pid == 0)
		child(abort_limit);
	while (sh->tid == 0)
		sched_yield();
	tid = sh->tid;
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0 || ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0 ||
	    waitpid(tid, &status, __WALL) != tid) {
		tap_diag("cannot trace the worker: %s", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return -1;
	}
	sh->go = 1;
	while (steps < max_steps && sh->done < 5L * OPS) {
		if (ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL) != 0 ||
		    waitpid(tid, &status, __WALL) != tid || !WIFSTOPPED(status))
			break;
		steps++;
	}
	*done = sh->done;
	ptrace(PTRACE_DETACH, tid, NULL, NULL);
	if (sh->done < 5L * OPS) {
		kill(pid, SIGKILL); /* the control never gets there */
		waitpid(pid, &status, 0);
		*verdict = 0;
	} else {
		waitpid(pid, &status, 0);
		*verdict = sh->verdict;
	}
	return steps;
}

int main(void)
{
	struct rsk_status st;
	long done = 0, steps, control_done = 0;
	int verdict = 0, control_verdict = 0;

	rsk_status(&st);
	if (!st.available)
		tap_plan_skip_all("rseq unavailable: nothing restarts, nothing to guarantee");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		tap_plan_skip_all("no shared memory");
	tap_plan(3);

	/* A small limit keeps the run short; the guarantee is the same. */
	steps = stepped_run(1, MAX_STEPS, &done, &verdict);
	tap_ok(steps > 0 && done == 5L * OPS,
	       "single-stepped worker completes %ld of %d operations in %ld steps", done, 5 * OPS,
	       steps);
	tap_ok(verdict == 1, "invariants hold after stepping (%s)", verdict == 1 ? "all counted" : sh->what);
	if (steps <= 0) {
		tap_ok(0, "control not run");
		return tap_done();
	}
	stepped_run(1u << 30, steps, &control_done, &control_verdict);
	tap_ok(control_done == 0,
	       "control: without the fallback, %ld steps complete %ld operations", steps, control_done);
	return tap_done();
}
