//! The engine seam: every workload talks to an [`Engine`], so StrataKV,
//! fjall and (with the `rocksdb` feature) RocksDB run through identical
//! code paths.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use stratakv::{Compression, Db, IndexKind, L0Kind, Options, Partition, WriteBatch, WriteOptions};

use crate::flags::Flags;

/// One update of a write batch.
#[derive(Clone, Copy, Debug)]
pub enum BatchOp<'a> {
    /// Set key to value.
    Put(&'a [u8], &'a [u8]),
    /// Remove key.
    Delete(&'a [u8]),
}

/// Per-level shape of the tree.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Level {
    /// Level number.
    pub level: usize,
    /// Files in the level.
    pub files: usize,
    /// Bytes in those files.
    pub bytes: u64,
}

/// Counters an engine reports about itself; cumulative since open.
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    /// Key and value bytes written by the user.
    pub user_bytes_written: u64,
    /// Bytes the engine wrote to the SSD side (tables, MANIFEST).
    pub device_bytes_written: u64,
    /// Bytes stored into PM.
    pub pm_bytes_written: u64,
    /// Engine-reported device/user ratio.
    pub write_amp: f64,
    /// Every level, L0 first.
    pub levels: Vec<Level>,
    /// Levels holding data.
    pub nonempty_levels: usize,
    /// Time writers were stopped by back-pressure, microseconds.
    pub stall_micros: u64,
    /// Memtable flushes.
    pub flushes: u64,
    /// Compactions.
    pub compactions: u64,
    /// Where the PM region lives (`file`, `shm`, `dax`, or empty).
    pub pm_placement: String,
    /// Block reads of point lookups, where the engine counts them.
    pub reads: Option<ReadCounts>,
    /// DRAM held by table indexes and filters (outside the block cache), if reported.
    pub index_dram_bytes: Option<u64>,
    /// PM held by a global index (single-level's B+-tree), if the engine has one.
    pub pm_index_bytes: Option<u64>,
    /// StrataKV's tables by index kind, with index and filter DRAM apart.
    pub tables: Option<TableCensus>,
}

/// StrataKV's live tables by index kind (the trident suite's figures).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TableCensus {
    /// Tables with a learned index.
    pub learned_tables: u64,
    /// Tables with a binary index.
    pub binary_tables: u64,
    /// DRAM of their indexes alone.
    pub index_bytes: u64,
    /// DRAM of their bloom filters.
    pub filter_bytes: u64,
    /// How a multi-get reads blocks together: io_uring or threads.
    pub read_batching: String,
}

/// What point lookups cost in data blocks, cumulative since open.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadCounts {
    /// Point lookups.
    pub gets: u64,
    /// Data blocks users read (cache hits included).
    pub blocks: u64,
    /// Of those, read from the table files.
    pub from_file: u64,
}

/// One option the harness sets on an engine: its value and the library's
/// default, so reports can list every setting that is not the default.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Setting {
    /// The option's name in the engine's own API.
    pub name: String,
    /// The value in effect.
    pub value: String,
    /// The library's default.
    pub default: String,
}

impl Setting {
    /// A setting from anything printable.
    pub fn new(name: &str, value: impl std::fmt::Display, default: impl std::fmt::Display) -> Setting {
        Setting { name: name.to_string(), value: value.to_string(), default: default.to_string() }
    }

    /// Whether the value differs from the library's default.
    pub fn is_non_default(&self) -> bool {
        self.value != self.default
    }
}

/// What an engine is: for the report header and the JSON.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct EngineInfo {
    /// The library's version (RocksDB "11.8.1", fjall "3.1.13", stratakv "0.1.0").
    pub version: String,
    /// How it was built (profile, optimization, assertions, who built it).
    pub build: String,
    /// Every option the harness sets, with the library's default.
    pub settings: Vec<Setting>,
}

impl EngineInfo {
    /// The settings that are not the library's defaults.
    pub fn non_default(&self) -> impl Iterator<Item = &Setting> {
        self.settings.iter().filter(|s| s.is_non_default())
    }
}

/// How strata-bench itself (and so StrataKV and fjall, compiled into it) was built.
pub fn own_build() -> &'static str {
    env!("STRATA_BENCH_BUILD")
}

/// What a benchmark needs from a key-value engine. Safe to share between threads.
pub trait Engine: Send + Sync {
    /// Engine name for reports.
    fn name(&self) -> String;
    /// Version, build and settings.
    fn info(&self) -> EngineInfo;
    /// Sets one key.
    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()>;
    /// Removes one key.
    fn delete(&self, key: &[u8], sync: bool) -> Result<()>;
    /// Applies a batch atomically.
    fn write(&self, ops: &[BatchOp<'_>], sync: bool) -> Result<()>;
    /// Reads one key.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Reads several keys at one point in time.
    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>>;
    /// Reads one key and shows its value to `visit` without copying it out
    /// where the engine's API allows (RocksDB's pinned reads, fjall's
    /// shared slices); returns whether it was found.
    fn get_visit(&self, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.get(key)?.map(|v| visit(&v)).is_some())
    }
    /// [`Engine::multi_get`], showing `visit(index, value)` each key's value
    /// (None if missing) without copying where the engine allows.
    fn multi_get_visit(&self, keys: &[Vec<u8>], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        for (i, v) in self.multi_get(keys)?.iter().enumerate() {
            visit(i, v.as_deref());
        }
        Ok(())
    }
    /// Iterates from `start` (the first key, or the last when `reverse`
    /// and `start` is None) calling `visit(key, value)` until it returns
    /// false or the keys run out; a fresh iterator each call, as db_bench's
    /// seekrandom makes. Returns the number of entries visited.
    fn scan(&self, start: Option<&[u8]>, reverse: bool, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64>;
    /// Writes the memtable out and waits for it.
    fn flush(&self) -> Result<()>;
    /// Compacts the whole key space.
    fn compact(&self) -> Result<()>;
    /// Blocks until no compaction is running or due, where the engine can
    /// tell; the caller also waits for its counters to settle.
    fn wait_for_compactions(&self) -> Result<()> {
        Ok(())
    }
    /// Counters since open.
    fn stats(&self) -> EngineStats;
    /// The engine's own human-readable statistics.
    fn stats_text(&self) -> String;
    /// Stops background work and releases the database, reporting errors.
    fn close(&self) -> Result<()>;
    /// The directory of the PM region file, if the engine has one.
    fn pm_dir(&self) -> Option<PathBuf>;

    // Partitions (`--partitions`: StrataKV partitions, RocksDB column
    // families) and range deletes. `part` is 0 .. --partitions, always 0
    // without partitions (the engine's own key space). Engines without
    // them run part 0 through the methods above and refuse the rest.

    /// [`Engine::put`] into partition `part`.
    fn put_in(&self, part: usize, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        only_part_zero(self, part)?;
        self.put(key, value, sync)
    }
    /// [`Engine::write`] of a batch whose updates name their partitions.
    fn write_in(&self, ops: &[(usize, BatchOp<'_>)], sync: bool) -> Result<()> {
        for (part, _) in ops {
            only_part_zero(self, *part)?;
        }
        let plain: Vec<BatchOp<'_>> = ops.iter().map(|(_, op)| *op).collect();
        self.write(&plain, sync)
    }
    /// [`Engine::get_visit`] in partition `part` (a dropped one holds nothing).
    fn get_visit_in(&self, part: usize, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool> {
        only_part_zero(self, part)?;
        self.get_visit(key, visit)
    }
    /// [`Engine::scan`] forwards from `start` within partition `part`.
    fn scan_in(&self, part: usize, start: &[u8], visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        only_part_zero(self, part)?;
        self.scan(Some(start), false, visit)
    }
    /// Removes every key of partition `part` in `[start, end)` with one
    /// range tombstone (StrataKV's delete_range, RocksDB's DeleteRange).
    fn delete_range_in(&self, _part: usize, _start: &[u8], _end: &[u8]) -> Result<()> {
        Err(anyhow!("{} has no range delete in strata-bench", self.name()))
    }
    /// Drops partition `part` with its keys (StrataKV's drop_partition,
    /// RocksDB's DropColumnFamily); later calls naming it fail.
    fn drop_partition(&mut self, _part: usize) -> Result<()> {
        Err(anyhow!("{} has no partitions in strata-bench", self.name()))
    }
    /// Range tombstones live and tables deleted whole under them, where the
    /// engine counts them.
    fn range_counts(&self) -> Option<(u64, u64)> {
        None
    }
}

fn only_part_zero<E: Engine + ?Sized>(e: &E, part: usize) -> Result<()> {
    if part == 0 {
        Ok(())
    } else {
        Err(anyhow!("{} has no partition {part} (--partitions is not supported by it)", e.name()))
    }
}

/// The name of partition (column family) `part` in every engine.
pub fn partition_name(part: usize) -> String {
    format!("p{part:04}")
}

/// Which of partitions `0..n` to open: all of them, to be created, when
/// the first is not among `existing` (a new database); else those that
/// exist (the others were dropped). Fails if the database has partitions
/// other than these.
pub fn partitions_to_open(existing: &[String], n: usize) -> Result<Vec<Option<String>>> {
    let names: Vec<String> = (0..n).map(partition_name).collect();
    if n <= 1 {
        return Ok(Vec::new());
    }
    if let Some(other) = existing.iter().find(|e| e.as_str() != "default" && !names.contains(e)) {
        bail!("the database has partition {other:?}, which --partitions={n} does not name");
    }
    let fresh = !existing.contains(&names[0]);
    Ok(names.into_iter().map(|name| (fresh || existing.contains(&name)).then_some(name)).collect())
}

/// StrataKV behind the [`Engine`] seam.
pub struct StrataEngine {
    db: Db,
    /// `--partitions` above 1: partition i, or None once dropped.
    parts: Vec<Option<Partition>>,
    profile: String,
    pm_dir: PathBuf,
    settings: Vec<Setting>,
}

/// The PM region file name inside `pm_dir` (stratakv's `REGION_FILE`).
pub const STRATA_REGION_FILE: &str = "strata.pm";

/// The engine options the flags describe.
pub fn strata_options(f: &Flags) -> Result<Options> {
    let mut o = Options { pm_dir: f.pm_dir.clone(), ..Options::default() };
    if let Some(p) = &f.profile {
        o.l0 = L0Kind::parse(p).ok_or_else(|| anyhow!("unknown --profile {p:?}"))?;
    }
    if f.pm_size > 0 {
        o.pm_size = f.pm_size;
    }
    o.pm_write_latency_ns = f.pm_write_latency_ns;
    if f.pm_regions > 0 {
        o.pm_regions = f.pm_regions;
    }
    o.listdb_zipper = f.listdb_zipper;
    if let Some(mb) = f.listdb_lookup_cache_mb {
        o.listdb_lookup_cache_bytes = mb << 20;
    }
    o.matrix_hash_index = f.matrix_hash_index;
    if f.max_runs > 0 {
        o.max_runs = f.max_runs;
    }
    if let Some(nice) = f.background_nice {
        o.background_nice = nice;
    }
    o.write_buffer_size = f.write_buffer_size;
    o.block_cache_bytes = f.cache_size;
    o.bloom_bits_per_key = f.bloom_bits_per_key();
    o.compression = Compression::parse(&f.compression_type)
        .ok_or_else(|| anyhow!("--compression_type={} is not supported (none, snappy, lz4)", f.compression_type))?;
    o.target_file_size = f.target_file_size_base;
    o.block_size = f.rocks.block_size;
    o.table_index = if f.index_type == "learned" { IndexKind::Learned } else { IndexKind::Binary };
    o.use_direct_reads = f.rocks.use_direct_reads;
    o.max_bytes_for_level_base = f.max_bytes_for_level_base;
    o.background_compactions = f.max_background_jobs.saturating_sub(1).max(1);
    o.validate().map_err(|e| anyhow!("engine options: {e}"))?;
    Ok(o)
}

/// The options [`strata_options`] sets, against `Options::default()`.
pub fn strata_settings(o: &Options) -> Vec<Setting> {
    let d = Options::default();
    let dbg = |v: &dyn std::fmt::Debug| format!("{v:?}");
    vec![
        Setting::new("l0", o.l0.name(), d.l0.name()),
        Setting::new("pm_dir", dbg(&o.pm_dir), dbg(&d.pm_dir)),
        Setting::new("pm_size", o.pm_size, d.pm_size),
        Setting::new("pm_write_latency_ns", o.pm_write_latency_ns, d.pm_write_latency_ns),
        Setting::new("matrix_hash_index", o.matrix_hash_index, d.matrix_hash_index),
        Setting::new("pm_regions", o.pm_regions, d.pm_regions),
        Setting::new("listdb_zipper", o.listdb_zipper, d.listdb_zipper),
        Setting::new("listdb_lookup_cache_bytes", o.listdb_lookup_cache_bytes, d.listdb_lookup_cache_bytes),
        Setting::new("max_runs", o.max_runs, d.max_runs),
        Setting::new("background_nice", o.background_nice, d.background_nice),
        Setting::new("write_buffer_size", o.write_buffer_size, d.write_buffer_size),
        Setting::new("block_cache_bytes", o.block_cache_bytes, d.block_cache_bytes),
        Setting::new("bloom_bits_per_key", o.bloom_bits_per_key, d.bloom_bits_per_key),
        Setting::new("compression", dbg(&o.compression), dbg(&d.compression)),
        Setting::new("block_size", o.block_size, d.block_size),
        Setting::new("table_index", dbg(&o.table_index), dbg(&d.table_index)),
        Setting::new("use_direct_reads", o.use_direct_reads, d.use_direct_reads),
        Setting::new("target_file_size", o.target_file_size, d.target_file_size),
        Setting::new("max_bytes_for_level_base", o.max_bytes_for_level_base, d.max_bytes_for_level_base),
        Setting::new("background_compactions", o.background_compactions, d.background_compactions),
    ]
}

impl StrataEngine {
    /// Opens (creating) the database at `dir`.
    pub fn open(dir: &Path, f: &Flags) -> Result<StrataEngine> {
        let opts = strata_options(f)?;
        let profile = opts.l0.name().to_string();
        let settings = strata_settings(&opts);
        let db = Db::open(dir, opts).with_context(|| format!("opening StrataKV at {}", dir.display()))?;
        let pm_dir = f.pm_dir.clone().unwrap_or_else(|| dir.join("pm"));
        let existing = db.list_partitions();
        let parts = partitions_to_open(&existing, f.partitions)?
            .into_iter()
            .map(|name| match name {
                Some(n) if existing.contains(&n) => db.partition(&n).map(Some),
                Some(n) => db.create_partition(&n).map(Some),
                None => Ok(None),
            })
            .collect::<stratakv::Result<Vec<_>>>()
            .context("opening the partitions")?;
        Ok(StrataEngine { db, parts, profile, pm_dir, settings })
    }

    /// Partition `part`, None if it was dropped (reads find nothing there).
    fn live_part(&self, part: usize) -> Result<Option<&Partition>> {
        self.parts.get(part).map(Option::as_ref).ok_or_else(|| anyhow!("no partition {part} (beyond --partitions)"))
    }

    /// Partition `part` for a write: an error if it was dropped.
    fn part(&self, part: usize) -> Result<&Partition> {
        self.live_part(part)?.ok_or_else(|| anyhow!("partition {part} was dropped"))
    }
}

/// Removes a StrataKV database: its directory and its PM region file.
pub fn destroy_strata(dir: &Path, pm_dir: Option<&Path>) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    if let Some(p) = pm_dir {
        let region: PathBuf = p.join(STRATA_REGION_FILE);
        if region.exists() {
            std::fs::remove_file(&region).with_context(|| format!("removing {}", region.display()))?;
        }
    }
    Ok(())
}

impl Engine for StrataEngine {
    fn name(&self) -> String {
        format!("strata/{}", self.profile)
    }

    fn info(&self) -> EngineInfo {
        EngineInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            build: format!("stratakv built with strata-bench: {}", own_build()),
            settings: self.settings.clone(),
        }
    }

    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        Ok(self.db.put_opt(key, value, &WriteOptions { sync })?)
    }

    fn delete(&self, key: &[u8], sync: bool) -> Result<()> {
        Ok(self.db.delete_opt(key, &WriteOptions { sync })?)
    }

    fn write(&self, ops: &[BatchOp<'_>], sync: bool) -> Result<()> {
        let mut b = WriteBatch::new();
        for op in ops {
            match op {
                BatchOp::Put(k, v) => b.put(k, v),
                BatchOp::Delete(k) => b.delete(k),
            };
        }
        Ok(self.db.write_opt(&b, &WriteOptions { sync })?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        Ok(self.db.multi_get(keys)?)
    }

    fn scan(&self, start: Option<&[u8]>, reverse: bool, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        // stratakv's positionable `Cursor` is not nameable outside the crate
        // (db::iter is private), so seeks go through a range iterator.
        let mut it = match (start, reverse) {
            (Some(s), false) => self.db.iter(s..)?,
            (Some(s), true) => self.db.iter(..=s)?,
            (None, _) => self.db.iter(..)?,
        };
        let n = visit_iter(&mut it, reverse, visit);
        if let Err(e) = it.status() {
            return Err(anyhow!("iteration failed: {e}"));
        }
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        Ok(self.db.flush()?)
    }

    fn compact(&self) -> Result<()> {
        self.db.compact_range(..)?;
        // The default partition's range leaves the partitions' keys out.
        for p in self.parts.iter().flatten() {
            p.compact_range(..)?;
        }
        Ok(())
    }

    fn wait_for_compactions(&self) -> Result<()> {
        Ok(self.db.wait_for_compactions()?)
    }

    fn stats(&self) -> EngineStats {
        let s = self.db.stats();
        EngineStats {
            user_bytes_written: s.user_bytes_written,
            device_bytes_written: s.device_bytes_written,
            pm_bytes_written: s.pm_bytes_written,
            write_amp: s.write_amplification,
            levels: s.levels.iter().map(|l| Level { level: l.level, files: l.files, bytes: l.bytes }).collect(),
            nonempty_levels: s.nonempty_levels,
            stall_micros: s.stall_micros,
            flushes: s.flushes,
            compactions: s.compactions,
            pm_placement: s.pm_placement.to_string(),
            reads: Some(ReadCounts { gets: s.gets, blocks: s.data_blocks_read, from_file: s.data_blocks_from_file }),
            index_dram_bytes: Some(s.table_index_bytes + s.matrix_dram_bytes + s.listdb_cache_bytes),
            pm_index_bytes: (s.slm_tree_pm_bytes > 0).then_some(s.slm_tree_pm_bytes),
            tables: Some(TableCensus {
                learned_tables: s.learned_tables,
                binary_tables: s.binary_tables,
                index_bytes: s.table_index_only_bytes,
                filter_bytes: s.table_filter_bytes,
                read_batching: s.read_batching.to_string(),
            }),
        }
    }

    fn stats_text(&self) -> String {
        self.db.stats().to_string()
    }

    fn close(&self) -> Result<()> {
        self.db.clone().close().context("closing StrataKV")
    }

    fn pm_dir(&self) -> Option<PathBuf> {
        Some(self.pm_dir.clone())
    }

    fn put_in(&self, part: usize, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        if self.parts.is_empty() {
            only_part_zero(self, part)?;
            return self.put(key, value, sync);
        }
        Ok(self.part(part)?.put_opt(key, value, &WriteOptions { sync })?)
    }

    fn write_in(&self, ops: &[(usize, BatchOp<'_>)], sync: bool) -> Result<()> {
        let mut b = WriteBatch::new();
        for (part, op) in ops {
            if self.parts.is_empty() {
                only_part_zero(self, *part)?;
                match op {
                    BatchOp::Put(k, v) => b.put(k, v),
                    BatchOp::Delete(k) => b.delete(k),
                };
                continue;
            }
            let p = self.part(*part)?;
            match op {
                BatchOp::Put(k, v) => b.put_in(p, k, v),
                BatchOp::Delete(k) => b.delete_in(p, k),
            };
        }
        Ok(self.db.write_opt(&b, &WriteOptions { sync })?)
    }

    fn get_visit_in(&self, part: usize, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool> {
        if self.parts.is_empty() {
            only_part_zero(self, part)?;
            return self.get_visit(key, visit);
        }
        let Some(p) = self.live_part(part)? else { return Ok(false) };
        Ok(p.get(key)?.map(|v| visit(&v)).is_some())
    }

    fn scan_in(&self, part: usize, start: &[u8], visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        if self.parts.is_empty() {
            only_part_zero(self, part)?;
            return self.scan(Some(start), false, visit);
        }
        let Some(p) = self.live_part(part)? else { return Ok(0) };
        let mut it = p.iter(start..)?;
        let mut n = 0;
        for (k, v) in it.by_ref() {
            n += 1;
            if !visit(&k, &v) {
                break;
            }
        }
        it.status().map_err(|e| anyhow!("iteration failed: {e}"))?;
        Ok(n)
    }

    fn delete_range_in(&self, part: usize, start: &[u8], end: &[u8]) -> Result<()> {
        if self.parts.is_empty() {
            only_part_zero(self, part)?;
            return Ok(self.db.delete_range(start, end)?);
        }
        Ok(self.part(part)?.delete_range(start, end)?)
    }

    fn drop_partition(&mut self, part: usize) -> Result<()> {
        self.part(part)?;
        self.db.drop_partition(&partition_name(part))?;
        if let Some(slot) = self.parts.get_mut(part) {
            *slot = None;
        }
        Ok(())
    }

    fn range_counts(&self) -> Option<(u64, u64)> {
        let s = self.db.stats();
        Some((s.range_tombstones, s.range_dropped_files))
    }
}

/// Feeds `visit` the pairs of a StrataKV range iterator, forward or
/// backward, until it returns false; returns how many it saw.
pub(crate) fn visit_iter(
    it: &mut impl DoubleEndedIterator<Item = (Vec<u8>, Vec<u8>)>,
    reverse: bool,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> u64 {
    let mut n = 0;
    loop {
        let item = if reverse { it.next_back() } else { it.next() };
        let Some((k, v)) = item else { break };
        n += 1;
        if !visit(&k, &v) {
            break;
        }
    }
    n
}
