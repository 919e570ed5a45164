#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs every example program (examples/*.c, built into $BUILD/examples/ by
# "make examples", part of "make check"); each checks its own result and
# exits non-zero if it is wrong.  Each runs twice: as is, and with
# RSEQKIT_DISABLE=1 (every operation on the slow paths: same results).
# TAP.  Environment: BUILD (default build), RSEQKIT_ROOT (source root,
# default: the current directory).

ROOT=${RSEQKIT_ROOT:-$PWD}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac

n=0
failed=0
tmp=$(mktemp "${TMPDIR:-/tmp}/rseqkit-examples.XXXXXX") || exit 1
trap 'rm -f "$tmp"' EXIT INT TERM

for src in "$ROOT"/examples/*.c; do
	name=${src##*/}
	name=${name%.c}
	bin=$BUILD/examples/$name
	for env in "" RSEQKIT_DISABLE=1; do
		n=$((n + 1))
		what="examples/$name${env:+ ($env)}"
		if [ ! -x "$bin" ]; then
			echo "not ok $n - $what: $bin not built (make examples)"
			failed=$((failed + 1))
			continue
		fi
		env $env timeout 120 "$bin" >"$tmp" 2>&1
		status=$?
		if [ $status -eq 0 ]; then
			echo "ok $n - $what"
		else
			echo "not ok $n - $what: exit status $status"
			failed=$((failed + 1))
		fi
		sed 's/^/# /' "$tmp"
	done
done
echo "1..$n"
[ $failed -eq 0 ]
