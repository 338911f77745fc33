//! The StrataKV engine as the server's store (`--storage engine`): data
//! lives in the engine's PM log, PM/SSD tables; reads and writes go
//! straight to it. Database 0 (SELECT) is the engine's default partition,
//! so data from before databases stays in db 0; database n is partition
//! "dbn", created by its first write, so FLUSHDB of it drops the
//! partition (one MANIFEST edit: O(1), atomic across a crash).

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use stratakv::MAX_KEY_LEN;
use stratakv::{Db, KeyRange, Options, Partition, WriteBatch, WriteOptions, DEFAULT_PARTITION};

use super::group::GroupSync;
use super::view::{take_batch, Batch, EmptyView, SnapshotView};
use super::{Backend, Op, Pending, ShutdownSave, StoreError, StoreResult};

use stratakv::PARTITION_PREFIX_LEN;

/// What every database's store shares: the engine, its group sync, and
/// whether a sync failed.
struct Core {
    db: Db,
    group: GroupSync,
    /// A sync failed: durability of later writes is unknown (fsyncgate), so
    /// writes are refused until restart.
    failed: AtomicBool,
    /// Entries written since the last SAVE/BGSAVE (INFO's
    /// `rdb_changes_since_last_save`).
    dirty: AtomicU64,
}

/// Which keys of the engine a store is.
enum Slot {
    /// Database 0: the default partition (the `Db`'s own keys).
    Default,
    /// Database n > 0: partition `name`, `None` until its first write
    /// creates it and after FLUSHDB drops it (reads then find nothing).
    Named { name: String, part: RwLock<Option<Partition>> },
}

/// A [`Backend`] over an open [`Db`]: one database of the server.
pub struct EngineStore {
    core: Arc<Core>,
    slot: Slot,
}

/// The partition that holds database `n > 0`.
pub fn partition_name(n: usize) -> String {
    format!("db{n}")
}

impl EngineStore {
    /// Opens (creating if needed) the engine in `dir` with `opts` (the
    /// server gives it `keyspace::MemberPrefix` as its prefix extractor, so
    /// collection scans get the engine's prefix filters); the store is
    /// database 0 ([`Backend::databases`] gives the others).
    pub fn open(dir: &Path, opts: Options) -> StoreResult<EngineStore> {
        let core = Core {
            db: Db::open(dir, opts)?,
            group: GroupSync::default(),
            failed: AtomicBool::new(false),
            dirty: AtomicU64::new(0),
        };
        Ok(EngineStore { core: Arc::new(core), slot: Slot::Default })
    }

    /// The longest key this store holds.
    fn key_limit(&self) -> usize {
        match self.slot {
            Slot::Default => MAX_KEY_LEN,
            Slot::Named { .. } => MAX_KEY_LEN.saturating_sub(PARTITION_PREFIX_LEN),
        }
    }

    fn check_writable(&self) -> StoreResult<()> {
        if self.core.failed.load(Ordering::Acquire) {
            return Err(StoreError("refusing writes after a failed sync of the PM log (restart the server)".into()));
        }
        Ok(())
    }

    /// Database n's partition, created if it does not exist yet; held
    /// (read-locked) so that no FLUSHDB drops it meanwhile.
    fn created<'a>(
        &self,
        name: &str,
        part: &'a RwLock<Option<Partition>>,
    ) -> StoreResult<RwLockReadGuard<'a, Option<Partition>>> {
        let g = part.read();
        if g.is_some() {
            return Ok(g);
        }
        drop(g);
        let mut w = part.write();
        if w.is_none() {
            *w = Some(self.core.db.partition_or_create(name)?);
        }
        Ok(RwLockWriteGuard::downgrade(w))
    }

    /// Applies `batch` (built for this store's partition), group-synced
    /// if `durable`.
    fn apply(&self, batch: &WriteBatch, durable: bool) -> StoreResult<Pending> {
        // Durable writes are applied without sync here and made durable by
        // one shared msync in `wait_durable` (once per event-loop pass). The
        // ticket exists before the write is visible, so a reader that sees it
        // waits for it; no sync claims it before it is applied.
        if !durable {
            self.core.db.write_opt(batch, &WriteOptions { sync: false })?;
            self.core.dirty.fetch_add(batch.len() as u64, Ordering::Relaxed);
            return Ok(Pending(None));
        }
        let ticket = self.core.group.begin();
        let res = self.core.db.write_opt(batch, &WriteOptions { sync: false });
        self.core.group.end(ticket);
        res?;
        self.core.dirty.fetch_add(batch.len() as u64, Ordering::Relaxed);
        Ok(Pending(Some(ticket)))
    }
}

/// How often [`views_at_one_cut`] retries when a database's partition
/// appears while it takes its cut.
const CUT_TRIES: usize = 16;

/// A read view of one database at an engine snapshot: the default
/// partition (`part` is `None`) or partition `part`, read at `snap`'s
/// sequence. The snapshot is registered with the engine, so compaction
/// keeps every version the view can see until the view is dropped.
struct EngineView {
    snap: Arc<stratakv::Snapshot>,
    part: Option<Partition>,
    key_limit: usize,
}

impl SnapshotView for EngineView {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        if key.len() > self.key_limit {
            return Ok(None);
        }
        Ok(match &self.part {
            None => self.snap.get(key)?,
            Some(p) => p.get_opt(key, &self.snap.read_options())?,
        })
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, batch: Batch) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        if start.len() > self.key_limit {
            return Ok(Vec::new());
        }
        let range = KeyRange {
            start: Bound::Included(start.to_vec()),
            end: end.map(|e| Bound::Excluded(e.to_vec())).unwrap_or(Bound::Unbounded),
        };
        let mut it = match &self.part {
            None => self.snap.iter(range)?,
            Some(p) => p.iter_opt(range, &self.snap.read_options())?,
        };
        take_batch(batch, || Ok(it.try_next()?))
    }
}

/// Views of the databases `dbs` (0: the default partition, n: partition
/// `dbn`) at one engine snapshot. A partition is looked up before the
/// snapshot and checked after it: one created meanwhile (a first write to
/// its database) makes the cut be taken again, so a database is never
/// seen empty at a point where it had keys. A FLUSHDB of database n > 0
/// drops its partition outright (not at a sequence number): a view of it
/// then fails its reads ("partition was dropped") instead of reading
/// keys that are gone, and the caller takes a new view.
fn views_at_one_cut(db: &Db, dbs: &[usize]) -> StoreResult<Vec<Box<dyn SnapshotView>>> {
    let lookup = || -> Vec<Option<Partition>> {
        dbs.iter().map(|&n| if n == 0 { None } else { db.partition(&partition_name(n)).ok() }).collect()
    };
    for _ in 0..CUT_TRIES {
        let before = lookup();
        let snap = Arc::new(db.snapshot());
        let after = lookup();
        let appeared = before.iter().zip(&after).any(|(b, a)| b.is_none() && a.is_some());
        if appeared && dbs.iter().any(|&n| n != 0) {
            continue;
        }
        let views = dbs
            .iter()
            .zip(before)
            .map(|(&n, part)| -> Box<dyn SnapshotView> {
                match (n, part) {
                    (0, _) => Box::new(EngineView { snap: snap.clone(), part: None, key_limit: MAX_KEY_LEN }),
                    (_, None) => Box::new(EmptyView),
                    (_, Some(p)) => Box::new(EngineView {
                        snap: snap.clone(),
                        part: Some(p),
                        key_limit: MAX_KEY_LEN.saturating_sub(PARTITION_PREFIX_LEN),
                    }),
                }
            })
            .collect();
        return Ok(views);
    }
    Err(StoreError("databases kept being created while taking a snapshot of them; try again".into()))
}

/// Adds `ops` to `batch`, in partition `p` (`None`: the default one).
fn fill(batch: &mut WriteBatch, ops: &[Op], p: Option<&Partition>, limit: usize) {
    for (k, v) in ops {
        match (v, p) {
            // Nothing to delete: no key over the limit is ever stored.
            (None, _) if k.len() > limit => continue,
            (Some(v), None) => batch.put(k, v),
            (None, None) => batch.delete(k),
            (Some(v), Some(p)) => batch.put_in(p, k, v),
            (None, Some(p)) => batch.delete_in(p, k),
        };
    }
}

impl Backend for EngineStore {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        // The engine stores no key over its limit, so such a key is absent
        // (Redis answers reads of any key; only writes can be refused).
        if key.len() > self.key_limit() {
            return Ok(None);
        }
        match &self.slot {
            Slot::Default => Ok(self.core.db.get(key)?),
            Slot::Named { part, .. } => match part.read().as_ref() {
                Some(p) => Ok(p.get(key)?),
                None => Ok(None),
            },
        }
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        // Keys over the engine's limit are absent, as in `get`.
        let limit = self.key_limit();
        let fits: Vec<&Vec<u8>> = keys.iter().filter(|k| k.len() <= limit).collect();
        let found = match &self.slot {
            Slot::Default => self.core.db.multi_get(&fits)?,
            Slot::Named { part, .. } => match part.read().as_ref() {
                Some(p) => p.multi_get(&fits)?,
                None => Vec::new(),
            },
        };
        let mut found = found.into_iter();
        Ok(keys.iter().map(|k| if k.len() <= limit { found.next().flatten() } else { None }).collect())
    }

    fn prefetch(&self, keys: &[Vec<u8>]) {
        // A hint: the engine takes it for its own (default partition) keys.
        if matches!(self.slot, Slot::Default) {
            self.core.db.prefetch(keys);
        }
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        // The keyspace scans a key's own prefix range: if the prefix is
        // already over the limit, no stored key can lie in it.
        if start.len() > self.key_limit() {
            return Ok(Vec::new());
        }
        let range = KeyRange {
            start: Bound::Included(start.to_vec()),
            end: end.map(|e| Bound::Excluded(e.to_vec())).unwrap_or(Bound::Unbounded),
        };
        let guard;
        let mut it = match &self.slot {
            Slot::Default => self.core.db.iter(range)?,
            Slot::Named { part, .. } => {
                guard = part.read();
                match guard.as_ref() {
                    Some(p) => p.iter(range)?,
                    None => return Ok(Vec::new()),
                }
            }
        };
        super::take_pairs(limit, || it.try_next())
    }

    fn write(&self, ops: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        self.check_writable()?;
        let mut batch = WriteBatch::new();
        match &self.slot {
            Slot::Default => {
                fill(&mut batch, &ops, None, MAX_KEY_LEN);
                self.apply(&batch, durable)
            }
            Slot::Named { name, part } => {
                // Held until the write is applied: no FLUSHDB drops the
                // partition under it (the key locks keep it out anyway).
                let g = self.created(name, part)?;
                fill(&mut batch, &ops, g.as_ref(), self.key_limit());
                if g.is_none() {
                    return Err(StoreError(format!("partition {name} is missing")));
                }
                self.apply(&batch, durable)
            }
        }
    }

    /// FLUSHDB: db 0 empties the default partition with one range
    /// tombstone, db n drops its partition (a MANIFEST edit each: O(1) and
    /// atomic across a crash; the space goes as compaction and the
    /// background table deletion reach it); then `then` is written. `keep`
    /// (the keyspace version) is in db 0 only: db n does not write it.
    fn clear(&self, keep: &[u8], then: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        self.check_writable()?;
        match &self.slot {
            Slot::Default => {
                self.core.db.partition(DEFAULT_PARTITION)?.clear()?;
            }
            Slot::Named { name, part } => {
                let mut w = part.write();
                if w.is_some() || self.core.db.partition(name).is_ok() {
                    self.core.db.drop_partition(name)?;
                }
                *w = None;
            }
        }
        let then: Vec<Op> = match self.slot {
            Slot::Default => then,
            Slot::Named { .. } => then.into_iter().filter(|(k, _)| k != keep).collect(),
        };
        if then.is_empty() {
            return Ok(Pending::default());
        }
        self.write(then, durable)
    }

    /// One range tombstone over every partition (`Db::clear_all_partitions`):
    /// one MANIFEST edit, so every database is flushed or none is, and
    /// readers (who hold the key locks FLUSHALL excludes anyway) see all of
    /// it at once. The partitions stay, empty.
    fn clear_every_database(&self, keep: &[u8], then: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        if !matches!(self.slot, Slot::Default) {
            return self.clear(keep, then, durable);
        }
        self.check_writable()?;
        self.core.db.clear_all_partitions()?;
        if then.is_empty() {
            return Ok(Pending::default());
        }
        self.write(then, durable)
    }

    fn databases(&self, n: usize) -> StoreResult<Vec<Arc<dyn Backend>>> {
        let mut out: Vec<Arc<dyn Backend>> = Vec::new();
        for i in 1..n {
            let name = partition_name(i);
            let part = self.core.db.partition(&name).ok();
            out.push(Arc::new(EngineStore {
                core: self.core.clone(),
                slot: Slot::Named { name, part: RwLock::new(part) },
            }));
        }
        Ok(out)
    }

    fn last_ticket(&self) -> Pending {
        Pending(Some(self.core.group.last_applied()))
    }

    /// An engine snapshot of this database: no copy, no pause of writers;
    /// see [`views_at_one_cut`] for a database dropped meanwhile.
    fn snapshot(&self) -> StoreResult<Box<dyn SnapshotView>> {
        let n = match &self.slot {
            Slot::Default => 0,
            Slot::Named { name, .. } => name.strip_prefix("db").and_then(|d| d.parse().ok()).unwrap_or(0),
        };
        if n == 0 && !matches!(self.slot, Slot::Default) {
            return Err(StoreError("unknown database partition".into()));
        }
        let mut views = views_at_one_cut(&self.core.db, &[n])?;
        views.pop().ok_or_else(|| StoreError("no view".into()))
    }

    /// Every database at one engine snapshot (partitions share sequence
    /// numbers), so a write to two databases (MOVE) is in all the views or
    /// in none.
    fn snapshot_databases(&self, n: usize) -> StoreResult<Vec<Box<dyn SnapshotView>>> {
        if !matches!(self.slot, Slot::Default) {
            return Err(StoreError("the databases' views are taken from database 0".into()));
        }
        let dbs: Vec<usize> = (0..n.max(1)).collect();
        views_at_one_cut(&self.core.db, &dbs)
    }

    fn wait_durable(&self, pending: Pending) -> StoreResult<()> {
        let Some(ticket) = pending.0 else { return Ok(()) };
        self.core.group.wait(ticket, || {
            self.core.db.sync().map_err(|e| {
                self.core.failed.store(true, Ordering::Release);
                StoreError::from(e)
            })
        })
    }

    fn save(&self) -> StoreResult<()> {
        // Changes made while saving stay counted.
        let before = self.core.dirty.load(Ordering::Acquire);
        self.core.db.sync()?;
        self.core.db.flush()?;
        self.core.dirty.fetch_sub(before, Ordering::AcqRel);
        Ok(())
    }

    fn info(&self) -> Vec<(String, String)> {
        let s = self.core.db.stats();
        let mut v = vec![
            ("storage".to_string(), "engine".to_string()),
            ("rdb_changes_since_last_save".into(), self.core.dirty.load(Ordering::Relaxed).to_string()),
            ("engine_l0".into(), s.l0.to_string()),
            ("engine_pm_placement".into(), s.pm_placement.to_string()),
            ("engine_pm_region_bytes".into(), s.pm_region_bytes.to_string()),
            ("engine_pm_allocated_bytes".into(), s.pm_allocated_bytes.to_string()),
            ("engine_pm_slots_used".into(), s.pm_slots_used.to_string()),
            ("engine_pm_slots".into(), s.pm_slots.to_string()),
            ("engine_pm_syncs".into(), s.pm_syncs.to_string()),
            ("engine_pm_write_throughs".into(), s.pm_write_throughs.to_string()),
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
        let s = self.core.db.stats();
        s.memtable_bytes + s.block_cache_bytes + s.table_index_bytes + s.matrix_dram_bytes
    }

    fn shutdown(&self, _save: ShutdownSave) -> StoreResult<()> {
        // The engine is the data, not a copy of it: every mode syncs it.
        self.core.db.sync().map_err(StoreError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str) -> Op {
        (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec()))
    }

    /// Database n's partition appears with its first write and goes with
    /// FLUSHDB (dropped, not emptied key by key); db 0's clear keeps the
    /// other databases, and `keep` is written in db 0 only.
    #[test]
    fn databases_are_partitions_created_lazily_and_dropped_by_clear() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options { pm_size: 128 << 20, ..Options::default() };
        let db0 = EngineStore::open(dir.path(), opts).unwrap();
        let dbs = db0.databases(4).unwrap();
        assert_eq!(dbs.len(), 3);
        let db2 = &dbs[1];
        let parts = || db0.core.db.list_partitions();
        assert_eq!(db2.get(b"k").unwrap(), None);
        assert_eq!(db2.scan(b"", None, 10).unwrap(), Vec::new());
        assert_eq!(parts(), ["default"], "reads create nothing");
        let _ = db0.write(vec![put("k", "zero")], false).unwrap();
        let _ = db2.write(vec![put("k", "two"), put("m", "x")], false).unwrap();
        assert_eq!(parts(), ["default", "db2"]);
        assert_eq!(db2.get(b"k").unwrap(), Some(b"two".to_vec()));
        assert_eq!(db0.get(b"k").unwrap(), Some(b"zero".to_vec()));
        assert_eq!(db0.scan(b"", None, 10).unwrap().len(), 1, "db 0 does not see db 2's keys");
        let _ = db2.clear(b"!version", vec![put("!version", "1")], false).unwrap();
        assert_eq!(parts(), ["default"]);
        assert_eq!(db2.get(b"k").unwrap(), None);
        let _ = db2.write(vec![put("n", "1")], false).unwrap();
        assert_eq!(db2.scan(b"", None, 10).unwrap(), vec![(b"n".to_vec(), b"1".to_vec())]);
        let _ = db0.clear(b"!version", vec![put("!version", "1")], false).unwrap();
        assert_eq!(db0.scan(b"", None, 10).unwrap(), vec![(b"!version".to_vec(), b"1".to_vec())]);
        assert_eq!(db2.get(b"n").unwrap(), Some(b"1".to_vec()));
        // Reopened, the databases find their partitions again.
        drop((dbs, db0));
        let db0 = EngineStore::open(dir.path(), Options { pm_size: 128 << 20, ..Options::default() }).unwrap();
        let dbs = db0.databases(4).unwrap();
        assert_eq!(dbs[1].get(b"n").unwrap(), Some(b"1".to_vec()));
        assert_eq!(dbs[0].get(b"n").unwrap(), None);
    }
}
