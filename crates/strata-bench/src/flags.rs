//! Command-line flags: RocksDB `db_bench`'s names and defaults, plus ours.
//!
//! Flags are written `--name=value` (or `--name value`); booleans also accept
//! a bare `--name` and `0/1/true/false`, as gflags does. Defaults are
//! db_bench 7.8.3's, so an identical command line means identical work.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;

/// The engines `--engine` may name.
pub const ENGINES: &[&str] = &["strata", "rocksdb", "fjall"];

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
    /// readrandomwriterandom, multireadrandom, ycsbload, ycsba..ycsbf; deletehalf_drop,
    /// deletehalf_range, deletehalf_point (delete the odd parts of --partitions/--key_ranges by
    /// dropping partitions, by range deletes, by point deletes; timed); meta: flush, compact,
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
    /// RocksDB: writes skip the WAL. StrataKV and fjall have no separate WAL to skip: ignored.
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
    /// Engine under test: strata (StrataKV), fjall, or rocksdb (when built with the `rocksdb` feature).
    #[arg(long, default_value = "strata")]
    pub engine: String,
    /// StrataKV level-0 profile: sstable, matrix, single-level or pm-only (default: the engine's default).
    #[arg(long)]
    pub profile: Option<String>,
    /// StrataKV table index: binary (separator keys) or learned (TridentKV's
    /// model, blocks cut to match it).
    #[arg(long, default_value = "binary")]
    pub index_type: String,
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
    /// pm-only: PM regions (NUMA nodes) the skiplists are braided over (0 = the engine's default).
    #[arg(long, default_value_t = 0)]
    pub pm_regions: usize,
    /// pm-only: merge each L0 list into L1 at once (1), or only when L0 lists pile up (0).
    #[arg(long, default_value = "true", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub listdb_zipper: bool,
    /// pm-only: DRAM of the lookup cache in MiB (unset = the engine's default; 0 = off).
    #[arg(long)]
    pub listdb_lookup_cache_mb: Option<usize>,
    /// Partitions the key numbers are spread over: key i of [0, num) goes to partition
    /// floor(i * P / num) (contiguous ranges, so that one range delete covers one partition), a
    /// StrataKV partition or a RocksDB column family each; 1 = none (the default). Works with the
    /// fill benchmarks, overwrite, readrandom, seekrandom and deletehalf_*.
    #[arg(long, default_value_t = 1)]
    pub partitions: usize,
    /// StrataKV through its sharded front end (p2KVS) with this many shards, one worker thread
    /// each; 0 (default) = one plain `Db`.
    #[arg(long, default_value_t = 0)]
    pub shards: usize,
    /// With --shards: most requests a worker folds into one batch or multi-get (0 = the
    /// front end's default, 32).
    #[arg(long, default_value_t = 0)]
    pub shard_batch_cap: usize,
    /// Without --partitions: the contiguous key ranges [0, num) is cut into for deletehalf_range
    /// and deletehalf_point, as --partitions cuts it (0 = --partitions).
    #[arg(long, default_value_t = 0)]
    pub key_ranges: usize,
    /// Key numbers readrandom, seekrandom and multireadrandom draw from: all (db_bench's [0, num))
    /// or survivors (those in the even parts, which deletehalf_* keeps; the default after a
    /// deletehalf in the same run).
    #[arg(long, default_value = "all")]
    pub read_keys: String,
    /// Write one JSON object per benchmark (in a `benchmarks` array) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// db_bench's RocksDB options (used by `--engine=rocksdb`; a few also by fjall).
    #[command(flatten)]
    pub rocks: RocksFlags,
}

/// db_bench's flags for RocksDB options, with the defaults of RocksDB
/// 11.8's db_bench (`tools/db_bench_tool.cc`), so that one command line
/// configures RocksDB as db_bench would. StrataKV ignores them; fjall uses
/// the ones its own options have an equivalent for (see `fjall_engine`).
#[derive(clap::Args, Debug, Clone)]
#[command(rename_all = "snake_case")]
pub struct RocksFlags {
    /// Block cache: hyper_clock_cache (db_bench 11's default), lru_cache, or fixed_hyper_clock_cache.
    #[arg(long, default_value = "hyper_clock_cache")]
    pub cache_type: String,
    /// Block cache shards are 2^this; negative = the library's choice.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub cache_numshardbits: i32,
    /// Data block size in bytes (fjall too).
    #[arg(long, default_value_t = 4096)]
    pub block_size: usize,
    /// SST format version (0 = the library's default).
    #[arg(long, default_value_t = 0)]
    pub format_version: i32,
    /// Memtables in memory at most (the active one and those waiting to be flushed).
    #[arg(long, default_value_t = 2)]
    pub max_write_buffer_number: i32,
    /// Immutable memtables merged into one flush.
    #[arg(long, default_value_t = 1)]
    pub min_write_buffer_number_to_merge: i32,
    /// L0 files that start a compaction (fjall: its L0 threshold).
    #[arg(long, default_value_t = 4)]
    pub level0_file_num_compaction_trigger: i32,
    /// L0 files that slow writes down.
    #[arg(long, default_value_t = 20)]
    pub level0_slowdown_writes_trigger: i32,
    /// L0 files that stop writes.
    #[arg(long, default_value_t = 36)]
    pub level0_stop_writes_trigger: i32,
    /// Levels of the LSM tree.
    #[arg(long, default_value_t = 7)]
    pub num_levels: i32,
    /// Size ratio between adjacent levels (fjall: its level ratio).
    #[arg(long, default_value_t = 10.0)]
    pub max_bytes_for_level_multiplier: f64,
    /// Level sizes computed from the last level (RocksDB's own default is true; db_bench's is false).
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub level_compaction_dynamic_level_bytes: bool,
    /// Parts an L0->L1 compaction is split into, run in parallel.
    #[arg(long, default_value_t = 1)]
    pub subcompactions: u32,
    /// Pipeline WAL and memtable writes (db_bench's default is true; RocksDB's false).
    #[arg(long, default_value = "true", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub enable_pipelined_write: bool,
    /// Unordered writes (relaxes snapshot guarantees).
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub unordered_write: bool,
    /// Writers insert into the memtable in parallel.
    #[arg(long, default_value = "true", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub allow_concurrent_memtable_write: bool,
    /// Spin briefly before blocking in the write queue.
    #[arg(long, default_value = "true", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub enable_write_thread_adaptive_yield: bool,
    /// Share of the memtable used for a bloom filter (0 = none).
    #[arg(long, default_value_t = 0.0)]
    pub memtable_bloom_size_ratio: f64,
    /// Whole keys go into the memtable bloom filter.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub memtable_whole_key_filtering: bool,
    /// Whole keys go into the SST bloom filters.
    #[arg(long, default_value = "true", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub whole_key_filtering: bool,
    /// Data blocks get a hash index (1) besides binary search (0).
    #[arg(long, default_value_t = 0)]
    pub data_block_index_type: u32,
    /// Fill ratio of the data block hash index.
    #[arg(long, default_value_t = 0.75)]
    pub data_block_hash_table_util_ratio: f64,
    /// Index and filter blocks live in the block cache.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub cache_index_and_filter_blocks: bool,
    /// Pin L0 index and filter blocks in the block cache.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    /// No bloom filters on the last level (fjall: expect point-read hits).
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub optimize_filters_for_hits: bool,
    /// O_DIRECT for reads.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub use_direct_reads: bool,
    /// O_DIRECT for flush and compaction writes.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Sync SST files in the background every this many bytes (0 = off).
    #[arg(long, default_value_t = 0)]
    pub bytes_per_sync: u64,
    /// Sync the WAL in the background every this many bytes (0 = off).
    #[arg(long, default_value_t = 0)]
    pub wal_bytes_per_sync: u64,
    /// Directory of RocksDB's WAL (default: the database directory), e.g.
    /// on /dev/shm to give it the PM-emulation placement StrataKV's log has.
    #[arg(long)]
    pub wal_dir: Option<PathBuf>,
    /// Open files kept (-1 = all).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub open_files: i32,
    /// Verify block checksums on reads.
    #[arg(long, default_value = "true", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub verify_checksum: bool,
    /// multireadrandom uses RocksDB's batched MultiGet (1, our default) or
    /// the per-key vector MultiGet (0, db_bench's default).
    #[arg(long, default_value = "true", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub multiread_batched: bool,
    /// ReadOptions::async_io on every read (db_bench's `--async_io`): a
    /// batched MultiGet reads its blocks asynchronously, and iterators
    /// prefetch asynchronously, where RocksDB's build supports it (MultiGet:
    /// coroutines and an async file system, i.e. io_uring); elsewhere RocksDB
    /// reads synchronously as with 0.
    #[arg(long, default_value = "false", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub async_io: bool,
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
        if !matches!(self.index_type.as_str(), "binary" | "learned") {
            bad.push(format!("--index_type must be binary or learned, not {:?}", self.index_type));
        }
        if let Some(p) = &self.profile {
            if stratakv::L0Kind::parse(p).is_none() {
                bad.push(format!("--profile must be sstable, matrix, single-level or pm-only, not {p:?}"));
            }
        }
        if !ENGINES.contains(&self.engine.as_str()) {
            bad.push(format!("--engine must be one of {}, not {:?}", ENGINES.join(", "), self.engine));
        }
        if !["lru_cache", "hyper_clock_cache", "auto_hyper_clock_cache", "fixed_hyper_clock_cache"]
            .contains(&self.rocks.cache_type.as_str())
        {
            bad.push(format!("--cache_type must be lru_cache or hyper_clock_cache, not {:?}", self.rocks.cache_type));
        }
        if self.rocks.data_block_index_type > 1 {
            bad.push("--data_block_index_type must be 0 (binary search) or 1 (binary search and hash)".into());
        }
        if self.rocks.block_size == 0 {
            bad.push("--block_size must be at least 1".into());
        }
        if self.partitions == 0 {
            bad.push("--partitions must be at least 1".into());
        }
        if self.partitions > 1 && self.key_ranges > 0 && self.key_ranges != self.partitions {
            bad.push("--key_ranges must be 0 or equal to --partitions when --partitions is above 1".into());
        }
        if self.parts() > 1 && self.parts() as u64 > self.num {
            bad.push(format!("--num={} is too small for {} partitions or key ranges", self.num, self.parts()));
        }
        if self.partitions > 1 && self.engine == "fjall" {
            bad.push("--partitions is not supported by --engine=fjall".into());
        }
        if self.shards > 0 && (self.engine != "strata" || self.partitions > 1) {
            bad.push("--shards needs --engine=strata and no --partitions".into());
        }
        if !matches!(self.read_keys.as_str(), "all" | "survivors") {
            bad.push(format!("--read_keys must be all or survivors, not {:?}", self.read_keys));
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

    /// The parts [0, num) is cut into: `--partitions` if above 1, else `--key_ranges` (at least 1).
    pub fn parts(&self) -> usize {
        if self.partitions > 1 {
            self.partitions
        } else {
            self.key_ranges.max(1)
        }
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
    fn rocksdb_flags_have_db_bench_names_and_defaults() {
        let f = parse(&[]).unwrap();
        assert_eq!(f.engine, "strata");
        assert_eq!(f.rocks.cache_type, "hyper_clock_cache");
        assert!(f.rocks.enable_pipelined_write && !f.rocks.level_compaction_dynamic_level_bytes);
        assert_eq!((f.rocks.max_write_buffer_number, f.rocks.level0_file_num_compaction_trigger), (2, 4));
        assert!(!f.rocks.async_io, "db_bench's --async_io defaults to false");
        let f = parse(&[
            "--engine=rocksdb",
            "--cache_type=lru_cache",
            "--enable_pipelined_write=0",
            "--memtable_bloom_size_ratio=0.1",
            "--memtable_whole_key_filtering",
            "--subcompactions=2",
            "--use_direct_reads=1",
            "--bytes_per_sync=1048576",
            "--async_io=1",
            "--cache_size=67108864",
        ])
        .unwrap();
        assert_eq!(f.engine, "rocksdb");
        assert!(f.rocks.async_io && f.rocks.multiread_batched);
        assert_eq!(f.cache_size, 64 << 20);
        assert!(!f.rocks.enable_pipelined_write && f.rocks.memtable_whole_key_filtering && f.rocks.use_direct_reads);
        assert_eq!(f.rocks.memtable_bloom_size_ratio, 0.1);
        assert_eq!((f.rocks.subcompactions, f.rocks.bytes_per_sync), (2, 1 << 20));
        assert_eq!(parse(&["--engine=fjall"]).unwrap().engine, "fjall");
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
        assert!(parse(&["--engine=leveldb"]).is_err());
        assert!(parse(&["--cache_type=clock"]).is_err());
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
    fn partitions_and_key_ranges() {
        let f = parse(&[]).unwrap();
        assert_eq!((f.partitions, f.key_ranges, f.parts(), f.read_keys.as_str()), (1, 0, 1, "all"));
        assert_eq!(parse(&["--partitions=16"]).unwrap().parts(), 16);
        assert_eq!(parse(&["--key_ranges=8"]).unwrap().parts(), 8);
        assert_eq!(parse(&["--partitions=4", "--key_ranges=4", "--read_keys=survivors"]).unwrap().parts(), 4);
        assert!(parse(&["--partitions=0"]).is_err());
        assert!(parse(&["--partitions=4", "--key_ranges=8"]).is_err());
        assert!(parse(&["--partitions=20", "--num=10"]).is_err());
        assert!(parse(&["--partitions=2", "--engine=fjall"]).is_err());
        assert!(parse(&["--read_keys=some"]).is_err());
    }

    #[test]
    fn negative_counts_mean_num() {
        let f = parse(&["--num=10", "--reads=-1", "--writes=-5"]).unwrap();
        assert_eq!(f.reads_per_thread(), 10);
        assert_eq!(f.writes_per_thread(), 10);
    }
}
