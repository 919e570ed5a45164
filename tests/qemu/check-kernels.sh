#!/bin/sh
# check-kernels.sh [NAME...]   (make check-kernels [KERNEL=NAME])
#
# Run rseqkit on Debian's x86-64 kernels under qemu-system-x86_64 (TCG):
#
#   NAME        Debian suite  kernel arguments   primitives.t in
#   6.1         bookworm                         libc (no mm_cid: cpu mode only)
#   6.12        trixie                           library
#   7.2         sid                              libc (legacy registration)
#   7.2+debug   sid           rseq_debug=1       own-area (V2 registration)
#   slice       (built)                          own-area
#
# "slice" (make check-slice) is booted only when named: a kernel built from
# Debian's linux-source-7.2 with CONFIG_RSEQ_SLICE_EXTENSION
# (build-slice-kernel.sh, once, cached).  There the time-slice extension is
# offered to V2 registrations (rseqkit's own area), not to glibc 2.36's
# 32-byte one: slice.t must find it available, or absent, accordingly, and
# slice-bench (tools/slice-bench.c) measures rsk_spinlock with and without it.  On every
# other row slice.t must find it absent.
# NAME selects a row, or a row and its "+" variants (7.2 runs both 7.2
# rows).  The kernel versions are discovered (fetch-kernel.sh), so sid
# moves on with Debian; the names are labels.  Every boot runs, in each
# registration configuration (libc-owned; library-owned in glibc's area;
# library-owned in rseqkit's own 64-byte-aligned area, which registers the
# kernel's feature size: V2 on 7.x): rseqkit-info --json, the quick stress
# tier in both index modes, its unarmed twin (must detect loss); and once
# identity.t and registration.t (which cover the three configurations
# themselves); with the registrations of libc and of the library, the
# allocator's conformance test and its stress (and once more with cid
# index and with RSEQKIT_DISABLE=1), as static programs whose malloc is rseqkit's; on the rseq_debug=1 boot, a control that makes a system call
# inside a section must be caught.  FULL=1 runs primitives.t and
# negative-primitives.t in every configuration of every boot (several
# minutes more per boot).
#
# Needs qemu-system-x86 and cpio; kernels are cached in build/kernels.
set -eu
cd "$(dirname "$0")/../.."

ARCH=x86_64
SBUILD=${SBUILD:-build-static}
WORK=${WORK:-build/qemu}
CACHE=${CACHE:-build/kernels}
MATRIX="6.1:bookworm::libc 6.12:trixie::library 7.2:sid::libc 7.2+debug:sid:rseq_debug=1:own-area"
# Rows booted only when named.
NAMED_ONLY="slice:build::own-area"

# A missing tool skips every boot, says so and names the packages; the
# last line is then "nothing run (N skipped)", never OK.  With CI=true (or
# STRICT=1) the skip fails.
missing= pkgs=
for tool in qemu-system-x86_64 cpio; do
	command -v $tool >/dev/null 2>&1 && continue
	missing="$missing $tool"
	pkgs="$pkgs $(awk -F'|' -v t="cmd:$tool" '$3 == t { print $2; exit }' .ci/packages)"
done
if [ -n "$missing" ]; then
	nboots=0
	for row in $MATRIX; do
		name=${row%%:*}
		if [ $# -gt 0 ]; then
			want=
			for k in "$@"; do case $name in "$k"|"$k"+*) want=1 ;; esac; done
			[ -n "$want" ] || continue
		fi
		echo "$name: SKIP (not installed:$missing)"
		nboots=$((nboots + 1))
	done
	echo "  SKIP: apt-get install$pkgs (or: sudo make deps DEPS=kernels)"
	if [ -n "${STRICT:-}" ] || [ "${CI:-}" = true ]; then
		echo "check-kernels: 0 boot(s), FAILED ($nboots skipped for a missing package, and CI=true)"
		exit 1
	fi
	echo "check-kernels: 0 boot(s), nothing run ($nboots skipped)"
	exit 0
fi

# ---- static programs and /init ----
progs="$SBUILD/bin/rseqkit-info $SBUILD/tests/identity.t $SBUILD/tests/registration.t
       $SBUILD/tests/primitives.t $SBUILD/tests/negative-primitives.t $SBUILD/tests/slice.t
       $SBUILD/tests/structures.t $SBUILD/bin/slice-bench
       $SBUILD/tests/static/malloc_conform.t $SBUILD/tests/static/malloc_stress.t"
stress=
if [ -f tools/rseqkit-stress.c ]; then
	stress=1
	progs="$progs $SBUILD/bin/rseqkit-stress $SBUILD/bin/rseqkit-stress-noarm"
fi
# shellcheck disable=SC2086
make -s BUILD="$SBUILD" LDFLAGS=-static $progs "$SBUILD/lib/librseqkit.a" >&2
mkdir -p "$WORK"
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -static -o "$WORK/init" tests/qemu/init.c
# The rseq_debug=1 control (x86-64 asm).
${CC:-cc} -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Iinclude -pthread -static \
	-o "$WORK/syscall-in-section" tests/qemu/syscall-in-section.c "$SBUILD/lib/librseqkit.a"

# commands PRIMITIVE-CONFIGS KERNEL-ARGS SLICE: the /cmds list of one boot
# (SLICE 1: the kernel has the time-slice extension).
commands() {
	# The slice row's minimal kernel gives a single thread mm_cid 1, not
	# 0 (identity.t's check; Debian's own 7.2 gives 0): that row is for
	# the time-slice extension, the other rows cover identity.
	if [ "$3" != 1 ]; then
		echo "identity /bin/identity.t"
		echo "registration /bin/registration.t"
	fi
	for cfg in libc library own-area; do
		case $cfg in
		libc) env= ;;
		library) env="GLIBC_TUNABLES=glibc.pthread.rseq=0" ;;
		own-area) env="GLIBC_TUNABLES=glibc.pthread.rseq=0 RSEQKIT_OWN_AREA=1" ;;
		esac
		echo "$cfg.info $env /bin/rseqkit-info --json"
		# Offered to V2 registrations only: rseqkit's own area, not
		# glibc 2.36's 32 bytes.
		want=absent
		[ "$3" = 1 ] && [ $cfg != libc ] && want=available
		echo "$cfg.slice $env /bin/slice.t --expect $want"
		if [ "$3" = 1 ]; then
			[ $cfg = libc ] || echo "$cfg.structures $env /bin/structures.t"
			[ $cfg != own-area ] ||
				echo "$cfg.slice-off $env RSEQKIT_NO_SLICE=1 /bin/slice.t --expect absent"
			[ $cfg != own-area ] ||
				echo "$cfg.slice-bench $env /bin/slice-bench --check"
		fi
		case $2 in *rseq_debug=1*) echo "$cfg.syscall-in-section $env /bin/syscall-in-section" ;; esac
		# The allocator (static programs whose malloc is rseqkit's):
		# its conformance test and its stress, in both index modes and
		# without rseq, on the registrations of libc and of rseqkit.
		# Not labelled ".stress.": verdict.awk demands of those the
		# structures' cpu fallback line on a kernel without mm_cid.
		if [ "$3" != 1 ] && [ $cfg != own-area ]; then
			echo "$cfg.malloc-conform $env /bin/malloc_conform.t"
			echo "$cfg.malloc-cpu $env /bin/malloc_stress.t -t 32"
		fi
		if [ "$3" != 1 ] && [ $cfg = libc ]; then
			echo "$cfg.malloc-cid $env RSEQKIT_MALLOC_INDEX=cid /bin/malloc_stress.t -t 32"
			echo "$cfg.malloc-off $env RSEQKIT_DISABLE=1 /bin/malloc_stress.t -t 32"
		fi
		if [ -n "$stress" ]; then
			for mode in cpu cid; do
				for t in i s l b m a; do
					echo "$cfg.stress.$mode.$t $env /bin/rseqkit-stress -T $t -I $mode -t 8 -r 2000 -1 2000"
				done
			done
			echo "$cfg.stress.cpu.signal $env /bin/rseqkit-stress -T b -t 8 -r 2000 -7 -1 -m 8 -k -y"
			# The negative control, three tries: one catching it is
			# enough, and one try alone misses now and then (about
			# one boot in two).
			for try in 1 2 3; do
				echo "$cfg.negstress.$try $env /bin/rseqkit-stress-noarm -T b -t 8 -r 500 -3 20000"
			done
		fi
		case " $1 " in
		*" $cfg "*|*" all "*)
			echo "$cfg.prim $env /bin/primitives.t"
			[ -z "${FULL:-}" ] || echo "$cfg.neg $env /bin/negative-primitives.t" ;;
		esac
	done
}

# expect RELEASE: feature size, alignment, mm_cid/node_id (1/0) it must show.
expect() {
	major=${1%%.*} rest=${1#*.}
	minor=${rest%%[!0-9]*}
	if [ "$major" -lt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -lt 3 ]; }; then
		echo "20 32 0"
	elif [ "$major" -lt 7 ]; then
		echo "28 32 1"
	else
		echo "33 64 1"
	fi
}

failed=0 ran=0
t_all=$(date +%s)
for row in $MATRIX $NAMED_ONLY; do
	IFS=: read -r name suite args prim <<-EOF
	$row
	EOF
	if [ $# -gt 0 ]; then
		want=
		for k in "$@"; do
			case $name in "$k"|"$k"+*) want=1 ;; esac
		done
		[ -n "$want" ] || continue
	else
		case " $NAMED_ONLY " in *" $row "*) continue ;; esac
	fi
	ran=$((ran + 1))
	slice=0
	if [ "$suite" = build ]; then
		t_build=$(date +%s)
		image=$(tests/qemu/build-slice-kernel.sh "$CACHE")
		echo "  kernel $name: $image ($(($(date +%s) - t_build))s here; built in $(cat "${image%/*}/build-seconds")s)"
		release=$(sed -n 's/^# Linux\/x86 \([0-9.]*\) Kernel Configuration/\1/p' "${image%/*}/config")
		slice=1
	else
		image=$(tests/qemu/fetch-kernel.sh "$suite" "$CACHE")
		release=${image##*/vmlinuz-}
	fi
	[ -z "${FULL:-}" ] || prim=all
	commands "$prim" "$args" "$slice" >"$WORK/cmds-$name"
	# shellcheck disable=SC2086
	tests/qemu/mkinitramfs.sh "$WORK/initrd-$name" "$WORK/init" "$WORK/cmds-$name" $progs \
		"$WORK/syscall-in-section"
	t0=$(date +%s)
	# One more boot when the guest kernel panicked before /init printed a
	# line (TCG has been seen to oops in the idle loop of a secondary CPU
	# while booting 7.2): nothing of ours ran, so it says nothing of us.
	# A panic after /init started is a failure like any other.
	for attempt in 1 2; do
		# shellcheck disable=SC2086
		tests/qemu/boot.sh $ARCH "$image" "$WORK/initrd-$name" "$WORK/console-$name.log" $args ||
			echo "  note $name: qemu exited with status $?"
		grep -q '@@rsk' "$WORK/console-$name.log" || ! grep -q 'Kernel panic' "$WORK/console-$name.log" &&
			break
		[ $attempt = 1 ] && echo "  note $name: the kernel panicked before /init ran; booting it once more" &&
			cp "$WORK/console-$name.log" "$WORK/console-$name.panic.log"
	done
	secs=$(($(date +%s) - t0))
	read -r fs align cid <<-EOF
	$(expect "$release")
	EOF
	awk -v name="$name" -v fs="$fs" -v align="$align" -v cid="$cid" -v slice="$slice" \
		-v debug="$(case $args in *rseq_debug=1*) echo 1 ;; *) echo 0 ;; esac)" \
		-f tests/qemu/verdict.awk "$WORK/console-$name.log" || failed=1
	echo "  boot $name${args:+ ($args)}: ${secs}s wall, console in $WORK/console-$name.log"
done
[ "$ran" -gt 0 ] || { echo "check-kernels: no kernel named $*" >&2; exit 2; }
echo "check-kernels: $ran boot(s), $(($(date +%s) - t_all))s, $([ $failed = 0 ] && echo OK || echo FAILED)"
exit $failed
