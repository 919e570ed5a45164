#!/bin/sh
# mkinitramfs.sh OUT INIT CMDS PROGRAM...
#
# Pack an uncompressed cpio (newc) initramfs: INIT (a static program) as
# /init, CMDS as /cmds (the list init.c runs), each PROGRAM as /bin/NAME,
# and /dev/console when we may create device nodes (as root; otherwise
# init.c mounts devtmpfs to get one).
set -eu

out=$1 init=$2 cmds=$3
shift 3
root=$out.d
rm -rf "$root"
mkdir -p "$root/bin" "$root/dev"
cp "$init" "$root/init"
cp "$cmds" "$root/cmds"
for p in "$@"; do
	cp "$p" "$root/bin/"
done
if [ "$(id -u)" = 0 ]; then
	mknod -m 600 "$root/dev/console" c 5 1
fi
(cd "$root" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >"$out"
rm -rf "$root"
