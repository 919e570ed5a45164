/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/ungated.c - the rseqkit-ungated rows: the families' loops
 * over the library's operations, compiled again with the gate compiled
 * out of every fast path (bench.h, "Ungated rows").
 *
 * The fast paths are the library's own inline code from its headers;
 * ungated.h, included first, gives each section the plain
 * rsk_arch_<op>_at operation instead of its gated twin: the same index
 * read, loads and commit, no load of the part's gate and no branch on it.
 * For measuring the protocol's cost only: without the gate a slow path
 * elsewhere would not stop these sections.  The slow paths they call are
 * the library's (an abort, no index).
 */
#include "ungated.h"
#define BENCH_UNGATED 1
#include "bench.h"

#include "counter.c"
#include "lock.c"
#include "stack.c"
#include "buffers.c"
