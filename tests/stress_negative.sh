#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Negative control of the stress tests: rseqkit-stress-noarm is built with
# sections that never arm their descriptor, so the kernel never restarts
# them.  With delays widening the windows, every test must then report
# FAILED (loss or duplication detected): proof that the checks of
# rseqkit-stress can see a broken critical section.
#
# The mempool counters (-T a) lose adds that an unarmed section makes
# between its gate check and its add while an exchange of that copy runs
# (point 2, and point 8 inside the exchange's gated window).
# The pool (-T p) may also end in its own corruption guard's abort
# (SIGABRT), which is detection as well, or in a crash right after the
# stress tool's check reported an object handed out twice (also
# detection: the message names it); the shell's "Aborted" notice is
# captured with the output, not left on the terminal.  The counter (-T i)
# cannot be demanded: its section ends in one add-to-memory instruction,
# which an unarmed section still cannot lose on the same CPU; only a
# migration inside the window colliding with an add on the old CPU loses
# a count, too rare for a quick run.  A miss there is a "not ok # TODO"
# (a known gap, listed in make check's summary); a detection is a plain
# "ok" (before, it was "ok # TODO", which prove reports as "TODO passed").
BUILD=${BUILD:-build}
NOARM=$BUILD/bin/rseqkit-stress-noarm
STRESS=$BUILD/bin/rseqkit-stress

if [ ! -x "$NOARM" ]; then
	echo "1..0 # SKIP $NOARM not built"
	exit 0
fi
if ! "$STRESS" -c; then
	echo "1..0 # SKIP rseq cannot be used here"
	exit 0
fi
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
THREADS=$((6 * cpus))

# Delays per test: 3 is after the compare, before the commit; the
# spinlock also gets a delay inside the region its lock protects (9).
delays() {
	case $1 in
	s) echo "-3 2000 -9 2000" ;;
	l | b | m | r) echo "-3 2000" ;;
	p) echo "-3 3000" ;;
	i) echo "-2 5 -g 1 -r 3000000" ;;
	a) echo "-2 2000 -8 20000" ;; # after the gate check; exchange window
	esac
}

echo "1..16"
n=0
fails=0
for t in s l b m p r a i; do
	for mode in cpu cid; do
		n=$((n + 1))
		todo=
		[ $t = i ] && todo=" # TODO an unarmed single-instruction add rarely loses: not demanded"
		# Up to five tries, reps doubling up to the third: a loss has to
		# show at least once (a crash that no check named first is not
		# a detection).
		reps=20000
		detected=
		for try in 1 2 3 4 5; do
			# The braces: the shell's notice of a killed child goes
			# into $out too.
			# shellcheck disable=SC2046
			out=$( { "$NOARM" -T $t -I $mode -t $THREADS -r $reps $(delays $t); } 2>&1)
			rc=$?
			last=$(printf '%s\n' "$out" | grep -v '^Aborted' | tail -n 1)
			case $rc:$last in
			1:*FAILED*) detected=1 && break ;;
			esac
			# The pool's own guard may see the damage first and abort;
			# or the stress tool's check sees an object handed out
			# twice, and the broken pool crashes the process before
			# the verdict.  Either is the damage seen, by name.
			if [ $t = p ] && [ $rc -gt 128 ]; then
				seen=$(printf '%s\n' "$out" | grep -m1 'rseqkit: pool .*corrupted\|^rseqkit-stress: .*handed out')
				if [ -n "$seen" ]; then
					last="seen before the process died (exit $rc): $seen"
					detected=1
					break
				fi
			fi
			[ $try -lt 3 ] && reps=$((reps * 2))
		done
		if [ -n "$detected" ]; then
			echo "ok $n - unarmed -T $t -I $mode: loss detected: $last"
		else
			echo "not ok $n - unarmed -T $t -I $mode: no loss detected (exit $rc)$todo"
			printf '%s\n' "$out" | sed 's/^/# /'
			[ -z "$todo" ] && fails=$((fails + 1))
		fi
	done
done
exit $((fails > 0))
