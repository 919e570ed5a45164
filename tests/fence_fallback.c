/* SPDX-License-Identifier: MIT */
/*
 * Fences without membarrier (x86 only: the filters name x86 syscalls).
 * Each case runs in a child that installs a seccomp filter on its main
 * thread - membarrier(2) fails with ENOSYS, and in some cases
 * sched_setaffinity(2) with EINVAL (as for a CPU outside the caller's
 * cpuset) - so rseqkit must fence by migration:
 *   migrate   migration works: fences return 0, the affinity is restored;
 *   blocked   a thread of ours runs on CPU 1 and the caller cannot get
 *             there: rsk_fence_cpu(1), rsk_fence_all(), a gate close and
 *             rsk_stack_push_cpu() on that part fail with -ENXIO (the
 *             documented errno; before: -EINVAL for one CPU, and 0 - CPU 1
 *             silently skipped - for all); the caller's own CPU is fenced;
 *             the counter, which needs no fence, exchanges part 1 and
 *             resets every part all the same;
 *   blocked0  the same with CPUs 0 and 1 swapped, and part 0's exchange
 *             lock held by the caller (as by an exchange its signal
 *             handler interrupted): rsk_counter_reset() goes on past part
 *             0 (-EDEADLK) to reset part 1 and the others;
 *   nobody    no thread of ours may run on CPU 1: fenced, 0;
 *   offline   CPU 1 offline (a bind mount over
 *             /sys/devices/system/cpu/online in a mount namespace: root):
 *             fenced, 0, and rsk_counter_reset() resets every part (before:
 *             -EINVAL, part 1 left as it was).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

#define LD_NR	     BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define RET(v)	     BPF_STMT(BPF_RET | BPF_K, (v))

/* membarrier -> ENOSYS; with deny_affinity, sched_setaffinity -> EINVAL.
 * The calling thread only (no TSYNC): threads made before keep working. */
static int install_filter(int deny_affinity)
{
#if defined(__x86_64__)
	const unsigned arch = AUDIT_ARCH_X86_64, nr_mb = 324, nr_aff = 203;
#else
	const unsigned arch = AUDIT_ARCH_I386, nr_mb = 375, nr_aff = 241;
#endif
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		JEQ(arch, 0, 5),
		LD_NR,
		JEQ(nr_mb, 2, 0),
		JEQ(deny_affinity ? nr_aff : 0xffffffffu, 2, 0),
		RET(SECCOMP_RET_ALLOW),
		RET(SECCOMP_RET_ERRNO | ENOSYS),
		RET(SECCOMP_RET_ERRNO | EINVAL),
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = sizeof(prog) / sizeof(prog[0]), .filter = prog };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0)
		return -1;
	return 0;
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static volatile int stop;

static void *on_cpu1(void *arg)
{
	pin((int)(intptr_t)arg);
	while (!stop)
		usleep(1000);
	return NULL;
}

/* CPU 1 offline, as far as /sys says: a mount namespace of our own. */
static int fake_offline(void)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/rseqkit-online.%d", (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0\n", 2) != 2)
		return -1;
	close(fd);
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount(path, "/sys/devices/system/cpu/online", NULL, MS_BIND, NULL) != 0) {
		unlink(path);
		return -1;
	}
	unlink(path); /* the mount keeps it */
	return 0;
}

enum { MIGRATE, BLOCKED, BLOCKED0, NOBODY, OFFLINE };
static const char *const names[] = { "migrate", "blocked", "blocked0", "nobody", "offline" };
static const int points[] = { 2, 7, 1, 1, 3 };

/* rsk_counter_reset() with part `bad`'s lock failing (-1: none): every
 * other part reset, part `bad` kept, the lock's error returned.  `me` is
 * the caller's thread id (a lock word holding it is the caller's). */
static void reset_past(struct rsk_counter *c, int bad, intptr_t me, const char *n)
{
	int r, left = 1, wrong = 0;

	for (int i = 0; i < c->nr; i++)
		__atomic_store_n(&c->part[i].count, 10 + i, __ATOMIC_RELAXED);
	if (bad >= 0)
		__atomic_store_n(&c->part[bad].lock, me, __ATOMIC_RELAXED);
	r = rsk_counter_reset(c);
	if (bad >= 0)
		__atomic_store_n(&c->part[bad].lock, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < c->nr; i++) {
		intptr_t v = -1;
		rsk_counter_read(c, i, &v);
		if (i == bad)
			left = v == 10 + i;
		else
			wrong += v != 0;
	}
	if (bad >= 0)
		tap_ok(r == -EDEADLK && left && wrong == 0,
		       "%s: rsk_counter_reset() with part %d's exchange lock held by the caller resets "
		       "the %d other part(s), keeps part %d and returns -EDEADLK (%d; part %d %s, %d "
		       "other(s) not reset)",
		       n, bad, c->nr - 1, bad, r, bad, left ? "kept" : "changed", wrong);
	else
		tap_ok(r == 0 && wrong == 0,
		       "%s: rsk_counter_reset() needs no fence: every part reset (%d; %d not reset)", n,
		       r, wrong);
}

static int child(int which)
{
	struct rsk_counter *c = NULL;
	struct rsk_stack *s = NULL;
	struct rsk_stack_node node, *got = NULL;
	intptr_t me = (intptr_t)syscall(SYS_gettid);
	pthread_t t;
	cpu_set_t before, after;
	intptr_t old = 0, v0 = -1, v1 = -1;
	const char *n = names[which];
	int r, r2;

	rsk_counter_create(&c, RSK_INDEX_CPU);
	rsk_stack_create(&s, RSK_INDEX_CPU);
	if (which == BLOCKED || which == BLOCKED0)
		pthread_create(&t, NULL, on_cpu1, (void *)(intptr_t)(which == BLOCKED ? 1 : 0));
	pin(which == BLOCKED0 ? 1 : 0);
	if (which == OFFLINE && fake_offline() != 0) {
		for (int i = 0; i < points[which]; i++)
			printf("ok %d # SKIP %s: no mount namespace (needs root)\n", ++tap_n, n);
		return 0;
	}
	if (which == BLOCKED || which == BLOCKED0)
		usleep(20000); /* it is on its CPU now */
	if (install_filter(which != MIGRATE) != 0) {
		for (int i = 0; i < points[which]; i++)
			printf("ok %d # SKIP %s: seccomp filter refused\n", ++tap_n, n);
		return 0;
	}
	switch (which) {
	case MIGRATE:
		sched_getaffinity(0, sizeof(before), &before);
		r = rsk_fence_cpu(1);
		r2 = rsk_fence_all();
		sched_getaffinity(0, sizeof(after), &after);
		tap_ok(r == 0 && r2 == 0, "%s: fences by migration succeed (%d, %d)", n, r, r2);
		tap_ok(CPU_EQUAL(&before, &after), "%s: and restore the caller's affinity", n);
		break;
	case BLOCKED: {
		intptr_t gate = 0;
		r = rsk_fence_cpu(0);
		tap_ok(r == 0, "%s: the caller's own CPU is fenced without migrating (%d)", n, r);
		r = rsk_fence_cpu(1);
		tap_ok(r == -ENXIO, "%s: CPU 1, where a thread of ours runs, unreachable: -ENXIO (%d)",
		       n, r);
		r = rsk_fence_all();
		tap_ok(r == -ENXIO, "%s: rsk_fence_all() does not skip it silently: -ENXIO (%d)", n,
		       r);
		r = rsk_gate_close(&gate, RSK_INDEX_CPU, 1);
		tap_ok(r == -ENXIO && gate == 0, "%s: a gate of part 1: -ENXIO, left open (%d)", n, r);
		r = rsk_stack_push_cpu(s, 1, &node);
		r2 = rsk_stack_pop_all_cpu(s, 1, &got);
		tap_ok(r == -ENXIO && got == NULL,
		       "%s: rsk_stack_push_cpu() on part 1: -ENXIO, nothing pushed, as documented (%d)", n,
		       r);
		__atomic_store_n(&c->part[1].count, 7, __ATOMIC_RELAXED);
		r = rsk_counter_exchange(c, 1, 2, &old);
		rsk_counter_read(c, 1, &v1);
		tap_ok(r == 0 && old == 7 && v1 == 2,
		       "%s: rsk_counter_exchange() on part 1 needs no fence: 0, old 7, now 2 (%d, %ld, %ld)",
		       n, r, (long)old, (long)v1);
		reset_past(c, -1, me, n);
		stop = 1;
		pthread_join(t, NULL);
		break;
	}
	case BLOCKED0:
		reset_past(c, 0, me, n);
		stop = 1;
		pthread_join(t, NULL);
		break;
	case NOBODY:
		r = rsk_fence_cpu(1);
		tap_ok(r == 0, "%s: no thread of ours may run on CPU 1: fenced (%d)", n, r);
		break;
	case OFFLINE:
		r = rsk_fence_cpu(1);
		tap_ok(r == 0, "%s: CPU 1 offline: fenced (%d)", n, r);
		r2 = rsk_fence_all();
		tap_ok(r2 == 0, "%s: rsk_fence_all() (%d)", n, r2);
		/* Part 1 has a count: written by a "thread that ran there". */
		__atomic_store_n(&c->part[1].count, 5, __ATOMIC_RELAXED);
		__atomic_store_n(&c->part[0].count, 3, __ATOMIC_RELAXED);
		r = rsk_counter_reset(c);
		rsk_counter_read(c, 0, &v0);
		rsk_counter_read(c, 1, &v1);
		tap_ok(r == 0 && v0 == 0 && v1 == 0, "%s: rsk_counter_reset() resets every part (%d: %ld %ld)",
		       n, r, (long)v0, (long)v1);
		break;
	}
	return tap_done();
}

int main(void)
{
	struct rsk_status st;
	int total = 0;

	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
		total += points[i];
	rsk_status(&st);
#if !defined(__x86_64__) && !defined(__i386__)
	tap_plan_skip_all("the seccomp filters name x86 system calls");
#endif
	if (!st.available)
		tap_plan_skip_all("rseq unavailable: fences have nothing to wait for");
	if (st.possible_cpus < 2)
		tap_plan_skip_all("needs two CPUs");
	tap_plan(total);
	for (int which = MIGRATE; which <= OFFLINE; which++) {
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			alarm(30);
			_exit(child(which));
		}
		waitpid(pid, &status, 0);
		tap_n += points[which];
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			tap_failed++;
			if (!WIFEXITED(status))
				tap_diag("%s: child killed by signal %d", names[which], WTERMSIG(status));
		}
	}
	return tap_done();
}
