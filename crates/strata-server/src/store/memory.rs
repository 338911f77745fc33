//! The DRAM store (`--storage memory`): an ordered map in DRAM, made
//! durable by a command log (`--appendfsync`), by periodic snapshots
//! (`--snapshot-seconds`), or not at all — the "NVM as storage" designs of
//! the NVM in-memory KV study, next to the engine's "NVM as memory".

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};

use super::aof::{Aof, FsyncPolicy, Record};
use super::{snapshot, Backend, Op, Pending, ShutdownSave, StoreResult};

/// File name of the command log in the data directory.
pub const AOF_FILE: &str = "appendonly.strata";
/// File name of the snapshot in the data directory.
pub const SNAPSHOT_FILE: &str = "dump.strata";

/// Persistence of the memory store.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryPersistence {
    /// Command log with this fsync policy, if any.
    pub appendfsync: Option<FsyncPolicy>,
    /// Snapshot every this many seconds when something changed (0: never).
    pub snapshot_seconds: u64,
}

/// Keys a snapshot in progress reads in one step under the map's read
/// lock; writers run between steps.
const SNAPSHOT_CHUNK: usize = 1024;

/// The values at the start of a snapshot of every key written since: the
/// key's old value (`None`: it did not exist). Kept while a snapshot runs.
type CowLog = HashMap<Vec<u8>, Option<Vec<u8>>>;

struct Inner {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// While a snapshot runs: what writers changed since it started (locked
    /// after `map`, only while holding it).
    cow: Mutex<Option<CowLog>>,
    aof: Option<Aof>,
    snapshot_path: PathBuf,
    persistence: MemoryPersistence,
    /// Writes since the last snapshot.
    dirty: AtomicU64,
    last_save_unix: AtomicU64,
    snapshots_taken: AtomicU64,
    last_snapshot_ok: AtomicBool,
    stopping: AtomicBool,
    /// Serializes snapshot writers (timer, BGSAVE, shutdown).
    saving: Mutex<()>,
    bytes: AtomicU64,
}

/// A [`Backend`] in DRAM with optional command log or snapshots.
pub struct MemoryStore {
    inner: Arc<Inner>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

fn now_unix() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn entry_bytes(k: &[u8], v: &[u8]) -> u64 {
    (k.len() + v.len() + 48) as u64
}

impl MemoryStore {
    /// Loads what `dir` holds (the command log if enabled and present,
    /// else the snapshot) and starts the background fsync/snapshot work.
    pub fn open(dir: &Path, persistence: MemoryPersistence) -> StoreResult<MemoryStore> {
        std::fs::create_dir_all(dir)?;
        let snapshot_path = dir.join(SNAPSHOT_FILE);
        let mut map = BTreeMap::new();
        let mut aof = None;
        if let Some(policy) = persistence.appendfsync {
            let aof_path = dir.join(AOF_FILE);
            if !aof_path.exists() {
                if let Some(snap) = snapshot::load(&snapshot_path)? {
                    // Switching from snapshots to a log: the log starts as a
                    // copy of the snapshot, made whole before it exists (a
                    // crash meanwhile leaves no log, so the snapshot counts).
                    super::aof::write_new(&aof_path, snap.iter())?;
                }
            }
            let (log, records) = Aof::open(&aof_path, policy)?;
            for rec in records {
                apply(&mut map, rec);
            }
            aof = Some(log);
        } else {
            // Also without `--snapshot-seconds`: a snapshot SAVE, BGSAVE or
            // SHUTDOWN SAVE wrote is loaded, as Redis loads dump.rdb.
            if let Some(snap) = snapshot::load(&snapshot_path)? {
                map = snap;
            }
        }
        let bytes = map.iter().map(|(k, v)| entry_bytes(k, v)).sum();
        let inner = Arc::new(Inner {
            map: RwLock::new(map),
            cow: Mutex::new(None),
            aof,
            snapshot_path,
            persistence,
            dirty: AtomicU64::new(0),
            last_save_unix: AtomicU64::new(now_unix()),
            snapshots_taken: AtomicU64::new(0),
            last_snapshot_ok: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            saving: Mutex::new(()),
            bytes: AtomicU64::new(bytes),
        });
        let store = MemoryStore { inner, threads: Mutex::new(Vec::new()) };
        store.start_background();
        Ok(store)
    }

    fn start_background(&self) {
        let everysec = self.inner.aof.as_ref().is_some_and(|a| a.policy() == FsyncPolicy::EverySec);
        let snap_every = self.inner.persistence.snapshot_seconds;
        if !everysec && snap_every == 0 && self.inner.aof.is_none() {
            return;
        }
        let inner = self.inner.clone();
        let handle = std::thread::Builder::new().name("strata-persist".into()).spawn(move || {
            let mut last_snap = Instant::now();
            let mut last_fsync = Instant::now();
            // Checked every 100 ms (so shutdown does not wait), acted on
            // only when due.
            while !inner.stopping.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(100));
                if let Some(aof) = &inner.aof {
                    if everysec && last_fsync.elapsed() >= EVERYSEC {
                        last_fsync = Instant::now();
                        // Once a second, as Redis; nothing new: no fsync.
                        // Failures surface again at shutdown's final fsync.
                        if aof.has_unsynced() {
                            let _ = aof.sync_now();
                        }
                    }
                    if aof.wants_rewrite() {
                        let map = inner.map.read();
                        let _ = aof.rewrite(map.iter());
                    }
                }
                if snap_every > 0 && last_snap.elapsed() >= Duration::from_secs(snap_every) {
                    last_snap = Instant::now();
                    if inner.dirty.load(Ordering::Acquire) > 0 {
                        let _ = inner.snapshot();
                    }
                }
            }
        });
        if let Ok(h) = handle {
            self.threads.lock().push(h);
        }
    }
}

/// How often `everysec` fsyncs the command log.
pub const EVERYSEC: Duration = Duration::from_secs(1);

impl Inner {
    /// Writes a snapshot of the current map.
    fn snapshot(&self) -> StoreResult<()> {
        self.snapshot_notify(&mut || {})
    }

    /// Writes a snapshot of the map as it is when `started` is called.
    fn snapshot_notify(&self, started: &mut dyn FnMut()) -> StoreResult<()> {
        let _one = self.saving.lock();
        let dirty_before = self.dirty.load(Ordering::Acquire);
        let copy = self.snapshot_view(started, || {});
        let res = snapshot::save(&self.snapshot_path, &copy);
        self.last_snapshot_ok.store(res.is_ok(), Ordering::Release);
        if res.is_ok() {
            self.dirty.fetch_sub(dirty_before, Ordering::AcqRel);
            self.last_save_unix.store(now_unix(), Ordering::Release);
            self.snapshots_taken.fetch_add(1, Ordering::Relaxed);
        }
        res
    }
}

impl Inner {
    /// A copy of the map as it was when this call started, taken without
    /// stopping clients: the map is read [`SNAPSHOT_CHUNK`] keys at a time
    /// under its read lock, and writers meanwhile record the old value of
    /// each key they change first (copy on write), which wins over what the
    /// chunks read. `between` runs between chunks, with no lock held.
    /// Callers hold `saving` (one snapshot at a time).
    fn snapshot_view(&self, started: &mut dyn FnMut(), mut between: impl FnMut()) -> BTreeMap<Vec<u8>, Vec<u8>> {
        {
            let _w = self.map.write();
            *self.cow.lock() = Some(CowLog::new());
        }
        started();
        let mut out = BTreeMap::new();
        let mut from: Option<Vec<u8>> = None;
        loop {
            let done = {
                let map = self.map.read();
                let cow = self.cow.lock();
                let range = match &from {
                    None => map.range::<[u8], _>((Bound::Unbounded, Bound::Unbounded)),
                    Some(f) => map.range::<[u8], _>((Bound::Excluded(f.as_slice()), Bound::Unbounded)),
                };
                let mut n = 0;
                for (k, v) in range.take(SNAPSHOT_CHUNK) {
                    n += 1;
                    // A key in the log changed since the start: its value
                    // then is the log's, added below.
                    if !cow.as_ref().is_some_and(|c| c.contains_key(k)) {
                        out.insert(k.clone(), v.clone());
                    }
                    from = Some(k.clone());
                }
                n < SNAPSHOT_CHUNK
            };
            if done {
                break;
            }
            between();
        }
        let log = {
            let _w = self.map.write();
            self.cow.lock().take()
        };
        for (k, v) in log.unwrap_or_default() {
            match v {
                Some(v) => out.insert(k, v),
                None => out.remove(&k),
            };
        }
        out
    }

    /// With the map's write lock held, before `keys` are written: records
    /// their current values for a snapshot in progress (first change only).
    fn record_old<'a>(&self, map: &BTreeMap<Vec<u8>, Vec<u8>>, keys: impl Iterator<Item = &'a Vec<u8>>) {
        if let Some(log) = self.cow.lock().as_mut() {
            for k in keys {
                if !log.contains_key(k) {
                    log.insert(k.clone(), map.get(k).cloned());
                }
            }
        }
    }

    /// With the map's write lock held, before a clear: moves every key not
    /// yet recorded into a snapshot's log (the clear drops them anyway).
    fn record_clear(&self, map: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
        if let Some(log) = self.cow.lock().as_mut() {
            for (k, v) in std::mem::take(map) {
                log.entry(k).or_insert(Some(v));
            }
        }
    }
}

/// Applies a record; returns the change in stored bytes (for a clear: the
/// bytes stored after it).
fn apply(map: &mut BTreeMap<Vec<u8>, Vec<u8>>, rec: Record) -> i64 {
    let mut delta = 0i64;
    match rec {
        Record::Clear(ops) => {
            // From empty: the change is the new total.
            map.clear();
            return apply(map, Record::Batch(ops));
        }
        Record::Batch(ops) => {
            for (k, v) in ops {
                match v {
                    Some(v) => {
                        delta += entry_bytes(&k, &v) as i64;
                        if let Some(old) = map.insert(k.clone(), v) {
                            delta -= entry_bytes(&k, &old) as i64;
                        }
                    }
                    None => {
                        if let Some(old) = map.remove(&k) {
                            delta -= entry_bytes(&k, &old) as i64;
                        }
                    }
                }
            }
        }
    }
    delta
}

impl Backend for MemoryStore {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.inner.map.read().get(key).cloned())
    }

    /// A copy of the map as it is now, taken as a snapshot file's is
    /// (a chunk at a time under the read lock, writers recording old
    /// values meanwhile: no pause of clients), one at a time with
    /// snapshots. A copy, not a view: the data set is in DRAM already,
    /// and while the view lives it takes as much again (the map has no
    /// versions to read an older state from).
    fn snapshot(&self) -> StoreResult<Box<dyn super::SnapshotView>> {
        let _one = self.inner.saving.lock();
        let copy = self.inner.snapshot_view(&mut || {}, || {});
        Ok(Box::new(super::view::MapView::new(copy)))
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let map = self.inner.map.read();
        let hi = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        if end.is_some_and(|e| e <= start) {
            return Ok(Vec::new());
        }
        Ok(map
            .range::<[u8], _>((Bound::Included(start), hi))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn write(&self, ops: Vec<Op>, _durable: bool) -> StoreResult<Pending> {
        let n = ops.len() as u64;
        let rec = Record::Batch(ops);
        let ticket = {
            let mut map = self.inner.map.write();
            let ticket = match &self.inner.aof {
                Some(aof) => Some(aof.append(&rec)?),
                None => None,
            };
            if let Record::Batch(ops) = &rec {
                self.inner.record_old(&map, ops.iter().map(|(k, _)| k));
            }
            let delta = apply(&mut map, rec);
            if delta >= 0 {
                self.inner.bytes.fetch_add(delta as u64, Ordering::Relaxed);
            } else {
                self.inner.bytes.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
            }
            ticket
        };
        self.inner.dirty.fetch_add(n, Ordering::AcqRel);
        Ok(Pending(ticket))
    }

    fn wait_durable(&self, pending: Pending) -> StoreResult<()> {
        match (&self.inner.aof, pending.0) {
            (Some(aof), Some(t)) => aof.wait_durable(t),
            _ => Ok(()),
        }
    }

    fn last_ticket(&self) -> Pending {
        // Records get their ticket under the map's write lock, before the
        // map shows them, so the last ticket covers all that readers see.
        Pending(self.inner.aof.as_ref().map(|a| a.last_ticket()))
    }

    fn clear(&self, _keep: &[u8], then: Vec<Op>, _durable: bool) -> StoreResult<Pending> {
        // One record and one map lock: readers and a replay see the old
        // keyspace or the new one, never the empty one in between.
        let n = then.len() as u64 + 1;
        let ticket = {
            let mut map = self.inner.map.write();
            let rec = Record::Clear(then);
            let ticket = match &self.inner.aof {
                Some(aof) => Some(aof.append(&rec)?),
                None => None,
            };
            self.inner.record_clear(&mut map);
            if let Record::Clear(ops) = &rec {
                self.inner.record_old(&map, ops.iter().map(|(k, _)| k));
            }
            let bytes = apply(&mut map, rec);
            self.inner.bytes.store(bytes.max(0) as u64, Ordering::Relaxed);
            ticket
        };
        self.inner.dirty.fetch_add(n, Ordering::AcqRel);
        Ok(Pending(ticket))
    }

    fn save(&self) -> StoreResult<()> {
        self.inner.snapshot()
    }

    fn save_notify(&self, started: &mut dyn FnMut()) -> StoreResult<()> {
        self.inner.snapshot_notify(started)
    }

    fn info(&self) -> Vec<(String, String)> {
        let i = &self.inner;
        let aof = i.aof.as_ref();
        vec![
            ("storage".into(), "memory".into()),
            ("aof_enabled".into(), u8::from(aof.is_some()).to_string()),
            ("appendfsync".into(), aof.map(|a| a.policy().name()).unwrap_or("off").into()),
            ("aof_current_size".into(), aof.map(|a| a.size()).unwrap_or(0).to_string()),
            ("snapshot_seconds".into(), i.persistence.snapshot_seconds.to_string()),
            ("rdb_changes_since_last_save".into(), i.dirty.load(Ordering::Relaxed).to_string()),
            ("rdb_last_save_time".into(), i.last_save_unix.load(Ordering::Relaxed).to_string()),
            ("aof_fsyncs".into(), aof.map(|a| a.fsyncs()).unwrap_or(0).to_string()),
            ("rdb_saves".into(), i.snapshots_taken.load(Ordering::Relaxed).to_string()),
            (
                "rdb_last_bgsave_status".into(),
                if i.last_snapshot_ok.load(Ordering::Relaxed) { "ok" } else { "err" }.into(),
            ),
        ]
    }

    fn used_memory(&self) -> u64 {
        self.inner.bytes.load(Ordering::Relaxed)
    }

    fn shutdown(&self, save: ShutdownSave) -> StoreResult<()> {
        self.inner.stopping.store(true, Ordering::Release);
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // The log is fsynced whatever `save` says, as Redis fsyncs its AOF.
        if let Some(aof) = &self.inner.aof {
            aof.sync_now()?;
        }
        let snapshot = match save {
            ShutdownSave::Default => self.inner.persistence.snapshot_seconds > 0,
            ShutdownSave::NoSave => false,
            ShutdownSave::Save => true,
        };
        if snapshot {
            self.inner.snapshot()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str) -> Op {
        (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec()))
    }

    /// Writes, deletes and a clear between the chunks of a snapshot (which
    /// run while the snapshot is under way, so clients are not stopped)
    /// do not change what it holds: the map as it was at its start.
    #[test]
    fn snapshot_is_point_in_time_while_writes_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = MemoryStore::open(dir.path(), MemoryPersistence::default()).unwrap();
        let n = SNAPSHOT_CHUNK * 5 + 7;
        let ops: Vec<Op> = (0..n).map(|i| put(&format!("k{i:06}"), &format!("v{i}"))).collect();
        let _ = store.write(ops, false).unwrap();
        let before = store.inner.map.read().clone();
        let mut step = 0;
        let view = store.inner.snapshot_view(&mut || {}, || {
            step += 1;
            let w = match step {
                1 => vec![put("k000001", "changed"), put("k999999", "new"), (b"k004000".to_vec(), None)],
                2 => vec![put(&format!("k{:06}", n - 1), "changed late"), put("a-first", "new")],
                _ => Vec::new(),
            };
            if step == 3 {
                let _ = store.clear(b"", vec![put("k000002", "after clear")], false).unwrap();
            } else if !w.is_empty() {
                let _ = store.write(w, false).unwrap();
            }
        });
        assert_eq!(step, 3, "the snapshot ran in chunks, ending once the clear emptied the map");
        assert_eq!(view, before);
        // The writes themselves took effect, and no log is left behind.
        assert_eq!(store.get(b"k000002").unwrap(), Some(b"after clear".to_vec()));
        assert!(store.get(b"k000001").unwrap().is_none());
        assert!(store.inner.cow.lock().is_none());
    }

    /// Without any persistence configured a snapshot SAVE wrote is loaded
    /// at the next start (Redis loads dump.rdb), and SHUTDOWN NOSAVE does
    /// not write one while SHUTDOWN SAVE does.
    #[test]
    fn shutdown_save_modes_and_loading_a_saved_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let snap = dir.path().join(SNAPSHOT_FILE);
        let snapshots = MemoryPersistence { appendfsync: None, snapshot_seconds: 3600 };
        let s = MemoryStore::open(dir.path(), snapshots).unwrap();
        let _ = s.write(vec![put("a", "1")], false).unwrap();
        s.shutdown(ShutdownSave::NoSave).unwrap();
        assert!(!snap.exists(), "NOSAVE must not save even with snapshots configured");
        drop(s);

        let s = MemoryStore::open(dir.path(), MemoryPersistence::default()).unwrap();
        let _ = s.write(vec![put("a", "1")], false).unwrap();
        s.shutdown(ShutdownSave::Default).unwrap();
        assert!(!snap.exists(), "no persistence configured: a plain shutdown does not save");
        drop(s);

        let s = MemoryStore::open(dir.path(), MemoryPersistence::default()).unwrap();
        let _ = s.write(vec![put("a", "1")], false).unwrap();
        s.save().unwrap();
        let _ = s.write(vec![put("b", "2")], false).unwrap();
        s.shutdown(ShutdownSave::Default).unwrap();
        drop(s);
        let s = MemoryStore::open(dir.path(), MemoryPersistence::default()).unwrap();
        assert_eq!(s.get(b"a").unwrap(), Some(b"1".to_vec()), "SAVE's snapshot is loaded");
        assert!(s.get(b"b").unwrap().is_none(), "writes after SAVE are not");
        let _ = s.write(vec![put("c", "3")], false).unwrap();
        s.shutdown(ShutdownSave::Save).unwrap();
        drop(s);
        let s = MemoryStore::open(dir.path(), MemoryPersistence::default()).unwrap();
        assert_eq!(s.get(b"c").unwrap(), Some(b"3".to_vec()), "SHUTDOWN SAVE saves");
        s.shutdown(ShutdownSave::NoSave).unwrap();
    }
}
