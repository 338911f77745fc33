//! RocksDB behind the [`Engine`] seam (feature `rocksdb`): the `rocksdb`
//! crate with RocksDB compiled from the sources librocksdb-sys bundles
//! (release: `-O3`, `NDEBUG`; see `build.rs` and the README's
//! "Benchmarks"), so every workload, YCSB included, runs against RocksDB
//! through the same code as against StrataKV.
//!
//! Options: what RocksDB's own db_bench (11.8) sets from the same flags, the
//! flags carrying db_bench's names and defaults ([`crate::flags::RocksFlags`]):
//! memtable size and count, block cache (HyperClockCache unless
//! `--cache_type=lru_cache`), bloom bits, compression, block size, background
//! jobs, subcompactions, file and level sizes, L0 triggers, pipelined writes,
//! memtable bloom, direct I/O, bytes_per_sync, async reads, ... The WAL is on unless
//! `--disable_wal` and synced only with `--sync`. [`RocksEngine::info`] lists
//! every option set, with RocksDB's default next to it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, bail, Context, Result};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, DataBlockIndexType, LruCacheOptions, Options,
    ReadOptions, WaitForCompactOptions, WriteBatch, WriteOptions, DB,
};

use crate::engine::{BatchOp, Engine, EngineInfo, EngineStats, Level, Setting};
use crate::flags::Flags;

mod parts;
mod text;

use text::{gb_after, level_stats, stall_micros};

/// RocksDB opened with db_bench-equivalent options.
pub struct RocksEngine {
    db: DB,
    /// `--partitions` above 1: the column family of partition i, or None once dropped.
    parts: Vec<Option<String>>,
    dir: PathBuf,
    batched_multiget: bool,
    verify_checksums: bool,
    async_io: bool,
    /// Made once and reused for every operation, as db_bench does (a
    /// fresh C++ options object per call would cost an allocation each).
    write_async: WriteOptions,
    write_sync: WriteOptions,
    read: ReadOptions,
    user_bytes: AtomicU64,
    settings: Vec<Setting>,
}

/// RocksDB 11.8's defaults (include/rocksdb/options.h, advanced_options.h,
/// table.h) for the options the flags set.
mod defaults {
    pub const WRITE_BUFFER_SIZE: usize = 64 << 20;
    pub const MAX_WRITE_BUFFER_NUMBER: i32 = 2;
    pub const MIN_WRITE_BUFFER_NUMBER_TO_MERGE: i32 = 1;
    pub const MAX_BACKGROUND_JOBS: i32 = 2;
    pub const MAX_SUBCOMPACTIONS: u32 = 1;
    pub const TARGET_FILE_SIZE_BASE: u64 = 64 << 20;
    pub const MAX_BYTES_FOR_LEVEL_BASE: u64 = 256 << 20;
    pub const MAX_BYTES_FOR_LEVEL_MULTIPLIER: f64 = 10.0;
    pub const L0_COMPACTION_TRIGGER: i32 = 4;
    pub const L0_SLOWDOWN_TRIGGER: i32 = 20;
    pub const L0_STOP_TRIGGER: i32 = 36;
    pub const NUM_LEVELS: i32 = 7;
    pub const DYNAMIC_LEVEL_BYTES: bool = true;
    pub const COMPRESSION: &str = "snappy";
    pub const PIPELINED_WRITE: bool = false;
    pub const UNORDERED_WRITE: bool = false;
    pub const CONCURRENT_MEMTABLE_WRITE: bool = true;
    pub const ADAPTIVE_YIELD: bool = true;
    pub const MEMTABLE_BLOOM_RATIO: f64 = 0.0;
    pub const MEMTABLE_WHOLE_KEY_FILTERING: bool = false;
    pub const USE_DIRECT_READS: bool = false;
    pub const DIRECT_IO_FLUSH_COMPACTION: bool = false;
    pub const BYTES_PER_SYNC: u64 = 0;
    pub const WAL_BYTES_PER_SYNC: u64 = 0;
    pub const MAX_OPEN_FILES: i32 = -1;
    pub const OPTIMIZE_FILTERS_FOR_HITS: bool = false;
    pub const BLOCK_CACHE: &str = "32 MiB LRU";
    pub const BLOCK_SIZE: usize = 4096;
    pub const FILTER: &str = "none";
    pub const WHOLE_KEY_FILTERING: bool = true;
    pub const DATA_BLOCK_INDEX: &str = "binary search";
    pub const CACHE_INDEX_AND_FILTER_BLOCKS: bool = false;
    pub const PIN_L0: bool = false;
    pub const FORMAT_VERSION: i32 = 7;
    pub const VERIFY_CHECKSUMS: bool = true;
    pub const ASYNC_IO: bool = false;
}

fn compression(name: &str) -> Result<(DBCompressionType, &'static str)> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "none" => (DBCompressionType::None, "none"),
        "snappy" => (DBCompressionType::Snappy, "snappy"),
        "lz4" => (DBCompressionType::Lz4, "lz4"),
        "zstd" => (DBCompressionType::Zstd, "zstd"),
        "zlib" => (DBCompressionType::Zlib, "zlib"),
        other => bail!("--compression_type={other} is not supported (none, snappy, lz4, zstd, zlib)"),
    })
}

fn int(v: usize) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// The options db_bench would open RocksDB with for these flags, and the
/// list of them against RocksDB's defaults.
fn options(f: &Flags) -> Result<(Options, Vec<Setting>)> {
    use defaults as d;
    let r = &f.rocks;
    let mut s = Vec::new();
    let mut o = Options::default();
    o.create_if_missing(true);

    o.set_write_buffer_size(f.write_buffer_size);
    s.push(Setting::new("write_buffer_size", f.write_buffer_size, d::WRITE_BUFFER_SIZE));
    o.set_max_write_buffer_number(r.max_write_buffer_number);
    s.push(Setting::new("max_write_buffer_number", r.max_write_buffer_number, d::MAX_WRITE_BUFFER_NUMBER));
    o.set_min_write_buffer_number_to_merge(r.min_write_buffer_number_to_merge);
    s.push(Setting::new(
        "min_write_buffer_number_to_merge",
        r.min_write_buffer_number_to_merge,
        d::MIN_WRITE_BUFFER_NUMBER_TO_MERGE,
    ));
    o.set_max_background_jobs(int(f.max_background_jobs));
    s.push(Setting::new("max_background_jobs", f.max_background_jobs, d::MAX_BACKGROUND_JOBS));
    o.set_max_subcompactions(r.subcompactions);
    s.push(Setting::new("max_subcompactions", r.subcompactions, d::MAX_SUBCOMPACTIONS));
    o.set_target_file_size_base(f.target_file_size_base);
    s.push(Setting::new("target_file_size_base", f.target_file_size_base, d::TARGET_FILE_SIZE_BASE));
    o.set_max_bytes_for_level_base(f.max_bytes_for_level_base);
    s.push(Setting::new("max_bytes_for_level_base", f.max_bytes_for_level_base, d::MAX_BYTES_FOR_LEVEL_BASE));
    o.set_max_bytes_for_level_multiplier(r.max_bytes_for_level_multiplier);
    s.push(Setting::new(
        "max_bytes_for_level_multiplier",
        r.max_bytes_for_level_multiplier,
        d::MAX_BYTES_FOR_LEVEL_MULTIPLIER,
    ));
    o.set_level_zero_file_num_compaction_trigger(r.level0_file_num_compaction_trigger);
    s.push(Setting::new(
        "level0_file_num_compaction_trigger",
        r.level0_file_num_compaction_trigger,
        d::L0_COMPACTION_TRIGGER,
    ));
    o.set_level_zero_slowdown_writes_trigger(r.level0_slowdown_writes_trigger);
    s.push(Setting::new("level0_slowdown_writes_trigger", r.level0_slowdown_writes_trigger, d::L0_SLOWDOWN_TRIGGER));
    o.set_level_zero_stop_writes_trigger(r.level0_stop_writes_trigger);
    s.push(Setting::new("level0_stop_writes_trigger", r.level0_stop_writes_trigger, d::L0_STOP_TRIGGER));
    o.set_num_levels(r.num_levels);
    s.push(Setting::new("num_levels", r.num_levels, d::NUM_LEVELS));
    o.set_level_compaction_dynamic_level_bytes(r.level_compaction_dynamic_level_bytes);
    s.push(Setting::new(
        "level_compaction_dynamic_level_bytes",
        r.level_compaction_dynamic_level_bytes,
        d::DYNAMIC_LEVEL_BYTES,
    ));
    let (comp, comp_name) = compression(&f.compression_type)?;
    o.set_compression_type(comp);
    s.push(Setting::new("compression", comp_name, d::COMPRESSION));

    o.set_enable_pipelined_write(r.enable_pipelined_write);
    s.push(Setting::new("enable_pipelined_write", r.enable_pipelined_write, d::PIPELINED_WRITE));
    o.set_unordered_write(r.unordered_write);
    s.push(Setting::new("unordered_write", r.unordered_write, d::UNORDERED_WRITE));
    o.set_allow_concurrent_memtable_write(r.allow_concurrent_memtable_write);
    s.push(Setting::new(
        "allow_concurrent_memtable_write",
        r.allow_concurrent_memtable_write,
        d::CONCURRENT_MEMTABLE_WRITE,
    ));
    o.set_enable_write_thread_adaptive_yield(r.enable_write_thread_adaptive_yield);
    s.push(Setting::new("enable_write_thread_adaptive_yield", r.enable_write_thread_adaptive_yield, d::ADAPTIVE_YIELD));
    o.set_memtable_prefix_bloom_ratio(r.memtable_bloom_size_ratio);
    s.push(Setting::new("memtable_prefix_bloom_size_ratio", r.memtable_bloom_size_ratio, d::MEMTABLE_BLOOM_RATIO));
    o.set_memtable_whole_key_filtering(r.memtable_whole_key_filtering);
    s.push(Setting::new(
        "memtable_whole_key_filtering",
        r.memtable_whole_key_filtering,
        d::MEMTABLE_WHOLE_KEY_FILTERING,
    ));
    o.set_use_direct_reads(r.use_direct_reads);
    s.push(Setting::new("use_direct_reads", r.use_direct_reads, d::USE_DIRECT_READS));
    o.set_use_direct_io_for_flush_and_compaction(r.use_direct_io_for_flush_and_compaction);
    s.push(Setting::new(
        "use_direct_io_for_flush_and_compaction",
        r.use_direct_io_for_flush_and_compaction,
        d::DIRECT_IO_FLUSH_COMPACTION,
    ));
    o.set_bytes_per_sync(r.bytes_per_sync);
    s.push(Setting::new("bytes_per_sync", r.bytes_per_sync, d::BYTES_PER_SYNC));
    o.set_wal_bytes_per_sync(r.wal_bytes_per_sync);
    s.push(Setting::new("wal_bytes_per_sync", r.wal_bytes_per_sync, d::WAL_BYTES_PER_SYNC));
    if let Some(w) = &r.wal_dir {
        // RocksDB makes only the last component of a missing WAL directory.
        if let Err(e) = std::fs::create_dir_all(w) {
            eprintln!("strata-bench: creating --wal_dir {}: {e}", w.display());
        }
        o.set_wal_dir(w);
    }
    s.push(Setting::new(
        "wal_dir",
        r.wal_dir.as_ref().map_or("(db dir)".to_string(), |w| w.display().to_string()),
        "(db dir)",
    ));
    o.set_max_open_files(r.open_files);
    s.push(Setting::new("max_open_files", r.open_files, d::MAX_OPEN_FILES));
    o.set_optimize_filters_for_hits(r.optimize_filters_for_hits);
    s.push(Setting::new("optimize_filters_for_hits", r.optimize_filters_for_hits, d::OPTIMIZE_FILTERS_FOR_HITS));

    // The block-based table, as db_bench builds it.
    let mut t = BlockBasedOptions::default();
    let capacity = usize::try_from(f.cache_size).unwrap_or(usize::MAX);
    let (cache, cache_desc) = match r.cache_type.as_str() {
        "lru_cache" => {
            let mut lru = LruCacheOptions::default();
            lru.set_capacity(capacity);
            lru.set_num_shard_bits(r.cache_numshardbits);
            (Cache::new_lru_cache_opts(&lru), format!("{} B LRU", f.cache_size))
        }
        // db_bench: "fixed_" estimates an entry as one block; otherwise 0 = automatic.
        "fixed_hyper_clock_cache" => (
            Cache::new_hyper_clock_cache(capacity, r.block_size),
            format!("{} B HyperClockCache (fixed)", f.cache_size),
        ),
        _ => (Cache::new_hyper_clock_cache(capacity, 0), format!("{} B HyperClockCache", f.cache_size)),
    };
    t.set_block_cache(&cache);
    s.push(Setting::new("block_cache", cache_desc, d::BLOCK_CACHE));
    t.set_block_size(r.block_size);
    s.push(Setting::new("block_size", r.block_size, d::BLOCK_SIZE));
    let filter = if f.bloom_bits > 0 {
        t.set_bloom_filter(f.bloom_bits as f64, false);
        format!("bloom {} bits/key", f.bloom_bits)
    } else {
        "none".to_string()
    };
    s.push(Setting::new("filter_policy", filter, d::FILTER));
    t.set_whole_key_filtering(r.whole_key_filtering);
    s.push(Setting::new("whole_key_filtering", r.whole_key_filtering, d::WHOLE_KEY_FILTERING));
    let index = if r.data_block_index_type == 1 {
        t.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
        t.set_data_block_hash_ratio(r.data_block_hash_table_util_ratio);
        format!("binary search and hash (util ratio {})", r.data_block_hash_table_util_ratio)
    } else {
        "binary search".to_string()
    };
    s.push(Setting::new("data_block_index_type", index, d::DATA_BLOCK_INDEX));
    t.set_cache_index_and_filter_blocks(r.cache_index_and_filter_blocks);
    s.push(Setting::new(
        "cache_index_and_filter_blocks",
        r.cache_index_and_filter_blocks,
        d::CACHE_INDEX_AND_FILTER_BLOCKS,
    ));
    t.set_pin_l0_filter_and_index_blocks_in_cache(r.pin_l0_filter_and_index_blocks_in_cache);
    s.push(Setting::new(
        "pin_l0_filter_and_index_blocks_in_cache",
        r.pin_l0_filter_and_index_blocks_in_cache,
        d::PIN_L0,
    ));
    if r.format_version > 0 {
        t.set_format_version(r.format_version);
    }
    let fv = if r.format_version > 0 { r.format_version } else { d::FORMAT_VERSION };
    s.push(Setting::new("format_version", fv, d::FORMAT_VERSION));
    o.set_block_based_table_factory(&t);

    // Per operation.
    s.push(Setting::new("verify_checksums (reads)", r.verify_checksum, d::VERIFY_CHECKSUMS));
    s.push(Setting::new("async_io (reads)", r.async_io, d::ASYNC_IO));
    s.push(Setting::new("WAL", if f.disable_wal { "off" } else { "on" }, "on"));
    s.push(Setting::new("sync (writes)", f.sync, false));
    s.push(Setting::new(
        "multireadrandom API",
        if r.multiread_batched { "batched MultiGet" } else { "vector MultiGet" },
        "batched MultiGet",
    ));
    Ok((o, s))
}

impl RocksEngine {
    /// Opens (creating) the database at `dir`.
    pub fn open(dir: &Path, f: &Flags) -> Result<RocksEngine> {
        let (opts, settings) = options(f)?;
        // Opened with the default column family named, so that the batched
        // MultiGet (which takes a column family) can be handed it. Its
        // descriptor carries the same options: `DB::open_cf` by name gives
        // each named family `Options::default()`, and every column-family
        // option (compression, memtable, table factory with the block cache
        // and bloom filter) then silently fell back to RocksDB's defaults.
        let default_cf = ColumnFamilyDescriptor::new("default", opts.clone());
        let (parts, open_opts, families) = parts::column_families(&opts, dir, f.partitions)?;
        let db = DB::open_cf_descriptors(&open_opts, dir, std::iter::once(default_cf).chain(families))
            .with_context(|| format!("opening RocksDB at {}", dir.display()))?;
        let write = |sync: bool| {
            let mut w = WriteOptions::default();
            w.set_sync(sync);
            w.disable_wal(f.disable_wal);
            w
        };
        let mut read = ReadOptions::default();
        read.set_verify_checksums(f.rocks.verify_checksum);
        read.set_async_io(f.rocks.async_io);
        Ok(RocksEngine {
            db,
            parts,
            dir: dir.to_path_buf(),
            batched_multiget: f.rocks.multiread_batched,
            verify_checksums: f.rocks.verify_checksum,
            async_io: f.rocks.async_io,
            write_async: write(false),
            write_sync: write(true),
            read,
            user_bytes: AtomicU64::new(0),
            settings,
        })
    }

    fn wo(&self, sync: bool) -> &WriteOptions {
        if sync {
            &self.write_sync
        } else {
            &self.write_async
        }
    }

    /// Fresh read options (iterators take theirs by value).
    fn ro(&self) -> ReadOptions {
        let mut r = ReadOptions::default();
        r.set_verify_checksums(self.verify_checksums);
        r.set_async_io(self.async_io);
        r
    }

    fn property(&self, name: &str) -> String {
        self.db.property_value(name).ok().flatten().unwrap_or_default()
    }

    /// The version the library wrote into the database's newest OPTIONS
    /// file (`rocksdb_version=11.8.1`), else the bundled sources' version.
    fn version(&self) -> String {
        let newest = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
            .max_by_key(|e| e.file_name());
        newest
            .and_then(|e| std::fs::read_to_string(e.path()).ok())
            .and_then(|text| {
                text.lines().find_map(|l| l.trim().strip_prefix("rocksdb_version=").map(|v| v.trim().to_string()))
            })
            .unwrap_or_else(|| env!("STRATA_BENCH_ROCKSDB_VERSION").to_string())
    }
}

/// How RocksDB was built: the flags librocksdb-sys compiled it with, as
/// recorded by build.rs.
pub fn build_description() -> String {
    let flags = env!("STRATA_BENCH_ROCKSDB_CFLAGS");
    let ndebug = if flags.contains("-DNDEBUG") {
        "NDEBUG (assertions off)".to_string()
    } else if flags == "unknown" {
        "NDEBUG (defined by librocksdb-sys's build.rs; compiler flags not logged: build with CC_ENABLE_DEBUG_OUTPUT=1)"
            .to_string()
    } else {
        "assertions ON (no -DNDEBUG)".to_string()
    };
    // cc passes cargo's opt-level for librocksdb-sys: -O3 in the release profile.
    let kind = match flags.split_whitespace().find(|w| w.starts_with("-O")) {
        Some("-O2" | "-O3") => "release".to_string(),
        Some(o) => format!("NOT optimized for speed ({o})"),
        None if cfg!(debug_assertions) => "debug profile (opt-level of this build)".to_string(),
        None => "release profile".to_string(),
    };
    format!(
        "{kind}, {ndebug}, compiled as `{flags}`, bundled by librocksdb-sys {} (rocksdb crate {})",
        env!("STRATA_BENCH_LIBROCKSDB_SYS_VERSION"),
        env!("STRATA_BENCH_ROCKSDB_CRATE_VERSION")
    )
}

impl Engine for RocksEngine {
    fn name(&self) -> String {
        "rocksdb".into()
    }

    fn info(&self) -> EngineInfo {
        EngineInfo { version: self.version(), build: build_description(), settings: self.settings.clone() }
    }

    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        self.user_bytes.fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        Ok(self.db.put_opt(key, value, self.wo(sync))?)
    }

    fn delete(&self, key: &[u8], sync: bool) -> Result<()> {
        self.user_bytes.fetch_add(key.len() as u64, Ordering::Relaxed);
        Ok(self.db.delete_opt(key, self.wo(sync))?)
    }

    fn write(&self, ops: &[BatchOp<'_>], sync: bool) -> Result<()> {
        let mut b = WriteBatch::default();
        let mut bytes = 0;
        for op in ops {
            match op {
                BatchOp::Put(k, v) => {
                    bytes += k.len() + v.len();
                    b.put(k, v);
                }
                BatchOp::Delete(k) => {
                    bytes += k.len();
                    b.delete(k);
                }
            }
        }
        self.user_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(self.db.write_opt(b, self.wo(sync))?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_pinned_opt(key, &self.read)?.map(|v| v.to_vec()))
    }

    fn get_visit(&self, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool> {
        // db_bench's readrandom reads into a PinnableSlice: no copy.
        Ok(self.db.get_pinned_opt(key, &self.read)?.map(|v| visit(&v)).is_some())
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = vec![None; keys.len()];
        self.multi_get_visit(keys, &mut |i, v| out[i] = v.map(<[u8]>::to_vec))?;
        Ok(out)
    }

    fn multi_get_visit(&self, keys: &[Vec<u8>], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        if self.batched_multiget {
            let cf = self.db.cf_handle("default").ok_or_else(|| anyhow!("no default column family handle"))?;
            let values = self.db.batched_multi_get_cf_opt(cf, keys.iter(), false, &self.read);
            for (i, v) in values.into_iter().enumerate() {
                let v = v.map_err(|e| anyhow!("multi_get: {e}"))?;
                visit(i, v.as_deref());
            }
        } else {
            for (i, v) in self.db.multi_get_opt(keys, &self.read).into_iter().enumerate() {
                let v = v.map_err(|e| anyhow!("multi_get: {e}"))?;
                visit(i, v.as_deref());
            }
        }
        Ok(())
    }

    fn scan(&self, start: Option<&[u8]>, reverse: bool, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        let mut it = self.db.raw_iterator_opt(self.ro());
        match (start, reverse) {
            (Some(s), false) => it.seek(s),
            (Some(s), true) => it.seek_for_prev(s),
            (None, false) => it.seek_to_first(),
            (None, true) => it.seek_to_last(),
        }
        let mut n = 0;
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            n += 1;
            if !visit(k, v) {
                break;
            }
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status().map_err(|e| anyhow!("iteration failed: {e}"))?;
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        self.flush_parts()
    }

    fn compact(&self) -> Result<()> {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
        self.compact_parts()
    }

    fn wait_for_compactions(&self) -> Result<()> {
        // db_bench's waitforcompaction: RocksDB's own WaitForCompact.
        let mut w = WaitForCompactOptions::default();
        w.set_flush(true);
        self.db.wait_for_compact(&w).map_err(|e| anyhow!("wait_for_compact: {e}"))
    }

    fn stats(&self) -> EngineStats {
        let text = self.property("rocksdb.stats");
        let gb = |x: f64| (x * 1e9) as u64;
        // "Cumulative compaction: X GB write" counts flushes and compactions (2-decimal GB).
        let device = gb(gb_after(&text, "Cumulative compaction:"));
        let user = self.user_bytes.load(Ordering::Relaxed);
        let mut levels = level_stats(&self.property("rocksdb.levelstats"));
        if levels.is_empty() {
            levels = (0..7)
                .map(|l| Level {
                    level: l,
                    files: self.property(&format!("rocksdb.num-files-at-level{l}")).trim().parse().unwrap_or(0),
                    bytes: 0,
                })
                .collect();
        }
        let int = |name: &str| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
        EngineStats {
            user_bytes_written: user,
            device_bytes_written: device,
            pm_bytes_written: 0,
            write_amp: if user > 0 { device as f64 / user as f64 } else { 0.0 },
            nonempty_levels: levels.iter().filter(|l| l.files > 0).count(),
            levels,
            stall_micros: stall_micros(&text),
            // Running jobs, not totals: enough for the runner's "settled" check.
            flushes: int("rocksdb.num-running-flushes"),
            compactions: int("rocksdb.num-running-compactions"),
            pm_placement: String::new(),
            reads: None,
            // Indexes and filters live in the table readers (db_bench's default,
            // cache_index_and_filter_blocks off), outside the block cache.
            index_dram_bytes: Some(int("rocksdb.estimate-table-readers-mem")),
            pm_index_bytes: None,
            tables: None,
        }
    }

    fn stats_text(&self) -> String {
        self.property("rocksdb.stats")
    }

    fn close(&self) -> Result<()> {
        self.db.flush_wal(true).map_err(|e| anyhow!("closing RocksDB: {e}"))
    }

    fn pm_dir(&self) -> Option<PathBuf> {
        None
    }

    fn put_in(&self, part: usize, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        self.put_cf(part, key, value, sync)
    }

    fn write_in(&self, ops: &[(usize, BatchOp<'_>)], sync: bool) -> Result<()> {
        self.write_cf(ops, sync)
    }

    fn get_visit_in(&self, part: usize, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.get_visit_cf(part, key, visit)
    }

    fn scan_in(&self, part: usize, start: &[u8], visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        self.scan_cf(part, start, visit)
    }

    fn delete_range_in(&self, part: usize, start: &[u8], end: &[u8]) -> Result<()> {
        self.delete_range_cf(part, start, end)
    }

    fn drop_partition(&mut self, part: usize) -> Result<()> {
        self.drop_cf(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_bench_defaults_differ_from_rocksdbs_only_where_db_bench_does() {
        let f = Flags::parse_from_args(["strata-bench", "--engine=rocksdb", "--compression_type=none"]).unwrap();
        let (_, s) = options(&f).unwrap();
        let nd: Vec<&str> = s.iter().filter(|s| s.is_non_default()).map(|s| s.name.as_str()).collect();
        assert_eq!(
            nd,
            ["level_compaction_dynamic_level_bytes", "compression", "enable_pipelined_write", "block_cache"]
        );
    }

    /// The trident suite's reads: direct reads, a 64 MiB block cache, async
    /// reads and the batched MultiGet, each in effect as asked.
    #[test]
    fn cold_read_flags_reach_the_options() {
        let f = Flags::parse_from_args([
            "strata-bench",
            "--engine=rocksdb",
            "--use_direct_reads=1",
            "--cache_size=67108864",
            "--async_io=1",
            "--multiread_batched=1",
        ])
        .unwrap();
        let (_, s) = options(&f).unwrap();
        let value = |name: &str| s.iter().find(|x| x.name == name).map(|x| x.value.clone()).unwrap_or_default();
        assert_eq!(value("use_direct_reads"), "true");
        assert_eq!(value("block_cache"), "67108864 B HyperClockCache");
        assert_eq!(value("async_io (reads)"), "true");
        assert_eq!(value("multireadrandom API"), "batched MultiGet");
        let (_, s) = options(&Flags::parse_from_args(["strata-bench", "--engine=rocksdb"]).unwrap()).unwrap();
        assert!(!s.iter().find(|x| x.name == "async_io (reads)").unwrap().is_non_default());
    }

    /// The options RocksDB runs with (as it writes them to its OPTIONS
    /// file) are the ones the flags set, for the default column family too:
    /// opening the family by name once gave it RocksDB's defaults (LZ4, no
    /// bloom filter, a 32 MiB cache), and reads ran at half db_bench's speed.
    #[test]
    fn the_default_column_family_runs_with_the_flags_options() {
        let dir = tempfile::tempdir().unwrap();
        let f = Flags::parse_from_args([
            "strata-bench",
            "--engine=rocksdb",
            "--compression_type=none",
            "--bloom_bits=10",
            "--write_buffer_size=12345678",
            "--block_size=8192",
        ])
        .unwrap();
        let e = RocksEngine::open(dir.path(), &f).unwrap();
        e.put(b"k", b"v", false).unwrap();
        e.close().unwrap();
        drop(e);
        let options = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
            .max_by_key(|e| e.file_name())
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .unwrap();
        let cf = options.split("[CFOptions \"default\"]").nth(1).expect("a default column family section");
        for want in
            ["compression=kNoCompression", "write_buffer_size=12345678", "block_size=8192", "filter_policy=bloomfilter"]
        {
            assert!(cf.contains(want), "{want} missing from the default column family's options");
        }
    }

    #[test]
    fn engine_build_names_ndebug() {
        let b = build_description();
        assert!(b.starts_with("release"), "{b}");
        assert!(b.contains("NDEBUG"), "{b}");
        assert!(b.contains(env!("STRATA_BENCH_LIBROCKSDB_SYS_VERSION")), "{b}");
    }
}
