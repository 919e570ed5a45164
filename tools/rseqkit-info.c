/* SPDX-License-Identifier: MIT */
/*
 * rseqkit-info - what restartable sequences look like in this process.
 *
 *   rseqkit-info          for a person
 *   rseqkit-info --json   one JSON object
 *
 * Exits 0 whether or not rseq is available; 2 on a bad argument.
 */
#include <stdio.h>
#include <string.h>
#include <rseqkit/rseqkit.h>

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

int main(int argc, char **argv)
{
	struct rsk_status st;
	int json = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("usage: %s [--json]\n", argv[0]);
			return 0;
		} else {
			fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--json]\n",
				argv[0], argv[i], argv[0]);
			return 2;
		}
	}
	rsk_status(&st);
	int cpu = rsk_cpu();
	if (json) {
		printf("{\"available\": %s, \"reason\": ", st.available ? "true" : "false");
		json_string(st.reason);
		printf(", \"error\": %d, \"owner\": \"%s\", \"arch\": \"%s\"", st.error,
		       rsk_owner_name(st.owner), RSK_ARCH_NAME);
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
	printf("rseq available:     %s (%s)\n", yes_no(st.available), st.reason);
	if (st.error)
		printf("error:              %s\n", strerror(st.error));
	printf("owner:              %s\n", rsk_owner_name(st.owner));
	printf("architecture:       %s\n", RSK_ARCH_NAME);
	printf("kernel feature size: %u (alignment %u)\n", st.feature_size, st.kernel_align);
	printf("registered size:    %u\n", st.registered_size);
	printf("this thread:        %s\n", st.thread_registered ? "registered" : "not registered");
	printf("current cpu:        %d\n", cpu);
	printf("mm_cid:             %d (%s)\n", rsk_mm_cid(),
	       st.mm_cid_available ? "kernel" : "unavailable: current CPU used");
	printf("numa node:          %d (%s)\n", rsk_node(),
	       st.node_id_available ? "kernel node_id" : "getcpu(2)");
	printf("membarrier rseq:    %s\n", yes_no(st.membarrier_rseq));
	printf("possible cpus:      %d\n", st.possible_cpus);
	printf("slice extension:    %s\n", yes_no(st.slice_ext_available));
	struct rsk_stats ps;
	rsk_stats_process(&ps);
	printf("stats:              %llu aborts, %llu slow paths, %llu fences, %llu gate waits\n",
	       (unsigned long long)ps.aborts, (unsigned long long)ps.slow_paths,
	       (unsigned long long)ps.fences, (unsigned long long)ps.gate_waits);
	return 0;
}
