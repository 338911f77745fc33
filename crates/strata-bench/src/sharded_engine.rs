//! StrataKV's sharded front end (`--shards=N`, p2KVS) behind the
//! [`Engine`] seam: N databases under `--db`, one worker thread each, with
//! opportunistic batching; every request goes through the workers.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use stratakv::{Sharded, ShardedOptions, WriteBatch};

use crate::engine::{
    own_build, strata_options, strata_settings, visit_iter, BatchOp, Engine, EngineInfo, EngineStats, Level,
    ReadCounts, Setting,
};
use crate::flags::Flags;

/// A sharded StrataKV.
pub struct ShardedEngine {
    db: Sharded,
    profile: String,
    pm_dir: PathBuf,
    settings: Vec<Setting>,
}

impl ShardedEngine {
    /// Opens (creating) the sharded database at `dir` with `--shards` shards.
    pub fn open(dir: &Path, f: &Flags) -> Result<ShardedEngine> {
        let opts = strata_options(f)?;
        let profile = opts.l0.name().to_string();
        let mut settings = strata_settings(&opts);
        let mut so = ShardedOptions::new(f.shards, opts);
        if f.shard_batch_cap > 0 {
            so.batch_cap = f.shard_batch_cap;
        }
        settings.push(Setting::new("shards", so.shards, 1));
        settings.push(Setting::new("batch_cap", so.batch_cap, ShardedOptions::default().batch_cap));
        let db = Sharded::open(dir, so).with_context(|| format!("opening sharded StrataKV at {}", dir.display()))?;
        let pm_dir = f.pm_dir.clone().unwrap_or_else(|| dir.join("shard-000").join("pm"));
        Ok(ShardedEngine { db, profile, pm_dir, settings })
    }
}

fn batch(ops: &[BatchOp<'_>]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for op in ops {
        match op {
            BatchOp::Put(k, v) => b.put(k, v),
            BatchOp::Delete(k) => b.delete(k),
        };
    }
    b
}

impl Engine for ShardedEngine {
    fn name(&self) -> String {
        format!("strata/{}/shards={}", self.profile, self.db.shards())
    }

    fn info(&self) -> EngineInfo {
        EngineInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            build: format!("stratakv built with strata-bench: {}", own_build()),
            settings: self.settings.clone(),
        }
    }

    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        Ok(self.db.put_opt(key, value, sync)?)
    }

    fn delete(&self, key: &[u8], sync: bool) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        Ok(self.db.write_opt(b, sync)?)
    }

    fn write(&self, ops: &[BatchOp<'_>], sync: bool) -> Result<()> {
        Ok(self.db.write_opt(batch(ops), sync)?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        Ok(self.db.multi_get(keys)?)
    }

    fn scan(&self, start: Option<&[u8]>, reverse: bool, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        let mut it = match (start, reverse) {
            (Some(s), false) => self.db.iter(s..)?,
            (Some(s), true) => self.db.iter(..=s)?,
            (None, _) => self.db.iter(..)?,
        };
        let n = visit_iter(&mut it, reverse, visit);
        it.status().map_err(|e| anyhow!("iteration failed: {e}"))?;
        Ok(n)
    }

    fn flush(&self) -> Result<()> {
        Ok(self.db.flush()?)
    }

    fn compact(&self) -> Result<()> {
        Ok(self.db.compact_range(..)?)
    }

    fn wait_for_compactions(&self) -> Result<()> {
        Ok(self.db.wait_for_compactions()?)
    }

    fn stats(&self) -> EngineStats {
        let all = self.db.stats();
        let mut out = EngineStats { pm_placement: String::new(), ..EngineStats::default() };
        let mut reads = ReadCounts::default();
        for s in &all.shards {
            out.user_bytes_written += s.user_bytes_written;
            out.device_bytes_written += s.device_bytes_written;
            out.pm_bytes_written += s.pm_bytes_written;
            out.stall_micros += s.stall_micros;
            out.flushes += s.flushes;
            out.compactions += s.compactions;
            out.nonempty_levels = out.nonempty_levels.max(s.nonempty_levels);
            out.pm_placement = s.pm_placement.to_string();
            reads.gets += s.gets;
            reads.blocks += s.data_blocks_read;
            reads.from_file += s.data_blocks_from_file;
            for l in &s.levels {
                match out.levels.iter_mut().find(|x| x.level == l.level) {
                    Some(x) => {
                        x.files += l.files;
                        x.bytes += l.bytes;
                    }
                    None => out.levels.push(Level { level: l.level, files: l.files, bytes: l.bytes }),
                }
            }
        }
        out.write_amp = if out.user_bytes_written > 0 {
            out.device_bytes_written as f64 / out.user_bytes_written as f64
        } else {
            0.0
        };
        out.reads = Some(reads);
        out
    }

    fn stats_text(&self) -> String {
        let s = self.db.stats();
        let mut t = format!(
            "shards={} pinned={} gsn={} write_batches={} writes={} (x{:.2} per batch) multi_gets={} gets={} \
             (x{:.2}) cross_batches={}\n",
            s.shards.len(),
            s.pinned,
            s.gsn,
            s.write_batches,
            s.writes,
            s.writes as f64 / s.write_batches.max(1) as f64,
            s.multi_gets,
            s.gets,
            s.gets as f64 / s.multi_gets.max(1) as f64,
            s.cross_batches
        );
        for (i, sh) in s.shards.iter().enumerate() {
            t.push_str(&format!("--- shard {i}\n{sh}\n"));
        }
        t
    }

    fn close(&self) -> Result<()> {
        // The database closes when the engine is dropped; make it durable now.
        self.db.sync().context("syncing sharded StrataKV")
    }

    fn pm_dir(&self) -> Option<PathBuf> {
        Some(self.pm_dir.clone())
    }
}
