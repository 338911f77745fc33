#!/usr/bin/env python3
"""Unit tests of bench/server/report_repl.py (the replication benchmark's
report: medians over alternating repetitions, each repetition's ratio,
the full sync's verdict) and of repl_probe.py's measuring arithmetic and
RESP reader. Standard library only; no server is started."""
import json
import os
import socket
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import repl_probe  # noqa: E402
import report_repl  # noqa: E402

RB_HEADER = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",'
             '"p95_latency_ms","p99_latency_ms","max_latency_ms"\n')


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def sfx(rep):
    return "" if rep == 1 else f"-r{rep}"


def table_row(text, label):
    for line in text.splitlines():
        if line.startswith(f"| {label} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {label!r} in\n{text}")


def bullet(text, start):
    for line in text.splitlines():
        if line.startswith(f"- {start}"):
            return line
    raise AssertionError(f"no line {start!r} in\n{text}")


class Throughput(unittest.TestCase):
    def test_medians_ratios_per_repetition_catch_up_and_drops(self):
        with tempfile.TemporaryDirectory() as d:
            # req/s per repetition: (a) strata alone, (b) strata + replica,
            # (c) redis alone, (d) redis + replica.
            runs = {"strata-solo": [200, 180, 220], "strata-repl": [190, 150, 200],
                    "redis-solo": [100, 120, 110], "redis-repl": [95, 90, 300]}
            for name, values in runs.items():
                for rep, rps in enumerate(values, start=1):
                    write(d, f"rb-{name}-P16{sfx(rep)}.csv", RB_HEADER + f'"SET","{rps}","1","0","1","1","{rep}.5","9"\n')
            for kind, secs, drops in (("strata", [0.5, None, 0.1], [0, 2, 1]), ("redis", [0.01, 0.02, 0.03], [0, 0, 0])):
                for rep in (1, 2, 3):
                    write(d, f"catchup-{kind}-repl-P16{sfx(rep)}.json", json.dumps({"seconds": secs[rep - 1]}))
                    write(d, f"drops-{kind}-repl-P16{sfx(rep)}.txt", f"link_drops={drops[rep - 1]}\n")
            text = report_repl.throughput_section(d)
            self.assertIn("-P 16, 50 clients, median of 3 alternating repetitions", text)
            self.assertNotIn("-P 1,", text, "no -P 1 files: no -P 1 table")
            self.assertEqual(table_row(text, "(a) strata alone")[1:3], ["200", "2.500"])
            # The failed catch-up is left out of the median and counted.
            b = table_row(text, "(b) strata + strata replica")
            self.assertEqual(b[1], "190")
            self.assertEqual(b[3], "0.300 (1 never caught up)")
            self.assertEqual(b[4], "3")
            self.assertEqual(table_row(text, "(d) redis + redis replica")[1:], ["95", "2.500", "0.020", "0"])
            # Ratios of the medians, and each repetition's own ratio.
            self.assertEqual(bullet(text, "(b)/(a)"), "- (b)/(a): strata's cost of a replica: **0.95** "
                             "(each repetition: 0.95, 0.83, 0.91); meets the goal 0.9")
            self.assertEqual(bullet(text, "(b)/(d)"), "- (b)/(d): strata with a replica vs redis with a replica: "
                             "**2.00** (each repetition: 2.00, 1.67, 0.67); meets the goal 1.0")
            self.assertIn("**0.86**", bullet(text, "(d)/(c)"))
            self.assertNotIn("goal", bullet(text, "(d)/(c)"))

    def test_below_goal_and_no_files(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(report_repl.throughput_section(d), "")
            for name, rps in (("strata-solo", 100), ("strata-repl", 80), ("redis-solo", 100), ("redis-repl", 90)):
                write(d, f"rb-{name}-P1.csv", RB_HEADER + f'"SET","{rps}","1","0","1","1","1","9"\n')
            text = report_repl.throughput_section(d)
            self.assertIn("**0.80** (each repetition: 0.80); below the goal 0.9", text)
            self.assertIn("**0.89** (each repetition: 0.89); below the goal 1.0", text)
            self.assertNotIn("median of", text)


class Lag(unittest.TestCase):
    def lag(self, p50, p99, mx, byte_p99, byte_max, probes=100, missing=0, errors=()):
        return json.dumps({"probe_writes": probes, "missing": missing, "errors": list(errors),
                           "lag_ms": {"p50": p50, "p99": p99, "max": mx},
                           "byte_lag": {"p99": byte_p99, "max": byte_max}})

    def test_medians_and_max_over_repetitions(self):
        with tempfile.TemporaryDirectory() as d:
            for rep, (st, rd) in enumerate([((1.0, 4.0, 9.0, 100, 500), (0.5, 2.0, 3.0, 0, 10)),
                                            ((2.0, 8.0, 30.0, 300, 900), (0.7, 3.0, 4.0, 10, 20)),
                                            ((1.5, 6.0, 10.0, 200, 600), (0.6, 4.0, 50.0, 5, 30))], start=1):
                write(d, f"lag-strata{sfx(rep)}.json", self.lag(*st, missing=1 if rep == 2 else 0))
                write(d, f"lag-redis{sfx(rep)}.json", self.lag(*rd))
                write(d, f"ycsb-a-strata{sfx(rep)}.txt", f"[OVERALL], Throughput(ops/sec), {1000 * rep}\n")
                write(d, f"ycsb-a-redis{sfx(rep)}.txt", "[OVERALL], Throughput(ops/sec), 2000\n")
                write(d, f"drops-lag-strata{sfx(rep)}.txt", "link_drops=1\n")
            text = report_repl.lag_section(d)
            self.assertIn("median of 3 alternating repetitions", text)
            self.assertEqual(table_row(text, "strata"),
                             ["strata", "2,000", "1.50", "6.00", "30.0", "200", "900", "300", "1", "0", "3"])
            self.assertEqual(table_row(text, "redis")[1:7], ["2,000", "0.60", "3.00", "50.0", "5", "30"])
            self.assertEqual(table_row(text, "redis")[10], "0", "no drops files: none counted")
            self.assertIn("throughput strata/redis: **1.00** (each repetition: 0.50, 1.00, 1.50)", text)
            self.assertIn("lag p99 strata/redis: **2.00** (each repetition: 2.00, 2.67, 1.50;", text)

    def test_a_failed_probe_shows_as_missing_figures(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "lag-strata.json", "")
            text = report_repl.lag_section(d)
            self.assertEqual(table_row(text, "strata")[1:5], ["-", "-", "-", "-"])


class FullSync(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        write(self.d, "fullsync-params.txt", "limit_mb=256 data_mb=1024 value_bytes=1000 keys=1073741\n"
              "pm_mb=64 read_cache_mb=32 block_cache_mb=32 block_cache_flag=1 probe_rate=1000\n")
        write(self.d, "fullsync.json", json.dumps({
            "sync_started": 0.2, "link_up": 12.5, "caught_up": 13.0, "vm_hwm_kb": 200 * 1024,
            "peak_rss_kb_sampled": 190 * 1024, "cgroup_max_usage_bytes": 250 << 20,
            "cgroup_limit_bytes": 256 << 20, "cgroup_failcnt": 7, "cgroup_oom_kills": 0, "primary_alive": True}))
        write(self.d, "fullsync-latency-before.json", json.dumps(
            {"ops": 1000, "errors": 0, "latency_ms": {"p50": 0.1, "p99": 0.5, "max": 2}, "longest_gap_ms": 3}))
        self.during(gap=900)

    def tearDown(self):
        self.tmp.cleanup()

    def during(self, gap, errors=0):
        write(self.d, "fullsync-latency-during.json", json.dumps(
            {"ops": 5000, "errors": errors, "latency_ms": {"p50": 0.2, "p99": 2.0, "max": 900}, "longest_gap_ms": gap}))

    def test_a_sync_that_served_throughout(self):
        write(self.d, "drops-fullsync.txt", "link_drops=2\n")
        text = report_repl.fullsync_section(self.d)
        self.assertEqual(table_row(text, "replica link drops in its log (each one a new full sync)")[1], "2")
        self.assertEqual(table_row(text, "**sync duration** (replica start to link up), s")[1], "12.50")
        self.assertEqual(table_row(text, "primary peak RSS (VmHWM over its life), MB")[1], "200")
        self.assertEqual(table_row(text, "cgroup memory.max_usage_in_bytes during the sync, MB")[1], "250 of 256")
        self.assertEqual(table_row(text, "p99 during / before")[1], "4.00")
        self.assertIn("engine block cache 32 MB)", text)
        self.assertIn("served throughout (alive, no errors, no stall over 1 s): **yes**", text)
        self.assertIn("cannot serve 4x its memory limit", text)

    def test_a_stall_over_a_second_or_an_error_is_not_serving(self):
        self.during(gap=1500)
        self.assertIn("**no**", report_repl.fullsync_section(self.d))
        self.during(gap=10, errors=1)
        self.assertIn("**no**", report_repl.fullsync_section(self.d))
        # The probe's last figures look fine, but the primary is gone.
        self.during(gap=10)
        with open(os.path.join(self.d, "fullsync.json")) as f:
            fs = json.load(f)
        fs["primary_alive"] = False
        write(self.d, "fullsync.json", json.dumps(fs))
        self.assertIn("**no**", report_repl.fullsync_section(self.d))

    def test_a_primary_killed_during_the_load(self):
        write(self.d, "fullsync.json", json.dumps({"error": "the primary died during the load",
                                                   "cgroup_oom_kills": "1"}))
        write(self.d, "fullsync-load.json", json.dumps({"keys": 22000, "seconds": 1.3, "errors": 0,
                                                        "error": "after 22000 keys: connection closed"}))
        os.remove(os.path.join(self.d, "fullsync-latency-during.json"))
        text = report_repl.fullsync_section(self.d)
        self.assertIn("**no**", text)
        self.assertIn("Part 3 did not complete: the primary died during the load.", text)
        self.assertIn("after 22000 keys: connection closed", text)
        self.assertEqual(table_row(text, "cgroup OOM kills")[1], "1")

    def test_skipped(self):
        write(self.d, "fullsync-skipped.txt", "skipped: needs root\n")
        self.assertTrue(report_repl.fullsync_section(self.d).endswith("skipped: needs root"))


class ProbeArithmetic(unittest.TestCase):
    def test_percentile_by_nearest_rank(self):
        xs = list(range(1, 101))
        self.assertEqual(repl_probe.percentile(xs, 50), 50)
        self.assertEqual(repl_probe.percentile(xs, 99), 99)
        self.assertEqual(repl_probe.percentile(xs, 100), 100)
        self.assertEqual(repl_probe.percentile([7], 99), 7)
        self.assertIsNone(repl_probe.percentile([], 50))

    def test_probe_lags(self):
        acked = {1: 10.0, 2: 10.01, 3: 10.02, 4: 10.03}
        # 2 showed before its reply arrived: lag 0, not negative; 4 never.
        seen = {1: 10.002, 2: 10.005, 3: 10.05}
        lags, missing = repl_probe.probe_lags_ms(acked, seen)
        self.assertEqual([round(x, 6) for x in lags], [2.0, 0.0, 30.0])
        self.assertEqual(missing, [4])

    def test_longest_gap_counts_the_edges(self):
        self.assertAlmostEqual(repl_probe.longest_gap_ms([1.1, 1.2, 2.5], 1.0, 2.6), 1300)
        self.assertAlmostEqual(repl_probe.longest_gap_ms([], 1.0, 3.0), 2000)
        self.assertAlmostEqual(repl_probe.longest_gap_ms([1.5], 0.0, 1.6), 1500)

    def test_caught_up_needs_the_link(self):
        info = repl_probe.info_fields(b"# Replication\r\nrole:slave\r\nmaster_link_status:down\r\n"
                                      b"slave_repl_offset:500\r\n")
        self.assertEqual(info["slave_repl_offset"], "500")
        self.assertFalse(repl_probe.caught_up(info, 400))
        info["master_link_status"] = "up"
        self.assertTrue(repl_probe.caught_up(info, 500))
        self.assertFalse(repl_probe.caught_up(info, 501))


class Resp(unittest.TestCase):
    def conn(self, server_bytes):
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        c = repl_probe.Conn.__new__(repl_probe.Conn)
        c.sock, c.buf = a, bytearray()
        # Split mid-reply, so the reader must wait for the rest.
        b.sendall(server_bytes[:7])
        b.sendall(server_bytes[7:])
        b.shutdown(socket.SHUT_WR)
        return c, b

    def test_replies_across_reads(self):
        c, _ = self.conn(b"+OK\r\n$5\r\nhe\r\no\r\n:42\r\n$-1\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n-ERR no\r\n+after\r\n")
        self.assertEqual(c.reply(), b"OK")
        self.assertEqual(c.reply(), b"he\r\no", "a bulk string holds CRLF")
        self.assertEqual(c.reply(), 42)
        self.assertIsNone(c.reply())
        self.assertEqual(c.reply(), [b"a", [1]])
        with self.assertRaises(repl_probe.ReplyError):
            c.reply()
        self.assertEqual(c.reply(), b"after", "an error reply is consumed whole")
        with self.assertRaises(ConnectionError):
            c.reply()

    def test_encode(self):
        self.assertEqual(repl_probe.encode(("SET", b"k", 5)), b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n5\r\n")


if __name__ == "__main__":
    unittest.main()
