/* SPDX-License-Identifier: MIT */
/* tools/bench/rival-jemalloc.c - jemalloc, as Debian's libjemalloc-dev installs it: the pool
 * family's malloc rows run again in a child whose malloc is jemalloc's. */
#include "bench.h"

const struct helper rival_jemalloc = {
	.name = "jemalloc", .env = "LD_PRELOAD", .value = "libjemalloc.so.2",
	.library = "libjemalloc.so.2", .symbol = "mallctl", .package = "libjemalloc-dev",
};
