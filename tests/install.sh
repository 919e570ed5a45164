#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The installed library as a consumer sees it (TAP):
#   make install PREFIX=<tmp>, then
#   - a program built with pkg-config links the shared library, runs, reports
#     a CPU and counts with a per-CPU add; the same program linked with the
#     static archive (librseqkit.a only, and fully -static), and as C++;
#   - where CC builds -fsanitize=thread programs: the ThreadSanitizer variant
#     (librseqkit-tsan, rseqkit-tsan.pc) is installed, and a TSan program
#     using a pool across threads gets no report with it, but reports from
#     inside rseqkit with the plain library;
#   - soname librseqkit.so.1; only rsk_* symbols exported, all at version
#     RSEQKIT_1, and exactly those listed in abi/librseqkit.symbols;
#   - every installed header compiles on its own (C), the umbrella header in
#     C++ too, and the arch layer refuses to be included directly.
#
# After an intended change of the exported symbols, update the list with
#   nm -D --defined-only build/lib/librseqkit.so | awk 'NF == 3 { print $3 }' |
#       sed 's/@.*//' | grep -v '^RSEQKIT_' | LC_ALL=C sort > abi/librseqkit.symbols
# and say in the commit why the ABI changed.
#
# Environment (set by "make check"): BUILD (build directory, relative to the
# source root), CC, CFLAGS; RSEQKIT_ROOT (source root, default: the current
# directory); CXX (default: the C++ driver matching CC).
set -u

ROOT=${RSEQKIT_ROOT:-$PWD}
BUILD=${BUILD:-build}
CC=${CC:-gcc}
CFLAGS=${CFLAGS:--O2 -g}

n=0
failed=0
ok() { # ok STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}
skip() {
	n=$((n + 1))
	echo "ok $n # SKIP $1"
}
diag() { sed 's/^/# /' "$@"; }
finish() {
	echo "1..$n"
	[ $failed -eq 0 ]
	exit $?
}

if [ ! -f "$ROOT/Makefile" ] || [ ! -d "$ROOT/include/rseqkit" ]; then
	echo "Bail out! $ROOT is not the rseqkit source root (set RSEQKIT_ROOT)"
	exit 1
fi
for tool in make nm readelf; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "1..0 # SKIP $tool not installed [pkg build-essential]"
		exit 0
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rseqkit-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

# --- install ----------------------------------------------------------------
# A make of our own, not a sub-make of the one running "make check".
# LIBDIR and BINDIR are given, so a 32-bit build installs its tools and
# library where the checks below look (its defaults, lib32 and no tools,
# are checked under "LIBDIR, the 32-bit default" at the end).
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
	make -C "$ROOT" BUILD="$BUILD" CC="$CC" PREFIX="$prefix" LIBDIR="$prefix/lib" \
	BINDIR="$prefix/bin" install >"$tmp/install.log" 2>&1
status=$?
ok $status "make install PREFIX=<tmp> (CC=$CC, BUILD=$BUILD)"
if [ $status -ne 0 ]; then
	tail -n 30 "$tmp/install.log" | diag
	finish
fi
missing=
for f in include/rseqkit/rseqkit.h lib/librseqkit.a lib/librseqkit.so lib/librseqkit.so.1 \
	lib/pkgconfig/rseqkit.pc bin/rseqkit-info share/man/man3/rsk_init.3 \
	share/man/man7/rseqkit.7 share/man/man1/rseqkit-info.1 bin/rseqkit-bench \
	share/man/man1/rseqkit-bench.1 include/rseqkit/malloc.h lib/librseqkit-malloc.a \
	lib/librseqkit-malloc.so lib/librseqkit-malloc.so.0 lib/pkgconfig/rseqkit-malloc.pc \
	share/man/man7/rseqkit-malloc.7 share/man/man3/rsk_malloc.3 share/man/man3/rsk_free.3; do
	[ -e "$prefix/$f" ] || missing="$missing $f"
done
[ -z "$missing" ]
ok $? "installed files present${missing:+ (missing:$missing)}"
"$prefix/bin/rseqkit-info" >"$tmp/info.out" 2>&1
ok $? "installed rseqkit-info runs"

# The benchmark's switches stay in tools/bench (its ungated rows take the
# gate out with tools/bench/ungated.h): no installed header names a BENCH
# symbol.
grep -rlE '_BENCH|BENCH_' "$prefix/include" >"$tmp/bench-hdrs"
[ ! -s "$tmp/bench-hdrs" ]
ok $? "no installed header mentions a BENCH symbol$([ -s "$tmp/bench-hdrs" ] &&
	printf ' (found in: %s)' "$(sed "s|^$prefix/||" "$tmp/bench-hdrs" | tr '\n' ' ')")"

# --- the shared object ------------------------------------------------------
so=$prefix/lib/librseqkit.so
readelf -d "$so" | grep -q 'Library soname: \[librseqkit\.so\.1\]'
ok $? "soname is librseqkit.so.1"

# Every defined dynamic symbol but the version node itself (RSEQKIT_1).
nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | grep -v '^RSEQKIT_' \
	>"$tmp/versioned"
sed 's/@.*//' "$tmp/versioned" | LC_ALL=C sort >"$tmp/symbols"
[ -s "$tmp/symbols" ] && ! grep -qv '^rsk_' "$tmp/symbols"
ok $? "only rsk_* symbols are exported"
grep -v '^rsk_' "$tmp/symbols" | head -n 20 | diag
! grep -q '^rsk_inject_' "$tmp/symbols"
ok $? "no test-only injection symbols (rsk_inject_*) in the installed library"
! grep -qv '@@RSEQKIT_1$' "$tmp/versioned"
ok $? "every exported symbol has version RSEQKIT_1"

list=$ROOT/abi/librseqkit.symbols
if [ -f "$list" ]; then
	diff -u "$list" "$tmp/symbols" >"$tmp/abi.diff"
	status=$?
	ok $status "exported symbols match abi/librseqkit.symbols"
	if [ $status -ne 0 ]; then
		diag "$tmp/abi.diff"
		echo "# if the change is intended, update the list (see the head of tests/install.sh)"
	fi
else
	ok 1 "abi/librseqkit.symbols exists"
fi

# --- rseqkit's malloc, installed ---------------------------------------------
# The preloaded library runs a program; one built with pkg-config
# rseqkit-malloc gets malloc from it; the static archive's rsk_malloc works
# beside the C library's malloc.
mso=$prefix/lib/librseqkit-malloc.so
# An unmodified program of the library's own ELF class (the system's ls
# is 64-bit, and a gcc -m32 build's library cannot be preloaded into it):
# a directory listing, built here with $CC and nothing of rseqkit.
cat >"$tmp/lsdir.c" <<'EOF'
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	struct dirent **names;
	int n = scandir(argc > 1 ? argv[1] : ".", &names, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		puts(names[i]->d_name);
		free(names[i]);
	}
	free(names);
	return n < 0;
}
EOF
out=$($CC $CFLAGS -o "$tmp/lsdir" "$tmp/lsdir.c" 2>&1 &&
	LD_PRELOAD=$mso RSEQKIT_MALLOC_STATS=1 "$tmp/lsdir" "$prefix/lib" 2>&1)
echo "$out" | grep -q 'librseqkit-malloc.a' && echo "$out" | grep -q '^rseqkit-malloc: index'
ok $? "LD_PRELOAD of the installed librseqkit-malloc.so runs a directory listing (and prints its statistics)"
cat >"$tmp/mc.c" <<'EOF'
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <rseqkit/malloc.h>
int main(void)
{
	struct rsk_malloc_stats st;
	void *p = malloc(100), *q = rsk_malloc(100);
	int ok = p != NULL && q != NULL && rsk_malloc_stats(&st, -1) == 0 && st.in_use > 0;
	printf("%d %zu\n", ok, malloc_usable_size(p));
	free(p);
	rsk_free(q);
	return !ok;
}
EOF
if command -v pkg-config >/dev/null 2>&1; then
	mpc=$prefix/lib/pkgconfig
	$CC $CFLAGS $(PKG_CONFIG_PATH=$mpc pkg-config --cflags rseqkit-malloc) -o "$tmp/mc" "$tmp/mc.c" \
		$(PKG_CONFIG_PATH=$mpc pkg-config --libs rseqkit-malloc) >"$tmp/mcc.log" 2>&1 &&
		[ "$(LD_LIBRARY_PATH=$prefix/lib "$tmp/mc")" = "1 112" ]
	ok $? "pkg-config rseqkit-malloc: the program's malloc is rseqkit's (usable size of malloc(100): 112)"
	diag "$tmp/mcc.log"
	$CC $CFLAGS $(PKG_CONFIG_PATH=$mpc pkg-config --cflags rseqkit-malloc) -o "$tmp/mcs" "$tmp/mc.c" \
		"$prefix/lib/librseqkit-malloc.a" -pthread >"$tmp/mcs.log" 2>&1 && "$tmp/mcs" >/dev/null
	ok $? "librseqkit-malloc.a: rsk_malloc beside the C library's malloc"
	diag "$tmp/mcs.log"
else
	skip "pkg-config not installed: rseqkit-malloc.pc not read [pkg pkg-config]"
	skip "pkg-config not installed [pkg pkg-config]"
fi
nm -D --defined-only "$mso" | awk 'NF == 3 { print $3 }' | grep -v '^rsk_' | grep -v '^_Z' | LC_ALL=C sort |
	tr '\n' ' ' >"$tmp/msyms"
ncxx=$(nm -D --defined-only "$mso" | awk 'NF == 3 { print $3 }' | grep -c '^_Z[nd][wal]')
[ "$(cat "$tmp/msyms")" = "aligned_alloc calloc free mallinfo2 malloc malloc_trim malloc_usable_size memalign posix_memalign pvalloc realloc reallocarray valloc " ] &&
	[ "$ncxx" -eq 20 ]
ok $? "librseqkit-malloc.so exports the malloc family, 20 C++ operators new/delete ($ncxx) and rsk_ names only (others: $(cat "$tmp/msyms"))"

# --- a consumer program -----------------------------------------------------
# Valid C and C++: counts 1000 times with a per-CPU add, falling back to a
# separate word when rsk_index() says rseq cannot be used.
cat >"$tmp/consumer.c" <<'EOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <rseqkit/rseqkit.h>

int main(void)
{
	struct rsk_status st;
	int ncpus = rsk_possible_cpus();
	intptr_t *count = (intptr_t *)calloc((size_t)ncpus, sizeof(*count));
	intptr_t slow = 0, sum = 0;
	int fast = 0, cpu, k, i;

	if (count == NULL || rsk_status(&st) != 0)
		return 1;
	for (k = 0; k < 1000; k++) {
		for (;;) {
			int idx = rsk_index(RSK_INDEX_CPU);
			if (idx < 0 || idx >= ncpus) {
				slow++;
				break;
			}
			if (rsk_add(RSK_INDEX_CPU, idx, &count[idx], 1) == RSK_OK) {
				fast++;
				break;
			}
		}
	}
	for (i = 0; i < ncpus; i++)
		sum += count[i];
	cpu = rsk_cpu();
	printf("cpu=%d possible=%d available=%d registered=%d owner=%s fast=%d slow=%ld sum=%ld\n",
	       cpu, ncpus, (int)st.available, st.thread_registered,
	       rsk_owner_name(st.owner), fast, (long)slow, (long)sum);
	if (cpu < 0 || cpu >= ncpus || sum != fast || sum + slow != 1000)
		return 2;
	if (st.available && st.thread_registered && fast != 1000)
		return 3; /* rseq usable, yet the fast path was not taken */
	free(count);
	return 0;
}
EOF
cp "$tmp/consumer.c" "$tmp/consumer.cc"

# run_consumer BINARY DESCRIPTION [ENV...]: run, check the report.
run_consumer() {
	bin=$1
	what=$2
	shift 2
	env "$@" "$bin" >"$tmp/run.out" 2>&1
	status=$?
	[ $status -eq 0 ] && grep -q '^cpu=[0-9][0-9]* .* sum=1000' "$tmp/run.out"
	ok $? "$what: reports a CPU, per-CPU add counts 1000"
	diag "$tmp/run.out"
}

# The C++ driver that matches CC (same target flags, such as -m32).
if [ -z "${CXX:-}" ]; then
	set -- $CC
	cc1=$1
	shift
	case $cc1 in
	*clang*) CXX="$(echo "$cc1" | sed 's/clang/clang++/') $*" ;;
	*musl-gcc*) CXX= ;;
	*gcc*) CXX="$(echo "$cc1" | sed 's/gcc\([^/]*\)$/g++\1/') $*" ;;
	*) CXX="c++ $*" ;;
	esac
	set --
fi
# The package a skip below would need (for the summary of make check).
case $CC in
*-m32*) cxx_pkg=g++-multilib libc_pkg=gcc-multilib ;;
*clang*) cxx_pkg=clang libc_pkg=build-essential ;;
*) cxx_pkg=g++ libc_pkg=build-essential ;;
esac
# have_cxx: it compiles headers; cxx_links: it also builds C++ programs
# for this target (g++ -m32 needs g++-multilib for that).
have_cxx=0
cxx_links=0
if [ -n "$CXX" ] && command -v ${CXX%% *} >/dev/null 2>&1; then
	have_cxx=1
	printf '#include <cstdio>\nint main() { std::puts(""); }\n' >"$tmp/probe.cc"
	$CXX -o "$tmp/probe" "$tmp/probe.cc" >/dev/null 2>&1 && cxx_links=1
fi

if command -v pkg-config >/dev/null 2>&1; then
	PKG_CONFIG_PATH=$prefix/lib/pkgconfig
	export PKG_CONFIG_PATH
	pcprefix=$(pkg-config --variable=prefix rseqkit 2>&1)
	[ "$pcprefix" = "$prefix" ]
	ok $? "rseqkit.pc names the install prefix (got: $pcprefix)"
	cflags=$(pkg-config --cflags rseqkit)
	libs=$(pkg-config --libs rseqkit)
	slibs=$(pkg-config --static --libs rseqkit)

	# Shared.
	$CC $CFLAGS -Wall -Wextra -Werror $cflags -o "$tmp/consumer-shared" "$tmp/consumer.c" \
		$libs >"$tmp/cc.log" 2>&1
	status=$?
	ok $status "consumer links the shared library (pkg-config --cflags --libs)"
	diag "$tmp/cc.log"
	if [ $status -eq 0 ]; then
		readelf -d "$tmp/consumer-shared" | grep -q 'NEEDED.*\[librseqkit\.so\.1\]'
		ok $? "shared consumer needs librseqkit.so.1"
		run_consumer "$tmp/consumer-shared" "shared consumer" LD_LIBRARY_PATH="$prefix/lib"
	fi

	# librseqkit.a, the C library shared.
	static_rsk=$(echo "$slibs" | sed 's/-lrseqkit/-Wl,-Bstatic -lrseqkit -Wl,-Bdynamic/')
	$CC $CFLAGS -Wall -Wextra -Werror $cflags -o "$tmp/consumer-static" "$tmp/consumer.c" \
		$static_rsk >"$tmp/cc.log" 2>&1
	status=$?
	ok $status "consumer links librseqkit.a (pkg-config --static, -Wl,-Bstatic -lrseqkit)"
	diag "$tmp/cc.log"
	if [ $status -eq 0 ]; then
		! readelf -d "$tmp/consumer-static" | grep -q 'NEEDED.*librseqkit'
		ok $? "static consumer does not need librseqkit.so"
		run_consumer "$tmp/consumer-static" "consumer with librseqkit.a"
	fi

	# Fully static (libc's rseq symbols found through weak references).
	printf 'int main(void) { return 0; }\n' >"$tmp/trivial.c"
	if $CC -static -o "$tmp/trivial" "$tmp/trivial.c" >/dev/null 2>&1; then
		$CC $CFLAGS -Wall -Wextra -Werror -static $cflags -o "$tmp/consumer-allstatic" \
			"$tmp/consumer.c" $slibs >"$tmp/cc.log" 2>&1
		status=$?
		ok $status "consumer links fully -static (pkg-config --static)"
		diag "$tmp/cc.log"
		[ $status -eq 0 ] && run_consumer "$tmp/consumer-allstatic" "fully static consumer"
	else
		skip "this toolchain cannot link -static programs (no static libc) [pkg $libc_pkg]"
	fi

	# C++.
	if [ $cxx_links -eq 1 ]; then
		$CXX $CFLAGS -Wall -Wextra -Werror $cflags -o "$tmp/consumer-cxx" \
			"$tmp/consumer.cc" $libs >"$tmp/cc.log" 2>&1
		status=$?
		ok $status "C++ consumer links the shared library ($CXX)"
		diag "$tmp/cc.log"
		[ $status -eq 0 ] &&
			run_consumer "$tmp/consumer-cxx" "C++ consumer" LD_LIBRARY_PATH="$prefix/lib"
	else
		skip "C++ programs cannot be built for CC=$CC (tried: ${CXX:-none}) [pkg $cxx_pkg]"
	fi
else
	skip "pkg-config not installed: consumer programs not built [pkg pkg-config]"
fi

# --- the ThreadSanitizer variant --------------------------------------------
# A program built with -fsanitize=thread that allocates, frees and drains a
# pool across threads, linked as doc/GUIDE.md (section 8) says: with the
# installed rseqkit-tsan.pc it must get 0 reports, from the shared and the
# static variant.  Linked with the plain library it gets reports from
# inside rseqkit (the library's free()/memcpy() on objects another thread
# wrote, ordered by code TSan did not instrument): the negative control.
cat >"$tmp/tsan_pool.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <rseqkit/rseqkit.h>

#define THREADS 4
#define ROUNDS 20000

static struct rsk_pool *pool;
static int stop;

static void *worker(void *arg)
{
	void *held[8];

	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < 8; i++) {
			held[i] = rsk_pool_alloc(pool);
			if (held[i] == NULL)
				return (void *)1;
			memset(held[i], (int)(long)arg, 64); /* the program's own writes */
		}
		for (int i = 0; i < 8; i++)
			if (rsk_pool_free(pool, held[i]) != 0)
				return (void *)1;
	}
	return NULL;
}

static void *drainer(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if (rsk_pool_drain(pool, -1) != 0)
			return (void *)1;
		rsk_pool_trim(pool);
	}
	return NULL;
}

int main(void)
{
	struct rsk_pool_config cfg = { .size = 64, .cache_capacity = 16, .mode = RSK_INDEX_CPU };
	pthread_t t[THREADS], d;
	void *ret;
	int bad = 0;

	if (rsk_pool_create(&pool, &cfg) != 0)
		return 2;
	pthread_create(&d, NULL, drainer, NULL);
	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], &ret);
		bad |= ret != NULL;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(d, &ret);
	bad |= ret != NULL;
	rsk_pool_destroy(pool);
	printf("pool across %d threads with drains: %s\n", THREADS, bad ? "FAILED" : "done");
	return bad;
}
EOF
# run_tsan BINARY: one run, its reports counted (tsan_status, tsan_reports).
run_tsan() {
	env LD_LIBRARY_PATH="$prefix/lib" TSAN_OPTIONS="exitcode=66" "$1" >"$tmp/tsan.out" 2>&1
	tsan_status=$?
	tsan_reports=$(grep -c '^WARNING: ThreadSanitizer' "$tmp/tsan.out")
}
printf 'int main(void) { return 0; }\n' >"$tmp/tsan_probe.c"
if ! $CC $CFLAGS -fsanitize=thread -o "$tmp/tsan_probe" "$tmp/tsan_probe.c" >/dev/null 2>&1; then
	skip "CC=$CC cannot build -fsanitize=thread programs (i386 has no TSan runtime): no TSan variant to try"
	grep -q 'no ThreadSanitizer variant' "$tmp/install.log"
	ok $? "make install says it installs no ThreadSanitizer variant for CC=$CC"
elif ! command -v pkg-config >/dev/null 2>&1; then
	skip "pkg-config not installed: the TSan variant not tried [pkg pkg-config]"
else
	missing=
	for f in lib/librseqkit-tsan.a lib/librseqkit-tsan.so lib/librseqkit-tsan.so.1 \
		lib/pkgconfig/rseqkit-tsan.pc; do
		[ -e "$prefix/$f" ] || missing="$missing $f"
	done
	[ -z "$missing" ]
	ok $? "the ThreadSanitizer variant is installed${missing:+ (missing:$missing)}"
	tcflags=$(pkg-config --cflags rseqkit-tsan)
	tlibs=$(pkg-config --libs rseqkit-tsan)
	# The shared variant, then the static one (-Wl,-Bstatic as above).
	for kind in shared static; do
		if [ $kind = shared ]; then
			link=$tlibs
		else
			link=$(echo "$tlibs" | sed 's/-lrseqkit-tsan/-Wl,-Bstatic -lrseqkit-tsan -Wl,-Bdynamic/')
		fi
		$CC $CFLAGS -Wall -Wextra -Werror $tcflags -o "$tmp/tsan-$kind" "$tmp/tsan_pool.c" \
			$link >"$tmp/cc.log" 2>&1
		status=$?
		ok $status "a -fsanitize=thread program links the $kind TSan variant ($tcflags ... $link)"
		diag "$tmp/cc.log"
		[ $status -eq 0 ] || continue
		if [ $kind = shared ]; then
			readelf -d "$tmp/tsan-$kind" | grep -q 'NEEDED.*\[librseqkit-tsan\.so\.1\]'
		else
			! readelf -d "$tmp/tsan-$kind" | grep -q 'NEEDED.*librseqkit'
		fi
		ok $? "the $kind TSan consumer uses the $kind librseqkit-tsan"
		for try in 1 2 3; do
			run_tsan "$tmp/tsan-$kind"
			[ "$tsan_status" -ne 0 ] && break
		done
		[ "$tsan_status" -eq 0 ] && [ "$tsan_reports" -eq 0 ] && grep -q 'drains: done' "$tmp/tsan.out"
		ok $? "pool alloc/free/drain across threads, $kind TSan variant: no ThreadSanitizer report in 3 runs (last: exit $tsan_status, $tsan_reports reports)"
		[ "$tsan_status" -eq 0 ] || head -n 40 "$tmp/tsan.out" | diag
	done
	# The negative control: the plain library, the program instrumented.
	$CC $CFLAGS -fsanitize=thread $(pkg-config --cflags rseqkit) -o "$tmp/tsan-plain" \
		"$tmp/tsan_pool.c" $(pkg-config --libs rseqkit) >"$tmp/cc.log" 2>&1
	status=$?
	ok $status "the same program links the plain library (-fsanitize=thread, pkg-config rseqkit)"
	diag "$tmp/cc.log"
	if [ $status -eq 0 ]; then
		for try in 1 2 3 4 5; do
			run_tsan "$tmp/tsan-plain"
			[ "$tsan_reports" -gt 0 ] && break
		done
		# Where the report lands varies: inside rseqkit (rsk_pool_drain),
		# or in the program's own use of an object whose hand-over through
		# the uninstrumented library TSan did not see.  Either is a report
		# the variant does not give for the same program.
		[ "$tsan_status" -eq 66 ] && [ "$tsan_reports" -gt 0 ]
		ok $? "negative control: with the plain library TSan reports races (run $try: exit $tsan_status, $tsan_reports reports)"
		grep -m 1 -A 6 '^WARNING: ThreadSanitizer' "$tmp/tsan.out" | diag
	fi
fi

# --- headers ----------------------------------------------------------------
for h in "$prefix"/include/rseqkit/*.h; do
	name=rseqkit/${h##*/}
	$CC -fsyntax-only -Wall -Wextra -Werror -I"$prefix/include" -include "$name" \
		-x c /dev/null >"$tmp/cc.log" 2>&1
	ok $? "$name compiles on its own (C)"
	diag "$tmp/cc.log"
done
for h in "$prefix"/include/rseqkit/arch/*.h "$prefix"/include/rseqkit/arch/*/*.h; do
	name=rseqkit/${h#"$prefix"/include/rseqkit/}
	$CC -fsyntax-only -I"$prefix/include" -include "$name" -x c /dev/null >"$tmp/cc.log" 2>&1
	status=$?
	first=$(grep -m 1 'error' "$tmp/cc.log")
	[ $status -ne 0 ] && echo "$first" | grep -q 'include <rseqkit/'
	ok $? "$name refuses direct inclusion"
	echo "$first" | diag
done
if [ $have_cxx -eq 1 ]; then
	for std in "" -std=c++11; do
		$CXX $std -fsyntax-only -Wall -Wextra -Werror -I"$prefix/include" \
			-include rseqkit/rseqkit.h -x c++ /dev/null >"$tmp/cc.log" 2>&1
		ok $? "rseqkit/rseqkit.h compiles as C++ ($CXX${std:+ $std})"
		diag "$tmp/cc.log"
	done
else
	skip "no working C++ compiler for CC=$CC (tried: ${CXX:-none}) [pkg $cxx_pkg]"
fi

# --- version ------------------------------------------------------------------
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$ROOT" BUILD="$BUILD" CC="$CC" "$@"; }
hv=$(awk 'NF == 3 && $2 ~ /^RSEQKIT_VERSION_(MAJOR|MINOR|PATCH)$/ { v = v (v == "" ? "" : ".") $3 }
	END { print v }' "$ROOT/include/rseqkit/version.h")
mv=$(mk print-config | sed -n 's/^VERSION=//p')
[ -n "$hv" ] && [ "$hv" = "$mv" ]
ok $? "the Makefile's VERSION ($mv) is rseqkit/version.h's ($hv)"
bad=$(grep -L "^\.TH .* \"rseqkit $hv\"" "$ROOT"/man/*.[137] 2>/dev/null | while read -r f; do
	head -n 1 "$f" | grep -q '^\.so ' || echo "${f##*/}"; done | tr '\n' ' ')
[ -z "$bad" ]
ok $? "every man page's .TH says rseqkit $hv${bad:+ (not: $bad)}"
pcv=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/rseqkit.pc")
[ "$pcv" = "$hv" ]
ok $? "rseqkit.pc says Version: $hv (got $pcv)"
"$prefix/bin/rseqkit-info" --version >"$tmp/v.out" 2>&1 && grep -q "^rseqkit-info $hv\$" "$tmp/v.out"
ok $? "rseqkit-info --version prints rseqkit-info $hv ($(cat "$tmp/v.out"))"

# --- warnings: -Werror only on request (or CI=true) -------------------------
w=$(env -u CI -u WERROR -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$ROOT" BUILD="$BUILD" CC="$CC" print-config 2>/dev/null | sed -n 's/^WARN=//p')
case " $w " in *" -Werror "*) false ;; *) true ;; esac
ok $? "a plain build does not use -Werror (WARN=$w)"
w=$(mk WERROR=1 print-config | sed -n 's/^WARN=//p')
case " $w " in *" -Werror "*) true ;; *) false ;; esac
ok $? "WERROR=1 turns -Werror on (WARN=$w)"
w=$(CI=true mk print-config | sed -n 's/^WARN=//p')
case " $w " in *" -Werror "*) true ;; *) false ;; esac
ok $? "CI=true turns -Werror on (WARN=$w)"

# --- LIBDIR, the 32-bit default, uninstall ------------------------------------
# A 32-bit build gets its own library directory and installs no tools.
d=$(mk CC="gcc -m32" PREFIX=/P print-config | grep '^LIBDIR=\|^BINDIR=' | tr '\n' ' ')
[ "$d" = "LIBDIR=/P/lib32 BINDIR= " ]
ok $? "CC=\"gcc -m32\": LIBDIR defaults to PREFIX/lib32, no tools installed (got: $d)"
d=$(mk CC=i686-linux-gnu-gcc PREFIX=/P print-config | grep '^LIBDIR=' | tr -d '\n')
[ "$d" = "LIBDIR=/P/lib32" ]
ok $? "CC=i686-linux-gnu-gcc: LIBDIR defaults to PREFIX/lib32 (got: $d)"

# Debian's multiarch directory: libraries and rseqkit.pc there, nothing in lib/.
p2=$tmp/multiarch
ma=lib/$( ${CC%% *} -print-multiarch 2>/dev/null | grep . || echo x86_64-linux-gnu)
mk PREFIX="$p2" LIBDIR="$p2/$ma" install >"$tmp/install2.log" 2>&1
ok $? "make install LIBDIR=PREFIX/$ma"
[ -e "$p2/$ma/librseqkit.so.1" ] && [ -e "$p2/$ma/librseqkit.a" ] &&
	[ -e "$p2/$ma/pkgconfig/rseqkit.pc" ] && [ ! -e "$p2/lib/librseqkit.so" ] &&
	[ ! -e "$p2/lib/pkgconfig" ]
ok $? "libraries and rseqkit.pc in $ma, nothing in lib/"
if command -v pkg-config >/dev/null 2>&1; then
	got=$(PKG_CONFIG_PATH=$p2/$ma/pkgconfig pkg-config --variable=libdir rseqkit)
	[ "$got" = "$p2/$ma" ]
	ok $? "rseqkit.pc's libdir follows LIBDIR (got: ${got#"$tmp"/})"
	$CC $CFLAGS $(PKG_CONFIG_PATH=$p2/$ma/pkgconfig pkg-config --cflags rseqkit) -o "$tmp/c2" \
		"$tmp/consumer.c" $(PKG_CONFIG_PATH=$p2/$ma/pkgconfig pkg-config --libs rseqkit) >"$tmp/cc.log" 2>&1 &&
		LD_LIBRARY_PATH=$p2/$ma "$tmp/c2" >/dev/null
	ok $? "a consumer builds and runs from the multiarch install (pkg-config)"
	diag "$tmp/cc.log"
else
	skip "pkg-config not installed: the multiarch rseqkit.pc not read [pkg pkg-config]"
fi

# A library of another architecture in LIBDIR is never overwritten.
cp "$p2/$ma/librseqkit.so.$hv" "$tmp/orig.so"
lib32=$p2/$ma/librseqkit.so.$hv
if [ "$(od -An -tx1 -j4 -N1 "$lib32" | tr -d ' ')" = 02 ]; then cls='\001'; else cls='\002'; fi
printf "$cls" | dd of="$lib32" bs=1 seek=4 conv=notrunc 2>/dev/null
cp "$lib32" "$tmp/other.so"
mk PREFIX="$p2" LIBDIR="$p2/$ma" install >"$tmp/install3.log" 2>&1
status=$?
[ $status -ne 0 ] && grep -q 'another architecture' "$tmp/install3.log" && cmp -s "$lib32" "$tmp/other.so"
ok $? "install refuses to overwrite another architecture's librseqkit (status $status)"
grep 'install:' "$tmp/install3.log" | diag
cp "$tmp/orig.so" "$lib32"

# uninstall takes away everything install put there.
mk PREFIX="$p2" LIBDIR="$p2/$ma" uninstall >"$tmp/un.log" 2>&1
ok $? "make uninstall LIBDIR=PREFIX/$ma"
left=$(cd "$p2" && find . ! -type d | head -n 5 | tr '\n' ' ')
[ -z "$left" ]
ok $? "nothing left after uninstall${left:+ (left: $left)}"
mk PREFIX="$prefix" LIBDIR="$prefix/lib" BINDIR="$prefix/bin" uninstall >"$tmp/un.log" 2>&1
left=$(cd "$prefix" && find . ! -type d | head -n 5 | tr '\n' ' ')
[ -z "$left" ]
ok $? "make uninstall of the first install leaves nothing${left:+ (left: $left)}"
diag "$tmp/un.log"

finish
