#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The registration modes as users meet them, through the environment:
#   libc      default: glibc registers, rseqkit adopts its area
#   library   GLIBC_TUNABLES=glibc.pthread.rseq=0: rseqkit registers, in its own TLS area
#   own-area  the same plus RSEQKIT_OWN_AREA=1 (the default, said explicitly)
# checked with rseqkit-info --json and with a small program built here
# against librseqkit.so (loaded at startup: its TLS is static, so the own
# area is usable) and against librseqkit.a with -static.  Run from the
# source tree by make check (BUILD, CC, CFLAGS from the environment).

BUILD=${BUILD:-build}
CC=${CC:-cc}
SRCDIR=${SRCDIR:-.}
INFO=$BUILD/bin/rseqkit-info

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
has() {
	case $1 in *"$2"*) return 0 ;; esac
	return 1
}
# run MODE CMD...: run with the mode's environment
run() {
	mode=$1
	shift
	case $mode in
	libc) env -u GLIBC_TUNABLES -u RSEQKIT_OWN_AREA "$@" ;;
	library) env -u RSEQKIT_OWN_AREA GLIBC_TUNABLES=glibc.pthread.rseq=0 "$@" ;;
	own-area) env GLIBC_TUNABLES=glibc.pthread.rseq=0 RSEQKIT_OWN_AREA=1 "$@" ;;
	esac
}
expect_owner() {
	case $1 in libc) echo libc ;; *) echo library ;; esac
}
expect_reason() {
	case $1 in libc) echo "registered by libc" ;; *) echo "own area" ;; esac
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

if ! "$INFO" --json >"$tmp/probe" 2>&1; then
	echo "not ok 1 - $INFO --json runs"
	sed 's/^/# /' "$tmp/probe"
	echo "1..1"
	exit 1
fi
if ! has "$(cat "$tmp/probe")" '"available": true'; then
	echo "1..0 # SKIP rseq is not available here: $(cat "$tmp/probe")"
	exit 0
fi

# ---- rseqkit-info ----
for mode in libc library own-area; do
	out=$(run $mode "$INFO" --json)
	ok $? "rseqkit-info [$mode] exits 0"
	echo "# $out"
	has "$out" "\"owner\": \"$(expect_owner $mode)\"" && has "$out" '"available": true' &&
		has "$out" "$(expect_reason $mode)"
	ok $? "rseqkit-info [$mode]: owner $(expect_owner $mode), reason mentions '$(expect_reason $mode)'"
	has "$out" '"thread_registered": true' && ! has "$out" '"registered_size": 0,'
	ok $? "rseqkit-info [$mode]: the thread is registered"
done

# ---- a program linked against the library two ways ----
cat >"$tmp/prog.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <rseqkit/thread.h>
#include <rseqkit/ops.h>
#include <rseqkit/progress.h>

#define THREADS 8
#define ADDS 5000
static intptr_t *slots;
static int possible, unregistered, fallbacks;

static void *worker(void *arg)
{
	struct rsk_status st;
	(void)arg;
	rsk_status(&st);
	if (!st.thread_registered)
		__atomic_add_fetch(&unregistered, 1, __ATOMIC_RELAXED);
	for (int k = 0; k < ADDS; k++) {
		for (;;) {
			int cpu = rsk_index(RSK_INDEX_CPU);
			if (cpu < 0 || cpu >= possible) {
				__atomic_add_fetch(&slots[0], 1, __ATOMIC_RELAXED);
				__atomic_add_fetch(&fallbacks, 1, __ATOMIC_RELAXED);
				break;
			}
			if (rsk_add(RSK_INDEX_CPU, cpu, &slots[cpu * 16], 1) == RSK_OK)
				break;
		}
	}
	return NULL;
}

int main(void)
{
	struct rsk_status st;
	pthread_t th[THREADS];
	long sum = 0;

	rsk_status(&st);
	possible = rsk_possible_cpus();
	slots = calloc((size_t)possible * 16, sizeof(intptr_t));
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, NULL);
	worker(NULL);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (int c = 0; c < possible; c++)
		sum += slots[c * 16];
	printf("owner=%s reason=\"%s\" unregistered=%d fallbacks=%d sum=%ld expected=%ld "
	       "abort_limit=%u\n",
	       rsk_owner_name(st.owner), st.reason, unregistered, fallbacks, sum,
	       (long)(THREADS + 1) * ADDS, rsk_abort_limit());
	return sum == (long)(THREADS + 1) * ADDS ? 0 : 1;
}
EOF

# shellcheck disable=SC2086 # CC and CFLAGS are word lists
$CC -std=gnu11 -D_GNU_SOURCE -I"$SRCDIR/include" -pthread $CFLAGS -o "$tmp/prog-shared" \
	"$tmp/prog.c" -L"$BUILD/lib" -lrseqkit -Wl,-rpath,"$(cd "$BUILD/lib" && pwd)" 2>"$tmp/cc1"
ok $? "a program builds against librseqkit.so"
sed 's/^/# /' "$tmp/cc1"
# shellcheck disable=SC2086
$CC -std=gnu11 -D_GNU_SOURCE -I"$SRCDIR/include" -pthread $CFLAGS -static -o "$tmp/prog-static" \
	"$tmp/prog.c" "$BUILD/lib/librseqkit.a" 2>"$tmp/cc2"
ok $? "a program builds with -static against librseqkit.a"
sed 's/^/# /' "$tmp/cc2"

for kind in shared static; do
	for mode in libc library own-area; do
		out=$(run $mode "$tmp/prog-$kind" 2>&1)
		rc=$?
		echo "# $out"
		ok $rc "$kind [$mode]: runs, per-CPU adds of 9 threads exact"
		has "$out" "owner=$(expect_owner $mode) " && has "$out" "$(expect_reason $mode)"
		ok $? "$kind [$mode]: owner $(expect_owner $mode), reason mentions '$(expect_reason $mode)'"
		has "$out" "unregistered=0 fallbacks=0 "
		ok $? "$kind [$mode]: every thread registered, no slow path"
	done
done

# ---- invalid values: one warning each on stderr, naming the variable, the
# value and what is used instead; valid values: silence ----
# envcase EXPECT_STDERR_SUBSTRING EXPECT_STDOUT_SUBSTRING VAR=VALUE...
envcase() {
	want_err=$1
	want_out=$2
	shift 2
	out=$(env -u GLIBC_TUNABLES -u RSEQKIT_OWN_AREA -u RSEQKIT_DISABLE -u RSEQKIT_ABORT_LIMIT "$@" \
		"$tmp/prog-static" 2>"$tmp/err")
	rc=$?
	err=$(cat "$tmp/err")
	lines=$(grep -c . "$tmp/err")
	echo "# $* -> stderr: $err"
	if [ -z "$want_err" ]; then
		[ $rc -eq 0 ] && [ "$lines" -eq 0 ] && has "$out" "$want_out"
		ok $? "$*: accepted silently ($want_out)"
	else
		[ $rc -eq 0 ] && [ "$lines" -eq 1 ] && has "$err" "$want_err" && has "$out" "$want_out"
		ok $? "$*: one warning '$want_err', then $want_out"
	fi
}
# Every switch takes 1/yes/true/on and 0/no/false/off, in any case.
for v in 1 yes YES true True on ON; do
	envcase "" "owner=none" RSEQKIT_DISABLE=$v
done
for v in 0 no No false FALSE off Off; do
	envcase "" "owner=libc" RSEQKIT_DISABLE=$v
done
bool_why="expected 1/yes/true/on or 0/no/false/off"
envcase "ignoring RSEQKIT_DISABLE=2 ($bool_why; using 0)" "owner=libc" RSEQKIT_DISABLE=2
envcase "ignoring RSEQKIT_DISABLE=yess ($bool_why; using 0)" "owner=libc" RSEQKIT_DISABLE=yess
envcase "ignoring RSEQKIT_DISABLE=o ($bool_why; using 0)" "owner=libc" RSEQKIT_DISABLE=o
envcase "" "owner=none" RSEQKIT_CHECK_THREADS=on
envcase "" "owner=libc" RSEQKIT_CHECK_THREADS=false
envcase "ignoring RSEQKIT_CHECK_THREADS=sometimes ($bool_why; using 0)" "owner=libc" \
	RSEQKIT_CHECK_THREADS=sometimes
envcase "ignoring RSEQKIT_ABORT_LIMIT=abc (expected a number from 1 to 1073741824; using 16)" \
	"abort_limit=16" RSEQKIT_ABORT_LIMIT=abc
envcase "ignoring RSEQKIT_ABORT_LIMIT=0 (" "abort_limit=16" RSEQKIT_ABORT_LIMIT=0
envcase "ignoring RSEQKIT_ABORT_LIMIT=5x (" "abort_limit=16" RSEQKIT_ABORT_LIMIT=5x
envcase "ignoring RSEQKIT_ABORT_LIMIT=-3 (" "abort_limit=16" RSEQKIT_ABORT_LIMIT=-3
envcase "" "abort_limit=5" RSEQKIT_ABORT_LIMIT=5
envcase "ignoring RSEQKIT_OWN_AREA=maybe ($bool_why; using 1)" "owner=library" \
	GLIBC_TUNABLES=glibc.pthread.rseq=0 RSEQKIT_OWN_AREA=maybe
for v in 0 off; do
	envcase "ignoring RSEQKIT_OWN_AREA=$v (glibc's reserved area is no longer registered" \
		"reason=\"registered by rseqkit (own area)" GLIBC_TUNABLES=glibc.pthread.rseq=0 \
		RSEQKIT_OWN_AREA=$v
done
envcase "" "owner=library" GLIBC_TUNABLES=glibc.pthread.rseq=0 RSEQKIT_OWN_AREA=1
envcase "" "owner=library" GLIBC_TUNABLES=glibc.pthread.rseq=0 RSEQKIT_OWN_AREA=Yes

# The malloc's switches and the tools' read the same way (the library's
# one reader): RSEQKIT_MALLOC_STATS prints the statistics at exit.
mso=$BUILD/lib/librseqkit-malloc.so
if [ -e "$mso" ]; then
	for v in 1 yes TRUE on; do
		out=$(env LD_PRELOAD="$mso" RSEQKIT_MALLOC_STATS=$v "$tmp/prog-shared" 2>&1)
		has "$out" "rseqkit-malloc: index"
		ok $? "RSEQKIT_MALLOC_STATS=$v: librseqkit-malloc.so prints its statistics"
	done
	for v in 0 no off; do
		out=$(env LD_PRELOAD="$mso" RSEQKIT_MALLOC_STATS=$v "$tmp/prog-shared" 2>&1)
		! has "$out" "rseqkit-malloc:"
		ok $? "RSEQKIT_MALLOC_STATS=$v: no statistics"
	done
	out=$(env LD_PRELOAD="$mso" RSEQKIT_MALLOC_STATS=loud "$tmp/prog-shared" 2>&1)
	has "$out" "ignoring RSEQKIT_MALLOC_STATS=loud ($bool_why; using 0)" && ! has "$out" "rseqkit-malloc:"
	ok $? "RSEQKIT_MALLOC_STATS=loud: warned about, no statistics"
else
	echo "ok $((n += 1)) # SKIP $mso not built (make malloc)"
fi
out=$(env RSEQKIT_DISABLE=yes "$INFO" --json)
has "$out" '"owner": "none"'
ok $? "rseqkit-info with RSEQKIT_DISABLE=yes: owner none"

echo "1..$n"
[ "$failed" -eq 0 ]
