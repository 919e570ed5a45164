/* SPDX-License-Identifier: MIT */
/*
 * Multi-threaded stress of rseqkit's malloc, every block's contents
 * checked (linked with librseqkit-malloc.so; tests/malloc_stress.sh runs
 * it with and without rseq, in both index modes, and against the
 * allocator built on sections that never arm - which it must catch):
 *   - producer/consumer: blocks allocated on one thread, checked and freed
 *     on another;
 *   - random sizes (16 B to 300 KiB), lifetimes and reallocs on each of
 *     THREADS threads (64 by default: more than the CPUs);
 *   - thread churn: short-lived threads that allocate, hand over, exit,
 *     while fork() runs (thread exit against the fork handlers);
 *   - large blocks (260 KiB to 1.3 MiB) on up to 8 threads, through the
 *     large-block cache, half of the threads moving theirs with realloc;
 *   - fork() while the others allocate: the child checks blocks it
 *     inherited, allocates and frees, and exits;
 *   - signal handlers that allocate, check and free on top of their own
 *     thread's malloc and free (and keep a block from one signal to the
 *     next);
 * then: every block freed and the caches drained, the bytes in use are
 * back where they started (nothing lost).
 *
 * A block of n bytes holds its tag (a number no other block has at the
 * same time) in its first word, n in its second, and bytes derived from
 * the tag after: two owners of one block, or a block freed behind its
 * owner's back and reused, show as a wrong tag, size or byte.
 *
 * A fork child that does not end within a minute, and the whole test not
 * ending within its watchdog's time, fail with a report of where every
 * thread is (where.h) instead of hanging.
 *
 * Usage: malloc_stress.t [-H] [-t threads] [-n iterations per thread]
 *                        [-w watchdog seconds, 240 by default]
 * (-H: small blocks in a tight loop, 10 x iterations)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>
#include <malloc.h>
#include <rseqkit/malloc.h>
#include "tap.h"
#include "where.h"

static int nthreads = 64;
static long iters = 20000;
static uint64_t next_tag = 1;	 /* atomic */
static long errors;		 /* atomic */
static volatile int stop_forks;

struct hdr {
	uint64_t tag;
	uint64_t size;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static size_t pick_size(uint64_t *s)
{
	uint64_t r = rnd(s) % 100;

	if (r < 70)
		return 16 + rnd(s) % 240;
	if (r < 95)
		return 16 + rnd(s) % 8192;
	return 16 + rnd(s) % (300 << 10);
}

static void report(const char *what, const void *p, const struct hdr *h, size_t n)
{
	if (__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED) <= 10)
		fprintf(stderr, "malloc_stress: %s: block %p (tag %llu size %llu, expected size %zu)\n", what, p,
			(unsigned long long)h->tag, (unsigned long long)h->size, n);
}

/* Fill a block of n >= 16 bytes (check: the bytes after the header up to
 * 256 and the last 64, enough to see an overlap, cheap for big blocks). */
static void *make(size_t n)
{
	struct hdr *h = malloc(n);
	unsigned char *b = (unsigned char *)h;

	if (h == NULL) {
		report("malloc returned NULL", NULL, &(struct hdr){ 0, 0 }, n);
		return NULL;
	}
	h->tag = __atomic_fetch_add(&next_tag, 1, __ATOMIC_RELAXED);
	h->size = n;
	for (size_t i = sizeof(*h); i < n && i < 256; i++)
		b[i] = (unsigned char)(h->tag + i);
	for (size_t i = n > 320 ? n - 64 : n; i < n; i++)
		b[i] = (unsigned char)(h->tag + i);
	return h;
}

static int check(const void *p, size_t n)
{
	const struct hdr *h = p;
	const unsigned char *b = p;

	if (h->size != n) {
		report("size word changed (two owners?)", p, h, n);
		return 0;
	}
	for (size_t i = sizeof(*h); i < n && i < 256; i++)
		if (b[i] != (unsigned char)(h->tag + i)) {
			report("contents changed (two owners?)", p, h, n);
			return 0;
		}
	for (size_t i = n > 320 ? n - 64 : n; i < n; i++)
		if (b[i] != (unsigned char)(h->tag + i)) {
			report("tail changed (two owners?)", p, h, n);
			return 0;
		}
	return 1;
}

/* ---- the hand-over queue ---- */

#define QCAP 4096
static void *queue[QCAP];
static size_t qhead, qtail; /* under qlock */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static long handed, taken;

static int put(void *p)
{
	int ok = 0;

	pthread_mutex_lock(&qlock);
	if (qtail - qhead < QCAP) {
		queue[qtail++ % QCAP] = p;
		handed++;
		ok = 1;
	}
	pthread_mutex_unlock(&qlock);
	return ok;
}

static void *take(void)
{
	void *p = NULL;

	pthread_mutex_lock(&qlock);
	if (qtail != qhead) {
		p = queue[qhead++ % QCAP];
		taken++;
	}
	pthread_mutex_unlock(&qlock);
	return p;
}

/* Check and free one handed-over block, if any. */
static int consume(void)
{
	struct hdr *h = take();

	if (h == NULL)
		return 0;
	check(h, h->size);
	free(h);
	return 1;
}

/* ---- workers ---- */

#define SLOTS 48

static void *worker(void *arg)
{
	uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	void *slot[SLOTS] = { 0 };
	size_t size[SLOTS] = { 0 };

	for (long it = 0; it < iters; it++) {
		int k = (int)(rnd(&s) % SLOTS);
		uint64_t op = rnd(&s) % 100;

		if (slot[k] == NULL) {
			size[k] = pick_size(&s);
			slot[k] = make(size[k]);
			continue;
		}
		if (!check(slot[k], size[k])) {
			slot[k] = NULL; /* leave it: it is someone else's now */
			continue;
		}
		if (op < 40) {
			free(slot[k]);
			slot[k] = NULL;
		} else if (op < 60) { /* realloc: the kept prefix must survive */
			size_t n = pick_size(&s), keep = n < size[k] ? n : size[k];
			struct hdr *h = realloc(slot[k], n);
			unsigned char *b = (unsigned char *)h;
			if (h == NULL) {
				report("realloc returned NULL", slot[k], slot[k], n);
				continue;
			}
			for (size_t i = sizeof(*h); i < keep && i < 256; i++)
				if (b[i] != (unsigned char)(h->tag + i)) {
					report("realloc lost contents", h, h, n);
					break;
				}
			free(h);
			slot[k] = make(n);
			size[k] = n;
		} else if (op < 85) { /* producer: another thread frees it */
			if (put(slot[k]))
				slot[k] = NULL;
		} else { /* consumer */
			consume();
		}
	}
	for (int k = 0; k < SLOTS; k++)
		if (slot[k] != NULL && check(slot[k], size[k]))
			free(slot[k]);
	return NULL;
}

/* -H: small blocks only, in a tight loop (the most time inside the
 * caches' sections: the negative control's phase). */
static int hot;

static void *hot_worker(void *arg)
{
	uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	void *ring[8] = { 0 };
	size_t size[8] = { 0 };

	for (long it = 0; it < iters * 10; it++) {
		int k = (int)(it & 7);
		if (ring[k] != NULL) {
			if (!check(ring[k], size[k])) {
				ring[k] = NULL;
				continue;
			}
			if (it % 5 == 0 && put(ring[k])) {
				ring[k] = NULL;
			} else {
				free(ring[k]);
			}
		}
		size[k] = 16 + rnd(&s) % 48;
		ring[k] = make(size[k]);
		if (it % 5 == 2)
			consume();
	}
	for (int k = 0; k < 8; k++)
		if (ring[k] != NULL && check(ring[k], size[k]))
			free(ring[k]);
	return NULL;
}

/* A short life: allocate, hand half over, free the rest, exit. */
static void *churner(void *arg)
{
	uint64_t s = (uintptr_t)arg + 77;
	void *mine[40];

	for (int i = 0; i < 40; i++)
		mine[i] = make(pick_size(&s) % 2000 + 16);
	for (int i = 0; i < 40; i++) {
		struct hdr *h = mine[i];
		if (!check(h, h->size))
			continue;
		if (i % 2 == 0 && put(h))
			continue;
		free(h);
	}
	consume();
	return NULL;
}

/* The forking thread: while the workers run, fork; the child checks
 * blocks it inherited and allocates on its own. */
static int forks_done, forks_ok;
static volatile pid_t fork_child_pid; /* the child being waited for, or 0 */
#define FORK_WAIT_S 60

static int child(void *inherited, int rounds)
{
	uint64_t s = 99;
	void *v[200];

	alarm(30);
	if (inherited != NULL && !check(inherited, ((struct hdr *)inherited)->size))
		return 2;
	for (int round = 0; round < rounds; round++) {
		for (int i = 0; i < 200; i++)
			v[i] = make(pick_size(&s));
		for (int i = 0; i < 200; i++) {
			struct hdr *h = v[i];
			if (!check(h, h->size))
				return 3;
			free(h);
		}
	}
	free(inherited);
	malloc_trim(0);
	return errors != 0 ? 4 : 0;
}

/* How many forks at most, the pause after each, and the child's rounds
 * of 200 blocks. */
struct fork_plan {
	int max;
	useconds_t pause;
	int rounds;
};

static void *forker(void *arg)
{
	const struct fork_plan *plan = arg;

	for (int i = 0; i < plan->max && !stop_forks; i++) {
		void *mine = make(1000);
		int status = 0;
		pid_t pid = fork();
		if (pid == 0)
			_exit(child(mine, plan->rounds));
		if (pid > 0) {
			pid_t got;
			fork_child_pid = pid;
			/* Polled, so that a child that hangs is reported. */
			for (int waited = 0; (got = waitpid(pid, &status, WNOHANG)) == 0 &&
					     waited < FORK_WAIT_S * 100;
			     waited++)
				usleep(10000);
			if (got == 0) {
				fprintf(stderr, "malloc_stress: fork child %d has not ended in %d s\n", (int)pid,
					FORK_WAIT_S);
				where_report(pid);
				kill(pid, SIGKILL);
				got = waitpid(pid, &status, 0);
			}
			fork_child_pid = 0;
			__atomic_add_fetch(&forks_done, 1, __ATOMIC_RELAXED);
			if (got == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
				forks_ok++;
			else
				fprintf(stderr, "malloc_stress: fork child status %d\n", status);
		}
		free(mine);
		usleep(plan->pause);
	}
	return NULL;
}

/* ---- signal handlers that allocate on top of their own thread ---- */

static __thread void *sig_keep;
static __thread size_t sig_keep_n;
static long sig_count;		       /* atomic */
static int sig_done, sig_release;      /* atomic */
static int sig_phase;

static void on_usr1(int sig)
{
	int saved = errno;
	uint64_t s = (uint64_t)__atomic_add_fetch(&sig_count, 1, __ATOMIC_RELAXED) * 0x9e3779b97f4a7c15ull + 1;
	void *v[4];

	(void)sig;
	for (int i = 0; i < 4; i++)
		v[i] = make(16 + rnd(&s) % 1100);
	for (int i = 0; i < 4; i++)
		if (v[i] != NULL && check(v[i], ((struct hdr *)v[i])->size))
			free(v[i]);
	if (sig_keep != NULL && check(sig_keep, sig_keep_n))
		free(sig_keep);
	sig_keep_n = 16 + rnd(&s) % 600;
	sig_keep = make(sig_keep_n);
	errno = saved;
}

/* Small blocks (the thread caches' classes) in a loop that the signals
 * interrupt; then the handler's kept block goes, and the thread waits
 * until no more signals come. */
static void *sig_worker(void *arg)
{
	uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 3;
	void *ring[8] = { 0 };
	size_t size[8] = { 0 };
	sigset_t set;

	for (long it = 0; it < iters * 20; it++) {
		int k = (int)(it & 7);
		if (ring[k] != NULL && check(ring[k], size[k]))
			free(ring[k]);
		size[k] = 16 + rnd(&s) % 1100;
		ring[k] = make(size[k]);
	}
	for (int k = 0; k < 8; k++)
		if (ring[k] != NULL && check(ring[k], size[k]))
			free(ring[k]);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (sig_keep != NULL && check(sig_keep, sig_keep_n))
		free(sig_keep);
	__atomic_add_fetch(&sig_done, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sig_release, __ATOMIC_ACQUIRE))
		usleep(1000);
	return NULL;
}

/* Large blocks only (above the small classes, 260 KiB to 1.3 MiB: the
 * large-block cache's sizes), each thread keeping a few and freeing them
 * in random order, so that the threads take each other's freed blocks
 * out of the cache at once; every second thread reallocates its blocks
 * instead (mremap, which moves them), so that the others map new blocks
 * where moved ones were. */
static void *large_worker(void *arg)
{
	uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 7;
	void *keep[4] = { 0 };
	size_t len[4] = { 0 };
	int mover = (uintptr_t)arg % 2 == 0;

	for (long i = 0; i < iters / 10; i++) {
		int k = (int)(rnd(&s) % 4);
		size_t n = (260 << 10) + rnd(&s) % (1 << 20);

		if (keep[k] != NULL && mover && check(keep[k], len[k])) {
			struct hdr *h = realloc(keep[k], n);
			unsigned char *b = (unsigned char *)h;
			if (h == NULL) {
				report("realloc of a large block returned NULL", keep[k], keep[k], n);
				keep[k] = NULL;
				continue;
			}
			for (size_t j = sizeof(*h); j < 256; j++)
				if (b[j] != (unsigned char)(h->tag + j)) {
					report("realloc of a large block lost contents", h, h, n);
					break;
				}
			/* The same tag, the new size and its tail. */
			h->size = n;
			for (size_t j = n - 64; j < n; j++)
				b[j] = (unsigned char)(h->tag + j);
			keep[k] = h;
			len[k] = n;
			continue;
		}
		if (keep[k] != NULL) {
			check(keep[k], len[k]);
			free(keep[k]);
		}
		len[k] = n;
		keep[k] = make(len[k]);
	}
	for (int k = 0; k < 4; k++)
		if (keep[k] != NULL) {
			check(keep[k], len[k]);
			free(keep[k]);
		}
	return NULL;
}

static unsigned watchdog_s = 240;

/* The watchdog: where everything is, then a failure. */
static void on_alarm(int sig)
{
	static const char m[] = "malloc_stress: not done within the watchdog's time (-w)\n";
	pid_t c = fork_child_pid;

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(3);
	where_report(getpid());
	if (c > 0) {
		where_report(c);
		kill(c, SIGKILL);
	}
	_exit(3);
}

int main(int argc, char **argv)
{
	struct rsk_malloc_stats st0, st1;
	pthread_t *t, ft;
	int opt;

	while ((opt = getopt(argc, argv, "Ht:n:w:")) != -1) {
		if (opt == 'H')
			hot = 1;
		else if (opt == 't')
			nthreads = atoi(optarg);
		else if (opt == 'n')
			iters = atol(optarg);
		else if (opt == 'w')
			watchdog_s = (unsigned)atoi(optarg);
		else
			return 2;
	}
	/* Check mode's debug pools refuse a handler that interrupts them
	 * (rsk_pool_create(3)): no signal phase there.  (rseqkit-malloc(7)
	 * promises programs nothing in handlers; the phase checks that the
	 * caches stay exact anyway.) */
	{
		const char *cm = getenv("RSEQKIT_MALLOC_CHECK");
		sig_phase = cm == NULL || (strcmp(cm, "1") && strcasecmp(cm, "yes") &&
					   strcasecmp(cm, "true") && strcasecmp(cm, "on"));
	}
	where_install();
	signal(SIGALRM, on_alarm);
	alarm(watchdog_s);
	tap_plan(sig_phase ? 7 : 6);
	malloc_trim(0);
	rsk_malloc_stats(&st0, -1);
	t = calloc((size_t)nthreads, sizeof(*t));

	/* workers (producers and consumers at once), and forks meanwhile */
	pthread_create(&ft, NULL, forker, &(struct fork_plan){ 8, 20000, 20 });
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, hot ? hot_worker : worker, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	stop_forks = 1;
	pthread_join(ft, NULL);
	tap_ok(errors == 0, "%d threads x %ld operations (random sizes, reallocs, %ld blocks freed by another "
			    "thread): %ld errors", nthreads, iters, taken, errors);
	tap_ok(forks_done > 0 && forks_ok == forks_done,
	       "fork() while %d threads allocate: %d of %d children checked inherited and new blocks",
	       nthreads, forks_ok, forks_done);

	/* churn, with forks meanwhile: threads exit (their caches go back)
	 * while fork() runs its handlers */
	{
		long before = errors;
		int forks0 = forks_done, ok0 = forks_ok;
		stop_forks = 0;
		pthread_create(&ft, NULL, forker, &(struct fork_plan){ 100000, 0, 1 });
		int wave;
		/* 20 waves, and on until 100 forks came between them. */
		for (wave = 0; wave < 20 || (__atomic_load_n(&forks_done, __ATOMIC_RELAXED) - forks0 < 100 &&
					     wave < 2000);
		     wave++) {
			for (int i = 0; i < nthreads; i++)
				pthread_create(&t[i], NULL, churner, (void *)(uintptr_t)(wave * 1000 + i));
			for (int i = 0; i < nthreads; i++)
				pthread_join(t[i], NULL);
		}
		stop_forks = 1;
		pthread_join(ft, NULL);
		while (consume())
			;
		tap_ok(errors == before && forks_ok - ok0 == forks_done - forks0,
		       "thread churn: %d waves of %d short-lived threads, %d forks meanwhile (%ld errors, "
		       "%d children failed)",
		       wave, nthreads, forks_done - forks0, errors - before, forks_done - forks0 - (forks_ok - ok0));
	}
	/* large blocks, on at most 8 threads (each maps up to 5 MiB) */
	{
		long before = errors;
		int n = nthreads < 8 ? nthreads : 8;
		for (int i = 0; i < n; i++)
			pthread_create(&t[i], NULL, large_worker, (void *)(uintptr_t)(i + 1));
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		tap_ok(errors == before, "large blocks: %d threads x %ld blocks of 260 KiB to 1.3 MiB (%ld errors)",
		       n, iters / 10, errors - before);
	}
	/* signals: handlers allocate on top of malloc and free */
	if (!sig_phase) {
		tap_diag("no signal phase in check mode (its debug pools refuse handlers)");
	} else {
		long before = errors;
		int n = nthreads < 8 ? nthreads : 8;
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
		for (int i = 0; i < n; i++)
			pthread_create(&t[i], NULL, sig_worker, (void *)(uintptr_t)(i + 1));
		for (unsigned k = 0; __atomic_load_n(&sig_done, __ATOMIC_ACQUIRE) < n; k++) {
			pthread_kill(t[k % (unsigned)n], SIGUSR1);
		}
		__atomic_store_n(&sig_release, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		tap_ok(errors == before && sig_count > 0,
		       "signals: %ld handlers allocated and freed on top of %d threads' malloc and free (%ld errors)",
		       sig_count, n, errors - before);
	}
	free(t);
	tap_ok(handed == taken, "every handed-over block freed (%ld of %ld)", taken, handed);

	malloc_trim(0);
	rsk_malloc_stats(&st1, -1);
	tap_ok(st1.in_use <= st0.in_use + (64 << 10) && st1.large_blocks <= st0.large_blocks,
	       "nothing lost: bytes in use %zu before, %zu after (large blocks %zu, %zu)", st0.in_use, st1.in_use,
	       st0.large_blocks, st1.large_blocks);
	return tap_done();
}
