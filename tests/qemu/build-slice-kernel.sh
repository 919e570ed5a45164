#!/bin/sh
# build-slice-kernel.sh CACHE
#
# Build, once, an x86-64 kernel that has the rseq time-slice extension
# (CONFIG_RSEQ_SLICE_EXTENSION, Linux 7.0+), and print its image's path.
# Debian's own 7.2 kernels leave the feature out (prctl 79 answers
# ENOTSUPP), so check-slice builds one from Debian's linux-source-7.2
# package (sid; the version is discovered through a private apt state, as
# fetch-kernel.sh does: the host's apt setup does not change).
#
# The configuration is tinyconfig plus what qemu-system-x86_64 and the
# test initramfs need (serial console, initramfs, ELF, SMP, ACPI power
# off, proc, sysfs, futexes, POSIX timers) and what the tests look at:
# rseq, membarrier, the slice extension, and the rseq statistics in
# debugfs (CONFIG_RSEQ_STATS: sgrant, syield, ...).  The image is kept as
# CACHE/slice-VERSION/bzImage with its .config; a cached image is reused
# (REFRESH=1 builds again).  Needs bison, flex, libelf-dev, bc, xz-utils
# and make/gcc (.ci/packages, group "slice").  Takes about BUILD minutes
# on 2 cores (see the check-slice comment in the Makefile).
set -eu

cache=$1
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
srcpkg=${SLICE_SOURCE:-linux-source-7.2}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

if [ -z "${REFRESH:-}" ] && [ -s "$cache/slice-image" ] && [ -s "$(cat "$cache/slice-image")" ]; then
	cat "$cache/slice-image"
	exit 0
fi

apt=$cache/slice-apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
echo "deb $mirror sid main" >"$apt/sources.list"
set -- -q -o Dir::Etc::SourceList="$apt/sources.list" \
	-o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$apt/lists" \
	-o Dir::Cache="$apt/cache" -o Dir::State::status=/dev/null \
	-o APT::Architectures::=amd64 -o Acquire::Languages=none \
	-o Debug::NoLocking=1 -o APT::Sandbox::User=root
apt-get "$@" update >&2
ver=$(apt-cache "$@" show "$srcpkg" | sed -n 's/^Version: //p' | head -n1)
[ -n "$ver" ] || { echo "build-slice-kernel: no $srcpkg in sid" >&2; exit 1; }
dir=$cache/slice-$ver
echo "build-slice-kernel: $srcpkg $ver" >&2

if [ ! -d "$dir/src" ]; then
	rm -rf "$dir" && mkdir -p "$dir/deb"
	(cd "$dir/deb" && apt-get "$@" download "$srcpkg" >&2)
	dpkg-deb --fsys-tarfile "$dir"/deb/*.deb | tar -x -C "$dir/deb" --wildcards '*.tar.xz'
	mkdir -p "$dir/src.tmp"
	tar -xJf "$(find "$dir/deb" -name '*.tar.xz' | head -n1)" -C "$dir/src.tmp" --strip-components=1
	mv "$dir/src.tmp" "$dir/src"
	rm -rf "$dir/deb"
fi
rm -rf "$apt"

# What tinyconfig lacks for our boots and tests.
cat >"$dir/slice.config" <<'EOF'
CONFIG_64BIT=y
CONFIG_SMP=y
CONFIG_NR_CPUS=8
CONFIG_PRINTK=y
CONFIG_TTY=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_BINFMT_ELF=y
CONFIG_PROC_FS=y
CONFIG_SYSFS=y
CONFIG_DEVTMPFS=y
CONFIG_FUTEX=y
CONFIG_MULTIUSER=y
CONFIG_POSIX_TIMERS=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_PCI=y
CONFIG_ACPI=y
CONFIG_EXPERT=y
CONFIG_RSEQ=y
CONFIG_MEMBARRIER=y
CONFIG_RSEQ_SLICE_EXTENSION=y
CONFIG_DEBUG_FS=y
CONFIG_DEBUG_FS_ALLOW_ALL=y
CONFIG_RSEQ_STATS=y
CONFIG_PREEMPT_LAZY=y
CONFIG_HZ_1000=y
EOF
jobs=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)
(
	cd "$dir/src"
	make -s tinyconfig >&2
	scripts/kconfig/merge_config.sh -m .config "$dir/slice.config" >/dev/null
	make -s olddefconfig >&2
	# Every line of the fragment must have survived olddefconfig: a
	# dependency that is not met drops an option without a word.
	while IFS= read -r line; do
		grep -qx "$line" .config || { echo "build-slice-kernel: $line did not stick (a dependency is off)" >&2; exit 1; }
	done <"$dir/slice.config"
	make -s -j"$jobs" bzImage >&2
)
cp "$dir/src/arch/x86/boot/bzImage" "$dir/bzImage"
cp "$dir/src/.config" "$dir/config"
echo "$(($(date +%s) - t0))" >"$dir/build-seconds"
echo "build-slice-kernel: built in $(cat "$dir/build-seconds")s on $jobs CPU(s)" >&2
echo "$dir/bzImage" >"$cache/slice-image"
cat "$cache/slice-image"
