#!/bin/sh
# SPDX-License-Identifier: MIT
# tsan-report.sh DIR: sum up the ThreadSanitizer reports that "make
# check-tsan" collected in DIR (TSAN_OPTIONS=log_path=DIR/NAME): how many,
# of which kind, and where (the top frame of the access and of the
# previous, conflicting one: "A < B"), counted.  Exit 0 when there are
# none, 1 otherwise.
dir=${1:?usage: tsan-report.sh DIR}
files=$(ls "$dir"/* 2>/dev/null)
total=0
[ -n "$files" ] && total=$(cat $files | grep -c '^WARNING: ThreadSanitizer:')
echo "---- check-tsan: $total ThreadSanitizer report(s) ----"
[ "$total" -eq 0 ] && exit 0
for f in $files; do
	prog=${f##*/}
	awk -v prog="${prog%%.*}" '
	/^WARNING: ThreadSanitizer:/ { kind = $0; sub(/^WARNING: ThreadSanitizer: /, "", kind); sub(/ \(pid=.*$/, "", kind); want = 2; where = ""; next }
	want > 0 && /^ +#0 / {
		loc = $NF; sub(/^.*\//, "", loc); if ($NF ~ /^\(/) loc = $(NF - 1)
		fn = $2; where = where (where == "" ? "" : " < ") fn " " loc
		if (--want == 0) print prog ": " kind ": " where
	}' "$f"
done | sed 's|/work/[^ ]*/||g' | sort | uniq -c | sort -rn | head -n 40
echo "check-tsan: $total report(s) (by program, kind, access < previous access; full reports in $dir)"
exit 1
