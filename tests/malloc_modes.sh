#!/bin/sh
# SPDX-License-Identifier: MIT
#
# malloc_stress.t (the allocator's multi-threaded stress, contents checked)
# in every mode the allocator has: no rseq in the process
# (RSEQKIT_DISABLE=1: every operation through the gates' slow path),
# rseqkit registering the threads itself (glibc.pthread.rseq=0), indexed
# by mm_cid, check mode, and the tight small-block loop (-H) with and
# without rseq, and without rseq with the per-thread caches off
# (RSEQKIT_MALLOC_THREAD_CACHE=0); the static program (malloc before the
# constructors, as under qemu in check-kernels and check-cross), with and
# without rseq; and malloc_conform.t and malloc_stress.t with 64 KiB
# system pages emulated on whatever the kernel has (RSEQKIT_MALLOC_PAGE_,
# a test knob: large blocks in whole pages, as on some ppc64le and
# arm64 kernels).  One TAP line per run: its own lines must all be "ok".
BUILD=${BUILD:-build}
T=$BUILD/tests/malloc_stress.t
if [ ! -x "$T" ]; then
	echo "1..0 # SKIP $T not built"
	exit 0
fi
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
n=0
S=$BUILD/tests/static/malloc_stress.t
if [ ! -x "$S" ]; then
	echo "1..0 # SKIP $S not built"
	exit 0
fi
echo "1..15"
run() { # env, args[, test]
	n=$((n + 1))
	t=${3:-$T}
	env $1 "$t" $2 >"$tmp" 2>&1
	rc=$?
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$tmp")
	if [ $rc -eq 0 ] && ! grep -q '^not ok' "$tmp" && [ -n "$plan" ] && [ "$plan" -gt 0 ] &&
		[ "$(grep -c '^ok' "$tmp")" -eq "$plan" ]; then
		echo "ok $n - $1 ${t#"$BUILD"/tests/} $2: its $plan checks pass"
	else
		echo "not ok $n - $1 ${t#"$BUILD"/tests/} $2: exit $rc"
		grep -v '^ok' "$tmp" | head -8 | sed 's/^/# /'
	fi
}
run "RSEQKIT_DISABLE=1" "-n 8000"
run "GLIBC_TUNABLES=glibc.pthread.rseq=0" "-n 8000"
run "RSEQKIT_MALLOC_INDEX=cid" "-n 8000"
run "RSEQKIT_MALLOC_INDEX=cid RSEQKIT_DISABLE=1" "-n 4000"
run "RSEQKIT_MALLOC_CHECK=1" "-n 3000"
run "RSEQKIT_MALLOC_INDEX=cpu" "-H"
run "RSEQKIT_DISABLE=1" "-H -n 5000"
# Without rseq and without the per-thread caches.
run "RSEQKIT_DISABLE=1 RSEQKIT_MALLOC_THREAD_CACHE=0" "-n 8000"
run "RSEQKIT_DISABLE=1 RSEQKIT_MALLOC_THREAD_CACHE=0" "-H -n 5000"
# Static: the allocator starts before rseqkit's constructors run (the
# order of the fork handlers: a thread exiting while fork() runs).
run "RSEQKIT_DISABLE=1" "-t 32 -n 8000" "$S"
run "RSEQKIT_DISABLE=1" "-t 32 -n 8000" "$S"
run "" "-t 32 -n 8000" "$S"
run "RSEQKIT_MALLOC_PAGE_=65536" "" "$BUILD/tests/malloc_conform.t"
run "RSEQKIT_MALLOC_PAGE_=65536" "-n 8000"
run "RSEQKIT_MALLOC_PAGE_=65536 RSEQKIT_DISABLE=1" "-n 4000"
exit 0
