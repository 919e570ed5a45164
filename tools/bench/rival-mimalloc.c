/* SPDX-License-Identifier: MIT */
/* tools/bench/rival-mimalloc.c - mimalloc, as Debian's libmimalloc-dev installs it: the pool
 * family's malloc rows run again in a child whose malloc is mimalloc's. */
#include "bench.h"

const struct helper rival_mimalloc = {
	.name = "mimalloc", .env = "LD_PRELOAD", .value = "libmimalloc.so.2",
	.library = "libmimalloc.so.2", .symbol = "mi_version", .package = "libmimalloc-dev",
};
