/* SPDX-License-Identifier: MIT */
/* tools/bench/rival-tcmalloc.c - tcmalloc, as Debian's libgoogle-perftools-dev installs it: the pool
 * family's malloc rows run again in a child whose malloc is tcmalloc's. */
#include "bench.h"

const struct helper rival_tcmalloc = {
	.name = "tcmalloc", .env = "LD_PRELOAD", .value = "libtcmalloc_minimal.so.4",
	.library = "libtcmalloc_minimal.so.4", .symbol = "tc_version", .package = "libgoogle-perftools-dev",
};
