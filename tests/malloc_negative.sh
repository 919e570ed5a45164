#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Negative controls of malloc_stress.t, on librseqkit-malloc-noarm.so (an
# injection build):
# 1. the allocator built on rseqkit's objects whose sections never arm
#    their descriptor, so a thread preempted inside a cache's pop or push
#    is not restarted and two threads on one CPU can take one block or
#    lose one.  The stress's checks must see it (a block with two owners,
#    a child that fails, or the pool's own report and abort) within 10
#    runs of the tight small-block loop; a run where nothing is caught is
#    a preemption that missed the window.
# 2. without rseq (RSEQKIT_DISABLE=1), a thread cache whose pop leaves the
#    object in place (RSEQKIT_INJECT_BROKEN_MCACHE=1), so that it is
#    handed out twice: the stress must see it in one run.
BUILD=${BUILD:-build}
T=$BUILD/tests/malloc_stress.t
SO=$(cd "$BUILD/lib" 2>/dev/null && pwd)/librseqkit-malloc-noarm.so
if [ ! -x "$T" ] || [ ! -e "$SO" ]; then
	echo "1..0 # SKIP $T or $SO not built"
	exit 0
fi
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
echo "1..2"
if ! "$BUILD/bin/rseqkit-stress" -c >/dev/null 2>&1; then
	echo "ok 1 # SKIP rseq cannot be used here (nothing to disarm)"
else
	caught=0
	for try in 1 2 3 4 5 6 7 8 9 10; do
		LD_PRELOAD=$SO "$T" -H -n 8000 >"$tmp" 2>&1
		rc=$?
		if [ $rc -ne 0 ] || grep -q '^not ok' "$tmp"; then
			echo "ok 1 - the stress catches the unarmed caches (try $try, exit $rc)"
			grep -v '^ok' "$tmp" | head -4 | sed 's/^/# /'
			caught=1
			break
		fi
	done
	[ $caught -eq 1 ] ||
		echo "not ok 1 - the stress saw nothing wrong with unarmed caches in 10 runs"
fi
RSEQKIT_DISABLE=1 RSEQKIT_MALLOC_THREAD_CACHE=1 RSEQKIT_INJECT_BROKEN_MCACHE=1 LD_PRELOAD=$SO "$T" -t 16 -n 4000 >"$tmp" 2>&1
rc=$?
if [ $rc -ne 0 ] || grep -q '^not ok' "$tmp"; then
	echo "ok 2 - without rseq, the stress catches a thread cache that hands a block out twice (exit $rc)"
	grep -v '^ok' "$tmp" | head -4 | sed 's/^/# /'
else
	echo "not ok 2 - without rseq, the stress saw nothing wrong with a broken thread cache"
fi
exit 0
