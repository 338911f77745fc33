#!/usr/bin/env python3
"""StrataKV from Python against rocksdict (RocksDB) and plyvel (LevelDB).

The same workloads through each engine's Python binding, one thread:

  fillrandom  N puts of random 16-byte keys with 100-byte values
  readrandom  N gets of those keys in another random order
  iterate     one full forward iteration (keys and values)
  fillbatch   N puts into a fresh database, in write batches of 1,000

Options in the same spirit for all: no compression, a 64 MiB write buffer,
a 64 MiB block cache, 10-bit bloom filters, the write-ahead log on without
a sync per write (StrataKV's PM log is msynced once a second; RocksDB's and
LevelDB's WAL are written without fsync). Each workload runs `--repeat`
times on a fresh database; the best run counts (the machine may be shared).

Run it in a virtualenv with the three packages installed:

  python3 -m venv /tmp/v && /tmp/v/bin/pip install ./crates/strata-python rocksdict plyvel
  /tmp/v/bin/python bench/python/bench.py --out bench/results/DATE-python

Writes OUT.json (every run) and OUT.md (the table) when --out is given.
"""

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time

KEY_LEN = 16
VALUE_LEN = 100
BATCH = 1000
MiB = 1 << 20


class Strata:
    name = "stratakv"

    def __init__(self, path):
        import stratakv

        self.db = stratakv.DB(
            path,
            pm_size=1 << 30,
            write_buffer_size=64 * MiB,
            block_cache_bytes=64 * MiB,
            bloom_bits_per_key=10,
            compression="none",
        )
        self.stratakv = stratakv

    def fill(self, keys, values):
        put = self.db.put
        nv = len(values)
        for i, k in enumerate(keys):
            put(k, values[i % nv])

    def fill_batch(self, keys, values):
        nv = len(values)
        for s in range(0, len(keys), BATCH):
            wb = self.db.write_batch()
            for i in range(s, min(s + BATCH, len(keys))):
                wb.put(keys[i], values[i % nv])
            wb.write()

    def read(self, keys):
        get = self.db.get
        found = 0
        for k in keys:
            if get(k) is not None:
                found += 1
        return found

    def iterate(self):
        n = 0
        for _k, _v in self.db:
            n += 1
        return n

    def close(self):
        self.db.close()


class RocksDict:
    name = "rocksdict"

    def __init__(self, path):
        import rocksdict as r

        opt = r.Options(raw_mode=True)
        opt.create_if_missing(True)
        opt.set_compression_type(r.DBCompressionType.none())
        opt.set_write_buffer_size(64 * MiB)
        bbo = r.BlockBasedOptions()
        bbo.set_block_cache(r.Cache(64 * MiB))
        bbo.set_bloom_filter(10, False)
        opt.set_block_based_table_factory(bbo)
        self.db = r.Rdict(path, opt)
        self.r = r

    def fill(self, keys, values):
        put = self.db.put
        nv = len(values)
        for i, k in enumerate(keys):
            put(k, values[i % nv])

    def fill_batch(self, keys, values):
        nv = len(values)
        for s in range(0, len(keys), BATCH):
            wb = self.r.WriteBatch(raw_mode=True)
            for i in range(s, min(s + BATCH, len(keys))):
                wb.put(keys[i], values[i % nv])
            self.db.write(wb)

    def read(self, keys):
        get = self.db.get
        found = 0
        for k in keys:
            if get(k) is not None:
                found += 1
        return found

    def iterate(self):
        n = 0
        for _k, _v in self.db.items():
            n += 1
        return n

    def close(self):
        self.db.close()


class Plyvel:
    name = "plyvel"

    def __init__(self, path):
        import plyvel

        self.db = plyvel.DB(
            path,
            create_if_missing=True,
            write_buffer_size=64 * MiB,
            lru_cache_size=64 * MiB,
            bloom_filter_bits=10,
            compression=None,
        )

    def fill(self, keys, values):
        put = self.db.put
        nv = len(values)
        for i, k in enumerate(keys):
            put(k, values[i % nv])

    def fill_batch(self, keys, values):
        nv = len(values)
        for s in range(0, len(keys), BATCH):
            with self.db.write_batch() as wb:
                for i in range(s, min(s + BATCH, len(keys))):
                    wb.put(keys[i], values[i % nv])

    def read(self, keys):
        get = self.db.get
        found = 0
        for k in keys:
            if get(k) is not None:
                found += 1
        return found

    def iterate(self):
        n = 0
        for _k, _v in self.db:
            n += 1
        return n

    def close(self):
        self.db.close()


ENGINES = {e.name: e for e in (Strata, RocksDict, Plyvel)}
WORKLOADS = ["fillrandom", "readrandom", "iterate", "fillbatch"]


def run_engine(cls, keys, read_keys, values, workdir):
    """One round of every workload on `cls`; seconds per workload."""
    out = {}
    path = os.path.join(workdir, cls.name + "-fill")
    db = cls(path)
    t = time.perf_counter()
    db.fill(keys, values)
    out["fillrandom"] = time.perf_counter() - t
    t = time.perf_counter()
    found = db.read(read_keys)
    out["readrandom"] = time.perf_counter() - t
    if found != len(read_keys):
        raise SystemExit(f"{cls.name}: found {found} of {len(read_keys)} keys")
    t = time.perf_counter()
    n = db.iterate()
    out["iterate"] = time.perf_counter() - t
    if n != len(set(keys)):
        raise SystemExit(f"{cls.name}: iterated {n} keys, wrote {len(set(keys))}")
    db.close()
    shutil.rmtree(path)

    path = os.path.join(workdir, cls.name + "-batch")
    db = cls(path)
    t = time.perf_counter()
    db.fill_batch(keys, values)
    out["fillbatch"] = time.perf_counter() - t
    db.close()
    shutil.rmtree(path)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num", type=int, default=1_000_000, help="operations per workload")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per engine; the best counts")
    ap.add_argument("--engines", default="stratakv,rocksdict,plyvel")
    ap.add_argument("--dir", default=None, help="where the databases go (default: a temp dir)")
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = ap.parse_args()

    rng = random.Random(301)
    keys = [b"%016x" % rng.getrandbits(64) for _ in range(args.num)]
    read_keys = keys[:]
    rng.shuffle(read_keys)
    values = [rng.randbytes(VALUE_LEN) for _ in range(1024)]
    engines = [ENGINES[e] for e in args.engines.split(",")]

    runs = {e.name: [] for e in engines}
    workdir = tempfile.mkdtemp(prefix="strata-pybench-", dir=args.dir)
    try:
        for r in range(args.repeat):
            for cls in engines:
                secs = run_engine(cls, keys, read_keys, values, workdir)
                runs[cls.name].append(secs)
                line = "  ".join(f"{w} {args.num / secs[w]:>10,.0f}/s" for w in WORKLOADS)
                print(f"round {r + 1} {cls.name:<10} {line}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    best = {e: {w: args.num / min(r[w] for r in rs) for w in WORKLOADS} for e, rs in runs.items()}
    versions = {}
    for mod in ("stratakv", "rocksdict", "plyvel"):
        try:
            m = __import__(mod)
            versions[mod] = getattr(m, "__version__", None) or getattr(m, "__leveldb_version__", None) or "?"
        except ImportError:
            pass
    try:
        from importlib.metadata import version

        for mod in ("rocksdict", "plyvel", "stratakv"):
            try:
                versions[mod] = version(mod)
            except Exception:
                pass
    except ImportError:
        pass

    lines = [
        f"| workload | " + " | ".join(f"{e} ops/s" for e in best) + " | " + " | ".join(
            f"{e} / rocksdict" for e in best if e != "rocksdict") + " |",
        "|---|" + "---:|" * (len(best) + len([e for e in best if e != "rocksdict"])),
    ]
    for w in WORKLOADS:
        cells = [f"{best[e][w]:,.0f}" for e in best]
        ratios = []
        for e in best:
            if e == "rocksdict":
                continue
            if "rocksdict" in best:
                ratios.append(f"{best[e][w] / best['rocksdict'][w]:.2f}x")
            else:
                ratios.append("-")
        lines.append(f"| {w} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    table = "\n".join(lines)
    print()
    print(table)

    if args.out:
        meta = {
            "num": args.num,
            "repeat": args.repeat,
            "key_len": KEY_LEN,
            "value_len": VALUE_LEN,
            "batch": BATCH,
            "python": sys.version.split()[0],
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "versions": versions,
        }
        with open(args.out + ".json", "w") as f:
            json.dump({"meta": meta, "runs_seconds": runs, "best_ops_per_sec": best}, f, indent=2)
        with open(args.out + ".md", "w") as f:
            f.write(f"# Python bindings: stratakv vs rocksdict vs plyvel\n\n")
            f.write(f"`bench/python/bench.py --num {args.num} --repeat {args.repeat}`; "
                    f"Python {meta['python']}, {meta['cpus']} CPUs; versions {versions}.\n\n")
            f.write("Best of the rounds, in operations per second (one thread; 16-byte keys, "
                    "100-byte values; no compression, 64 MiB write buffer and block cache, "
                    "WAL without per-write sync).\n\n")
            f.write(table + "\n")


if __name__ == "__main__":
    main()
