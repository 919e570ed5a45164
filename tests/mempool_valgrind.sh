#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The mempool test under valgrind memcheck (TAP): "mempool.t --valgrind"
# runs every check that means something there (not the page accounting
# or NUMA placement, which valgrind's own memory layout changes) - robust
# mode's reports, poisoning, reuse, limits, threads - and memcheck must
# report nothing:
#   valgrind --error-exitcode=99 --leak-check=full -q
# Under valgrind rseq(2) is ENOSYS, so every counter add is a slow path.
# --fair-sched=yes: valgrind runs one thread at a time, and by default a
# thread that wakes from a sleep may wait indefinitely for its turn while
# busy threads keep it; mempool.t's drainer (an exchange every 200 us)
# then never reaches its 20 exchanges and the adders spin through their
# 10 million rounds (seen here: > 11 min; 3.8 s with fair scheduling).
# Environment: BUILD (default build).

BUILD=${BUILD:-build}
T=$BUILD/tests/mempool.t
VG="valgrind --fair-sched=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite -q"

if ! command -v valgrind >/dev/null 2>&1; then
	echo "1..0 # SKIP valgrind is not installed"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# valgrind 3.19 cannot read clang 14's DWARF 5: run a copy without debug
# info then (as tests/valgrind.sh does).
if ! valgrind -q "$T" --help >"$tmp/probe" 2>&1 && grep -q 'Fatal error at startup\|wrong ELF\|cannot execute' "$tmp/probe"; then
	sed 's/^/# /' "$tmp/probe" | head -8
	echo "1..0 # SKIP valgrind cannot start $T here"
	exit 0
fi
if grep -q 'debuginfo reader' "$tmp/probe" && command -v objcopy >/dev/null 2>&1 &&
	objcopy --strip-debug "$T" "$tmp/mempool.t"; then
	echo "# valgrind cannot read this build's debug info: using a stripped copy"
	T=$tmp/mempool.t
fi

n=0
failed=0
ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}

$VG "$T" --valgrind >"$tmp/tap" 2>"$tmp/err"
rc=$?
sed 's/^/# mempool: /' "$tmp/tap"
# The robust checks write their reports to a captured stderr, not to ours;
# what reaches ours is valgrind's.
sed 's/^/# stderr: /' "$tmp/err"
[ "$rc" -ne 99 ] && ! grep -q '^==[0-9]*==' "$tmp/err"
ok $? "memcheck reports nothing (status $rc; 99 = memcheck errors)"
plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$tmp/tap")
points=$(grep -c '^ok \|^not ok ' "$tmp/tap")
bad=$(grep -c '^not ok ' "$tmp/tap")
[ "$rc" -eq 0 ] && [ -n "$plan" ] && [ "$plan" -gt 40 ] && [ "$plan" -eq "$points" ] && [ "$bad" -eq 0 ]
ok $? "all $points of ${plan:-no} planned mempool checks pass under valgrind ($bad failed)"
grep -q '^ok .*robust: double free -> -EALREADY' "$tmp/tap" &&
	grep -q '^ok .*robust: write after free reported at reuse' "$tmp/tap"
ok $? "the robust-mode detections ran under valgrind"

echo "1..$n"
[ "$failed" -eq 0 ]
