/* SPDX-License-Identifier: MIT */
/*
 * A signal handler that makes its thread's first rseqkit call while the
 * thread is inside its own first call (issue 14, item 2), in every
 * registration mode.  The injection build of the library calls
 * rsk_inject_activation(step) at each step of a thread's activation; this
 * program raises SIGUSR1 there, once, in a fresh thread per step, and the
 * handler calls rsk_register(), rsk_note_abort() (the process's first
 * abort, in the first thread) and rsk_status().  Afterwards the thread
 * must be registered as far as everybody can tell (rseqkit, the kernel,
 * an add that commits), both rsk_register() calls must have succeeded and
 * counted, and nothing may have been allocated inside the handler: this
 * program interposes malloc and friends and counts the calls a handler
 * makes.
 */
#include <malloc.h>
#include <pthread.h>
#include <rseqkit/progress.h>
#include "harness.h"

#define MAX_CPUS 1024
/* rsk_inject_activation() steps 1..5, see src/runtime/runtime.c (step 6
 * runs with every signal blocked: a signal raised there waits) */
#define STEPS 5

static int cpus[MAX_CPUS], ncpus;
static const struct test_mode *mode;

/* ---- allocation counting ---- */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static __thread int in_handler;
static int handler_allocs;

static void note_alloc(void)
{
	if (in_handler)
		__atomic_add_fetch(&handler_allocs, 1, __ATOMIC_RELAXED);
}

void *malloc(size_t n)
{
	note_alloc();
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	note_alloc();
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	note_alloc();
	return __libc_realloc(p, n);
}

void *memalign(size_t a, size_t n)
{
	note_alloc();
	return __libc_memalign(a, n);
}

void *aligned_alloc(size_t a, size_t n)
{
	note_alloc();
	return __libc_memalign(a, n);
}

int posix_memalign(void **out, size_t a, size_t n)
{
	note_alloc();
	*out = __libc_memalign(a, n);
	return *out ? 0 : ENOMEM;
}

void free(void *p)
{
	__libc_free(p);
}

/* ---- the hook and the handler ---- */

static __thread int fire_step, fired;
static __thread int handler_ret, handler_registered, handler_abort;

void rsk_inject_activation(int step)
{
	if (step == fire_step && !fired) {
		fired = 1;
		raise(SIGUSR1);
	}
}

static void on_usr1(int sig)
{
	struct rsk_stats before, after;
	struct rsk_status st;
	(void)sig;

	in_handler = 1;
	handler_ret = rsk_register();
	rsk_stats_process(&before);
	if (handler_abort)
		rsk_note_abort(); /* the process's first abort */
	rsk_stats_process(&after);
	handler_abort = handler_abort && after.aborts == before.aborts + 1;
	rsk_status(&st);
	handler_registered = st.thread_registered;
	in_handler = 0;
}

/* 1 if the kernel has the calling thread's area registered (a raw
 * registration of it answers EBUSY, or EINVAL for another length). */
static int kernel_registered(void)
{
	struct rsk_abi_area *area = rsk_area();
	struct rsk_status st;

	rsk_status(&st);
	if (area == NULL || st.registered_size == 0)
		return 0;
	if (syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, 0, RSK_ARCH_SIGNATURE) == 0) {
		syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, RSK_ABI_FLAG_UNREGISTER,
			RSK_ARCH_SIGNATURE);
		return 0;
	}
	return errno == EBUSY || errno == EINVAL;
}

struct step_result {
	int step, fired, ret, handler_ret, handler_registered, handler_abort_ok;
	int registered, count, kernel, add_ok, unregister_ok, again_ok;
};

static void *step_thread(void *arg)
{
	struct step_result *r = arg;
	struct rsk_status st;
	int cpu = cpus[r->step % ncpus];

	pin_to(cpu);
	fire_step = r->step;
	handler_abort = r->step == 1;
	r->ret = rsk_register(); /* this thread's first call */
	fire_step = 0;
	r->fired = fired;
	r->handler_ret = handler_ret;
	r->handler_registered = handler_registered;
	r->handler_abort_ok = handler_abort;
	rsk_status(&st);
	r->registered = st.thread_registered;
	r->count = st.thread_count;
	r->kernel = kernel_registered();
	intptr_t v = 0;
	int res = RSK_ABORTED;
	for (int k = 0; k < 1000 && res == RSK_ABORTED; k++) {
		int idx = rsk_index(RSK_INDEX_CPU);
		if (idx < 0)
			break;
		res = rsk_add(RSK_INDEX_CPU, idx, &v, 1);
	}
	r->add_ok = res == RSK_OK && v == 1;
	/* Counting still works: two registrations to undo. */
	r->unregister_ok = rsk_unregister(0) == 0 && rsk_unregister(0) == 0 &&
			   rsk_unregister(0) == -EINVAL;
	r->again_ok = rsk_register() == 0 && rsk_index(RSK_INDEX_CPU) >= 0;
	return NULL;
}

static void body(const struct test_mode *m, int argc, char **argv)
{
	struct sigaction sa;
	(void)argc;
	(void)argv;

	mode = m;
	ncpus = allowed_cpus(cpus, MAX_CPUS);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	if (m->owner == OWNER_ANY) {
		tap_skip("rseq(2) unavailable", "signal during the first call");
		return;
	}

	for (int step = 1; step <= STEPS; step++) {
		struct step_result r = { .step = step };
		pthread_t th;

		__atomic_store_n(&handler_allocs, 0, __ATOMIC_RELAXED);
		if (!tap_ok(pthread_create(&th, NULL, step_thread, &r) == 0, "step %d: thread", step))
			continue;
		pthread_join(th, NULL);
		if (!r.fired) {
			/* libc-owned threads never register: steps 2-3 are not on
			 * their way; that is a skip, not a pass. */
			tap_skip("this step is not on the way in this mode", "step %d: signal fired",
				 step);
			continue;
		}
		tap_ok(r.ret == 0 && r.handler_ret == 0,
		       "step %d: both first calls (interrupted and handler's) return 0 (%d, %d)", step,
		       r.ret, r.handler_ret);
		tap_ok(r.handler_registered && r.registered && r.count == 2,
		       "step %d: registered in the handler and after it, count 2 (%d, %d, %d)", step,
		       r.handler_registered, r.registered, r.count);
		tap_ok(r.kernel, "step %d: the kernel has the area registered", step);
		tap_ok(r.add_ok, "step %d: a per-CPU add commits", step);
		tap_ok(r.unregister_ok && r.again_ok,
		       "step %d: two unregisters, a third is -EINVAL; registering again works", step);
		tap_ok(__atomic_load_n(&handler_allocs, __ATOMIC_RELAXED) == 0,
		       "step %d: nothing allocated inside the handler (%d calls)", step,
		       __atomic_load_n(&handler_allocs, __ATOMIC_RELAXED));
		if (step == 1)
			tap_ok(r.handler_abort_ok, "step 1: the process's first abort counted in the handler");
	}
}

int main(int argc, char **argv)
{
	return run_modes(argc, argv, body);
}
