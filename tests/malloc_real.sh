#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Real programs on rseqkit-malloc (TAP): unmodified Debian binaries run
# with LD_PRELOAD=librseqkit-malloc.so, then again with RSEQKIT_DISABLE=1
# as well (every thread without rseq: the allocator's slow paths), and
# each output compared with the same program's under glibc's malloc:
#   python3  tests/malloc/alloc_threads.py: 8 threads building and freeing
#            dicts, lists, strings, byte strings, sets (freed on other
#            threads too), with PYTHONMALLOC=malloc so that every object
#            is the allocator's, not pymalloc's;
#   perl     tests/malloc/hash_strings.pl: hashes and strings;
#   sqlite3  a generated insert/index/select script;
#   sort     a generated file of about 30 MB, two threads;
#   gcc      compiling src/progress/gate.c with -O2 -g: the objects must be
#            byte-identical (cc1 and as are children: they inherit the
#            preload);
#   db_bench fillseq + readrandom (every key found) and fillrandom +
#            readrandom on 2 threads (as many keys found as under glibc).
# Each run has a time limit (timeout 120), so a hang fails, never blocks.
# A missing program is a named skip ([pkg NAME]: a failure under CI=true);
# a missing librseqkit-malloc.so is a failure ("make malloc" builds it).
# Environment: BUILD (default build); RSEQKIT_MALLOC_LIB, another library
# to test in its place.
BUILD=${BUILD:-build}
LIB=${RSEQKIT_MALLOC_LIB:-$BUILD/lib/librseqkit-malloc.so}
case $LIB in /*) ;; *) LIB=$(pwd)/$LIB ;; esac
here=$(cd "$(dirname "$0")" && pwd)
# The scripts: beside this file in tests/, or in the source tree when this
# runs as $(BUILD)/tests/malloc_real.t.
scripts=$here/malloc
[ -d "$scripts" ] || scripts=$(pwd)/tests/malloc
LIMIT=120

if [ ! -r "$LIB" ]; then
	echo "1..1"
	echo "not ok 1 - $LIB not built: 'make malloc' builds it"
	exit 1
fi
# The system's programs are of the machine's own ELF class: a library of
# another (a gcc -m32 build's) cannot be preloaded into them.  That
# build's allocator is tested by the programs built with it instead
# (malloc_conform, malloc_stress, malloc_check).
elf_class() { od -An -tx1 -j4 -N1 "$1" | tr -d ' \n'; }
if [ "$(elf_class "$LIB")" != "$(elf_class /bin/sh)" ]; then
	echo "1..0 # SKIP $LIB is not of the ELF class of this system's programs (a 32-bit build on a 64-bit system): nothing to preload it into"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

n=0
fails=0
ok() { # ok STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
skip() { # skip COUNT REASON
	i=0
	while [ $i -lt "$1" ]; do
		n=$((n + 1))
		i=$((i + 1))
		echo "ok $n # SKIP $2"
	done
}

# run NAME MODE CMD...: CMD's stdout in $tmp/NAME.MODE, its stderr in
# $tmp/NAME.MODE.err, under glibc (MODE glibc), rseqkit-malloc (rsk) or
# rseqkit-malloc without rseq (norseq).  Its exit status, 124 on timeout.
run() {
	name=$1 mode=$2
	shift 2
	case $mode in
	glibc) env -u LD_PRELOAD timeout $LIMIT "$@" ;;
	rsk) env LD_PRELOAD="$LIB" timeout $LIMIT "$@" ;;
	norseq) env LD_PRELOAD="$LIB" RSEQKIT_DISABLE=1 timeout $LIMIT "$@" ;;
	esac >"$tmp/$name.$mode" 2>"$tmp/$name.$mode.err"
}

# check NAME WHAT CMD...: CMD under each mode; two points: with rseq and
# without, each "exit 0 and the same output as under glibc" (a wrong
# glibc run fails both: nothing to compare with).
check() {
	name=$1 what=$2
	shift 2
	run "$name" glibc "$@"
	g=$?
	for mode in rsk norseq; do
		run "$name" $mode "$@"
		rc=$?
		st=1
		[ $g -eq 0 ] && [ $rc -eq 0 ] && cmp -s "$tmp/$name.glibc" "$tmp/$name.$mode" && st=0
		label="rseq"
		[ $mode = norseq ] && label="RSEQKIT_DISABLE=1"
		ok $st "$what under rseqkit-malloc ($label): exit $rc, output as under glibc (exit $g, $(wc -c <"$tmp/$name.glibc") bytes)"
		if [ $st -ne 0 ]; then
			tail -n 5 "$tmp/$name.$mode.err" | sed 's/^/# stderr: /'
			diff "$tmp/$name.glibc" "$tmp/$name.$mode" 2>/dev/null | head -n 6 | sed 's/^/# diff: /'
		fi
	done
}

echo "1..13"

# The library is what the programs get.
env LD_PRELOAD="$LIB" cat /proc/self/maps >"$tmp/maps" 2>"$tmp/maps.err"
grep -qF "$(basename "$LIB")" "$tmp/maps" && ! grep -q "cannot be preloaded" "$tmp/maps.err"
ok $? "LD_PRELOAD=$(basename "$LIB") is loaded into an unmodified program (cat /proc/self/maps)"
sed 's/^/# /' "$tmp/maps.err"

if command -v python3 >/dev/null 2>&1; then
	check python python3 env PYTHONMALLOC=malloc python3 "$scripts/alloc_threads.py" 4 8
else
	skip 2 "python3 not installed [pkg python3]"
fi

if command -v perl >/dev/null 2>&1; then
	check perl perl perl "$scripts/hash_strings.pl" 2
else
	skip 2 "perl not installed [pkg perl]"
fi

if command -v sqlite3 >/dev/null 2>&1; then
	awk 'BEGIN { srand(1); split("alpha beta gamma delta epsilon zeta eta theta", w, " ")
		print "CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v TEXT, n INTEGER);"
		print "BEGIN;"
		for (i = 0; i < 40000; i++) {
			v = ""; m = 1 + int(rand() * 12)
			for (j = 0; j < m; j++) v = v (j ? " " : "") w[1 + int(rand() * 8)]
			printf "INSERT INTO t VALUES(%d,\047%08x\047,\047%s\047,%d);\n", i, int(rand() * 4294967295), v, int(rand() * 1000)
		}
		print "COMMIT;"
		print "CREATE INDEX tk ON t(k);"
		print "SELECT count(*), sum(n) FROM t;"
		print "SELECT substr(k,1,1) AS p, count(*), sum(length(v)) FROM t GROUP BY p ORDER BY p;"
		print "SELECT v, count(*) FROM t GROUP BY v ORDER BY count(*) DESC, v LIMIT 20;"
		print "SELECT length(group_concat(v, \047,\047)) FROM (SELECT v FROM t ORDER BY k, id);"
		print "DELETE FROM t WHERE n % 3 = 0; VACUUM;"
		print "SELECT count(*), max(k), min(v) FROM t;"
	}' >"$tmp/script.sql"
	check sqlite sqlite3 sh -c 'exec sqlite3 :memory: <"$1"' sh "$tmp/script.sql"
else
	skip 2 "sqlite3 not installed [pkg sqlite3]"
fi

# sort: coreutils, always there.
awk 'BEGIN { srand(2); for (i = 0; i < 1300000; i++)
	printf "%08x %d %s\n", int(rand() * 4294967295), int(rand() * 100000), substr("abcdefghijklmnopqrstuvwxyz0123456789", 1 + int(rand() * 30), 1 + int(rand() * 20)) }' >"$tmp/sort.in"
check sort "sort ($(($(wc -c <"$tmp/sort.in") / 1048576)) MiB, 2 threads)" \
	env LC_ALL=C sort --parallel=2 -S 16M -T "$tmp" -k2,2n -k1,1 "$tmp/sort.in"

if command -v gcc >/dev/null 2>&1 && [ -r src/progress/gate.c ]; then
	for mode in glibc rsk norseq; do
		run gcc-$mode $mode gcc -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -O2 -g -c src/progress/gate.c \
			-o "$tmp/progress-$mode.o"
		echo $? >"$tmp/gcc-$mode.rc"
	done
	for mode in rsk norseq; do
		st=1
		[ "$(cat "$tmp/gcc-glibc.rc")" = 0 ] && [ "$(cat "$tmp/gcc-$mode.rc")" = 0 ] &&
			cmp -s "$tmp/progress-glibc.o" "$tmp/progress-$mode.o" && st=0
		label="rseq"
		[ $mode = norseq ] && label="RSEQKIT_DISABLE=1"
		ok $st "gcc -O2 -g -c src/progress/gate.c under rseqkit-malloc ($label): the same object as under glibc"
		[ $st -eq 0 ] || tail -n 5 "$tmp/gcc-$mode.$mode.err" | sed 's/^/# stderr: /'
	done
else
	skip 2 "gcc not installed (or not run from the source tree) [pkg build-essential]"
fi

# db_bench: what it found, not how fast.  fillseq then readrandom finds
# every key; fillrandom on 2 threads then readrandom finds as many as
# under glibc (the keys follow --seed).
if command -v db_bench >/dev/null 2>&1; then
	found() { sed -n 's/.*(\([0-9]* of [0-9]* found\)).*/\1/p' "$1"; }
	for mode in glibc rsk norseq; do
		rm -rf "$tmp/db"
		run db1 $mode db_bench --benchmarks=fillseq,readrandom --num=20000 --reads=20000 \
			--threads=1 --seed=42 --disable_wal=1 --compression_type=none --db="$tmp/db"
		echo $? >"$tmp/db1.$mode.rc"
		rm -rf "$tmp/db"
		run db2 $mode db_bench --benchmarks=fillrandom,readrandom --num=10000 --reads=10000 \
			--threads=2 --seed=42 --disable_wal=1 --compression_type=none --db="$tmp/db"
		echo $? >"$tmp/db2.$mode.rc"
	done
	rm -rf "$tmp/db"
	for mode in rsk norseq; do
		label="rseq"
		[ $mode = norseq ] && label="RSEQKIT_DISABLE=1"
		f1=$(found "$tmp/db1.$mode")
		f2=$(found "$tmp/db2.$mode")
		g2=$(found "$tmp/db2.glibc")
		st=1
		[ "$(cat "$tmp/db1.$mode.rc")" = 0 ] && [ "$(cat "$tmp/db2.$mode.rc")" = 0 ] &&
			[ "$f1" = "20000 of 20000 found" ] && [ -n "$g2" ] && [ "$f2" = "$g2" ] && st=0
		ok $st "db_bench under rseqkit-malloc ($label): fillseq+readrandom $f1; fillrandom+readrandom, 2 threads: $f2 (glibc: $g2)"
		[ $st -eq 0 ] || tail -n 5 "$tmp/db1.$mode.err" "$tmp/db2.$mode.err" | sed 's/^/# stderr: /'
	done
else
	skip 2 "db_bench not installed [pkg rocksdb-tools]"
fi

[ $fails -eq 0 ]
