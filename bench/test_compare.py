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
        self.assertEqual(set(s), {"smoke", "quick", "standard", "matrix", "slm", "crosscheck"})
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

    def test_crosscheck_rows(self):
        table = [({"title": "g"}, {("readrandom", "readrandom"): row(**{"rocksdb": [200], "db_bench 7.8.3": [100]}),
                                   ("ycsb", "ycsba"): row(**{"rocksdb": [50]})})]
        self.assertEqual(compare.crosscheck_rows(table, self.vs), [("g", "readrandom", "readrandom", 200, 100, 2.0)])


class EngineRecordTest(unittest.TestCase):
    def test_strata_bench_json(self):
        doc = {"engine": "rocksdb", "engine_version": "11.8.1", "engine_build": "release, NDEBUG (assertions off), ...",
               "engine_settings": [{"name": "write_buffer_size", "value": "67108864", "default": "67108864"},
                                   {"name": "compression", "value": "none", "default": "snappy"}]}
        r = compare.engine_record(doc)
        self.assertEqual(r["version"], "11.8.1")
        self.assertTrue(r["build"].startswith("release, NDEBUG"))
        self.assertEqual(r["non_default"], ["compression=none (default snappy)"])

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
