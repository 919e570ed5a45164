#!/bin/sh
# SPDX-License-Identifier: MIT
# The hand-written yardstick rows of rseqkit-bench (tools/yardstick.h)
# are checked like every row: here the checks must pass with the real
# sections and catch the sections built unarmed (-DYS_NEGATIVE_CONTROL:
# the kernel never restarts them), 8 threads on the machine's CPUs.
BUILD=${BUILD:-build}
CC=${CC:-cc}
BENCH=$BUILD/bin/rseqkit-bench
n=0
fails=0
ok() { # ok COND-STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
if [ ! -x "$BENCH" ]; then
	echo "1..0 # SKIP $BENCH not built"
	exit 0
fi
if ! "$BENCH" --list | grep -q '^stack,hand-written$'; then
	echo "1..0 # SKIP no hand-written rows here (x86-64 with glibc's rseq registration only)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "1..3"
args="--ops stack,ptrbuf --threads 8 --reps 2 --ms 150 --no-plots --outdir $tmp/out"

"$BENCH" $args >"$tmp/good" 2>&1
rc=$?
[ $rc -eq 0 ] && ! grep -q "hand-.*CHECK FAILED" "$tmp/good"
ok $? "armed sections: the hand-written and hand-guaranteed rows pass their checks at 8 threads (exit $rc)"
grep "CHECK FAILED" "$tmp/good" | sed 's/^/# /'

$CC -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude -pthread -O2 -DYS_NEGATIVE_CONTROL \
	-o "$tmp/bench-noarm" tools/bench/*.c "$BUILD/lib/librseqkit.a" -pthread -lm -ldl >"$tmp/cc" 2>&1
ok $? "the negative-control bench builds"
sed 's/^/# /' "$tmp/cc"

# A lost or duplicated item needs a preemption inside a section: rare
# per operation, but millions of operations run; three tries.
caught=1
for try in 1 2 3; do
	"$tmp/bench-noarm" $args >"$tmp/bad" 2>&1
	if grep -q "hand-written.*CHECK FAILED" "$tmp/bad"; then
		caught=0
		break
	fi
done
ok $caught "unarmed sections: the hand-written rows' checks catch lost or duplicated items"
grep "hand-written.*CHECK FAILED" "$tmp/bad" | sed 's/^/# /'

[ $fails -eq 0 ]
