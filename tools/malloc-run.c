/* SPDX-License-Identifier: MIT */
/*
 * malloc-run - run a program with an allocator preloaded and report its
 * wall time and peak RSS (what make bench-real measures each run with).
 *
 *   malloc-run [-p LIBRARY] [-e NAME=VALUE]... -o FILE -- PROGRAM [ARG...]
 *
 * -p sets LD_PRELOAD for the program only (empty or absent: glibc's
 * malloc, LD_PRELOAD removed), never for this process: the figures are
 * the program's, not a parent's.  -e sets another variable for it.  The
 * program inherits stdin, stdout and stderr.  FILE gets one line:
 *
 *   <wall seconds> <peak RSS KiB> <exit status, or 128 + signal>
 *
 * The peak RSS is wait4()'s ru_maxrss of the program: a fork of this small
 * process, so the forked parent's pages add nothing worth counting (a
 * Python or shell parent would add its own RSS: the kernel keeps the
 * high-water mark across exec).  Exit status: the program's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void usage(void)
{
	fprintf(stderr, "usage: malloc-run [-p LIBRARY] [-e NAME=VALUE]... -o FILE -- PROGRAM [ARG...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *preload = NULL, *out = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "-p")) {
			preload = argv[++i];
		} else if (!strcmp(argv[i], "-o")) {
			out = argv[++i];
		} else if (!strcmp(argv[i], "-e")) {
			char *kv = argv[++i], *eq = strchr(kv, '=');
			if (!eq || eq == kv)
				usage();
			*eq = 0;
			if (setenv(kv, eq + 1, 1))
				return 2;
			*eq = '=';
		} else {
			usage();
		}
	}
	if (i >= argc || !out)
		usage();
	FILE *f = fopen(out, "w");
	if (!f) {
		fprintf(stderr, "malloc-run: %s: %s\n", out, strerror(errno));
		return 2;
	}

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("malloc-run: fork");
		return 2;
	}
	if (pid == 0) {
		if (preload && *preload)
			setenv("LD_PRELOAD", preload, 1);
		else
			unsetenv("LD_PRELOAD");
		execvp(argv[i], argv + i);
		fprintf(stderr, "malloc-run: %s: %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	int st;
	struct rusage ru;
	while (wait4(pid, &st, 0, &ru) < 0)
		if (errno != EINTR) {
			perror("malloc-run: wait4");
			return 2;
		}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	fprintf(f, "%.6f %ld %d\n", wall, ru.ru_maxrss, rc);
	if (fclose(f)) {
		fprintf(stderr, "malloc-run: %s: %s\n", out, strerror(errno));
		return 2;
	}
	return rc;
}
