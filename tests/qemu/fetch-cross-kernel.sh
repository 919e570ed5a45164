#!/bin/sh
# fetch-cross-kernel.sh ARCH [CACHE]
#
# Put Debian trixie's kernel image for ARCH (aarch64 arm ppc64le s390x
# riscv64) in CACHE/ARCH/ (default build/cross-kernels) and print
# "IMAGE RELEASE".  The version is discovered, never hard-coded: the
# flavour metapackage's dependency first; when that version's .deb does
# not download (the mirror sometimes lags the Packages index), the newest
# linux-image-6.12*-FLAVOUR package that does.  A private apt state is
# used (nothing on the host's apt setup changes, no dpkg architecture is
# added).  A cached image is reused as is; REFRESH=1 looks again.
#
# Needs apt-get, apt-cache, dpkg-deb and debian-archive-keyring; installs
# nothing.  (fetch-kernel.sh does the same for the x86-64 kernels of
# check-kernels.)
set -eu

arch=$1 cache=${2:-build/cross-kernels}
suite=${SUITE:-trixie}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
case $arch in
aarch64) debarch=arm64 flavour=cloud-arm64 ;;
arm) debarch=armhf flavour=armmp ;;
ppc64le) debarch=ppc64el flavour=powerpc64le ;;
s390x) debarch=s390x flavour=s390x ;;
riscv64) debarch=riscv64 flavour=riscv64 ;;
*) echo "fetch-cross-kernel: unknown arch $arch" >&2; exit 2 ;;
esac
meta=linux-image-$flavour
dir=$cache/$arch

if [ -z "${REFRESH:-}" ] && [ -s "$dir/image" ]; then
	read -r img rel <"$dir/image"
	if [ -s "$img" ]; then
		echo "$img $rel"
		exit 0
	fi
fi

mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
dir=$(cd "$dir" && pwd)
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] $mirror $suite main" >"$dir/apt/sources.list"
set -- -q -o Dir::Etc::SourceList="$dir/apt/sources.list" \
	-o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists="$dir/apt/lists" \
	-o Dir::Cache="$dir/apt/cache" -o Dir::State::status=/dev/null \
	-o APT::Architecture="$debarch" -o APT::Architectures::="$debarch" \
	-o Acquire::Languages=none -o Debug::NoLocking=1 -o APT::Sandbox::User=root
apt-get "$@" update >&2

# Candidates, best first: the metapackage's version, then every
# linux-image-6.12*-FLAVOUR[-unsigned] newest first.
dep=$(apt-cache "$@" depends "$meta" 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ :]*\).*$/\1/p' | head -n1)
others=$(apt-cache "$@" pkgnames linux-image-6.12 |
	grep -E -- "^linux-image-6\.12[^ ]*-$flavour(-unsigned)?\$" | sed 's/-unsigned$//' |
	sort -u | sort -rV | grep -vxF -- "${dep:-none}" || true)
[ -n "$dep$others" ] || { echo "fetch-cross-kernel: no $flavour kernel in $suite" >&2; exit 1; }

rm -rf "$dir/deb"
mkdir -p "$dir/deb"
got=
for pkg in $dep $others; do
	for cand in "$pkg-unsigned" "$pkg"; do
		apt-cache "$@" show "$cand" >/dev/null 2>&1 || continue
		echo "fetch-cross-kernel: $arch: trying $cand" >&2
		if (cd "$dir/deb" && apt-get "$@" download "$cand" >&2); then
			got=$cand
			break 2
		fi
	done
done
[ -n "$got" ] || { echo "fetch-cross-kernel: no $flavour kernel .deb downloads" >&2; exit 1; }

rm -rf "$dir/root"
mkdir -p "$dir/root"
dpkg-deb -x "$dir"/deb/*.deb "$dir/root"
img=$(find "$dir/root/boot" -name 'vmlinu[xz]-*' -type f 2>/dev/null | head -n1)
[ -n "$img" ] || { echo "fetch-cross-kernel: no image in $got" >&2; exit 1; }
rel=${img##*/vmlinu?-}
# Keep the image only (the tests need no modules), and only this one.
find "$dir" -maxdepth 1 -name 'vmlinu[xz]-*' ! -name "${img##*/}" -delete
mv "$img" "$dir/${img##*/}"
rm -rf "$dir/deb" "$dir/root" "$dir/apt"
echo "$dir/${img##*/} $rel" >"$dir/image"
cat "$dir/image"
