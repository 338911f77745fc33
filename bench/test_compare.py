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
        self.assertEqual(set(s), {"smoke", "quick", "standard", "matrix"})
        matrix = s["matrix"][0]
        self.assertGreaterEqual(matrix.num * (16 + matrix.value_size), 4 * 2**30)
        self.assertTrue(all(st.ycsb for st in s["standard"][2].steps))
        small = compare.suites(5000)
        for g in small["standard"]:
            self.assertEqual(g.num, 5000)

        class A:
            pm = "data,shm,shm300"
            profiles = "sstable,matrix"

        vs = compare.variants(A)
        self.assertEqual(vs[0].engine, "rocksdb")
        self.assertEqual(len(vs), 7)
        self.assertIn("--pm_write_latency_ns=300", vs[-1].flags)
        self.assertEqual(vs[-1].pm_where, "shm")


if __name__ == "__main__":
    unittest.main()
