#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Documentation that must match the code (TAP):
#   - every tool answers --version with its name and rseqkit/version.h's
#     version;
#   - the README's package table names every package of the "optional"
#     group of .ci/packages (the list make deps and .ci/run install);
#   - rseqkit(7) names every architecture the README does;
#   - rseqkit-stress refuses an injection point its test lacks;
#   - the GUIDE's complete example is examples/quota.c;
#   - rsk_mempool_create(3)'s example builds, runs, and reads other CPUs'
#     copies through the documented accessor, never with a plain load of
#     rsk_percpu_ptr(...) (the GUIDE's rule).
#
# Environment (set by "make check"): BUILD, CC, CFLAGS.
set -u
BUILD=${BUILD:-build}
CC=${CC:-cc}
CFLAGS=${CFLAGS:--O2 -g}
n=0
fails=0
ok() { # ok STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}

v=$(awk 'NF == 3 && $2 ~ /^RSEQKIT_VERSION_(MAJOR|MINOR|PATCH)$/ { v = v (v == "" ? "" : ".") $3 }
	END { print v }' include/rseqkit/version.h)
for tool in rseqkit-info rseqkit-stress rseqkit-bench; do
	out=$("$BUILD/bin/$tool" --version 2>&1)
	[ "$out" = "$tool $v" ]
	ok $? "$tool --version prints '$tool $v' (got: $out)"
done

for p in $(grep '^optional|' .ci/packages | cut -d'|' -f2); do
	grep -q "\`$p\`" README.md
	ok $? "README's package table names $p"
done

for a in x86-64 i386 aarch64 arm ppc64 s390x riscv64; do
	grep -q "$a" README.md && sed -n '/^\.SS Architectures/,/^\.S[HS]/p' man/rseqkit.7 | grep -q "$a"
	ok $? "README and rseqkit(7) both name $a"
done

out=$("$BUILD/bin/rseqkit-stress" -T i -4 300 2>&1)
rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'never passes injection point 4'
ok $? "rseqkit-stress -T i -4 300 is refused (exit $rc)"
echo "$out" | head -n 2 | sed 's/^/# /'

# The GUIDE's complete example (section 11) is examples/quota.c as built
# and run by make check: the file after its header comment, line for line.
guide=$(awk '/^\*\*A complete example\*\*, \[`examples\/quota.c`\]/ { on = 1 }
	on && /^```c$/ { code = 1; next }
	on && code && /^```$/ { exit }
	on && code { print }' doc/GUIDE.md)
[ -n "$guide" ] && [ "$guide" = "$(sed '1,/^ \*\/$/d' examples/quota.c)" ]
ok $? "doc/GUIDE.md's complete example is examples/quota.c (after its header comment)"

# rsk_mempool_create(3)'s example, as a program.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rseqkit-docs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
ex=$(sed -n '/^\.SH EXAMPLE/,/^\.EE/p' man/rsk_mempool_create.3 | sed '1,2d;$d' |
	sed 's/\\-/-/g; s/\\e/\\/g')
{
	printf '#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n'
	printf '#include <rseqkit/rseqkit.h>\nint main(void)\n{\n%s\nreturn 0;\n}\n' "$ex"
} >"$tmp/ex.c"
# shellcheck disable=SC2086 # CFLAGS is a word list
$CC -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude -pthread $CFLAGS -o "$tmp/ex" \
	"$tmp/ex.c" "$BUILD/lib/librseqkit.a" -pthread >"$tmp/cc.log" 2>&1 &&
	out=$("$tmp/ex") && echo "$out" | grep -qx 'total: 1'
ok $? "rsk_mempool_create(3)'s example builds with -Wall -Wextra -Werror and runs (total: 1)"
sed 's/^/# /' "$tmp/cc.log" | head -n 10
! echo "$ex" | grep -q 'rsk_percpu_ptr([^)]*) *->'
ok $? "rsk_mempool_create(3)'s example reads no copy with a plain load of rsk_percpu_ptr()"

echo "1..$n"
[ $fails -eq 0 ]
