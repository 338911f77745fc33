//! Output: db_bench's result and histogram lines, and the JSON file.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::engine::{Level, Setting};
use crate::measure::{stall_figure, Merged};

/// One benchmark's results, as written to `--json`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BenchResult {
    /// Benchmark name (e.g. `fillrandom`).
    pub benchmark: String,
    /// Engine and profile (e.g. `strata/matrix`).
    pub engine: String,
    /// The engine library's version (e.g. RocksDB `11.8.1`).
    pub engine_version: String,
    /// How the engine was built (e.g. `release, NDEBUG (assertions off), ...`).
    pub engine_build: String,
    /// Benchmark threads (the background writer of readwhilewriting not counted).
    pub threads: usize,
    /// Operations done (keys, for batches).
    pub ops: u64,
    /// Reads that found their key, where the benchmark reads.
    pub found: u64,
    /// Aggregate operations per second.
    pub ops_per_sec: f64,
    /// Microseconds per operation per thread (db_bench's definition).
    pub micros_per_op: f64,
    /// Megabytes (2^20) of keys and values moved per second.
    pub mb_per_sec: f64,
    /// Wall time of the benchmark, seconds.
    pub elapsed_s: f64,
    /// Latency percentiles of one operation (or batch), microseconds.
    pub p50_us: f64,
    /// 75th percentile.
    pub p75_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// 99.99th percentile.
    pub p9999_us: f64,
    /// Largest latency.
    pub max_us: f64,
    /// Mean latency.
    pub avg_us: f64,
    /// Operations completed in each second (the last one partial).
    pub timeline: Vec<u64>,
    /// For plots: the end of each interval of `timeline`, seconds since the
    /// start (1, 2, ..., then `elapsed_s` for the partial last one).
    pub throughput_t_s: Vec<f64>,
    /// For plots: operations per second in each interval of `throughput_t_s`.
    pub throughput_ops_per_sec: Vec<f64>,
    /// For plots: latency at each of [`crate::measure::CURVE_PERCENTILES`] (100 = largest).
    pub latency_curve: Vec<PercentilePoint>,
    /// Lowest full second of the timeline.
    pub min_second_ops: Option<u64>,
    /// Median full second.
    pub median_second_ops: Option<f64>,
    /// Stall figure: lowest full second / median full second.
    pub stall_ratio: Option<f64>,
    /// Operations of the background writer (readwhilewriting), if any.
    pub bg_write_ops: Option<u64>,
    /// Named counters (reads, writes, YCSB operation types).
    pub counts: std::collections::BTreeMap<String, u64>,
    /// Key+value bytes written by the user during the benchmark (engine's count).
    pub user_bytes_written: u64,
    /// Bytes the engine wrote to the SSD side during the benchmark (engine's count).
    pub device_bytes_written: u64,
    /// Bytes stored into PM during the benchmark (engine's count).
    pub pm_bytes_written: u64,
    /// device_bytes_written / user_bytes_written of this benchmark.
    pub write_amp: f64,
    /// The engine's cumulative write amplification since open.
    pub write_amp_since_open: f64,
    /// Bytes this process wrote to storage during the benchmark (/proc/self/io write_bytes).
    pub proc_write_bytes: u64,
    /// Bytes this process read from storage during the benchmark (/proc/self/io read_bytes).
    pub proc_read_bytes: u64,
    /// Disk space of the database directory at the end (allocated bytes).
    pub db_size_bytes: u64,
    /// Where the PM region file lived (directory), if the engine has one.
    pub pm_dir: Option<String>,
    /// The engine's word for the PM placement (`file`, `shm`, `dax`).
    pub pm_placement: String,
    /// Disk/tmpfs space of the PM region file at the end (allocated bytes).
    pub pm_file_bytes: u64,
    /// Space of the whole store at the end: `db_size_bytes`, plus
    /// `pm_file_bytes` when the PM file lives outside the database directory.
    pub store_size_bytes: u64,
    /// Emulated PM write latency, nanoseconds.
    pub pm_write_latency_ns: u64,
    /// Peak resident set size of the process so far.
    pub peak_rss_bytes: u64,
    /// Time writers were stopped by back-pressure during the benchmark, microseconds.
    pub stall_micros: u64,
    /// Memtable flushes during the benchmark.
    pub flushes: u64,
    /// Compactions during the benchmark.
    pub compactions: u64,
    /// Levels holding data at the end.
    pub nonempty_levels: usize,
    /// Every level at the end.
    pub levels: Vec<Level>,
    /// Point lookups during the benchmark, where the engine counts block reads.
    pub gets: Option<u64>,
    /// Data blocks those lookups (and any scans) read, cache hits included.
    pub data_blocks_read: Option<u64>,
    /// Of those, read from the table files (block cache misses).
    pub data_blocks_from_file: Option<u64>,
    /// data_blocks_read / gets.
    pub data_blocks_per_get: Option<f64>,
    /// data_blocks_read / reads that found their key: the figure for keys
    /// that exist when a read phase does nothing else (readrandom).
    pub data_blocks_per_found_get: Option<f64>,
    /// DRAM held by table indexes and filters at the end, if the engine reports it.
    pub index_dram_bytes: Option<u64>,
    /// PM held by a global index at the end (single-level's B+-tree).
    pub pm_index_bytes: Option<u64>,
    /// StrataKV's tables by index kind at the end.
    pub tables: Option<crate::engine::TableCensus>,
    /// The engine's state after the meta benchmarks that followed this one
    /// (e.g. `waitforcompaction,stats`), cumulative since open.
    pub end_state: Option<EndState>,
    /// What a deletehalf benchmark deleted and how long it took.
    pub delete: Option<DeleteFigures>,
}

/// A deletehalf benchmark's figures (the qad suite's delete times).
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeleteFigures {
    /// drop (partitions), range (range deletes) or point (point deletes).
    pub method: String,
    /// Partitions dropped or key ranges deleted.
    pub parts: u64,
    /// Point deletes: tombstones written (the keys the scan found).
    pub keys_deleted: Option<u64>,
    /// The whole delete, milliseconds (point deletes: scans and writes).
    pub total_ms: f64,
    /// The longest single drop or range delete (point deletes: the
    /// longest batch, scan included), milliseconds.
    pub longest_ms: f64,
    /// Key numbers left in the surviving parts.
    pub survivor_key_numbers: u64,
    /// Range tombstones live right after the delete, where the engine counts them.
    pub range_tombstones: Option<u64>,
    /// Tables deleted whole under range tombstones so far (since open).
    pub range_dropped_files: Option<u64>,
}

/// Engine counters after the meta benchmarks following a benchmark.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EndState {
    /// The meta benchmarks run since the benchmark, in order.
    pub after: Vec<String>,
    /// User bytes written since open.
    pub user_bytes_since_open: u64,
    /// Device bytes written since open.
    pub device_bytes_since_open: u64,
    /// device / user since open.
    pub write_amp_since_open: f64,
    /// Levels holding data.
    pub nonempty_levels: usize,
    /// Every level.
    pub levels: Vec<Level>,
    /// Space of the whole store (as [`BenchResult::store_size_bytes`]).
    pub store_size_bytes: u64,
}

/// One point of a latency curve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PercentilePoint {
    /// Percentile, 0..=100.
    pub percentile: f64,
    /// Latency at it, microseconds.
    pub us: f64,
}

impl BenchResult {
    /// Fills the throughput, latency and timeline fields from a merge.
    pub fn set_measurement(&mut self, m: &Merged) {
        self.ops = m.ops;
        self.found = m.found;
        self.ops_per_sec = m.ops_per_sec();
        self.micros_per_op = m.micros_per_op();
        self.mb_per_sec = if m.elapsed_s > 0.0 { m.bytes as f64 / 1_048_576.0 / m.elapsed_s } else { 0.0 };
        self.elapsed_s = m.elapsed_s;
        self.p50_us = m.percentile_us(50.0);
        self.p75_us = m.percentile_us(75.0);
        self.p99_us = m.percentile_us(99.0);
        self.p999_us = m.percentile_us(99.9);
        self.p9999_us = m.percentile_us(99.99);
        self.max_us = m.hist.max() as f64 / 1000.0;
        self.avg_us = m.hist.mean() / 1000.0;
        self.timeline = m.timeline.clone();
        (self.throughput_t_s, self.throughput_ops_per_sec) = m.throughput_series();
        self.latency_curve =
            m.latency_curve().into_iter().map(|(percentile, us)| PercentilePoint { percentile, us }).collect();
        if let Some((min, median, ratio)) = stall_figure(&m.timeline) {
            self.min_second_ops = Some(min);
            self.median_second_ops = Some(median);
            self.stall_ratio = Some(ratio);
        }
        self.counts = m.counts.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    }
}

/// db_bench's result line:
/// `readrandom   :       1.543 micros/op 625390 ops/sec 0.002 seconds 1000 operations;   45.9 MB/s (664 of 1000 found)`.
pub fn result_line(name: &str, m: &Merged, message: &str) -> String {
    let mut extra = String::new();
    if m.bytes > 0 && m.elapsed_s > 0.0 {
        extra = format!("{:6.1} MB/s", m.bytes as f64 / 1_048_576.0 / m.elapsed_s);
    }
    if !message.is_empty() {
        if !extra.is_empty() {
            extra.push(' ');
        }
        extra.push_str(message);
    }
    format!(
        "{:<12} : {:>11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}",
        name,
        m.micros_per_op(),
        m.ops_per_sec() as u64,
        m.elapsed_s,
        m.ops,
        if extra.is_empty() { "" } else { " " },
        extra
    )
}

/// db_bench's histogram summary (without the bucket table).
pub fn histogram_text(op: &str, m: &Merged) -> String {
    let h = &m.hist;
    let us = |v: u64| v as f64 / 1000.0;
    format!(
        "Microseconds per {op}:\nCount: {} Average: {:.4}  StdDev: {:.2}\nMin: {}  Median: {:.4}  Max: {}\n\
         Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n{}\n",
        h.len(),
        h.mean() / 1000.0,
        h.stdev() / 1000.0,
        us(h.min()).round() as u64,
        m.percentile_us(50.0),
        us(h.max()).round() as u64,
        m.percentile_us(50.0),
        m.percentile_us(75.0),
        m.percentile_us(99.0),
        m.percentile_us(99.9),
        m.percentile_us(99.99),
        "-".repeat(54)
    )
}

/// The JSON document: run parameters and one object per benchmark.
#[derive(Serialize)]
pub struct JsonReport<'a> {
    /// `strata-bench`.
    pub tool: &'static str,
    /// The command line as given.
    pub command_line: Vec<String>,
    /// The seed in effect.
    pub seed: u64,
    /// Engine and profile.
    pub engine: String,
    /// The engine library's version.
    pub engine_version: String,
    /// How the engine was built.
    pub engine_build: String,
    /// Every option the harness set on the engine, with the library's default.
    pub engine_settings: &'a [Setting],
    /// One object per benchmark, in order.
    pub benchmarks: &'a [BenchResult],
}

/// Writes the JSON report to `path` (atomically: a temporary file, then rename).
pub fn write_json(path: &Path, report: &JsonReport<'_>) -> Result<()> {
    let text = serde_json::to_string_pretty(report).context("encoding JSON")?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Recorder, CURVE_PERCENTILES};
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    fn merged(ops: u64, bytes: u64) -> Merged {
        let mut r = Recorder::new(Arc::new(AtomicU64::new(0)));
        r.start();
        for _ in 0..ops {
            r.finished(1);
        }
        r.bytes = bytes;
        r.stop();
        let mut m = Merged::from(&[r]);
        m.elapsed_s = 2.0;
        m.thread_seconds = 2.0;
        m
    }

    #[test]
    fn result_line_has_db_bench_shape() {
        let m = merged(1000, 2 * 1_048_576);
        let line = result_line("readrandom", &m, "(664 of 1000 found)");
        assert_eq!(
            line,
            "readrandom   :    2000.000 micros/op 500 ops/sec 2.000 seconds 1000 operations;    1.0 MB/s (664 of 1000 found)"
        );
        let line = result_line("fillseq", &merged(10, 0), "");
        assert!(line.ends_with("10 operations;"), "{line}");
    }

    #[test]
    fn histogram_text_has_percentile_line() {
        let t = histogram_text("write", &merged(100, 0));
        assert!(t.starts_with("Microseconds per write:\nCount: 100 Average: "), "{t}");
        assert!(t.contains("\nPercentiles: P50: "), "{t}");
        assert!(t.contains(" P99.9: "), "{t}");
    }

    #[test]
    fn json_has_the_required_fields() {
        let mut r = BenchResult { benchmark: "fillrandom".into(), ..Default::default() };
        r.set_measurement(&merged(50, 100));
        let v = serde_json::to_value(&r).unwrap();
        for k in [
            "benchmark",
            "ops",
            "ops_per_sec",
            "micros_per_op",
            "p50_us",
            "p99_us",
            "p999_us",
            "max_us",
            "timeline",
            "user_bytes_written",
            "device_bytes_written",
            "pm_bytes_written",
            "write_amp",
            "db_size_bytes",
            "peak_rss_bytes",
            "levels",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["ops"], 50);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        let all = [r];
        let settings = [Setting::new("write_buffer_size", 1, 2)];
        let report = JsonReport {
            tool: "strata-bench",
            command_line: vec![],
            seed: 1,
            engine: "rocksdb".into(),
            engine_version: "11.8.1".into(),
            engine_build: "release, NDEBUG".into(),
            engine_settings: &settings,
            benchmarks: &all,
        };
        write_json(&p, &report).unwrap();
        let back: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(back["benchmarks"][0]["benchmark"], "fillrandom");
        assert!(back["benchmarks"][0].get("engine_version").is_some());
        assert_eq!(back["engine_version"], "11.8.1");
        assert_eq!(back["engine_settings"][0]["default"], "2");
    }

    #[test]
    fn json_has_the_plot_series() {
        let mut r = BenchResult { benchmark: "fillrandom".into(), ..Default::default() };
        r.set_measurement(&merged(50, 100));
        r.end_state = Some(EndState::default());
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["store_size_bytes"].is_u64());
        assert!(v["end_state"]["store_size_bytes"].is_u64());
        let t = v["throughput_t_s"].as_array().unwrap();
        let rates = v["throughput_ops_per_sec"].as_array().unwrap();
        assert_eq!(t.len(), v["timeline"].as_array().unwrap().len());
        assert_eq!(t.len(), rates.len());
        assert!(!t.is_empty());
        assert!(rates.iter().all(|x| x.as_f64().unwrap() > 0.0), "{rates:?}");
        let curve = v["latency_curve"].as_array().unwrap();
        let pct: Vec<f64> = curve.iter().map(|p| p["percentile"].as_f64().unwrap()).collect();
        assert_eq!(pct, CURVE_PERCENTILES);
        let us: Vec<f64> = curve.iter().map(|p| p["us"].as_f64().unwrap()).collect();
        assert!(us.windows(2).all(|w| w[0] <= w[1]), "{us:?}");
        assert!(us.iter().all(|x| *x > 0.0));
        assert_eq!(us.last().copied(), v["max_us"].as_f64());
    }
}
