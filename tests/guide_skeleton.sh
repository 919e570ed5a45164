#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The GUIDE's two patterns for a per-CPU structure, each built where its
# user builds it:
#   - section 13's skeleton ("Adding a structure") is code a contributor
#     copies into rseqkit: this test extracts its C blocks, builds them
#     against the library's framework (src/internal.h, the injection build
#     of the library) with a small main, and runs it - threads raising
#     per-CPU maxima, checked exactly - as is and with RSEQKIT_DISABLE=1;
#     its header block also compiles as ISO C++ (as every header must);
#   - section 11's pattern for users, a structure of their own in a pool,
#     is its complete example (examples/quota.c; docs.sh checks the GUIDE
#     shows that file): built against an installed copy alone (make
#     install DESTDIR=<tmp>, no -I or -L into the source or build tree)
#     and run, with and without rseq; and section 11 points users at no
#     code that needs the uninstalled src/internal.h.
# TAP.  Environment: BUILD (default build), CC (default cc), CFLAGS,
# RSEQKIT_ROOT (source root, default: the current directory).

ROOT=${RSEQKIT_ROOT:-$PWD}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
CC=${CC:-cc}

echo "1..8"
st=0
dir=$(mktemp -d "${TMPDIR:-/tmp}/rseqkit-skeleton.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT INT TERM

# The ```c blocks between that heading and the next "## " heading; with
# an argument N, only the N-th.
blocks() {
awk -v want="${1:-0}" '/^## [0-9]+\. Adding a structure/ { on = 1; next }
     on && /^## / { on = 0 }
     on && /^```c$/ { n++; code = 1; next }
     on && /^```$/ { code = 0; next }
     on && code && (want == 0 || n == want) { print }' "$ROOT/doc/GUIDE.md"
}

skeleton() {
blocks >"$dir/skeleton.inc"
if [ -s "$dir/skeleton.inc" ]; then
	echo "ok 1 - the GUIDE's section 'Adding a structure' has the skeleton ($(wc -l <"$dir/skeleton.inc") lines)"
else
	echo "not ok 1 - no C blocks found in the GUIDE's section 'Adding a structure'"
	echo "not ok 2 - build # nothing to build"
	echo "not ok 3 - run # nothing to run"
	echo "not ok 4 - C++ # nothing to compile"
	return 1
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
	echo "not ok 4 - C++ # not built"
	return 1
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
	echo "not ok 4 - C++ # not checked"
	return 1
fi

# Its header (the first block) goes in include/rseqkit/, where
# tests/cxx.sh compiles every header as ISO C++: so must it.
blocks 1 >"$dir/skeleton.h"
printf '#include "skeleton.h"\nint main() { return 0; }\n' >"$dir/hdr.cc"
if ! command -v g++ >/dev/null 2>&1; then
	echo "ok 4 # SKIP g++ not installed: the skeleton's header not compiled as C++ [pkg g++]"
elif g++ -std=c++17 -pedantic-errors -Wall -Wextra -Werror -D_GNU_SOURCE -I"$ROOT/include" \
	-I"$dir" -fsyntax-only "$dir/hdr.cc" >"$dir/cxx.log" 2>&1; then
	echo "ok 4 - the skeleton's header compiles as ISO C++ (g++ -std=c++17 -pedantic-errors)"
else
	echo "not ok 4 - the skeleton's header is not valid ISO C++, as tests/cxx.sh requires of headers"
	sed 's/^/# /' "$dir/cxx.log" | head -n 20
	return 1
fi
}
skeleton || st=1

# ---- section 11: the user's pattern, from an installed copy ----
# Its paragraphs that mention section 13 or the framework's internals
# must say they are not installed; and it names its complete example.
sec11=$(awk '/^## 11\. / { on = 1; next } on && /^## / { exit } on { print }' "$ROOT/doc/GUIDE.md")
bad=$(echo "$sec11" | awk 'BEGIN { RS = "" } { p = $0; gsub(/\n/, " ", p) }
	tolower(p) ~ /section 13|internal\.h|rsk_percpu_slow|rsk_percpu_kind/ &&
	p !~ /not installed/ { print p }')
if [ -n "$sec11" ] && [ -z "$bad" ] && echo "$sec11" | grep -q 'examples/quota.c'; then
	echo "ok 5 - GUIDE section 11 points users at its installed-copy pattern, not at src/internal.h"
else
	echo "not ok 5 - GUIDE section 11 sends users to code that needs the uninstalled src/internal.h"
	echo "$bad" | cut -c1-300 | sed 's/^/# /'
	st=1
fi

# A make of our own (not a sub-make of make check's), into a DESTDIR.
inst=$dir/inst
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$ROOT" BUILD="$BUILD" CC="$CC" \
	PREFIX=/usr/local DESTDIR="$inst" install >"$dir/install.log" 2>&1
rc=$?
hdr=$(find "$inst" -path '*/include/rseqkit/rseqkit.h' | head -n 1)
lib=$(find "$inst" -name librseqkit.a | head -n 1)
if [ $rc -eq 0 ] && [ -n "$hdr" ] && [ -n "$lib" ]; then
	echo "ok 6 - make install DESTDIR=<tmp> (headers in ${hdr#"$inst"}, ${lib#"$inst"})"
else
	echo "not ok 6 - make install DESTDIR=<tmp> (exit $rc)"
	tail -n 20 "$dir/install.log" | sed 's/^/# /'
	echo "not ok 7 - build # not installed"
	echo "not ok 8 - run # not installed"
	exit 1
fi
incdir=${hdr%/rseqkit/rseqkit.h}
# From $dir: nothing of the source tree is on the include path.
if (cd "$dir" && $CC -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror $CFLAGS -I"$incdir" \
	-o quota "$ROOT/examples/quota.c" "$lib" -pthread >"$dir/quota-cc.log" 2>&1); then
	echo "ok 7 - section 11's pattern (examples/quota.c) builds against the installed copy alone"
else
	echo "not ok 7 - section 11's pattern does not build against the installed copy"
	sed 's/^/# /' "$dir/quota-cc.log" | head -n 20
	echo "not ok 8 - run # not built"
	exit 1
fi
fail=0
for env in "" RSEQKIT_DISABLE=1; do
	if ! env $env timeout 120 "$dir/quota" >"$dir/quota.log" 2>&1; then
		fail=1
		echo "# failed${env:+ with $env}:"
		sed 's/^/# /' "$dir/quota.log"
	fi
done
if [ $fail -eq 0 ]; then
	echo "ok 8 - it runs exact, with and without rseq ($(head -n 1 "$dir/quota.log"))"
else
	echo "not ok 8 - section 11's pattern, installed, is wrong"
	st=1
fi
exit $st
