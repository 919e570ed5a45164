#!/bin/sh
# SPDX-License-Identifier: MIT
#
# mempool-numa.sh [SUITE] - per-CPU memory on a machine of two NUMA nodes
# (TAP; `make check-numa`, not part of `make check`).
#
# Boots Debian's x86-64 cloud kernel of SUITE (default trixie, fetched and
# cached in build/kernels by fetch-kernel.sh) under qemu-system-x86_64
# (TCG) with two CPUs on two nodes of 512 MiB each, and runs
# "mempool.t --numa": a pool's copies written by one thread must each sit
# on the node of their CPU (checked with move_pages(2)), and with
# RSK_MEMPOOL_NO_NUMA (first touch) they must not - the negative control
# that shows the check can fail.  The guest has 64 possible CPUs
# (-smp 2,maxcpus=64), so "mempool.t --cid-figure" also gives the
# committed memory of a cid pool of 10,000 counters used by 2 threads
# against 10,000 rsk_counters.
#
# Needs qemu-system-x86 and cpio.  Environment: SBUILD (static build
# directory, default build-static), CACHE (default build/kernels), WORK
# (default build/qemu-numa).
set -eu
cd "$(dirname "$0")/../.."

suite=${1:-trixie}
SBUILD=${SBUILD:-build-static}
CACHE=${CACHE:-build/kernels}
WORK=${WORK:-build/qemu-numa}

for tool in qemu-system-x86_64 cpio; do
	command -v $tool >/dev/null || { echo "1..0 # SKIP $tool missing (qemu-system-x86, cpio)"; exit 0; }
done
make -s BUILD="$SBUILD" LDFLAGS=-static "$SBUILD/tests/mempool.t" >&2
mkdir -p "$WORK"
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -static -o "$WORK/init" tests/qemu/init.c
image=$(tests/qemu/fetch-kernel.sh "$suite" "$CACHE") ||
	{ echo "1..0 # SKIP no $suite kernel (fetch-kernel.sh failed)"; exit 0; }
printf '%s\n' "numa /bin/mempool.t --numa" "cid64 /bin/mempool.t --cid-figure" >"$WORK/cmds"
tests/qemu/mkinitramfs.sh "$WORK/initrd" "$WORK/init" "$WORK/cmds" "$SBUILD/tests/mempool.t"

timeout "${BOOT_TIMEOUT:-600}" qemu-system-x86_64 -accel tcg -cpu max -smp 2,maxcpus=64 -m 1024 \
	-object memory-backend-ram,id=m0,size=512M -object memory-backend-ram,id=m1,size=512M \
	-numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1-63,memdev=m1 \
	-nographic -nic none -no-reboot -kernel "$image" -initrd "$WORK/initrd" \
	-append "console=ttyS0 rdinit=/init panic=-1 quiet ${KERNEL_ARGS:-}" </dev/null >"$WORK/console.raw" 2>&1 || true
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
[ $failed -eq 0 ] || tail -20 "$WORK/console.log" | sed 's/^/# /'
echo "1..$n"
[ $failed -eq 0 ]
