#!/bin/sh
# qemu-user.sh (make check-qemu-user, after make check-cross built the
# aarch64 programs): qemu-user answers rseq(2) with ENOSYS, so an aarch64
# process under qemu-aarch64-static runs every operation on its slow path.
# rseqkit-info must say so, and every stress test must stay exact.
# TAP; needs qemu-user-static.
cd "$(dirname "$0")/../.." || exit 2
B=${CROSS_BUILD:-build-cross-aarch64}
Q=${QEMU_USER:-qemu-aarch64-static}
# A skip names the package that would enable it ([pkg ...], read by
# tests/bin/deps.sh summary); with CI=true nothing may be missing.
why=
if ! command -v "$Q" >/dev/null 2>&1; then
	why="$Q not installed [pkg qemu-user-static]"
elif [ ! -x "$B/bin/rseqkit-stress" ]; then
	if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
		why="$B not built: run make check-cross ARCH=aarch64 first"
	else
		why="$B not built: needs aarch64-linux-gnu-gcc, then make check-cross ARCH=aarch64 [pkg gcc-aarch64-linux-gnu libc6-dev-arm64-cross]"
	fi
fi
if [ -n "$why" ]; then
	if [ "${CI:-}" = true ]; then
		echo "1..1"
		echo "not ok 1 - CI=true: nothing may be skipped: $why"
		exit 1
	fi
	echo "1..0 # SKIP $why"
	exit 0
fi
echo "1..8"
n=0 fails=0
out=$("$Q" "$B/bin/rseqkit-info" --json 2>&1)
n=$((n + 1))
case $out in
*'"available": false'*'"error": 38'*) echo "ok $n - rseqkit-info under qemu-user: unavailable, ENOSYS" ;;
*) echo "not ok $n - rseqkit-info under qemu-user: $out"; fails=$((fails + 1)) ;;
esac
for t in s l b m i r p; do
	n=$((n + 1))
	out=$("$Q" "$B/bin/rseqkit-stress" -T $t -t 4 -r 500 2>&1)
	rc=$?
	last=$(printf '%s\n' "$out" | tail -n 1)
	case $rc:$last in
	0:*slow_paths=0*) echo "not ok $n - -T $t: no slow path taken # $last"; fails=$((fails + 1)) ;;
	0:*OK) echo "ok $n - -T $t exact on slow paths # $last" ;;
	*) echo "not ok $n - -T $t (exit $rc) # $last"; fails=$((fails + 1)) ;;
	esac
done
exit $((fails > 0))
