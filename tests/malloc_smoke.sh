#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Ordinary programs under LD_PRELOAD of librseqkit-malloc.so: each one's
# output must equal its output without it (ls -l, sort of a generated
# file, a threaded python3 script, perl if present), also with
# RSEQKIT_DISABLE=1 (no rseq: every operation through the gates' slow
# path), RSEQKIT_MALLOC_INDEX=cid and RSEQKIT_MALLOC_CHECK=1.
BUILD=${BUILD:-build}
SO=$(cd "$BUILD/lib" 2>/dev/null && pwd)/librseqkit-malloc.so
if [ ! -e "$SO" ]; then
	echo "1..0 # SKIP $SO not built"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
awk 'BEGIN { srand(7); for (i = 0; i < 200000; i++) printf "%08d %s\n", int(rand() * 1e8), substr("abcdefghij", 1 + i % 10) }' >"$tmp/in.txt"
cat >"$tmp/t.py" <<'PY'
import threading, random, hashlib
out = [None] * 8
def work(k):
    r = random.Random(k); keep = []; h = hashlib.sha256()
    for i in range(15000):
        s = bytes([k]) * r.randrange(1, 3000)
        keep.append(s)
        if len(keep) > 200:
            h.update(keep.pop(r.randrange(len(keep))))
    out[k] = h.hexdigest()
ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print("\n".join(out)); print(sorted({i: str(i) * 3 for i in range(50000)}.items())[-1])
PY

n=0
run() { # name, command...
	name=$1
	shift
	for env in "" "RSEQKIT_DISABLE=1" "RSEQKIT_MALLOC_INDEX=cid" "RSEQKIT_MALLOC_CHECK=1"; do
		n=$((n + 1))
		"$@" >"$tmp/want" 2>&1
		want=$?
		env $env LD_PRELOAD="$SO" "$@" >"$tmp/got" 2>&1
		got=$?
		if [ "$got" = "$want" ] && cmp -s "$tmp/want" "$tmp/got"; then
			echo "ok $n - $name ${env:-(default)}: same output and status ($got) as without"
		else
			echo "not ok $n - $name ${env:-(default)}: status $got (want $want), output differs:"
			diff "$tmp/want" "$tmp/got" | head -5 | sed 's/^/# /'
		fi
	done
}
have_perl=0
command -v perl >/dev/null 2>&1 && have_perl=1
have_py=0
command -v python3 >/dev/null 2>&1 && have_py=1
echo "1..$((4 * (2 + have_perl + have_py)))"
run "ls -lR /usr/include/linux" ls -lR /usr/include/linux
run "sort of 200000 lines" sort "$tmp/in.txt"
[ $have_py = 1 ] && run "python3 threads" python3 "$tmp/t.py"
[ $have_perl = 1 ] && run "perl hashes" perl -e 'my %h; $h{$_} = "x" x ($_ % 300) for 1..100000; my $s = 0; $s += length $h{$_} for keys %h; print "$s\n"; print join(",", (sort { $a <=> $b } keys %h)[0..5]), "\n"'
exit 0
