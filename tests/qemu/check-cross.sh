#!/bin/sh
# check-cross.sh [ARCH...]   (make check-cross [ARCH=NAME])
#
# rseqkit on seven architectures:
#
#   ARCH      how                        compiler                      kernel
#   x86_64    native, built with clang   clang                         the host's
#   i386      native                     i686-linux-gnu-gcc -static    the host's
#                                        (or gcc -m32, gcc-multilib)
#   aarch64   qemu-system-aarch64 (TCG)  aarch64-linux-gnu-gcc         Debian trixie cloud-arm64
#   arm       qemu-system-arm            arm-linux-gnueabihf-gcc -marm Debian trixie armmp
#   ppc64le   qemu-system-ppc64          powerpc64le-linux-gnu-gcc     Debian trixie powerpc64le
#   s390x     qemu-system-s390x          s390x-linux-gnu-gcc           Debian trixie s390x
#   riscv64   qemu-system-riscv64        riscv64-linux-gnu-gcc         Debian trixie riscv64
#
# Each foreign arch: static test programs are cross-built in
# build-cross-ARCH/, packed with tests/qemu/init.c into an initramfs
# (mkinitramfs.sh), booted on Debian's kernel (fetch-cross-kernel.sh:
# version discovered, cached in build/cross-kernels/) with boot.sh; init
# runs the commands below and powers off, and cross-verdict.awk reads the
# verdict from the console.  The two native rows run the same commands on
# the host, framed by the same markers.  Commands:
#   primitives.t, negative-primitives.t (must detect loss), structures.t,
#   rseqkit-info --json, the quick stress tier (-T i l b m s, both index
#   modes, no delay and a delay at each asm injection point 1-4), and the
#   unarmed stress twin on the list and buffer tests (must report FAILED,
#   in at least one of three tries each); the allocator's conformance
#   test and its stress (cpu and cid index, and RSEQKIT_DISABLE=1), built
#   as static programs whose malloc is rseqkit's.
# fence.t is left out: its timing assumptions do not hold under TCG.
#
# One line per arch: arch, kernel, commands run, passed, failed (failed
# commands, plus one for each run-level check missed: the run did not
# finish, no aborts at all, an unarmed twin that never lost), aborts seen
# (the sum the tests report), boot (or native run) seconds, total seconds
# (with the build).  Exit status 1 if any arch failed.
#
# Installs nothing.  Needs: cpio; gcc-aarch64-linux-gnu
# libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
# gcc-powerpc64le-linux-gnu libc6-dev-ppc64el-cross gcc-s390x-linux-gnu
# libc6-dev-s390x-cross gcc-riscv64-linux-gnu libc6-dev-riscv64-cross;
# qemu-system-arm qemu-system-ppc qemu-system-misc; clang;
# gcc-i686-linux-gnu libc6-dev-i386-cross for i386 (gcc-multilib's gcc -m32
# also works, but conflicts with the cross compilers on Debian); the list
# is .ci/packages ("sudo make deps DEPS=cross" installs it).  A missing
# tool skips its arch: a SKIP row naming the packages, and the last line
# says "OK (N skipped)", never a bare OK.  With CI=true (or STRICT=1) a
# skip fails the run.
#
# Tunables (environment): THREADS (8), REPS (2000), LOOPS (2000) of the
# stress tier; MALLOC_THREADS (64) of the allocator's stress;
# BOOT_TIMEOUT (900 s per boot); JOBS (2) for make.
set -u
cd "$(dirname "$0")/../.." || exit 2

ALL="x86_64 i386 aarch64 arm ppc64le s390x riscv64"
THREADS=${THREADS:-8}
REPS=${REPS:-2000}
LOOPS=${LOOPS:-2000}
MALLOC_THREADS=${MALLOC_THREADS:-64}
JOBS=${JOBS:-2}
CACHE=build/cross-kernels
export BOOT_TIMEOUT="${BOOT_TIMEOUT:-900}"

arches=${*:-$ALL}
for a in $arches; do
	case " $ALL " in
	*" $a "*) ;;
	*) echo "check-cross: unknown arch '$a' (one of: $ALL)" >&2; exit 2 ;;
	esac
done

# The commands of one run, in init.c's /cmds format (LABEL PROGRAM ARGS).
commands() {
	echo "prim /bin/primitives.t"
	echo "neg /bin/negative-primitives.t"
	echo "struct /bin/structures.t"
	echo "info /bin/rseqkit-info --json"
	# The asm points each test passes on this arch, read from the
	# cross-built tool itself (it refuses the others).
	pts=$(tr -c '[:print:]' '\n' <"$B/bin/rseqkit-stress" |
		sed -n 's/^.*rseqkit-stress injection points: //p' | head -n 1)
	for mode in cpu cid; do
		for t in i l b m s; do
			set -- -T $t -I $mode -t "$THREADS" -r "$REPS"
			echo "stress.$mode.$t.0 /bin/rseqkit-stress $*"
			tp=$(printf '%s\n' "$pts" | tr ';' '\n' | sed -n "s/^$t=//p")
			for p in ${tp:-1 2 3 4}; do
				[ "$p" -lt 5 ] || continue
				echo "stress.$mode.$t.$p /bin/rseqkit-stress $* -$p $LOOPS"
			done
		done
	done
	# The allocator: its conformance test, and its stress (producers
	# and consumers, churn, fork) in both index modes and without rseq.
	echo "malloc.conform /bin/malloc_conform.t"
	echo "malloc.stress.cpu /bin/malloc_stress.t -t $MALLOC_THREADS"
	echo "malloc.stress.cid RSEQKIT_MALLOC_INDEX=cid /bin/malloc_stress.t -t $MALLOC_THREADS"
	echo "malloc.stress.off RSEQKIT_DISABLE=1 /bin/malloc_stress.t -t $MALLOC_THREADS"
	# Three tries each (a loss has to show at least once): cheap, and
	# a host or a TCG guest that happens not to preempt inside the
	# window once must not fail the run.
	for t in l b; do
		for try in 1 2 3; do
			echo "negstress.$t.$try /bin/rseqkit-stress-noarm -T $t $NEG_ARGS"
		done
	done
}

# native_run CMDS BINDIR LOG: run CMDS on this host as init.c would, with
# /bin/ meaning BINDIR, writing init.c's markers and the output to LOG.
native_run() {
	{
		echo "@@rsk kernel $(uname -r)"
		while read -r label prog args; do
			case $label in '' | '#'*) continue ;; esac
			echo "@@rsk begin $label"
			# NAME=VALUE words before the program are its environment
			# (as init.c reads them).
			vars=
			while case $prog in *=*) true ;; *) false ;; esac; do
				vars="$vars $prog"
				prog=${args%% *}
				case $args in *" "*) args=${args#* } ;; *) args= ;; esac
			done
			n0=$(date +%s.%N)
			# shellcheck disable=SC2086 # vars and args are word lists
			timeout 300 env $vars "$2/${prog#/bin/}" $args </dev/null 2>&1
			rc=$?
			n1=$(date +%s.%N)
			if [ $rc = 124 ]; then st=timeout; else st=exit=$rc; fi
			echo "@@rsk end $label $st secs=$(awk "BEGIN { printf \"%.2f\", $n1 - $n0 }")"
		done <"$1"
		echo "@@rsk done"
	} >"$3" 2>&1
}

# kernel_has_cid RELEASE: 0 if the kernel has mm_cid (6.3 and later).
kernel_has_cid() {
	major=${1%%.*} rest=${1#*.}
	minor=${rest%%[!0-9]*}
	[ "$major" -gt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -ge 3 ]; }
}

# pkgs_of TOOL...: the Debian packages (.ci/packages) that give the tools.
pkgs_of() {
	for tool in "$@"; do
		case $tool in
		qemu-system-aarch64 | qemu-system-arm) echo qemu-system-arm ;;
		qemu-system-ppc64) echo qemu-system-ppc ;;
		qemu-system-s390x | qemu-system-riscv64) echo qemu-system-misc ;;
		*) awk -F'|' -v t="cmd:$tool" '$3 == t { print $2; exit }' .ci/packages ;;
		esac
	done | awk '!seen[$0]++' | tr '\n' ' ' | sed 's/ $//'
}

skipped=0 skipped_names=
skip() { # ARCH REASON [PACKAGES]
	printf '%-14s %-32s %5s %6s %6s %9s %6s %6s\n' "$1" "SKIP (not installed)" - - - - - -
	echo "  SKIP $1: $2${3:+ (apt-get install $3)}"
	skipped=$((skipped + 1))
	skipped_names="$skipped_names $1"
	if [ -n "${STRICT:-}" ] || [ "${CI:-}" = true ]; then
		echo "  FAIL $1: skipped for a missing package, and CI=true (or STRICT=1)"
		failed=1
	fi
}

printf '%-14s %-32s %5s %6s %6s %9s %6s %6s\n' arch kernel tests passed failed aborts boot secs
failed=0
t_all=$(date +%s)
for arch in $arches; do
	t0=$(date +%s)
	B=build-cross-$arch
	W=$B/qemu
	ldflags=-static
	case $arch in
	x86_64) cc=clang ldflags= ;;
	i386) # Debian's i686 cross compiler coexists with the others;
		# gcc -m32 needs gcc-multilib, which conflicts with them.
		if command -v i686-linux-gnu-gcc >/dev/null 2>&1; then
			cc=i686-linux-gnu-gcc ldflags=-static
		else
			cc="gcc -m32" ldflags=
		fi ;;
	aarch64) cc=aarch64-linux-gnu-gcc ;;
	arm) cc="arm-linux-gnueabihf-gcc -marm" ;;
	ppc64le) cc=powerpc64le-linux-gnu-gcc ;;
	s390x) cc=s390x-linux-gnu-gcc ;;
	riscv64) cc=riscv64-linux-gnu-gcc ;;
	esac
	# The unarmed twin's window: wide under TCG; natively more
	# repetitions with more threads (as tests/stress_negative.sh).
	NEG_ARGS="-t 8 -r 500 -3 20000"
	case $arch in
	x86_64 | i386) qemu='' NEG_ARGS="-t $((6 * $(getconf _NPROCESSORS_ONLN))) -r 20000 -3 2000" ;;
	aarch64) qemu="qemu-system-aarch64" ;;
	arm) qemu="qemu-system-arm" ;;
	ppc64le) qemu="qemu-system-ppc64" ;;
	s390x) qemu="qemu-system-s390x" ;;
	riscv64) qemu="qemu-system-riscv64" ;;
	esac
	missing=
	for tool in ${cc%% *} $qemu ${qemu:+cpio}; do
		command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
	done
	if [ -n "$missing" ]; then
		# shellcheck disable=SC2086 # a word list
		pk=$(pkgs_of $missing)
		case $arch in
		i386) pk="gcc-i686-linux-gnu libc6-dev-i386-cross (or gcc-multilib)" ;;
		aarch64 | arm | ppc64le | s390x | riscv64)
			case $missing in *-gcc*) pk="$pk $(awk -F'|' -v a="$arch" '$1 == "cross" && $2 ~ /^libc6-dev-/ &&
				$5 ~ ("the " a " C library") { print $2 }' .ci/packages)" ;; esac ;;
		esac
		skip "$arch" "not installed:$missing" "$pk"
		continue
	fi
	mkdir -p "$W"
	# The compiler must build and link a program using the headers the
	# library needs (gcc -m32 without gcc-multilib has no <asm/errno.h>).
	printf '#include <errno.h>\n#include <pthread.h>\n#include <linux/rseq.h>\nint main(void) { return errno; }\n' >"$W/probe.c"
	# shellcheck disable=SC2086 # $cc and $ldflags are word lists
	if ! $cc $ldflags -pthread -o "$W/probe" "$W/probe.c" >"$W/probe.log" 2>&1; then
		case $arch in
		i386) pk="gcc-multilib (or gcc-i686-linux-gnu libc6-dev-i386-cross)" ;;
		*) pk=$(awk -F'|' -v a="$arch" '$2 ~ /^libc6-dev-/ && $5 ~ ("the " a " C library") { print $2 }' .ci/packages) ;;
		esac
		skip "$arch" "'$cc' cannot build a test program: $(grep -m1 'error' "$W/probe.log" ||
			head -n1 "$W/probe.log")" "$pk"
		continue
	fi

	# Some kernels cannot execute i386 binaries (no 32-bit compat mode):
	# the machine's limit, not a missing package.  The row says so and is
	# not counted as run.
	# shellcheck disable=SC2086
	if [ "$arch" = i386 ] && ! tests/bin/deps.sh runs32 $cc $ldflags; then
		printf '%-14s %-32s %5s %6s %6s %9s %6s %6s\n' "$arch" "SKIP (machine)" - - - - - -
		echo "  SKIP $arch: this kernel cannot execute i386 binaries (this machine, not a package)"
		skipped=$((skipped + 1))
		skipped_names="$skipped_names $arch"
		continue
	fi

	progs="$B/tests/primitives.t $B/tests/negative-primitives.t $B/tests/structures.t
	       $B/bin/rseqkit-stress $B/bin/rseqkit-stress-noarm $B/bin/rseqkit-info
	       $B/tests/static/malloc_conform.t $B/tests/static/malloc_stress.t"
	# shellcheck disable=SC2086
	if ! make -s -j"$JOBS" BUILD="$B" CC="$cc" LDFLAGS="$ldflags" $progs >"$W/build.log" 2>&1; then
		printf '%-14s %-32s %5s %6s %6s %9s %6s %6d\n' "$arch" "(build failed)" - - 1 - - \
			$(($(date +%s) - t0))
		sed 's/^/  build: /' "$W/build.log" | tail -n 20
		failed=1
		continue
	fi
	commands >"$W/cmds"
	log=$W/console.log
	tb=$(date +%s)
	if [ -z "$qemu" ]; then
		mkdir -p "$W/bin"
		for p in $progs; do ln -sf "$(pwd)/$p" "$W/bin/"; done
		native_run "$W/cmds" "$W/bin" "$log"
		release=$(uname -r)
	else
		if ! kinfo=$(tests/qemu/fetch-cross-kernel.sh "$arch" "$CACHE" 2>"$W/fetch.log"); then
			printf '%-14s %-32s %5s %6s %6s %9s %6s %6d\n' "$arch" "(no kernel)" - - 1 - - \
				$(($(date +%s) - t0))
			sed 's/^/  fetch: /' "$W/fetch.log" | tail -n 10
			failed=1
			continue
		fi
		image=${kinfo% *} release=${kinfo##* }
		# shellcheck disable=SC2086
		if ! { $cc -std=gnu11 -O2 -Wall -Wextra -Werror -static -o "$W/init" tests/qemu/init.c &&
			tests/qemu/mkinitramfs.sh "$W/initrd" "$W/init" "$W/cmds" $progs; }; then
			echo "  FAIL $arch: cannot build the initramfs"
			failed=1
			continue
		fi
		tests/qemu/boot.sh "$arch" "$image" "$W/initrd" "$log" ||
			echo "  note $arch: qemu exited with status $? (console in $log)"
	fi
	boot=$(($(date +%s) - tb))
	cid=0
	if kernel_has_cid "$release"; then cid=1; fi
	awk -v name="$arch" -v cid=$cid -v boot=$boot -v secs=$(($(date +%s) - t0)) \
		-f tests/qemu/cross-verdict.awk "$log" || {
		failed=1
		echo "  console: $log"
	}
done
ran=$(($(echo $arches | wc -w) - skipped))
if [ $failed != 0 ]; then
	verdict=FAILED
elif [ $ran = 0 ]; then
	verdict="NOTHING RUN"
else
	verdict=OK
fi
[ $skipped = 0 ] || verdict="$verdict ($skipped skipped:$skipped_names; sudo make deps DEPS=cross)"
echo "check-cross: $(($(date +%s) - t_all))s, $ran run, $verdict"
exit $failed
