//! RocksDB behind the [`Engine`] seam (feature `rocksdb`), so YCSB and the
//! workloads db_bench lacks run against RocksDB through the same code as
//! against StrataKV. Options: RocksDB's defaults plus the flags' memtable
//! size, bloom bits, compression, block cache, file sizes and background
//! jobs (what db_bench sets from the same flags); WAL on unless
//! `--disable_wal`, synced only with `--sync`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, bail, Context, Result};
use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, WriteBatch, WriteOptions, DB};

use crate::engine::{BatchOp, Engine, EngineStats, Level};
use crate::flags::Flags;

/// RocksDB opened with db_bench-equivalent options.
pub struct RocksEngine {
    db: DB,
    disable_wal: bool,
    user_bytes: AtomicU64,
}

fn options(f: &Flags) -> Result<Options> {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_write_buffer_size(f.write_buffer_size);
    o.set_max_background_jobs(i32::try_from(f.max_background_jobs).unwrap_or(i32::MAX));
    o.set_target_file_size_base(f.target_file_size_base);
    o.set_max_bytes_for_level_base(f.max_bytes_for_level_base);
    o.set_compression_type(match f.compression_type.to_ascii_lowercase().as_str() {
        "none" => DBCompressionType::None,
        "snappy" => DBCompressionType::Snappy,
        "lz4" => DBCompressionType::Lz4,
        "zstd" => DBCompressionType::Zstd,
        "zlib" => DBCompressionType::Zlib,
        other => bail!("--compression_type={other} is not supported"),
    });
    let mut t = BlockBasedOptions::default();
    let cache = Cache::new_lru_cache(usize::try_from(f.cache_size).unwrap_or(usize::MAX))
        .map_err(|e| anyhow!("block cache: {e}"))?;
    t.set_block_cache(&cache);
    if f.bloom_bits > 0 {
        t.set_bloom_filter(f.bloom_bits as f64, false);
    }
    o.set_block_based_table_factory(&t);
    Ok(o)
}

impl RocksEngine {
    /// Opens (creating) the database at `dir`.
    pub fn open(dir: &Path, f: &Flags) -> Result<RocksEngine> {
        let db = DB::open(&options(f)?, dir).with_context(|| format!("opening RocksDB at {}", dir.display()))?;
        Ok(RocksEngine { db, disable_wal: f.disable_wal, user_bytes: AtomicU64::new(0) })
    }

    fn wo(&self, sync: bool) -> WriteOptions {
        let mut w = WriteOptions::default();
        w.set_sync(sync);
        w.disable_wal(self.disable_wal);
        w
    }

    fn property(&self, name: &str) -> String {
        self.db.property_value(name).ok().flatten().unwrap_or_default()
    }
}

/// Parses "... <number> GB" after `label` in RocksDB's stats text.
fn gb_after(text: &str, label: &str) -> f64 {
    text.lines()
        .find_map(|l| l.find(label).map(|i| &l[i + label.len()..]))
        .and_then(|rest| rest.split_whitespace().find_map(|w| w.trim_end_matches(',').parse::<f64>().ok()))
        .unwrap_or(0.0)
}

impl Engine for RocksEngine {
    fn name(&self) -> String {
        "rocksdb".into()
    }

    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        self.user_bytes.fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        Ok(self.db.put_opt(key, value, &self.wo(sync))?)
    }

    fn delete(&self, key: &[u8], sync: bool) -> Result<()> {
        self.user_bytes.fetch_add(key.len() as u64, Ordering::Relaxed);
        Ok(self.db.delete_opt(key, &self.wo(sync))?)
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
        Ok(self.db.write_opt(b, &self.wo(sync))?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.db.multi_get(keys).into_iter().map(|r| r.map_err(|e| anyhow!("multi_get: {e}"))).collect()
    }

    fn scan(&self, start: Option<&[u8]>, reverse: bool, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        let mut it = self.db.raw_iterator();
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
        Ok(self.db.flush()?)
    }

    fn compact(&self) -> Result<()> {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(())
    }

    fn stats(&self) -> EngineStats {
        let text = self.property("rocksdb.stats");
        let gb = |x: f64| (x * 1e9) as u64;
        // "Cumulative compaction: X GB write" counts flushes and compactions (2-decimal GB).
        let device = gb(gb_after(&text, "Cumulative compaction:"));
        let user = self.user_bytes.load(Ordering::Relaxed);
        let levels: Vec<Level> = (0..7)
            .map(|l| Level {
                level: l,
                files: self.property(&format!("rocksdb.num-files-at-level{l}")).trim().parse().unwrap_or(0),
                bytes: 0,
            })
            .collect();
        EngineStats {
            user_bytes_written: user,
            device_bytes_written: device,
            pm_bytes_written: 0,
            write_amp: if user > 0 { device as f64 / user as f64 } else { 0.0 },
            nonempty_levels: levels.iter().filter(|l| l.files > 0).count(),
            levels,
            stall_micros: 0,
            flushes: 0,
            compactions: 0,
            pm_placement: String::new(),
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
}

/// Removes a RocksDB database directory.
pub fn destroy(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(())
}
