#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The paths of threads that run no section: the adds that need no lock
# (the counter's spill word, the mempool counter's copies where no thread
# runs sections) and the pool's per-thread caches (a process without
# rseq).  rseqkit-stress checks the exact total, and that no pool object
# is handed out twice,
#   - with no rseq in the process (-d: RSEQKIT_DISABLE=1), many threads
#     per CPU so that adds on one part race across CPUs and migrations,
#   - mixed: every 2nd thread without an rseq registration (-D 2) adds to
#     the same counter as threads that run sections,
# and, as negative controls, the same runs with the add broken into a
# plain load and store (RSEQKIT_INJECT_BROKEN_SPILL=1, honoured by the
# injection build that rseqkit-stress links) and with a thread cache that
# hands an object out twice (RSEQKIT_INJECT_BROKEN_TCACHE=1): each must
# then FAIL (the pool may also stop in its own corruption check, SIGABRT),
# which shows that the checks see a lost add and a duplicate.
# The spinlock's slow path takes the lock word itself (a swap to the
# thread's value, a fence, a re-check: src/percpu/spinlock.c): mixed runs
# with the windows widened - before and after the swap (8, with
# migrations: -g), before a section's commit (3), inside the region the
# lock guards (9) - and, as negative controls, the same runs with the
# fence or the re-check left out (RSEQKIT_INJECT_BROKEN_FOLD=fence,
# =check): a section and a slow path then hold one lock at once and the
# guarded count comes out wrong (FAILED).  The controls run in cid mode,
# where a part's sections run on any CPU, beside the slow path; in cpu
# mode they only can after the slow thread migrated inside the window,
# which a quick run rarely shows.
BUILD=${BUILD:-build}
STRESS=$BUILD/bin/rseqkit-stress

if [ ! -x "$STRESS" ]; then
	echo "1..0 # SKIP $STRESS not built"
	exit 0
fi
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
THREADS=$((16 * cpus))

echo "1..20"
n=0
fails=0
# check WANT ARGS...: WANT is OK or FAILED, the last word of the verdict.
check() {
	want=$1
	shift
	n=$((n + 1))
	out=$( { "$STRESS" "$@"; } 2>&1)
	rc=$?
	verdict=$(printf '%s\n' "$out" | grep '^rseqkit-stress: test=' | tail -n 1)
	[ $rc -eq 134 ] && ! printf '%s\n' "$out" | grep -q 'handed out\|corrupted' && rc=-1
	case $want:$rc:$verdict in
	OK:0:*" OK") echo "ok $n - $want: $*" ;;
	FAILED:1:*" FAILED: "*) echo "ok $n - $want (negative control): $*" ;;
	CAUGHT:1:*" FAILED: "* | CAUGHT:134:*) echo "ok $n - caught (negative control, exit $rc): $*" ;;
	*)
		echo "not ok $n - want $want: $* (exit $rc)"
		printf '%s\n' "$out" | sed 's/^/# /' | tail -n 5
		fails=$((fails + 1))
		;;
	esac
}

for t in i a; do
	for mode in cpu cid; do
		check OK -T $t -I $mode -d -t $THREADS -r 20000
		check OK -T $t -I $mode -D 2 -t $THREADS -r 20000 -g 200
	done
done
# The pool's thread caches, signal handlers on the same pool included.
for mode in cpu cid; do
	check OK -T p -I $mode -d -t $THREADS -r 20000
done
RSEQKIT_INJECT_BROKEN_TCACHE=1 check CAUGHT -T p -d -t $THREADS -r 20000
RSEQKIT_INJECT_BROKEN_TCACHE=1 check CAUGHT -T p -I cid -d -t $THREADS -r 20000
# control SWITCH ARGS...: a negative control, the injection switch
# SWITCH (NAME=VALUE) set: up to sixteen runs, repetitions doubling up to
# the fourth, and one FAILED is enough.  Each loss is a race, a matter of
# timing and of what else the machine runs (under make check's parallel
# load the fence control has missed eight runs in a row); a control that
# misses sixteen runs in a row fails the test.
control() {
	switch=$1
	shift
	n=$((n + 1))
	reps=20000
	for try in $(seq 16); do
		out=$( { env "$switch" "$STRESS" -r $reps "$@"; } 2>&1)
		rc=$?
		[ $try -lt 4 ] && reps=$((reps * 2))
		verdict=$(printf '%s\n' "$out" | grep '^rseqkit-stress: test=' | tail -n 1)
		case $rc:$verdict in
		1:*" FAILED: "*)
			echo "ok $n - FAILED (negative control, $switch, run $try): $*"
			return
			;;
		esac
	done
	echo "not ok $n - want FAILED, $switch, 16 runs: $* (exit $rc)"
	printf '%s\n' "$out" | sed 's/^/# /' | tail -n 5
	fails=$((fails + 1))
}
# The broken add loses: with no rseq, and mixed (the counter's spill).
for mode in cpu cid; do
	control RSEQKIT_INJECT_BROKEN_SPILL=1 -T i -I $mode -d -t $THREADS
	control RSEQKIT_INJECT_BROKEN_SPILL=1 -T i -I $mode -D 2 -t $THREADS
done
FOLD="-D 2 -t $THREADS -9 200 -g 200"
for mode in cpu cid; do
	check OK -T s -I $mode -r 20000 $FOLD -3 2000 -8 2000
done
# Without the fence a section that read the word free commits after the
# re-read (a long section, -3); without the re-read it commits between the
# swap and the fence (a long window, -8).
control RSEQKIT_INJECT_BROKEN_FOLD=fence -T s -I cid $FOLD -3 5000 -8 5000
control RSEQKIT_INJECT_BROKEN_FOLD=check -T s -I cid $FOLD -3 2000 -8 5000
[ $fails -eq 0 ]
