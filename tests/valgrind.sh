#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Under valgrind rseq(2) is ENOSYS: rseqkit must fall back (available
# false, no crash), answer identity questions correctly and stay memcheck
# clean; helgrind and DRD with the library's suppression file must find
# nothing in a correct program (the example of per-CPU statistics).  Runs rseqkit-info --json and the identity test's single-mode
# child ("identity.t --child auto", plain TAP) under
#   valgrind --error-exitcode=99 --leak-check=full -q
# (99: memcheck found errors; the programs themselves exit 0 or 1).

BUILD=${BUILD:-build}
INFO=$BUILD/bin/rseqkit-info
IDENTITY=$BUILD/tests/identity.t
VG="valgrind --fair-sched=yes --error-exitcode=99 --leak-check=full -q"

if ! command -v valgrind >/dev/null 2>&1; then
	echo "1..0 # SKIP valgrind is not installed [pkg valgrind]"
	exit 0
fi

n=0
failed=0
ok() { # ok COND-STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}
has() { # has STRING PATTERN: 0 if the fixed string is in it
	case $1 in *"$2"*) return 0 ;; esac
	return 1
}
json_num() { # json_num JSON KEY
	printf '%s\n' "$1" | sed -n "s/.*\"$2\": \(-\{0,1\}[0-9][0-9]*\).*/\1/p"
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# Can this valgrind run this build's binaries at all?  (i386 ones need the
# i386 libc6-dbg, for instance.)  Only valgrind's own start-up failures
# are a reason to skip; anything else goes on to the checks below.
startup_failure() {
	grep -q 'Fatal error at startup\|failed to start tool\|wrong ELF\|cannot execute\|debuginfo reader' "$1"
}
if ! valgrind -q "$INFO" --help >"$tmp/probe" 2>&1 && startup_failure "$tmp/probe"; then
	# valgrind 3.19 cannot read clang 14's DWARF 5: run copies without
	# debug info (symbols stay, so reports still name functions).
	if grep -q 'debuginfo reader' "$tmp/probe" && command -v objcopy >/dev/null 2>&1 &&
		objcopy --strip-debug "$INFO" "$tmp/rseqkit-info" &&
		objcopy --strip-debug "$IDENTITY" "$tmp/identity.t" &&
		valgrind -q "$tmp/rseqkit-info" --help >"$tmp/probe" 2>&1; then
		echo "# valgrind cannot read this build's debug info: using stripped copies"
		INFO=$tmp/rseqkit-info
		IDENTITY=$tmp/identity.t
	else
		sed 's/^/# /' "$tmp/probe" | head -12
		echo "1..0 # SKIP valgrind cannot start $INFO here (see above)"
		exit 0
	fi
fi

possible=$(sed -n '1p' /sys/devices/system/cpu/possible 2>/dev/null |
	tr ',' '\n' | sed 's/.*-//' | sort -n | tail -1)
[ -n "$possible" ] && possible=$((possible + 1))

for tunables in "" "glibc.pthread.rseq=0"; do
	label="rseqkit-info${tunables:+ with GLIBC_TUNABLES=$tunables}"
	if [ -n "$tunables" ]; then
		GLIBC_TUNABLES=$tunables $VG "$INFO" --json >"$tmp/out" 2>"$tmp/err"
	else
		env -u GLIBC_TUNABLES $VG "$INFO" --json >"$tmp/out" 2>"$tmp/err"
	fi
	rc=$?
	out=$(cat "$tmp/out")
	echo "# $out"
	sed 's/^/# stderr: /' "$tmp/err"
	ok $rc "$label: exits 0 under valgrind (status $rc; 99 = memcheck errors)"
	[ ! -s "$tmp/err" ]
	ok $? "$label: memcheck reports nothing"
	has "$out" '"available": false' && has "$out" '"owner": "none"' &&
		has "$out" '"thread_registered": false' && has "$out" '"registered_size": 0'
	ok $? "$label: available false, owner none, not registered"
	[ "$(json_num "$out" error)" = 38 ] && has "$out" "not implemented"
	ok $? "$label: error ENOSYS (38), reason says rseq is not implemented"
	cpu=$(json_num "$out" cpu)
	pc=$(json_num "$out" possible_cpus)
	[ -n "$cpu" ] && [ -n "$pc" ] && [ "$cpu" -ge 0 ] && [ "$cpu" -lt "$pc" ]
	ok $? "$label: cpu $cpu is below possible_cpus $pc"
	if [ -n "$possible" ]; then
		[ "$pc" = "$possible" ]
		ok $? "$label: possible_cpus $pc matches sysfs ($possible)"
	else
		n=$((n + 1))
		echo "ok $n - $label: possible_cpus matches sysfs # SKIP no /sys/devices/system/cpu/possible"
	fi
done

# The identity checks, one mode, under valgrind.
$VG "$IDENTITY" --child auto >"$tmp/tap" 2>"$tmp/err"
rc=$?
sed 's/^/# identity: /' "$tmp/tap"
sed 's/^/# stderr: /' "$tmp/err"
[ "$rc" -ne 99 ] && [ ! -s "$tmp/err" ]
ok $? "identity under valgrind: memcheck clean (status $rc)"
[ "$rc" -eq 0 ]
ok $? "identity under valgrind: exits 0"
points=$(grep -c '^ok \|^not ok ' "$tmp/tap")
plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$tmp/tap")
bad=$(grep -c '^not ok ' "$tmp/tap")
[ -n "$plan" ] && [ "$plan" -gt 0 ] && [ "$plan" -eq "$points" ] && [ "$bad" -eq 0 ]
ok $? "identity under valgrind: all $points of ${plan:-no} planned checks pass ($bad failed)"
grep -q '^# owner none' "$tmp/tap"
ok $? "identity under valgrind: the library reports owner none"
grep -q '^ok .*rsk_index(CPU) is the pinned CPU (or -1 unregistered)' "$tmp/tap" &&
	grep -q '^ok .*thread_registered 0 matches available 0' "$tmp/tap"
ok $? "identity under valgrind: unregistered, rsk_index() -1 while rsk_cpu() is right"

# Helgrind and DRD on a correct multi-threaded program (an example of
# per-CPU counters): every slow path looks like a race to them; the
# suppression file installed with the library (share/rseqkit.supp) must
# leave none, or GUIDE section 8 is wrong.
ROOT=${RSEQKIT_ROOT:-$PWD}
EX=$BUILD/examples/percpu_stats
# A copy without debug info where valgrind cannot read this build's.
if [ -x "$EX" ] && [ "$INFO" = "$tmp/rseqkit-info" ] && objcopy --strip-debug "$EX" "$tmp/percpu_stats"; then
	EX=$tmp/percpu_stats
fi
if [ -x "$EX" ]; then
	for tool in helgrind drd; do
		valgrind --tool=$tool --suppressions="$ROOT/share/rseqkit.supp" --error-exitcode=99 \
			--log-file="$tmp/$tool.log" "$EX" >/dev/null 2>&1
		rc=$?
		summary=$(sed -n 's/^==[0-9]*== ERROR SUMMARY: //p' "$tmp/$tool.log")
		[ $rc -eq 0 ]
		ok $? "$tool with share/rseqkit.supp on examples/percpu_stats: no report (status $rc; $summary)"
		[ $rc -eq 0 ] || grep -A6 'Possible data race\|Conflicting' "$tmp/$tool.log" | head -n 20 | sed 's/^/# /'
	done
else
	n=$((n + 1)); echo "ok $n # SKIP $EX not built (make examples)"
	n=$((n + 1)); echo "ok $n # SKIP $EX not built (make examples)"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
