#!/bin/sh
# arch-same-code.sh REF [ARCH...]
#
# Evidence for a change that must not change generated code (a
# reorganisation of the arch layer, a rename): builds the library, the
# primitive and structure tests, the negative control and the stress tool
# (with its injection points) at -O2 for each architecture, from commit REF
# and from the working tree, and compares `objdump -d` of each and the
# contents of its __rseq_cs, __rseq_cs_ptr_array and
# __rseq_exit_point_array sections.  Prints
# one line per architecture and program, "same" or "DIFFERS" (with the
# first differing lines), and exits 1 if anything differs.
#
# Architectures: x86_64 (gcc and clang), i386, aarch64, arm (A32 and T32),
# ppc64le, s390x, riscv64; a missing cross compiler is a SKIP line (and an
# exit status of 1 under CI=true).  Work directory: $WORK (default
# /tmp/arch-same-code).
set -u
cd "$(dirname "$0")/../.." || exit 2
[ $# -ge 1 ] || { echo "usage: $0 REF [ARCH...]" >&2; exit 2; }
ref=$1
shift
WORK=${WORK:-/tmp/arch-same-code}
ALL="x86_64 x86_64-clang i386 aarch64 arm arm-thumb ppc64le s390x riscv64"
arches=${*:-$ALL}
JOBS=${JOBS:-2}

rm -rf "$WORK"
mkdir -p "$WORK"
git worktree add -f --detach "$WORK/ref" "$ref" >/dev/null 2>&1 || {
	echo "arch-same-code: cannot check out $ref" >&2
	exit 2
}
trap 'git worktree remove -f "$WORK/ref" >/dev/null 2>&1' EXIT

st=0
for arch in $arches; do
	case $arch in
	x86_64) cc=gcc ;;
	x86_64-clang) cc=clang ;;
	i386) cc=i686-linux-gnu-gcc ;;
	aarch64) cc=aarch64-linux-gnu-gcc ;;
	arm) cc="arm-linux-gnueabihf-gcc -marm" ;;
	arm-thumb) cc="arm-linux-gnueabihf-gcc -mthumb" ;;
	ppc64le) cc=powerpc64le-linux-gnu-gcc ;;
	s390x) cc=s390x-linux-gnu-gcc ;;
	riscv64) cc=riscv64-linux-gnu-gcc ;;
	*) echo "arch-same-code: unknown arch '$arch' (one of: $ALL)" >&2; exit 2 ;;
	esac
	if ! command -v "${cc%% *}" >/dev/null 2>&1; then
		echo "SKIP $arch: ${cc%% *} is not installed"
		[ "${CI:-}" = true ] && st=1
		continue
	fi
	case $cc in *-gcc*) objdump=${cc%%-gcc*}-objdump ;; *) objdump=objdump ;; esac
	progs="tests/primitives.t tests/negative-primitives.t tests/structures.t
	       bin/rseqkit-stress bin/rseqkit-stress-noarm"
	# Thumb: the test programs' injection builds run out of registers
	# in the gated cmpcopystore ("impossible constraints"); check-cross
	# builds A32.
	[ "$arch" = arm-thumb ] && progs="tests/primitives.t bin/rseqkit-stress bin/rseqkit-stress-noarm"
	for side in ref new; do
		src=$WORK/ref
		[ $side = new ] && src=$PWD
		B=$WORK/build-$arch-$side
		targets=
		for p in $progs; do targets="$targets $B/$p"; done
		# shellcheck disable=SC2086 # word lists
		if ! make -s -C "$src" -j"$JOBS" BUILD="$B" CC="$cc" LDFLAGS=-static \
			$targets >"$WORK/$arch-$side.log" 2>&1; then
			echo "FAIL $arch: the $side build failed:"
			tail -n 15 "$WORK/$arch-$side.log" | sed 's/^/  /'
			st=1
			continue 2
		fi
	done
	for p in $progs; do
		for side in ref new; do
			# Code, then the contents of the descriptor, pointer
			# and exit-point sections; the file name line differs.
			{
				$objdump -d "$WORK/build-$arch-$side/$p"
				$objdump -s -j __rseq_cs -j __rseq_cs_ptr_array \
					-j __rseq_exit_point_array "$WORK/build-$arch-$side/$p"
			} | grep -v 'file format' >"$WORK/$arch-$(basename "$p")-$side.dis"
		done
		if cmp -s "$WORK/$arch-$(basename "$p")-ref.dis" "$WORK/$arch-$(basename "$p")-new.dis"; then
			printf '%-13s %-26s same (%s lines)\n' "$arch" "$(basename "$p")" \
				"$(wc -l <"$WORK/$arch-$(basename "$p")-new.dis")"
		else
			printf '%-13s %-26s DIFFERS\n' "$arch" "$(basename "$p")"
			diff "$WORK/$arch-$(basename "$p")-ref.dis" "$WORK/$arch-$(basename "$p")-new.dis" |
				head -n 8 | sed 's/^/  /'
			st=1
		fi
	done
done
exit $st
