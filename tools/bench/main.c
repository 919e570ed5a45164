/* SPDX-License-Identifier: MIT */
/*
 * rseqkit-bench - every rseqkit operation beside what users would otherwise
 * use, and beside the physical limit (the same work on thread-local data).
 *
 *   rseqkit-bench [--quick] [--fallback] [--ops LIST] [--threads LIST] [--pin|--no-pin]
 *                 [--reps N] [--ms N] [--outdir DIR] [--csv FILE]
 *                 [--json FILE] [--no-plots] [--list] [--version] [-h]
 *
 * main.c: the options and the registry of families.  The method:
 * harness.c; the families: one file each (bench.h lists them); the manual:
 * man/rseqkit-bench.1; the long form: doc/BENCHMARKS.md.
 *
 * Exit status: 0 all rows passed their checks, 1 a check failed or an
 * output file could not be written (or the output directory is not
 * writable: found before the run), 2 bad usage.
 */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bench.h"

/* The registry: the families, in the order they run and print. */
static const struct family *const families[] = {
	&fam_cpu, &fam_counter, &fam_lock, &fam_stack, &fam_buffers, &fam_pool, &fam_fence,
	&fam_workload, &fam_malloc,
};
#define NFAMILIES (int)(sizeof(families) / sizeof(families[0]))

int ncpus_possible;
bool bench_fallback_set;
int allowed_cpus[CPU_SETSIZE], nallowed;

/* Every row, numbered across the families (the helper processes' requests
 * name rows by that number). */
size_t impl_count(void)
{
	size_t n = 0;

	for (int f = 0; f < NFAMILIES; f++)
		n += families[f]->nimpls;
	return n;
}

const struct impl *impl_at(size_t k)
{
	for (int f = 0; f < NFAMILIES; f++) {
		if (k < families[f]->nimpls)
			return &families[f]->impls[k];
		k -= families[f]->nimpls;
	}
	return NULL;
}

long impl_index(const struct impl *im)
{
	long base = 0;

	for (int f = 0; f < NFAMILIES; f++) {
		const struct family *fam = families[f];
		if (im >= fam->impls && im < fam->impls + fam->nimpls)
			return base + (im - fam->impls);
		base += (long)fam->nimpls;
	}
	return -1;
}

static void usage(FILE *f, const char *argv0)
{
	fprintf(f,
		"usage: %s [options]\n"
		"  --quick          short runs for a smoke test (seconds, not minutes)\n"
		"  --fallback       only the rows without rseq (and mixed) beside what users\n"
		"                   write without it, at 1,2,8,64,512 threads; writes\n"
		"                   fallback.csv and fallback.json, no plots\n"
		"  --ops LIST       operations or families, comma-separated (default: all;\n"
		"                   see --list)\n"
		"  --threads LIST   thread counts, comma-separated (default: 1,CPUS,4*CPUS)\n"
		"  --pin            pin every thread (thread i to the i-th allowed CPU, round-robin)\n"
		"  --no-pin         pin nothing (default: only 1-thread runs are pinned)\n"
		"  --reps N         timed repetitions per row (default 7, quick 3)\n"
		"  --ms N           length of one run in ms (default 150, quick 10)\n"
		"  --outdir DIR     where results.csv, results.json and the plots go (default:\n"
		"                   BUILD/bench for the binary in a build tree, else\n"
		"                   ./rseqkit-bench-results)\n"
		"  --csv FILE       CSV path (default OUTDIR/results.csv)\n"
		"  --json FILE      JSON path (default OUTDIR/results.json)\n"
		"  --no-plots       no SVG plots\n"
		"  --list           print every op,impl pair and exit\n"
		"  --version        print the version and exit\n"
		"  -h, --help       this text\n",
		argv0);
}

static int parse_uint(const char *s, int lo, int hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	return (int)v;
}

static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0777) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0777) && errno != EEXIST)
		return -1;
	return 0;
}

/* Whether a file can be written in dir: a probe file, created and
 * removed; -1 with errno if not. */
static int dir_writable(const char *dir)
{
	char probe[PATH_MAX];
	int fd;

	if (snprintf(probe, sizeof(probe), "%s/.rseqkit-bench-XXXXXX", dir) >= (int)sizeof(probe)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = mkstemp(probe)) < 0)
		return -1;
	close(fd);
	unlink(probe);
	return 0;
}

/* The directory a path's file goes in. */
static void dir_of(const char *path, char *dir, size_t len)
{
	const char *s = strrchr(path, '/');

	if (!s)
		snprintf(dir, len, ".");
	else if (s == path)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)(s - path), path);
}

/* The default output directory: BUILD/bench when this is the binary of the
 * build tree it was built in (BENCH_BUILD_DIR, from the Makefile), else
 * ./rseqkit-bench-results (an installed binary): a directory of its own, so
 * that its files never land among the user's. */
static void default_outdir(char *buf, size_t len)
{
#ifdef BENCH_BUILD_DIR
	char exe[PATH_MAX], built[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = 0;
		if (realpath(BENCH_BUILD_DIR "/bin/rseqkit-bench", built) && !strcmp(exe, built)) {
			snprintf(buf, len, "%s/bench", BENCH_BUILD_DIR);
			return;
		}
	}
#endif
	snprintf(buf, len, "rseqkit-bench-results");
}

/* Whether a name is an op or a family. */
static const struct family *family_named(const char *name)
{
	for (int f = 0; f < NFAMILIES; f++)
		if (!strcmp(families[f]->name, name))
			return families[f];
	return NULL;
}

static bool op_known(const char *op)
{
	for (size_t k = 0; k < impl_count(); k++)
		if (!strcmp(impl_at(k)->op, op))
			return true;
	return false;
}

static bool listed(const char *impl_op, const char *const *ops, int nops)
{
	for (int o = 0; o < nops; o++)
		if (!strcmp(ops[o], impl_op))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	struct config cfg = {.reps = -1, .ms = 0};
	const char *ops_arg = NULL, *threads_arg = NULL, *csv = NULL, *json = NULL, *outdir_arg = NULL;
	char outdir[PATH_MAX] = "";
	bool no_plots = false;
	int ms = -1, fb_rfd = -1, fb_wfd = -1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDS_VALUE                                                                    \
	do {                                                                           \
		if (!v) {                                                              \
			fprintf(stderr, "%s: %s needs a value\n", argv[0], a);         \
			usage(stderr, argv[0]);                                        \
			return 2;                                                      \
		}                                                                      \
		i++;                                                                   \
	} while (0)
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout, argv[0]);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("rseqkit-bench %s\n", rsk_version(NULL, NULL, NULL));
			return 0;
		} else if (!strcmp(a, "--quick")) {
			cfg.quick = true;
		} else if (!strcmp(a, "--fallback")) {
			bench_fallback_set = true;
			no_plots = true;
		} else if (!strcmp(a, "--pin")) {
			cfg.pin_mode = 1;
		} else if (!strcmp(a, "--no-pin")) {
			cfg.pin_mode = -1;
		} else if (!strcmp(a, "--no-plots")) {
			no_plots = true;
		} else if (!strcmp(a, "--helper-serve") && i + 2 < argc) {
			/* hidden: a helper process (child.c) */
			fb_rfd = atoi(argv[i + 1]);
			fb_wfd = atoi(argv[i + 2]);
			i += 2;
		} else if (!strcmp(a, "--malloc-memory") && i + 2 < argc) {
			/* hidden: the malloc family's memory child (malloc.c) */
			return malloc_memory_child(atoi(argv[i + 1]), (unsigned)atoi(argv[i + 2]));
		} else if (!strcmp(a, "--list")) {
			for (size_t k = 0; k < impl_count(); k++) {
				const struct impl *im = impl_at(k);
				if (!(im->flags & IMPL_HAND) || ys_rows_available())
					printf("%s,%s\n", im->op, im->name);
			}
			return 0;
		} else if (!strcmp(a, "--ops") || !strcmp(a, "--threads") || !strcmp(a, "--outdir") ||
			   !strcmp(a, "--csv") || !strcmp(a, "--json")) {
			NEEDS_VALUE;
			*(!strcmp(a, "--ops")	    ? &ops_arg
			  : !strcmp(a, "--threads") ? &threads_arg
			  : !strcmp(a, "--outdir")  ? &outdir_arg
			  : !strcmp(a, "--csv")	    ? &csv
						    : &json) = v;
		} else if (!strcmp(a, "--reps") || !strcmp(a, "--ms")) {
			bool reps = !strcmp(a, "--reps");
			NEEDS_VALUE;
			if ((*(reps ? &cfg.reps : &ms) = parse_uint(v, 1, reps ? 1000 : 60000)) < 0) {
				fprintf(stderr, "%s: bad %s '%s'\n", argv[0], a, v);
				usage(stderr, argv[0]);
				return 2;
			}
		} else {
			fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], a);
			usage(stderr, argv[0]);
			return 2;
		}
	}
	bool reps_given = cfg.reps >= 0;
	if (cfg.reps < 0)
		cfg.reps = cfg.quick ? 3 : 7;
	/* --fallback: 100 ms, as its 512-thread rows take long to start. */
	cfg.ms = ms > 0 ? (unsigned)ms : cfg.quick ? 10 : bench_fallback_set ? 100 : 150;
	cfg.warm_ms = cfg.ms / 3 ? cfg.ms / 3 : 1;

	/* CPUs this process may run on: the pinning targets. */
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &allowed))
				allowed_cpus[nallowed++] = c;
	}
	if (nallowed == 0) {
		allowed_cpus[0] = 0;
		nallowed = 1;
	}
	ncpus_possible = rsk_possible_cpus();
	if (fb_rfd >= 0)
		return helper_serve(fb_rfd, fb_wfd);

	/* Operations, in registry order: those listed, or every family's. */
	const char **ops = calloc(impl_count() + 1, sizeof(*ops));
	int nops = 0;
	char *opsbuf = ops_arg ? strdup(ops_arg) : NULL;
	if (!ops)
		return 1;
	for (size_t k = 0; k < impl_count(); k++) {
		const struct impl *im = impl_at(k);
		if (!listed(im->op, ops, nops))
			ops[nops++] = im->op;
	}
	if (opsbuf) {
		const char **want = calloc(impl_count() + 1, sizeof(*want));
		int nwant = 0;
		if (!want)
			return 1;
		for (char *save, *tok = strtok_r(opsbuf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			const struct family *fam = family_named(tok);
			if (!fam && !op_known(tok)) {
				fprintf(stderr, "%s: unknown operation or family '%s' (see --list)\n",
					argv[0], tok);
				usage(stderr, argv[0]);
				return 2;
			}
			for (int o = 0; o < nops; o++) {
				bool in_fam = false;
				for (size_t j = 0; fam && j < fam->nimpls; j++)
					in_fam |= !strcmp(fam->impls[j].op, ops[o]);
				if ((in_fam || !strcmp(ops[o], tok)) && !listed(ops[o], want, nwant))
					want[nwant++] = ops[o];
			}
		}
		/* registry order */
		int n = 0;
		for (int o = 0; o < nops; o++)
			if (listed(ops[o], want, nwant))
				ops[n++] = ops[o];
		nops = n;
		free(want);
	}
	if (bench_fallback_set) {
		/* The ops that have a fallback row. */
		int n = 0;
		for (int o = 0; o < nops; o++) {
			bool has = false;
			for (size_t k = 0; k < impl_count(); k++)
				has |= !strcmp(impl_at(k)->op, ops[o]) &&
				       !strcmp(impl_at(k)->name, "rseqkit-fallback");
			if (has)
				ops[n++] = ops[o];
		}
		nops = n;
		if (nops == 0) {
			/* make bench with --ops of other families. */
			printf("rseqkit-bench --fallback: none of the operations selected has a "
			       "fallback row\n");
			return 0;
		}
	}
	if (nops == 0) {
		fprintf(stderr, "%s: no operation selected\n", argv[0]);
		usage(stderr, argv[0]);
		return 2;
	}

	int tcounts[MAX_THREAD_COUNTS], ntc = 0;
	if (threads_arg) {
		char *buf = strdup(threads_arg);
		for (char *save, *tok = strtok_r(buf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			int t = parse_uint(tok, 1, 1024);
			if (t < 0 || ntc == MAX_THREAD_COUNTS) {
				fprintf(stderr, "%s: bad thread count '%s'\n", argv[0], tok);
				usage(stderr, argv[0]);
				return 2;
			}
			tcounts[ntc++] = t;
		}
		free(buf);
		if (ntc == 0) {
			fprintf(stderr, "%s: empty --threads\n", argv[0]);
			usage(stderr, argv[0]);
			return 2;
		}
	} else if (bench_fallback_set) {
		/* Where many containers run: a few CPUs, many threads. */
		static const int fb[] = {1, 2, 8, 64, 512};
		for (size_t k = 0; k < sizeof(fb) / sizeof(fb[0]); k++)
			tcounts[ntc++] = fb[k];
	} else {
		tcounts[ntc++] = 1;
		if (nallowed > 1)
			tcounts[ntc++] = nallowed;
		tcounts[ntc++] = 4 * nallowed;
	}

	/* Where the results go, checked before the run: an unwritable
	 * directory is found now, not after minutes of measuring. */
	if (outdir_arg)
		snprintf(outdir, sizeof(outdir), "%s", outdir_arg);
	else
		default_outdir(outdir, sizeof(outdir));
	char csvpath[PATH_MAX + 32], jsonpath[PATH_MAX + 32], dir[PATH_MAX];
	snprintf(csvpath, sizeof(csvpath), "%s", csv ? csv : "");
	snprintf(jsonpath, sizeof(jsonpath), "%s", json ? json : "");
	if (!csv)
		snprintf(csvpath, sizeof(csvpath), "%s/%s.csv", outdir,
			 bench_fallback_set ? "fallback" : "results");
	if (!json)
		snprintf(jsonpath, sizeof(jsonpath), "%s/%s.json", outdir,
			 bench_fallback_set ? "fallback" : "results");
	if ((!csv || !json || !no_plots) && (mkdir_p(outdir) || dir_writable(outdir))) {
		fprintf(stderr, "%s: cannot write in %s: %s (give another with --outdir DIR)\n",
			argv[0], outdir, strerror(errno));
		return 1;
	}
	const char *paths[] = {csvpath, jsonpath};
	for (int k = 0; k < 2; k++) {
		dir_of(paths[k], dir, sizeof(dir));
		if (dir_writable(dir) || (access(paths[k], F_OK) == 0 && access(paths[k], W_OK))) {
			fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], paths[k], strerror(errno));
			return 1;
		}
	}

	machine_facts();
	rsk_init();
	print_banner(&cfg);

	/* The helper processes the selected rows need: started once. */
	for (size_t k = 0; k < impl_count(); k++) {
		const struct impl *im = impl_at(k);
		if (!im->helper || !listed(im->op, ops, nops) || helper_ready(im->helper) ||
		    helper_missing(im->helper))
			continue;
		if (helper_start(im->helper, argv[0]) && !helper_missing(im->helper))
			fprintf(stderr, "rseqkit-bench: cannot start the %s child: its rows fail\n",
				im->helper->name);
	}

	/* Each family in turn; its tables as soon as it is done. */
	struct row *rows = calloc(impl_count() * (size_t)(MAX_THREAD_COUNTS + 2), sizeof(*rows));
	int nrows = 0, failures = 0, rc = 0;
	int first[NFAMILIES], count[NFAMILIES];
	if (!rows)
		return 1;
	for (int f = 0; f < NFAMILIES; f++) {
		const struct family *fam = families[f];
		bool any = false;
		first[f] = nrows;
		count[f] = 0;
		for (size_t k = 0; k < fam->nimpls; k++)
			any |= listed(fam->impls[k].op, ops, nops);
		if (!any)
			continue;
		/* The family's own counts, repetitions and run length, where
		 * the command line leaves them to the bench. */
		struct config fcfg = cfg;
		const int *ftc = tcounts;
		int fntc = ntc;
		if (fam->tcounts && !threads_arg && !bench_fallback_set) {
			ftc = fam->tcounts;
			fntc = fam->ntcounts;
		}
		if (fam->reps && !reps_given && !cfg.quick)
			fcfg.reps = fam->reps;
		if (fam->ms && ms <= 0 && !cfg.quick) {
			fcfg.ms = fam->ms;
			fcfg.warm_ms = fam->ms / 3 ? fam->ms / 3 : 1;
		}
		failures += run_family(fam, ops, nops, ftc, fntc, &fcfg, rows, &nrows);
		count[f] = nrows - first[f];
		if (fam->after && !bench_fallback_set) {
			progress("%s: after the rows", fam->name);
			failures += fam->after(ops, nops, fcfg.ms);
			progress_clear();
		}
		print_family(fam, rows + first[f], count[f]);
	}
	helpers_stop();

	/* What was written, and only that. */
	char wrote[8192] = "";
	size_t wl = 0;
#define WROTE(p) (wl += (size_t)snprintf(wrote + wl, wl < sizeof(wrote) ? sizeof(wrote) - wl : 0, \
					 "%s%s", wl ? ", " : "", (p)))
	if (write_csv(csvpath, rows, nrows) == 0)
		WROTE(csvpath);
	else
		fprintf(stderr, "%s: %s: %s\n", argv[0], csvpath, strerror(errno)), rc = 1;
	if (write_json(jsonpath, rows, nrows, &cfg, families, NFAMILIES) == 0)
		WROTE(jsonpath);
	else
		fprintf(stderr, "%s: %s: %s\n", argv[0], jsonpath, strerror(errno)), rc = 1;
	int nplots = 0;
	for (int f = 0; f < NFAMILIES && !no_plots; f++) {
		char path[PATH_MAX + 64];
		if (!count[f])
			continue;
		snprintf(path, sizeof(path), "%s/%s.svg", outdir, families[f]->name);
		int r = write_plot(path, families[f], rows + first[f], count[f]);
		if (r < 0) {
			fprintf(stderr, "%s: %s: %s\n", argv[0], path, strerror(errno));
			rc = 1;
		} else if (r == 0) {
			nplots++;
		}
	}
	if (wrote[0] || nplots) {
		printf("\nwrote %s", wrote);
		if (nplots)
			printf("%s%d plot%s: %s/*.svg", wrote[0] ? " and " : "", nplots,
			       nplots > 1 ? "s" : "", outdir);
		printf("\n");
	}
	if (failures) {
		fprintf(stderr, "rseqkit-bench: %d row(s) failed their check\n", failures);
		rc = 1;
	}
	for (int i = 0; i < nrows; i++)
		free(rows[i].s);
	free(rows);
	free(opsbuf);
	free(ops);
	return rc;
}
