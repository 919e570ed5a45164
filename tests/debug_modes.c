/* SPDX-License-Identifier: MIT */
/*
 * RSEQKIT_DEBUG=spinlock (rseqkit(7)): an unmodified program's spinlocks
 * check their holder.  The variable is read once, when the library
 * initialises (its constructor), so the program runs itself again with it
 * set.  Checks:
 *   - a thread that locks again while it holds a lock of the structure
 *     gets -EDEADLK (not a hang: a 20 s alarm reports one), with a line on
 *     stderr naming the lock;
 *   - a double unlock, and an unlock by a thread that does not hold the
 *     lock, return -EPERM with a line on stderr, and leave the lock as it
 *     was (held by its holder, who then unlocks it);
 *   - ordinary use from two threads still locks and unlocks.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

static char hung[160];

static void watchdog(int signo)
{
	ssize_t w = write(STDOUT_FILENO, hung, strlen(hung));

	(void)signo;
	(void)w;
	_exit(1);
}

static void arm(const char *what)
{
	snprintf(hung, sizeof(hung), "not ok %d - %s: hung (the 20 s alarm)\n", tap_n + 1, what);
	alarm(20);
}

/* Run fn(l) with stderr caught into msg; fn's return. */
static int caught(int (*fn)(struct rsk_spinlock *, int), struct rsk_spinlock *l, int arg,
		  char *msg, size_t len)
{
	int fds[2], saved = dup(2), ret;
	ssize_t n;

	msg[0] = '\0';
	if (saved < 0 || pipe(fds) != 0)
		return -1000;
	dup2(fds[1], 2);
	ret = fn(l, arg);
	dup2(saved, 2);
	close(saved);
	close(fds[1]);
	n = read(fds[0], msg, len - 1);
	while (n > 0 && msg[n - 1] == '\n') /* one TAP line */
		n--;
	msg[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	return ret;
}

static int do_lock(struct rsk_spinlock *l, int unused)
{
	(void)unused;
	return rsk_spinlock_lock(l);
}

static int do_unlock(struct rsk_spinlock *l, int idx)
{
	return rsk_spinlock_unlock(l, idx);
}

static struct rsk_spinlock *shared;
static volatile int holder_idx = -1, holder_go;

static void *holder(void *arg)
{
	(void)arg;
	holder_idx = rsk_spinlock_lock(shared);
	while (!__atomic_load_n(&holder_go, __ATOMIC_ACQUIRE))
		usleep(1000);
	return (void *)(intptr_t)rsk_spinlock_unlock(shared, holder_idx);
}

int main(int argc, char **argv)
{
	struct rsk_spinlock *l = NULL;
	char msg[512], name[64];
	pthread_t t;
	void *tr = NULL;
	int idx, r;

	if (argc < 2 || strcmp(argv[1], "--child") != 0) {
		setenv("RSEQKIT_DEBUG", "spinlock", 1);
		execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
		tap_plan_skip_all("cannot run itself again with RSEQKIT_DEBUG=spinlock");
		return 0;
	}
	tap_plan(7);
	signal(SIGALRM, watchdog);
	tap_ok(rsk_spinlock_create(&l, RSK_INDEX_CPU) == 0, "spinlock created (RSEQKIT_DEBUG=%s)",
	       getenv("RSEQKIT_DEBUG"));
	snprintf(name, sizeof(name), "spinlock %p", (void *)l);

	idx = rsk_spinlock_lock(l);
	arm("a second lock by the holder");
	r = caught(do_lock, l, 0, msg, sizeof(msg));
	alarm(0);
	tap_ok(idx >= 0 && r == -EDEADLK && strstr(msg, name) != NULL,
	       "a second lock by the holder: -EDEADLK, reported (%d, %d: %.100s)", idx, r, msg);

	r = rsk_spinlock_unlock(l, idx);
	tap_ok(r == 0, "the holder's unlock: 0 (%d)", r);
	r = caught(do_unlock, l, idx, msg, sizeof(msg));
	tap_ok(r == -EPERM && strstr(msg, name) != NULL && strstr(msg, "double unlock") != NULL,
	       "a double unlock: -EPERM, reported (%d: %.100s)", r, msg);

	/* Another thread holds a lock: this thread's unlock of it is
	 * refused and the lock stays held. */
	shared = l;
	if (pthread_create(&t, NULL, holder, NULL) != 0) {
		tap_ok(0, "cannot create a thread");
		tap_ok(0, "cannot create a thread");
		tap_ok(0, "cannot create a thread");
		return tap_done();
	}
	arm("the other thread's lock");
	while (__atomic_load_n(&holder_idx, __ATOMIC_ACQUIRE) < 0)
		usleep(1000);
	alarm(0);
	r = caught(do_unlock, l, holder_idx, msg, sizeof(msg));
	tap_ok(r == -EPERM && strstr(msg, name) != NULL &&
		       __atomic_load_n(&l->part[holder_idx].locked, __ATOMIC_RELAXED) == 1,
	       "an unlock by a thread that does not hold the lock: -EPERM, reported, still held "
	       "(%d: %.100s)",
	       r, msg);
	__atomic_store_n(&holder_go, 1, __ATOMIC_RELEASE);
	pthread_join(t, &tr);
	tap_ok((intptr_t)tr == 0, "the holder's own unlock: 0 (%d)", (int)(intptr_t)tr);

	arm("lock and unlock after the checks");
	idx = rsk_spinlock_lock(l);
	r = idx >= 0 ? rsk_spinlock_unlock(l, idx) : idx;
	alarm(0);
	tap_ok(idx >= 0 && r == 0, "then a lock and an unlock as usual (%d, %d)", idx, r);
	rsk_spinlock_destroy(l);
	return tap_done();
}
