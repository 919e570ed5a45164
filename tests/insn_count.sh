#!/bin/sh
# SPDX-License-Identifier: MIT
# The instruction-count report (tools/insn-count.py, `make insn-count`):
# its walk reproduces hand-worked counts on synthetic objdump text, fails
# (never prints 0) where there is no loop, counts every loop of
# tools/insn-loops.c built with $CC, and fails when a listed loop is
# missing.  Never asserts the targets.
BUILD=${BUILD:-build}
CC=${CC:-cc}
n=0
fails=0
ok() { # ok COND-STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
if ! command -v python3 >/dev/null 2>&1 || ! command -v objdump >/dev/null 2>&1; then
	echo "1..0 # SKIP needs python3 and objdump"
	exit 0
fi
# The loops' hand-written rows, and the report's objdump parsing, are
# x86-64 only: the compiler's target decides (gcc -m32 runs on x86_64 too).
if ! $CC -dM -E -x c /dev/null 2>/dev/null | grep -q '^#define __x86_64__ 1'; then
	echo "1..0 # SKIP the instruction count is for x86-64 builds; CC=$CC targets another"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# Where the stride sections are meant to be in use: the pool counter's
# with both compilers, the pointer buffer's with gcc only.
stride_fns="loop_rsk_pcounter_add4 loop_rsk_copybuf2 loop_rsk_copybuf8"
$CC -dM -E -x c /dev/null 2>/dev/null | grep -q '^#define __clang__' ||
	stride_fns="$stride_fns loop_rsk_ptrbuf"
echo "1..$((6 + $(echo $stride_fns | wc -w)))"

python3 tools/insn-count.py --self-test >"$tmp/self" 2>&1
ok $? "self-test: hand-worked counts on synthetic objdump, failures where there is no loop"
sed 's/^/# /' "$tmp/self" | grep -v '^# ok' | grep -v '^# 1\.\.' | grep -v '^# #'

$CC -std=gnu11 -Wall -Wextra -Werror -O2 -Iinclude -pthread -o "$tmp/loops" tools/insn-loops.c \
	"$BUILD/lib/librseqkit.a" -pthread >"$tmp/cc" 2>&1
ok $? "tools/insn-loops.c builds with $CC -O2 -Iinclude"
sed 's/^/# /' "$tmp/cc"

"$tmp/loops" >"$tmp/run" 2>&1
ok $? "every loop runs and does what it says"
sed 's/^/# /' "$tmp/run"

python3 tools/insn-count.py --src tools/insn-loops.c "$tmp/loops" >"$tmp/report" 2>&1
ok $? "the report finds and counts every loop (exit 0)"
sed 's/^/# /' "$tmp/report"

# Every //@insn line has its row, with a positive count.
want=$(grep -c '^//@insn' tools/insn-loops.c)
got=$(awk '$1 ~ /^loop_/ && $5 ~ /^[0-9]+$/ && $5 > 0' "$tmp/report" | wc -l)
[ "$want" -gt 0 ] && [ "$got" -eq "$want" ]
ok $? "one counted row per listed loop ($got of $want)"

# Where the x86-64 stride sections are meant to be in use (the pointer
# buffer's not with clang: <rseqkit/ptrbuf.h> says why), the pool
# counter's, the copy buffer's and the pointer buffer's loops read the
# index inside the section (a movslq off %fs), not through rsk_index()
# before it.  They silently were not for a while: a revert took their
# definitions away.
for fn in $stride_fns; do
	objdump -d --no-show-raw-insn "$tmp/loops" |
		awk -v f="<$fn>:" '$2 == f { on = 1; next } /^[0-9a-f]+ <.*>:$/ { on = 0 } on' |
		grep -q 'movslq %fs:'
	ok $? "$fn reads the index inside its section (the x86-64 stride section is in use)"
done

# A listed loop that is not in the binary: an error and exit 1, not a 0.
{ cat tools/insn-loops.c; echo "//@insn path=stack impl=rseqkit mode=- ops=1 fn=loop_not_there"; } \
	>"$tmp/src.c"
python3 tools/insn-count.py --src "$tmp/src.c" "$tmp/loops" >"$tmp/bad" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "ERROR: loop_not_there" "$tmp/bad"
ok $? "a missing loop fails the report (exit $rc) with an error naming it"

[ $fails -eq 0 ]
