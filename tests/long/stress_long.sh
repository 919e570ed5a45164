#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The full stress matrix (`make check-long`; not part of `make check`):
# for every rseqkit-stress test, both index modes, with and without
# release ordering:
#   - a 10000-iteration delay at each injection point 1-9 the test passes
#     (rseqkit-stress -T TEST -P; the tool refuses the others),
#   - yield, signal and 1 ms sleep at 25%, 50% and 100% of the passes
#     (-m 4, -m 2, -m 1) at each C-level point 7-9 the test passes,
# with the tool's defaults (200 threads, 5000 repetitions; sleep runs use
# fewer repetitions: each pass sleeps, and the spinlock test sleeps while
# holding its lock).
BUILD=${BUILD:-build}
STRESS=$BUILD/bin/rseqkit-stress
LOOPS=10000
SLEEP_REPS=${SLEEP_REPS:-100}

if [ ! -x "$STRESS" ]; then
	echo "1..0 # SKIP $STRESS not built"
	exit 0
fi
if ! "$STRESS" -c; then
	echo "1..0 # SKIP rseq cannot be used here"
	exit 0
fi

cpoints() { for p in $("$STRESS" -T "$1" -P); do [ "$p" -ge 7 ] && echo "$p"; done; }
plan=0
for t in s l b m i a; do
	plan=$((plan + 2 * 2 * ($("$STRESS" -T $t -P | wc -w) + 3 * 3 * $(cpoints $t | wc -w))))
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

for t in s l b m i a; do
	for mode in cpu cid; do
		for rel in "" -M; do
			set -- -T $t -I $mode $rel
			for p in $("$STRESS" -T $t -P); do
				run "$@" -$p $LOOPS
			done
			for p in $(cpoints $t); do
				for m in 4 2 1; do
					run "$@" -$p -1 -m $m -y
					run "$@" -$p -1 -m $m -k
					run "$@" -r $SLEEP_REPS -$p -1 -m $m -s 1
				done
			done
		done
	done
done
exit $((fails > 0))
