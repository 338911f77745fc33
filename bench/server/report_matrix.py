#!/usr/bin/env python3
"""Turns the raw outputs of bench/server/matrix.sh into OUT/report.md:
per pipeline depth and command the median requests per second of
strata-server, Valkey and redis-server, the strata/valkey and strata/redis
ratios of the medians and of each repetition, p99 latencies, server CPU per
request, memory, the durable SET runs, and the checks of issue 53 (each
says met or not met with its number; nothing is assumed).

usage: report_matrix.py OUTDIR   (writes OUTDIR/report.md and prints it)"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import median, read_rb  # noqa: E402
from report_repl import fmt, read_kv  # noqa: E402

SERVERS = ("strata", "valkey", "redis")
TESTS = ("SET", "GET", "INCR", "LPUSH", "RPUSH", "LPOP", "SADD", "HSET", "ZADD", "MSET (10 keys)")
PIPELINES = (16, 1)

# Issue 53's goals, strata against Valkey.
GOAL_RPS = 1.0        # every command, -P 16 and -P 1: at least this x Valkey's req/s
GOAL_CPU = 1.2        # CPU per request at -P 16: at most this x Valkey's
GOAL_RSS = 2.0        # memory after the keys (anon and total): at most this x Valkey's
GOAL_P99 = 1.0        # p99 at -P 1, every command: at most this x Valkey's
GOAL_DURABLE = 1.2    # durable SET req/s: at least this x Valkey's


class Run:
    """One server run: redis-benchmark's rows {test: (rps, p99 ms)}, and
    the cpu and mem files' key=value figures (strings)."""

    def __init__(self, rb, cpu, mem):
        self.rb, self.cpu, self.mem = rb, cpu, mem

    def rps(self, test):
        return self.rb.get(test, (None, None))[0]

    def p99(self, test):
        return self.rb.get(test, (None, None))[1]

    def _num(self, d, key):
        try:
            return float(d[key])
        except (KeyError, ValueError):
            return None

    def cpu_us_per_request(self, key="ticks"):
        ticks, hz, req = (self._num(self.cpu, k) for k in (key, "hz", "requests"))
        return ticks / hz / req * 1e6 if ticks is not None and hz and req else None

    def mem_mb(self, key):
        kb = self._num(self.mem, key)
        return kb / 1024 if kb is not None else None

    def dbsize(self):
        return self._num(self.mem, "dbsize")


def load(out, name):
    """{repetition: Run} of OUT/rb-<name>.csv (repetition 1), rb-<name>-r2.csv,
    ... with their cpu-<name>*.txt and mem-<name>*.txt."""
    runs = {}
    rx = re.compile(r"rb-" + re.escape(name) + r"(-r(\d+))?\.csv")
    for path in glob.glob(os.path.join(out, f"rb-{glob.escape(name)}*.csv")):
        m = rx.fullmatch(os.path.basename(path))
        if not m:
            continue
        rep, sfx = int(m.group(2) or 1), m.group(1) or ""
        try:
            rb = read_rb(path)
        except OSError:
            rb = {}
        runs[rep] = Run(rb, read_kv(os.path.join(out, f"cpu-{name}{sfx}.txt")),
                        read_kv(os.path.join(out, f"mem-{name}{sfx}.txt")))
    return runs


def med(runs, f):
    """Median over the repetitions of f(run)."""
    return median(f(r) for r in runs.values())


def ratio(a, b):
    return a / b if a is not None and b else None


def each_ratio(num, den, f):
    """Each repetition's f(strata)/f(other), for the repetitions both have."""
    return [ratio(f(num[k]), f(den[k])) for k in sorted(set(num) & set(den))]


def ratio_text(num, den, f, lower_better=False):
    """'**1.23** (each repetition: 1.20, 1.30)' for median(num)/median(den)."""
    r = ratio(med(num, f), med(den, f))
    each = ", ".join(fmt(x, ".2f", "n/a") for x in each_ratio(num, den, f))
    return f"**{fmt(r, '.2f')}** (each repetition: {each or '-'}{'; lower is better' if lower_better else ''})"


def reps_note(groups):
    n = max((len(g) for g in groups), default=0)
    return f", median of {n} alternating repetitions" if n > 1 else ""


def pipeline_section(out, pipe):
    runs = {s: load(out, f"{s}-P{pipe}") for s in SERVERS}
    if not any(runs.values()):
        return ""
    st = runs["strata"]
    lines = [f"\n## -P {pipe}: redis-benchmark -c 50 -r 1000000{reps_note(runs.values())}\n",
             "| command | strata req/s | valkey req/s | redis req/s | strata/valkey | each repetition "
             "| strata/redis | each repetition |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
    for t in TESTS:
        def f(r, t=t):
            return r.rps(t)
        m = {s: med(runs[s], f) for s in SERVERS}
        cells = [fmt(m[s]) for s in SERVERS]
        for other in ("valkey", "redis"):
            each = ", ".join(fmt(x, ".2f", "n/a") for x in each_ratio(st, runs[other], f))
            cells += [fmt(ratio(m["strata"], m[other]), ".2f"), each or "-"]
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += ["\np99 latency, ms (median of the repetitions' p99; lower is better):\n",
              "| command | strata | valkey | redis | strata/valkey | strata/redis |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for t in TESTS:
        m = {s: med(runs[s], lambda r, t=t: r.p99(t)) for s in SERVERS}
        lines.append(f"| {t} | " + " | ".join(fmt(m[s], ".3f") for s in SERVERS)
                     + f" | {fmt(ratio(m['strata'], m['valkey']), '.2f')}"
                     f" | {fmt(ratio(m['strata'], m['redis']), '.2f')} |")
    lines += ["\nServer CPU per request (utime + stime of all its threads over the redis-benchmark run, divided"
              " by the requests: N per command, an MSET of 10 keys counting as one) and memory after the run:\n",
              "| server | CPU µs/request | each repetition | reaped children µs/request (not included) "
              "| RssAnon MB | VmRSS MB | RssFile MB | RssShmem MB |",
              "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for s in SERVERS:
        r = runs[s]
        each = ", ".join(fmt(r[k].cpu_us_per_request(), ".2f", "n/a") for k in sorted(r))
        lines.append(f"| {s} | {fmt(med(r, Run.cpu_us_per_request), '.2f')} | {each or '-'} "
                     f"| {fmt(med(r, lambda x: x.cpu_us_per_request('child_ticks')), '.2f')} | "
                     + " | ".join(fmt(med(r, lambda x, k=k: x.mem_mb(k)), ".1f")
                                  for k in ("RssAnon", "VmRSS", "RssFile", "RssShmem")) + " |")
    lines.append("")
    for other in ("valkey", "redis"):
        lines.append(f"- CPU per request strata/{other}: "
                     f"{ratio_text(st, runs[other], Run.cpu_us_per_request, lower_better=True)}")
    return "\n".join(lines)


def rss_section(out, keys):
    runs = {s: load(out, f"rss-{s}") for s in SERVERS}
    if not any(runs.values()):
        return ""
    lines = [f"\n## Memory after {keys} SETs of 100 bytes to random keys (-r 1000000000 -P 16 -c 50)"
             f"{reps_note(runs.values())}\n",
             "RssAnon is the DRAM the server allocated; strata's PM region is a mapped file (--pm-dir),"
             " counted in RssFile or RssShmem, so VmRSS includes it.\n",
             "| server | DBSIZE | RssAnon MB | VmRSS MB | RssFile MB | RssShmem MB | SET req/s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in SERVERS:
        r = runs[s]
        lines.append(f"| {s} | {fmt(med(r, Run.dbsize))} | "
                     + " | ".join(fmt(med(r, lambda x, k=k: x.mem_mb(k)), ".1f")
                                  for k in ("RssAnon", "VmRSS", "RssFile", "RssShmem"))
                     + f" | {fmt(med(r, lambda x: x.rps('SET')))} |")
    lines.append("")
    for key, label in (("RssAnon", "anon"), ("VmRSS", "total")):
        for other in ("valkey", "redis"):
            lines.append(f"- RSS {label} strata/{other}: "
                         f"{ratio_text(runs['strata'], runs[other], lambda x, k=key: x.mem_mb(k), lower_better=True)}")
    return "\n".join(lines)


def durable_section(out, n):
    runs = {s: load(out, f"durable-{s}") for s in SERVERS}
    if not any(runs.values()):
        return ""
    lines = [f"\n## Durable SET: strata --durability sync, valkey and redis appendfsync always"
             f" (-n {n} -r 1000000 -P 16 -c 50{reps_note(runs.values())})\n",
             "| server | SET req/s | p99 ms | CPU µs/request |", "| --- | ---: | ---: | ---: |"]
    for s in SERVERS:
        r = runs[s]
        lines.append(f"| {s} | {fmt(med(r, lambda x: x.rps('SET')))} | {fmt(med(r, lambda x: x.p99('SET')), '.3f')} "
                     f"| {fmt(med(r, Run.cpu_us_per_request), '.2f')} |")
    lines.append("")
    for other in ("valkey", "redis"):
        lines.append(f"- SET strata/{other}: {ratio_text(runs['strata'], runs[other], lambda x: x.rps('SET'))}")
    return "\n".join(lines)


def verdict(ok):
    return "**met**" if ok else "**not met**"


def per_command_goal(label, st, vk, f, goal, at_least):
    """A goal every command must meet: the verdict with the worst ratio and
    the commands that miss it."""
    rs = {t: ratio(med(st, lambda r, t=t: f(r, t)), med(vk, lambda r, t=t: f(r, t))) for t in TESTS}
    missing = [t for t, r in rs.items() if r is None]
    if len(missing) == len(TESTS):
        return f"- {label}: no data"
    known = {t: r for t, r in rs.items() if r is not None}
    worst = (min if at_least else max)(known, key=known.get)
    misses = [t for t, r in known.items() if (r < goal if at_least else r > goal)]
    ok = not misses and not missing
    text = f"- {label}: {verdict(ok)} ({'lowest' if at_least else 'highest'}: {worst} {known[worst]:.2f}"
    if misses:
        text += "; " + ("below" if at_least else "above") + ": " + ", ".join(f"{t} {known[t]:.2f}" for t in misses)
    if missing:
        text += "; no data: " + ", ".join(missing)
    return text + ")"


def single_goal(label, st, vk, f, goal, at_least, unit="", spec=",.2f"):
    a, b = med(st, f), med(vk, f)
    r = ratio(a, b)
    if r is None:
        return f"- {label}: no data"
    ok = r >= goal if at_least else r <= goal
    return f"- {label}: {verdict(ok)} ({r:.2f}: strata {a:{spec}}{unit}, valkey {b:{spec}}{unit})"


def goals_section(out):
    p16 = {s: load(out, f"{s}-P16") for s in ("strata", "valkey")}
    p1 = {s: load(out, f"{s}-P1") for s in ("strata", "valkey")}
    rss = {s: load(out, f"rss-{s}") for s in ("strata", "valkey")}
    dur = {s: load(out, f"durable-{s}") for s in ("strata", "valkey")}
    lines = ["\n## Goals of issue 53 (strata against Valkey, ratios of the medians)\n",
             per_command_goal(f"every command >= {GOAL_RPS}x Valkey's req/s at -P 16", p16["strata"], p16["valkey"],
                              Run.rps, GOAL_RPS, True),
             per_command_goal(f"every command >= {GOAL_RPS}x Valkey's req/s at -P 1", p1["strata"], p1["valkey"],
                              Run.rps, GOAL_RPS, True),
             single_goal(f"CPU per request <= {GOAL_CPU}x Valkey's at -P 16", p16["strata"], p16["valkey"],
                         Run.cpu_us_per_request, GOAL_CPU, False, " µs"),
             single_goal(f"RSS anon after the keys <= {GOAL_RSS}x Valkey's", rss["strata"], rss["valkey"],
                         lambda r: r.mem_mb("RssAnon"), GOAL_RSS, False, " MB"),
             single_goal(f"RSS total (VmRSS) after the keys <= {GOAL_RSS}x Valkey's", rss["strata"], rss["valkey"],
                         lambda r: r.mem_mb("VmRSS"), GOAL_RSS, False, " MB"),
             per_command_goal(f"p99 at -P 1 <= {GOAL_P99}x Valkey's, every command", p1["strata"], p1["valkey"],
                              Run.p99, GOAL_P99, False),
             single_goal(f"durable SET >= {GOAL_DURABLE}x Valkey's req/s", dur["strata"], dur["valkey"],
                         lambda r: r.rps("SET"), GOAL_DURABLE, True, " req/s", ",.0f")]
    return "\n".join(lines)


def params_of(out):
    path = os.path.join(out, "params.txt")
    try:
        with open(path) as f:
            return [line.strip() for line in f if line.strip()]
    except OSError:
        return []


def report(out):
    params = params_of(out)
    kv = read_kv(os.path.join(out, "params.txt"))
    parts = ["# redis-benchmark matrix: strata-server vs Valkey vs redis-server 7.0 (issue 53)\n",
             "strata-server with its defaults; Valkey and redis-server with appendonly yes, appendfsync"
             " everysec (durable runs: appendfsync always); each run on a fresh server and data directory,"
             " the servers alternating.\n"]
    if kv.get("quick") == "1":
        parts.append("**A quick run (--quick): a smoke test of the plumbing, not a measurement.**\n")
    parts.append("\n".join(f"- {line}" for line in params))
    parts.append(goals_section(out))
    for pipe in PIPELINES:
        parts.append(pipeline_section(out, pipe))
    parts.append(rss_section(out, kv.get("rss_keys", "?")))
    parts.append(durable_section(out, kv.get("n_durable", "?")))
    return "\n".join(p for p in parts if p) + "\n"


def main():
    out = sys.argv[1]
    text = report(out)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
