/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the registration and identity tests.
 *
 * Multi-mode driver: a test program re-executes itself in fresh child
 * processes, one per registration mode (libc-owned; library-owned, with
 * glibc's registration turned off, which is rseqkit's own TLS area; the
 * same with RSEQKIT_OWN_AREA=1 said explicitly), and relays each
 * child's TAP as its own points, prefixed with the mode.  A child that is
 * killed, stops early or prints no plan is a failure, never a pass.
 *
 *   prog                      the driver: every mode in turn
 *   prog --child MODE [ARGS]  one mode, plain TAP on stdout
 *
 * Also: TAP skips, CPU pinning and an independent cpulist parser.
 */
#ifndef RSEQKIT_TESTS_HARNESS_H
#define RSEQKIT_TESTS_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <rseqkit/thread.h>
#include <rseqkit/ops.h>
#include "tap.h"

/* Watchdog for every child: a hang becomes a reported failure. */
#define HARNESS_CHILD_TIMEOUT 50

__attribute__((format(printf, 2, 3), unused)) static void tap_skip(const char *why,
								   const char *fmt, ...)
{
	va_list ap;

	printf("ok %d - ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" # SKIP %s\n", why);
	fflush(stdout);
}

/* ---- registration modes ---- */

#define OWNER_ANY (-1) /* "auto": whatever the environment gives */

struct test_mode {
	const char *name;
	int set_env;	      /* 0: keep the environment as it is */
	const char *tunables; /* GLIBC_TUNABLES (NULL: unset) */
	const char *own_area; /* RSEQKIT_OWN_AREA (NULL: unset) */
	int owner;	      /* expected enum rsk_owner, or OWNER_ANY */
	const char *reason;   /* substring expected in rsk_status().reason */
};

static const struct test_mode test_modes[] = {
	{ "libc", 1, NULL, NULL, RSK_OWNER_LIBC, "libc" },
	{ "library", 1, "glibc.pthread.rseq=0", NULL, RSK_OWNER_LIBRARY, "own area" },
	{ "own-area", 1, "glibc.pthread.rseq=0", "1", RSK_OWNER_LIBRARY, "own area" },
	{ "auto", 0, NULL, NULL, OWNER_ANY, NULL },
};
#define N_DRIVER_MODES 3 /* the driver runs the first three */

static __attribute__((unused)) const struct test_mode *find_mode(const char *name)
{
	for (size_t i = 0; i < sizeof(test_modes) / sizeof(test_modes[0]); i++)
		if (strcmp(test_modes[i].name, name) == 0)
			return &test_modes[i];
	return NULL;
}

/* Does the kernel answer rseq(2) here?  The cheap probe: EINVAL = yes. */
static __attribute__((unused)) int kernel_has_rseq(int *err)
{
	long r = syscall(RSK_ARCH_NR_RSEQ, NULL, 0, 0, 0);

	*err = r == 0 ? 0 : errno;
	return r != 0 && errno == EINVAL;
}

/* ---- child processes ---- */

struct child_spec {
	char *const *argv;	/* argv[0] is the path executed */
	const struct test_mode *mode; /* environment to set, or NULL */
	void (*pre_exec)(const void *arg); /* runs in the child before exec */
	const void *arg;
};

extern char **environ;

/* Fork and exec; the child's stdout is the returned read end. */
static __attribute__((unused)) pid_t spawn_child(const struct child_spec *cs, int *out_fd)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		if (cs->mode && cs->mode->set_env) {
			if (cs->mode->tunables)
				setenv("GLIBC_TUNABLES", cs->mode->tunables, 1);
			else
				unsetenv("GLIBC_TUNABLES");
			if (cs->mode->own_area)
				setenv("RSEQKIT_OWN_AREA", cs->mode->own_area, 1);
			else
				unsetenv("RSEQKIT_OWN_AREA");
		}
		if (cs->pre_exec)
			cs->pre_exec(cs->arg);
		alarm(HARNESS_CHILD_TIMEOUT);
		execve(cs->argv[0], cs->argv, environ);
		fprintf(stderr, "exec %s: %s\n", cs->argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	*out_fd = fds[0];
	return pid;
}

static __attribute__((unused)) void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "wait status 0x%x", status);
}

/* Run a child to completion, collecting its stdout (NUL-terminated). */
static __attribute__((unused)) int run_capture(const struct child_spec *cs, char *buf,
					       size_t len, int *status)
{
	int fd;
	size_t used = 0;
	ssize_t n;
	pid_t pid = spawn_child(cs, &fd);

	if (pid < 0)
		return -1;
	for (;;) {
		char tmp[4096];
		n = read(fd, tmp, sizeof(tmp));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && used + 1 < len; i++)
			buf[used++] = tmp[i];
	}
	buf[used] = '\0';
	close(fd);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/*
 * Run a child that prints TAP and relay its points, each test name
 * prefixed with "[label] ".  Adds one point of its own: the child ran to
 * completion (normal exit, a plan, as many points as planned).
 */
static __attribute__((unused)) void relay_child(const char *label, const struct child_spec *cs)
{
	int fd, status = 0, plan = -1, seen = 0;
	pid_t pid = spawn_child(cs, &fd);
	char how[128];
	FILE *in;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (pid < 0 || (in = fdopen(fd, "r")) == NULL) {
		tap_ok(0, "[%s] could not start the child: %s", label, strerror(errno));
		return;
	}
	while ((n = getline(&line, &cap, in)) > 0) {
		int isok = -1, num;
		char *desc;

		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (strncmp(line, "ok ", 3) == 0)
			isok = 1, desc = line + 3;
		else if (strncmp(line, "not ok ", 7) == 0)
			isok = 0, desc = line + 7;
		if (isok >= 0) {
			num = (int)strtol(desc, &desc, 10);
			if (strncmp(desc, " - ", 3) == 0)
				desc += 3;
			seen++;
			if (num != seen)
				tap_diag("[%s] child numbered point %d as %d", label, seen, num);
			tap_ok(isok, "[%s] %s", label, desc);
		} else if (strncmp(line, "1..", 3) == 0) {
			plan = atoi(line + 3);
		} else if (line[0] == '#') {
			tap_diag("[%s] %s", label, line[0] && line[1] ? line + 2 : "");
		} else if (line[0]) {
			tap_diag("[%s] unexpected output: %s", label, line);
		}
	}
	free(line);
	fclose(in);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	describe_status(status, how, sizeof(how));
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) <= 1 && plan >= 0 && plan == seen,
	       "[%s] child ran to completion (%s, plan %d, %d points)", label, how, plan, seen);
}

/*
 * The usual main(): "--child MODE [ARGS]" runs body() for that mode (with
 * ARGS) and prints its own plan at the end; otherwise drive every mode,
 * once per entry of the NULL-terminated variants (passed as ARGS), or once
 * without ARGS when variants is NULL.
 */
static __attribute__((unused)) int run_modes_variants(int argc, char **argv,
						      void (*body)(const struct test_mode *m,
								   int argc, char **argv),
						      const char *const *variants)
{
	if (argc >= 3 && strcmp(argv[1], "--child") == 0) {
		const struct test_mode *m = find_mode(argv[2]);
		if (m == NULL) {
			fprintf(stderr, "unknown mode %s\n", argv[2]);
			return 2;
		}
		body(m, argc - 3, argv + 3);
		tap_plan(tap_n);
		return tap_done();
	}

	int err, first = 0, last = N_DRIVER_MODES;
	if (!kernel_has_rseq(&err)) {
		/* No rseq (old kernel, sandbox, emulator): the modes cannot be
		 * told apart; run once as things are, checking the fallbacks. */
		tap_diag("rseq(2) is unavailable here (%s): the \"auto\" mode only",
			 strerror(err));
		first = N_DRIVER_MODES, last = N_DRIVER_MODES + 1;
	}
	for (int i = first; i < last; i++) {
		for (int v = 0; v == 0 || (variants && variants[v]); v++) {
			const char *var = variants ? variants[v] : NULL;
			char *cargv[] = { (char *)"/proc/self/exe", (char *)"--child",
					  (char *)test_modes[i].name, (char *)var, NULL };
			struct child_spec cs = { cargv, &test_modes[i], NULL, NULL };
			char label[128];

			snprintf(label, sizeof(label), "%s%s%s", test_modes[i].name, var ? " " : "",
				 var ? var : "");
			relay_child(label, &cs);
		}
	}
	tap_plan(tap_n);
	return tap_done();
}

static __attribute__((unused)) int run_modes(int argc, char **argv,
					     void (*body)(const struct test_mode *m, int argc,
							  char **argv))
{
	return run_modes_variants(argc, argv, body, NULL);
}

/* ---- CPUs ---- */

/* Bound (highest id + 1) of a cpulist/nodelist file; -1 if unreadable. */
static __attribute__((unused)) int read_list_bound(const char *path)
{
	FILE *f = fopen(path, "re");
	char buf[4096];
	int bound = -1;

	if (f == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), f) != NULL) {
		char *save = NULL;
		for (char *tok = strtok_r(buf, ",\n", &save); tok;
		     tok = strtok_r(NULL, ",\n", &save)) {
			int lo, hi;
			int k = sscanf(tok, "%d-%d", &lo, &hi);
			if (k < 1) {
				bound = -1;
				break;
			}
			if (k == 1)
				hi = lo;
			if (hi + 1 > bound)
				bound = hi + 1;
		}
	}
	fclose(f);
	return bound;
}

static cpu_set_t harness_orig_affinity;

/* The CPUs this process may run on; fills cpus[], returns the count. */
static __attribute__((unused)) int allowed_cpus(int *cpus, int max)
{
	int n = 0;

	if (sched_getaffinity(0, sizeof(harness_orig_affinity), &harness_orig_affinity) != 0)
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &harness_orig_affinity))
			cpus[n++] = c;
	return n;
}

static __attribute__((unused)) int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static __attribute__((unused)) void unpin(void)
{
	sched_setaffinity(0, sizeof(harness_orig_affinity), &harness_orig_affinity);
}

/* getcpu(2) directly, for the node. */
static __attribute__((unused)) int raw_getcpu(unsigned *cpu, unsigned *node)
{
	return (int)syscall(SYS_getcpu, cpu, node, NULL);
}

#endif
