/* SPDX-License-Identifier: MIT */
/*
 * A thread that holds many gates across fork(): in the child every gate it
 * holds carries the child's thread id, however many there are.  The thread
 * closes GATES gates (more than its holder slot keeps in place, and more
 * than one page of the rest), opens a third of them out of order, and
 * forks.  The child checks each gate: the ones still held carry its own
 * id (a gate with the parent's id belongs to no thread of the child: the
 * next close of another thread reports its holder gone), closing one
 * again is -EDEADLK (its own), and once it opens them another thread of
 * the child closes and opens every one.  The parent then opens the rest
 * and forks once more, holding none.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <rseqkit/rseqkit.h>
#include "tap.h"

#define GATES 600
#define CHILD_TIMEOUT 30

static intptr_t gates[GATES];
static int cpu;

static int released(int i)
{
	return i % 3 == 1;
}

static pid_t tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Another thread of the child: close and open every gate. */
static void *other(void *arg)
{
	int *fails = arg;

	for (int i = 0; i < GATES; i++) {
		int r = rsk_gate_close(&gates[i], RSK_INDEX_CPU, cpu);

		if (r != 0) {
			if ((*fails)++ == 0)
				printf("# gate %d: close from another thread: %d (%s)\n", i, r,
				       strerror(-r));
			continue;
		}
		rsk_gate_open(&gates[i]);
	}
	return NULL;
}

/* The child's checks, as points of its own TAP plan (relayed). */
static int child(void)
{
	pid_t me = tid();
	int wrong = 0, first_wrong = -1, not_open = 0, again, fails = 0;
	pthread_t t;

	alarm(CHILD_TIMEOUT);
	for (int i = 0; i < GATES; i++) {
		intptr_t w = __atomic_load_n(&gates[i], __ATOMIC_RELAXED);

		if (released(i)) {
			not_open += w != 0;
		} else if ((w & RSK_GATE_TID) != me) {
			if (wrong++ == 0)
				first_wrong = i;
		}
	}
	printf("1..4\n");
	printf("%s 1 - child: the %d gates held carry the child's thread id %d (%d do not; the "
	       "first is gate %d, holding %ld)\n",
	       wrong ? "not ok" : "ok", GATES - GATES / 3, (int)me, wrong, first_wrong,
	       first_wrong >= 0 ? (long)(gates[first_wrong] & RSK_GATE_TID) : 0L);
	printf("%s 2 - child: the %d gates opened before the fork are open (%d not)\n",
	       not_open ? "not ok" : "ok", GATES / 3, not_open);
	again = rsk_gate_close(&gates[GATES - 1], RSK_INDEX_CPU, cpu);
	printf("%s 3 - child: closing a gate it holds again: -EDEADLK (%d)\n",
	       again == -EDEADLK ? "ok" : "not ok", again);
	fflush(stdout);
	if (wrong) {
		/* Another thread would find the holder gone, after a sleep
		 * per gate. */
		printf("not ok 4 - child: another thread closes and opens every gate # not run: "
		       "gates with a foreign id\n");
		return 1;
	}
	for (int i = GATES - 1; i >= 0; i--)
		if (!released(i))
			rsk_gate_open(&gates[i]);
	if (pthread_create(&t, NULL, other, &fails) != 0 || pthread_join(t, NULL) != 0)
		fails = -1;
	printf("%s 4 - child: once opened, another thread closes and opens every gate (%d "
	       "failures)\n",
	       fails == 0 ? "ok" : "not ok", fails);
	return wrong || not_open || again != -EDEADLK || fails != 0;
}

/* Fork, run fn() there and relay its points (expect of them). */
static void fork_and_check(const char *what, int (*fn)(void), int expect)
{
	int fds[2], status = 0, nok = 0, notok = 0;
	char line[512];
	FILE *in;
	pid_t pid;

	fflush(stdout);
	if (pipe(fds) != 0 || (pid = fork()) < 0) {
		tap_ok(0, "%s: fork: %s", what, strerror(errno));
		return;
	}
	if (pid == 0) {
		int r;

		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		r = fn();
		fflush(stdout);
		_exit(r);
	}
	close(fds[1]);
	in = fdopen(fds[0], "r");
	while (in != NULL && fgets(line, sizeof(line), in) != NULL) {
		if (strncmp(line, "ok ", 3) == 0)
			nok++;
		else if (strncmp(line, "not ok", 6) == 0)
			notok++;
		printf("#   %s", line);
	}
	if (in != NULL)
		fclose(in);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && notok == 0 && nok == expect,
	       "%s: the child's checks pass (%d ok, %d not ok, %s %d)", what, nok, notok,
	       WIFEXITED(status) ? "exit" : "signal",
	       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static int child_none(void)
{
	int fails = 0;
	pthread_t t;

	alarm(CHILD_TIMEOUT);
	printf("1..1\n");
	if (pthread_create(&t, NULL, other, &fails) != 0 || pthread_join(t, NULL) != 0)
		fails = -1;
	printf("%s 1 - child of a thread holding no gate: another thread closes and opens every "
	       "gate (%d failures)\n",
	       fails == 0 ? "ok" : "not ok", fails);
	return fails != 0;
}

int main(void)
{
	cpu_set_t one;
	int closed = 0, opened = 0;

	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	sched_setaffinity(0, sizeof(one), &one);
	cpu = sched_getcpu();
	if (cpu < 0 || cpu >= rsk_possible_cpus())
		cpu = 0;
	tap_plan(5);
	for (int i = 0; i < GATES; i++)
		closed += rsk_gate_close(&gates[i], RSK_INDEX_CPU, cpu) == 0;
	tap_ok(closed == GATES, "one thread closes %d gates (%d closed)", GATES, closed);
	/* A third opened again, not in the order taken. */
	for (int i = 0; i < GATES; i++)
		if (released(i)) {
			rsk_gate_open(&gates[i]);
			opened += gates[i] == 0;
		}
	tap_ok(opened == GATES / 3, "it opens %d of them out of order (%d open)", GATES / 3, opened);
	fork_and_check("fork holding many gates", child, 4);
	for (int i = 0; i < GATES; i++)
		if (!released(i))
			rsk_gate_open(&gates[i]);
	opened = 0;
	for (int i = 0; i < GATES; i++)
		opened += gates[i] == 0;
	tap_ok(opened == GATES, "the parent opens the rest (%d of %d open)", opened, GATES);
	fork_and_check("fork holding none", child_none, 1);
	return tap_done();
}
