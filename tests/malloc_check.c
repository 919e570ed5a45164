/* SPDX-License-Identifier: MIT */
/*
 * rseqkit's malloc in check mode (RSEQKIT_MALLOC_CHECK=1): each kind of
 * error, made by a child (this program run again with --child KIND and
 * the variable set), must abort it with a message naming the kind and
 * the block's address; the same child without check mode runs to its
 * end (the default mode does not see a canary overrun or a double free:
 * what the check is for), except a free of a pointer the page map does
 * not know, which every mode reports: a foreign one, and a second free of
 * a large block (kept for reuse, its page-map entry cleared).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rseqkit/malloc.h>
#include "tap.h"

static char not_heap[64];
static void (*volatile free_v)(void *) = free;
static void *(*volatile malloc_v)(size_t) = malloc;

/* The child: print the address the error is about, then make it. */
static int child(const char *kind)
{
	char *p = malloc_v(40), *q;

	if (strcmp(kind, "double") == 0) {
		printf("%p\n", (void *)p);
		fflush(stdout);
		free_v(p);
		free_v(p);
	} else if (strcmp(kind, "largedouble") == 0) {
		/* A freed large block is kept for reuse (in the CPU's or the
		 * shared cache): a second free is still refused. */
		q = malloc_v((size_t)1 << 20);
		printf("%p\n", (void *)q);
		fflush(stdout);
		free_v(q);
		free_v(q);
	} else if (strcmp(kind, "inside") == 0) {
		printf("%p\n", (void *)(p + 16));
		fflush(stdout);
		free_v(p + 16);
	} else if (strcmp(kind, "foreign") == 0) {
		printf("%p\n", (void *)not_heap);
		fflush(stdout);
		free_v(not_heap);
	} else if (strcmp(kind, "canary") == 0) {
		printf("%p\n", (void *)p);
		fflush(stdout);
		p[40] = 'x'; /* one past the end */
		free_v(p);
	} else if (strcmp(kind, "afterfree") == 0) {
		printf("%p\n", (void *)p);
		fflush(stdout);
		free_v(p);
		((volatile char *)p)[3] = 'x';
		q = malloc_v(40); /* the same block, handed out again */
		free_v(q);
	} else {
		return 2;
	}
	return 0;
}

/* Run the child of `kind` (with RSEQKIT_MALLOC_CHECK=check); its status,
 * stdout (the address) and stderr. */
static int run(const char *self, const char *kind, const char *check, char *addr, size_t na,
	       char *err, size_t ne)
{
	int out[2], errp[2], status;
	pid_t pid;
	ssize_t n;

	if (pipe(out) != 0 || pipe(errp) != 0)
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(errp[1], 2);
		close(out[0]);
		close(errp[0]);
		setenv("RSEQKIT_MALLOC_CHECK", check, 1);
		execl(self, self, "--child", kind, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	close(errp[1]);
	n = read(out[0], addr, na - 1);
	addr[n > 0 ? n : 0] = '\0';
	addr[strcspn(addr, "\n")] = '\0';
	n = 0;
	for (ssize_t r; (size_t)n < ne - 1 && (r = read(errp[0], err + n, ne - 1 - (size_t)n)) > 0;)
		n += r;
	err[n] = '\0';
	close(out[0]);
	close(errp[0]);
	waitpid(pid, &status, 0);
	return status;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *kind, *msg;
		int default_aborts; /* also without check mode */
	} cases[] = {
		{ "double", "rseqkit-malloc: double free of ", 0 },
		{ "inside", "rseqkit-malloc: free of a pointer never returned by malloc: ", 0 },
		{ "foreign", "rseqkit-malloc: free of a pointer never returned by malloc: ", 1 },
		{ "largedouble", "rseqkit-malloc: free of a pointer never returned by malloc: ", 1 },
		{ "canary", "rseqkit-malloc: canary overrun (a write past the end of the block) at ", 0 },
		{ "afterfree", "write after free (use after free) to ", 0 },
	};
	char addr[64], err[2048], want[256];

	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child(argv[2]);
	alarm(60);
	tap_plan(2 * (int)(sizeof(cases) / sizeof(cases[0])));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int st = run(argv[0], cases[i].kind, "1", addr, sizeof(addr), err, sizeof(err));
		snprintf(want, sizeof(want), "%s%s", cases[i].msg, addr);
		tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && addr[0] != '\0' && strstr(err, want) != NULL,
		       "check mode, %s: aborts with \"%s\"", cases[i].kind, want);
		if (strstr(err, want) == NULL)
			tap_diag("stderr: %s", err);
		st = run(argv[0], cases[i].kind, "0", addr, sizeof(addr), err, sizeof(err));
		if (cases[i].default_aborts)
			tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
			       "default mode, %s: reported too (status %d: %s)", cases[i].kind, st, err);
		else
			tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			       "default mode, %s: not detected (the check is what finds it; status %d)",
			       cases[i].kind, st);
	}
	return tap_done();
}
