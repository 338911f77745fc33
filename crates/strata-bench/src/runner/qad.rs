//! The deletehalf benchmarks (TridentKV's query-after-delete experiment):
//! delete the odd parts of `--partitions`/`--key_ranges` (see
//! [`crate::keyspace`]) by dropping their partitions, by one range delete
//! each, or by point deletes of the keys a scan of each finds; time the
//! delete itself; then make later reads draw the surviving keys only.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::{Runner, CPU_FLOOR, META};
use crate::engine::{BatchOp, Engine};
use crate::flags::Flags;
use crate::keygen::format_key;
use crate::measure::{Merged, Recorder};
use crate::report::{self, BenchResult, DeleteFigures};
use crate::sysinfo;

/// How a deletehalf benchmark deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Method {
    /// Drop the partitions (StrataKV drop_partition, RocksDB DropColumnFamily).
    Drop,
    /// One range delete per part (delete_range, DeleteRange).
    Range,
    /// Point deletes of every key a scan of the part finds (Delete).
    Point,
}

impl Method {
    pub(super) fn by_name(name: &str) -> Option<Method> {
        match name {
            "deletehalf_drop" => Some(Method::Drop),
            "deletehalf_range" => Some(Method::Range),
            "deletehalf_point" => Some(Method::Point),
            _ => None,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Method::Drop => "drop",
            Method::Range => "range",
            Method::Point => "point",
        }
    }
}

/// The benchmarks that know about partitions; the others read and write
/// the engine's default key space only, and are refused with `--partitions`.
const PARTITION_AWARE: &[&str] =
    &["fillseq", "fillrandom", "fillsync", "overwrite", "readrandom", "readmissing", "seekrandom"];

/// Whether the benchmark list fits `--partitions` and `--key_ranges`.
pub(super) fn check_layout(f: &Flags) -> Result<()> {
    for name in f.benchmark_list() {
        let method = Method::by_name(&name);
        if f.partitions > 1
            && method.is_none()
            && name != CPU_FLOOR
            && !META.contains(&name.as_str())
            && !PARTITION_AWARE.contains(&name.as_str())
        {
            bail!("{name} does not support --partitions (it reads or writes the default key space only)");
        }
        match method {
            Some(Method::Drop) if f.partitions < 2 => bail!("{name} needs --partitions of at least 2"),
            Some(_) if f.parts() < 2 => bail!("{name} needs --partitions or --key_ranges of at least 2"),
            _ => {}
        }
    }
    Ok(())
}

/// The key after every key of number below `hi`: key `hi`, or past all
/// keys when `hi` is the end of the key space.
fn end_key(hi: u64, num: u64, key_size: usize) -> Vec<u8> {
    if hi >= num {
        return vec![0xff; key_size + 1];
    }
    let mut k = Vec::new();
    format_key(hi, key_size, &mut k);
    k
}

impl Runner {
    /// Runs one deletehalf benchmark.
    pub(super) fn delete_half(&mut self, name: &str, method: Method) -> Result<()> {
        let f = self.flags.clone();
        let doomed = self.keys.doomed();
        let before = self.engine()?.stats();
        let (io_read0, io_write0) = sysinfo::proc_io();
        let mut rec = Recorder::new(Arc::new(AtomicU64::new(0)));
        let mut longest = Duration::ZERO;
        let mut tombstones = 0u64;
        rec.start();
        for &j in &doomed {
            let (lo, hi) = self.keys.range(j);
            let part = if self.keys.partitioned() { usize::try_from(j)? } else { 0 };
            let mut start = Vec::new();
            format_key(lo, f.key_size, &mut start);
            let end = end_key(hi, f.num, f.key_size);
            let t = Instant::now();
            match method {
                Method::Drop => {
                    self.engine.as_deref_mut().ok_or_else(|| anyhow!("database is not open"))?.drop_partition(part)?;
                    rec.finished(1);
                }
                Method::Range => {
                    self.engine()?.delete_range_in(part, &start, &end)?;
                    rec.finished(1);
                }
                Method::Point => {
                    let (n, batch_longest) =
                        point_deletes(self.engine()?, part, &start, &end, f.batch_size, f.sync, &mut rec)?;
                    tombstones += n;
                    longest = longest.max(batch_longest);
                }
            }
            if method != Method::Point {
                longest = longest.max(t.elapsed());
            }
        }
        rec.stop();
        let merged = Merged::from(std::slice::from_ref(&rec));
        let engine = self.engine()?;
        let after = engine.stats();
        let counts = engine.range_counts();
        let (io_read1, io_write1) = sysinfo::proc_io();
        let figures = DeleteFigures {
            method: method.word().to_string(),
            parts: doomed.len() as u64,
            keys_deleted: (method == Method::Point).then_some(tombstones),
            total_ms: merged.elapsed_s * 1e3,
            longest_ms: longest.as_secs_f64() * 1e3,
            survivor_key_numbers: self.keys.survivors(),
            range_tombstones: counts.map(|c| c.0),
            range_dropped_files: counts.map(|c| c.1),
        };
        let what = match method {
            Method::Drop => format!("{} partitions dropped", doomed.len()),
            Method::Range => format!("{} key ranges deleted", doomed.len()),
            Method::Point => format!("{tombstones} keys of {} key ranges deleted", doomed.len()),
        };
        let message = format!(
            "({what} in {:.3} ms, longest {:.3} ms; {} of {} key numbers left)",
            figures.total_ms, figures.longest_ms, figures.survivor_key_numbers, f.num
        );
        let mut text = report::result_line(name, &merged, &message);
        if f.histogram {
            text.push('\n');
            text.push_str(&report::histogram_text("delete", &merged));
        }
        self.say(&text)?;
        let info = self.info.as_ref().map(|(_, i)| i);
        let mut r = BenchResult {
            benchmark: name.to_string(),
            engine: self.engine()?.name(),
            engine_version: info.map(|i| i.version.clone()).unwrap_or_default(),
            engine_build: info.map(|i| i.build.clone()).unwrap_or_default(),
            threads: 1,
            delete: Some(figures),
            ..Default::default()
        };
        r.set_measurement(&merged);
        self.fill_engine_fields(&mut r, &before, &after);
        r.proc_write_bytes = io_write1.saturating_sub(io_write0);
        r.proc_read_bytes = io_read1.saturating_sub(io_read0);
        self.results.push(r);
        // Query after delete: the reads that follow ask for surviving keys.
        self.keys.set_survivors_only(true);
        Ok(())
    }
}

/// Deletes every key of partition `part` in `[start, end)` one by one, as
/// an application without range deletes would: scans the range and
/// deletes the keys it finds in batches of `batch`. Returns the keys
/// deleted and the longest batch (its scan included).
fn point_deletes(
    e: &dyn Engine,
    part: usize,
    start: &[u8],
    end: &[u8],
    batch: usize,
    sync: bool,
    rec: &mut Recorder,
) -> Result<(u64, Duration)> {
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(batch);
    let (mut n, mut longest, mut since) = (0u64, Duration::ZERO, Instant::now());
    let mut failed = None;
    let mut write = |keys: &mut Vec<Vec<u8>>, rec: &mut Recorder| -> Result<()> {
        let ops: Vec<(usize, BatchOp<'_>)> = keys.iter().map(|k| (part, BatchOp::Delete(k))).collect();
        e.write_in(&ops, sync)?;
        rec.finished(keys.len() as u64);
        n += keys.len() as u64;
        longest = longest.max(since.elapsed());
        since = Instant::now();
        keys.clear();
        Ok(())
    };
    e.scan_in(part, start, &mut |k, _| {
        if k >= end {
            return false;
        }
        keys.push(k.to_vec());
        if keys.len() >= batch {
            if let Err(err) = write(&mut keys, rec) {
                failed = Some(err);
                return false;
            }
        }
        true
    })?;
    if let Some(err) = failed {
        return Err(err);
    }
    if !keys.is_empty() {
        write(&mut keys, rec)?;
    }
    Ok((n, longest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> Flags {
        Flags::parse_from_args(std::iter::once("strata-bench").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn layouts_the_benchmarks_accept() {
        assert!(check_layout(&flags(&[
            "--benchmarks=fillrandom,readrandom,seekrandom,deletehalf_drop",
            "--partitions=4"
        ]))
        .is_ok());
        assert!(check_layout(&flags(&["--benchmarks=fillrandom,deletehalf_range,deletehalf_point", "--key_ranges=4"]))
            .is_ok());
        assert!(check_layout(&flags(&["--benchmarks=deletehalf_range", "--partitions=4"])).is_ok());
        assert!(check_layout(&flags(&["--benchmarks=deletehalf_drop", "--key_ranges=4"])).is_err());
        assert!(check_layout(&flags(&["--benchmarks=deletehalf_point"])).is_err());
        assert!(check_layout(&flags(&["--benchmarks=readseq", "--partitions=4"])).is_err());
        assert!(check_layout(&flags(&["--benchmarks=multireadrandom", "--partitions=2"])).is_err());
        assert!(check_layout(&flags(&["--benchmarks=multireadrandom,readseq", "--key_ranges=2"])).is_ok());
        assert!(check_layout(&flags(&["--benchmarks=fillrandom,waitforcompaction,stats", "--partitions=2"])).is_ok());
    }

    #[test]
    fn range_ends() {
        let mut k = Vec::new();
        format_key(500, 16, &mut k);
        assert_eq!(end_key(500, 1000, 16), k);
        let past = end_key(1000, 1000, 16);
        format_key(999, 16, &mut k);
        assert!(past > k && past.len() == 17);
    }
}
