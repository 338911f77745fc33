#!/usr/bin/env python3
"""Turns the raw outputs of bench/server/run.sh into summary tables.

usage: report.py OUTDIR   (reads OUTDIR/rb-*.csv, OUTDIR/ycsb-*.txt,
OUTDIR/study-*.txt; prints Markdown)"""
import csv
import glob
import os
import re
import sys


def rb_reps(out, name):
    """The repetitions of one redis-benchmark run (rb-<name>.csv, then
    -r2, -r3, ...), in repetition order, each as read_rb gives it."""
    paths = []
    first = os.path.join(out, f"rb-{name}.csv")
    if os.path.exists(first):
        paths.append((1, first))
    for p in glob.glob(os.path.join(out, f"rb-{name}-r*.csv")):
        m = re.match(r".*-r(\d+)\.csv$", p)
        if m:
            paths.append((int(m.group(1)), p))
    return [read_rb(p) for _, p in sorted(paths)]


def rb_table(out, pairs):
    """redis-benchmark CSVs: one row per test with ratios strata/redis;
    with repetitions (RB_REPS), medians and each repetition's ratio."""
    lines = []
    for title, redis_name, strata_name in pairs:
        red, st = rb_reps(out, redis_name), rb_reps(out, strata_name)
        if not (red and st):
            continue
        # Paired repetitions get each one's ratio; a run compared with
        # another's repetitions (a ceiling row) only the medians.
        paired = len(red) == len(st) > 1
        if paired:
            note = f", median of {len(red)} alternating repetitions"
        elif max(len(red), len(st)) > 1:
            note = f", medians of {len(red)} redis and {len(st)} strata runs"
        else:
            note = ""
        lines.append(f"\n### {title}{note}\n")
        each = " each repetition |" if paired else ""
        lines.append("| test | redis req/s | strata req/s | ratio | redis p99 ms | strata p99 ms | p99 ratio |" + each)
        lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |" + (" --- |" if paired else ""))
        for test in red[0]:
            if not all(test in r for r in red + st):
                continue
            rps, p99 = median(r[test][0] for r in red), median(r[test][1] for r in red)
            srps, sp99 = median(r[test][0] for r in st), median(r[test][1] for r in st)
            ratio = srps / rps if rps else 0
            p99r = sp99 / p99 if p99 else 0
            row = f"| {test} | {rps:,.0f} | {srps:,.0f} | {ratio:.2f} | {p99:.3f} | {sp99:.3f} | {p99r:.2f} |"
            if paired:
                ratios = [f"{s[test][0] / r[test][0]:.2f}" if r[test][0] else "n/a" for r, s in zip(red, st)]
                row += " " + ", ".join(ratios) + " |"
            lines.append(row)
    return "\n".join(lines)


def read_rb(path):
    rows = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            try:
                rows[row["test"]] = (float(row["rps"]), float(row["p99_latency_ms"]))
            except (KeyError, ValueError):
                continue
    return rows


def read_ycsb(path):
    """{'throughput': x, 'READ': (avg_us, p99_us), ...} from YCSB's output."""
    res = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\[(\w+(?:-\w+)*)\], (\w+)\((\w+(?:/\w+)?)\), ([0-9.eE+-]+)", line.strip())
            if not m:
                continue
            sect, name, _, val = m.groups()
            if sect == "OVERALL" and name == "Throughput":
                res["throughput"] = float(val)
            elif name == "AverageLatency":
                res.setdefault(sect, {})["avg"] = float(val)
            elif name == "99thPercentileLatency":
                res.setdefault(sect, {})["p99"] = float(val)
            elif name == "Return=ERROR":
                res.setdefault(sect, {})["errors"] = float(val)
    return res


def read_cpu(path):
    """Server CPU seconds a YCSB run used (run.sh's ycsb-*.txt.cpu), or None."""
    try:
        with open(path) as f:
            kv = dict(x.split("=", 1) for x in f.read().split())
        return int(kv["ticks"]) / int(kv["hz"])
    except (OSError, KeyError, ValueError):
        return None


def ycsb_ops(path):
    """Operations of a YCSB run (its [OVERALL] RunTime x Throughput)."""
    runtime = thr = None
    with open(path) as f:
        for line in f:
            m = re.match(r"\[OVERALL\], (RunTime|Throughput)\(\w+(?:/\w+)?\), ([0-9.eE+-]+)", line.strip())
            if m and m.group(1) == "RunTime":
                runtime = float(m.group(2)) / 1000
            elif m:
                thr = float(m.group(2))
    return runtime * thr if runtime and thr else None


def cpu_us_per_op(path):
    """Server CPU microseconds per operation of one YCSB run's output, or None."""
    cpu, ops = read_cpu(path + ".cpu"), (ycsb_ops(path) if os.path.exists(path) else None)
    return cpu * 1e6 / ops if cpu is not None and ops else None


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def avg_latency(r):
    lats = [v["avg"] for k, v in r.items() if isinstance(v, dict) and "avg" in v and not k.startswith("CLEANUP")]
    return sum(lats) / len(lats) if lats else 0


def ycsb_runs(out):
    """{workload: {server: [(results, cpu us/op), ...]}} over the repetitions
    (ycsb-<wl>-<server>.txt, then -r2, -r3, ...), in repetition order."""
    by = {}
    for p in sorted(glob.glob(os.path.join(out, "ycsb-*.txt"))):
        m = re.match(r"ycsb-(\w+?)-(redis|strata)(?:-r(\d+))?\.txt$", os.path.basename(p))
        if m:
            rep = int(m.group(3) or 1)
            by.setdefault(m.group(1), {}).setdefault(m.group(2), []).append((rep, read_ycsb(p), cpu_us_per_op(p)))
    for servers in by.values():
        for runs in servers.values():
            runs.sort(key=lambda r: r[0])
    return by


def ycsb_table(out):
    by = ycsb_runs(out)
    if not by:
        return ""
    reps = max(len(runs) for servers in by.values() for runs in servers.values())
    threads = os.environ.get("YCSB_THREADS", "8")
    note = f", median of {reps} alternating repetitions" if reps > 1 else ""
    lines = [f"\n### YCSB through Jedis ({threads} threads{note})\n",
             "| workload | redis ops/s | strata ops/s | ratio | redis read p99 us | strata read p99 us "
             "| redis CPU us/op | strata CPU us/op | CPU ratio |" + (" ratio per repetition |" if reps > 1 else ""),
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" --- |" if reps > 1 else "")]
    for wl in ["load", "a", "b", "c", "f", "d", "e"]:
        d = by.get(wl, {})
        rr, sr = d.get("redis", []), d.get("strata", [])
        if not rr or not sr:
            continue
        key = "INSERT" if wl == "load" else ("SCAN" if wl == "e" else "READ")
        rt = median(r.get("throughput", 0) for _, r, _ in rr)
        stt = median(r.get("throughput", 0) for _, r, _ in sr)
        rp = median(r.get(key, {}).get("p99", 0) for _, r, _ in rr)
        sp = median(r.get(key, {}).get("p99", 0) for _, r, _ in sr)
        errs = sum(v.get("errors", 0) for _, r, _ in sr for v in r.values() if isinstance(v, dict))
        note = f" ({errs:.0f} errors)" if errs else ""
        rc, sc = median(c for _, _, c in rr), median(c for _, _, c in sr)
        cpu = (f"{rc:.1f} | {sc:.1f} | {sc / rc:.2f}" if rc and sc else "- | - | -")
        row = f"| {wl} | {rt:,.0f} | {stt:,.0f}{note} | {stt / rt if rt else 0:.2f} | {rp:.0f} | {sp:.0f} | {cpu} |"
        if reps > 1:
            each = [s.get("throughput", 0) / r.get("throughput", 1)
                    for (_, r, _), (_, s, _) in zip(rr, sr) if r.get("throughput")]
            row += " " + ", ".join(f"{x:.2f}" for x in each) + " |"
        lines.append(row)
    lines.append("\nCPU us/op: the server process's user + system CPU time over the run"
                 " (all its threads), per operation; lower is better, and unlike ops/s it"
                 " does not depend on how the two cores are shared with the Java client.")
    return "\n".join(lines)


def study_table(out):
    files = sorted(glob.glob(os.path.join(out, "study-*.txt")))
    if not files:
        return ""
    res = {}
    for p in files:
        m = re.match(r"study-(.+)-(read90|write90)\.txt", os.path.basename(p))
        if m:
            res.setdefault(m.group(2), {})[m.group(1)] = read_ycsb(p)
    lines = ["\n### Seed 003 comparison (YCSB zipfian, 8 threads), normalized to memory without persistence\n",
             "| mix | mode | ops/s | throughput vs ideal | avg latency us | latency vs ideal |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    order = ["ideal", "log-always", "log-everysec", "snapshot", "engine", "engine-sync"]
    for mix in ("read90", "write90"):
        modes = res.get(mix, {})
        ideal = modes.get("ideal")
        if not ideal:
            continue
        it, il = ideal.get("throughput", 0), avg_latency(ideal)
        for mode in order:
            r = modes.get(mode)
            if not r:
                continue
            t, l = r.get("throughput", 0), avg_latency(r)
            lines.append(f"| {mix} | {mode} | {t:,.0f} | {t / it if it else 0:.2f} | {l:.0f} | {l / il if il else 0:.2f} |")
    return "\n".join(lines)


def main():
    out = sys.argv[1]
    print("## strata-server vs redis-server\n")
    print(rb_table(out, [
        ("redis-benchmark, -P 1: strata default vs redis appendfsync everysec", "redis-everysec-P1", "strata-default-P1"),
        ("redis-benchmark, -P 16: strata default vs redis appendfsync everysec", "redis-everysec-P16", "strata-default-P16"),
        ("redis-benchmark, -P 1: strata default with --event-loops 2 (a tuning) vs redis appendfsync everysec",
         "redis-everysec-P1", "strata-loops2-P1"),
        ("redis-benchmark, -P 16: strata default with --event-loops 2 (a tuning) vs redis appendfsync everysec",
         "redis-everysec-P16", "strata-loops2-P16"),
        ("redis-benchmark, durable: strata --durability sync vs redis appendfsync always (-P 1)",
         "redis-always-P1", "strata-sync-P1"),
        ("redis-benchmark, durable, 200 clients: strata --durability sync vs redis appendfsync always (-P 4)",
         "redis-always-c200-P4", "strata-sync-c200-P4"),
        ("redis-benchmark, durable with PM emulated on /dev/shm (process-crash durability only): "
         "strata --durability sync --pm-dir /dev/shm/... vs redis appendfsync always (-P 1)",
         "redis-always-P1", "strata-sync-shm-P1"),
        ("ceiling for the durable ratio: strata default (replies never wait for a sync) vs redis appendfsync always "
         "(-P 1); no sync mode can beat this ratio with this client", "redis-always-P1", "strata-default-P1"),
    ]))
    print(ycsb_table(out))
    print(study_table(out))


if __name__ == "__main__":
    main()
