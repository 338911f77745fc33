//! Command-line flags: RocksDB `db_bench`'s names and defaults, plus ours.
//!
//! Flags are written `--name=value` (or `--name value`); booleans also accept
//! a bare `--name` and `0/1/true/false`, as gflags does. Defaults are
//! db_bench 7.8.3's, so an identical command line means identical work.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;

/// Parses a gflags-style boolean.
fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Ok(true),
        "0" | "false" | "f" | "no" | "n" => Ok(false),
        _ => Err(format!("not a boolean: {s:?} (use 0/1/true/false)")),
    }
}

/// Every flag strata-bench accepts.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "strata-bench",
    rename_all = "snake_case",
    args_override_self = true,
    version,
    about = "db_bench-compatible benchmarks for StrataKV",
    long_about = "Runs RocksDB db_bench's workloads (and YCSB A-F) against StrataKV with db_bench's flag names and \
                  output lines. See the README's Benchmarks section."
)]
pub struct Flags {
    /// Comma-separated benchmarks, run in order. Workloads: fillseq, fillrandom, overwrite, fillsync,
    /// readrandom, readmissing, readseq, readreverse, seekrandom, deleterandom, readwhilewriting,
    /// readrandomwriterandom, multireadrandom, ycsbload, ycsba..ycsbf; meta: flush, compact,
    /// waitforcompaction, stats, levelstats; cpufloor (the machine's latency floor, no database).
    #[arg(long, default_value = "fillseq,fillrandom,readrandom")]
    pub benchmarks: String,
    /// Number of key-value pairs in the database (YCSB: records).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Read (and YCSB) operations per thread; negative means `num`.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub reads: i64,
    /// Write operations of fill/overwrite/delete per thread; negative means `num`.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub writes: i64,
    /// Key size in bytes.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// How compressible generated values are (fraction of a 100-byte piece that is random).
    #[arg(long, default_value_t = 0.5)]
    pub compression_ratio: f64,
    /// Concurrent benchmark threads; each does the full count of operations.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Database directory.
    #[arg(long, default_value = "/tmp/strata-bench-db")]
    pub db: PathBuf,
    /// Keep the existing database (needed for read phases); fill benchmarks are then skipped.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub use_existing_db: bool,
    /// Make every write durable against power loss before it returns.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub sync: bool,
    /// Accepted for compatibility; StrataKV has no separate WAL, so this means "no sync".
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub disable_wal: bool,
    /// Data-block compression: none, snappy or lz4 (db_bench's default is snappy).
    #[arg(long, default_value = "snappy")]
    pub compression_type: String,
    /// Block cache bytes.
    #[arg(long, default_value_t = 8_388_608)]
    pub cache_size: u64,
    /// Bloom filter bits per key; zero or negative means no filter (db_bench's default -1).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub bloom_bits: i64,
    /// Memtable size in bytes.
    #[arg(long, default_value_t = 67_108_864)]
    pub write_buffer_size: usize,
    /// Background jobs (one flush thread plus `max_background_jobs - 1` compaction threads).
    #[arg(long, default_value_t = 2)]
    pub max_background_jobs: usize,
    /// Target table file size in bytes.
    #[arg(long, default_value_t = 67_108_864)]
    pub target_file_size_base: u64,
    /// Target size of level 1 in bytes.
    #[arg(long, default_value_t = 268_435_456)]
    pub max_bytes_for_level_base: u64,
    /// Print latency percentiles after each benchmark.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub histogram: bool,
    /// Print interval throughput every this many seconds (0 = off).
    #[arg(long, default_value_t = 0)]
    pub stats_interval_seconds: u64,
    /// Seed of the random streams; 0 picks one from the clock (and prints it), as db_bench does.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Next() calls after each Seek in seekrandom.
    #[arg(long, default_value_t = 0)]
    pub seek_nexts: u64,
    /// Percentage of reads in readrandomwriterandom.
    #[arg(long, default_value_t = 90)]
    pub readwritepercent: u32,
    /// Keys per write batch (fill*, overwrite, deleterandom) and per multi_get.
    #[arg(long, default_value_t = 1)]
    pub batch_size: usize,
    /// Seconds to run each benchmark instead of a fixed count (0 = use counts; cpufloor: 5 s).
    #[arg(long, default_value_t = 0)]
    pub duration: u64,
    /// cpufloor's unit of work in nanoseconds (0 = the mean time per
    /// operation of the benchmark before it, or 3000 if there is none).
    #[arg(long, default_value_t = 0)]
    pub cpufloor_unit_ns: u64,
    /// Fields per YCSB record.
    #[arg(long, default_value_t = 10)]
    pub ycsb_fieldcount: usize,
    /// Bytes per YCSB field.
    #[arg(long, default_value_t = 100)]
    pub ycsb_fieldlength: usize,
    /// Engine under test: strata, or rocksdb when built with the `rocksdb` feature.
    #[arg(long, default_value = "strata")]
    pub engine: String,
    /// StrataKV level-0 profile: sstable or matrix (default: the engine's default).
    #[arg(long)]
    pub profile: Option<String>,
    /// Matrix rows answer point lookups with a DRAM hash index (1) or with
    /// the thesis' per-row bloom filter and hint-guided search (0).
    #[arg(long, default_value = "true", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub matrix_hash_index: bool,
    /// Sorted runs the matrix profile gathers before merging them into L1
    /// (1 = none: columns merge straight into L1; 0 = the engine's default).
    #[arg(long, default_value_t = 0)]
    pub max_runs: usize,
    /// Nice value of StrataKV's background threads (flush, compactions,
    /// log sync), 0-19; unset = the engine's default.
    #[arg(long)]
    pub background_nice: Option<i32>,
    /// Directory of StrataKV's PM region file (default: `<db>/pm`); e.g. /dev/shm/x to emulate PM with DRAM.
    #[arg(long)]
    pub pm_dir: Option<PathBuf>,
    /// Size of a new PM region in bytes (0 = the engine's default).
    #[arg(long, default_value_t = 0)]
    pub pm_size: u64,
    /// Emulated extra latency after each PM persist, in nanoseconds.
    #[arg(long, default_value_t = 0)]
    pub pm_write_latency_ns: u64,
    /// Write one JSON object per benchmark (in a `benchmarks` array) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl Flags {
    /// Parses `args` (the first item is the program name) and checks them.
    pub fn parse_from_args<I, T>(args: I) -> Result<Flags>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let f = Flags::try_parse_from(args)?;
        f.check()?;
        Ok(f)
    }

    /// Parses the process's command line.
    pub fn try_parse_from_env() -> Result<Flags> {
        Flags::parse_from_args(std::env::args_os())
    }

    /// Every problem with the flags at once, or Ok.
    pub fn check(&self) -> Result<()> {
        let mut bad = Vec::new();
        if self.threads == 0 {
            bad.push("--threads must be at least 1".to_string());
        }
        if self.batch_size == 0 {
            bad.push("--batch_size must be at least 1".into());
        }
        if self.key_size == 0 {
            bad.push("--key_size must be at least 1".into());
        }
        if self.readwritepercent > 100 {
            bad.push("--readwritepercent must be between 0 and 100".into());
        }
        if self.ycsb_fieldcount == 0 {
            bad.push("--ycsb_fieldcount must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.compression_ratio) {
            bad.push("--compression_ratio must be between 0 and 1".into());
        }
        if let Some(p) = &self.profile {
            if p != "sstable" && p != "matrix" {
                bad.push(format!("--profile must be sstable or matrix, not {p:?}"));
            }
        }
        if self.engine != "strata" && self.engine != "rocksdb" {
            bad.push(format!("--engine must be strata or rocksdb, not {:?}", self.engine));
        }
        if self.benchmark_list().is_empty() {
            bad.push("--benchmarks is empty".into());
        }
        if bad.is_empty() {
            Ok(())
        } else {
            bail!("{}", bad.join("; "))
        }
    }

    /// The benchmark names, in order, without empty items.
    pub fn benchmark_list(&self) -> Vec<String> {
        self.benchmarks.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
    }

    /// Read operations per thread (`--reads`, or `--num` when negative).
    pub fn reads_per_thread(&self) -> u64 {
        u64::try_from(self.reads).unwrap_or(self.num)
    }

    /// Write operations per thread (`--writes`, or `--num` when negative).
    pub fn writes_per_thread(&self) -> u64 {
        u64::try_from(self.writes).unwrap_or(self.num)
    }

    /// Bloom bits per key for the engine (0 = none).
    pub fn bloom_bits_per_key(&self) -> u32 {
        u32::try_from(self.bloom_bits.max(0)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Flags> {
        Flags::parse_from_args(std::iter::once("strata-bench").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_are_db_bench_defaults() {
        let f = parse(&[]).unwrap();
        assert_eq!(f.num, 1_000_000);
        assert_eq!(f.reads_per_thread(), 1_000_000);
        assert_eq!(f.key_size, 16);
        assert_eq!(f.value_size, 100);
        assert_eq!(f.compression_type, "snappy");
        assert_eq!(f.cache_size, 8 << 20);
        assert_eq!(f.bloom_bits_per_key(), 0);
        assert_eq!(f.write_buffer_size, 64 << 20);
        assert!(!f.sync && !f.use_existing_db && !f.histogram);
        assert!(f.matrix_hash_index);
    }

    #[test]
    fn db_bench_command_line_parses() {
        let f = parse(&[
            "--benchmarks=fillrandom,stats, readrandom",
            "--num=5000000",
            "--reads=1000",
            "--key_size=16",
            "--value_size=1024",
            "--compression_type=none",
            "--histogram=1",
            "--cache_size=1073741824",
            "--bloom_bits=10",
            "--seed=42",
            "--use_existing_db=1",
            "--sync=0",
            "--threads",
            "2",
            "--profile=matrix",
            "--matrix_hash_index=0",
            "--pm_dir=/dev/shm/x",
            "--pm_write_latency_ns=300",
            "--json",
            "out.json",
        ])
        .unwrap();
        assert_eq!(f.benchmark_list(), vec!["fillrandom", "stats", "readrandom"]);
        assert_eq!(f.num, 5_000_000);
        assert_eq!(f.reads_per_thread(), 1000);
        assert_eq!(f.value_size, 1024);
        assert!(f.histogram && f.use_existing_db && !f.sync);
        assert_eq!(f.threads, 2);
        assert_eq!(f.bloom_bits_per_key(), 10);
        assert_eq!(f.profile.as_deref(), Some("matrix"));
        assert!(!f.matrix_hash_index);
        assert_eq!(f.pm_dir.as_deref(), Some(std::path::Path::new("/dev/shm/x")));
        assert_eq!(f.pm_write_latency_ns, 300);
        assert_eq!(f.json.as_deref(), Some(std::path::Path::new("out.json")));
    }

    #[test]
    fn bare_and_word_booleans() {
        let f = parse(&["--sync", "--histogram=true", "--disable_wal=false"]).unwrap();
        assert!(f.sync && f.histogram && !f.disable_wal);
        assert!(parse(&["--sync=maybe"]).is_err());
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        assert!(parse(&["--num=lots"]).is_err());
        assert!(parse(&["--threads=0"]).is_err());
        assert!(parse(&["--profile=btree"]).is_err());
        assert!(parse(&["--readwritepercent=101"]).is_err());
        assert!(parse(&["--benchmarks=,"]).is_err());
        assert!(parse(&["--no_such_flag=1"]).is_err());
    }

    #[test]
    fn several_problems_are_reported_together() {
        let e = parse(&["--threads=0", "--batch_size=0"]).unwrap_err().to_string();
        assert!(e.contains("--threads") && e.contains("--batch_size"), "{e}");
    }

    #[test]
    fn a_repeated_flag_takes_the_last_value() {
        let f = parse(&["--seed=42", "--reads=5", "--seed=7", "--sync", "--sync=0"]).unwrap();
        assert_eq!(f.seed, 7);
        assert!(!f.sync);
    }

    #[test]
    fn negative_counts_mean_num() {
        let f = parse(&["--num=10", "--reads=-1", "--writes=-5"]).unwrap();
        assert_eq!(f.reads_per_thread(), 10);
        assert_eq!(f.writes_per_thread(), 10);
    }
}
