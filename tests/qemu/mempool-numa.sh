#!/bin/sh
# SPDX-License-Identifier: MIT
#
# mempool-numa.sh [SUITE] - per-CPU memory on a machine of two NUMA nodes
# (TAP; `make check-numa`, not part of `make check`).
#
# Boots Debian's x86-64 cloud kernel of SUITE (default trixie, fetched and
# cached in build/kernels by fetch-kernel.sh) under qemu-system-x86_64
# (TCG) with two nodes of 512 MiB each, and runs "mempool.t --numa": a
# pool's copies written by one thread must each sit on the node of their
# CPU (checked with move_pages(2)), and with RSK_MEMPOOL_NO_NUMA (first
# touch) they must not - the negative control that shows the check can
# fail.  The guest has 64 possible CPUs of which 2 run, so
# "mempool.t --cid-figure" also gives the committed memory of a cid pool
# of 10,000 counters used by 2 threads against 10,000 rsk_counters; the
# guest's possible CPUs are checked (a figure for fewer would say nothing).
#
# 64 possible CPUs: -smp 2,maxcpus=64 no longer gives them.  QEMU lists
# the 62 absent CPUs in the MADT as disabled entries, and since Linux's
# "x86/acpi/boot: Correct acpi_is_processor_usable() check again" (2025,
# for stable) a guest that detects no hypervisor ignores such entries.
# Linux knows no TCG CPUID signature (TCGTCGTCGTCG), and Debian's 6.12.117
# said "Allowing 2 present CPUs plus 0 hotplug CPUs".  Instead the machine
# has 64 CPUs (one per socket, so no cache is shared across nodes) and the
# kernel brings up 2 (maxcpus=2): possible 0-63, online 0-1.  Node 0 holds
# CPU 0, node 1 CPUs 1-63.
#
# Needs qemu-system-x86 and cpio.  Without them, or without the kernel
# (fetch-kernel.sh failed), it says SKIP; with CI=true (or STRICT=1) that
# fails, as in check-kernels.sh.  Environment: SBUILD (static build
# directory, default build-static), CACHE (default build/kernels), WORK
# (default build/qemu-numa), BOOT_TIMEOUT (default 600 s), KERNEL_ARGS.
set -eu
cd "$(dirname "$0")/../.."

suite=${1:-trixie}
SBUILD=${SBUILD:-build-static}
CACHE=${CACHE:-build/kernels}
WORK=${WORK:-build/qemu-numa}

NCPUS=64

# skip REASON: "1..0 # SKIP", or with CI=true (or STRICT=1) a failure.  A
# missing package is named with "[pkg NAME]" (tests/bin/deps.sh).
skip() {
	if [ -n "${STRICT:-}" ] || [ "${CI:-}" = true ]; then
		echo "1..1"
		echo "not ok 1 - CI=true (or STRICT=1): nothing may be skipped: $1"
		exit 1
	fi
	echo "1..0 # SKIP $1"
	exit 0
}

missing='' pkgs=''
for tool in qemu-system-x86_64 cpio; do
	command -v $tool >/dev/null 2>&1 && continue
	missing="$missing $tool"
	pkgs="$pkgs $(awk -F'|' -v t="cmd:$tool" '$3 == t { print $2; exit }' .ci/packages)"
done
[ -z "$missing" ] || skip "not installed:$missing [pkg${pkgs}] (or: sudo make deps DEPS=kernels)"
make -s BUILD="$SBUILD" LDFLAGS=-static "$SBUILD/tests/mempool.t" >&2
mkdir -p "$WORK"
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -static -o "$WORK/init" tests/qemu/init.c
image=$(tests/qemu/fetch-kernel.sh "$suite" "$CACHE") ||
	skip "no $suite kernel (fetch-kernel.sh failed: no network, or no mirror?)"
printf '%s\n' "numa /bin/mempool.t --numa" "cid64 /bin/mempool.t --cid-figure" >"$WORK/cmds"
tests/qemu/mkinitramfs.sh "$WORK/initrd" "$WORK/init" "$WORK/cmds" "$SBUILD/tests/mempool.t"

timeout "${BOOT_TIMEOUT:-600}" qemu-system-x86_64 -accel tcg -cpu max \
	-smp $NCPUS,sockets=$NCPUS,cores=1,threads=1 -m 1024 \
	-object memory-backend-ram,id=m0,size=512M -object memory-backend-ram,id=m1,size=512M \
	-numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1-$((NCPUS - 1)),memdev=m1 \
	-nographic -nic none -no-reboot -kernel "$image" -initrd "$WORK/initrd" \
	-append "console=ttyS0 rdinit=/init panic=-1 quiet maxcpus=2 ${KERNEL_ARGS:-}" </dev/null >"$WORK/console.raw" 2>&1 || true
sed -e 's|\x1b\[[0-9;?=]*[ -/]*[@-~]||g' -e 's|\x1b[@-Z\\-_c]||g' -e 's|\r||g' \
	"$WORK/console.raw" >"$WORK/console.log"

# Each command's TAP (between init's markers) as diagnostics, and one
# verdict per command: its exit status, non-zero if any check failed.
grep '^@@rsk kernel' "$WORK/console.log" | sed 's/^/# /' || true
n=0
failed=0
for label in numa cid64; do
	tap=$(sed -n "/^@@rsk begin $label\$/,/^@@rsk end $label /p" "$WORK/console.log" | sed '1d;$d')
	end=$(grep "^@@rsk end $label " "$WORK/console.log" || true)
	if [ -z "$tap" ]; then
		n=$((n + 1))
		failed=$((failed + 1))
		echo "not ok $n - $label: no output (console: $WORK/console.log)"
		continue
	fi
	printf '%s\n' "$tap" | sed "s/^/# $label: /"
	n=$((n + 1))
	case $end in
	*exit=0*) echo "ok $n - $label: mempool.t exits 0" ;;
	*) echo "not ok $n - $label: $end"; failed=$((failed + 1)) ;;
	esac
done
# The figure is for NCPUS possible CPUs only if the guest had them.
n=$((n + 1))
possible=$(sed -n 's/^# possible CPUs (sysfs): //p' "$WORK/console.log" | head -n1)
if [ "$possible" = "0-$((NCPUS - 1))" ]; then
	echo "ok $n - the guest's possible CPUs: $possible"
else
	echo "not ok $n - the guest's possible CPUs: '$possible', not 0-$((NCPUS - 1))"
	failed=$((failed + 1))
fi
[ $failed -eq 0 ] || tail -20 "$WORK/console.log" | sed 's/^/# /'
echo "1..$n"
[ $failed -eq 0 ]
