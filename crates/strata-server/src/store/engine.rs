//! The StrataKV engine as the server's store (`--storage engine`): data
//! lives in the engine's PM log, PM/SSD tables; reads and writes go
//! straight to it.

use std::ops::Bound;
use std::path::Path;

use stratakv::MAX_KEY_LEN;
use stratakv::{Db, KeyRange, Options, WriteBatch, WriteOptions};

use std::sync::atomic::{AtomicBool, Ordering};

use super::group::GroupSync;
use super::{Backend, Op, Pending, ShutdownSave, StoreError, StoreResult};

/// A [`Backend`] over an open [`Db`].
pub struct EngineStore {
    db: Db,
    group: GroupSync,
    /// A sync failed: durability of later writes is unknown (fsyncgate), so
    /// writes are refused until restart.
    failed: AtomicBool,
}

impl EngineStore {
    /// Opens (creating if needed) the engine in `dir` with `opts` (the
    /// server gives it `keyspace::MemberPrefix` as its prefix extractor, so
    /// collection scans get the engine's prefix filters).
    pub fn open(dir: &Path, opts: Options) -> StoreResult<EngineStore> {
        Ok(EngineStore { db: Db::open(dir, opts)?, group: GroupSync::default(), failed: AtomicBool::new(false) })
    }
}

impl Backend for EngineStore {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        // The engine stores no key over its limit, so such a key is absent
        // (Redis answers reads of any key; only writes can be refused).
        if key.len() > MAX_KEY_LEN {
            return Ok(None);
        }
        Ok(self.db.get(key)?)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        // Keys over the engine's limit are absent, as in `get`.
        let fits: Vec<&Vec<u8>> = keys.iter().filter(|k| k.len() <= MAX_KEY_LEN).collect();
        let mut found = self.db.multi_get(&fits)?.into_iter();
        Ok(keys.iter().map(|k| if k.len() <= MAX_KEY_LEN { found.next().flatten() } else { None }).collect())
    }

    fn prefetch(&self, keys: &[Vec<u8>]) {
        self.db.prefetch(keys);
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        // The keyspace scans a key's own prefix range: if the prefix is
        // already over the limit, no stored key can lie in it.
        if start.len() > MAX_KEY_LEN {
            return Ok(Vec::new());
        }
        let range = KeyRange {
            start: Bound::Included(start.to_vec()),
            end: end.map(|e| Bound::Excluded(e.to_vec())).unwrap_or(Bound::Unbounded),
        };
        let mut it = self.db.iter(range)?;
        let mut out = Vec::with_capacity(limit.min(1024));
        while out.len() < limit {
            match it.try_next()? {
                Some(kv) => out.push(kv),
                None => break,
            }
        }
        Ok(out)
    }

    fn write(&self, ops: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError("refusing writes after a failed sync of the PM log (restart the server)".into()));
        }
        let mut batch = WriteBatch::new();
        for (k, v) in &ops {
            match v {
                Some(v) => batch.put(k, v),
                // Nothing to delete: no key over the limit is ever stored.
                None if k.len() > MAX_KEY_LEN => continue,
                None => batch.delete(k),
            };
        }
        // Durable writes are applied without sync here and made durable by
        // one shared msync in `wait_durable` (once per event-loop pass). The
        // ticket exists before the write is visible, so a reader that sees it
        // waits for it; no sync claims it before it is applied.
        if !durable {
            self.db.write_opt(&batch, &WriteOptions { sync: false })?;
            return Ok(Pending(None));
        }
        let ticket = self.group.begin();
        let res = self.db.write_opt(&batch, &WriteOptions { sync: false });
        self.group.end(ticket);
        res?;
        Ok(Pending(Some(ticket)))
    }

    fn last_ticket(&self) -> Pending {
        Pending(Some(self.group.last_applied()))
    }

    fn wait_durable(&self, pending: Pending) -> StoreResult<()> {
        let Some(ticket) = pending.0 else { return Ok(()) };
        self.group.wait(ticket, || {
            self.db.sync().map_err(|e| {
                self.failed.store(true, Ordering::Release);
                StoreError::from(e)
            })
        })
    }

    fn save(&self) -> StoreResult<()> {
        self.db.sync()?;
        Ok(self.db.flush()?)
    }

    fn info(&self) -> Vec<(String, String)> {
        let s = self.db.stats();
        let mut v = vec![
            ("storage".to_string(), "engine".to_string()),
            ("engine_l0".into(), s.l0.to_string()),
            ("engine_pm_placement".into(), s.pm_placement.to_string()),
            ("engine_pm_region_bytes".into(), s.pm_region_bytes.to_string()),
            ("engine_pm_allocated_bytes".into(), s.pm_allocated_bytes.to_string()),
            ("engine_pm_slots_used".into(), s.pm_slots_used.to_string()),
            ("engine_pm_slots".into(), s.pm_slots.to_string()),
            ("engine_pm_syncs".into(), s.pm_syncs.to_string()),
            ("engine_memtable_bytes".into(), s.memtable_bytes.to_string()),
            ("engine_matrix_dram_bytes".into(), s.matrix_dram_bytes.to_string()),
            ("engine_immutable_memtables".into(), s.immutable_memtables.to_string()),
            ("engine_last_sequence".into(), s.last_sequence.to_string()),
            ("engine_writes".into(), s.writes.to_string()),
            ("engine_flushes".into(), s.flushes.to_string()),
            ("engine_compactions".into(), s.compactions.to_string()),
            ("engine_write_amplification".into(), format!("{:.2}", s.write_amplification)),
            ("engine_stall_micros".into(), s.stall_micros.to_string()),
            ("engine_recovery_micros".into(), s.recovery_micros.to_string()),
        ];
        for l in s.levels.iter().filter(|l| l.files > 0) {
            v.push((format!("engine_level{}", l.level), format!("files={},bytes={}", l.files, l.bytes)));
        }
        if !s.runs.is_empty() {
            let (files, bytes) = s.runs.iter().fold((0, 0), |(f, b), r| (f + r.files, b + r.bytes));
            v.push(("engine_runs".into(), format!("runs={},files={files},bytes={bytes}", s.runs.len())));
        }
        v.push(("engine_run_merges".into(), s.run_merges.to_string()));
        v.push(("engine_poisoned".into(), if s.poisoned.is_some() { "1" } else { "0" }.into()));
        v
    }

    fn used_memory(&self) -> u64 {
        let s = self.db.stats();
        s.memtable_bytes + s.block_cache_bytes + s.table_index_bytes + s.matrix_dram_bytes
    }

    fn shutdown(&self, _save: ShutdownSave) -> StoreResult<()> {
        // The engine is the data, not a copy of it: every mode syncs it.
        self.db.sync().map_err(StoreError::from)
    }
}
