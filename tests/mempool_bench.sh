#!/bin/sh
# SPDX-License-Identifier: MIT
#
# mempool-bench --quick runs (TAP): exits 0 (its sums are right) and prints
# every row.  No figure is checked: timings are for people, not tests.
# Environment: BUILD (default build).
BUILD=${BUILD:-build}
B=$BUILD/bin/mempool-bench
if [ ! -x "$B" ]; then
	echo "1..1"
	echo "not ok 1 - $B not built (make tests)"
	exit 1
fi
out=$("$B" --quick 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
n=0
failed=0
ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
[ $rc -eq 0 ]
ok $? "mempool-bench --quick exits 0 (status $rc)"
for row in "alloc+free per-CPU object" "counter add, 1 pinned thread" "memory: pool-backed counters" \
	"memory: rsk_counter" "memory: per-thread arrays" "time to sum all"; do
	printf '%s\n' "$out" | grep -q "$row"
	ok $? "row: $row"
done
echo "1..$n"
[ $failed -eq 0 ]
