#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The skeleton of doc/GUIDE.md's section "Adding a structure" is
# code a newcomer copies: this test extracts its C blocks, builds them
# against the library's framework (src/internal.h, the injection build of
# the library) with a small main, and runs it - threads raising per-CPU
# maxima, checked exactly - as is and with RSEQKIT_DISABLE=1.  TAP.
# Environment: BUILD (default build), CC (default cc), CFLAGS,
# RSEQKIT_ROOT (source root, default: the current directory).

ROOT=${RSEQKIT_ROOT:-$PWD}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
CC=${CC:-cc}

echo "1..3"
dir=$(mktemp -d "${TMPDIR:-/tmp}/rseqkit-skeleton.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT INT TERM

# The ```c blocks between that heading and the next "## " heading.
awk '/^## [0-9]+\. Adding a structure/ { on = 1; next }
     on && /^## / { on = 0 }
     on && /^```c$/ { code = 1; next }
     on && /^```$/ { code = 0; next }
     on && code { print }' "$ROOT/doc/GUIDE.md" >"$dir/skeleton.inc"
if [ -s "$dir/skeleton.inc" ]; then
	echo "ok 1 - the GUIDE's section 'Adding a structure' has the skeleton ($(wc -l <"$dir/skeleton.inc") lines)"
else
	echo "not ok 1 - no C blocks found in the GUIDE's section 'Adding a structure'"
	echo "not ok 2 - build # nothing to build"
	echo "not ok 3 - run # nothing to run"
	exit 1
fi

cat >"$dir/main.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include "internal.h"
#include "skeleton.inc"

#define THREADS 4
#define NOTES 200000
static struct rsk_max *m;

static void *worker(void *arg)
{
	intptr_t base = (intptr_t)arg * NOTES;

	for (intptr_t v = 1; v <= NOTES; v++)
		if (rsk_max_note(m, base + v) < 0)
			return (void *)1;
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	intptr_t best = 0;
	int bad = 0;

	if (rsk_max_create(&m, RSK_INDEX_CPU) != 0)
		return 2;
	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < THREADS; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	for (int i = 0; i < m->nr; i++)
		if (m->part[i].max > best)
			best = m->part[i].max;
	/* The largest value noted is in some part, and no part holds a
	 * value that was never noted. */
	printf("largest %ld (expected %ld)\n", (long)best, (long)THREADS * NOTES);
	if (bad || best != (intptr_t)THREADS * NOTES || rsk_max_destroy(m) != 0)
		return 1;
	return 0;
}
EOF

if $CC -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror $CFLAGS -DRSEQKIT_INJECT \
	-I"$ROOT/include" -I"$ROOT/src" -I"$dir" -o "$dir/skeleton" "$dir/main.c" \
	"$BUILD/lib/librseqkit-inject.a" -pthread >"$dir/cc.log" 2>&1; then
	echo "ok 2 - the skeleton builds with $CC -Wall -Wextra -Werror"
else
	echo "not ok 2 - the skeleton does not build"
	sed 's/^/# /' "$dir/cc.log"
	echo "not ok 3 - run # not built"
	exit 1
fi

fail=0
for env in "" RSEQKIT_DISABLE=1; do
	if ! env $env timeout 120 "$dir/skeleton" >"$dir/run.log" 2>&1; then
		fail=1
		echo "# failed${env:+ with $env}:"
		sed 's/^/# /' "$dir/run.log"
	fi
done
if [ $fail -eq 0 ]; then
	echo "ok 3 - the skeleton's maxima are exact, with and without rseq"
else
	echo "not ok 3 - the skeleton's maxima are wrong"
	exit 1
fi
