#!/usr/bin/env python3
"""Unit tests of bench/server/report_matrix.py (matrix.sh's report): the
medians over alternating repetitions, the ratios of the medians and of each
repetition, CPU per request, memory, and the goals' met / not met lines
computed from the numbers. Standard library only; no server is started."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_matrix  # noqa: E402

RB_HEADER = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",'
             '"p95_latency_ms","p99_latency_ms","max_latency_ms"\n')
TESTS = report_matrix.TESTS


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def sfx(rep):
    return "" if rep == 1 else f"-r{rep}"


def rb_csv(rps, p99, overrides=None):
    """A redis-benchmark --csv output with every test at rps and p99 ms,
    but for overrides {test: (rps, p99)}."""
    rows = []
    for t in TESTS:
        r, p = (overrides or {}).get(t, (rps, p99))
        rows.append(f'"{t}","{r}","1.0","0.1","0.9","1.5","{p}","9.0"\n')
    return RB_HEADER + "".join(rows)


def run(d, name, rep, rps, p99=1.0, ticks=10, requests=1000, mem=None, overrides=None):
    write(d, f"rb-{name}{sfx(rep)}.csv", rb_csv(rps, p99, overrides))
    write(d, f"cpu-{name}{sfx(rep)}.txt", f"ticks={ticks} child_ticks=0 hz=100 requests={requests}\n")
    mem = mem or {"VmRSS": 20480, "RssAnon": 10240, "RssFile": 10240, "RssShmem": 0}
    write(d, f"mem-{name}{sfx(rep)}.txt", " ".join(f"{k}={v}" for k, v in mem.items()) + "\n")


def table_row(text, label):
    for line in text.splitlines():
        if line.startswith(f"| {label} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {label!r} in\n{text}")


def line_starting(text, start):
    for line in text.splitlines():
        if line.startswith(start):
            return line
    raise AssertionError(f"no line {start!r} in\n{text}")


class Matrix(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def three_reps(self):
        """-P 16 in three repetitions: strata's LPOP is slower than Valkey's."""
        strata, valkey, redis = [200, 180, 220], [100, 120, 110], [50, 100, 90]
        for rep in (1, 2, 3):
            run(self.d, "strata-P16", rep, strata[rep - 1], ticks=[12, 10, 11][rep - 1],
                overrides={"LPOP": (90 + rep, 1.0)})
            run(self.d, "valkey-P16", rep, valkey[rep - 1], ticks=10)
            run(self.d, "redis-P16", rep, redis[rep - 1], ticks=20)

    def test_medians_and_ratios_of_each_repetition(self):
        self.three_reps()
        text = report_matrix.pipeline_section(self.d, 16)
        self.assertIn("median of 3 alternating repetitions", text)
        row = table_row(text, "SET")
        self.assertEqual(row[1:4], ["200", "110", "90"])
        self.assertEqual(row[4:], ["1.82", "2.00, 1.50, 2.00", "2.22", "4.00, 1.80, 2.44"])
        self.assertEqual(table_row(text, "MSET (10 keys)")[1:4], ["200", "110", "90"])
        self.assertEqual(table_row(text, "LPOP")[1], "92")
        # CPU per request: ticks / 100 Hz / 1000 requests, in µs.
        cpu = [r for r in text.splitlines() if r.startswith("| strata | ")][-1].strip("|").split("|")
        self.assertEqual([c.strip() for c in cpu[1:3]], ["110.00", "120.00, 100.00, 110.00"])
        self.assertEqual(line_starting(text, "- CPU per request strata/valkey"),
                         "- CPU per request strata/valkey: **1.10** (each repetition: 1.20, 1.00, 1.10;"
                         " lower is better)")
        self.assertIn("**0.55**", line_starting(text, "- CPU per request strata/redis"))
        self.assertEqual(report_matrix.pipeline_section(self.d, 1), "", "no -P 1 files: no -P 1 section")

    def test_a_missing_repetition_is_left_out_of_the_pairs(self):
        run(self.d, "strata-P1", 1, 100)
        run(self.d, "strata-P1", 2, 300)
        run(self.d, "valkey-P1", 2, 150)
        row = table_row(report_matrix.pipeline_section(self.d, 1), "GET")
        self.assertEqual(row[1:3], ["200", "150"])
        self.assertEqual(row[4:6], ["1.33", "2.00"])
        self.assertEqual(row[3], "-")

    def test_goals_from_the_numbers(self):
        self.three_reps()
        for rep in (1, 2, 3):
            # -P 1: strata faster everywhere, p99 half of Valkey's but GET's.
            run(self.d, "strata-P1", rep, 50, p99=1.0, overrides={"GET": (50, 3.0)})
            run(self.d, "valkey-P1", rep, 40, p99=2.0)
            run(self.d, "durable-strata", rep, 130)
            run(self.d, "durable-valkey", rep, 100)
        run(self.d, "rss-strata", 1, 500, mem={"VmRSS": 409600, "RssAnon": 204800, "RssFile": 204800,
                                              "RssShmem": 0, "dbsize": 99000})
        run(self.d, "rss-valkey", 1, 500, mem={"VmRSS": 112640, "RssAnon": 102400, "RssFile": 10240,
                                              "RssShmem": 0, "dbsize": 99000})
        text = report_matrix.goals_section(self.d)
        self.assertEqual(line_starting(text, "- every command >= 1.0x Valkey's req/s at -P 16"),
                         "- every command >= 1.0x Valkey's req/s at -P 16: **not met** (lowest: LPOP 0.84;"
                         " below: LPOP 0.84)")
        self.assertEqual(line_starting(text, "- every command >= 1.0x Valkey's req/s at -P 1:"),
                         "- every command >= 1.0x Valkey's req/s at -P 1: **met** (lowest: SET 1.25)")
        self.assertEqual(line_starting(text, "- CPU per request"),
                         "- CPU per request <= 1.2x Valkey's at -P 16: **met** (1.10: strata 110.00 µs,"
                         " valkey 100.00 µs)")
        self.assertEqual(line_starting(text, "- RSS anon"),
                         "- RSS anon after the keys <= 2.0x Valkey's: **met** (2.00: strata 200.00 MB,"
                         " valkey 100.00 MB)")
        self.assertIn("**not met** (3.64:", line_starting(text, "- RSS total"))
        self.assertEqual(line_starting(text, "- p99 at -P 1"),
                         "- p99 at -P 1 <= 1.0x Valkey's, every command: **not met** (highest: GET 1.50;"
                         " above: GET 1.50)")
        self.assertEqual(line_starting(text, "- durable SET"),
                         "- durable SET >= 1.2x Valkey's req/s: **met** (1.30: strata 130 req/s, valkey 100 req/s)")
        rss = report_matrix.rss_section(self.d, "100000")
        self.assertEqual(table_row(rss, "strata")[1:6], ["99,000", "200.0", "400.0", "200.0", "0.0"])
        self.assertIn("RSS total strata/valkey: **3.64** (each repetition: 3.64;", rss)

    def test_no_data_and_a_missing_command(self):
        text = report_matrix.goals_section(self.d)
        self.assertEqual(text.count(": no data"), 7)
        # A command missing from strata's output cannot meet a per-command goal.
        run(self.d, "strata-P1", 1, 50, overrides={"ZADD": ("x", "x")})
        run(self.d, "valkey-P1", 1, 40)
        line = line_starting(report_matrix.goals_section(self.d), "- every command >= 1.0x Valkey's req/s at -P 1:")
        self.assertEqual(line, "- every command >= 1.0x Valkey's req/s at -P 1: **not met** (lowest: SET 1.25;"
                               " no data: ZADD)")

    def test_report_file_and_quick_note(self):
        write(self.d, "params.txt", "quick=1 n=20000 reps=1 reps_rss=1 rss_keys=100000 n_durable=5000\n")
        run(self.d, "durable-strata", 1, 130)
        run(self.d, "durable-valkey", 1, 100)
        run(self.d, "durable-redis", 1, 260)
        text = report_matrix.report(self.d)
        self.assertIn("not a measurement", text)
        self.assertIn("(-n 5000 -r 1000000 -P 16 -c 50)", text)
        self.assertIn("- SET strata/redis: **0.50** (each repetition: 0.50)", text)
        self.assertNotIn("## -P 16", text)


if __name__ == "__main__":
    unittest.main()
