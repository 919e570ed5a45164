#!/bin/sh
# fetch-kernel.sh SUITE CACHE [DEBARCH [METAPKG]]
#
# Put the current Debian SUITE kernel image for DEBARCH (default amd64) in
# CACHE/SUITE-DEBARCH/ and print the image's path.  The version is
# discovered from the flavour metapackage (default linux-image-cloud-DEBARCH)
# through a private apt state: nothing on the host's apt setup changes.
# A cached image is reused as is; REFRESH=1 looks again.
set -eu

suite=$1 cache=$2 debarch=${3:-amd64} meta=${4:-linux-image-cloud-$debarch}
dir=$cache/$suite-$debarch
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ -z "${REFRESH:-}" ] && [ -s "$dir/image" ]; then
	cat "$dir/image"
	exit 0
fi

mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
dir=$(cd "$dir" && pwd)
echo "deb $mirror $suite main" >"$dir/apt/sources.list"
set -- -q -o Dir::Etc::SourceList="$dir/apt/sources.list" \
	-o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$dir/apt/lists" \
	-o Dir::Cache="$dir/apt/cache" -o Dir::State::status=/dev/null \
	-o APT::Architectures::="$debarch" -o Acquire::Languages=none \
	-o Debug::NoLocking=1 -o APT::Sandbox::User=root
apt-get "$@" update >&2

# The metapackage depends on linux-image-RELEASE (RELEASE like
# 7.2.13+deb14-cloud-amd64); the image is in the first of these that
# exists: sid's linux-binary-unsigned-*, trixie's *-unsigned, the plain one.
pkg=$(apt-cache "$@" depends "$meta" | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
[ -n "$pkg" ] || { echo "fetch-kernel: no kernel behind $meta in $suite" >&2; exit 1; }
rel=${pkg#linux-image-}
for cand in "linux-binary-unsigned-$rel" "linux-image-$rel-unsigned" "linux-image-$rel"; do
	if apt-cache "$@" show "$cand" >/dev/null 2>&1; then
		break
	fi
done
echo "fetch-kernel: $suite: $cand" >&2

rm -rf "$dir/deb" "$dir/root"
mkdir -p "$dir/deb" "$dir/root"
(cd "$dir/deb" && apt-get "$@" download "$cand" >&2)
dpkg-deb -x "$dir"/deb/*.deb "$dir/root"
img=$(find "$dir/root/boot" "$dir/root/usr/lib/modules" -name 'vmlinu[xz]*' -type f 2>/dev/null | head -n1)
[ -n "$img" ] || { echo "fetch-kernel: no image in $cand" >&2; exit 1; }
# Keep the image only: modules are not needed (the cloud kernels have
# everything the tests use built in).
mv "$img" "$dir/vmlinuz-$rel"
rm -rf "$dir/deb" "$dir/root" "$dir/apt"
echo "$dir/vmlinuz-$rel" >"$dir/image"
cat "$dir/image"
