/* SPDX-License-Identifier: MIT */
/*
 * Gates (progress.h) as a lock: owner, signals, stuck holders.
 *   - bad arguments: NULL gate, unknown mode, an index outside
 *     [0, rsk_possible_cpus()) in either mode: -EINVAL, nothing changed;
 *   - a closed gate holds the closer's kernel thread id; closing it again
 *     in the same thread is -EDEADLK and changes nothing;
 *   - a signal handler that closes the gate its own interrupted thread
 *     holds gets -EDEADLK (before: it spun forever);
 *   - a waiter goes to sleep on the gate's futex: the holder sees the
 *     waiters bit appear in the gate word (before: never - it spun with
 *     sched_yield), and its open wakes the sleeper;
 *   - a holder that exited: the next close returns -EOWNERDEAD, with one
 *     report on stderr (before: a hang);
 *   - RSEQKIT_GATE_WARN_MS=50 reports a gate held for 300 ms (address,
 *     part, holder), in a re-executed child; a bad value is reported too;
 *   - a SCHED_FIFO waiter on the holder's CPU sleeps, so the SCHED_OTHER
 *     holder runs there and sees it asleep (before: the waiter's yield
 *     loop starved it; root only);
 *   - plain-path gates (a process without rseq), opened with a plain
 *     store: the holder's id, -EDEADLK, a sleeping waiter woken, and one
 *     whose wake-up is lost (the waiters bit cleared, as a store after
 *     the bit appeared does) still takes the gate.
 * No timing assertions: a watchdog turns a hang into a failure, and times
 * are only printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

#define TID_MASK 0x0fffffff

static const char *current = "start";

static void watchdog(int sig)
{
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "not ok %d - %s: hung (watchdog)\nBail out! hang\n",
			 tap_n + 1, current);
	(void)sig;
	if (write(STDOUT_FILENO, buf, (size_t)n) < 0)
		_exit(3);
	_exit(2);
}

static void arm(const char *what, unsigned seconds)
{
	current = what;
	alarm(seconds);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double thread_cpu(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int gettid_(void)
{
	return (int)syscall(SYS_gettid);
}

/* ---- stderr capture (the library reports with write(2)) ---- */

static int saved_stderr = -1;
static char cap_path[64];

static void capture_start(void)
{
	int fd;

	snprintf(cap_path, sizeof(cap_path), "/tmp/rseqkit-gate.%d", (int)getpid());
	fd = open(cap_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

/* Restore stderr; returns what was written (static buffer). */
static const char *capture_end(void)
{
	static char buf[4096];
	int fd = open(cap_path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	unlink(cap_path);
	buf[n > 0 ? n : 0] = '\0';
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	return buf;
}

static int count_lines(const char *s, const char *needle)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* ---- 1. arguments, owner, closing twice ---- */

static intptr_t gate __attribute__((aligned(128)));

static void arguments(void)
{
	int nr = rsk_possible_cpus();
	intptr_t g = 0;

	arm("arguments", 10);
	tap_ok(rsk_gate_close(NULL, RSK_INDEX_CPU, 0) == -EINVAL &&
		       rsk_gate_close(&g, (enum rsk_index_mode)7, 0) == -EINVAL && g == 0,
	       "NULL gate, unknown mode: -EINVAL");
	int a = rsk_gate_close(&g, RSK_INDEX_CID, -7);
	if (a == 0)
		rsk_gate_open(&g);
	int b = rsk_gate_close(&g, RSK_INDEX_CPU, nr);
	if (b == 0)
		rsk_gate_open(&g);
	int c = rsk_gate_close(&g, RSK_INDEX_CPU, -1);
	if (c == 0)
		rsk_gate_open(&g);
	tap_ok(a == -EINVAL && b == -EINVAL && c == -EINVAL && g == 0,
	       "index -7 (CID), %d and -1 (CPU): -EINVAL, gate untouched (%d %d %d)", nr, a, b, c);
	alarm(0);
}

static void owner(void)
{
	int me = gettid_();
	int r;

	arm("closing a gate twice", 10);
	r = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);

	tap_ok(r == 0 && gate != 0 && (gate & TID_MASK) == me,
	       "a closed gate holds the closer's thread id (%#lx, tid %d)", (long)gate, me);
	intptr_t before = gate;
	int again = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);
	tap_ok(again == -EDEADLK && gate == before,
	       "closing it again in the same thread: -EDEADLK, unchanged (%d)", again);
	int cid = rsk_gate_close(&gate, RSK_INDEX_CID, 0);
	tap_ok(cid == -EDEADLK, "also in the other index mode (%d)", cid);
	rsk_gate_open(&gate);
	tap_ok(gate == 0, "open: the gate is 0 again");
	r = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);
	tap_ok(r == 0, "and closes again afterwards");
	rsk_gate_open(&gate);
	alarm(0);
}

/* ---- 2. a signal handler on its own thread's gate ---- */

static volatile sig_atomic_t in_handler_result = 1;

static void on_usr1(int sig)
{
	(void)sig;
	in_handler_result = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);
	if (in_handler_result == 0)
		rsk_gate_open(&gate);
}

static void signal_handler(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	sigaction(SIGUSR1, &sa, NULL);
	arm("a handler closing its own thread's gate", 10);
	if (rsk_gate_close(&gate, RSK_INDEX_CPU, 0) != 0) {
		tap_ok(0, "a handler closing its own thread's gate: could not close it first");
		return;
	}
	raise(SIGUSR1); /* runs the handler now, "inside the slow path" */
	tap_ok(in_handler_result == -EDEADLK && (gate & TID_MASK) == gettid_(),
	       "a signal handler closing the gate its own thread holds: -EDEADLK, the gate "
	       "still ours (%d)",
	       (int)in_handler_result);
	rsk_gate_open(&gate);
	alarm(0);
}

/* ---- 3. waiters sleep, and are woken ---- */

#define GATE_WAITERS 0x40000000 /* src/progress/gate.c's waiters bit */

struct holder {
	int ms;		  /* how long to hold (at least) */
	int until_waiter; /* and until a waiter sleeps on the gate */
	int exit_holding; /* leave without opening */
	int cpu;	  /* pin (-1: no) */
	int busy;	  /* hold while computing rather than sleeping */
	intptr_t *word;	  /* the gate to hold (NULL: the test's own) */
	volatile int closed;
	double opened_at;
	int tid;
};

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *hold(void *arg)
{
	struct holder *h = arg;

	if (h->cpu >= 0)
		pin(h->cpu);
	if (h->busy) { /* not the creator's SCHED_FIFO */
		struct sched_param other = { .sched_priority = 0 };
		pthread_setschedparam(pthread_self(), SCHED_OTHER, &other);
	}
	intptr_t *g = h->word != NULL ? h->word : &gate;

	h->tid = gettid_();
	if (rsk_gate_close(g, RSK_INDEX_CPU, 0) != 0)
		return NULL;
	__atomic_store_n(&h->closed, 1, __ATOMIC_RELEASE);
	if (h->busy) {
		double t0 = thread_cpu();
		while (thread_cpu() - t0 < h->ms * 1e-3)
			;
	} else {
		sleep_ms(h->ms);
	}
	/* A waiter that sleeps sets the waiters bit; one that spins never. */
	while (h->until_waiter && !(__atomic_load_n(g, __ATOMIC_RELAXED) & GATE_WAITERS)) {
		if (h->busy)
			sched_yield();
		else
			sleep_ms(1);
	}
	if (h->exit_holding)
		return NULL;
	h->opened_at = now();
	rsk_gate_open(g);
	return NULL;
}

static pthread_t start_holder(struct holder *h)
{
	pthread_t t;

	h->closed = 0;
	pthread_create(&t, NULL, hold, h);
	while (!__atomic_load_n(&h->closed, __ATOMIC_ACQUIRE))
		sleep_ms(1);
	return t;
}

static void waiting(void)
{
	struct holder h = { .ms = 50, .until_waiter = 1, .cpu = -1 };
	pthread_t t;
	double cpu0, late[3];
	int r, ok = 0;

	arm("a waiter sleeps", 20);
	for (int i = 0; i < 3; i++) {
		t = start_holder(&h);
		cpu0 = thread_cpu();
		r = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);
		late[i] = now() - h.opened_at;
		if (i == 0)
			cpu0 = thread_cpu() - cpu0;
		if (r == 0)
			rsk_gate_open(&gate);
		pthread_join(t, NULL);
		ok += r == 0;
	}
	tap_ok(ok == 3,
	       "a waiter sleeps on the gate's futex (the holder saw its waiters bit) and the open "
	       "wakes it (3 of 3; %.1f ms of CPU while waiting; woken %.1f, %.1f, %.1f ms after "
	       "the open)",
	       cpu0 * 1e3, late[0] * 1e3, late[1] * 1e3, late[2] * 1e3);
	alarm(0);
}

/* ---- 4. a holder that no longer exists ---- */

static void dead_holder(void)
{
	struct holder h = { .ms = 0, .exit_holding = 1, .cpu = -1 };
	pthread_t t;
	double t0;
	int r1, r2;
	const char *err;

	arm("a holder that exited", 20);
	t = start_holder(&h);
	pthread_join(t, NULL); /* gone, the gate closed */
	capture_start();
	t0 = now();
	r1 = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);
	double took = now() - t0;
	r2 = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);
	err = capture_end();
	char tid[32];
	snprintf(tid, sizeof(tid), "thread %d,", h.tid);
	tap_ok(r1 == -EOWNERDEAD, "a gate whose holder exited: -EOWNERDEAD (%d, after %.0f ms)", r1,
	       took * 1e3);
	tap_ok(r2 == -EOWNERDEAD && count_lines(err, "no longer exists") == 1 &&
		       strstr(err, tid) != NULL && strstr(err, "part 0") != NULL,
	       "again -EOWNERDEAD, reported once on stderr: \"%.*s\"",
	       (int)strcspn(err, "\n"), err);
	/* Recovery: whoever repaired the part may open it. */
	rsk_gate_open(&gate);
	r1 = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);
	tap_ok(r1 == 0, "opened by another thread, the gate works again");
	if (r1 == 0)
		rsk_gate_open(&gate);
	alarm(0);
}

/* ---- 5. RSEQKIT_GATE_WARN_MS, in a child ---- */

static int warn_child(void)
{
	struct holder h = { .ms = 300, .cpu = -1 };
	pthread_t t = start_holder(&h);
	int r = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);

	if (r == 0)
		rsk_gate_open(&gate);
	pthread_join(t, NULL);
	printf("gate=%p tid=%d r=%d\n", (void *)&gate, h.tid, r);
	return 0;
}

/* The same with a structure's lock: a counter's part 0 exchange lock (a
 * gate without a fence), held by another thread while this one's
 * rsk_counter_exchange() waits for it. */
static int warn_counter_child(void)
{
	struct rsk_counter *c;
	struct holder h = { .ms = 300, .cpu = -1 };
	intptr_t old = 0;
	pthread_t t;
	int r;

	if (rsk_counter_create(&c, RSK_INDEX_CPU) != 0)
		return 1;
	h.word = &c->part[0].lock;
	t = start_holder(&h);
	r = rsk_counter_exchange(c, 0, 5, &old);
	pthread_join(t, NULL);
	printf("gate=%p tid=%d r=%d obj=%p\n", (void *)&c->part[0].lock, h.tid, r, (void *)c);
	return rsk_counter_destroy(c);
}

/* Run this program with `arg` and RSEQKIT_GATE_WARN_MS=value; collect
 * its stdout and stderr. */
static int run_child(const char *self, const char *arg, const char *value, char *out,
		     size_t outsz, char *err, size_t errsz)
{
	int po[2], pe[2], status = -1;
	pid_t pid;

	if (pipe(po) != 0 || pipe(pe) != 0)
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(po[1], STDOUT_FILENO);
		dup2(pe[1], STDERR_FILENO);
		close(po[0]);
		close(pe[0]);
		setenv("RSEQKIT_GATE_WARN_MS", value, 1);
		alarm(20);
		execl(self, self, arg, (char *)NULL);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	waitpid(pid, &status, 0);
	ssize_t n = read(po[0], out, outsz - 1);
	out[n > 0 ? n : 0] = '\0';
	n = read(pe[0], err, errsz - 1);
	err[n > 0 ? n : 0] = '\0';
	close(po[0]);
	close(pe[0]);
	return status;
}

static void warn_env(void)
{
	const char *self = "/proc/self/exe";
	char out[512], err[2048], want[128];
	void *addr = NULL;
	int tid = 0, r = -1;
	int status = run_child(self, "--warn", "50", out, sizeof(out), err, sizeof(err));

	sscanf(out, "gate=%p tid=%d r=%d", &addr, &tid, &r);
	snprintf(want, sizeof(want), "gate %p of part 0 held by thread %d for more than 50 ms",
		 addr, tid);
	tap_ok(status == 0 && r == 0 && strstr(err, want) != NULL && count_lines(err, want) == 1,
	       "RSEQKIT_GATE_WARN_MS=50, a gate held 300 ms: \"%.*s\"", (int)strcspn(err, "\n"),
	       err);
	status = run_child(self, "--warn", "abc", out, sizeof(out), err, sizeof(err));
	tap_ok(status == 0 && strstr(err, "RSEQKIT_GATE_WARN_MS=abc ignored") != NULL,
	       "RSEQKIT_GATE_WARN_MS=abc: \"%.*s\"", (int)strcspn(err, "\n"), err);
	/* A structure's lock (the counter's exchange lock, a gate without
	 * a fence): the report names the structure. */
	void *obj = NULL;
	status = run_child(self, "--warn-counter", "50", out, sizeof(out), err, sizeof(err));
	sscanf(out, "gate=%p tid=%d r=%d obj=%p", &addr, &tid, &r, &obj);
	snprintf(want, sizeof(want), "rsk_counter %p: lock %p held by thread %d", obj, addr, tid);
	tap_ok(status == 0 && r == 0 && strstr(err, want) != NULL,
	       "RSEQKIT_GATE_WARN_MS=50, a counter's exchange lock held 300 ms: \"%.*s\"",
	       (int)strcspn(err, "\n"), err);
}

/* ---- 6. a SCHED_FIFO waiter on the holder's CPU ---- */

static void fifo_waiter(void)
{
	struct sched_param prio = { .sched_priority = 1 };
	struct holder h = { .ms = 20, .until_waiter = 1, .cpu = 0, .busy = 1 };
	pthread_t t;
	double t0;
	int r;

	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &prio) != 0) {
		printf("ok %d # SKIP SCHED_FIFO not permitted\n", ++tap_n);
		return;
	}
	arm("a SCHED_FIFO waiter", 30);
	pin(0);
	/* Closed; the holder needs 20 ms of CPU on CPU 0, then a sleeping
	 * waiter: it only runs there while the waiter sleeps. */
	t = start_holder(&h);
	t0 = now();
	r = rsk_gate_close(&gate, RSK_INDEX_CPU, 0);
	double took = now() - t0;
	if (r == 0)
		rsk_gate_open(&gate);
	prio.sched_priority = 0;
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &prio);
	pthread_join(t, NULL);
	tap_ok(r == 0,
	       "a SCHED_FIFO waiter on the CPU of a SCHED_OTHER holder sleeps: the holder ran, saw "
	       "it asleep and opened (%.0f ms)",
	       took * 1e3);
	alarm(0);
}

/* ---- 8. plain-path gates: opened with a plain store ---- */

/* The library's own (src/internal.h): the gates of a process without rseq.
 * The test links the static library, where they are visible. */
int rsk_gate_take_plain_(intptr_t *gate, int idx, const char *what, const void *obj);
void rsk_gate_drop_plain_(intptr_t *gate, int idx, int count);

static intptr_t pgate __attribute__((aligned(128)));

struct plain_waiter {
	volatile int result; /* 1 until the take returns */
	double took_at;
};

static void *plain_take(void *arg)
{
	struct plain_waiter *w = arg;
	int r = rsk_gate_take_plain_(&pgate, 0, "gate.t", NULL);

	w->took_at = now();
	if (r == 0)
		rsk_gate_drop_plain_(&pgate, 0, 0);
	__atomic_store_n(&w->result, r, __ATOMIC_RELEASE);
	return NULL;
}

/* Take pgate, start a waiter and wait until it sleeps on the futex (the
 * waiters bit).  If `lose` the waiters bit is cleared again - what a
 * waiter's bit set between the holder's load and its plain store comes
 * to: no wake-up.  Then open; returns 1 if the waiter got the gate. */
static int plain_round(int lose, double *late)
{
	struct plain_waiter w = { .result = 1 };
	pthread_t t;
	double opened;
	intptr_t v;

	if (rsk_gate_take_plain_(&pgate, 0, "gate.t", NULL) != 0)
		return 0;
	pthread_create(&t, NULL, plain_take, &w);
	while (!((v = __atomic_load_n(&pgate, __ATOMIC_RELAXED)) & GATE_WAITERS))
		sleep_ms(1);
	sleep_ms(20); /* from setting the bit into the futex */
	if (lose)
		__atomic_and_fetch(&pgate, ~(intptr_t)GATE_WAITERS, __ATOMIC_RELAXED);
	opened = now();
	rsk_gate_drop_plain_(&pgate, 0, 0);
	pthread_join(t, NULL);
	*late = w.took_at - opened;
	return w.result == 0 && (v & TID_MASK) == gettid_();
}

static void plain_gates(void)
{
	double late;
	int me = gettid_(), r;

	arm("plain gates", 20);
	r = rsk_gate_take_plain_(&pgate, 0, "gate.t", NULL);
	tap_ok(r == 0 && (pgate & TID_MASK) == me,
	       "a plain take holds the thread's id (%#lx, tid %d)", (long)pgate, me);
	tap_ok(rsk_gate_take_plain_(&pgate, 0, "gate.t", NULL) == -EDEADLK,
	       "taking it again in the same thread: -EDEADLK");
	rsk_gate_drop_plain_(&pgate, 0, 0);
	tap_ok(pgate == 0, "the plain drop opens it");
	r = rsk_gate_close(&pgate, RSK_INDEX_CPU, 0);
	tap_ok(r == 0, "and a full close takes it afterwards (%d)", r);
	if (r == 0)
		rsk_gate_open(&pgate);

	tap_ok(plain_round(0, &late), "a waiter asleep on a plain gate is woken by the drop");
	tap_diag("woken %.1f ms after the drop", late * 1e3);
	/* The negative of the plain store: without the bit, no wake-up; the
	 * waiter must still get the gate (a timeout it sleeps with), not
	 * hang until the watchdog. */
	tap_ok(plain_round(1, &late), "a waiter whose wake-up is lost still takes the gate");
	tap_diag("took it %.1f ms after the drop (it sleeps at most 10 ms at a time)", late * 1e3);
	alarm(0);
}

static const struct {
	const char *name;
	void (*run)(void);
} sections[] = {
	{ "arguments", arguments }, { "owner", owner },	     { "signal", signal_handler },
	{ "waiting", waiting },	    { "dead", dead_holder }, { "warn", warn_env },
	{ "fifo", fifo_waiter },	    { "plain", plain_gates },
};

/* gate.t [SECTION...]: all sections, or the ones named (the plan comes
 * last: a watchdog's bail-out ends the output early). */
int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = watchdog };

	sigaction(SIGALRM, &sa, NULL);
	if (argc > 1 && strcmp(argv[1], "--warn") == 0)
		return warn_child();
	if (argc > 1 && strcmp(argv[1], "--warn-counter") == 0)
		return warn_counter_child();
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		int want = argc == 1;
		for (int a = 1; a < argc; a++)
			want |= strcmp(argv[a], sections[i].name) == 0;
		if (want)
			sections[i].run();
	}
	tap_plan(tap_n);
	return tap_done();
}
