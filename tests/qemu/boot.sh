#!/bin/sh
# boot.sh ARCH KERNEL INITRD LOG [KERNEL-ARGS...]
#
# Boot KERNEL with INITRD under qemu-system (TCG, 2 CPUs, 1 GiB, no
# network, serial console), wait for it to power off, and write the
# console to LOG with the firmware's escape sequences and the CRs of the
# tty removed.  Exit status: qemu's (124 when BOOT_TIMEOUT, default 900 s,
# ran out).  Only x86_64 is exercised by check-kernels; the other rows
# follow shared/DESIGN.md section 7.
set -u

arch=$1 kernel=$2 initrd=$3 log=$4
shift 4
case $arch in
x86_64)  qemu="qemu-system-x86_64 -accel tcg -cpu max"; console=ttyS0 ;;
aarch64) qemu="qemu-system-aarch64 -M virt -cpu cortex-a57"; console=ttyAMA0 ;;
arm)     qemu="qemu-system-arm -M virt,highmem=off -cpu cortex-a15"; console=ttyAMA0 ;;
ppc64le) qemu="qemu-system-ppc64 -M pseries,x-vof=on -cpu power9 -vga none"; console=hvc0 ;;
s390x)   qemu="qemu-system-s390x -M s390-ccw-virtio"; console=ttysclp0 ;;
riscv64) qemu="qemu-system-riscv64 -M virt"; console=ttyS0 ;;
*) echo "boot.sh: unknown arch $arch" >&2; exit 2 ;;
esac

# shellcheck disable=SC2086 # $qemu is a word list
timeout "${BOOT_TIMEOUT:-900}" $qemu -smp 2 -m 1024 -nographic -nic none -no-reboot \
	-kernel "$kernel" -initrd "$initrd" \
	-append "console=$console rdinit=/init panic=-1 quiet $*" </dev/null >"$log.raw" 2>&1
rc=$?
# ESC [ ... final byte, ESC c (reset), other two-byte ESC sequences; CRs.
sed -e 's|\x1b\[[0-9;?=]*[ -/]*[@-~]||g' -e 's|\x1b[@-Z\\-_c]||g' -e 's|\r||g' \
	"$log.raw" >"$log"
[ -n "${KEEP_RAW:-}" ] || rm -f "$log.raw"
exit $rc
