#!/usr/bin/env python3
"""Unit tests of bench/compare's parsers and summaries (standard library only).

    python3 bench/test_compare.py
"""

import unittest
from importlib.machinery import SourceFileLoader
from pathlib import Path

compare = SourceFileLoader("compare", str(Path(__file__).with_name("compare"))).load_module()

DB_BENCH_OUT = """RocksDB:    version 7.8.3
... finished 900 ops                              ... finished 1000 ops                              DB path: [/tmp/dbb]
readrandom   :       1.543 micros/op 625390 ops/sec 0.002 seconds 1000 operations;   45.9 MB/s (664 of 1000 found)

Microseconds per read:
Count: 1000 Average: 1.6160  StdDev: 12.67
Min: 0  Median: 0.5952  Max: 399
Percentiles: P50: 0.60 P75: 0.89 P99: 6.50 P99.9: 380.00 P99.99: 399.00
------------------------------------------------------
multireadrandom :       0.832 micros/op 1173708 ops/sec 0.001 seconds 1000 operations;   83.1 MB/s (640 of 1000 found)
2026/11/22-11:23:26  ... thread 0: (126000,126000) ops and (124522.9,124522.9) ops/second in (1.011862,1.011862) seconds
2026/11/22-11:23:27  ... thread 0: (125000,251000) ops and (122823.0,123670.5) ops/second in (1.017725,2.029587) seconds
 Sum      3/0   24.59 MB   0.0      0.0     0.0      0.0       0.1      0.0       0.0   1.9     40.8     68.8      0.88              0.36        12    0.073    307K    55K       0.0       0.0
Cumulative writes: 300K writes, 300K keys, 300K commit groups, 1.0 writes per commit group, ingest: 0.04 GB, 5.09 MB/s
Cumulative compaction: 0.06 GB write, 8.20 MB/s write, 0.03 GB read, 4.86 MB/s read, 0.9 seconds
Level Files Size(MB)
--------------------
  0        2        6
  1        1       18
  2        0        0
"""


class ParseTest(unittest.TestCase):
    def test_result_lines_and_histograms(self):
        rs = compare.parse_results(DB_BENCH_OUT)
        self.assertEqual([r["benchmark"] for r in rs], ["readrandom", "multireadrandom"])
        r = rs[0]
        self.assertEqual(r["ops_per_sec"], 625390)
        self.assertEqual(r["ops"], 1000)
        self.assertAlmostEqual(r["micros_per_op"], 1.543)
        self.assertEqual(r["p50_us"], 0.60)
        self.assertEqual(r["p999_us"], 380.0)
        self.assertEqual(r["max_us"], 399.0)
        self.assertIn("664 of 1000 found", r["message"])
        self.assertNotIn("p50_us", rs[1])

    def test_cpu_per_op_line(self):
        out = ("fillrandom   :       1.270 micros/op 787401 ops/sec 1.270 seconds 1000000 operations; 107.2 MB/s\n"
               "             :       2.862 cpu micros/op (2.86 cpu seconds, user+system, whole process)\n"
               "readrandom   :       0.500 micros/op 2000000 ops/sec 0.500 seconds 1000000 operations;\n")
        rs = compare.parse_results(out)
        self.assertEqual(rs[0]["cpu_us_per_op"], 2.862)
        self.assertNotIn("cpu_us_per_op", rs[1])

    def test_rocksdb_stats(self):
        s = compare.parse_rocksdb_stats(DB_BENCH_OUT)
        self.assertAlmostEqual(s["engine_write_amp"], 0.06 / 0.04)
        self.assertEqual(s["rocksdb_sum_w_amp"], 1.9)
        self.assertEqual(s["nonempty_levels"], 2)
        self.assertEqual(s["levels"][1], {"level": 1, "files": 1, "mb": 18})

    def test_intervals_and_stall(self):
        rates = compare.timeline_from_intervals(DB_BENCH_OUT)
        self.assertEqual(rates, [124522.9, 122823.0])
        self.assertIsNone(compare.stall_figure([5, 6]))
        st = compare.stall_figure([100, 50, 100, 120, 3])
        self.assertEqual(st["min"], 50)
        self.assertEqual(st["median"], 100)
        self.assertAlmostEqual(st["ratio"], 0.5)

    def test_interval_series(self):
        self.assertEqual(compare.interval_series(DB_BENCH_OUT), ([1.011862, 2.029587], [124522.9, 122823.0]))
        self.assertEqual(compare.interval_series("no intervals"), ([], []))

    def test_disk_bytes_counts_the_pm_file_apart(self):
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            db = Path(d) / "db"
            (db / "pm").mkdir(parents=True)
            (db / "000001.sst").write_bytes(b"x" * 20000)
            (db / "pm" / "strata.pm").write_bytes(b"y" * 10000)
            total, pm = compare.disk_bytes(db, None)
            self.assertGreaterEqual(pm, 10000)
            self.assertGreaterEqual(total - pm, 20000)
            self.assertEqual(compare.disk_bytes(db, Path(d) / "missing"), (total, pm))
            self.assertEqual(compare.disk_bytes(db / "000001.sst")[1], 0)

    def test_cpu_floor_line_and_cell(self):
        line = ("cpufloor     : unit 3.60 us, 1347904 units: p50 3.64 p99 3.66 p99.9 18.80 p99.99 53.14 max 541 us; "
                "353 hiccups/s over 10 us")
        m = compare.FLOOR_RE.search("header\n" + line + "\n")
        self.assertIsNotNone(m)
        self.assertEqual(m.group(1), "3.60")
        self.assertEqual(m.group(5), "18.80")
        self.assertEqual(m.group(8), "353")
        f = {"unit_us": 3.6, "p999_us": 18.8, "hiccups_per_sec": 353.0}
        self.assertIn("above the bar", compare.floor_cell(f, 93.0))
        self.assertIn("reachable", compare.floor_cell(f, 200.0))
        self.assertEqual(compare.floor_cell(None, 93.0), "–")

    def test_suites_and_variants(self):
        s = compare.suites()
        self.assertEqual(set(s), {"smoke", "quick", "standard", "matrix", "slm", "listdb", "trident", "qad", "p2kvs", "crosscheck"})
        # p2kvs: 1..16 threads (fill, reads, YCSB A and C), then synced fills; plain Db, shards 1/2/4, RocksDB.
        p2 = s["p2kvs"]
        self.assertEqual([g.extra for g in p2[:5]], [[f"--threads={t}"] for t in (1, 2, 4, 8, 16)])
        self.assertTrue(all(g.value_size == 128 for g in p2))
        self.assertEqual([v.label for v in p2[0].variants],
                         ["rocksdb", "strata/matrix", "strata/matrix shards=1", "strata/matrix shards=2", "strata/matrix shards=4"])
        self.assertIn("--writes=125000", p2[3].steps[0].flags)
        self.assertTrue(p2[2].steps[2].ycsb and "ycsba" in p2[2].steps[2].benchmarks)
        self.assertEqual([g.steps[0].flags[-1] for g in p2[5:]], ["--sync=1", "--sync=1"])
        slm = s["slm"][0]
        self.assertGreaterEqual(slm.num * (16 + slm.value_size), 4 * 2**30)
        self.assertEqual(slm.value_size, 1024)
        self.assertEqual([st.label for st in slm.steps], ["fillrandom", "readrandom", "seekrandom (+10 next)", "readwhilewriting"])
        self.assertEqual(compare.default_peers("slm"), "rocksdb,rocksdb-tuned")
        cc = s["crosscheck"][0]
        self.assertIn("--cache_type=lru_cache", cc.extra)
        self.assertIn("--format_version=5", cc.extra)
        self.assertEqual(compare.default_peers("crosscheck"), "rocksdb,db_bench")
        matrix = s["matrix"][0]
        self.assertGreaterEqual(matrix.num * (16 + matrix.value_size), 4 * 2**30)
        self.assertTrue(all(st.ycsb for st in s["standard"][2].steps))
        small = compare.suites(5000)
        for g in small["standard"]:
            self.assertEqual(g.num, 5000)

        class A:
            pm = "data,shm,shm300"
            profiles = "sstable,matrix"
            peers = None

        vs = compare.variants(A)
        self.assertEqual([v.label for v in vs[:4]], ["rocksdb", "rocksdb-tuned", "fjall", "db_bench 7.8.3"])
        self.assertEqual([v.engine for v in vs[:4]], ["rocksdb", "rocksdb", "fjall", "db_bench"])
        self.assertTrue(all(v.peer for v in vs[:4]) and not any(v.peer for v in vs[4:]))
        self.assertEqual(len(vs), 10)
        self.assertIn("--pm_write_latency_ns=300", vs[-1].flags)
        self.assertEqual(vs[-1].pm_where, "shm")

        A.peers = "fjall"
        self.assertEqual([v.label for v in compare.variants(A)][:2], ["fjall", "strata/sstable"])
        A.profiles = ""  # the crosscheck suite: no StrataKV rows
        A.pm = "data"
        self.assertEqual([v.label for v in compare.variants(A)], ["fjall"])
        A.profiles = "sstable,matrix"
        A.peers = "leveldb"
        with self.assertRaises(SystemExit):
            compare.variants(A)
        self.assertNotIn("rocksdb-tuned", compare.default_peers("quick"))
        self.assertIn("rocksdb-tuned", compare.default_peers("standard"))

    def test_listdb_suite(self):
        groups = compare.suites()["listdb"]
        main, ycsb, factor = groups[:6], groups[6], groups[7]
        self.assertEqual([(g.num, g.value_size, g.extra) for g in main],
                         [(1_000_000, 100, ["--threads=1"]), (1_000_000, 100, ["--threads=2"]), (1_000_000, 100, ["--threads=4"]),
                          (300_000, 1024, ["--threads=1"]), (300_000, 1024, ["--threads=2"]), (300_000, 1024, ["--threads=4"])])
        self.assertTrue(all(not g.variants for g in main + [ycsb]))
        self.assertTrue(all(st.ycsb for st in ycsb.steps))
        self.assertIn("2 threads", main[1].title)
        self.assertIn("1 KiB", main[3].title)
        # Totals split among the threads: every thread count writes and reads as much.
        fill, read = main[2].steps
        self.assertEqual((fill.label, read.label), ("fillrandom", "readrandom"))
        self.assertIn("--writes=250000", fill.flags)
        self.assertIn("--stats_interval_seconds=1", fill.flags)
        self.assertEqual(read.flags, ["--reads=50000"])
        self.assertEqual(main[4].steps[1].flags, ["--reads=50000"])
        # The factor analysis: 100 B, 1 thread, its own four pm-only rows on /dev/shm without latency.
        self.assertEqual((factor.num, factor.value_size, factor.extra), (1_000_000, 100, ["--threads=1"]))
        self.assertEqual([v.label for v in factor.variants],
                         ["strata/pm-only pm=shm IUL", "strata/pm-only pm=shm IUL+zipper",
                          "strata/pm-only pm=shm IUL+zipper+cache", "strata/pm-only pm=shm IUL+zipper+cache+braiding"])
        self.assertTrue(all(v.engine == "strata" and v.pm_where == "shm" and not v.pm_latency for v in factor.variants))
        self.assertEqual(factor.variants[0].flags, ["--profile=pm-only", "--listdb_zipper=0", "--listdb_lookup_cache_mb=0", "--pm_regions=1"])
        self.assertEqual(factor.variants[2].flags[1:3], ["--listdb_zipper=1", "--listdb_lookup_cache_mb=64"])
        self.assertEqual(factor.variants[3].flags, factor.variants[2].flags[:3] + ["--pm_regions=2"])
        # --num overrides every group, reads never above it, at least one write per thread.
        small = compare.suites(3)["listdb"]
        self.assertTrue(all(g.num == 3 for g in small))
        self.assertIn("--writes=1", small[2].steps[0].flags)
        self.assertEqual(small[2].steps[1].flags, ["--reads=1"])
        self.assertEqual(small[6].steps[0].flags, ["--reads=3"])

    def test_trident_suite(self):
        (g,) = compare.suites()["trident"]
        self.assertEqual((g.num, g.value_size, g.extra), (4_200_000, 1024, ["--threads=1"]))
        self.assertGreaterEqual(g.num * (16 + g.value_size), 4 * 2**30)
        fill, read, multi, seek = g.steps
        self.assertEqual([st.label for st in g.steps], ["fillrandom", "readrandom", "multireadrandom (batch 32)", "seekrandom"])
        self.assertEqual([st.benchmarks for st in g.steps[1:]], ["readrandom", "multireadrandom", "seekrandom"])
        # The fill waits for its compactions; nothing cold about it.
        self.assertEqual(fill.benchmarks, "fillrandom,waitforcompaction,stats,levelstats")
        self.assertFalse(fill.drop_caches)
        self.assertNotIn("--use_direct_reads=1", fill.flags)
        # Every read step: direct reads, the page cache dropped first.
        for st in (read, multi, seek):
            self.assertTrue(st.drop_caches, st.label)
            self.assertIn("--use_direct_reads=1", st.flags)
        self.assertEqual(read.flags, ["--reads=200000", "--use_direct_reads=1"])
        self.assertEqual(multi.flags, ["--reads=200000", "--batch_size=32", "--multiread_batched=1", "--async_io=1",
                                       "--use_direct_reads=1"])
        self.assertEqual(seek.flags, ["--reads=100000", "--seek_nexts=0", "--use_direct_reads=1"])
        # --num caps the reads; --reads sets every read step's count, under --num.
        small = compare.suites(5000)["trident"][0]
        self.assertEqual((small.num, small.steps[1].flags[0], small.steps[3].flags[0]), (5000, "--reads=5000", "--reads=5000"))
        fewer = compare.suites(None, 50_000)["trident"][0]
        self.assertEqual([st.flags[0] for st in fewer.steps[1:]], ["--reads=50000"] * 3)
        self.assertEqual(fewer.num, 4_200_000)
        self.assertEqual(compare.suites(1000, 50_000)["trident"][0].steps[1].flags[0], "--reads=1000")
        # The other suites keep their own counts unless --reads is given.
        self.assertEqual(compare.suites()["quick"][0].steps[1].flags, ["--reads=500000"])
        self.assertEqual(compare.suites(None, 7)["quick"][0].steps[1].flags, ["--reads=7"])
        self.assertFalse(any(st.drop_caches for gs in compare.suites().values() for g in gs for st in g.steps
                             if g.title != compare.suites()["trident"][0].title))

    def test_trident_defaults_and_variants(self):
        A = type("A", (), {"profiles": None, "pm": None, "cache_size": None, "peers": None})
        compare.suite_defaults(A, "trident", False)
        self.assertEqual((A.profiles, A.pm, A.cache_size, A.peers, A.index_types),
                         ("sstable", "data", 64 << 20, "rocksdb", "learned,binary"))
        vs = compare.variants(A)
        self.assertEqual([v.label for v in vs], ["rocksdb", "strata/sstable index=learned", "strata/sstable index=binary"])
        self.assertEqual(vs[1].flags, ["--profile=sstable", "--index_type=learned"])
        self.assertEqual(vs[2].flags, ["--profile=sstable", "--index_type=binary"])
        self.assertEqual([v.pm_where for v in vs[1:]], ["data", "data"])
        # -pm: both index types on each PM placement.
        P = type("P", (), {"profiles": "sstable", "pm": None, "cache_size": None, "peers": None})
        compare.suite_defaults(P, "trident", True)
        self.assertEqual([v.label for v in compare.variants(P)][1:],
                         ["strata/sstable pm=shm index=learned", "strata/sstable pm=shm index=binary",
                          "strata/sstable pm=shm+300ns index=learned", "strata/sstable pm=shm+300ns index=binary"])
        # Other suites: no --index_type (the engine's default index).
        B = type("B", (), {"profiles": None, "pm": None, "cache_size": None, "peers": None})
        compare.suite_defaults(B, "slm", False)
        self.assertEqual(B.index_types, "")
        self.assertFalse(any("--index_type" in f for v in compare.variants(B) for f in v.flags))
        A.index_types = "learned,btree"
        with self.assertRaises(SystemExit):
            compare.variants(A)

    def test_drop_page_cache(self):
        import tempfile

        real = compare.DROP_CACHES
        try:
            with tempfile.TemporaryDirectory() as d:
                compare.DROP_CACHES = str(Path(d) / "drop_caches")
                self.assertIsNone(compare.drop_page_cache())
                self.assertEqual((Path(d) / "drop_caches").read_text(), "3\n")
                compare.DROP_CACHES = str(Path(d) / "missing" / "drop_caches")
                self.assertIn("FileNotFoundError", compare.drop_page_cache())
        finally:
            compare.DROP_CACHES = real

    def test_listdb_peers_and_defaults(self):
        self.assertEqual(compare.default_peers("listdb"), "rocksdb-shmwal,rocksdb-shmwal-sync")
        # The default peer set of the other suites is unchanged.
        self.assertNotIn("shmwal", compare.default_peers("standard"))

        class A:
            suite = "listdb"
            profiles = pm = cache_size = peers = None

        compare.suite_defaults(A, "listdb", False)
        self.assertEqual((A.profiles, A.pm, A.cache_size, A.peers),
                         ("pm-only,matrix", "shm,shm300", 1 << 30, "rocksdb-shmwal,rocksdb-shmwal-sync"))
        vs = compare.variants(A)
        self.assertEqual([v.label for v in vs], ["rocksdb wal=shm", "rocksdb wal=shm sync=1", "strata/pm-only pm=shm",
                                                 "strata/matrix pm=shm", "strata/pm-only pm=shm+300ns", "strata/matrix pm=shm+300ns"])
        self.assertEqual([(v.engine, v.pm_where, v.flags) for v in vs[:2]], [("rocksdb", "shm", []), ("rocksdb", "shm", ["--sync=1"])])
        self.assertEqual(vs[4].flags, ["--profile=pm-only", "--pm_write_latency_ns=300"])
        # What the command line sets stays.
        A.profiles, A.pm, A.cache_size, A.peers = "matrix", "data", 5, "rocksdb"
        compare.suite_defaults(A, "listdb", False)
        self.assertEqual((A.profiles, A.pm, A.cache_size, A.peers), ("matrix", "data", 5, "rocksdb"))
        B = type("B", (), {"profiles": None, "pm": None, "cache_size": None, "peers": None})
        compare.suite_defaults(B, "slm", False)
        self.assertEqual((B.profiles, B.pm, B.cache_size, B.peers), ("single-level,matrix,sstable", "shm,shm300", 64 << 20, "rocksdb,rocksdb-tuned"))

    def test_tuned_flags(self):
        t = compare.tuned_flags(cores=4)
        self.assertIn("--max_background_jobs=4", t)
        self.assertIn("--subcompactions=4", t)
        self.assertIn("--memtable_bloom_size_ratio=0.1", t)
        self.assertIn("--unordered_write=0", t)
        self.assertIn("--cache_type=lru_cache", t)
        self.assertIn("--max_background_jobs=2", compare.tuned_flags(cores=1))


def row(**per_label_ops):
    """One table row: label -> list of per-rep results."""
    return {label: [{"ops_per_sec": x, "p999_us": 100.0 / x if x else None} for x in ops] for label, ops in per_label_ops.items()}


class RatioTest(unittest.TestCase):
    class A:
        pm = "data"
        profiles = "matrix"
        peers = "rocksdb,rocksdb-tuned,fjall,db_bench"

    def setUp(self):
        self.vs = compare.variants(self.A)

    def test_strongest_peer_is_named(self):
        per = row(**{"rocksdb": [100, 110, 90], "rocksdb-tuned": [150, 140, 160], "fjall": [50], "db_bench 7.8.3": [80],
                     "strata/matrix": [300, 310, 290]})
        self.assertEqual(compare.best_peer(per, self.vs), ("rocksdb-tuned", 150))
        self.assertEqual(compare.ratio_cell("strata/matrix", 300, per, self.vs), "2.00× rocksdb-tuned")
        self.assertEqual(compare.ratio_cell("rocksdb-tuned", 150, per, self.vs), "strongest peer")
        self.assertEqual(compare.ratio_cell("rocksdb", 100, per, self.vs), "0.67× rocksdb-tuned")
        # Latency: the lowest p99.9 among the peers.
        self.assertEqual(compare.best_peer(per, self.vs, "p999_us", higher=False)[0], "rocksdb-tuned")

    def test_a_peer_that_did_not_run_is_skipped(self):
        per = row(**{"fjall": [40], "strata/matrix": [80]})
        per["rocksdb"] = []
        self.assertEqual(compare.ratio_cell("strata/matrix", 80, per, self.vs), "2.00× fjall")
        self.assertEqual(compare.ratio_cell("strata/matrix", 80, {"strata/matrix": per["strata/matrix"]}, self.vs), "")

    def test_strata_is_never_its_own_peer(self):
        per = row(**{"rocksdb": [10], "strata/matrix": [1000]})
        self.assertEqual(compare.best_peer(per, self.vs), ("rocksdb", 10))

    def test_slm_targets(self):
        class S:
            pm = "shm"
            profiles = "single-level,matrix"
            peers = "rocksdb,rocksdb-tuned"

        vs = compare.variants(S)
        fill = {"rocksdb": [{"ops_per_sec": 100, "engine_write_amp": 10.0, "proc_write_amp": 12.0}],
                "rocksdb-tuned": [{"ops_per_sec": 120, "engine_write_amp": 8.0, "proc_write_amp": 9.0}],
                "strata/single-level pm=shm": [{"ops_per_sec": 300, "engine_write_amp": 3.0, "proc_write_amp": 5.0}],
                "strata/matrix pm=shm": [{"ops_per_sec": 250}]}
        read = {"rocksdb": [{"ops_per_sec": 100, "index_dram_bytes": 2**20}],
                "rocksdb-tuned": [{"ops_per_sec": 80}],
                "strata/single-level pm=shm": [{"ops_per_sec": 160, "data_blocks_per_get": 0.7, "data_blocks_per_found_get": 1.01,
                                                "data_blocks_read": 100, "data_blocks_from_file": 25, "pm_index_bytes": 3 * 2**20}],
                "strata/matrix pm=shm": [{"ops_per_sec": 140}]}
        table = [({"title": "g"}, {("fillrandom", "fillrandom"): fill, ("readrandom", "readrandom"): read})]
        text = "\n".join(compare.slm_targets(table, vs))
        row_ = next(line for line in text.splitlines() if line.startswith("| strata/single-level"))
        self.assertIn("1.60× rocksdb ✓", row_)  # readrandom against the better RocksDB
        self.assertIn("1.14× strata/matrix pm=shm ✗", row_)  # below 1.2x matrix
        self.assertIn("2.50× rocksdb-tuned ✓", row_)  # fill against the faster RocksDB
        self.assertIn("3.00 vs 8.00 (rocksdb-tuned) ✓", row_)
        self.assertIn("5.00 vs 9.00 (rocksdb-tuned) ✗", row_)  # 5 > 0.5 x 9
        self.assertIn("1.010 ✓", row_)
        self.assertIn("| strata/single-level pm=shm | 0.700 | 1.010 | 25% | – | 3.0 |", text)
        self.assertIn("| rocksdb | – | – | – | 1.0 | – |", text)

    def test_listdb_targets_and_factor_table(self):
        class L:
            pm = "shm"
            profiles = "pm-only,matrix"
            peers = "rocksdb-shmwal,rocksdb-shmwal-sync"

        vs = compare.variants(L) + compare.listdb_factor_variants()
        pm_only, matrix = "strata/pm-only pm=shm", "strata/matrix pm=shm"

        def stall(ratio):
            return {"min": ratio, "median": 1.0, "ratio": ratio}

        fill = {"rocksdb wal=shm": [{"ops_per_sec": 100, "stall": stall(0.6)}, {"ops_per_sec": 120}],
                "rocksdb wal=shm sync=1": [{"ops_per_sec": 50}],
                pm_only: [{"ops_per_sec": 400, "stall": stall(0.8), "pm_write_amp": 1.2}],
                matrix: [{"ops_per_sec": 250}]}
        read = {"rocksdb wal=shm": [{"ops_per_sec": 100}], "rocksdb wal=shm sync=1": [{"ops_per_sec": 90}],
                pm_only: [{"ops_per_sec": 140}]}
        f = [f"strata/pm-only pm=shm {n}" for n in ("IUL", "IUL+zipper", "IUL+zipper+cache", "IUL+zipper+cache+braiding")]
        ffill = {f[0]: [{"ops_per_sec": 200, "pm_write_amp": 1.1}], f[1]: [{"ops_per_sec": 300}],
                 f[2]: [{"ops_per_sec": 300}], f[3]: [{"ops_per_sec": 450, "stall": stall(0.9)}]}
        fread = {f[0]: [{"ops_per_sec": 10}], f[1]: [{"ops_per_sec": 50}], f[2]: [{"ops_per_sec": 100}], f[3]: [{"ops_per_sec": 100}]}
        table = [({"title": "1M x 100 B, 1 thread"}, {("fillrandom", "fillrandom"): fill, ("readrandom", "readrandom"): read}),
                 ({"title": "ycsb"}, {("ycsb load, A, B, C, F, D", "ycsba"): row(**{pm_only: [10], "rocksdb wal=shm": [5]})}),
                 ({"title": "factors"}, {("fillrandom", "fillrandom"): ffill, ("readrandom", "readrandom"): fread})]
        text = "\n".join(compare.listdb_targets(table, vs))
        lines = [x for x in text.splitlines() if x.startswith("| 1M")]
        self.assertEqual(len(lines), 1)  # pm-only rows only; no YCSB or factor rows
        self.assertIn("| 1M x 100 B, 1 thread | strata/pm-only pm=shm |", lines[0])
        self.assertIn("3.64× rocksdb wal=shm ✓", lines[0])  # 400 against the median 110 of the faster peer
        self.assertIn("0.80 (rocksdb wal=shm 0.60) ✓", lines[0])
        self.assertIn("1.20 ✓", lines[0])
        self.assertIn("1.40× rocksdb wal=shm ✗", lines[0])  # below 1.5x
        self.assertTrue(lines[0].endswith("| 8.00× rocksdb wal=shm sync=1 |"))
        # A stall above the bar, and PM bytes above 1.3, are marked.
        fill[pm_only] = [{"ops_per_sec": 300, "stall": stall(0.5), "pm_write_amp": 1.5}]
        line = next(x for x in compare.listdb_targets(table, vs) if x.startswith("| 1M"))
        self.assertIn("2.73× rocksdb wal=shm ✗", line)
        self.assertIn("0.50 (rocksdb wal=shm 0.60) ✗", line)
        self.assertIn("1.50 ✗", line)
        # Without a stall figure (a fill under 3 s): –.
        fill[pm_only] = [{"ops_per_sec": 300}]
        line = next(x for x in compare.listdb_targets(table, vs) if x.startswith("| 1M"))
        self.assertEqual(line.split(" | ")[3:5], ["–", "–"])

        ft = compare.listdb_factor_table(table, vs)
        self.assertEqual(sum(1 for x in ft if x.startswith("## Factor analysis: factors")), 1)
        rows_ = [x for x in ft if x.startswith("| strata/")]
        self.assertEqual(len(rows_), 4)
        self.assertEqual(rows_[0], "| strata/pm-only pm=shm IUL | `--listdb_zipper=0` `--listdb_lookup_cache_mb=0` `--pm_regions=1` "
                                   "| 200 |  | 10 |  | – | 1.10 |")
        self.assertIn("| 300 | 1.50 | 50 | 5.00 |", rows_[1])
        self.assertIn("| 450 | 1.50 | 100 | 1.00 | 0.90 | – |", rows_[3])

    def test_trident_targets(self):
        class T:
            pm = "data"
            profiles = "matrix"
            peers = "rocksdb,rocksdb-tuned"
            index_types = "learned,binary"

        vs = compare.variants(T)
        learned, binary = "strata/matrix index=learned", "strata/matrix index=binary"
        gib = 2**30
        read = {"rocksdb": [{"ops_per_sec": 15000, "p99_us": 150.0, "index_dram_bytes": 16 * 2**20, "disk_bytes": 3 * gib}],
                "rocksdb-tuned": [{"ops_per_sec": 16000, "p99_us": 140.0, "disk_bytes": 3 * gib}],
                learned: [{"ops_per_sec": 26000, "p99_us": 90.0, "index_dram_bytes": 12 * 2**20, "table_index_dram_bytes": 2 * 2**20,
                           "disk_bytes": 6 * gib, "pm_file_disk_bytes": 4 * gib, "data_blocks_per_get": 1.0,
                           "data_blocks_read": 100, "data_blocks_from_file": 97, "learned_tables": 40, "binary_tables": 2}],
                binary: [{"ops_per_sec": 20000, "p99_us": 110.0, "index_dram_bytes": 40 * 2**20, "table_index_dram_bytes": 30 * 2**20,
                          "disk_bytes": 6 * gib, "pm_file_disk_bytes": 4 * gib}]}
        multi = {"rocksdb": [{"ops_per_sec": 20000}], learned: [{"ops_per_sec": 60000, "p99_us": 900.0}],
                 binary: [{"ops_per_sec": 30000}]}
        seek = {"rocksdb": [{"ops_per_sec": 5000}], learned: [{"ops_per_sec": 8000, "p99_us": 300.0}]}
        table = [({"title": "t"}, {("fillrandom", "fillrandom"): {}, ("readrandom", "readrandom"): read,
                                   ("multireadrandom (batch 32)", "multireadrandom"): multi, ("seekrandom", "seekrandom"): seek})]
        run = {"variant": learned, "steps": [{"step": "readrandom", "result": {"page_cache_dropped": True}},
                                             {"step": "seekrandom", "result": {"page_cache_dropped": True}},
                                             {"step": "fillrandom", "result": {}}]}
        data = {"groups": [{"runs": [run]}],
                "engines": {"rocksdb": {"build": "release, NDEBUG (assertions off), compiled as `c++ -O3 -DNDEBUG=1`"}}}
        text = "\n".join(compare.trident_targets(table, vs, data, 64 << 20))
        self.assertIn("through a 64 MiB block cache", text)
        self.assertIn("done before all 2 read steps.", text)
        self.assertIn("This RocksDB build has neither (its `engine_build`): its MultiGet read each batch's blocks "
                      "synchronously, one after another.", text)
        target = [x for x in text.splitlines() if x.startswith("| strata/")]
        self.assertEqual(len(target), 3)  # one targets row (learned), two figure rows
        t = target[0].split(" | ")
        self.assertEqual(t[0], "| " + learned)
        self.assertEqual(t[1], "1.30× strata/matrix index=binary ✓")
        self.assertEqual(t[2], "1.62× rocksdb-tuned ✓")  # against the better RocksDB row
        # Tables only (6 GiB on disk less the 4 GiB PM region): 1 vs 15 MiB per GiB of table indexes.
        self.assertEqual(t[3], "1.00 vs 15.00 MiB/GiB (index; strata/matrix index=binary, ×0.07) ✓")
        self.assertEqual(t[4], "2.31× readrandom ✓ |")
        fig = next(x for x in target if x.startswith(f"| {learned} | 26,000"))
        self.assertEqual(fig, f"| {learned} | 26,000 | 90.0 | 60,000 | 900.0 | 8,000 | 300.0 | 1.000 | 97% | – | 12.0 | 6.00 "
                              "| 2.0 | 2.00 | 40 / 2 |")
        self.assertIn("| rocksdb | 15,000 | 150.0 | 20,000 | – | 5,000 | – | – | – | – | 16.0 | 5.33 | – | 3.00 | – |", text)
        # Without the split figures: index + filter, both rows alike; a slower learned index fails its bars.
        for r in (read[learned][0], read[binary][0]):
            del r["table_index_dram_bytes"]
        read[learned][0]["ops_per_sec"] = 21000
        multi[learned][0]["ops_per_sec"] = 30000
        t = next(x for x in compare.trident_targets(table, vs, data, 64 << 20) if x.startswith("| strata/")).split(" | ")
        self.assertEqual(t[1], "1.05× strata/matrix index=binary ✗")
        self.assertEqual(t[2], "1.31× rocksdb-tuned ✗")
        self.assertEqual(t[3], "6.00 vs 20.00 MiB/GiB (index + filter; strata/matrix index=binary, ×0.30) ✗")
        self.assertEqual(t[4], "1.43× readrandom ✗ |")
        # The filters reported apart are subtracted; one row without them: compared as index + filter.
        read[learned][0]["filter_dram_bytes"] = 10 * 2**20
        read[binary][0]["filter_dram_bytes"] = 10 * 2**20
        t = next(x for x in compare.trident_targets(table, vs, data, 64 << 20) if x.startswith("| strata/")).split(" | ")
        self.assertIn("1.00 vs 15.00 MiB/GiB (index;", t[3])
        del read[binary][0]["filter_dram_bytes"]
        t = next(x for x in compare.trident_targets(table, vs, data, 64 << 20) if x.startswith("| strata/")).split(" | ")
        self.assertIn("6.00 vs 20.00 MiB/GiB (index + filter;", t[3])
        # A failed drop, a missing twin and no RocksDB are said, not guessed.
        run["steps"][1]["result"]["page_cache_dropped"] = False
        data["engines"] = {}
        del read[binary]
        text = "\n".join(compare.trident_targets(table, [v for v in vs if v.peer is False], data))
        self.assertIn("it FAILED before 1 of 2 read steps", text)
        self.assertIn("through a small block cache", text)
        self.assertIn("No RocksDB row ran.", text)
        t = next(x for x in text.splitlines() if x.startswith("| strata/")).split(" | ")
        self.assertEqual(t[1:4], ["–", "–", "–"])

    def test_crosscheck_rows(self):
        table = [({"title": "g"}, {("readrandom", "readrandom"): row(**{"rocksdb": [200], "db_bench 7.8.3": [100]}),
                                   ("ycsb", "ycsba"): row(**{"rocksdb": [50]})})]
        self.assertEqual(compare.crosscheck_rows(table, self.vs), [("g", "readrandom", "readrandom", 200, 100, 2.0)])


class ListdbRunTest(unittest.TestCase):
    """The listdb suite through run_suite and run_step, the processes faked."""

    def setUp(self):
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.real = {k: getattr(compare, k) for k in ("run_step", "cpu_floors", "run_process")}

    def tearDown(self):
        for k, v in self.real.items():
            setattr(compare, k, v)
        self.tmp.cleanup()

    def args(self, **kw):
        a = dict(suite="listdb", num=1000, profiles=None, pm=None, cache_size=None, peers=None, strata_bin="/x/strata-bench",
                 rocksdb_bin="/x/rocks-bench", workdir=str(Path(self.tmp.name) / "w"), reps=1, only=None, keep_dirs=False,
                 keep_json=False, bloom_bits=10, write_buffer_size=64 << 20)
        a.update(kw)
        return type("Args", (), a)

    def test_factor_rows_run_their_group_only_and_the_report_has_the_listdb_tables(self):
        calls = []

        def fake_step(args, tools, v, g, st, dbdir, pmdir, first, rep):
            calls.append((g.title, v.label, st.label, pmdir))
            ops = {"rocksdb wal=shm": 100.0, "rocksdb wal=shm sync=1": 40.0}.get(v.label, 400.0)
            b = {"benchmark": st.benchmarks.split(",")[0], "ops_per_sec": ops, "message": ""}
            return {"wall_s": 1.0, "proc_write_bytes": 0, "peak_rss_bytes": 0, "benchmarks": [b]}

        def no_floors(*_a):
            raise AssertionError("listdb runs no cpufloor")

        compare.run_step, compare.cpu_floors = fake_step, no_floors
        args = self.args()
        data, vs, _ = compare.run_suite(args)
        factors = [v.label for v in compare.listdb_factor_variants()]
        self.assertEqual([v.label for v in vs][-4:], factors)
        by_group = {}
        for title, label, _step, _pm in calls:
            by_group.setdefault(title, set()).add(label)
        titles = [g["title"] for g in data["groups"]]
        self.assertEqual(len(titles), 8)
        main = {v.label for v in vs} - set(factors)
        self.assertEqual(len(main), 6)
        for t in titles[:7]:
            self.assertEqual(by_group[t], main)
        self.assertEqual(by_group[titles[7]], set(factors))
        # Every RocksDB row gets a /dev/shm directory for its WAL.
        self.assertTrue(all(pm and str(pm).startswith("/dev/shm/") for _t, label, _s, pm in calls if label.startswith("rocksdb")))
        self.assertEqual(data["cpu_floor"], {})

        md = compare.markdown(data, vs, args, "test machine")
        self.assertIn("## ListDB targets", md)
        self.assertIn("4.00× rocksdb wal=shm ✓", md)  # fillrandom >= 3x, readrandom >= 1.5x
        self.assertIn("| 10.00× rocksdb wal=shm sync=1 |", md)
        self.assertIn("## Factor analysis: ListDB factors (pm-only, PM on /dev/shm): 1,000 keys x 100 B, 1 thread", md)
        self.assertIn("Where StrataKV's PM file lived (and RocksDB's WAL, where a row moves it).", md)
        self.assertIn("- `rocksdb wal=shm sync=1`: WAL on /dev/shm (`--wal_dir`), tables in the data directory; every write synced", md)
        self.assertNotIn("Issue 26 targets", md)

    def test_run_step_pm_bytes_per_user_byte(self):
        import json

        def fake_process(cmd, env=None, timeout=None):
            j = next(c for c in cmd if str(c).startswith("--json=")).split("=", 1)[1]
            Path(j).write_text(json.dumps({"engine": "x", "benchmarks": [{"benchmark": "fillrandom", "pm_bytes_written": 139200}]}))
            out = "fillrandom   :       2.000 micros/op 500000 ops/sec 0.002 seconds 1000 operations;"
            return compare.Run(cmd, 0, 0.1, out, 0, 0, 0)

        compare.run_process = fake_process
        g = compare.listdb_group(1000, 100, 2, 100)
        db = Path(self.tmp.name) / "db"
        tools = {"strata_bench": "/x/strata-bench", "rocks_bench": "/x/rocks-bench"}
        pm_only = compare.listdb_factor_variants()[0]
        info = compare.run_step(self.args(cache_size=1 << 30), tools, pm_only, g, g.steps[0], db, None, True, 0)
        self.assertIn("--threads=2", info["cmd"])
        self.assertIn("--writes=500", info["cmd"])
        self.assertAlmostEqual(info["benchmarks"][0]["pm_write_amp"], 139200 / (1000 * 116))
        rocks = compare.peer_variants()["rocksdb-shmwal"]
        info = compare.run_step(self.args(cache_size=1 << 30), tools, rocks, g, g.steps[0], db, Path(self.tmp.name) / "wal", True, 0)
        self.assertNotIn("pm_write_amp", info["benchmarks"][0])
        self.assertIn(f"--wal_dir={Path(self.tmp.name) / 'wal'}", info["cmd"])


class TridentRunTest(unittest.TestCase):
    """The trident suite through run_suite and run_step, the processes and the
    page-cache drops faked."""

    def setUp(self):
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.real = {k: getattr(compare, k) for k in ("run_process", "cpu_floors", "drop_page_cache")}

    def tearDown(self):
        for k, v in self.real.items():
            setattr(compare, k, v)
        self.tmp.cleanup()

    def test_cold_reads_and_the_report(self):
        import json

        events = []
        ops = {"fillrandom": {"learned": 90000, "binary": 90000, "rocksdb": 80000},
               "readrandom": {"learned": 26000, "binary": 20000, "rocksdb": 16000},
               "multireadrandom": {"learned": 60000, "binary": 40000, "rocksdb": 20000},
               "seekrandom": {"learned": 9000, "binary": 8000, "rocksdb": 7000}}

        def fake_drop():
            events.append(("drop",))
            return None if len([e for e in events if e[0] == "drop"]) != 2 else "PermissionError: not root"

        def fake_process(cmd, env=None, timeout=None):
            cmd = [str(c) for c in cmd]
            flags = dict(c[2:].split("=", 1) for c in cmd[1:] if c.startswith("--") and "=" in c)
            bench = flags["benchmarks"].split(",")[0]
            who = flags.get("index_type", flags.get("engine"))
            events.append(("run", who, bench, cmd))
            db = Path(flags["db"])
            (db / "pm").mkdir(parents=True, exist_ok=True)
            (db / "000001.sst").write_bytes(b"x" * (1 << 20))
            doc = {"engine": "rocksdb" if who == "rocksdb" else "strata/matrix", "engine_version": "v",
                   "engine_build": "release, NDEBUG (assertions off), compiled as `c++ -O3 -DNDEBUG=1`",
                   "benchmarks": [{"benchmark": bench, "index_dram_bytes": 4096}]}
            if who != "rocksdb":
                (db / "pm" / "strata.pm").write_bytes(b"p" * (1 << 20))  # left out of the data
                doc["benchmarks"][0].update(table_index_dram_bytes=512 if who == "learned" else 3072, data_blocks_per_get=1.0,
                                            learned_tables=3 if who == "learned" else 0, binary_tables=0 if who == "learned" else 3)
            Path(flags["json"]).write_text(json.dumps(doc))
            n = ops[bench][who]
            out = (f"{bench:<12} : {1e6 / n:.3f} micros/op {n} ops/sec 1.000 seconds {n} operations; (1 of 1 found)\n"
                   "Microseconds per read:\nCount: 1 Average: 1.0  StdDev: 0.00\nMin: 1  Median: 1.0  Max: 700\n"
                   "Percentiles: P50: 40.00 P75: 50.00 P99: 120.00 P99.9: 300.00 P99.99: 700.00\n")
            return compare.Run(cmd, 0, 1.0, out, 0, 0, 0)

        def no_floors(*_a):
            raise AssertionError("trident runs no cpufloor")

        compare.run_process, compare.cpu_floors, compare.drop_page_cache = fake_process, no_floors, fake_drop
        a = dict(suite="trident", num=1000, reads=None, profiles=None, pm=None, cache_size=None, peers=None, index_types=None,
                 strata_bin="/x/strata-bench", rocksdb_bin="/x/rocks-bench", workdir=str(Path(self.tmp.name) / "w"), reps=1,
                 only=None, keep_dirs=False, keep_json=False, bloom_bits=10, write_buffer_size=64 << 20)
        args = type("Args", (), a)
        data, vs, _ = compare.run_suite(args)
        self.assertEqual([v.label for v in vs], ["rocksdb", "strata/sstable index=learned", "strata/sstable index=binary"])
        runs = [e for e in events if e[0] == "run"]
        self.assertEqual(len(runs), 12)
        # Each read step (and only those) comes right after a drop of the page cache.
        for i, e in enumerate(events):
            if e[0] == "run":
                self.assertEqual(events[i - 1][0] == "drop", e[2] != "fillrandom", e[1:3])
        for _, who, bench, cmd in runs:
            self.assertIn("--cache_size=67108864", cmd)
            self.assertIn("--threads=1", cmd)
            self.assertEqual("--use_direct_reads=1" in cmd, bench != "fillrandom")
            self.assertEqual("--use_existing_db=1" in cmd, bench != "fillrandom")
            if who in ("learned", "binary"):
                self.assertIn(f"--index_type={who}", cmd)
            if bench == "multireadrandom":
                self.assertTrue({"--batch_size=32", "--multiread_batched=1", "--async_io=1"} <= set(cmd))
            if bench == "seekrandom":
                self.assertIn("--seek_nexts=0", cmd)
        self.assertEqual([e[1] for e in runs[:4]], ["rocksdb"] * 4)
        self.assertEqual(data["cpu_floor"], {})
        steps = [st for r in data["groups"][0]["runs"] for st in r["steps"]]
        self.assertEqual([st["result"].get("page_cache_dropped") for st in steps[:4]], [None, True, False, True])
        learned = data["groups"][0]["runs"][1]["steps"][1]["result"]["benchmarks"][0]
        self.assertEqual((learned["learned_tables"], learned["binary_tables"], learned["table_index_dram_bytes"]), (3, 0, 512))

        md = compare.markdown(data, vs, args, "test machine")
        self.assertIn("## Issue 28 targets", md)
        self.assertIn("it FAILED before 1 of 9 read steps", md)
        self.assertIn("This RocksDB build has neither", md)
        target = next(x for x in md.splitlines() if x.startswith("| strata/sstable index=learned | 1.30×"))
        self.assertIn("1.30× strata/sstable index=binary ✓", target)
        self.assertIn("1.62× rocksdb ✓", target)
        # 512 vs 3072 B of table indexes over the same 1 MiB of table files (the PM region file left out).
        self.assertIn("0.50 vs 3.00 MiB/GiB (index; strata/sstable index=binary, ×0.17) ✓", target)
        self.assertIn("2.31× readrandom ✓", target)
        self.assertIn("| strata/sstable index=binary | 20,000 | 120.0 | 40,000 | 120.0 | 8,000 | 120.0 | 1.000 |", md)
        self.assertIn("| multireadrandom (batch 32) | multireadrandom | strata/sstable index=learned | 60,000 |", md)
        self.assertNotIn("Issue 26 targets", md)


class QadTest(unittest.TestCase):
    """The qad suite: its groups, defaults, a run through run_suite and
    run_step with the processes faked, and its report."""

    def setUp(self):
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.real = {k: getattr(compare, k) for k in ("run_process", "cpu_floors")}

    def tearDown(self):
        for k, v in self.real.items():
            setattr(compare, k, v)
        self.tmp.cleanup()

    def test_qad_suite(self):
        groups = compare.suites()["qad"]
        self.assertEqual(len(groups), 3)
        for g, method in zip(groups, ("drop", "range", "point")):
            self.assertEqual((g.num, g.value_size), (2_000_000, 1024))
            self.assertIn(f"QAD {method}:", g.title)
            layout = "--partitions=16" if method == "drop" else "--key_ranges=16"
            self.assertEqual(g.extra, ["--threads=1", layout])
            fill, warm, before, after = g.steps
            self.assertEqual(fill.benchmarks, "fillrandom,waitforcompaction,stats,levelstats")
            self.assertEqual((warm.benchmarks, warm.flags), ("readrandom", ["--reads=200000", "--seed=7", "--read_keys=survivors"]))
            self.assertEqual(before.benchmarks, "readrandom,seekrandom")
            self.assertEqual(after.benchmarks, f"deletehalf_{method},readrandom,seekrandom")
            # Same reads before and after: the survivors, one seed (not the fill's).
            for st in (before, after):
                self.assertEqual(st.flags, ["--reads=200000", "--seek_nexts=0", "--seed=7", "--read_keys=survivors"])
        small = compare.suites(5000, 100_000)["qad"][0]
        self.assertEqual((small.num, small.steps[2].flags[0]), (5000, "--reads=5000"))

    def test_qad_defaults(self):
        A = type("A", (), {"profiles": None, "pm": None, "cache_size": None, "peers": None})
        compare.suite_defaults(A, "qad", False)
        self.assertEqual((A.profiles, A.pm, A.cache_size, A.peers), ("matrix", "data", 64 << 20, "rocksdb"))
        self.assertEqual([v.label for v in compare.variants(A)], ["rocksdb", "strata/matrix"])

    def test_qad_run_and_report(self):
        import json

        runs = []
        # ops/s per (engine, method, benchmark, after the delete?)
        rates = {"strata": {"readrandom": (100_000, 98_000), "seekrandom": (50_000, 49_000)},
                 "rocksdb": {"readrandom": (60_000, 40_000), "seekrandom": (30_000, 31_000)}}
        times = {"drop": (0.3, 0.1), "range": (2.0, 0.5), "point": (900.0, 12.0)}

        def fake_process(cmd, env=None, timeout=None):
            cmd = [str(c) for c in cmd]
            flags = dict(c[2:].split("=", 1) for c in cmd[1:] if c.startswith("--") and "=" in c)
            who = flags.get("engine", "strata")
            benches = flags["benchmarks"].split(",")
            runs.append((who, benches, cmd))
            after = benches[0].startswith("deletehalf_")
            lines, doc = [], []
            for b in benches:
                if b in ("waitforcompaction", "stats", "levelstats"):
                    continue
                if b.startswith("deletehalf_"):
                    m = b.split("_")[1]
                    total, longest = times[m]
                    if who == "rocksdb":
                        total, longest = total * 10, longest * 10
                    lines.append(f"{b} : 1.000 micros/op 8 ops/sec {total / 1e3:.3f} seconds 8 operations; (x)")
                    doc.append({"benchmark": b, "delete": {"method": m, "parts": 8, "total_ms": total, "longest_ms": longest,
                                                           "keys_deleted": 630 if m == "point" else None,
                                                           "range_tombstones": 8 if who == "strata" and m != "point" else None}})
                    continue
                n = rates[who][b][1 if after else 0] if b != "fillrandom" else 1000
                lines.append(f"{b:<12} : 1.000 micros/op {n} ops/sec 1.000 seconds {n} operations; (1 of 1 found)")
                doc.append({"benchmark": b})
            Path(flags["json"]).write_text(json.dumps({"engine": who, "engine_version": "v", "engine_build": "b",
                                                        "benchmarks": doc}))
            return compare.Run(cmd, 0, 1.0, "\n".join(lines) + "\n", 0, 0, 0)

        def no_floors(*_a):
            raise AssertionError("qad runs no cpufloor")

        compare.run_process, compare.cpu_floors = fake_process, no_floors
        a = dict(suite="qad", num=1000, reads=None, profiles=None, pm=None, cache_size=None, peers=None, index_types=None,
                 strata_bin="/x/strata-bench", rocksdb_bin="/x/rocks-bench", workdir=str(Path(self.tmp.name) / "w"), reps=1,
                 only=None, keep_dirs=False, keep_json=False, bloom_bits=10, write_buffer_size=64 << 20)
        args = type("Args", (), a)
        data, vs, _ = compare.run_suite(args)
        self.assertEqual(len(runs), 24)  # 3 methods x 2 engines x 4 steps
        for who, benches, cmd in runs:
            self.assertIn("--cache_size=67108864", cmd)
            if benches[0].startswith("deletehalf_"):
                self.assertIn("--read_keys=survivors", cmd)
                self.assertIn("--use_existing_db=1", cmd)
            group = next(c for c in cmd if c.startswith("--db=")).rsplit("/", 1)[1][:2]  # g0: drop, g1: range, g2: point
            self.assertIn("--partitions=16" if group == "g0" else "--key_ranges=16", cmd)
        after = data["groups"][0]["runs"][1]["steps"][3]["result"]["benchmarks"]
        self.assertEqual([b["benchmark"] for b in after], ["deletehalf_drop", "readrandom", "seekrandom"])
        self.assertEqual(after[0]["delete"]["longest_ms"], 0.1)

        md = compare.markdown(data, vs, args, "test machine")
        self.assertIn("## Issue 29 item 5 targets: query after delete", md)
        self.assertIn("| warm-up: readrandom (not a figure) | readrandom | strata/matrix | 100,000 |", md)
        rows = {(x.split(" | ")[0], x.split(" | ")[1]): x.split(" | ") for x in md.splitlines() if x.startswith("| strata/matrix | ")}
        drop = rows[("| strata/matrix", "drop")]
        self.assertEqual(drop[2:5], ["0.98 ✓", "0.98 ✓", "0.30 / 0.10 (< 10 ms each) ✓"])
        self.assertEqual(drop[5:], ["2.45× rocksdb ✓", "1.58× rocksdb ✓ |"])
        point = rows[("| strata/matrix", "point")]
        self.assertEqual(point[2:5], ["0.98 (no bar)", "0.98 (no bar)", "900.00 / 12.00"])
        self.assertIn("| drop | rocksdb | 3.00 | 1.00 | 8 partitions | 60,000 | 40,000 | 0.67 | 30,000 | 31,000 | 1.03 | – |", md)
        self.assertIn("| point | strata/matrix | 900.00 | 12.00 | 630 keys |", md)
        self.assertIn("| range | strata/matrix | 2.00 | 0.50 | 8 ranges |", md)

    def test_qad_targets_fail_and_missing(self):
        qad = compare.load_sibling("qad")

        class T:
            pm = "data"
            profiles = "matrix"
            peers = "rocksdb"

        vs = compare.variants(T)
        res = lambda ops: [{"ops_per_sec": ops}]  # noqa: E731
        rows = {(qad.BEFORE, "readrandom"): {"rocksdb": res(100), "strata/matrix": res(100)},
                (qad.BEFORE, "seekrandom"): {"strata/matrix": res(100)},
                (qad.AFTER, "deletehalf_drop"): {"strata/matrix": [{"delete": {"total_ms": 30.0, "longest_ms": 12.5}}]},
                (qad.AFTER, "readrandom"): {"rocksdb": res(100), "strata/matrix": res(90)},
                (qad.AFTER, "seekrandom"): {"strata/matrix": res(96)}}
        text = "\n".join(qad.targets([({"title": "t"}, rows)], vs))
        row = next(x for x in text.splitlines() if x.startswith("| strata/matrix | drop")).split(" | ")
        self.assertEqual(row[2:], ["0.90 ✗", "0.96 ✓", "30.00 / 12.50 (< 10 ms each) ✗", "0.90× rocksdb ✗", "– |"])
        self.assertIn("through a small block cache", text)


    def test_qad_after_before_pairs_each_repetition(self):
        qad = compare.load_sibling("qad")

        class T:
            pm = "data"
            profiles = "matrix"
            peers = "rocksdb"

        vs = compare.variants(T)
        res = lambda *ops: [{"ops_per_sec": x} for x in ops]  # noqa: E731
        # Medians 40 before, 30 after (0.75), but each repetition keeps 0.94, 0.71, 0.98 of its own rate.
        rows = {(qad.BEFORE, "readrandom"): {"strata/matrix": res(32, 41, 44)},
                (qad.BEFORE, "seekrandom"): {"strata/matrix": res(10, 10)},
                (qad.AFTER, "deletehalf_drop"): {"strata/matrix": [{"delete": {"total_ms": 3.0, "longest_ms": 1.0}}] * 3},
                (qad.AFTER, "readrandom"): {"strata/matrix": res(30.08, 29.11, 43.12)},
                (qad.AFTER, "seekrandom"): {"strata/matrix": res(9)}}  # a failed repetition: medians instead
        f = qad.figures(rows, "strata/matrix")
        self.assertEqual([round(x, 2) for x in f["read_reps"]], [0.94, 0.71, 0.98])
        self.assertAlmostEqual(f["read_kept"], 0.94)
        self.assertEqual((f["seek_kept"], f["seek_reps"]), (0.9, []))
        row = next(x for x in qad.targets([({"title": "t"}, rows)], vs) if x.startswith("| strata/matrix | drop")).split(" | ")
        self.assertEqual(row[2:4], ["0.94 (0.94, 0.71, 0.98) ✗", "0.90 ✗"])

class EngineRecordTest(unittest.TestCase):
    def test_strata_bench_json(self):
        doc = {"engine": "rocksdb", "engine_version": "11.8.1", "engine_build": "release, NDEBUG (assertions off), ...",
               "engine_settings": [{"name": "write_buffer_size", "value": "67108864", "default": "67108864"},
                                   {"name": "compression", "value": "none", "default": "snappy"}]}
        r = compare.engine_record(doc)
        self.assertEqual(r["version"], "11.8.1")
        self.assertTrue(r["build"].startswith("release, NDEBUG"))
        self.assertEqual(r["non_default"], ["compression=none (default snappy)"])

    def test_settings_a_later_step_changes_are_kept_with_its_name(self):
        tools = {}
        fill = {"engine": "rocksdb", "non_default": ["compression=none (default snappy)"]}
        compare.note_engine(tools, "rocksdb", fill, "fillrandom")
        read = {"engine": "rocksdb", "non_default": ["compression=none (default snappy)", "use_direct_reads=true (default false)"]}
        compare.note_engine(tools, "rocksdb", read, "readrandom")
        multi = {"engine": "rocksdb", "non_default": ["use_direct_reads=true (default false)", "async_io (reads)=true (default false)"]}
        compare.note_engine(tools, "rocksdb", multi, "multireadrandom (batch 32)")
        compare.note_engine(tools, "rocksdb", dict(read), "readrandom")  # the next repetition: nothing new
        self.assertEqual(tools["engines"]["rocksdb"]["non_default"],
                         ["compression=none (default snappy)", "use_direct_reads=true (default false) [readrandom]",
                          "async_io (reads)=true (default false) [multireadrandom (batch 32)]"])

    def test_db_bench_header(self):
        out = "RocksDB:    version 7.8.3\nAssertions are enabled; benchmarks unnecessarily slow\n"
        r = compare.db_bench_record(out, ["--compression_type=none", "--db=/x", "--seed=42", "--bloom_bits=10"])
        self.assertEqual(r["version"], "7.8.3")
        self.assertIn("assertions ENABLED", r["build"])
        self.assertEqual(r["non_default"][:2], ["--compression_type=none", "--bloom_bits=10"])

    def test_step_commands(self):
        from pathlib import Path
        tools = {"db_bench": "/usr/bin/db_bench", "strata_bench": Path("/t/release/strata-bench"),
                 "rocks_bench": Path("/t/rocksdb-release/release/strata-bench")}
        db = Path("/w/g0-x-r1")
        plain, ycsb = compare.Step("fill", "fillrandom"), compare.Step("y", "ycsba", ycsb=True)
        v = {x.label: x for x in compare.variants(RatioTest.A)}
        cmd, j = compare.step_command(tools, v["db_bench 7.8.3"], ["--num=1"], plain, db, None)
        self.assertEqual((cmd, j), (["/usr/bin/db_bench", "--num=1"], None))
        self.assertEqual(compare.step_command(tools, v["db_bench 7.8.3"], [], ycsb, db, None), (None, None))
        cmd, j = compare.step_command(tools, v["rocksdb-tuned"], ["--num=1"], ycsb, db, None)
        self.assertEqual(cmd[:3], ["/t/rocksdb-release/release/strata-bench", "--engine=rocksdb", "--num=1"])
        self.assertIn("--memtable_bloom_size_ratio=0.1", cmd)
        self.assertTrue(cmd[-1].startswith("--json="))
        cmd, _ = compare.step_command(tools, v["fjall"], ["--num=1"], plain, db, None)
        self.assertEqual(cmd[:2], ["/t/release/strata-bench", "--engine=fjall"])
        cmd, _ = compare.step_command(tools, v["strata/matrix"], ["--num=1"], plain, db, Path("/dev/shm/p"))
        self.assertIn("--profile=matrix", cmd)
        self.assertIn("--pm_dir=/dev/shm/p", cmd)
        self.assertFalse(any(c.startswith("--wal_dir") for c in compare.step_command(tools, v["rocksdb"], [], plain, db, None)[0]))
        # RocksDB with its WAL on /dev/shm, as is and synced.
        peers = compare.peer_variants()
        cmd, _ = compare.step_command(tools, peers["rocksdb-shmwal-sync"], ["--num=1"], plain, db, Path("/dev/shm/w"))
        self.assertEqual(cmd[:3], ["/t/rocksdb-release/release/strata-bench", "--engine=rocksdb", "--num=1"])
        self.assertEqual(cmd[3:5], ["--sync=1", "--wal_dir=/dev/shm/w"])
        cmd, _ = compare.step_command(tools, peers["rocksdb-shmwal"], [], ycsb, db, Path("/dev/shm/w"))
        self.assertIn("--wal_dir=/dev/shm/w", cmd)
        self.assertNotIn("--sync=1", cmd)
        self.assertEqual(compare.step_command({"strata_bench": "x"}, v["rocksdb"], [], plain, db, None), (None, None))

    def test_rocks_build_env_links_nothing_from_the_system(self):
        import os
        os.environ["ROCKSDB_LIB_DIR"] = "/usr/lib/x86_64-linux-gnu"
        try:
            env = compare.rocks_build_env()
        finally:
            del os.environ["ROCKSDB_LIB_DIR"]
        self.assertNotIn("ROCKSDB_LIB_DIR", env)
        self.assertEqual(env["CXXFLAGS"], "-march=native")
        self.assertEqual(env["CC_ENABLE_DEBUG_OUTPUT"], "1")
        self.assertTrue(env["CARGO_TARGET_DIR"].endswith("rocksdb-release"))
        self.assertIn("--features", compare.rocks_build_command())


class MarkdownTest(unittest.TestCase):
    def test_report_names_peers_settings_and_crosscheck(self):
        class A:
            pm = "data"
            profiles = "matrix"
            peers = "rocksdb,rocksdb-tuned,fjall,db_bench"
            reps = 1
            workdir = None
            cache_size = 1 << 30
            bloom_bits = 10
            write_buffer_size = 64 << 20
            rocksdb_runner = True

        vs = compare.variants(A)

        def run(label, ops):
            b = {"benchmark": "fillrandom", "ops_per_sec": ops, "p999_us": 50.0, "message": ""}
            return {"variant": label, "steps": [{"step": "fillrandom", "result": {
                "wall_s": 1.0, "proc_write_bytes": 0, "peak_rss_bytes": 0, "benchmarks": [b]}}]}

        data = {"suite": "matrix", "started": "now", "elapsed_s": 60.0, "rocksdb_assertions": True,
                "groups": [{"title": "g", "runs": [run("rocksdb", 100.0), run("rocksdb-tuned", 120.0), run("fjall", 60.0),
                                                    run("db_bench 7.8.3", 80.0), run("strata/matrix", 240.0)]}],
                "engines": {"rocksdb": {"engine": "rocksdb", "version": "11.8.1", "build": "release, NDEBUG",
                                        "non_default": ["compression=none (default snappy)"]}}}
        md = compare.markdown(data, vs, A, "test machine")
        self.assertIn("2.00× rocksdb-tuned", md)
        self.assertIn("strongest peer", md)
        self.assertIn("rocksdb 11.8.1; build: release, NDEBUG", md)
        self.assertIn("`compression=none (default snappy)`", md)
        self.assertIn("`fjall`: did not run.", md)
        self.assertIn("Tuned fairly", md)
        self.assertIn("| g | fillrandom | fillrandom | 100 | 80 | 1.25 |", md)
        self.assertIn("Issue 4 targets", md)
        self.assertIn("2.00× rocksdb-tuned ✓", md)
        self.assertNotIn("Pictures", md)

        # Pictures: linked under their group's table.
        pics = {"groups": {0: [("timeline", "s-0-timeline.png"), ("size", "s-0-size.png")]}, "note": None}
        md = compare.markdown(data, vs, A, "test machine", pics)
        self.assertIn("**Pictures** (under each group's table", md)
        after_table = md.split("## g\n", 1)[1]
        self.assertIn("![throughput per second](s-0-timeline.png)", after_table)
        self.assertIn("![disk space](s-0-size.png)", after_table)
        # Without matplotlib: said so, and how to get them.
        md = compare.markdown(data, vs, A, "test machine", {"groups": {}, "note": "skipped: matplotlib is not installed"})
        self.assertIn("**Pictures.** skipped: matplotlib is not installed", md)
        self.assertNotIn("![", md)

    def test_draw_pictures_without_matplotlib_says_how(self):
        import tempfile

        real = compare.load_plot

        class NoMatplotlib:
            @staticmethod
            def available():
                return False

            @staticmethod
            def plot_file(*_a, **_k):
                raise AssertionError("must not draw without matplotlib")

        class Broken(NoMatplotlib):
            @staticmethod
            def available():
                return True

            @staticmethod
            def plot_file(*_a, **_k):
                raise ValueError("odd data")

        try:
            with tempfile.TemporaryDirectory() as d:
                compare.load_plot = NoMatplotlib
                pics = compare.draw_pictures(Path(d) / "r.json", d)
                self.assertEqual(pics["groups"], {})
                self.assertIn("pip install matplotlib", pics["note"])
                self.assertIn("bench/plot ", pics["note"])
                self.assertIn("r.json", pics["note"])
                compare.load_plot = Broken
                pics = compare.draw_pictures(Path(d) / "r.json", d)
                self.assertIn("ValueError: odd data", pics["note"])
        finally:
            compare.load_plot = real
        self.assertTrue(hasattr(compare.load_plot(), "plot_file"))


if __name__ == "__main__":
    unittest.main()
