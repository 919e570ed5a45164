/* SPDX-License-Identifier: MIT */
/*
 * Where a hung test's threads are: for the stress tests' watchdogs, so
 * that a hang reports something to start from instead of only a timeout
 * (rare hangs are seen under emulators, where no debugger runs).
 *
 * where_install() sets a SIGUSR2 handler that prints the interrupted
 * thread's id, program counter and the words on its stack that point
 * into the program's text (candidate return addresses, for addr2line;
 * the addresses are the link-time ones in a static non-PIE program,
 * otherwise subtract the printed base).  where_report(pid) prints, for
 * every thread of process pid, its state, system call and wait channel
 * from /proc, then signals each thread (but the caller) three times, 100
 * ms apart.  A fork child inherits the handler, so a parent can report a
 * child that hangs.  Everything here is async-signal-safe (no stdio, no
 * malloc: the allocator may be what hangs).
 */
#ifndef RSEQKIT_TESTS_WHERE_H
#define RSEQKIT_TESTS_WHERE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

struct where_line {
	char b[1024];
	size_t n;
};

static void where_s(struct where_line *l, const char *s)
{
	while (*s != '\0' && l->n < sizeof(l->b) - 1)
		l->b[l->n++] = *s++;
}

static void where_num(struct where_line *l, uintptr_t v, unsigned base)
{
	char t[24];
	int k = 0;

	if (base == 16)
		where_s(l, "0x");
	do
		t[k++] = "0123456789abcdef"[v % base];
	while ((v /= base) != 0);
	while (k > 0 && l->n < sizeof(l->b) - 1)
		l->b[l->n++] = t[--k];
}

static void where_out(struct where_line *l)
{
	if (l->n == 0 || l->b[l->n - 1] != '\n')
		l->b[l->n++] = '\n';
	if (write(2, l->b, l->n) < 0)
		l->n = 0; /* nothing to do: stderr is gone */
	l->n = 0;
}

extern char __executable_start[], etext[];

static void where_handler(int sig, siginfo_t *si, void *ucv)
{
	struct where_line l = { .n = 0 };
	int saved = errno;

	(void)sig;
	(void)si;
	(void)ucv;
	where_s(&l, "where: pid ");
	where_num(&l, (uintptr_t)getpid(), 10);
	where_s(&l, " tid ");
	where_num(&l, (uintptr_t)syscall(SYS_gettid), 10);
#if defined(__x86_64__)
	{
		const ucontext_t *uc = ucv;
		const uintptr_t *sp = (const uintptr_t *)uc->uc_mcontext.gregs[REG_RSP];
		int shown = 0;

		where_s(&l, " base ");
		where_num(&l, (uintptr_t)__executable_start, 16);
		where_s(&l, " pc ");
		where_num(&l, (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], 16);
		where_s(&l, " stack");
		/* 2 KiB of stack: below every thread's top (the main thread's
		 * has its arguments and environment above, the others their
		 * descriptor). */
		for (int i = 0; i < 256 && shown < 24; i++)
			if (sp[i] >= (uintptr_t)__executable_start && sp[i] < (uintptr_t)etext) {
				where_s(&l, " ");
				where_num(&l, sp[i], 16);
				shown++;
			}
	}
#endif
	where_out(&l);
	errno = saved;
}

static void where_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = where_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
}

/* Append the first line of a /proc file (its start, for a long one). */
static void where_cat(struct where_line *l, const char *path, const char *label)
{
	char b[200];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, b, sizeof(b) - 1);

	if (fd >= 0)
		close(fd);
	where_s(l, label);
	if (n <= 0) {
		where_s(l, "?");
		return;
	}
	b[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (b[i] == '\n')
			b[i] = i == n - 1 ? '\0' : ' ';
	where_s(l, b);
}

static void where_report(pid_t pid)
{
	struct dirent64_ {
		uint64_t ino;
		int64_t off;
		unsigned short reclen;
		unsigned char type;
		char name[];
	};
	char path[64], dir[32768];
	struct where_line l = { .n = 0 };
	long self = syscall(SYS_gettid);
	pid_t tids[1024];
	int ntids = 0, fd;
	long got;

	where_s(&l, "where: the threads of process ");
	where_num(&l, (uintptr_t)pid, 10);
	where_out(&l);
	l.n = 0;
	where_s(&l, "/proc/");
	where_num(&l, (uintptr_t)pid, 10);
	where_s(&l, "/task");
	l.b[l.n] = '\0';
	memcpy(path, l.b, l.n + 1);
	l.n = 0;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((got = syscall(SYS_getdents64, fd, dir, sizeof(dir))) > 0)
		for (long off = 0; off < got;) {
			const struct dirent64_ *d = (const void *)(dir + off);
			off += d->reclen;
			if (d->name[0] >= '0' && d->name[0] <= '9' && ntids < 1024) {
				long t = 0;
				for (const char *c = d->name; *c != '\0'; c++)
					t = t * 10 + (*c - '0');
				tids[ntids++] = (pid_t)t;
			}
		}
	close(fd);
	for (int i = 0; i < ntids; i++) {
		static const char *const file[] = { "stat", "syscall", "wchan" };
		for (int f = 0; f < 3; f++) {
			struct where_line p = { .n = 0 };
			where_s(&p, "/proc/");
			where_num(&p, (uintptr_t)pid, 10);
			where_s(&p, "/task/");
			where_num(&p, (uintptr_t)tids[i], 10);
			where_s(&p, "/");
			where_s(&p, file[f]);
			p.b[p.n] = '\0';
			where_cat(&l, p.b, f == 0 ? "where: " : f == 1 ? " | syscall " : " | wchan ");
		}
		where_out(&l);
	}
	for (int round = 0; round < 3; round++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		for (int i = 0; i < ntids; i++)
			if (tids[i] != self)
				syscall(SYS_tgkill, pid, tids[i], SIGUSR2);
		nanosleep(&ts, NULL);
	}
}

#endif /* RSEQKIT_TESTS_WHERE_H */
