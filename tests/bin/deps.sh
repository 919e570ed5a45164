#!/bin/sh
# SPDX-License-Identifier: MIT
#
# deps.sh - the optional Debian packages: which are here, installing them,
# and the summary that ends "make check" and "make bench".  The list is
# .ci/packages (also read by .ci/run, so the two cannot drift).
#
#   deps.sh list [GROUP...]      the packages of GROUPs (default: base optional)
#   deps.sh status [GROUP...]    one line per package: here or missing, what it enables
#   deps.sh install [GROUP...]   apt-get install the GROUPs' packages (as root: "sudo make deps")
#   deps.sh summary TARGET [TAPDIR]
#       what TARGET (check, bench) skipped and which package enables it:
#       every SKIP (and TODO) of the TAP logs in TAPDIR, then the missing
#       packages whose "used by" names TARGET or "all".  With CI=true a skip
#       for a missing package, or a missing package of TARGET, fails
#       (exit 1); a skip for something this kernel or machine lacks stays a
#       skip, and is listed.
#   deps.sh runs32 [CC...]       exit 0 if this machine runs what CC (default
#       "gcc -m32") builds: some kernels cannot execute i386 binaries
#       ("Exec format error", e.g. a VM without 32-bit compat mode), which
#       is the machine's limit, not a missing package
#
# Groups: base optional kernels slice cross (see .ci/packages).  Tests name the
# package a skip needs with "[pkg NAME]" in the skip reason; a skip
# without it is a skip for the kernel or the machine.
#
# Environment: CC (for the header probes, default cc), CI.
set -u
cd "$(dirname "$0")/../.." || exit 2
LIST=.ci/packages
CC=${CC:-cc}

rows() { # rows GROUP...: the lines of .ci/packages in those groups
	groups=" $* "
	grep -v '^#' "$LIST" | grep -v '^$' | while IFS='|' read -r g p probe used what; do
		case $groups in *" $g "*) printf '%s|%s|%s|%s|%s\n' "$g" "$p" "$probe" "$used" "$what" ;; esac
	done
}

present() { # present PROBE: 0 if what the probe looks for is here
	case $1 in
	cmd:*) command -v "${1#cmd:}" >/dev/null 2>&1 ;;
	file:*) [ -e "${1#file:}" ] ;;
	hdr:*) printf '#include <%s>\n' "${1#hdr:}" | ${CC%% *} -E -x c - >/dev/null 2>&1 ;;
	cc32)
		printf '#include <pthread.h>\n#include <linux/rseq.h>\nint main(void) { return 0; }\n' |
			gcc -m32 -pthread -x c -o /dev/null - >/dev/null 2>&1 ;;
	cxx32)
		printf '#include <cstdio>\nint main() { std::puts(""); }\n' |
			g++ -m32 -x c++ -o /dev/null - >/dev/null 2>&1 ;;
	*) return 1 ;;
	esac
}

cmd=${1:-status}
[ $# -gt 0 ] && shift
case $cmd in
runs32)
	[ $# -gt 0 ] || set -- gcc -m32
	dir=$(mktemp -d) || exit 1
	printf 'int main(void) { return 42; }\n' >"$dir/p.c"
	st=1
	if "$@" -o "$dir/p" "$dir/p.c" >/dev/null 2>&1; then
		"$dir/p" >/dev/null 2>&1
		[ $? = 42 ] && st=0
	fi
	rm -rf "$dir"
	exit $st
	;;
list)
	[ $# -gt 0 ] || set -- base optional
	rows "$@" | cut -d'|' -f2 | awk '!seen[$0]++' | tr '\n' ' ' | sed 's/ $/\n/'
	;;
status)
	[ $# -gt 0 ] || set -- base optional kernels slice cross
	rows "$@" | awk -F'|' '!seen[$2]++' | while IFS='|' read -r g p probe used what; do
		if present "$probe"; then st=here; else st=MISSING; fi
		printf '%-8s %-26s %-8s %s\n' "$g" "$p" "$st" "$what"
	done
	;;
install)
	[ $# -gt 0 ] || set -- base optional
	pkgs=$(rows "$@" | cut -d'|' -f2 | awk '!seen[$0]++' | tr '\n' ' ')
	if [ "$(id -u)" != 0 ]; then
		echo "deps: installing needs root: sudo make deps${*:+ DEPS=\"$*\"}" >&2
		echo "deps: or: sudo apt-get install $pkgs" >&2
		exit 1
	fi
	case " $* " in *" cross "*)
		echo "deps: note: the cross compilers remove gcc-multilib and g++-multilib (Debian conflict)" >&2 ;;
	esac
	export DEBIAN_FRONTEND=noninteractive
	apt-get update && apt-get install -y $pkgs
	;;
summary)
	target=${1:?summary needs a target}
	tapdir=${2:-}
	strict=0
	[ "${CI:-}" = true ] && strict=1
	tmp=$(mktemp -d) || exit 2
	trap 'rm -rf "$tmp"' EXIT
	: >"$tmp/skips"
	if [ -n "$tapdir" ] && [ -d "$tapdir" ]; then
		for f in "$tapdir"/*; do
			case $f in *.rc) continue ;; esac
			[ -f "$f" ] || continue
			awk -v file="${f##*/}" '
			function emit(kind, num, why) { printf "%s|%s|%s|%s\n", kind, file, num, why }
			/^1\.\.0/ && tolower($0) ~ /# *skip/ {
				why = $0; sub(/^[^#]*# *[Ss][Kk][Ii][Pp]:? */, "", why); emit("skip", "all", why); next }
			/^ok / && tolower($0) ~ /# *skip/ {
				why = $0; sub(/^[^#]*# *[Ss][Kk][Ii][Pp]:? */, "", why); emit("skip", $2, why); next }
			/^(not )?ok / && $0 ~ /# *TODO/ {
				why = $0; sub(/^.*# *TODO:? */, "", why)
				emit(/^ok/ ? "todo-passed" : "todo", $0 ~ /^not/ ? $3 : $2, why) }
			' "$f" >>"$tmp/skips"
		done
	fi
	# Group identical reasons of one file: "fence.t 5-7".
	awk -F'|' '{ key = $1 "|" $2 "|" $4; if (!(key in nums)) { order[++n] = key; nums[key] = $3 }
		     else nums[key] = nums[key] "," $3 }
		   END { for (i = 1; i <= n; i++) { split(order[i], k, "|"); print k[1] "|" k[2] "|" nums[order[i]] "|" k[3] } }' \
		"$tmp/skips" >"$tmp/grouped"
	nskip=$(grep -c '^skip|' "$tmp/grouped")
	npkgskip=$(grep '^skip|' "$tmp/grouped" | grep -c '\[pkg ')
	# Missing packages of this target.
	rows base optional kernels slice cross | while IFS='|' read -r g p probe used what; do
		case " $used " in
		*" $target "*) ;;
		*" all "*) case $target in check | bench) ;; *) continue ;; esac ;;
		*) continue ;;
		esac
		present "$probe" || printf '%s|%s|%s\n' "$p" "$what" "$g"
	done | awk -F'|' '!seen[$1]++' >"$tmp/missing"
	nmissing=$(wc -l <"$tmp/missing")
	echo "---- $target: what was skipped, and why ----"
	if [ "$nskip" -eq 0 ] && [ "$nmissing" -eq 0 ] && ! grep -q '^todo' "$tmp/grouped"; then
		echo "nothing skipped; every optional package for '$target' is installed"
	fi
	while IFS='|' read -r kind file nums why; do
		[ "$nums" = all ] && where=$file || where="$file $nums"
		case $kind in
		skip)
			case $why in
			*"[pkg "*) pkg=$(echo "$why" | sed 's/.*\[pkg \([^]]*\)\].*/\1/')
				printf 'SKIP  %s: %s\n      -> apt-get install %s\n' "$where" "$(echo "$why" | sed 's/ *\[pkg [^]]*\]//')" "$pkg" ;;
			*) printf 'SKIP  %s: %s (this kernel or machine)\n' "$where" "$why" ;;
			esac ;;
		todo) printf 'TODO  %s: %s (a known gap: reported, never counted as a pass)\n' "$where" "$why" ;;
		todo-passed) printf 'TODO  %s: %s (passed this time)\n' "$where" "$why" ;;
		esac
	done <"$tmp/grouped"
	while IFS='|' read -r p what g; do
		printf 'NOT BUILT OR RUN without %s: %s\n' "$p" "$what"
	done <"$tmp/missing"
	if [ "$nmissing" -gt 0 ]; then
		groups=$(cut -d'|' -f3 "$tmp/missing" | awk '!seen[$0]++' | tr '\n' ' ' | sed 's/ $//')
		if [ "$groups" = "base optional" ] || [ "$groups" = optional ] || [ "$groups" = base ]; then
			echo "install them with: sudo make deps  (the README's table says what each enables)"
		else
			echo "install them with: sudo make deps DEPS=\"$groups\"  (the README's table says what each enables)"
		fi
	fi
	echo "$target: $nskip skip(s), $npkgskip of them for a missing package; $nmissing optional package(s) missing"
	if [ $strict -eq 1 ] && [ $((npkgskip + nmissing)) -gt 0 ]; then
		echo "$target: FAILED: CI=true, and something was skipped for a missing package"
		exit 1
	fi
	exit 0
	;;
*)
	sed -n '3,20s/^# \{0,1\}//p' "$0" >&2
	exit 2
	;;
esac
