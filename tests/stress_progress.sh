#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The progress protocol under stress (run by `make check`): every
# rseqkit-stress test, in both index modes,
#   - with every 2nd and every 3rd thread unregistered (-D 2, -D 3): slow
#     paths and critical sections on the same parts at once,
#   - with the slow path after the first abort (-f 1) and delays in the asm,
#   - with no rseq at all (-d),
#   - the remote test (-T r) with signals and yields at the C points,
#   - the quick settings again with glibc's registration off (the library
#     registers) and under valgrind (no rseq: slow paths), if installed.
# Each run checks its own invariant (sums, every item exactly once).
BUILD=${BUILD:-build}
STRESS=$BUILD/bin/rseqkit-stress

if [ ! -x "$STRESS" ]; then
	echo "1..0 # SKIP $STRESS not built"
	exit 0
fi
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
THREADS=$((6 * cpus))
REPS=2000
TESTS="s l b m i r p"
# Valgrind must be able to run this very binary (i386 needs libc6-dbg:i386).
have_valgrind=0
command -v valgrind >/dev/null 2>&1 && valgrind -q "$STRESS" -h >/dev/null 2>&1 && have_valgrind=1

ntests=$(echo $TESTS | wc -w)
plan=$((2 * ntests * 6 + ntests + 1 + 2 * 2 + ntests + ntests))
echo "1..$plan"

n=0
fails=0
run() {
	n=$((n + 1))
	out=$("$@" 2>&1)
	rc=$?
	last=$(printf '%s\n' "$out" | tail -n 1)
	case $rc:$last in
	0:*OK)
		echo "ok $n - $* # $last" ;;
	*)
		echo "not ok $n - $* (exit $rc)"
		printf '%s\n' "$out" | sed 's/^/# /'
		fails=$((fails + 1)) ;;
	esac
}

for mode in cpu cid; do
	for t in $TESTS; do
		set -- "$STRESS" -T $t -I $mode -t $THREADS -r $REPS
		run "$@" -D 2
		run "$@" -D 3
		run "$@" -D 2 -2 1000
		run "$@" -f 1 -2 2000
		# The last asm point the test passes (4, or 3 where its
		# operations have no fourth).
		last=$(for p in $("$STRESS" -T $t -P); do [ "$p" -lt 7 ] && echo "$p"; done | tail -n 1)
		run "$@" -f 1 -D 3 -"$last" 2000
		run "$@" -M -D 2 -y -7 -1 -m 2
	done
done
for t in $TESTS; do
	run "$STRESS" -T $t -d -t $THREADS -r $REPS
done
# No rseq: the spinlock is a compare-and-swap (spinlock.c), here with
# yields while it is held (point 9), so that holders overlap with takers:
# a lock that is not atomic loses updates (seen: 9465 of 80000).
run "$STRESS" -T s -d -t $THREADS -r $REPS -9 -1 -m 2 -y
for mode in cpu cid; do
	run "$STRESS" -T r -I $mode -t $THREADS -r $REPS -9 -1 -m 2 -k
	run "$STRESS" -T r -I $mode -t $THREADS -r $REPS -9 -1 -m 2 -y -D 2
done
for t in $TESTS; do
	run env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$STRESS" -T $t -t $THREADS -r $REPS -D 3 -2 1000
done
for t in $TESTS; do
	if [ $have_valgrind = 1 ]; then
		run valgrind -q --fair-sched=yes --error-exitcode=3 "$STRESS" -T $t -t 4 -r 200
	else
		n=$((n + 1))
		if command -v valgrind >/dev/null 2>&1; then
			echo "ok $n # SKIP valgrind cannot run $STRESS here"
		else
			echo "ok $n # SKIP valgrind is not installed [pkg valgrind]"
		fi
	fi
done
exit $((fails > 0))
