/* SPDX-License-Identifier: MIT */
/*
 * rseqkit-info - what restartable sequences look like in this process.
 *
 *   rseqkit-info            for a person
 *   rseqkit-info --json     one JSON object
 *   rseqkit-info --version  the version of rseqkit
 *
 * Exits 0 whether or not rseq is available; 2 on a bad argument.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rseqkit/rseqkit.h>
#include "../src/env.h" /* rsk_env_bool_: the library's reader of switches */

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static const char *yes_no(bool b)
{
	return b ? "yes" : "no";
}

/* Why the time-slice extension is or is not offered (rsk_slice_begin(3)). */
static const char *slice_why(const struct rsk_status *st)
{
	if (st->slice_ext_available)
		return "rsk_spinlock and gate holders request it";
	if (!st->available)
		return "no rseq";
	if (st->feature_size < RSK_ABI_SLICE_FEATURE_SIZE)
		return "kernel before 7.0";
	if (st->registered_size <= RSK_ABI_LEGACY_LEN)
		return "32-byte registration: offered to longer ones only";
	if (rsk_env_bool_("RSEQKIT_NO_SLICE", 0))
		return "RSEQKIT_NO_SLICE set";
	return "kernel built without it, or rseq_slice_ext=0";
}

int main(int argc, char **argv)
{
	struct rsk_status st;
	int json = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("rseqkit-info %s\n", rsk_version(NULL, NULL, NULL));
			return 0;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("usage: %s [--json] [--version]\n", argv[0]);
			return 0;
		} else {
			fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--json] [--version]\n",
				argv[0], argv[i], argv[0]);
			return 2;
		}
	}
	rsk_status(&st);
	int cpu = rsk_cpu();
	if (json) {
		/* "available" stays the first key: tests/qemu/ find the object by it. */
		printf("{\"available\": %s, \"reason\": ", st.available ? "true" : "false");
		json_string(st.reason);
		printf(", \"error\": %d, \"owner\": \"%s\", \"arch\": \"%s\", \"version\": \"%s\"",
		       st.error, rsk_owner_name(st.owner), RSK_ARCH_NAME, rsk_version(NULL, NULL, NULL));
		printf(", \"feature_size\": %u, \"kernel_align\": %u, \"registered_size\": %u",
		       st.feature_size, st.kernel_align, st.registered_size);
		printf(", \"cpu\": %d, \"mm_cid\": %d, \"node\": %d", cpu, rsk_mm_cid(), rsk_node());
		printf(", \"mm_cid_available\": %s, \"node_id_available\": %s",
		       st.mm_cid_available ? "true" : "false",
		       st.node_id_available ? "true" : "false");
		printf(", \"membarrier_rseq\": %s, \"possible_cpus\": %d",
		       st.membarrier_rseq ? "true" : "false", st.possible_cpus);
		printf(", \"slice_ext_available\": %s", st.slice_ext_available ? "true" : "false");
		printf(", \"thread_registered\": %s", st.thread_registered ? "true" : "false");
		/* The progress layer's counters of this (short-lived) process:
		 * mostly zeros, but the key is where tools look for them. */
		struct rsk_stats ps;
		rsk_stats_process(&ps);
		printf(", \"stats\": {\"aborts\": %llu, \"slow_paths\": %llu, \"fences\": %llu, "
		       "\"gate_waits\": %llu}}\n",
		       (unsigned long long)ps.aborts, (unsigned long long)ps.slow_paths,
		       (unsigned long long)ps.fences, (unsigned long long)ps.gate_waits);
		return 0;
	}
	/* One label column, wide enough for the longest label. */
#define ROW(label, ...) (printf("%-22s", label ":"), printf(__VA_ARGS__), putchar('\n'))
	ROW("rseqkit version", "%s (headers %s)", rsk_version(NULL, NULL, NULL),
	    RSEQKIT_VERSION_STRING);
	ROW("rseq available", "%s (%s)", yes_no(st.available), st.reason);
	if (st.error)
		ROW("error", "%s", strerror(st.error));
	ROW("owner", "%s", rsk_owner_name(st.owner));
	ROW("architecture", "%s", RSK_ARCH_NAME);
	ROW("kernel feature size", "%u (alignment %u)", st.feature_size, st.kernel_align);
	ROW("registered size", "%u", st.registered_size);
	ROW("this thread", "%s", st.thread_registered ? "registered" : "not registered");
	ROW("current cpu", "%d", cpu);
	ROW("mm_cid", "%d (%s)", rsk_mm_cid(),
	    st.mm_cid_available ? "kernel" : "unavailable: current CPU used");
	ROW("numa node", "%d (%s)", rsk_node(),
	    st.node_id_available ? "kernel node_id" : "getcpu(2)");
	ROW("membarrier rseq", "%s", yes_no(st.membarrier_rseq));
	ROW("possible cpus", "%d", st.possible_cpus);
	ROW("slice extension", "%s (%s)", yes_no(st.slice_ext_available), slice_why(&st));
	struct rsk_stats ps;
	rsk_stats_process(&ps);
	ROW("stats", "%llu aborts, %llu slow paths, %llu fences, %llu gate waits",
	    (unsigned long long)ps.aborts, (unsigned long long)ps.slow_paths,
	    (unsigned long long)ps.fences, (unsigned long long)ps.gate_waits);
#undef ROW
	return 0;
}
