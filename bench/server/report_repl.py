#!/usr/bin/env python3
"""Turns the raw outputs of bench/server/repl.sh into report.md: write
throughput with and without a replica, replica lag under YCSB A, and the
full sync under a memory limit. Ratios are reported, never judged here
beyond saying whether each meets its stated goal.

usage: report_repl.py OUTDIR   (prints Markdown)"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import median, rb_reps, read_ycsb  # noqa: E402

# The goals the throughput ratios are compared with (repl.sh's header).
GOAL_REPL_VS_ALONE = 0.9
GOAL_REPL_VS_REDIS = 1.0


def read_json(path):
    """A probe's JSON output, or None when missing or unreadable (a run
    that failed leaves an empty file)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_kv(path):
    """key=value words of a params or drops file, as strings."""
    kv = {}
    try:
        with open(path) as f:
            for word in f.read().split():
                if "=" in word:
                    k, v = word.split("=", 1)
                    kv[k] = v
    except OSError:
        pass
    return kv


def reps(out, prefix, suffix):
    """The files of a run's repetitions, in order: OUT/<prefix><suffix>,
    then <prefix>-r2<suffix>, ... (repl.sh's naming, the same as run.sh's)."""
    found = []
    plain = os.path.join(out, prefix + suffix)
    if os.path.exists(plain):
        found.append((1, plain))
    rx = re.compile(re.escape(prefix) + r"-r(\d+)" + re.escape(suffix))
    for p in glob.glob(os.path.join(out, f"{glob.escape(prefix)}-r*{glob.escape(suffix)}")):
        m = rx.fullmatch(os.path.basename(p))
        if m:
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def fmt(x, spec=",.0f", none="-"):
    return none if x is None else format(x, spec)


def ratios(num, den):
    """Each repetition's num/den, paired in order."""
    return [n / d if n is not None and d else None for n, d in zip(num, den)]


def goal_note(value, goal):
    if value is None:
        return "no data"
    return f"{'meets' if value >= goal else 'below'} the goal {goal}"


def throughput_section(out):
    lines = []
    for pipe in (16, 1):
        runs = {}
        for kind in ("strata", "redis"):
            for mode in ("solo", "repl"):
                rows = rb_reps(out, f"{kind}-{mode}-P{pipe}")
                runs[kind, mode] = [r.get("SET", (None, None)) for r in rows]
        if not any(runs.values()):
            continue
        n = max(len(v) for v in runs.values())
        lines.append(f"\n### SET throughput, -P {pipe}, 50 clients"
                     f"{f', median of {n} alternating repetitions' if n > 1 else ''}\n")
        lines.append("| run | req/s | p99 ms | catch-up after the run, s | replica link drops |")
        lines.append("| --- | ---: | ---: | ---: | ---: |")
        labels = {("strata", "solo"): "(a) strata alone", ("strata", "repl"): "(b) strata + strata replica",
                  ("redis", "solo"): "(c) redis alone", ("redis", "repl"): "(d) redis + redis replica"}
        rps = {}
        for key, label in labels.items():
            rows = runs[key]
            rps[key] = [r[0] for r in rows]
            catch, drops = "", ""
            if key[1] == "repl":
                name = f"{key[0]}-repl-P{pipe}"
                cs = [read_json(p) or {} for p in reps(out, f"catchup-{name}", ".json")]
                secs = [c.get("seconds") for c in cs]
                failed = sum(1 for s in secs if s is None)
                catch = fmt(median(secs), ".3f") + (f" ({failed} never caught up)" if failed else "")
                ds = [read_kv(p).get("link_drops") for p in reps(out, f"drops-{name}", ".txt")]
                drops = str(sum(int(d) for d in ds if d is not None and d.lstrip("-").isdigit()))
            lines.append(f"| {label} | {fmt(median(rps[key]))} | {fmt(median(r[1] for r in rows), '.3f')} "
                         f"| {catch or '-'} | {drops or '-'} |")
        lines.append("")
        for title, num, den, goal in (
                ("(b)/(a): strata's cost of a replica", ("strata", "repl"), ("strata", "solo"), GOAL_REPL_VS_ALONE),
                ("(b)/(d): strata with a replica vs redis with a replica", ("strata", "repl"), ("redis", "repl"),
                 GOAL_REPL_VS_REDIS),
                ("(d)/(c): redis's cost of a replica (for reference)", ("redis", "repl"), ("redis", "solo"), None)):
            a, b = median(rps[num]), median(rps[den])
            r = a / b if a is not None and b else None
            each = ", ".join(fmt(x, ".2f", "n/a") for x in ratios(rps[num], rps[den]))
            note = f"; {goal_note(r, goal)}" if goal is not None else ""
            lines.append(f"- {title}: **{fmt(r, '.2f')}** (each repetition: {each or '-'}){note}")
    if not lines:
        return ""
    return "\n## 1. Write throughput with one replica (redis-benchmark -t set -r N)\n" + "\n".join(lines) + (
        "\n\nCatch-up: from the end of redis-benchmark until the replica has applied the primary's"
        " offset read at that moment (link up). A link drop means the replica resynced during the run.")


def lag_section(out):
    by = {}
    for kind in ("strata", "redis"):
        for p in reps(out, f"lag-{kind}", ".json"):
            sfx = re.search(r"(-r\d+)?\.json$", p).group(1) or ""
            lag = read_json(p) or {}
            ycsb = os.path.join(out, f"ycsb-a-{kind}{sfx}.txt")
            thr = read_ycsb(ycsb).get("throughput") if os.path.exists(ycsb) else None
            drops = read_kv(os.path.join(out, f"drops-lag-{kind}{sfx}.txt")).get("link_drops")
            by.setdefault(kind, []).append((lag, thr, drops))
    if not by:
        return ""
    n = max(len(v) for v in by.values())
    lines = ["\n## 2. Replica lag under YCSB workload A"
             f"{f' (median of {n} alternating repetitions; max over them)' if n > 1 else ''}\n",
             "A probe SETs a sequence number on the primary every 10 ms and polls the replica"
             " (about every 1 ms): lag is from the primary's reply to the replica showing it."
             " Byte lag: master_repl_offset - slave_repl_offset sampled every 100 ms.\n",
             "| server | YCSB A ops/s | lag p50 ms | lag p99 ms | lag max ms | byte lag p99 | byte lag max "
             "| probes | never seen | probe errors | link drops |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind in ("strata", "redis"):
        runs = by.get(kind, [])
        if not runs:
            continue

        def stat(group, key):
            return [(lag.get(group) or {}).get(key) for lag, _, _ in runs]

        maxes = [x for x in stat("lag_ms", "max") if x is not None]
        bmax = [x for x in stat("byte_lag", "max") if x is not None]
        drops = sum(int(d) for _, _, d in runs if d is not None and d.lstrip("-").isdigit())
        lines.append(
            f"| {kind} | {fmt(median(t for _, t, _ in runs))} | {fmt(median(stat('lag_ms', 'p50')), '.2f')} "
            f"| {fmt(median(stat('lag_ms', 'p99')), '.2f')} | {fmt(max(maxes) if maxes else None, '.1f')} "
            f"| {fmt(median(stat('byte_lag', 'p99')))} | {fmt(max(bmax) if bmax else None)} "
            f"| {sum(lag.get('probe_writes', 0) for lag, _, _ in runs)} "
            f"| {sum(lag.get('missing', 0) for lag, _, _ in runs)} "
            f"| {sum(len(lag.get('errors') or []) for lag, _, _ in runs)} | {drops} |")
    if "strata" in by and "redis" in by:
        st, rd = [t for _, t, _ in by["strata"]], [t for _, t, _ in by["redis"]]
        sp = [(lag.get("lag_ms") or {}).get("p99") for lag, _, _ in by["strata"]]
        rp = [(lag.get("lag_ms") or {}).get("p99") for lag, _, _ in by["redis"]]
        a, b = median(st), median(rd)
        lines.append(f"\n- YCSB A throughput strata/redis: **{fmt(a / b if a and b else None, '.2f')}**"
                     f" (each repetition: {', '.join(fmt(x, '.2f', 'n/a') for x in ratios(st, rd))})")
        a, b = median(sp), median(rp)
        lines.append(f"- lag p99 strata/redis: **{fmt(a / b if a is not None and b else None, '.2f')}**"
                     f" (each repetition: {', '.join(fmt(x, '.2f', 'n/a') for x in ratios(sp, rp))}; lower is better)")
    return "\n".join(lines)


def fullsync_section(out):
    skipped = os.path.join(out, "fullsync-skipped.txt")
    if os.path.exists(skipped):
        with open(skipped) as f:
            return "\n## 3. Full sync under a memory limit\n\n" + f.read().strip()
    params = read_kv(os.path.join(out, "fullsync-params.txt"))
    fs = read_json(os.path.join(out, "fullsync.json"))
    if not params and fs is None:
        return ""
    fs = fs or {}
    load = read_json(os.path.join(out, "fullsync-load.json")) or {}
    before = read_json(os.path.join(out, "fullsync-latency-before.json")) or {}
    during = read_json(os.path.join(out, "fullsync-latency-during.json")) or {}
    cmp_ = read_json(os.path.join(out, "fullsync-compare.json")) or {}
    drops = read_kv(os.path.join(out, "drops-fullsync.txt")).get("link_drops", "-")
    mb = 1 << 20

    def num(d, *path):
        for k in path:
            d = d.get(k) if isinstance(d, dict) else None
        return d

    limit = num(fs, "cgroup_limit_bytes")
    link_up = num(fs, "link_up")
    errors = (before.get("errors") or 0) + (during.get("errors") or 0)
    gap = during.get("longest_gap_ms")
    served = (fs.get("primary_alive") is True and during.get("ops", 0) > 0 and during.get("errors") == 0
              and gap is not None and gap <= 1000)
    lines = ["\n## 3. Full sync from a strata primary held to a memory limit\n",
             f"Data set {params.get('data_mb', '?')} MB ({params.get('keys', '?')} keys of "
             f"{params.get('value_bytes', '?')} bytes) on a primary in a memory cgroup of "
             f"{params.get('limit_mb', '?')} MB (PM region {params.get('pm_mb', '?')} MB, read cache "
             f"{params.get('read_cache_mb', '?')} MB, engine block cache {params.get('block_cache_mb', '?')} MB"
             f"{'' if params.get('block_cache_flag') == '1' else ', fixed: no flag in this build'}); page cache dropped before the sync; a fresh strata"
             f" replica outside the cgroup; a paced SET/GET probe at {params.get('probe_rate', '?')} ops/s"
             " on the primary throughout. redis-server is not compared: it keeps its whole data set in"
             " memory, so it cannot serve 4x its memory limit.\n",
             "| measure | value |", "| --- | ---: |",
             f"| load: keys, seconds (errors) | {load.get('keys', '-')}, {fmt(load.get('seconds'), '.1f')} "
             f"({load.get('errors', '-')}{'; ' + load['error'] if load.get('error') else ''}) |",
             f"| primary data directory after the load, MB | {params.get('primary_dir_mb', '-')} |",
             f"| cgroup peak during the load, MB | {fmt(_div(params.get('load_cgroup_max_bytes'), mb), '.0f')} |",
             f"| sync: replica start to sync started, s | {fmt(fs.get('sync_started'), '.2f')} |",
             f"| full syncs seen starting (sampled every 100 ms) | {fs.get('syncs_started', '-')} |",
             f"| replica link drops in its log (each one a new full sync) | {drops} |",
             f"| **sync duration** (replica start to link up), s | {fmt(link_up, '.2f')} |",
             f"| replica start to caught up with the primary's offset, s | {fmt(fs.get('caught_up'), '.2f')} |",
             f"| primary peak RSS (VmHWM over its life), MB | {fmt(_div(fs.get('vm_hwm_kb'), 1024), '.0f')} |",
             f"| primary peak RSS sampled during the sync, MB | {fmt(_div(fs.get('peak_rss_kb_sampled'), 1024), '.0f')} |",
             f"| cgroup memory.max_usage_in_bytes during the sync, MB | "
             f"{fmt(_div(fs.get('cgroup_max_usage_bytes'), mb), '.0f')} of {fmt(_div(limit, mb), '.0f')} |",
             f"| cgroup failcnt (allocations that hit the limit) | {fs.get('cgroup_failcnt', '-')} |",
             f"| cgroup OOM kills | {fs.get('cgroup_oom_kills', '-')} |",
             f"| probe latency p50 / p99 / max before, ms | {_lat(before)} |",
             f"| probe latency p50 / p99 / max during the sync, ms | {_lat(during)} |",
             f"| p99 during / before | {fmt(_div(num(during, 'latency_ms', 'p99'), num(before, 'latency_ms', 'p99')), '.2f')} |",
             f"| probe errors (before + during) | {errors} |",
             f"| longest stall during the sync, ms | {fmt(gap, '.0f')} |",
             f"| replica vs primary: DBSIZE, sampled mismatches | {cmp_.get('replica_dbsize', '-')} vs "
             f"{cmp_.get('primary_dbsize', '-')}, {cmp_.get('mismatches', '-')} of {cmp_.get('sampled', '-')} |",
             f"\nThe primary served throughout (alive, no errors, no stall over 1 s): **{'yes' if served else 'no'}**."]
    if fs.get("error"):
        lines.append(f"\nPart 3 did not complete: {fs['error']}.")
    return "\n".join(lines)


def _div(a, b):
    try:
        return float(a) / b
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def _lat(d):
    lat = d.get("latency_ms") or {}
    return " / ".join(fmt(lat.get(k), ".2f") for k in ("p50", "p99", "max"))


def main():
    out = sys.argv[1]
    print("# Replication: strata-server vs redis-server 7, one replica each\n")
    try:
        with open(os.path.join(out, "params.txt")) as f:
            print("\n".join(f"- {line.strip()}" for line in f if line.strip()))
    except OSError:
        pass
    for section in (throughput_section(out), lag_section(out), fullsync_section(out)):
        if section:
            print(section)


if __name__ == "__main__":
    main()
