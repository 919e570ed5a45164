/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/ungated.h - the gate compiled out of the library's inline
 * fast paths, for the rseqkit-ungated rows alone (ungated.c includes it
 * before any other header).  Never for real use: without the gate a slow
 * path elsewhere cannot stop these sections.
 *
 * The installed headers know nothing of this.  Their sections call the
 * gated arch operations by name, rsk_arch_gated_<op>_at(..., gate)
 * (<rseqkit/percpu.h>, RSK_PERCPU_GATED_); once <rseqkit/arch.h> has
 * defined those functions, the macros below take the names over, so every
 * later call in this translation unit becomes the plain rsk_arch_<op>_at
 * with the same index read, loads and commit, and no load of the gate nor
 * branch on it.  The arch's part and stride sections (x86-64) carry the
 * gate inside their asm: undefining RSK_ARCH_HAS_PART_OPS and
 * RSK_ARCH_HAS_STRIDE_OPS here makes the structures' headers take their
 * generic form, built from the operations above.
 */
#ifndef RSEQKIT_BENCH_UNGATED_H
#define RSEQKIT_BENCH_UNGATED_H

#ifdef RSEQKIT_PERCPU_H
#error "tools/bench/ungated.h must come before <rseqkit/percpu.h>"
#endif

#include <rseqkit/arch.h>

#undef RSK_ARCH_HAS_PART_OPS
#undef RSK_ARCH_HAS_STRIDE_OPS

/* (a, o, i): area, index field offset, index; g: the gate, dropped. */
#define rsk_arch_gated_cmpstore_at(a, o, i, v, e, n, g)                        \
	((void)(g), rsk_arch_cmpstore_at(a, o, i, v, e, n))
#define rsk_arch_gated_cmpstore_release_at(a, o, i, v, e, n, g)                \
	((void)(g), rsk_arch_cmpstore_release_at(a, o, i, v, e, n))
#define rsk_arch_gated_cmpcmpstore_at(a, o, i, v, e, v2, e2, n, g)             \
	((void)(g), rsk_arch_cmpcmpstore_at(a, o, i, v, e, v2, e2, n))
#define rsk_arch_gated_cmpstorestore_at(a, o, i, v, e, v2, n2, n, g)           \
	((void)(g), rsk_arch_cmpstorestore_at(a, o, i, v, e, v2, n2, n))
#define rsk_arch_gated_cmpstorestore_release_at(a, o, i, v, e, v2, n2, n, g)   \
	((void)(g), rsk_arch_cmpstorestore_release_at(a, o, i, v, e, v2, n2, n))
#define rsk_arch_gated_cmpcopystore_at(a, o, i, v, e, d, s, w, n, g)           \
	((void)(g), rsk_arch_cmpcopystore_at(a, o, i, v, e, d, s, w, n))
#define rsk_arch_gated_cmpcopystore_release_at(a, o, i, v, e, d, s, w, n, g)   \
	((void)(g), rsk_arch_cmpcopystore_release_at(a, o, i, v, e, d, s, w, n))
#define rsk_arch_gated_add_at(a, o, i, v, c, g)                                \
	((void)(g), rsk_arch_add_at(a, o, i, v, c))
#define rsk_arch_gated_pop_at(a, o, i, v, x, off, out, g)                      \
	((void)(g), rsk_arch_pop_at(a, o, i, v, x, off, out))
#define rsk_arch_gated_derefadd_at(a, o, i, p, off, inc, g)                    \
	((void)(g), rsk_arch_derefadd_at(a, o, i, p, off, inc))

#endif /* RSEQKIT_BENCH_UNGATED_H */
