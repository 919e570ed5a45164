#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Man pages (TAP):
#   - every function librseqkit.so exports, and every rsk_ function
#     librseqkit-malloc.so exports, has a page man/<function>.3
#     (a page of its own or a ".so man3/<page>.3" stub);
#   - every stub points at a page that names the stub's function;
#   - every page renders with man-db without a warning, from a man1/man3/man7
#     tree laid out as "make install" lays it out (stubs resolve there);
#   - every page has a NAME section that mandb can index (lexgrog).
#
# Environment: BUILD (build directory, default "build", relative to the
# source root), RSEQKIT_ROOT (source root, default the current directory,
# which is where "make check" runs prove), RSEQKIT_MANDIR (default
# $RSEQKIT_ROOT/man).
set -u

ROOT=${RSEQKIT_ROOT:-$PWD}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
MANDIR=${RSEQKIT_MANDIR:-$ROOT/man}
LIB=$BUILD/lib/librseqkit.so

n=0
failed=0
ok() { # ok CONDITION-STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}
skip() {
	n=$((n + 1))
	echo "ok $n # SKIP $1"
}
diag() { printf '%s\n' "$@" | sed 's/^/# /'; }

if [ ! -d "$MANDIR" ]; then
	echo "Bail out! no man directory $MANDIR (run from the source root or set RSEQKIT_ROOT)"
	exit 1
fi
if [ ! -e "$LIB" ]; then
	echo "Bail out! $LIB not built (make lib BUILD=...)"
	exit 1
fi
if ! command -v nm >/dev/null 2>&1; then
	echo "1..0 # SKIP nm (binutils) not installed [pkg build-essential]"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rseqkit-man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# --- 1. a page for every exported function ----------------------------------
# Functions only (T, W, i): data objects such as rsk_fast are not API.
# rsk_inject_* exist only in the test build of the library.
nm -D --defined-only "$LIB" >"$tmp/nm" 2>"$tmp/nm.err"
ok $? "nm -D reads $LIB"
awk '$2 ~ /^[TWi]$/ { print $3 }' "$tmp/nm" | sed 's/@.*//' |
	grep '^rsk_' | grep -v '^rsk_inject_' | LC_ALL=C sort -u >"$tmp/functions"
[ -s "$tmp/functions" ]
ok $? "librseqkit.so exports functions ($(wc -l <"$tmp/functions") found)"

while read -r fn; do
	[ -f "$MANDIR/$fn.3" ]
	ok $? "man page for $fn ($fn.3)"
done <"$tmp/functions"
# The allocator's own rsk_ functions (librseqkit-malloc.so exports no
# other rsk_ name), and its page in section 7.
MLIB=$BUILD/lib/librseqkit-malloc.so
if [ -e "$MLIB" ]; then
	nm -D --defined-only "$MLIB" | awk '$2 ~ /^[TWi]$/ { print $3 }' | sed 's/@.*//' |
		grep '^rsk_' | LC_ALL=C sort -u >"$tmp/mfunctions"
	[ -s "$tmp/mfunctions" ]
	ok $? "librseqkit-malloc.so exports rsk_ functions ($(wc -l <"$tmp/mfunctions") found)"
	while read -r fn; do
		[ -f "$MANDIR/$fn.3" ]
		ok $? "man page for $fn ($fn.3, librseqkit-malloc.so)"
	done <"$tmp/mfunctions"
	[ -f "$MANDIR/rseqkit-malloc.7" ]
	ok $? "man page rseqkit-malloc.7"
fi

# --- 2. stubs point at a page that names them ---------------------------------
pages=$(cd "$MANDIR" && ls -- *.1 *.3 *.7 2>/dev/null)
name_line() { # the NAME section's text of page $1, on one line
	awk '/^\.SH/ { inname = ($2 == "NAME"); next }
	     inname && !/^\./ { printf "%s ", $0 }' "$1"
}
for p in $pages; do
	first=$(head -n 1 "$MANDIR/$p")
	case $first in
	.so\ *)
		target=${first#.so }
		base=${p%.*}
		[ -f "$MANDIR/${target##*/}" ] &&
			name_line "$MANDIR/${target##*/}" | tr -s ' ,' '\n\n' | grep -qx -- "$base"
		ok $? "stub $p -> $target exists and lists $base in its NAME"
		;;
	esac
done

# --- 3. every page renders without warnings (man-db) ------------------------
have_mandb=0
if command -v man >/dev/null 2>&1 && man --version 2>/dev/null | grep -q '^man [0-9]'; then
	have_mandb=1
fi
if [ $have_mandb -eq 1 ]; then
	# Lay the pages out as installed, so ".so man3/x.3" resolves from $tmp/man.
	mkdir -p "$tmp/man/man1" "$tmp/man/man3" "$tmp/man/man7"
	for p in $pages; do
		cp "$MANDIR/$p" "$tmp/man/man${p##*.}/"
	done
	for p in $pages; do
		sect=${p##*.}
		out=$(cd "$tmp/man" && MANWIDTH=80 LC_ALL=C.UTF-8 MAN_KEEP_FORMATTING= \
			man --warnings -l "man$sect/$p" 2>&1 >"$tmp/rendered")
		status=$?
		[ $status -eq 0 ] && [ -z "$out" ] && [ -s "$tmp/rendered" ]
		ok $? "$p renders without warnings"
		[ -n "$out" ] && diag "$out"
	done
else
	skip "man-db not installed: pages not rendered [pkg man-db]"
fi

# --- 4. NAME sections that mandb can index ----------------------------------
if command -v lexgrog >/dev/null 2>&1; then
	for p in $pages; do
		case $(head -n 1 "$MANDIR/$p") in .so\ *) continue ;; esac
		lexgrog "$MANDIR/$p" >/dev/null 2>&1
		ok $? "$p has a NAME section lexgrog parses"
	done
else
	skip "lexgrog (man-db) not installed: NAME sections not checked [pkg man-db]"
fi

echo "1..$n"
[ $failed -eq 0 ]
