/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/child.c - helper processes: rows measured in another process.
 *
 * The fallback rows run where the library found no rseq: a child started
 * with RSEQKIT_DISABLE=1 (the library decides its mode once, at start-up).
 * The rival allocators' rows run in a child whose malloc is theirs
 * (LD_PRELOAD=their library): two mallocs cannot share one process.  A
 * child is this program, re-executed with the hidden option
 * --helper-serve RFD WFD and the helper's variable set; it answers one
 * request per line:
 *   request  "<impl index> <threads> <ms> <pinned 0|1>"
 *   answer   "<rc> <ns_per_op> <mops> <p50> <p99>"
 * with rc as run_once() returns it.  The parent sends a request where the
 * round-robin comes to such a row, so those rows interleave with the
 * others as any row does: same harness, same run.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench.h"

const struct helper helper_fallback = {
	.name = "fallback", .env = "RSEQKIT_DISABLE", .value = "1",
};

#define MAX_HELPERS 8
static struct child {
	const struct helper *h;
	FILE *to, *from; /* parent's ends; NULL: not running */
	pid_t pid;
	bool missing; /* a rival whose library is not on this machine */
} children[MAX_HELPERS];
static int nchildren;

static struct child *child_of(const struct helper *h)
{
	for (int i = 0; i < nchildren; i++)
		if (children[i].h == h)
			return &children[i];
	if (nchildren == MAX_HELPERS) {
		fprintf(stderr, "rseqkit-bench: more than %d helpers\n", MAX_HELPERS);
		exit(1);
	}
	children[nchildren].h = h;
	children[nchildren].pid = -1;
	return &children[nchildren++];
}

/* Whether `lib` (a soname) is where the dynamic loader looks: the
 * directory of this process's C library (Debian's multiarch directory),
 * its /usr twin, /usr/local/lib and LD_LIBRARY_PATH.  Looked up before
 * the child starts, so that a missing rival is a line in the table, not
 * the loader's error on stderr. */
static bool library_present(const char *lib)
{
	char dirs[3][512], path[1100];
	int ndirs = 0;
	Dl_info info;
	const char *slash;

	if (lib[0] == '/') /* a path (rseqkit-malloc's, in the build tree) */
		return access(lib, R_OK) == 0;

	if (dladdr((void *)fopen, &info) && info.dli_fname &&
	    (slash = strrchr(info.dli_fname, '/'))) {
		int n = (int)(slash - info.dli_fname);
		snprintf(dirs[ndirs++], sizeof(dirs[0]), "%.*s", n < 500 ? n : 500, info.dli_fname);
		if (strncmp(dirs[0], "/usr/", 5))
			snprintf(dirs[ndirs++], sizeof(dirs[0]), "/usr%.500s", dirs[0]);
	}
	snprintf(dirs[ndirs++], sizeof(dirs[0]), "/usr/local/lib");
	for (int i = 0; i < ndirs; i++) {
		snprintf(path, sizeof(path), "%.511s/%.500s", dirs[i], lib);
		if (access(path, R_OK) == 0)
			return true;
	}
	const char *lp = getenv("LD_LIBRARY_PATH");
	while (lp && *lp) {
		int n = (int)strcspn(lp, ":");
		snprintf(path, sizeof(path), "%.*s/%.500s", n < 500 ? n : 500, lp, lib);
		if (n && access(path, R_OK) == 0)
			return true;
		lp += n + (lp[n] == ':');
	}
	return false;
}

static void child_close(struct child *c)
{
	if (c->to)
		fclose(c->to); /* EOF: the child exits */
	if (c->from)
		fclose(c->from);
	if (c->pid > 0)
		waitpid(c->pid, NULL, 0);
	c->to = c->from = NULL;
	c->pid = -1;
}

/* Start h's child (once); 0 if it runs.  A rival whose library is
 * missing is marked so (helper_missing) and not started. */
int helper_start(const struct helper *h, const char *argv0)
{
	struct child *c = child_of(h);
	int down[2], up[2];

	if (c->to)
		return 0;
	if (h->library && !library_present(h->library)) {
		c->missing = true;
		return -1;
	}
	if (pipe(down) || pipe(up))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char rfd[16], wfd[16];
		close(down[1]);
		close(up[0]);
		snprintf(rfd, sizeof(rfd), "%d", down[0]);
		snprintf(wfd, sizeof(wfd), "%d", up[1]);
		setenv(h->env, h->value, 1);
		if (h->env2)
			setenv(h->env2, h->value2, 1);
		execl("/proc/self/exe", argv0, "--helper-serve", rfd, wfd, (char *)NULL);
		_exit(127);
	}
	close(down[0]);
	close(up[1]);
	fcntl(down[1], F_SETFD, FD_CLOEXEC);
	fcntl(up[0], F_SETFD, FD_CLOEXEC);
	c->to = fdopen(down[1], "w");
	c->from = fdopen(up[0], "r");
	c->pid = pid;
	if (!c->to || !c->from) {
		child_close(c);
		return -1;
	}
	/* The child says hello once it knows it runs as asked. */
	char line[256] = "";
	if (!fgets(line, sizeof(line), c->from) || strncmp(line, "ready", 5)) {
		fprintf(stderr, "rseqkit-bench: %s child: %s", h->name,
			line[0] ? line : "no answer\n");
		child_close(c);
		return -1;
	}
	return 0;
}

bool helper_ready(const struct helper *h)
{
	return child_of(h)->to != NULL;
}

/* Why h's rows are not measured, or NULL if they can be. */
const char *helper_missing(const struct helper *h)
{
	return child_of(h)->missing ? h->library : NULL;
}

void helpers_stop(void)
{
	for (int i = 0; i < nchildren; i++)
		child_close(&children[i]);
}

/* The child's loop: it checks it runs as its helper says (no rseq; the
 * rival's malloc), then serves requests until EOF. */
int helper_serve(int rfd, int wfd)
{
	FILE *in = fdopen(rfd, "r"), *out = fdopen(wfd, "w");
	const char *preload = getenv("LD_PRELOAD");
	int disable = rsk_env_bool_("RSEQKIT_DISABLE", 0);
	char line[256];

	if (!in || !out)
		return 1;
	rsk_init();
	if (disable) {
		struct rsk_status st;
		rsk_status(&st);
		if (st.available) {
			fprintf(out, "error: rseq still available with RSEQKIT_DISABLE=1\n");
			fclose(out);
			return 1;
		}
	}
	if (preload) {
		const struct helper *const rivals[] = {&rival_jemalloc, &rival_mimalloc,
						       &rival_tcmalloc};
		for (size_t i = 0; i < sizeof(rivals) / sizeof(rivals[0]); i++)
			if (!strcmp(preload, rivals[i]->library) &&
			    !dlsym(RTLD_DEFAULT, rivals[i]->symbol)) {
				fprintf(out, "error: LD_PRELOAD=%s did not load (no %s)\n", preload,
					rivals[i]->symbol);
				fclose(out);
				return 1;
			}
	}
	/* Whatever is preloaded must be the process's malloc. */
	if (preload && *preload) {
		const char *want = strrchr(preload, '/') ? strrchr(preload, '/') + 1 : preload;
		void *m = dlsym(RTLD_DEFAULT, "malloc");
		Dl_info di;
		const char *got = m && dladdr(m, &di) && di.dli_fname ? di.dli_fname : "";
		got = strrchr(got, '/') ? strrchr(got, '/') + 1 : got;
		if (strcmp(got, want)) {
			fprintf(out, "error: LD_PRELOAD=%s: malloc is %s's\n", preload,
				*got ? got : "nobody");
			fclose(out);
			return 1;
		}
	}
	fprintf(out, "ready\n");
	fflush(out);
	while (fgets(line, sizeof(line), in)) {
		unsigned k, ms;
		int nt, pin;
		struct sample smp = {0, 0, 0, 0};
		if (sscanf(line, "%u %d %u %d", &k, &nt, &ms, &pin) != 4 || k >= impl_count() ||
		    nt < 1 || nt > 1024) {
			fprintf(out, "-1 0 0 0 0\n");
			fflush(out);
			continue;
		}
		int *pins = NULL;
		if (pin) {
			pins = malloc(sizeof(int) * (size_t)nt);
			if (!pins)
				return 1;
			for (int i = 0; i < nt; i++)
				pins[i] = allowed_cpus[i % nallowed];
		}
		int rc = run_once(impl_at(k), nt, pins, ms, &smp);
		free(pins);
		fprintf(out, "%d %.17g %.17g %.17g %.17g\n", rc, smp.ns_per_op, smp.mops, smp.p50,
			smp.p99);
		fflush(out);
	}
	return 0;
}

/* run_once(), here or in the row's helper process. */
int run_row(const struct impl *im, int nthreads, const int *pins, unsigned ms,
	    struct sample *out)
{
	if (!im->helper)
		return run_once(im, nthreads, pins, ms, out);
	struct child *c = child_of(im->helper);
	if (!c->to) {
		progress_clear();
		fprintf(stderr, "rseqkit-bench: %s/%s: no %s child (see above)\n", im->op, im->name,
			im->helper->name);
		return -1;
	}
	char line[256];
	int rc;
	fprintf(c->to, "%ld %d %u %d\n", impl_index(im), nthreads, ms, pins ? 1 : 0);
	fflush(c->to);
	if (!fgets(line, sizeof(line), c->from) ||
	    sscanf(line, "%d %lf %lf %lf %lf", &rc, &out->ns_per_op, &out->mops, &out->p50,
		   &out->p99) != 5) {
		progress_clear();
		fprintf(stderr, "rseqkit-bench: %s/%s: the %s child died\n", im->op, im->name,
			im->helper->name);
		child_close(c);
		return -1;
	}
	return rc;
}
