/* SPDX-License-Identifier: MIT */
/*
 * rseq(2) denied by a seccomp filter: the library must report it and fall
 * back, never abort.  For each variant a child installs a raw BPF filter
 * (PR_SET_NO_NEW_PRIVS + PR_SET_SECCOMP, no libseccomp) and executes this
 * program again (filters survive exec), which checks the fallbacks:
 *   enosys          rseq(2) fails with ENOSYS, glibc.pthread.rseq=0
 *   eperm           rseq(2) fails with EPERM,  glibc.pthread.rseq=0
 *   enosys-libc     ENOSYS, glibc tries (and fails) first
 *   eperm-libc      EPERM, glibc tries (and fails) first
 *   register-eperm  the probe rseq(NULL, ...) passes, registering fails
 *                   with EPERM: rseq looks available, no thread can use it
 * and rseqkit-info --json is run under the ENOSYS and EPERM filters.
 *
 * The late-* variants install the filter at run time instead, in a thread
 * that is registered already, which then creates threads (issue 14, item
 * 7): with glibc's registration turned off (owners library - rseqkit's own
 * area - and none) they must start and fall back; glibc would abort the
 * process if rseqkit had registered glibc's area in their creator.  With
 * glibc's registration on (owner libc) glibc itself registers each new
 * thread and aborts when that fails: its rule, checked here so that the
 * documentation stays true.  Each owner mode (library, own-area, none,
 * libc) under an EPERM and an ENOSYS filter.
 */
#include <pthread.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include "harness.h"

#define MAX_CPUS 1024
static int cpus[MAX_CPUS], ncpus;

struct variant {
	const char *name;
	int err;	    /* errno the filter returns */
	int register_only;  /* let rseq(NULL, ...) probes through */
	const char *mode;   /* environment (harness.h modes) */
	int info;	    /* also run rseqkit-info under it */
	int late;	    /* installed at run time by a registered thread (2: and
			       RSEQKIT_DISABLE=1, owner none) */
};

static const struct variant variants[] = {
	{ "enosys", ENOSYS, 0, "library", 1, 0 },
	{ "eperm", EPERM, 0, "library", 1, 0 },
	{ "enosys-libc", ENOSYS, 0, "libc", 1, 0 },
	{ "eperm-libc", EPERM, 0, "libc", 0, 0 },
	{ "register-eperm", EPERM, 1, "library", 0, 0 },
	{ "late-enosys", ENOSYS, 0, "library", 0, 1 },
	{ "late-eperm", EPERM, 0, "library", 0, 1 },
	{ "late-enosys-own-area", ENOSYS, 0, "own-area", 0, 1 },
	{ "late-eperm-own-area", EPERM, 0, "own-area", 0, 1 },
	{ "late-eperm-none", EPERM, 0, "library", 0, 2 },
	{ "late-enosys-none", ENOSYS, 0, "library", 0, 2 },
	{ "late-eperm-libc", EPERM, 0, "libc", 0, 1 },
	{ "late-enosys-libc", ENOSYS, 0, "libc", 0, 1 },
};
#define N_VARIANTS (int)(sizeof(variants) / sizeof(variants[0]))

/* ---- the filter ---- */

#define LD_ABS(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define ARG0_LO offsetof(struct seccomp_data, args[0])
#define ARG0_HI (offsetof(struct seccomp_data, args[0]) + 4) /* little-endian */

/* rseq(2) of either x86 ABI (334 on x86_64, 386 on i386) returns err;
 * everything else is allowed.  Returns 0 or an errno. */
static int install_filter(int err, int register_only)
{
	const unsigned match = 7, deny = register_only ? 11 : 7, allow = deny + 1;
	struct sock_filter prog[] = {
		/* 0 */ LD_ABS(offsetof(struct seccomp_data, arch)),
		/* 1 */ JEQ(AUDIT_ARCH_X86_64, 0, 2),
		/* 2 */ LD_ABS(offsetof(struct seccomp_data, nr)),
		/* 3 */ JEQ(334, match - 4, allow - 4),
		/* 4 */ JEQ(AUDIT_ARCH_I386, 0, allow - 5),
		/* 5 */ LD_ABS(offsetof(struct seccomp_data, nr)),
		/* 6 */ JEQ(386, match - 7, allow - 7),
		/* 7: match; with register_only, a NULL area is the probe */
		LD_ABS(ARG0_LO),
		/* 8 */ JEQ(0, 0, deny - 9),
		/* 9 */ LD_ABS(ARG0_HI),
		/* 10 */ JEQ(0, allow - 11, deny - 11),
		/* 11 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* 12 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = (unsigned short)(allow + 1), .filter = prog };

	prog[deny] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
						  SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA));
	prog[allow] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0)
		return errno;
	return 0;
}

static void pre_exec(const void *arg)
{
	const struct variant *v = arg;
	int e = install_filter(v->err, v->register_only);

	if (e) {
		fprintf(stderr, "seccomp filter: %s\n", strerror(e));
		_exit(126);
	}
}

/* ---- the child: checks under the filter ---- */

static const struct variant *variant;

struct thread_check {
	int registered, cpu_ok, index, reg;
};

static void *thread_body(void *arg)
{
	struct thread_check *t = arg;
	struct rsk_status st;
	int c;

	rsk_status(&st);
	t->registered = st.thread_registered;
	c = rsk_cpu();
	t->cpu_ok = c >= 0 && c < rsk_possible_cpus();
	t->index = rsk_index(RSK_INDEX_CPU);
	t->reg = rsk_register();
	return NULL;
}

static void child_body(void)
{
	struct rsk_status st;
	int err = variant->err, avail_expected = variant->register_only;
	long r;

	/* The filter must really be there, or nothing below means anything. */
	r = syscall(RSK_ARCH_NR_RSEQ, NULL, 0, 0, 0);
	tap_ok(r == -1 && errno == (variant->register_only ? EINVAL : err),
	       "the filter answers the rseq probe with %s", strerror(errno));
	struct rsk_abi_area probe_area __attribute__((aligned(32))) = { 0 };
	r = syscall(RSK_ARCH_NR_RSEQ, &probe_area, 32, 0, RSK_ARCH_SIGNATURE);
	tap_ok(r == -1 && errno == err, "the filter refuses registrations with %s", strerror(errno));

	tap_ok(rsk_init() == 0, "rsk_init() returns 0");
	tap_ok(rsk_status(&st) == 0, "rsk_status() returns 0");
	tap_diag("reason: %s, error %d", st.reason, st.error);
	if (avail_expected) {
		tap_ok(st.available && st.owner == RSK_OWNER_LIBRARY,
		       "the probe passes: rseq available, owner library (%d, %s)", st.available,
		       rsk_owner_name(st.owner));
		tap_ok(st.thread_registered == 0, "but the thread is not registered");
	} else {
		tap_ok(!st.available && st.owner == RSK_OWNER_NONE, "not available, owner none (%d, %s)",
		       st.available, rsk_owner_name(st.owner));
		tap_ok(st.error == err, "error is %s (got %d)", strerror(err), st.error);
		const char *needle = err == EPERM ? "EPERM" : "not implemented";
		tap_ok(st.reason && strstr(st.reason, needle) && strstr(st.reason, "seccomp"),
		       "reason mentions %s and seccomp: \"%s\"", needle, st.reason);
		tap_ok(st.registered_size == 0 && !st.mm_cid_available && !st.node_id_available &&
			       !rsk_mm_cid_available() && !rsk_node_id_available(),
		       "no registered size, no mm_cid, no node_id");
		tap_ok(st.thread_registered == 0, "thread not registered");
		tap_ok(rsk_area() == NULL, "rsk_area() is NULL");
	}

	/* Identity from the fallbacks, pinned to each CPU. */
	int nodes = read_list_bound("/sys/devices/system/node/possible");
	int cpu_bad = 0, idx_bad = 0, cid_bad = 0, node_bad = 0, add_bad = 0;
	for (int i = 0; i < ncpus; i++) {
		int c = cpus[i];
		unsigned gc, gn;
		intptr_t v = 0;
		if (pin_to(c) != 0) {
			cpu_bad++;
			continue;
		}
		if (rsk_cpu() != c || sched_getcpu() != c || rsk_cpu_start() != c)
			cpu_bad++;
		if (rsk_index(RSK_INDEX_CPU) != -1 || rsk_index(RSK_INDEX_CID) != -1)
			idx_bad++;
		if (rsk_mm_cid() != c)
			cid_bad++;
		int node = rsk_node();
		if (raw_getcpu(&gc, &gn) != 0 || node != (int)gn || node >= (nodes > 0 ? nodes : 1))
			node_bad++;
		if (rsk_add(RSK_INDEX_CPU, c, &v, 1) != RSK_ABORTED || v != 0)
			add_bad++;
	}
	unpin();
	tap_ok(cpu_bad == 0, "pinned to each of %d CPUs: rsk_cpu() == rsk_cpu_start() == sched_getcpu()",
	       ncpus);
	tap_ok(idx_bad == 0, "rsk_index() is -1 for CPU and CID");
	tap_ok(cid_bad == 0, "rsk_mm_cid() falls back to the current CPU");
	tap_ok(node_bad == 0, "rsk_node() is getcpu(2)'s node");
	tap_ok(add_bad == 0, "rsk_add() aborts without storing");

	tap_ok(rsk_register() == -err, "rsk_register() is -%s", err == EPERM ? "EPERM" : "ENOSYS");
	rsk_status(&st);
	tap_ok(st.thread_count == 0 && st.thread_registered == 0, "the failed register counted nothing");
	tap_ok(rsk_unregister(0) == -EINVAL, "rsk_unregister(0) is -EINVAL");
	tap_ok(rsk_unregister(RSK_UNREGISTER_FORCE) == 0 && rsk_index(RSK_INDEX_CPU) == -1,
	       "forced unregister is harmless");

	enum { NT = 4 };
	pthread_t th[NT];
	struct thread_check tc[NT];
	int bad = 0;
	for (int t = 0; t < NT; t++)
		if (pthread_create(&th[t], NULL, thread_body, &tc[t]) != 0)
			bad++;
	for (int t = 0; t < NT && !bad; t++) {
		pthread_join(th[t], NULL);
		if (tc[t].registered || !tc[t].cpu_ok || tc[t].index != -1 || tc[t].reg != -err)
			bad++;
	}
	tap_ok(bad == 0, "%d new threads: unregistered, rsk_cpu() valid, index -1, register -%d", NT,
	       err);

	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int c = rsk_cpu();
		_exit(c >= 0 && c < rsk_possible_cpus() && rsk_index(RSK_INDEX_CPU) == -1 ? 0 : 1);
	}
	int status = 0;
	if (pid > 0)
		waitpid(pid, &status, 0);
	tap_ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "a forked child falls back the same way");
}

/* ---- a filter installed at run time ---- */

struct late_check {
	int registered, cpu_ok, index, reg, counter_ok;
};

static void *late_thread(void *arg)
{
	struct late_check *t = arg;
	struct rsk_status st;
	intptr_t v = 0;
	int c;

	rsk_status(&st);
	t->registered = st.thread_registered;
	c = rsk_cpu();
	t->cpu_ok = c >= 0 && c < rsk_possible_cpus();
	t->index = rsk_index(RSK_INDEX_CPU);
	t->reg = rsk_register();
	t->counter_ok = rsk_add(RSK_INDEX_CPU, c, &v, 1) == RSK_ABORTED && v == 0;
	return NULL;
}

static void late_body(void)
{
	struct rsk_status st;
	int err = variant->err, none = variant->late == 2;
	int owner = none ? RSK_OWNER_NONE : find_mode(variant->mode)->owner;

	rsk_status(&st);
	tap_ok((int)st.owner == owner, "before the filter: owner %s (%s)", rsk_owner_name(st.owner),
	       st.reason);
	if (!none)
		tap_ok(rsk_register() == 0 && rsk_index(RSK_INDEX_CPU) >= 0,
		       "before the filter: the creator is registered");
	int e = install_filter(err, 0);
	if (!tap_ok(e == 0, "filter installed at run time (%s)", e ? strerror(e) : "ok"))
		return;
	errno = 0;
	long r = syscall(RSK_ARCH_NR_RSEQ, NULL, 0, 0, 0);
	tap_ok(r == -1 && errno == err, "the filter answers rseq(2) with %s (%s)", strerror(err),
	       strerror(errno));
	enum { NT = 4 };
	pthread_t th[NT];
	struct late_check tc[NT];
	int started = 0, bad = 0;
	fflush(stdout);
	for (int t = 0; t < NT; t++)
		if (pthread_create(&th[t], NULL, late_thread, &tc[t]) == 0)
			started++;
	for (int t = 0; t < started; t++) {
		pthread_join(th[t], NULL);
		if (tc[t].registered || !tc[t].cpu_ok || tc[t].index != -1 ||
		    tc[t].reg != (none ? -ENOSYS : -err) || !tc[t].counter_ok)
			bad++;
	}
	tap_ok(started == NT, "%d threads created under the filter", started);
	tap_ok(bad == 0, "they are unregistered, rsk_cpu() valid, index -1, register -%d, adds abort",
	       none ? ENOSYS : err);
	if (!none)
		tap_ok(rsk_index(RSK_INDEX_CPU) >= 0, "the creator is still registered");
}

static void set_disable(const void *arg)
{
	(void)arg;
	setenv("RSEQKIT_DISABLE", "1", 1);
}

static void quiet_stderr(const void *arg)
{
	(void)arg;
	int fd = open("/dev/null", O_WRONLY);
	if (fd >= 0)
		dup2(fd, STDERR_FILENO); /* glibc's "Fatal glibc error: ..." */
}

/* glibc's own rule (owner libc): the child must die of glibc's abort. */
static void late_libc(const struct variant *v)
{
	static char out[8192];
	char *argv[] = { (char *)"/proc/self/exe", (char *)"--child", (char *)v->name, NULL };
	struct child_spec cs = { argv, find_mode(v->mode), quiet_stderr, NULL };
	int status = 0;
	char how[128];

	if (run_capture(&cs, out, sizeof(out), &status) != 0) {
		tap_ok(0, "[%s] cannot start", v->name);
		return;
	}
	describe_status(status, how, sizeof(how));
	tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
	       "[%s] glibc registered the creator, so it aborts the process when it cannot register a "
	       "new thread (%s)",
	       v->name, how);
}

/* ---- rseqkit-info under the filter ---- */

static int json_int(const char *json, const char *key, int *out)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(json, pat);
	return p ? sscanf(p + strlen(pat), "%d", out) == 1 : 0;
}

static void info_under(const struct variant *v, const char *info)
{
	static char out[8192];
	char *argv[] = { (char *)info, (char *)"--json", NULL };
	struct child_spec cs = { argv, find_mode(v->mode), pre_exec, v };
	int status = 0, error = -1, cpu = -2, possible = 0;
	char how[128];

	if (run_capture(&cs, out, sizeof(out), &status) != 0) {
		tap_ok(0, "[%s] rseqkit-info: cannot start", v->name);
		return;
	}
	describe_status(status, how, sizeof(how));
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "[%s] rseqkit-info --json exits 0 (%s)",
	       v->name, how);
	tap_ok(strstr(out, "\"available\": false") && strstr(out, "\"owner\": \"none\"") &&
		       strstr(out, "\"thread_registered\": false"),
	       "[%s] rseqkit-info: available false, owner none, thread not registered", v->name);
	tap_ok(json_int(out, "error", &error) && error == v->err,
	       "[%s] rseqkit-info: error %d == %d", v->name, error, v->err);
	tap_ok(json_int(out, "cpu", &cpu) && json_int(out, "possible_cpus", &possible) && cpu >= 0 &&
		       cpu < possible,
	       "[%s] rseqkit-info: cpu %d below possible_cpus %d", v->name, cpu, possible);
	if (strchr(out, '\n'))
		*strchr(out, '\n') = '\0';
	tap_diag("%s", out);
}

/* ---- the data structures under the filter: every stress test, exact
 * through the slow paths (issue: progress everywhere) ---- */

static void stress_under(const struct variant *v, const char *stress)
{
	static char out[8192];
	static const char *const tests[] = { "s", "l", "b", "m", "i", "r" };

	for (unsigned i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		char *argv[] = { (char *)stress, (char *)"-T", (char *)tests[i], (char *)"-t", (char *)"8",
				 (char *)"-r", (char *)"500", NULL };
		struct child_spec cs = { argv, find_mode(v->mode), pre_exec, v };
		int status = 0;

		if (run_capture(&cs, out, sizeof(out), &status) != 0) {
			tap_ok(0, "[%s] rseqkit-stress -T %s: cannot start", v->name, tests[i]);
			continue;
		}
		if (strchr(out, '\n'))
			*strchr(out, '\n') = '\0';
		tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(out, " OK") != NULL,
		       "[%s] rseqkit-stress -T %s on slow paths: %s", v->name, tests[i], out);
	}
}

int main(int argc, char **argv)
{
	ncpus = allowed_cpus(cpus, MAX_CPUS);
	if (argc >= 3 && strcmp(argv[1], "--child") == 0) {
		for (int i = 0; i < N_VARIANTS; i++)
			if (strcmp(variants[i].name, argv[2]) == 0)
				variant = &variants[i];
		if (variant == NULL)
			return 2;
		if (variant->late)
			late_body();
		else
			child_body();
		tap_plan(tap_n);
		return tap_done();
	}

	int err;
	if (!kernel_has_rseq(&err))
		tap_plan_skip_all("the kernel does not answer rseq(2) here");
	/* Can this system install a filter at all (CONFIG_SECCOMP_FILTER,
	 * no sandbox forbidding it)?  If not, say so: a skip, not a pass. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(install_filter(ENOSYS, 0));
	int status = 0;
	waitpid(pid, &status, 0);
	if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char why[128];
		snprintf(why, sizeof(why), "cannot install a seccomp filter here (%s)",
			 WIFEXITED(status) ? strerror(WEXITSTATUS(status)) : "child died");
		tap_plan_skip_all(why);
	}

	char info[PATH_MAX + 32], self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	if (strrchr(self, '/'))
		*strrchr(self, '/') = '\0';
	snprintf(info, sizeof(info), "%s/../bin/rseqkit-info", self);
	char stress[PATH_MAX + 32];
	snprintf(stress, sizeof(stress), "%s/../bin/rseqkit-stress", self);

	for (int i = 0; i < N_VARIANTS; i++) {
		const struct variant *v = &variants[i];
		char *cargv[] = { (char *)"/proc/self/exe", (char *)"--child", (char *)v->name, NULL };
		struct child_spec cs = { cargv, find_mode(v->mode),
					 !v->late ? pre_exec : v->late == 2 ? set_disable : NULL, v };
		if (v->late && find_mode(v->mode)->owner == RSK_OWNER_LIBC)
			late_libc(v);
		else
			relay_child(v->name, &cs);
		if (v->info) {
			info_under(v, info);
			stress_under(v, stress);
		}
	}
	tap_plan(tap_n);
	return tap_done();
}
