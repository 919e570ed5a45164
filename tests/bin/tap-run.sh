#!/bin/sh
# SPDX-License-Identifier: MIT
# tap-run.sh TEST [ARGS...]: prove's --exec for "make check".  Runs TEST
# and, when TAP_LOG_DIR is set, keeps a copy of its TAP output there (for
# tests/bin/deps.sh summary: what was skipped and why).  Exit status: TEST's.
[ -n "${TAP_LOG_DIR:-}" ] || exec "$@"
mkdir -p "$TAP_LOG_DIR" || exit 1
log=$TAP_LOG_DIR/${1##*/}
rm -f "$log.rc"
{
	"$@"
	echo $? >"$log.rc"
} | tee "$log"
rc=$(cat "$log.rc" 2>/dev/null) || rc=1
rm -f "$log.rc"
exit "${rc:-1}"
