#!/usr/bin/env python3
"""Unit tests of bench/server/report.py: YCSB outputs of several
alternating repetitions give median throughputs, each repetition's ratio
and CPU per operation, and a single run keeps its plain file names."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402


def ycsb_output(throughput, read_p99, runtime_ms=2000):
    return (f"[OVERALL], RunTime(ms), {runtime_ms}\n"
            f"[OVERALL], Throughput(ops/sec), {throughput}\n"
            f"[READ], AverageLatency(us), 300.5\n"
            f"[READ], 99thPercentileLatency(us), {read_p99}\n")


class YcsbTable(unittest.TestCase):
    def write(self, d, name, throughput, p99=1000, ticks=None):
        with open(os.path.join(d, name), "w") as f:
            f.write(ycsb_output(throughput, p99))
        if ticks is not None:
            with open(os.path.join(d, name + ".cpu"), "w") as f:
                f.write(f"ticks={ticks} hz=100\n")

    def row(self, table, wl):
        for line in table.splitlines():
            if line.startswith(f"| {wl} |"):
                return [c.strip() for c in line.strip("|").split("|")]
        self.fail(f"no row for {wl} in\n{table}")

    def test_medians_of_alternating_repetitions_and_each_ratio(self):
        with tempfile.TemporaryDirectory() as d:
            # Three repetitions: the middle strata run is the median (110),
            # redis's median is 100; each repetition's own ratio is listed.
            for rep, (r, s) in enumerate([(100, 90), (90, 110), (120, 130)], start=1):
                sfx = "" if rep == 1 else f"-r{rep}"
                self.write(d, f"ycsb-a-redis{sfx}.txt", r, ticks=20)
                self.write(d, f"ycsb-a-strata{sfx}.txt", s, ticks=10)
            table = report.ycsb_table(d)
            row = self.row(table, "a")
            self.assertEqual(row[1], "100")
            self.assertEqual(row[2], "110")
            self.assertEqual(row[3], "1.10")
            # 20 ticks of 10 ms over 2 s x 100 ops/s = 200 ops: 1000 us/op.
            self.assertEqual(row[6], "1000.0")
            self.assertEqual(row[9], "0.90, 1.22, 1.08")
            self.assertIn("median of 3 alternating repetitions", table)

    def test_a_single_run_keeps_the_old_table(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "ycsb-load-redis.txt", 200)
            self.write(d, "ycsb-load-strata.txt", 250)
            table = report.ycsb_table(d)
            row = self.row(table, "load")
            self.assertEqual(row[3], "1.25")
            self.assertEqual(len(row), 9, "no per-repetition column")
            self.assertEqual(row[6:9], ["-", "-", "-"], "no CPU files: no CPU figures")


class RbTable(unittest.TestCase):
    HEADER = '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"\n'

    def write(self, d, name, rps, p99):
        with open(os.path.join(d, f"rb-{name}.csv"), "w") as f:
            f.write(self.HEADER + f'"SET","{rps}","1","0.1","1","2","{p99}","9"\n')

    def test_repetitions_give_medians_and_each_ratio(self):
        with tempfile.TemporaryDirectory() as d:
            for rep, (r, s) in enumerate([(100, 95), (90, 120), (110, 108)], start=1):
                sfx = "" if rep == 1 else f"-r{rep}"
                self.write(d, f"redis{sfx}", r, 2.0)
                self.write(d, f"strata{sfx}", s, 1.0)
            table = report.rb_table(d, [("durable", "redis", "strata")])
            self.assertIn("median of 3 alternating repetitions", table)
            row = [c.strip() for c in table.splitlines()[-1].strip("|").split("|")]
            # Medians: redis 100, strata 108; each repetition's own ratio.
            self.assertEqual(row[:4], ["SET", "100", "108", "1.08"])
            self.assertEqual(row[-1], "0.95, 1.33, 0.98")
            # A single strata run against redis's repetitions: medians only.
            table = report.rb_table(d, [("ceiling", "redis", "strata-r2")])
            self.assertIn("medians of 3 redis and 1 strata runs", table)
            self.assertNotIn("each repetition", table)

    def test_a_single_run_keeps_the_old_table(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "redis", 100, 2.0)
            self.write(d, "strata", 90, 1.0)
            table = report.rb_table(d, [("plain", "redis", "strata")])
            self.assertNotIn("median", table)
            row = [c.strip() for c in table.splitlines()[-1].strip("|").split("|")]
            self.assertEqual(row, ["SET", "100", "90", "0.90", "2.000", "1.000", "0.50"])


if __name__ == "__main__":
    unittest.main()
