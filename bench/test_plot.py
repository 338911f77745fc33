#!/usr/bin/env python3
"""Unit tests of bench/plot: the data it reads from both kinds of JSON, and
the PNGs it draws from two fixtures (bench/testdata: a trimmed bench/compare
quick report with an older-format copy of its group, and a strata-bench
--json file). The drawing tests need matplotlib (scripts/test.d/10-bench-scripts.sh
installs it).

    python3 bench/test_plot.py
"""

import importlib.util
import json
import struct
import tempfile
import unittest
from importlib.machinery import SourceFileLoader
from pathlib import Path

HERE = Path(__file__).resolve().parent
_loader = SourceFileLoader("bench_plot", str(HERE / "plot"))
plot = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench_plot", _loader))
_loader.exec_module(plot)

SUITE = HERE / "testdata" / "plot-suite.json"
SINGLE = HERE / "testdata" / "plot-strata-bench.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    """(width, height) from a PNG's IHDR chunk; fails on anything else."""
    data = Path(path).read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path}: not a PNG"
    assert data[12:16] == b"IHDR", f"{path}: no IHDR first"
    return struct.unpack(">II", data[16:24])


def has_colour(path, hex_colour, tol=40):
    """Whether some pixel of the image is within tol (per channel) of hex_colour."""
    from PIL import Image

    want = tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    img = Image.open(path).convert("RGB")
    return any(all(abs(a - b) <= tol for a, b in zip(c, want)) for _, c in img.getcolors(maxcolors=1 << 20))


class DataTest(unittest.TestCase):
    """What bench/plot reads; no matplotlib needed."""

    def test_series_from_new_old_and_db_bench_records(self):
        new = {"throughput_t_s": [1.0, 2.0, 2.5], "throughput_ops_per_sec": [100.0, 80.0, 60.0]}
        self.assertEqual(plot.series_of(new), ([1.0, 2.0, 2.5], [100.0, 80.0, 60.0]))
        # A partial last interval under 0.2 s is dropped.
        self.assertEqual(plot.series_of({"throughput_t_s": [1.0, 2.0, 2.1], "throughput_ops_per_sec": [5, 6, 1]}),
                         ([1.0, 2.0], [5, 6]))
        # Older strata-bench: counts per second, the last scaled to its length.
        self.assertEqual(plot.series_of({"timeline": [100, 80, 30], "elapsed_s": 2.5}), ([1.0, 2.0, 2.5], [100, 80, 60.0]))
        # db_bench's interval lines as bench/compare stores them.
        self.assertEqual(plot.series_of({"interval_t_s": [1.01, 2.03], "interval_ops_per_sec": [9.0, 8.0]}), ([1.01, 2.03], [9.0, 8.0]))
        self.assertIsNone(plot.series_of({"ops_per_sec": 5}))

    def test_latency_curve_and_its_axis(self):
        rec = {"latency_curve": [{"percentile": 50.0, "us": 2.0}, {"percentile": 100.0, "us": 900.0}], "p50_us": 7.0}
        self.assertEqual(plot.curve_of(rec), [(50.0, 2.0), (100.0, 900.0)])
        # Without a curve: the table's percentiles; zero latencies cannot go on a log axis.
        old = {"p50_us": 0.0, "p99_us": 3.0, "p999_us": 40.0, "p9999_us": 80.0, "max_us": 100.0}
        self.assertEqual(plot.curve_of(old), [(99, 3.0), (99.9, 40.0), (99.99, 80.0), (100, 100.0)])
        self.assertAlmostEqual(plot.tail_x(50), 2.0)
        self.assertAlmostEqual(plot.tail_x(99.9), 1000.0, places=6)
        self.assertEqual(plot.tail_x(100), plot.MAX_X)

    def test_groups_of_a_suite_report(self):
        groups = plot.groups_of(json.loads(SUITE.read_text()))
        self.assertEqual(len(groups), 2)
        g = groups[0]
        self.assertEqual(g["engines"], ["rocksdb", "db_bench 7.8.3", "strata/matrix"])
        self.assertEqual(len(g["rows"][("fillrandom", "fillrandom")]["rocksdb"]), 2, "two repetitions")
        total, pm = g["sizes"]["fillrandom"]["strata/matrix"][0]
        self.assertGreater(pm, 0)
        self.assertGreater(total, pm)
        self.assertEqual(g["sizes"]["fillrandom"]["rocksdb"][0][1], 0, "RocksDB has no PM file")
        self.assertEqual(groups[1]["sizes"], {}, "the older copy has no disk space figures")
        # The median repetition of two is the slower one.
        reps = g["rows"][("fillrandom", "fillrandom")]["rocksdb"]
        self.assertEqual(plot.median_rep(reps)["ops_per_sec"], min(r["ops_per_sec"] for r in reps))

    def test_groups_of_a_strata_bench_file(self):
        doc = json.loads(SINGLE.read_text())
        (g,) = plot.groups_of(doc)
        self.assertEqual(g["engines"], [doc["engine"]])
        self.assertEqual([k[1] for k in g["rows"]], ["fillrandom", "readrandom", "overwrite"])
        fill = doc["benchmarks"][0]
        self.assertEqual(g["sizes"]["fillrandom"][doc["engine"]], [(fill["end_state"]["store_size_bytes"], fill["pm_file_bytes"])])
        self.assertAlmostEqual(plot.proc_wa(fill), fill["proc_write_bytes"] / fill["user_bytes_written"])
        self.assertEqual(plot.engine_wa(fill), fill["end_state"]["write_amp_since_open"])

    def test_colours_are_stable_per_engine(self):
        a = plot.colours(["rocksdb", "fjall", "db_bench 7.8.3", "strata/matrix", "strata/sstable"])
        b = plot.colours(["strata/matrix", "rocksdb"])
        self.assertEqual(a["rocksdb"], b["rocksdb"])
        self.assertEqual(a["strata/matrix"], b["strata/matrix"])
        self.assertEqual(len(set(a.values())), 5)


class DrawTest(unittest.TestCase):
    """The PNGs; needs matplotlib."""

    @classmethod
    def setUpClass(cls):
        if not plot.available():
            raise AssertionError("matplotlib is missing: pip install matplotlib (scripts/test.d/10-bench-scripts.sh installs it)")

    def check_png(self, path):
        self.assertTrue(path.exists(), path)
        w, h = png_size(path)
        self.assertTrue(500 <= w <= 3000 and 300 <= h <= 3000, f"{path.name}: {w}x{h}")
        self.assertTrue(3_000 < path.stat().st_size < 400_000, f"{path.name}: {path.stat().st_size} bytes")

    def test_suite_report(self):
        said = []
        with tempfile.TemporaryDirectory() as d:
            written = plot.plot_file(SUITE, d, say=said.append)
            self.assertEqual(written[0], [(k, f"plot-suite-0-{k}.png") for k in plot.KINDS])
            # The older copy: latency from the table's percentiles and write amplification only.
            self.assertEqual([k for k, _ in written[1]], ["latency", "writeamp"])
            self.assertTrue(any("group 1" in m and "timeline skipped" in m for m in said), said)
            self.assertTrue(any("group 1" in m and "size skipped" in m for m in said), said)
            for files in written.values():
                for _, name in files:
                    self.check_png(Path(d) / name)
            timeline = Path(d) / "plot-suite-0-timeline.png"
            for label in ("rocksdb", "strata/matrix", "db_bench 7.8.3"):
                self.assertTrue(has_colour(timeline, plot.colours(["rocksdb", "db_bench 7.8.3", "strata/matrix"])[label]), label)
            self.assertEqual(sorted(p.name for p in Path(d).iterdir()), sorted(n for f in written.values() for _, n in f))

    def test_strata_bench_file(self):
        with tempfile.TemporaryDirectory() as d:
            written = plot.plot_file(SINGLE, d, say=lambda m: None)
            self.assertEqual([k for k, _ in written[0]], list(plot.KINDS))
            for _, name in written[0]:
                self.assertTrue(name.startswith("plot-strata-bench-0-"), name)
                self.check_png(Path(d) / name)
            self.assertTrue(has_colour(Path(d) / "plot-strata-bench-0-latency.png", plot.STRATA_COLOURS[0]))

    def test_command_line(self):
        import subprocess
        import sys

        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, str(HERE / "plot"), str(SINGLE), "--out", d], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(r.stdout.split()), 4, r.stdout)
            self.assertTrue(all(Path(p).exists() for p in r.stdout.split()))


if __name__ == "__main__":
    unittest.main()
