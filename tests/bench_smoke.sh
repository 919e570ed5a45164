#!/bin/sh
# SPDX-License-Identifier: MIT
# rseqkit-bench --quick runs and writes well-formed results: the CSV header
# and columns, every op with every implementation (the fixed core ones and
# whatever --list announces; a rival allocator that is not installed is
# named with its package instead, a SKIP), positive numbers, JSON that
# parses (with its workload and pool_memory sections), the summaries
# printed family by family with targets worded as targets, one SVG plot
# per family (rendered to PNG where rsvg-convert is), the output
# directory's rules (checked before the run; ./rseqkit-bench-results for
# a binary outside its build tree, never the current directory itself), the malloc family (five allocators, its
# memory section and targets).  Never asserts speed.
BUILD=${BUILD:-build}
BENCH=$BUILD/bin/rseqkit-bench
n=0
fails=0
ok() { # ok COND-STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}

if [ ! -x "$BENCH" ]; then
	echo "1..0 # SKIP $BENCH not built"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# The pairs every build has; --list adds the data-structure rows.
core="cpu-read,rseqkit cpu-read,thread-local cpu-read,getcpu
counter-add,rseqkit counter-add,thread-local counter-add,atomic-shared
counter-add,atomic-getcpu counter-add,mutex counter-add,spinlock"
"$BENCH" --list >"$tmp/list" 2>&1
listed=$?
pairs=$(printf '%s\n' $core | cat - "$tmp/list" | sort -u)
npairs=$(printf '%s\n' "$pairs" | wc -l)

echo "1..$((npairs + 33))"
ok $listed "--list works"

"$BENCH" --quick --outdir "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
ok $rc "rseqkit-bench --quick exits 0 (got $rc)"
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/stderr"
csv=$tmp/out/results.csv
json=$tmp/out/results.json

[ "$(head -n 1 "$csv" 2>/dev/null)" = "op,impl,threads,ns_per_op,mops,spread_pct" ]
ok $? "CSV header is op,impl,threads,ns_per_op,mops,spread_pct"

awk -F, 'NR > 1 && NF != 6 { bad = 1 } END { exit bad || NR < 2 }' "$csv" 2>/dev/null
ok $? "every CSV row has 6 columns"

# threads a positive integer; ns_per_op, mops positive; spread >= 0.
awk -F, 'NR > 1 {
	if ($3 !~ /^[0-9]+$/ || $3 < 1) bad = 1
	if ($4 !~ /^[0-9]+(\.[0-9]+)?$/ || $4 + 0 <= 0) bad = 1
	if ($5 !~ /^[0-9]+(\.[0-9]+)?$/ || $5 + 0 <= 0) bad = 1
	if ($6 !~ /^[0-9]+(\.[0-9]+)?$/) bad = 1
	if (bad && !shown) { print "# bad row: " $0; shown = 1 }
} END { exit bad }' "$csv" 2>/dev/null
ok $? "every number parses and is positive"

# Each pair at every thread count the run used (1, CPUs, 4 x CPUs); pool-pc
# runs at 2 and the largest count, which need not be among them; the malloc
# family at its own counts (1, 2, 8, 64; malloc-pc at 2 and 64).
ncounts=$(awk -F, 'NR > 1 && $1 != "pool-pc" && $1 !~ /^malloc-/ { print $3 }' "$csv" 2>/dev/null | sort -u | wc -l)
[ "$ncounts" -ge 2 ]
ok $? "several thread counts measured ($ncounts)"
# Fence rows and the guarantee ladder's (counter-add4, hand+...) run at 1
# thread only, the workload at the largest count only,
# pool-pc (producer/consumer pairs) at 2 threads and at the largest count.
tmax=$(awk -F, 'NR > 1 && $1 != "pool-pc" && $1 !~ /^malloc-/ { print $3 }' "$csv" 2>/dev/null | sort -n | tail -n 1)
for p in $pairs; do
	# A rival allocator that is not installed: named with its package.
	case $p in *,jemalloc | *,mimalloc | *,tcmalloc)
		note=$(grep -m 1 "^  ${p#*,}  *not measured: " "$tmp/stdout")
		if [ -n "$note" ]; then
			pkg=$(echo "$note" | sed -n 's/.*(apt-get install \(.*\))$/\1/p')
			n=$((n + 1))
			# No package named: a 32-bit build on a 64-bit system,
			# where the package brings the system's own (a machine limit).
			echo "ok $n # SKIP $p: $(echo "$note" | sed 's/^ *//; s/  */ /g')${pkg:+ [pkg $pkg]}"
			continue
		fi ;;
	# rseqkit-malloc before "make malloc" built it: named as such.
	*,rseqkit-malloc)
		note=$(grep -m 1 "^  rseqkit-malloc  *not measured: .* not built" "$tmp/stdout")
		if [ -n "$note" ]; then
			n=$((n + 1))
			echo "ok $n # SKIP $p: $(echo "$note" | sed 's/^ *//; s/  */ /g')"
			continue
		fi ;;
	esac
	case $p in
	fence-* | counter-add4,hand+*)
		got=$(awk -F, -v p="$p" 'NR > 1 && $1 "," $2 == p && $3 == 1' "$csv" 2>/dev/null | wc -l)
		[ "$got" -eq 1 ]
		ok $? "$p present at 1 thread ($got row)" ;;
	workload,*)
		got=$(awk -F, -v p="$p" -v t="$tmax" 'NR > 1 && $1 "," $2 == p && $3 == t' "$csv" 2>/dev/null | wc -l)
		[ "$got" -eq 1 ]
		ok $? "$p present at $tmax threads ($got row)" ;;
	malloc-pc,*)
		got=$(awk -F, -v p="$p" 'NR > 1 && $1 "," $2 == p { print $3 }' "$csv" 2>/dev/null | sort -n | paste -sd, -)
		[ "$got" = "2,64" ]
		ok $? "$p present at threads 2,64 (got ${got:-none})" ;;
	malloc-*,*)
		got=$(awk -F, -v p="$p" 'NR > 1 && $1 "," $2 == p { print $3 }' "$csv" 2>/dev/null | sort -n | paste -sd, -)
		[ "$got" = "1,2,8,64" ]
		ok $? "$p present at threads 1,2,8,64 (got ${got:-none})" ;;
	pool-pc,*)
		want_pc=2
		[ "$tmax" -gt 2 ] && [ $((tmax % 2)) -eq 0 ] && want_pc=2,$tmax
		got=$(awk -F, -v p="$p" 'NR > 1 && $1 "," $2 == p { print $3 }' "$csv" 2>/dev/null | sort -n | paste -sd, -)
		[ "$got" = "$want_pc" ]
		ok $? "$p present at threads $want_pc (got ${got:-none})" ;;
	*)
		got=$(awk -F, -v p="$p" 'NR > 1 && $1 "," $2 == p' "$csv" 2>/dev/null | wc -l)
		[ "$got" -eq "$ncounts" ]
		ok $? "$p present at every thread count ($got of $ncounts)" ;;
	esac
done

# The progress-protocol and workload rows are announced where the headers
# are there (a full build): fallback and ungated beside every structure.
want="counter-add,rseqkit-fallback spinlock,rseqkit-fallback stack,rseqkit-fallback
ptrbuf,rseqkit-fallback copybuf16,rseqkit-fallback counter-add,rseqkit-ungated
spinlock,rseqkit-ungated stack,rseqkit-ungated ptrbuf,rseqkit-ungated
copybuf16,rseqkit-ungated fence-cpu,rseqkit fence-all,rseqkit workload,rseqkit
workload,atomic-getcpu workload,mutex malloc-16,rseqkit-fallback malloc-256,rseqkit-fallback"
missing=
for p in $want; do grep -qx "$p" "$tmp/list" || missing="$missing $p"; done
[ -z "$missing" ]
ok $? "--list has the fallback, ungated, fence and workload rows${missing:+ (missing:$missing)}"

# The pool rows, beside glibc's malloc and the rival allocators.
want="pool,rseqkit pool,rseqkit-fallback pool,malloc pool,mutex pool-pc,rseqkit
pool-pc,malloc pool,jemalloc pool,mimalloc pool,tcmalloc pool-pc,jemalloc
pool-pc,mimalloc pool-pc,tcmalloc"
missing=
for p in $want; do grep -qx "$p" "$tmp/list" || missing="$missing $p"; done
[ -z "$missing" ]
ok $? "--list has the pool and pool-pc rows, rival allocators included${missing:+ (missing:$missing)}"

python3 - "$json" "$csv" <<'EOF'
import csv, json, sys
j = json.load(open(sys.argv[1]))
m = j["machine"]
for k in ("cpu_model", "cpus_online", "kernel", "libc", "rseq_owner"):
    assert k in m, k
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(j["results"]) == len(rows), (len(j["results"]), len(rows))
for r in j["results"]:
    assert r["ns_per_op"] > 0 and r["mops"] > 0 and r["spread_pct"] >= 0, r
EOF
ok $? "JSON parses, has the machine facts and the same rows as the CSV"

python3 - "$json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
w = j["workload"]["results"]
assert sorted(r["impl"] for r in w) == ["atomic-getcpu", "mutex", "rseqkit"], w
for r in w:
    assert r["events_per_s"] > 0 and r["ns_per_event"] > 0, r
    assert 0 < r["p50_ns"] <= r["p99_ns"], r
    assert r["totals_verified"] is True and r["threads"] >= 1, r
EOF
ok $? "JSON workload section: 3 designs, events/s, 0 < p50 <= p99, totals verified"

python3 - "$json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))["pool_memory"]
for k in ("threads", "cpus", "object_size", "cache_capacity", "caches", "cached_objects",
          "cached_bytes", "cached_bytes_peak", "bound_bytes", "per_thread_design_bytes",
          "bytes_mapped", "bytes_mapped_after_drain_trim", "in_use", "alloc_free_pairs"):
    assert isinstance(m[k], int) and m[k] >= 0, (k, m.get(k))
assert m["threads"] == 4 * m["cpus"] and m["object_size"] == 64, m
assert m["cached_bytes"] == m["cached_objects"] * m["object_size"], m
assert m["cached_bytes"] <= m["cached_bytes_peak"], m
assert m["bound_bytes"] == m["cpus"] * m["cache_capacity"] * m["object_size"], m
assert m["per_thread_design_bytes"] == m["threads"] * m["cache_capacity"] * m["object_size"], m
assert m["in_use"] == 0 and m["alloc_free_pairs"] > 0 and m["caches"] >= 1, m
EOF
ok $? "JSON pool_memory section: figures present and consistent, in_use 0"

grep -q "^pool: rseqkit / each malloc" "$tmp/stdout" &&
	grep -Eq "^  pool +1 threads +/ malloc .*: target <= 1.50x: [0-9.]+x (not )?met$" "$tmp/stdout" &&
	grep -Eq "^  pool-pc +2 threads +/ malloc .*: target < 1.00x: [0-9.]+x (not )?met$" "$tmp/stdout"
ok $? "pool / malloc ratios printed (1-thread alloc+free, 2-thread producer/consumer)"

# The malloc family: every workload under the five allocators, in --list.
want=
for op in malloc-16 malloc-64 malloc-256 malloc-4k malloc-32k malloc-1m malloc-pc malloc-churn malloc-share; do
	for a in rseqkit-malloc glibc jemalloc mimalloc tcmalloc; do want="$want $op,$a"; done
done
missing=
for p in $want; do grep -qx "$p" "$tmp/list" || missing="$missing $p"; done
[ -z "$missing" ]
ok $? "--list has the malloc family: 9 workloads x 5 allocators${missing:+ (missing:$missing)}"

# Its memory figures: a fresh process per allocator at 64 and 256 threads;
# peak RSS >= RSS after the frees > 0, a release call named.
python3 - "$json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))["malloc_memory"]
assert m["cpus"] >= 1 and m["run_ms"] > 0, m
rs = m["results"]
assert sorted(r["threads"] for r in rs if r["impl"] == "glibc") == [64, 256], rs
for r in rs:
    assert r["impl"] in ("rseqkit-malloc", "glibc", "jemalloc", "mimalloc", "tcmalloc"), r
    assert r["peak_kib"] >= r["freed_kib"] > 0 and r["released_kib"] > 0, r
    assert r["release_call"] != "", r
assert [r["release_call"] for r in rs if r["impl"] == "glibc"] == ["malloc_trim"] * 2, rs
EOF
ok $? "JSON malloc_memory section: glibc and each installed allocator at 64 and 256 threads, peak >= freed > 0"

# The summary: the targets (or why they are n/a), the memory table.
grep -q "^malloc targets: small-object malloc+free" "$tmp/stdout" &&
	{ grep -Eq "^  malloc-16 +1 thread +/ [a-z]+ .*: target <= 1.10x: [0-9.]+x (not )?met$" "$tmp/stdout" &&
		grep -Eq "^  malloc-64 +64 threads / [a-z]+ .*: target < 1.00x: [0-9.]+x (not )?met$" "$tmp/stdout" ||
		grep -q "^  n/a: rseqkit-malloc not measured (.* not built: make malloc)$" "$tmp/stdout"; }
ok $? "malloc targets printed (1 thread <= 1.10x, 2+ threads < 1.00x the fastest rival), or n/a with the reason"

awk '/^malloc memory: malloc-churn in a fresh process/ { on = 1; next }
	on && /^  (64|256) +glibc +[0-9.]+ +[0-9.]+ +[0-9.]+ +malloc_trim +1\.00$/ { g++ }
	on && /^malloc memory targets:/ { t = 1 }
	END { exit !(g == 2 && t) }' "$tmp/stdout"
ok $? "malloc memory table printed (glibc at 64 and 256 threads, x glibc 1.00) with its targets"

grep -q "^pool memory (" "$tmp/stdout" && grep -q "^  rseqkit pool cached: " "$tmp/stdout" &&
	grep -q "^  per-thread cache design, same capacity: " "$tmp/stdout"
ok $? "pool memory summary printed"

grep -q "^workload (totals verified" "$tmp/stdout" &&
	grep -Eq "^  rseqkit events/s over atomic-getcpu's: target >= 2.00x: [0-9.]+x (not )?met$" "$tmp/stdout"
ok $? "workload summary printed"

grep -q "^fallback (no rseq" "$tmp/stdout" && grep -q "^protocol cost: gated" "$tmp/stdout"
ok $? "fallback / mutex and gated / ungated ratios printed"

grep -q "fence-cpu latency" "$tmp/stdout" && grep -q "fence-all latency" "$tmp/stdout"
ok $? "fence latencies printed"

grep -q "counter-add" "$tmp/stdout"
ok $? "terminal table printed"

# The yardstick summary: every pair with a ratio and its target, or n/a
# with a reason (hand-written rows exist on x86-64 only).
awk '/^yardstick: rseqkit \/ hand-written/ { on = 1; next }
	on && /^  (counter-add4|spinlock|stack|ptrbuf|copybuf16|copybuf64|mm-cid-read|cpu-read) / {
		n++; if ($0 ~ /target <= [0-9.]+x: [0-9.]+x (met|not met)/ || $0 ~ /n\/a: /) good++ }
	on && /^$/ { on = 0 }
	END { exit !(n == 14 && good == n) }' "$tmp/stdout"
ok $? "yardstick summary printed: 14 rseqkit / hand-written pairs, each with its target or n/a"

"$BENCH" --no-such-option >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "a bad option exits 2"

# Each family printed as a whole, in the registry's order, as it finishes
# (its tables, then its summaries, before the next family starts).
fams=$(sed -n 's/^== \([a-z]*\): .* ==$/\1/p' "$tmp/stdout" | paste -sd' ' -)
[ "$fams" = "cpu counter lock stack buffers pool fence workload malloc" ]
ok $? "one section per family, in order (got: $fams)"

# Targets are worded as targets: "target <= 1.10x: 1.04x met" or "not met".
bad=$(grep -E "met$" "$tmp/stdout" | grep -Ev "target (<=|<|>=) [0-9.]+x: [0-9.]+x (not )?met$")
[ -z "$bad" ] && ! grep -q "NOT met" "$tmp/stdout" && grep -q "target <= " "$tmp/stdout"
ok $? "every target line reads 'target <= T: Xx met' or 'not met'"
[ -z "$bad" ] || printf '%s\n' "$bad" | head -n 3 | sed 's/^/# /'

# No progress line where stderr is not a terminal.
! grep -q "$(printf '\r')" "$tmp/stderr"
ok $? "no progress line on a non-terminal stderr"

# One plot per family that ran, well-formed, with every row of its 1-thread
# table named; "wrote" names what is there.
python3 - "$tmp/out" "$csv" <<'EOF2'
import csv, os, sys
import xml.etree.ElementTree as ET
out = sys.argv[1]
fams = "cpu counter lock stack buffers pool fence workload malloc".split()
rows = list(csv.DictReader(open(sys.argv[2])))
for fam in fams:
    t = ET.parse(os.path.join(out, fam + ".svg"))
    text = " ".join("".join(e.itertext()) for e in t.iter() if e.tag.endswith("text"))
    assert "rseqkit-bench: " + fam in text, fam
    assert text.count(" ns") >= 2, fam
EOF2
ok $? "one SVG plot per family, well-formed XML, titled and labelled"
grep -q "^wrote $tmp/out/results.csv, $tmp/out/results.json and 9 plots: $tmp/out/\*.svg$" "$tmp/stdout"
ok $? "'wrote' names the CSV, the JSON and the 9 plots"
if command -v rsvg-convert >/dev/null 2>&1; then
	st=0
	for f in "$tmp"/out/*.svg; do
		rsvg-convert -o "$tmp/plot.png" "$f" 2>"$tmp/rsvg.err" && [ -s "$tmp/plot.png" ] || st=1
	done
	ok $st "every plot renders to PNG with rsvg-convert"
	sed 's/^/# /' "$tmp/rsvg.err"
else
	n=$((n + 1))
	echo "ok $n # SKIP rsvg-convert not installed: the plots are not rendered [pkg librsvg2-bin]"
fi

# An output directory that cannot be written fails before the run, with
# a clear message, and writes nothing.
: >"$tmp/file"
"$BENCH" --quick --ops cpu-read --outdir "$tmp/file/sub" >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
[ $rc -eq 1 ] && [ ! -s "$tmp/bad.out" ] && grep -q "cannot write in $tmp/file/sub" "$tmp/bad.err"
ok $? "an unwritable --outdir fails at once, before the run (exit $rc: $(head -n 1 "$tmp/bad.err"))"

# --fallback: only the rows without rseq (and mixed) beside what users
# write without it, each with its target; its own files, no plots.
"$BENCH" --fallback --quick --ops counter-add,pcounter-add,stack,pool,malloc-16 --threads 1,3 --reps 1 \
	--ms 2 --outdir "$tmp/fb" >"$tmp/fb.out" 2>"$tmp/fb.err"
rc=$?
fcsv=$tmp/fb/fallback.csv
got=$(awk -F, 'NR > 1 { print $1 "," $2 "," $3 }' "$fcsv" 2>/dev/null | sort | paste -sd' ' -)
want=$(for op in counter-add pcounter-add; do
	for im in rseqkit-fallback rseqkit-mixed atomic-getcpu mutex; do echo "$op,$im,1" "$op,$im,3"; done
done; for im in rseqkit-fallback mutex; do echo "stack,$im,1" "stack,$im,3"; done
for im in rseqkit-fallback malloc mutex; do echo "pool,$im,1" "pool,$im,3"; done
for im in rseqkit-fallback glibc; do echo "malloc-16,$im,1" "malloc-16,$im,3"; done)
want=$(printf '%s\n' $want | sort | paste -sd' ' -)
[ $rc -eq 0 ] && [ "$got" = "$want" ] && [ ! -e "$tmp/fb/results.csv" ] && [ -s "$tmp/fb/fallback.json" ] &&
	! ls "$tmp/fb"/*.svg >/dev/null 2>&1
ok $? "--fallback runs the fallback, mixed and alternative rows only, into fallback.csv/.json (exit $rc)"
[ "$got" = "$want" ] || echo "# got:  $got" && [ "$got" = "$want" ] || echo "# want: $want"
for l in "^  counter-add  *3 threads .* atomic-getcpu: target <= 1.00x" \
	"^  pcounter-add  *1 threads .* atomic-getcpu: target <= 1.00x" \
	"^  stack  *3 threads .* mutex: target <= 1.00x" "^  pool  *1 threads .* malloc: target <= 1.00x" \
	"^  malloc-16  *3 threads .* glibc: target <= 1.00x"; do
	grep -q "$l" "$tmp/fb.out" || { echo "# missing: $l"; false; } || break
done
ok $? "--fallback prints each fallback / alternative ratio with its target"

# A binary outside its build tree (as installed) writes to
# ./rseqkit-bench-results, and nothing into the current directory itself.
mkdir -p "$tmp/inst" "$tmp/cwd"
cp "$BENCH" "$tmp/inst/rseqkit-bench"
(cd "$tmp/cwd" && "$tmp/inst/rseqkit-bench" --quick --ops cpu-read --reps 1 --no-plots >"$tmp/inst.out" 2>&1)
rc=$?
r=$tmp/cwd/rseqkit-bench-results
[ $rc -eq 0 ] && [ -s "$r/results.csv" ] && [ -s "$r/results.json" ] &&
	[ "$(ls "$tmp/cwd")" = rseqkit-bench-results ] &&
	grep -q "^wrote rseqkit-bench-results/results.csv, rseqkit-bench-results/results.json$" "$tmp/inst.out"
ok $? "an installed binary writes to ./rseqkit-bench-results, not the current directory (exit $rc: $(ls "$tmp/cwd" | tr '\n' ' '))"

[ $fails -eq 0 ]
