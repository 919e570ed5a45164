#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench-real: unmodified Debian programs under each allocator.

    tools/bench-real.py [--build DIR] [--runs N] [--quick] [--only LIST]
                        [--allocators LIST] [--outdir DIR]

Each workload runs under glibc's malloc (nothing preloaded), jemalloc,
mimalloc, tcmalloc and rseqkit-malloc (LD_PRELOAD), interleaved: run 1 of
every workload under every allocator (in an order rotated from run to
run), then run 2, ...  Each run goes through malloc-run (tools/malloc-run.c),
which reports the program's wall time and peak RSS (wait4's ru_maxrss).
The medians of --runs runs (default 5) make the table; the ratios are to
glibc.  Files in OUTDIR (default BUILD/bench-real): runs.csv (every run),
summary.csv (medians), time.svg and rss.svg (ratios to glibc).  A program
or allocator that is not installed is named with its package and left
out; a run that fails (exit status, or an output that differs from
glibc's where the output is deterministic) makes the exit status 1.
"""
import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PACKAGES = {"db_bench": "rocksdb-tools", "sqlite3": "sqlite3", "python3": "python3",
            "xz": "xz-utils"}
# Allocation-heavy workloads: the target there is faster than glibc.
HEAVY = {"db_bench fillrandom 2t", "db_bench fillrandom 16t", "db_bench readrandom 2t",
         "db_bench readrandom 16t", "sqlite3", "python3 PYTHONMALLOC=malloc"}


def lib_dirs():
    multi = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = []
    for d in ("/usr/lib/" + multi, "/lib/" + multi, "/usr/local/lib", "/usr/lib", "/lib"):
        if d not in dirs:
            dirs.append(d)
    return dirs + [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]


def find_lib(name):
    if name.startswith("/"):
        return name if os.access(name, os.R_OK) else None
    for d in lib_dirs():
        if os.access(os.path.join(d, name), os.R_OK):
            return name
    return None


def allocators(build):
    rsk = os.environ.get("RSEQKIT_MALLOC_LIB") or os.path.abspath(
        os.path.join(build, "lib", "librseqkit-malloc.so"))
    return [("glibc", "", None), ("jemalloc", "libjemalloc.so.2", "libjemalloc-dev"),
            ("mimalloc", "libmimalloc.so.2", "libmimalloc-dev"),
            ("tcmalloc", "libtcmalloc_minimal.so.4", "libgoogle-perftools-dev"),
            ("rseqkit-malloc", rsk, None)]


class Workload:
    def __init__(self, name, argv, stdin=None, env=None, deterministic=False, before=None):
        self.name, self.argv, self.stdin = name, argv, stdin
        self.env = env or {}
        self.deterministic = deterministic
        self.before = before  # run before each run (a fresh database directory)


def gen_sql(path, rows):
    r = random.Random(1)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    with open(path, "w") as f:
        f.write("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v TEXT, n INTEGER);\nBEGIN;\n")
        for i in range(rows):
            f.write("INSERT INTO t VALUES(%d,'%08x','%s',%d);\n" % (
                i, r.getrandbits(32), " ".join(r.choice(words) for _ in range(r.randint(1, 12))),
                r.randint(0, 1000)))
        f.write("COMMIT;\nCREATE INDEX tk ON t(k);\n"
                "SELECT count(*), sum(n) FROM t;\n"
                "SELECT substr(k,1,1) AS p, count(*), sum(length(v)) FROM t GROUP BY p ORDER BY p;\n"
                "SELECT v, count(*) FROM t GROUP BY v ORDER BY count(*) DESC, v LIMIT 20;\n"
                "SELECT length(group_concat(v, ',')) FROM (SELECT v FROM t ORDER BY k);\n")


def gen_text(path, mib):
    r = random.Random(2)
    vocab = ["".join(chr(97 + r.randrange(26)) for _ in range(r.randint(2, 10)))
             for _ in range(5000)]
    with open(path, "w") as f:
        left = mib << 20
        while left > 0:
            line = " ".join(r.choice(vocab) for _ in range(12)) + " %d\n" % r.getrandbits(20)
            f.write(line)
            left -= len(line)


def workloads(work, quick):
    q = 10 if quick else 1
    db = shutil.which("db_bench")
    out = []
    dbflags = ["--compression_type=none", "--value_size=100", "--disable_wal=1", "--seed=42",
               "--statistics=0"]
    for t, per in ((2, 150000), (16, 20000)):
        d = os.path.join(work, "db-fill-%d" % t)
        out.append(Workload("db_bench fillrandom %dt" % t,
                            [db or "db_bench", "--benchmarks=fillrandom", "--threads=%d" % t,
                             "--num=%d" % (per // q), "--db=" + d] + dbflags,
                            before=lambda d=d: shutil.rmtree(d, ignore_errors=True)))
    rd = os.path.join(work, "db-read")
    for t, per in ((2, 250000), (16, 30000)):
        out.append(Workload("db_bench readrandom %dt" % t,
                            [db or "db_bench", "--benchmarks=readrandom", "--threads=%d" % t,
                             "--num=%d" % (300000 // q), "--reads=%d" % (per // q),
                             "--use_existing_db=1", "--db=" + rd] + dbflags))
    out.append(Workload("sqlite3", ["sqlite3", ":memory:"], stdin=os.path.join(work, "bench.sql"),
                        deterministic=True))
    # The python3 Debian ships (/usr/bin/python3), not whichever python runs
    # this script (a pyenv build has its own allocator settings and speed).
    debian_py = "/usr/bin/python3"
    py = [debian_py if os.access(debian_py, os.X_OK) else shutil.which("python3") or "python3",
          os.path.join(ROOT, "tests", "malloc", "alloc_threads.py"), str(max(2, 16 // q)), "4"]
    out.append(Workload("python3", py, deterministic=True))
    out.append(Workload("python3 PYTHONMALLOC=malloc", py, env={"PYTHONMALLOC": "malloc"},
                        deterministic=True))
    out.append(Workload("xz -T2", ["xz", "-T2", "-3", "--block-size=2MiB", "-c",
                                   os.path.join(work, "text.dat")], deterministic=True))
    return out


def prepare(work, wl, quick, runner):
    q = 10 if quick else 1
    names = {w.name.split()[0] for w in wl}
    if "sqlite3" in names:
        gen_sql(os.path.join(work, "bench.sql"), 300000 // q)
    if "xz" in names:
        gen_text(os.path.join(work, "text.dat"), 16 // q or 1)
    if any(w.name.startswith("db_bench readrandom") for w in wl):
        subprocess.run([shutil.which("db_bench"), "--benchmarks=fillrandom,compact", "--threads=1",
                        "--num=%d" % (300000 // q), "--db=" + os.path.join(work, "db-read"),
                        "--compression_type=none", "--value_size=100", "--disable_wal=1",
                        "--seed=42"], stdout=subprocess.DEVNULL, check=True)


class Progress:
    def __init__(self):
        self.tty = sys.stderr.isatty()

    def show(self, text):
        if self.tty:
            sys.stderr.write("\r\033[K" + text)
            sys.stderr.flush()

    def clear(self):
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def run_one(runner, lib, w, work, tag):
    if w.before:
        w.before()
    res = os.path.join(work, "res-" + tag)
    outp = os.path.join(work, "out-" + tag)
    cmd = [runner, "-p", lib, "-o", res]
    for k, v in w.env.items():
        cmd += ["-e", "%s=%s" % (k, v)]
    cmd += ["--"] + w.argv
    stdin = open(w.stdin, "rb") if w.stdin else subprocess.DEVNULL
    with open(outp, "wb") as so:
        p = subprocess.run(cmd, stdin=stdin, stdout=so, stderr=subprocess.PIPE, cwd=work)
    if w.stdin:
        stdin.close()
    digest = None
    if w.deterministic:
        h = hashlib.sha256()
        with open(outp, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        digest = h.hexdigest()
    os.unlink(outp)
    try:
        with open(res) as f:
            wall, rss, rc = f.read().split()
        wall, rss, rc = float(wall), int(rss), int(rc)
    except (OSError, ValueError):
        wall, rss, rc = 0.0, 0, p.returncode or 1
    return wall, rss, rc, digest, p.stderr.decode(errors="replace")[-500:]


def svg_bars(path, title, groups, names, values, colours):
    """One group of horizontal bars per workload: ratio to glibc per allocator."""
    w, label_w, row_h, top = 900, 230, 16, 70
    nb = sum(len([n for n in names if (g, n) in values]) for g in groups)
    h = top + nb * row_h + len(groups) * 14 + 60
    vmax = max([v for v in values.values()] + [1.0]) * 1.1
    x0 = label_w + 10
    scale = (w - x0 - 90) / vmax
    o = ['<?xml version="1.0" encoding="UTF-8"?>',
         '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
         'font-family="DejaVu Sans, Verdana, Arial, sans-serif" font-size="12">' % (w, h, w, h),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="12" y="22" font-size="16" font-weight="bold">%s</text>' % esc(title),
         '<text x="12" y="40" fill="#444">ratio to glibc (median of the runs); lower is '
         'better; the line marks 1.0</text>']
    x = 12
    for n in names:
        o.append('<rect x="%d" y="48" width="12" height="12" fill="%s"/><text x="%d" y="58">%s'
                 '</text>' % (x, colours[n], x + 16, esc(n)))
        x += 30 + 7 * len(n)
    y = top
    for g in groups:
        o.append('<text x="12" y="%d" font-weight="bold">%s</text>' % (y + 11, esc(g)))
        y += 14
        for n in names:
            if (g, n) not in values:
                continue
            v = values[(g, n)]
            o.append('<text x="%d" y="%d" text-anchor="end" font-size="11">%s</text>' % (
                label_w, y + 12, esc(n)))
            o.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>' % (
                x0, y + 2, max(v * scale, 1), row_h - 4, colours[n]))
            o.append('<text x="%.1f" y="%d" font-size="11">%.2f</text>' % (
                x0 + v * scale + 6, y + 12, v))
            y += row_h
    o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#222" stroke-dasharray="4 3"/>'
             % (x0 + scale, top - 4, x0 + scale, y))
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="workloads a tenth the size")
    ap.add_argument("--only", help="workloads whose names start with these (comma-separated)")
    ap.add_argument("--allocators", help="comma-separated subset (glibc is always run)")
    ap.add_argument("--outdir")
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    build = os.path.abspath(a.build)
    outdir = a.outdir or os.path.join(build, "bench-real")
    os.makedirs(outdir, exist_ok=True)
    runner = os.path.join(build, "bin", "malloc-run")
    if not os.access(runner, os.X_OK):
        sys.exit("bench-real: %s not built (make %s)" % (runner, os.path.relpath(runner, ROOT)))

    allocs = []
    notes = []
    want = set(a.allocators.split(",")) | {"glibc"} if a.allocators else None
    for name, lib, pkg in allocators(build):
        if want is not None and name not in want:
            continue
        if lib and not find_lib(lib):
            notes.append("  %-16s not measured: %s %s" % (
                name, lib, "not found (apt-get install %s)" % pkg if pkg
                else "not built (make malloc)"))
            continue
        allocs.append((name, lib))

    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="rseqkit-bench-real-", dir=shm)
    try:
        wl = []
        for w in workloads(work, a.quick):
            prog = os.path.basename(w.argv[0])
            if a.only and not any(w.name.startswith(s) for s in a.only.split(",")):
                continue
            if not shutil.which(w.argv[0]):
                notes.append("  %-28s not measured: %s not found (apt-get install %s)" % (
                    w.name, prog, PACKAGES.get(prog, prog)))
                continue
            wl.append(w)
        prog = Progress()
        prog.show("bench-real: preparing the inputs")
        prepare(work, wl, a.quick, runner)
        total = a.runs * len(wl) * len(allocs)
        done = 0
        runs = {}
        digests = {}
        failures = []
        for r in range(a.runs):
            for w in wl:
                order = allocs[r % len(allocs):] + allocs[:r % len(allocs)]
                for name, lib in order:
                    done += 1
                    prog.show("bench-real [%d/%d] run %d/%d: %s, %s" % (
                        done, total, r + 1, a.runs, w.name, name))
                    tag = "%d-%s" % (done, name)
                    wall, rss, rc, dg, err = run_one(runner, lib, w, work, tag)
                    if rc != 0:
                        failures.append("%s under %s, run %d: exit status %d: %s" % (
                            w.name, name, r + 1, rc, err.strip().splitlines()[-1:] or ""))
                        continue
                    if dg is not None:
                        digests.setdefault(w.name, {}).setdefault(name, set()).add(dg)
                    runs.setdefault((w.name, name), []).append((wall, rss))
        prog.clear()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    # Deterministic outputs: the same under every allocator as under glibc.
    for wn, per in digests.items():
        ref = per.get("glibc")
        for name, ds in per.items():
            if len(ds) > 1 or (ref and ds != ref):
                failures.append("%s under %s: output differs from glibc's" % (wn, name))

    names = [n for n, _ in allocs]
    med = {}
    with open(os.path.join(outdir, "runs.csv"), "w") as f:
        f.write("workload,impl,run,wall_s,maxrss_kib\n")
        for (wn, name), v in runs.items():
            for i, (wall, rss) in enumerate(v):
                f.write("%s,%s,%d,%.6f,%d\n" % (wn, name, i + 1, wall, rss))
            med[(wn, name)] = (statistics.median(x for x, _ in v),
                               statistics.median(y for _, y in v), len(v))

    print("bench-real: %s, %d CPUs; %d run(s) per program and allocator, interleaved; "
          "medians; x glibc = ratio to glibc's median (lower is better)" % (
              cpu_model(), os.cpu_count() or 0, a.runs))
    print("  %-28s %-16s %9s %8s %10s %8s" % ("workload", "impl", "time s", "x glibc",
                                               "peak MiB", "x glibc"))
    tx, rx = {}, {}
    with open(os.path.join(outdir, "summary.csv"), "w") as f:
        f.write("workload,impl,runs,wall_s_median,maxrss_kib_median,x_glibc_time,x_glibc_rss\n")
        for w in wl:
            g = med.get((w.name, "glibc"))
            for name in names:
                m = med.get((w.name, name))
                if not m:
                    print("  %-28s %-16s   FAILED (see below)" % (w.name, name))
                    continue
                xt = m[0] / g[0] if g else 0
                xr = m[1] / g[1] if g and g[1] else 0
                if g:
                    tx[(w.name, name)], rx[(w.name, name)] = xt, xr
                print("  %-28s %-16s %9.3f %8s %10.1f %8s" % (
                    w.name, name, m[0], "%.2f" % xt if g else "-", m[1] / 1024,
                    "%.2f" % xr if g else "-"))
                f.write("%s,%s,%d,%.6f,%.0f,%.4f,%.4f\n" % (w.name, name, m[2], m[0], m[1], xt, xr))
            print()
    for n in notes:
        print(n)
    if "rseqkit-malloc" in names:
        print("\nbench-real targets: rseqkit-malloc time / glibc's (none more than 2% slower; "
              "the allocation-heavy ones faster):")
        for w in wl:
            x = tx.get((w.name, "rseqkit-malloc"))
            if x is None:
                continue
            heavy = w.name in HEAVY
            t = 1.00 if heavy else 1.02
            cmp = "<" if heavy else "<="
            met = x < t if heavy else x <= t
            print("  %-28s %-18s target %s %.2fx: %.2fx %s" % (
                w.name, "(allocation-heavy)" if heavy else "", cmp, t, x,
                "met" if met else "not met"))
    else:
        print("\nbench-real targets: n/a: rseqkit-malloc not measured")
    palette = ["#d9822b", "#8c564b", "#7b4fa6", "#3a9a4a", "#2f6db5"]
    colours = {n: ("#2f6db5" if n == "rseqkit-malloc" else palette[i % 4])
               for i, n in enumerate(names)}
    groups = [w.name for w in wl]
    wrote = [os.path.join(outdir, "runs.csv"), os.path.join(outdir, "summary.csv")]
    if tx:
        svg_bars(os.path.join(outdir, "time.svg"), "bench-real: wall time", groups, names, tx,
                 colours)
        svg_bars(os.path.join(outdir, "rss.svg"), "bench-real: peak RSS", groups, names, rx,
                 colours)
        wrote += [os.path.join(outdir, "time.svg"), os.path.join(outdir, "rss.svg")]
    print("\nwrote " + ", ".join(wrote))
    if failures:
        print("\nbench-real: FAILED runs:", file=sys.stderr)
        for x in failures:
            print("  " + x, file=sys.stderr)
        return 1
    return 0


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
