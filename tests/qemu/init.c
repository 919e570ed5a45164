/* SPDX-License-Identifier: MIT */
/*
 * /init of the test initramfs: run the commands listed in /cmds, one per
 * line, each framed by markers on the console, then power off.
 *
 *   LABEL [NAME=VALUE ...] PROGRAM [ARG ...]      ('#' starts a comment)
 *
 * Console lines it prints (parsed by tests/qemu/run-kernel.sh):
 *   @@rsk kernel RELEASE
 *   @@rsk passed ARG... (arguments and environment the kernel gave init)
 *   @@rsk begin LABEL
 *   @@rsk end LABEL exit=N|signal=N|timeout secs=S.SS
 *   @@rsk done
 *
 * It mounts /proc and /sys (the library reads the possible-CPU mask from
 * sysfs) and nothing else.  Built static; no libc beyond the basics.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#define MAX_WORDS 64
#define TIMEOUT_SECS 300 /* per command: a hung test must not hang the boot */

static void on_alarm(int sig)
{
	(void)sig; /* only interrupts waitpid() */
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void run(char *line)
{
	char *word[MAX_WORDS + 1], *env[MAX_WORDS + 2], *argv[MAX_WORDS + 1];
	int nw = 0, ne = 0, na = 0, status;

	for (char *w = strtok(line, " \t\n"); w && nw < MAX_WORDS; w = strtok(NULL, " \t\n"))
		word[nw++] = w;
	if (nw < 2 || word[0][0] == '#')
		return;
	env[ne++] = "PATH=/bin";
	int i = 1;
	for (; i < nw && strchr(word[i], '=') != NULL; i++)
		env[ne++] = word[i];
	for (; i < nw; i++)
		argv[na++] = word[i];
	env[ne] = NULL;
	argv[na] = NULL;
	if (na == 0)
		return;

	printf("@@rsk begin %s\n", word[0]);
	fflush(stdout);
	double t0 = now();
	pid_t pid = fork();
	if (pid == 0) {
		execve(argv[0], argv, env);
		printf("init: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	alarm(TIMEOUT_SECS);
	int timed_out = 0;
	while (pid > 0 && waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			break;
		kill(pid, SIGKILL); /* the alarm rang */
		timed_out = 1;
	}
	alarm(0);
	fflush(stdout);
	if (pid < 0 || timed_out)
		printf("@@rsk end %s %s secs=%.2f\n", word[0], pid < 0 ? "exit=127" : "timeout",
		       now() - t0);
	else if (WIFSIGNALED(status))
		printf("@@rsk end %s signal=%d secs=%.2f\n", word[0], WTERMSIG(status), now() - t0);
	else
		printf("@@rsk end %s exit=%d secs=%.2f\n", word[0], WEXITSTATUS(status), now() - t0);
	fflush(stdout);
}

int main(int argc, char **argv, char **envp)
{
	static char line[4096];
	struct sigaction sa = { .sa_handler = on_alarm };
	struct utsname u;

	/* The kernel opened /dev/console as fds 0-2 if the archive has it;
	 * otherwise (an archive packed without root) make one. */
	if (fcntl(1, F_GETFD) < 0) {
		mkdir("/dev", 0755);
		mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
		int fd = open("/dev/console", O_RDWR);
		dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
	}
	mkdir("/proc", 0555);
	mkdir("/sys", 0555);
	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	sigaction(SIGALRM, &sa, NULL);

	uname(&u);
	printf("@@rsk kernel %s\n", u.release);
	/* Boot parameters the kernel did not know end up here. */
	printf("@@rsk passed");
	for (int i = 1; i < argc; i++)
		printf(" %s", argv[i]);
	for (char **e = envp; *e; e++)
		printf(" %s", *e);
	printf("\n");
	FILE *f = fopen("/cmds", "r");
	if (f == NULL)
		printf("init: /cmds: %s\n", strerror(errno));
	while (f && fgets(line, sizeof(line), f))
		run(line);
	printf("@@rsk done\n");
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
