#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Ordinary programs under LD_PRELOAD of librseqkit-malloc.so: each one's
# output must equal its output without it (ls -l, sort of a generated
# file, a threaded python3 script, perl and a C++ program if present),
# also with RSEQKIT_DISABLE=1 (no rseq: every operation through the
# gates' slow path), RSEQKIT_MALLOC_INDEX=cid and RSEQKIT_MALLOC_CHECK=1.
BUILD=${BUILD:-build}
SO=$(cd "$BUILD/lib" 2>/dev/null && pwd)/librseqkit-malloc.so
if [ ! -e "$SO" ]; then
	echo "1..0 # SKIP $SO not built"
	exit 0
fi
# The system's programs are of the machine's own ELF class: a library of
# another (a gcc -m32 build's) cannot be preloaded into them.  That
# build's allocator is tested by the programs built with it instead
# (malloc_conform, malloc_stress, malloc_check).
elf_class() { od -An -tx1 -j4 -N1 "$1" | tr -d ' \n'; }
if [ "$(elf_class "$SO")" != "$(elf_class /bin/sh)" ]; then
	echo "1..0 # SKIP $SO is not of the ELF class of this system's programs (a 32-bit build on a 64-bit system): nothing to preload it into"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
awk 'BEGIN { srand(7); for (i = 0; i < 100000; i++) printf "%08d %s\n", int(rand() * 1e8), substr("abcdefghij", 1 + i % 10) }' >"$tmp/in.txt"
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
	"$@" >"$tmp/want" 2>&1
	want=$?
	for env in "" "RSEQKIT_DISABLE=1" "RSEQKIT_MALLOC_INDEX=cid" "RSEQKIT_MALLOC_CHECK=1"; do
		n=$((n + 1))
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
# A C++ program: operators new and delete (arrays, over-aligned, nothrow,
# std::bad_alloc thrown through the allocator's operator new).
have_cxx=0
CXX=${CXX:-g++}
if command -v "$CXX" >/dev/null 2>&1; then
	cat >"$tmp/c.cc" <<'CC'
#include <cstdint>
#include <cstdio>
#include <map>
#include <new>
#include <string>
struct alignas(256) A {
	char c[300];
};
int main()
{
	std::map<int, std::string> m;
	for (int i = 0; i < 100000; i++)
		m[i] = std::string(i % 100, 'x');
	size_t s = 0;
	for (auto &kv : m)
		s += kv.second.size();
	A *a = new A[3];
	bool al = (uintptr_t)a % 256 == 0;
	delete[] a;
	A *b = new A;
	al = al && (uintptr_t)b % 256 == 0;
	delete b;
	volatile size_t huge = SIZE_MAX / 2;
	void *big = ::operator new(huge, std::nothrow);
	bool threw = false;
	try {
		char *x = new char[huge];
		x[0] = 1;
	} catch (std::bad_alloc &) {
		threw = true;
	}
	std::printf("%zu %d %d %d\n", s, al, big == nullptr, threw);
	return 0;
}
CC
	"$CXX" -O2 -std=c++17 -o "$tmp/cxx" "$tmp/c.cc" >"$tmp/cxx.log" 2>&1 && have_cxx=1
fi
have_perl=0
command -v perl >/dev/null 2>&1 && have_perl=1
have_py=0
command -v python3 >/dev/null 2>&1 && have_py=1
echo "1..$((4 * (2 + have_perl + have_py + have_cxx) + have_cxx))"
run "ls -lR /usr/include/linux" ls -lR /usr/include/linux
run "sort of 100000 lines" sort "$tmp/in.txt"
[ $have_py = 1 ] && run "python3 threads" python3 "$tmp/t.py"
[ $have_perl = 1 ] && run "perl hashes" perl -e 'my %h; $h{$_} = "x" x ($_ % 300) for 1..100000; my $s = 0; $s += length $h{$_} for keys %h; print "$s\n"; print join(",", (sort { $a <=> $b } keys %h)[0..5]), "\n"'
if [ $have_cxx = 1 ]; then
	run "C++ new/delete" "$tmp/cxx"
	n=$((n + 1))
	LD_DEBUG=bindings LD_PRELOAD="$SO" "$tmp/cxx" 2>&1 >/dev/null |
		grep -q "to $SO.*normal symbol \`_ZnwmSt11align_val_t'\|to $SO.*normal symbol \`_ZnwjSt11align_val_t'"
	if [ $? -eq 0 ]; then
		echo "ok $n - the C++ program's aligned operator new binds to librseqkit-malloc.so"
	else
		echo "not ok $n - the C++ program's aligned operator new does not bind to librseqkit-malloc.so"
	fi
else
	echo "# no C++ compiler ($CXX): the C++ program was not run"
fi
exit 0
