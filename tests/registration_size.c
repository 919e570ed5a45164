/* SPDX-License-Identifier: MIT */
/*
 * rseqkit's own TLS area against kernels that ask for more (issue 14, item
 * 8): the injection build of the library takes AT_RSEQ_FEATURE_SIZE and
 * AT_RSEQ_ALIGN from RSEQKIT_INJECT_FEATURE_SIZE / RSEQKIT_INJECT_ALIGN.
 * With glibc's registration off (rseqkit registers its own area), each
 * case runs in a child: the registered size must fit in the space that
 * follows the area's head (64 bytes), else be the original 32-byte form;
 * an alignment beyond the area's is refused (owner none).  The kernel must
 * agree (a raw registration of the area with that size answers EBUSY) and
 * adds must commit.
 */
#include "harness.h"

#define OWN_AREA_SPACE 64 /* src/runtime/runtime.c: what follows the head */

struct size_case {
	const char *feature, *align;
	unsigned want_size; /* 0: owner none */
};

static const struct size_case cases[] = {
	{ "28", "32", 32 }, { "33", "64", 33 }, { "64", "64", 64 },  { "65", "64", 32 },
	{ "96", "32", 32 }, { "128", "64", 32 }, { "32", "128", 0 },
};
#define N_CASES (int)(sizeof(cases) / sizeof(cases[0]))

static void child(const struct size_case *c)
{
	struct rsk_status st;

	rsk_status(&st);
	tap_diag("feature size %u, align %u: owner %s, registered %u (%s)", st.feature_size,
		 st.kernel_align, rsk_owner_name(st.owner), st.registered_size, st.reason);
	tap_ok(st.feature_size == (unsigned)atoi(c->feature) &&
		       st.kernel_align == (unsigned)atoi(c->align),
	       "the faked feature size %s and alignment %s are in effect", c->feature, c->align);
	if (c->want_size == 0) {
		tap_ok(!st.available && st.owner == RSK_OWNER_NONE && rsk_index(RSK_INDEX_CPU) == -1,
		       "alignment %s is refused: owner none", c->align);
		return;
	}
	tap_ok(st.available && st.owner == RSK_OWNER_LIBRARY && st.thread_registered,
	       "registered by rseqkit");
	tap_ok(st.registered_size == c->want_size && st.registered_size <= OWN_AREA_SPACE,
	       "registered size %u (want %u, space %d)", st.registered_size, c->want_size,
	       OWN_AREA_SPACE);
	struct rsk_abi_area *area = rsk_area();
	long r = syscall(RSK_ARCH_NR_RSEQ, area, st.registered_size, 0, RSK_ARCH_SIGNATURE);
	tap_ok(r == -1 && errno == EBUSY, "the kernel has exactly that registration (%s)",
	       r == 0 ? "none" : strerror(errno));
	intptr_t v = 0;
	int res = RSK_ABORTED;
	for (int k = 0; k < 1000 && res == RSK_ABORTED; k++) {
		int idx = rsk_index(RSK_INDEX_CPU);
		if (idx < 0)
			break;
		res = rsk_add(RSK_INDEX_CPU, idx, &v, 1);
	}
	tap_ok(res == RSK_OK && v == 1, "an add commits");
}

static void fake(const void *arg)
{
	const struct size_case *c = arg;

	setenv("RSEQKIT_INJECT_FEATURE_SIZE", c->feature, 1);
	setenv("RSEQKIT_INJECT_ALIGN", c->align, 1);
}

int main(int argc, char **argv)
{
	int err;

	if (argc >= 3 && strcmp(argv[1], "--child") == 0) {
		int i = atoi(argv[2]);
		if (i < 0 || i >= N_CASES)
			return 2;
		child(&cases[i]);
		tap_plan(tap_n);
		return tap_done();
	}
	if (!kernel_has_rseq(&err))
		tap_plan_skip_all("the kernel does not answer rseq(2) here");
	for (int i = 0; i < N_CASES; i++) {
		char idx[16], label[64];
		snprintf(idx, sizeof(idx), "%d", i);
		char *cargv[] = { (char *)"/proc/self/exe", (char *)"--child", idx, NULL };
		struct child_spec cs = { cargv, find_mode("own-area"), fake, &cases[i] };
		snprintf(label, sizeof(label), "feature %s align %s", cases[i].feature, cases[i].align);
		relay_child(label, &cs);
	}
	tap_plan(tap_n);
	return tap_done();
}
