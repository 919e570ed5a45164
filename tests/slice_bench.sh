#!/bin/sh
# SPDX-License-Identifier: MIT
#
# slice-bench --check runs (TAP): its three rows' sums are exact and the
# rows ran as labelled (on this kernel the extension row runs without the
# extension unless the kernel offers it; make check-slice runs it where it
# does).  No figure is checked: timings are for people, not tests.
# Environment: BUILD (default build).
BUILD=${BUILD:-build}
B=$BUILD/bin/slice-bench
if [ ! -x "$B" ]; then
	echo "1..1"
	echo "not ok 1 - $B not built (make tests)"
	exit 1
fi
out=$("$B" --check --secs 0.3 --threads 4 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
n=0
failed=0
ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
[ $rc -eq 0 ]
ok $? "slice-bench --check exits 0 (status $rc)"
for row in "rsk_spinlock, extension" "rsk_spinlock, without" "pthread mutex" "sums exact; rows as labelled"; do
	printf '%s\n' "$out" | grep -q "$row"
	ok $? "shows: $row"
done
echo "1..$n"
[ $failed -eq 0 ]
