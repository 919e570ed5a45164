#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Quick stress tier (run by `make check`): every rseqkit-stress test in both
# index modes, with and without release ordering, under
#   - no injection,
#   - a delay loop at each asm injection point (1-4) the test passes,
#   - yield, signal and 1 ms sleep at every 2nd pass (50%) of the C-level
#     points (7-9) the test passes,
# (the points of a test: rseqkit-stress -T TEST -P)
# with 6 threads per CPU and modest repetitions (a few minutes on 2 cores).
# The full matrix is tests/long/stress_long.sh (`make check-long`).
BUILD=${BUILD:-build}
STRESS=$BUILD/bin/rseqkit-stress
LOOPS=2000
REPS=4000
SLEEP_REPS=100

if [ ! -x "$STRESS" ]; then
	echo "1..0 # SKIP $STRESS not built"
	exit 0
fi
if ! "$STRESS" -c; then
	echo "1..0 # SKIP rseq cannot be used here"
	exit 0
fi
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
THREADS=$((6 * cpus))

# The asm (1-6) and C-level (7-9) points each test passes, as the tool
# says (it refuses the others).
apoints() { for p in $("$STRESS" -T "$1" -P); do [ "$p" -lt 7 ] && echo "$p"; done; }
cpoints() { for p in $("$STRESS" -T "$1" -P); do [ "$p" -ge 7 ] && echo "$p"; done; }

# Plan: per combination 1 + the asm points + 3 actions per C point.
plan=0
for t in s l b m i p a; do
	a=$(apoints $t | wc -w)
	n=$(cpoints $t | wc -w)
	plan=$((plan + 4 * (1 + a + 3 * n)))
done
echo "1..$plan"

n=0
fails=0
run() {
	n=$((n + 1))
	out=$("$STRESS" "$@" 2>&1)
	rc=$?
	last=$(printf '%s\n' "$out" | tail -n 1)
	if [ $rc -eq 0 ]; then
		echo "ok $n - $* # $last"
	else
		echo "not ok $n - $* (exit $rc)"
		printf '%s\n' "$out" | sed 's/^/# /'
		fails=$((fails + 1))
	fi
}

for t in s l b m i p a; do
	for mode in cpu cid; do
		for rel in "" -M; do
			set -- -T $t -I $mode $rel -t $THREADS
			run "$@" -r $REPS
			for p in $(apoints $t); do
				run "$@" -r $REPS -$p $LOOPS
			done
			for p in $(cpoints $t); do
				run "$@" -r $REPS -$p -1 -m 2 -y
				run "$@" -r $REPS -$p -1 -m 2 -k
				run "$@" -r $SLEEP_REPS -$p -1 -m 2 -s 1
			done
		done
	done
done
exit $((fails > 0))
