"""The qad suite's report (bench/compare qad): TridentKV's query-after-delete.

Issue 29 item 5's bars, from the medians of each group (one group per
delete method: drop, range, point):

* after dropping half the data by partitions, readrandom and seekrandom
  stay >= 0.95x their rate before the delete;
* each drop returns in < 10 ms (the longest single drop of any repetition);
* for each method, StrataKV's read rates after the delete >= RocksDB's
  after the same delete.

Standard library only; bench/compare loads it (load_sibling).
"""

import statistics

BEFORE = "before the delete: readrandom, seekrandom"
AFTER = "delete, then readrandom, seekrandom"
KEEP = 0.95  # after / before, dropping partitions
DROP_MS = 10.0  # the longest single drop


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=0):
    if x is None:
        return "–"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}"


def ratio(a, b):
    return a / b if a and b else None


def mark(x, ok, text):
    """A target's cell: the figure and ✓ or ✗; – if the figure is missing."""
    return "–" if x is None else f"{text} {'✓' if ok else '✗'}"


def method_of(rows):
    """(method, {engine: [results]}) of a group's deletehalf benchmark, or (None, {})."""
    for (_step, bench), per in rows.items():
        if bench.startswith("deletehalf_"):
            return bench[len("deletehalf_"):], per
    return None, {}


def paired(rows, label, bench):
    """after / before of each repetition (the same database, read for the same
    keys), in run order; None if the steps did not pair up."""
    before = [b.get("ops_per_sec") for b in rows.get((BEFORE, bench), {}).get(label, [])]
    after = [b.get("ops_per_sec") for b in rows.get((AFTER, bench), {}).get(label, [])]
    if not before or len(before) != len(after):
        return None
    return [ratio(a, b) for a, b in zip(after, before)]


def figures(rows, label):
    """One engine's medians in one group (after / before: the median of the
    repetitions' own ratios; delete times: the median total, the longest
    single drop or range delete, or point-delete batch, of any repetition)."""
    def rate(step, bench):
        return med([b.get("ops_per_sec") for b in rows.get((step, bench), {}).get(label, [])])

    def kept(bench):
        reps = paired(rows, label, bench)
        if reps is None:
            return ratio(rate(AFTER, bench), rate(BEFORE, bench)), []
        return med(reps), reps

    _method, per = method_of(rows)
    dels = [b.get("delete") or {} for b in per.get(label, [])]
    longest = [d["longest_ms"] for d in dels if d.get("longest_ms") is not None]
    (read_kept, read_reps), (seek_kept, seek_reps) = kept("readrandom"), kept("seekrandom")
    return {
        "read_kept": read_kept, "read_reps": read_reps, "seek_kept": seek_kept, "seek_reps": seek_reps,
        "read_before": rate(BEFORE, "readrandom"), "read_after": rate(AFTER, "readrandom"),
        "seek_before": rate(BEFORE, "seekrandom"), "seek_after": rate(AFTER, "seekrandom"),
        "total_ms": med([d.get("total_ms") for d in dels]), "longest_ms": max(longest) if longest else None,
        "parts": med([d.get("parts") for d in dels]), "keys_deleted": med([d.get("keys_deleted") for d in dels]),
        "range_tombstones": med([d.get("range_tombstones") for d in dels]),
    }


def best(per, labels, key):
    """(label, value) of the highest `key` among `labels`; (None, None) if none has it."""
    have = [(per[lb][key], lb) for lb in labels if lb in per and per[lb][key]]
    if not have:
        return None, None
    value, label = max(have)
    return label, value


def targets(table, vs, cache_size=None):
    """The qad section of the report: the targets, then every engine's figures."""
    rocks = [v.label for v in vs if v.engine == "rocksdb"]
    stratas = [v.label for v in vs if v.engine == "strata"]
    cache = f"{cache_size / 2**20:g} MiB" if cache_size else "small"
    out = ["## Issue 29 item 5 targets: query after delete (medians; RocksDB = the better RocksDB row of each figure)", "",
           "The key numbers [0, num) are cut into contiguous ranges (`--partitions=P`: a StrataKV partition or RocksDB "
           "column family each, key i in partition ⌊i·P/num⌋; `--key_ranges=P`: ranges of one key space); loaded by "
           "fillrandom (so ~63% of the key numbers exist), compactions finished. Every other range (the odd ones) is "
           "then deleted: *drop* drops those partitions (`drop_partition` / `DropColumnFamily`), *range* deletes each "
           "range with one range tombstone (`delete_range` / `DeleteRange`), *point* scans each range and deletes every "
           "key it finds (`Delete`, one per key; the time includes the scans). Reads draw from the surviving key "
           f"numbers only (`--read_keys=survivors --seed=7`: before and after ask for the same keys in the same order), "
           f"on one thread, through a {cache} block cache, page cache warm; a warm-up readrandom step (same keys) "
           "comes between the fill and the reads before (the first process after a fill reads 1.3-1.6x slower, "
           "both engines); the reads after run in the deleting process right after the delete (no compaction "
           "waited for). *delete ms*: the whole delete (median); "
           "*longest*: the longest single drop or range delete (point: the longest batch, its scan included) of any "
           "repetition. *after / before*: the median over the repetitions of each one's own after / before (the same "
           "database read for the same keys; the repetitions' ratios in brackets), the figures table's ratios alike; "
           "*vs RocksDB*: medians over medians.", "",
           "| engine | method | readrandom after / before | seekrandom after / before | delete: total / longest ms | "
           "readrandom after vs RocksDB | seekrandom after vs RocksDB |",
           "|---|---|---|---|---|---|---|"]
    figs = ["", "**Figures** (medians; ops/s of readrandom and seekrandom before and right after the delete).", "",
            "| method | engine | delete ms | longest ms | deleted | readrandom before | after | × | seekrandom before | "
            "after | × | range tombstones |",
            "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for _g, rows in table:
        method, _ = method_of(rows)
        if method is None:
            continue
        per = {v.label: figures(rows, v.label) for v in vs if any(v.label in r for r in rows.values())}
        rr_peer, rr = best(per, rocks, "read_after")
        sr_peer, sr = best(per, rocks, "seek_after")
        for label, f in per.items():
            deleted = (f"{fmt(f['keys_deleted'])} keys" if f["keys_deleted"] is not None
                       else f"{fmt(f['parts'])} {'partitions' if method == 'drop' else 'ranges'}" if f["parts"] else "–")
            figs.append("| " + " | ".join([
                method, label, fmt(f["total_ms"], 2), fmt(f["longest_ms"], 2), deleted,
                fmt(f["read_before"]), fmt(f["read_after"]), fmt(f["read_kept"], 2),
                fmt(f["seek_before"]), fmt(f["seek_after"]), fmt(f["seek_kept"], 2),
                fmt(f["range_tombstones"]),
            ]) + " |")
        for label in stratas:
            f = per.get(label)
            if not f:
                continue
            rk, sk = f["read_kept"], f["seek_kept"]

            def keep(x, reps):
                each = f" ({', '.join(fmt(r, 2) for r in reps)})" if len(reps) > 1 else ""
                if method != "drop":
                    return fmt(x, 2) + each + " (no bar)" if x is not None else "–"
                return mark(x, x is not None and x >= KEEP, f"{x:.2f}{each}" if x is not None else "")

            lm = f["longest_ms"]
            times = f"{fmt(f['total_ms'], 2)} / {fmt(lm, 2)}"
            out.append("| " + " | ".join([
                label, method, keep(rk, f["read_reps"]), keep(sk, f["seek_reps"]),
                mark(lm, lm is not None and lm < DROP_MS, times + " (< 10 ms each)") if method == "drop" else times,
                mark(ratio(f["read_after"], rr), (ratio(f["read_after"], rr) or 0) >= 1,
                     f"{ratio(f['read_after'], rr):.2f}× {rr_peer}" if ratio(f["read_after"], rr) else ""),
                mark(ratio(f["seek_after"], sr), (ratio(f["seek_after"], sr) or 0) >= 1,
                     f"{ratio(f['seek_after'], sr):.2f}× {sr_peer}" if ratio(f["seek_after"], sr) else ""),
            ]) + " |")
    return out + figs + [""]
