//! fjall (the Rust LSM engine on crates.io) behind the [`Engine`] seam.
//!
//! Durability is in the class of StrataKV's default and RocksDB's WAL
//! without sync: every write is handed to the OS before it returns
//! (fjall's default, `PersistMode::Buffer` per write), so it survives a
//! process crash but not a power loss; with `--sync=1` every write is
//! followed by `PersistMode::SyncData` (fdatasync of the journal, as
//! RocksDB syncs its WAL).
//!
//! The flags map onto fjall's options where it has an equivalent:
//! `--write_buffer_size` (memtable size), `--cache_size` (block cache),
//! `--bloom_bits` (bits per key on every level), `--compression_type`
//! (none or lz4 on every level), `--block_size`, `--target_file_size_base`,
//! `--level0_file_num_compaction_trigger`, `--max_bytes_for_level_multiplier`,
//! `--max_background_jobs` (worker threads) and `--optimize_filters_for_hits`
//! (`expect_point_read_hits`). Everything else is fjall's default.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use fjall::compaction::Leveled;
use fjall::config::{BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{AbstractTree, CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};

use crate::engine::{own_build, BatchOp, Engine, EngineInfo, EngineStats, Level, Setting};
use crate::flags::Flags;

/// The keyspace the benchmarks use.
const KEYSPACE: &str = "bench";

/// fjall's defaults that the flags may change (fjall 3.1: `Config::new`,
/// `KeyspaceCreateOptions::default`, `Leveled::default`).
mod defaults {
    pub const CACHE_BYTES: u64 = 32 << 20;
    pub const MEMTABLE_BYTES: u64 = 64 << 20;
    pub const BLOCK_SIZE: u32 = 4096;
    pub const TABLE_TARGET_BYTES: u64 = 64 << 20;
    pub const L0_THRESHOLD: u8 = 4;
    pub const LEVEL_RATIO: f32 = 10.0;
    pub const FILTER: &str = "L0 bloom at 0.0001 false positives, other levels 10 bits/key";
    pub const COMPRESSION: &str = "none on L0-L1, lz4 below";
}

/// fjall opened with the flags' options.
pub struct FjallEngine {
    db: Database,
    ks: Keyspace,
    sync: bool,
    user_bytes: AtomicU64,
    settings: Vec<Setting>,
}

/// The options the flags ask for, and the list of them against fjall's defaults.
struct Config {
    cache_bytes: u64,
    workers: usize,
    memtable_bytes: u64,
    block_size: u32,
    bloom_bits: u32,
    compression: CompressionType,
    target_size: u64,
    l0_threshold: u8,
    level_ratio: f32,
    expect_hits: bool,
}

fn config(f: &Flags) -> Result<Config> {
    let compression = match f.compression_type.to_ascii_lowercase().as_str() {
        "none" => CompressionType::None,
        "lz4" => CompressionType::Lz4,
        other => bail!("--compression_type={other}: fjall supports none and lz4"),
    };
    Ok(Config {
        cache_bytes: f.cache_size,
        workers: f.max_background_jobs.max(1),
        memtable_bytes: f.write_buffer_size as u64,
        block_size: u32::try_from(f.rocks.block_size).context("--block_size is too large for fjall")?,
        bloom_bits: f.bloom_bits_per_key(),
        compression,
        target_size: f.target_file_size_base,
        l0_threshold: u8::try_from(f.rocks.level0_file_num_compaction_trigger.clamp(1, 255)).unwrap_or(4),
        level_ratio: f.rocks.max_bytes_for_level_multiplier as f32,
        expect_hits: f.rocks.optimize_filters_for_hits,
    })
}

impl Config {
    fn settings(&self, default_workers: usize) -> Vec<Setting> {
        let filter =
            if self.bloom_bits > 0 { format!("{} bits/key on every level", self.bloom_bits) } else { "none".into() };
        let compression = match self.compression {
            CompressionType::None => "none on every level",
            _ => "lz4 on every level",
        };
        vec![
            Setting::new("cache_size", self.cache_bytes, defaults::CACHE_BYTES),
            Setting::new("worker_threads", self.workers, default_workers),
            Setting::new("max_memtable_size", self.memtable_bytes, defaults::MEMTABLE_BYTES),
            Setting::new("data_block_size", self.block_size, defaults::BLOCK_SIZE),
            Setting::new("filter_policy", filter, defaults::FILTER),
            Setting::new("data_block_compression", compression, defaults::COMPRESSION),
            Setting::new("table_target_size", self.target_size, defaults::TABLE_TARGET_BYTES),
            Setting::new("l0_threshold", self.l0_threshold, defaults::L0_THRESHOLD),
            Setting::new("level_ratio", self.level_ratio, defaults::LEVEL_RATIO),
            Setting::new("expect_point_read_hits", self.expect_hits, false),
            Setting::new("durability", "PersistMode::Buffer per write", "PersistMode::Buffer per write"),
        ]
    }

    fn keyspace_options(&self) -> KeyspaceCreateOptions {
        let filter = if self.bloom_bits > 0 {
            FilterPolicy::all(FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(self.bloom_bits as f32)))
        } else {
            FilterPolicy::disabled()
        };
        KeyspaceCreateOptions::default()
            .max_memtable_size(self.memtable_bytes)
            .data_block_size_policy(BlockSizePolicy::all(self.block_size))
            .filter_policy(filter)
            .data_block_compression_policy(CompressionPolicy::all(self.compression))
            .expect_point_read_hits(self.expect_hits)
            .compaction_strategy(Arc::new(
                Leveled::default()
                    .with_l0_threshold(self.l0_threshold)
                    .with_table_target_size(self.target_size)
                    .with_level_ratio_policy(vec![self.level_ratio]),
            ))
    }
}

/// fjall's default worker thread count: min(cores, 4).
fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

impl FjallEngine {
    /// Opens (creating) the database at `dir`.
    pub fn open(dir: &Path, f: &Flags) -> Result<FjallEngine> {
        let c = config(f)?;
        let mut settings = c.settings(default_workers());
        if f.sync {
            settings.push(Setting::new("sync", "PersistMode::SyncData after every write", "off"));
        }
        let db = Database::builder(dir)
            .cache_size(c.cache_bytes)
            .worker_threads(c.workers)
            .open()
            .map_err(|e| anyhow!("opening fjall at {}: {e}", dir.display()))?;
        let opts = c.keyspace_options();
        let ks = db.keyspace(KEYSPACE, move || opts).map_err(|e| anyhow!("opening fjall keyspace: {e}"))?;
        Ok(FjallEngine { db, ks, sync: f.sync, user_bytes: AtomicU64::new(0), settings })
    }

    fn synced(&self, sync: bool) -> Result<()> {
        if sync || self.sync {
            self.db.persist(PersistMode::SyncData).map_err(|e| anyhow!("fjall persist: {e}"))?;
        }
        Ok(())
    }
}

fn err(what: &str) -> impl FnOnce(fjall::Error) -> anyhow::Error + '_ {
    move |e| anyhow!("fjall {what}: {e}")
}

impl Engine for FjallEngine {
    fn name(&self) -> String {
        "fjall".into()
    }

    fn info(&self) -> EngineInfo {
        EngineInfo {
            version: env!("STRATA_BENCH_FJALL_VERSION").to_string(),
            build: format!(
                "fjall {} (lsm-tree {}) from crates.io, built with strata-bench: {}",
                env!("STRATA_BENCH_FJALL_VERSION"),
                env!("STRATA_BENCH_LSM_TREE_VERSION"),
                own_build()
            ),
            settings: self.settings.clone(),
        }
    }

    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        self.user_bytes.fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        self.ks.insert(key, value).map_err(err("insert"))?;
        self.synced(sync)
    }

    fn delete(&self, key: &[u8], sync: bool) -> Result<()> {
        self.user_bytes.fetch_add(key.len() as u64, Ordering::Relaxed);
        self.ks.remove(key).map_err(err("remove"))?;
        self.synced(sync)
    }

    fn write(&self, ops: &[BatchOp<'_>], sync: bool) -> Result<()> {
        let mode = if sync || self.sync { PersistMode::SyncData } else { PersistMode::Buffer };
        let mut b = self.db.batch().durability(Some(mode));
        let mut bytes = 0;
        for op in ops {
            match op {
                BatchOp::Put(k, v) => {
                    bytes += k.len() + v.len();
                    b.insert(&self.ks, *k, *v);
                }
                BatchOp::Delete(k) => {
                    bytes += k.len();
                    b.remove(&self.ks, *k);
                }
            }
        }
        self.user_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        b.commit().map_err(err("batch commit"))
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.ks.get(key).map_err(err("get"))?.map(|v| v.to_vec()))
    }

    fn get_visit(&self, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.ks.get(key).map_err(err("get"))?.map(|v| visit(&v)).is_some())
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let snap = self.db.snapshot();
        keys.iter().map(|k| Ok(snap.get(&self.ks, k).map_err(err("get"))?.map(|v| v.to_vec()))).collect()
    }

    fn multi_get_visit(&self, keys: &[Vec<u8>], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let snap = self.db.snapshot();
        for (i, k) in keys.iter().enumerate() {
            let v = snap.get(&self.ks, k).map_err(err("get"))?;
            visit(i, v.as_deref());
        }
        Ok(())
    }

    fn scan(&self, start: Option<&[u8]>, reverse: bool, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        let it = match (start, reverse) {
            (Some(s), false) => self.ks.range(s..),
            (Some(s), true) => self.ks.range(..=s),
            (None, _) => self.ks.iter(),
        };
        let mut n = 0;
        let mut step = |guard: fjall::Guard| -> Result<bool> {
            let (k, v) = guard.into_inner().map_err(err("iteration"))?;
            n += 1;
            Ok(visit(&k, &v))
        };
        if reverse {
            for g in it.rev() {
                if !step(g)? {
                    break;
                }
            }
        } else {
            for g in it {
                if !step(g)? {
                    break;
                }
            }
        }
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        self.ks.rotate_memtable_and_wait().map_err(err("flush"))
    }

    fn compact(&self) -> Result<()> {
        self.ks.major_compact().map_err(err("compaction"))
    }

    fn wait_for_compactions(&self) -> Result<()> {
        // fjall has no "wait for compactions" call: poll its queue counters
        // until nothing is flushing or compacting for half a second (at most
        // ten minutes; the runner then also waits for the levels to settle).
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut idle_since: Option<Instant> = None;
        while Instant::now() < deadline {
            let busy = self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0;
            match (busy, idle_since) {
                (true, _) => idle_since = None,
                (false, None) => idle_since = Some(Instant::now()),
                (false, Some(t)) if t.elapsed() >= Duration::from_millis(500) => return Ok(()),
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn stats(&self) -> EngineStats {
        let levels: Vec<Level> = (0..7)
            .map(|l| Level { level: l, files: self.ks.tree.level_table_count(l).unwrap_or(0), bytes: 0 })
            .collect();
        EngineStats {
            user_bytes_written: self.user_bytes.load(Ordering::Relaxed),
            nonempty_levels: levels.iter().filter(|l| l.files > 0).count(),
            levels,
            compactions: self.db.compactions_completed() as u64,
            ..EngineStats::default()
        }
    }

    fn stats_text(&self) -> String {
        let levels: Vec<String> =
            (0..7).map(|l| format!("L{l}: {} tables", self.ks.tree.level_table_count(l).unwrap_or(0))).collect();
        format!(
            "fjall: {} tables ({}), {} compactions done, {:.1} s compacting, disk space {} bytes, journals {}",
            self.ks.table_count(),
            levels.join(", "),
            self.db.compactions_completed(),
            self.db.time_compacting().as_secs_f64(),
            self.db.disk_space().unwrap_or(0),
            self.db.journal_count()
        )
    }

    fn close(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll).map_err(err("closing"))
    }

    fn pm_dir(&self) -> Option<PathBuf> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(dir: &Path, extra: &[&str]) -> Flags {
        let db = format!("--db={}", dir.display());
        let mut args = vec!["strata-bench", "--engine=fjall", "--compression_type=none", "--bloom_bits=10", &db];
        args.extend_from_slice(extra);
        Flags::parse_from_args(args).unwrap()
    }

    fn collect(e: &FjallEngine, start: Option<&[u8]>, reverse: bool, limit: usize) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        e.scan(start, reverse, &mut |k, _| {
            keys.push(k.to_vec());
            keys.len() < limit
        })
        .unwrap();
        keys
    }

    #[test]
    fn put_get_delete_batch_scan_and_reopen() {
        let d = tempfile::tempdir().unwrap();
        let f = flags(d.path(), &["--write_buffer_size=1048576"]);
        {
            let e = FjallEngine::open(d.path(), &f).unwrap();
            for i in 0..100u32 {
                e.put(format!("k{i:03}").as_bytes(), format!("v{i}").as_bytes(), false).unwrap();
            }
            assert_eq!(e.get(b"k007").unwrap().as_deref(), Some(&b"v7"[..]));
            assert_eq!(e.get(b"nope").unwrap(), None);
            let mut seen = Vec::new();
            assert!(e.get_visit(b"k042", &mut |v| seen.extend_from_slice(v)).unwrap());
            assert_eq!(seen, b"v42");
            e.delete(b"k000", false).unwrap();
            e.write(&[BatchOp::Put(b"k100", b"x"), BatchOp::Delete(b"k001"), BatchOp::Put(b"k002", b"y")], true)
                .unwrap();
            let got = e.multi_get(&[b"k001".to_vec(), b"k002".to_vec(), b"k100".to_vec()]).unwrap();
            assert_eq!(got, vec![None, Some(b"y".to_vec()), Some(b"x".to_vec())]);
            let mut hits = 0;
            e.multi_get_visit(&[b"k003".to_vec(), b"zz".to_vec()], &mut |_, v| hits += usize::from(v.is_some()))
                .unwrap();
            assert_eq!(hits, 1);
            assert_eq!(
                collect(&e, Some(b"k050"), false, 3),
                vec![b"k050".to_vec(), b"k051".to_vec(), b"k052".to_vec()]
            );
            assert_eq!(collect(&e, Some(b"k050x"), true, 2), vec![b"k050".to_vec(), b"k049".to_vec()]);
            assert_eq!(collect(&e, None, false, 1), vec![b"k002".to_vec()]);
            assert_eq!(collect(&e, None, true, 1), vec![b"k100".to_vec()]);
            assert_eq!(collect(&e, None, false, usize::MAX).len(), 99);
            e.flush().unwrap();
            e.wait_for_compactions().unwrap();
            assert!(e.stats().levels.iter().map(|l| l.files).sum::<usize>() >= 1, "the flush wrote a table");
            assert!(e.stats().user_bytes_written > 0);
            assert!(e.stats_text().starts_with("fjall: "));
            e.close().unwrap();
        }
        // Reopen: everything written is still there.
        let e = FjallEngine::open(d.path(), &flags(d.path(), &["--use_existing_db=1"])).unwrap();
        assert_eq!(e.get(b"k099").unwrap().as_deref(), Some(&b"v99"[..]));
        assert_eq!(e.get(b"k000").unwrap(), None);
        assert_eq!(collect(&e, None, false, usize::MAX).len(), 99);
    }

    #[test]
    fn settings_name_what_differs_from_fjalls_defaults() {
        let d = tempfile::tempdir().unwrap();
        let e = FjallEngine::open(d.path(), &flags(d.path(), &["--cache_size=1073741824"])).unwrap();
        let info = e.info();
        assert_eq!(info.version, env!("STRATA_BENCH_FJALL_VERSION"));
        assert!(info.build.contains("fjall "), "{}", info.build);
        let nd: Vec<&str> = info.non_default().map(|s| s.name.as_str()).collect();
        assert!(nd.contains(&"cache_size") && nd.contains(&"filter_policy") && nd.contains(&"data_block_compression"));
        assert!(!nd.contains(&"max_memtable_size"), "64 MiB is fjall's default too");
    }

    #[test]
    fn unsupported_compression_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let f = flags(d.path(), &["--compression_type=snappy"]);
        let e = FjallEngine::open(d.path(), &f).err().unwrap();
        assert!(e.to_string().contains("fjall supports none and lz4"), "{e}");
    }
}
