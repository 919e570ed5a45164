#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Quick stress tier (run by `make check`): every rseqkit-stress test in both
# index modes, with and without release ordering, under
#   - no injection,
#   - a delay loop at each asm injection point (1-6),
#   - yield, signal and 1 ms sleep at every 2nd pass (50%) of the C-level
#     points (7-9) the test's structure has,
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

# The C-level points each test's structure (or, for the spinlock, the
# tool's locked region at 9) passes through.
cpoints() {
	case $1 in
	i) echo 7 ;;
	s) echo 7 9 ;;
	l) echo 7 8 ;;
	b) echo 7 8 9 ;;
	m) echo 7 8 ;;
	p) echo 7 8 9 ;;
	a) echo 7 8 ;;
	esac
}

# Plan: per combination 1 + 6 asm points + 3 actions per C point.
plan=0
for t in s l b m i p a; do
	n=$(cpoints $t | wc -w)
	plan=$((plan + 4 * (7 + 3 * n)))
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
			for p in 1 2 3 4 5 6; do
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
