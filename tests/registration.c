/* SPDX-License-Identifier: MIT */
/*
 * Registration matrix, run in every registration mode (a fresh child
 * process each: libc-owned, library-owned in libc's area, library-owned in
 * rseqkit's own TLS area; see harness.h):
 *   - the owner and reason rsk_status() reports;
 *   - exact per-CPU adds while pinned to each allowed CPU;
 *   - 64 threads, started and stopped twice, each registered and adding;
 *   - nested rsk_register()/rsk_unregister() counting, forced unregister,
 *     the -EINVAL cases, re-registration - checked against the kernel's own
 *     view (a raw rseq(2) registration of the same area answers EBUSY while
 *     the area is registered);
 *   - fork: identity and exact per-CPU adds in the child.
 * tests/registration_static.c builds this same program with -static.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include <rseqkit/counter.h>

#define MAX_CPUS 1024
static int cpus[MAX_CPUS], ncpus;
static int possible;
static const struct test_mode *mode;
static int libc_owned;

/* 1 if the kernel has the calling thread's rseqkit area registered, 0 if
 * the thread has no registration, -errno if the answer is unclear. */
static int kernel_registered(void)
{
	struct rsk_abi_area *area = rsk_area();
	struct rsk_status st;

	rsk_status(&st);
	if (area == NULL || st.registered_size == 0)
		return -ENOENT;
	uint32_t cid = area->mm_cid;
	if (syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, 0, RSK_ARCH_SIGNATURE) == 0) {
		/* It was free: undo our probe registration at once, and give
		 * back the mm_cid field the kernel resets on unregistration
		 * (rseqkit keeps it out of range while the thread is
		 * unregistered: see rsk_unregister(3)). */
		syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, RSK_ABI_FLAG_UNREGISTER,
			RSK_ARCH_SIGNATURE);
		area->mm_cid = cid;
		return 0;
	}
	/* EBUSY: this very registration exists; EINVAL: another one does
	 * (other length, as newer glibc may use), the area being valid. */
	return errno == EBUSY || errno == EINVAL ? 1 : -errno;
}

/* One per-CPU add, retried after aborts; returns 1 if it committed. */
static int add_once(intptr_t *slots, int *fallbacks)
{
	for (int tries = 0; tries < 100000; tries++) {
		int cpu = rsk_index(RSK_INDEX_CPU);
		if (cpu < 0 || cpu >= possible)
			break;
		if (rsk_add(RSK_INDEX_CPU, cpu, &slots[cpu * 16], 1) == RSK_OK)
			return 1;
	}
	__atomic_add_fetch(&slots[0], 1, __ATOMIC_RELAXED);
	(*fallbacks)++;
	return 0;
}

static intptr_t *new_slots(void)
{
	/* One 128-byte line per CPU (16 words) */
	intptr_t *s = aligned_alloc(128, (size_t)possible * 16 * sizeof(intptr_t));
	memset(s, 0, (size_t)possible * 16 * sizeof(intptr_t));
	return s;
}

static long slots_sum(const intptr_t *s)
{
	long sum = 0;
	for (int c = 0; c < possible; c++)
		sum += s[c * 16];
	return sum;
}

/* ---- pinned adds ---- */

#define PINNED_ADDS 1000

/* Pinned to each CPU in turn, PINNED_ADDS adds; 0 if every slot is exact. */
static int pinned_adds(char *why, size_t len)
{
	intptr_t *s = new_slots();
	int bad = 0, fallbacks = 0;

	why[0] = '\0';
	for (int i = 0; i < ncpus; i++) {
		if (pin_to(cpus[i]) != 0) {
			snprintf(why, len, "cannot pin to %d", cpus[i]);
			bad++;
			continue;
		}
		if (rsk_cpu() != cpus[i] || sched_getcpu() != cpus[i] ||
		    rsk_index(RSK_INDEX_CPU) != cpus[i]) {
			snprintf(why, len, "pinned to %d: rsk_cpu %d, sched_getcpu %d, index %d",
				 cpus[i], rsk_cpu(), sched_getcpu(), rsk_index(RSK_INDEX_CPU));
			bad++;
		}
		for (int k = 0; k < PINNED_ADDS; k++)
			add_once(s, &fallbacks);
	}
	unpin();
	for (int c = 0; c < possible; c++) {
		intptr_t want = 0;
		for (int i = 0; i < ncpus; i++)
			if (cpus[i] == c)
				want = PINNED_ADDS;
		if (s[c * 16] != want) {
			if (!bad)
				snprintf(why, len, "slot %d holds %ld, expected %ld (%d fallbacks)", c,
					 (long)s[c * 16], (long)want, fallbacks);
			bad++;
		}
	}
	free(s);
	return bad;
}

/* ---- 64 threads, twice ---- */

#define NTHREADS 64
#define THREAD_ADDS 2000

struct crowd {
	intptr_t *slots;
	pthread_barrier_t barrier;
	int registered, owner_ok, cid_bad, fallbacks, count_bad;
};

static void *crowd_worker(void *arg)
{
	struct crowd *c = arg;
	struct rsk_status st;
	int fallbacks = 0;

	rsk_status(&st);
	if (st.thread_registered)
		__atomic_add_fetch(&c->registered, 1, __ATOMIC_RELAXED);
	if ((int)st.owner == mode->owner)
		__atomic_add_fetch(&c->owner_ok, 1, __ATOMIC_RELAXED);
	if (st.thread_count != 0)
		__atomic_add_fetch(&c->count_bad, 1, __ATOMIC_RELAXED);
	pthread_barrier_wait(&c->barrier); /* all 64 alive at once */
	int cid = rsk_mm_cid();
	if (cid < 0 || cid >= (rsk_mm_cid_available() ? ncpus : possible))
		__atomic_add_fetch(&c->cid_bad, 1, __ATOMIC_RELAXED);
	for (int k = 0; k < THREAD_ADDS; k++)
		add_once(c->slots, &fallbacks);
	__atomic_add_fetch(&c->fallbacks, fallbacks, __ATOMIC_RELAXED);
	return NULL;
}

static void crowd_round(int round)
{
	struct crowd c = { .slots = new_slots() };
	pthread_t th[NTHREADS];
	int started = 0;

	pthread_barrier_init(&c.barrier, NULL, NTHREADS);
	for (int t = 0; t < NTHREADS; t++)
		if (pthread_create(&th[t], NULL, crowd_worker, &c) == 0)
			started++;
	if (started != NTHREADS) {
		/* The barrier would never open: this round cannot run. */
		tap_ok(0, "round %d: only %d of %d threads started", round, started, NTHREADS);
		exit(1);
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&c.barrier);
	tap_ok(c.registered == NTHREADS, "round %d: %d/%d threads report thread_registered", round,
	       c.registered, NTHREADS);
	tap_ok(c.owner_ok == NTHREADS, "round %d: every thread sees owner %s", round,
	       rsk_owner_name(mode->owner));
	tap_ok(c.count_bad == 0, "round %d: new threads start with thread_count 0", round);
	tap_ok(c.cid_bad == 0, "round %d: every mm_cid below the allowed CPUs", round);
	long sum = slots_sum(c.slots);
	tap_ok(sum == (long)NTHREADS * THREAD_ADDS && c.fallbacks == 0,
	       "round %d: per-CPU adds exact: %ld == %ld, %d slow-path fallbacks", round, sum,
	       (long)NTHREADS * THREAD_ADDS, c.fallbacks);
	free(c.slots);
}

/* ---- nested counting ---- */

struct state {
	int count, registered, kernel, index, cid_index, cpu, sched;
};

static void snap(struct state *s)
{
	struct rsk_status st;

	rsk_status(&st);
	s->count = st.thread_count;
	s->registered = st.thread_registered;
	s->kernel = kernel_registered();
	s->index = rsk_index(RSK_INDEX_CPU);
	s->cid_index = rsk_index(RSK_INDEX_CID);
	s->cpu = rsk_cpu();
	s->sched = sched_getcpu();
}

/* Registered as far as everybody can tell, pinned to cpu. */
static int is_on(const struct state *s, int cpu)
{
	return s->registered == 1 && s->kernel == 1 && s->index == cpu && s->cpu == cpu &&
	       s->sched == cpu && (!rsk_mm_cid_available() || s->cid_index >= 0);
}

/* Unregistered everywhere, identity still right. */
static int is_off(const struct state *s, int cpu)
{
	return s->registered == 0 && s->kernel == 0 && s->index == -1 && s->cid_index == -1 &&
	       s->cpu == cpu && s->sched == cpu;
}

static const char *show(const struct state *s)
{
	static char buf[160];
	snprintf(buf, sizeof(buf), "count %d, registered %d, kernel %d, index %d/%d, cpu %d/%d",
		 s->count, s->registered, s->kernel, s->index, s->cid_index, s->cpu, s->sched);
	return buf;
}

/* An add must commit when registered and abort (storing nothing) when not. */
static int add_behaves(int on, int cpu)
{
	intptr_t v = 0;
	int r = RSK_ABORTED;

	for (int k = 0; k < 1000 && r == RSK_ABORTED; k++)
		r = rsk_add(RSK_INDEX_CPU, cpu, &v, 1);
	return on ? r == RSK_OK && v == 1 : r == RSK_ABORTED && v == 0;
}

/*
 * The structures' fast path trusts an unregistered thread's mm_cid field
 * to be out of range in the areas whose mm_cid it uses (the kernel writes
 * 0 there at unregistration: rseqkit writes (uint32_t)-1 back).  An add
 * from an unregistered thread must therefore end on the slow path, exact,
 * and never run its section unarmed.
 */
static int unregistered_cid_add_is_slow(void)
{
	struct rsk_counter *c;
	struct rsk_stats before, after;
	intptr_t sum = -1;
	int idx;

	if (rsk_counter_create(&c, RSK_INDEX_CID) != 0)
		return 0;
	rsk_stats_thread(&before);
	idx = rsk_counter_add(c, 1); /* 0 */
	rsk_stats_thread(&after);
	rsk_counter_sum(c, &sum);
	int cid = c->mode == RSK_INDEX_CID;
	rsk_counter_destroy(c);
	tap_diag("mode %s, index %d, sum %ld, slow paths %llu -> %llu", cid ? "cid" : "cpu", idx,
		 (long)sum,
		 (unsigned long long)before.slow_paths, (unsigned long long)after.slow_paths);
	return idx >= 0 && sum == 1 && after.slow_paths == before.slow_paths + 1;
}

static void *nested_thread(void *arg)
{
	int cpu = cpus[0];
	struct state s;
	int r;
	(void)arg;

	if (pin_to(cpu) != 0) {
		tap_ok(0, "nested: cannot pin to CPU %d", cpu);
		return NULL;
	}
	snap(&s);
	tap_ok(s.count == 0 && is_on(&s, cpu), "nested: a new thread is registered, count 0 (%s)",
	       show(&s));
	tap_ok(rsk_unregister(0) == -EINVAL, "nested: unregister with count 0 is -EINVAL");
	tap_ok(rsk_unregister(2) == -EINVAL && rsk_unregister(~0u) == -EINVAL &&
		       rsk_unregister(RSK_UNREGISTER_FORCE | 4) == -EINVAL,
	       "nested: unknown flags are -EINVAL");
	snap(&s);
	tap_ok(s.count == 0 && is_on(&s, cpu), "nested: the -EINVAL calls changed nothing (%s)",
	       show(&s));

	r = rsk_register() | rsk_register() | rsk_register();
	snap(&s);
	tap_ok(r == 0 && s.count == 3 && is_on(&s, cpu), "nested: three rsk_register() -> count 3 (%s)",
	       show(&s));
	tap_ok(rsk_unregister(8) == -EINVAL && (snap(&s), s.count == 3),
	       "nested: bad flags leave the count at 3");

	r = rsk_unregister(0);
	snap(&s);
	tap_ok(r == 0 && s.count == 2 && is_on(&s, cpu), "nested: unregister 3->2 keeps it registered (%s)",
	       show(&s));
	r = rsk_unregister(0);
	snap(&s);
	tap_ok(r == 0 && s.count == 1 && is_on(&s, cpu), "nested: unregister 2->1 keeps it registered (%s)",
	       show(&s));

	r = rsk_unregister(0);
	snap(&s);
	if (libc_owned) {
		tap_ok(r == 0 && s.count == 0 && is_on(&s, cpu),
		       "nested: last unregister leaves libc's registration alone (%s)", show(&s));
		tap_ok(add_behaves(1, cpu), "nested: adds still commit after the last unregister");
	} else {
		tap_ok(r == 0 && s.count == 0 && is_off(&s, cpu),
		       "nested: last unregister unregisters: index -1, kernel agrees (%s)", show(&s));
		tap_ok(add_behaves(0, cpu), "nested: an add on the unregistered thread aborts, stores nothing");
		tap_ok(unregistered_cid_add_is_slow(),
		       "nested: an unregistered thread's add on a CID counter takes the slow path");
	}
	tap_ok(rsk_unregister(0) == -EINVAL, "nested: one unregister too many is -EINVAL");

	r = rsk_register();
	snap(&s);
	tap_ok(r == 0 && s.count == 1 && is_on(&s, cpu), "nested: rsk_register() registers again (%s)",
	       show(&s));
	tap_ok(add_behaves(1, cpu), "nested: adds commit after re-registration");

	r = rsk_register() | rsk_register();
	int rf = rsk_unregister(RSK_UNREGISTER_FORCE);
	snap(&s);
	if (libc_owned)
		tap_ok(r == 0 && rf == 0 && s.count == 0 && is_on(&s, cpu),
		       "nested: forced unregister drops the count, libc stays registered (%s)", show(&s));
	else
		tap_ok(r == 0 && rf == 0 && s.count == 0 && is_off(&s, cpu),
		       "nested: forced unregister from count 3 unregisters (%s)", show(&s));
	tap_ok(rsk_unregister(RSK_UNREGISTER_FORCE) == 0 && (snap(&s), s.count == 0),
	       "nested: forced unregister at count 0 is harmless");
	r = rsk_register();
	snap(&s);
	tap_ok(r == 0 && s.count == 1 && is_on(&s, cpu), "nested: registered again after force (%s)",
	       show(&s));
	/* Exits with a count of 1: the exit hook must cope. */
	return NULL;
}

static void *child_of_unregistered(void *arg)
{
	snap(arg); /* pinned like its creator */
	return NULL;
}

/* A thread registered implicitly (count 0), then forced off. */
static void *implicit_thread(void *arg)
{
	int cpu = cpus[ncpus - 1];
	struct state s;
	(void)arg;

	if (pin_to(cpu) != 0) {
		tap_ok(0, "implicit: cannot pin to CPU %d", cpu);
		return NULL;
	}
	(void)rsk_cpu();
	int r = rsk_unregister(RSK_UNREGISTER_FORCE);
	snap(&s);
	if (libc_owned)
		tap_ok(r == 0 && is_on(&s, cpu), "implicit: forced unregister keeps libc's registration (%s)",
		       show(&s));
	else
		tap_ok(r == 0 && is_off(&s, cpu),
		       "implicit: forced unregister drops the implicit registration (%s)", show(&s));
	/* A thread created now: glibc copies its creator's (unregistered)
	 * state, so rseqkit (or libc) must register it on first use. */
	pthread_t th;
	struct state cs;
	if (pthread_create(&th, NULL, child_of_unregistered, &cs) == 0) {
		pthread_join(th, NULL);
		tap_ok(is_on(&cs, cpu), "implicit: a thread it creates is registered (%s)", show(&cs));
	} else {
		tap_ok(0, "implicit: pthread_create failed");
	}
	/* Left unregistered: thread exit must not try to unregister again. */
	return NULL;
}

static void run_thread(void *(*fn)(void *))
{
	pthread_t th;

	if (pthread_create(&th, NULL, fn, NULL) != 0) {
		tap_ok(0, "pthread_create failed");
		return;
	}
	pthread_join(th, NULL);
}

/* ---- fork ---- */

struct fork_result {
	int ran, owner_ok, registered, identity_bad, adds_bad, thread_bad, reregister_ok;
	char why[160];
};

static void *fork_thread(void *arg)
{
	struct fork_result *fr = arg;
	char why[160];

	if (pinned_adds(why, sizeof(why)) != 0) {
		fr->thread_bad = 1;
		snprintf(fr->why, sizeof(fr->why), "thread: %.140s", why);
	}
	return NULL;
}

static void fork_child(struct fork_result *fr, int reregister)
{
	struct rsk_status st;
	char why[160];

	fr->ran = 1;
	if (reregister) {
		/* The parent forked while unregistered (library-owned): the
		 * child is too, until it registers. */
		int before = rsk_index(RSK_INDEX_CPU);
		int r = rsk_register();
		fr->reregister_ok = (libc_owned || before == -1) && r == 0 &&
				    rsk_index(RSK_INDEX_CPU) >= 0;
	}
	rsk_status(&st);
	fr->owner_ok = (int)st.owner == mode->owner;
	fr->registered = st.thread_registered;
	fr->identity_bad = 0;
	for (int i = 0; i < ncpus; i++) {
		if (pin_to(cpus[i]) != 0 || rsk_cpu() != cpus[i] || sched_getcpu() != cpus[i] ||
		    rsk_index(RSK_INDEX_CPU) != cpus[i])
			fr->identity_bad++;
	}
	unpin();
	if (pinned_adds(why, sizeof(why)) != 0) {
		fr->adds_bad = 1;
		snprintf(fr->why, sizeof(fr->why), "%s", why);
	}
	pthread_t th;
	if (pthread_create(&th, NULL, fork_thread, fr) == 0)
		pthread_join(th, NULL);
	else
		fr->thread_bad = 1;
}

static void fork_case(const char *label, int reregister)
{
	struct fork_result *fr = mmap(NULL, sizeof(*fr), PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status = 0;
	char how[128];
	pid_t pid;

	if (fr == MAP_FAILED) {
		tap_ok(0, "%s: mmap failed", label);
		return;
	}
	memset(fr, 0, sizeof(*fr));
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(HARNESS_CHILD_TIMEOUT);
		fork_child(fr, reregister);
		_exit(0);
	}
	if (pid < 0) {
		tap_ok(0, "%s: fork failed", label);
		return;
	}
	waitpid(pid, &status, 0);
	describe_status(status, how, sizeof(how));
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && fr->ran, "%s: child exits normally (%s)",
	       label, how);
	if (reregister)
		tap_ok(fr->reregister_ok, "%s: child registers with rsk_register()", label);
	tap_ok(fr->owner_ok && fr->registered, "%s: child sees owner %s and is registered", label,
	       rsk_owner_name(mode->owner));
	tap_ok(fr->identity_bad == 0, "%s: child's rsk_cpu()/rsk_index() right on each CPU (%d bad)",
	       label, fr->identity_bad);
	tap_ok(!fr->adds_bad, "%s: child's per-CPU adds exact %s", label, fr->why);
	tap_ok(!fr->thread_bad, "%s: a thread of the child adds exactly %s", label, fr->why);
	munmap(fr, sizeof(*fr));
}

static void *fork_from_thread(void *arg)
{
	(void)arg;
	fork_case("fork from a thread", 0);
	return NULL;
}

static void *fork_unregistered_thread(void *arg)
{
	(void)arg;
	(void)rsk_cpu();
	rsk_unregister(RSK_UNREGISTER_FORCE);
	fork_case("fork while unregistered", 1);
	return NULL;
}

static void body(const struct test_mode *m, int argc, char **argv)
{
	struct rsk_status st;
	char why[160];
	(void)argc, (void)argv;

	mode = m;
	if (m->owner == OWNER_ANY) {
		tap_skip("rseq(2) unavailable: nothing to register", "registration matrix");
		return;
	}
	libc_owned = m->owner == RSK_OWNER_LIBC;
	ncpus = allowed_cpus(cpus, MAX_CPUS);
	possible = rsk_possible_cpus();
	if (ncpus == 0 || cpus[ncpus - 1] >= possible) {
		tap_ok(0, "allowed CPUs (%d) fit the possible CPUs (%d)", ncpus, possible);
		return;
	}

	rsk_status(&st);
	tap_ok(st.available && (int)st.owner == m->owner, "owner %s (got %s: %s)",
	       rsk_owner_name(m->owner), rsk_owner_name(st.owner), st.reason);
	tap_ok(st.reason && strstr(st.reason, m->reason), "reason mentions \"%s\"", m->reason);
	tap_ok(st.error == 0 && st.registered_size >= 32, "error %d, registered_size %u", st.error,
	       st.registered_size);
	tap_ok(st.thread_registered == 1 && st.thread_count == 0,
	       "main thread registered implicitly (registered %d, count %d)", st.thread_registered,
	       st.thread_count);
	tap_ok(kernel_registered() == 1, "the kernel has the main thread's area registered (%d)",
	       kernel_registered());

	tap_ok(pinned_adds(why, sizeof(why)) == 0, "main thread: exact per-CPU adds pinned to each CPU %s",
	       why);

	crowd_round(1);
	crowd_round(2);

	run_thread(nested_thread);
	run_thread(implicit_thread);

	fork_case("fork", 0);
	run_thread(fork_from_thread);
	run_thread(fork_unregistered_thread);

	/* The main thread still works after all that. */
	tap_ok(pinned_adds(why, sizeof(why)) == 0, "main thread: still exact at the end %s", why);
}

int main(int argc, char **argv)
{
	return run_modes(argc, argv, body);
}
