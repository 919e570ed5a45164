#!/bin/sh
# SPDX-License-Identifier: MIT
#
# C++ consumers (TAP): tests/cxx/consumer.cc, a C++17 program that includes
# <rseqkit/rseqkit.h> and uses the counter, stack, spinlock and pointer
# buffer from four std::threads, built with g++ and with clang++ (with
# CC's target flags, such as -m32) against this build's librseqkit.a:
#   - -std=c++17 -Wall -Wextra -Werror: must compile, and run exact (also
#     with RSEQKIT_DISABLE=1: the slow paths);
#   - the same with -pedantic-errors: the headers are ISO C++ (no
#     flexible array member or other extension reaches C++).
#     PEDANTIC_TODO, if ever set, marks that check TODO.
# A missing compiler is a skip naming its package (which fails "make
# check" under CI=true).
#
# Environment (set by "make check"): BUILD, CC, CFLAGS.
set -u
BUILD=${BUILD:-build}
CC=${CC:-gcc}
CFLAGS=${CFLAGS:--O2 -g}
LIB=$BUILD/lib/librseqkit.a
# Empty once no structure header warns under C++ -pedantic.
PEDANTIC_TODO=

n=0
fails=0
ok() { # ok STATUS DESCRIPTION [DIRECTIVE]
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2${3:+ # $3}"
	else
		echo "not ok $n - $2${3:+ # $3}"
		case ${3:-} in TODO*) ;; *) fails=$((fails + 1)) ;; esac
	fi
}
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }

if [ ! -f "$LIB" ]; then
	echo "Bail out! $LIB not built (make lib BUILD=$BUILD)"
	exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rseqkit-cxx.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# CC's target flags (-m32, -m64, --target=...) go to the C++ compilers too.
target=
for w in $CC; do
	case $w in -m32 | -m64 | -mx32 | --target=*) target="$target $w" ;; esac
done
case $CC in *musl*) echo "1..0 # SKIP musl-gcc has no C++ library"; exit 0 ;; esac

for cxx in g++ clang++; do
	case $cxx in g++) pkg=g++ ;; clang++) pkg=clang ;; esac
	# clang++ -m32 links the libstdc++ of the i386 cross gcc's directory
	# whenever that directory exists (a cross gcc installed once leaves
	# it), else g++-multilib's: the cross one is the package to name.
	case $target in *-m32*) [ $cxx = g++ ] && pkg=g++-multilib || pkg=libstdc++-12-dev-i386-cross ;; esac
	if ! command -v $cxx >/dev/null 2>&1; then
		skip "$cxx not installed: C++ consumer not built with it [pkg $pkg]"
		skip "$cxx not installed [pkg $pkg]"
		skip "$cxx not installed [pkg $pkg]"
		continue
	fi
	printf '#include <thread>\nint main() { std::thread t([] {}); t.join(); }\n' >"$tmp/probe.cc"
	# shellcheck disable=SC2086 # $target is a word list
	if ! $cxx $target -std=c++17 -pthread -o "$tmp/probe" "$tmp/probe.cc" >"$tmp/probe.log" 2>&1; then
		sed 's/^/# /' "$tmp/probe.log" | head -n 5
		skip "$cxx$target cannot build a C++ program [pkg $pkg]"
		skip "$cxx$target cannot build a C++ program [pkg $pkg]"
		skip "$cxx$target cannot build a C++ program [pkg $pkg]"
		continue
	fi
	flags="-std=c++17 -Wall -Wextra -Werror"
	# shellcheck disable=SC2086
	$cxx $target $CFLAGS $flags -Iinclude -o "$tmp/consumer" tests/cxx/consumer.cc "$LIB" -pthread \
		>"$tmp/cc.log" 2>&1
	st=$?
	ok $st "$cxx$target $flags: the consumer compiles (without -pedantic)"
	sed 's/^/# /' "$tmp/cc.log" | head -n 20
	if [ $st -eq 0 ]; then
		"$tmp/consumer" >"$tmp/run.out" 2>&1 && RSEQKIT_DISABLE=1 "$tmp/consumer" >>"$tmp/run.out" 2>&1
		ok $? "$cxx: the consumer runs exact, with rseq and with RSEQKIT_DISABLE=1"
		sed 's/^/# /' "$tmp/run.out"
	else
		ok 1 "$cxx: the consumer runs (not built)"
	fi
	# shellcheck disable=SC2086
	$cxx $target $CFLAGS $flags -pedantic-errors -Iinclude -fsyntax-only tests/cxx/consumer.cc \
		>"$tmp/cc.log" 2>&1
	st=$?
	ok $st "$cxx$target $flags -pedantic-errors: the headers are ISO C++" \
		"${PEDANTIC_TODO:+TODO $PEDANTIC_TODO}"
	[ $st -eq 0 ] || grep 'error' "$tmp/cc.log" | sed 's/^/# /' | head -n 8
done
echo "1..$n"
[ $fails -eq 0 ]
