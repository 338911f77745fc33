//! The database: write path, read path, background work.
//!
//! # Locks, in the only order they are taken
//!
//! * `write` (reservation: sequence numbers, log space, the mutable memtable)
//!   → `state` (sealed memtables, the version readers see, stall/poison)
//! * `versions` (the MANIFEST) → `state`
//!
//! Nobody takes `write` or `versions` while holding `state`, and nobody
//! takes `write` while holding `versions`.

mod background;
mod iter;
mod matrix_work;
mod open;
mod pipeline;
mod run_work;
mod snapshot;
mod stats;
mod write;

pub use crate::key::KeyRange;
pub use iter::{Cursor, DbIter};
pub use open::REGION_FILE;
pub use snapshot::Snapshot;
pub use stats::{LevelStats, Stats};

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use strata_pmem::{Extent, ExtentWriter, HeadSync, Region};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::fs::{FileLock, Fs};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::key_hash;
use crate::key::{Lookup, SeqNo, MAX_KEY_LEN};
use crate::matrix::{MatrixState, MatrixView};
use crate::memtable::{MemBuffers, Memtable};
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::sstable::TableOptions;
use crate::version::{FileMeta, TableCache, Version, VersionSet};

use pipeline::Pipeline;

/// What a reader needs, swapped atomically: memtables and the version.
pub(crate) struct SuperVersion {
    pub mem: Arc<Memtable>,
    /// Sealed memtables, newest first.
    pub imms: Vec<Arc<Memtable>>,
    /// The matrix rows (empty unless l0 = Matrix).
    pub matrix: Arc<MatrixView>,
    pub version: Arc<Version>,
}

/// Reservation state: who writes where, with which sequence numbers.
pub(crate) struct WriteState {
    pub mem: Arc<Memtable>,
    pub writer: Option<ExtentWriter>,
    /// Heads of the newest log extents allocated, oldest first (at most
    /// [`LOG_HEADS_IN_FLIGHT`]): the helper thread may still be msyncing
    /// them (see `DbInner::reserve`).
    pub pending_heads: VecDeque<HeadSync>,
    /// Bytes reserved so far in the current log extent (shared with its
    /// `UnsyncedLog`).
    pub log_tail: Arc<AtomicU64>,
    pub log_number: u64,
    pub next_log_number: u64,
    pub next_seq: SeqNo,
    pub next_mem_id: u64,
}

/// Shared state of the background work.
pub(crate) struct State {
    pub mem: Arc<Memtable>,
    /// Sealed memtables, oldest first.
    pub imms: VecDeque<Arc<Memtable>>,
    pub version: Arc<Version>,
    pub matrix: Arc<MatrixView>,
    /// Log bytes of data in the matrix not yet compacted, and PM bytes it holds.
    pub matrix_data_bytes: u64,
    pub matrix_pm_bytes: u64,
    /// A column compaction is running.
    pub column_busy: bool,
    /// Files being compacted.
    pub busy: HashSet<u64>,
    /// Files removed from the version, deleted once no version uses them.
    pub obsolete: Vec<Arc<FileMeta>>,
    /// Set when a write or background failure leaves durable state unknown.
    pub poisoned: Option<String>,
    /// A retryable background failure (the disk is full): flushes and
    /// compactions retry, writers get back-pressure and then this error.
    pub bg_error: Option<Error>,
    /// Since when a flush (or row merge) has been waiting for free PM
    /// slots to build a matrix row; None while it is not.
    pub pm_wait_since: Option<Instant>,
    /// The value of `bg_retries` when the attempt that set `bg_error` began.
    pub bg_error_retry: u64,
    /// Bumped by a caller that waits on background work while `bg_error`
    /// is set, to have it retried at once (the disk may have room again):
    /// only a failure of an attempt begun since then is reported to it.
    pub bg_retries: u64,
    pub compactions_running: usize,
    /// Bumped whenever a flush or compaction installs a version.
    pub installs: u64,
}

/// Counters behind [`Stats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub user_bytes: AtomicU64,
    pub writes: AtomicU64,
    pub table_bytes_written: AtomicU64,
    pub flushes: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub stall_micros: AtomicU64,
    pub slowdowns: AtomicU64,
    pub gets: AtomicU64,
    pub columns: AtomicU64,
    pub run_merges: AtomicU64,
    pub throttled_micros: AtomicU64,
    /// Matrix rows an iterator left out by their prefix filter.
    pub prefix_skipped_rows: AtomicU64,
}

/// A log extent that may hold data not yet msynced (file placement only).
/// Holds no lease: the extent's slots are freed as usual meanwhile.
#[derive(Clone, Debug)]
pub(crate) struct UnsyncedLog {
    pub off: u64,
    pub len: u64,
    /// Bytes reserved in the extent so far: a sync covers only those. The
    /// rest was prefaulted, so its pages are dirty zeros that writing back
    /// now would only have to write again once filled.
    pub reserved: Arc<AtomicU64>,
    /// Syncs the extent's head word.
    pub head: HeadSync,
    /// The first sequence number reserved in it: every write reserved in
    /// the extent before it is lower.
    pub first_seq: u64,
}

impl PartialEq for UnsyncedLog {
    fn eq(&self, other: &Self) -> bool {
        (self.off, self.len, self.first_seq) == (other.off, other.len, other.first_seq)
    }
}

/// How many of the newest log extents' heads may still be on their way to
/// the media. Before a log extent is allocated, the head of the one this
/// many extents older must be durable, so at a power cut only the heads of
/// the newest this many extents can be missing: the next open never hands
/// out their numbers again (see `open`), and a missing one leaves a hole
/// in the log, where recovery stops (sequence numbers must continue).
/// An msync of a head is a device flush and can take tens of
/// milliseconds while tables are being written back, longer than a
/// writer takes to fill an extent. Measured over a 4.2M x 1 KiB data-dir
/// fill, the writer waited for a head more than 0.2 ms: about 80 times
/// (up to 60 ms, the fill's max put latency) with 1 in flight, 13-16
/// with 2, 1-3 (up to 10 ms) with 3.
pub(crate) const LOG_HEADS_IN_FLIGHT: usize = 3;

/// Work for the prefault thread, which takes page faults off the write path.
pub(crate) enum PrefaultJob {
    /// Map in the first `map_bytes` of a log extent the writer has just
    /// started, and make its head durable.
    Extent { ext: Extent, map_bytes: u64 },
    /// Make buffers of this capacity ready for the next memtable.
    Memtable(usize),
}

pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub opts: Options,
    pub fs: Arc<dyn Fs>,
    _lock: Box<dyn FileLock>,
    pub region: Region,
    pub region_path: PathBuf,
    pub shared_region_path: Arc<PathBuf>,
    pub tables: Arc<TableCache>,
    pub write: Mutex<WriteState>,
    pub pipeline: Pipeline,
    pub state: Mutex<State>,
    /// Signalled when background work may be due or has finished.
    pub state_cv: Condvar,
    pub versions: Mutex<VersionSet>,
    /// The matrix's authoritative state; changed only with `versions` held.
    pub matrix: Mutex<MatrixState>,
    pub sv: ArcSwap<SuperVersion>,
    pub snapshots: Mutex<BTreeMap<SeqNo, usize>>,
    /// Log extents that may hold data not yet msynced, oldest first.
    /// Ranges, not leases: msyncing a range that was freed meanwhile is harmless.
    pub unsynced: Mutex<Vec<UnsyncedLog>>,
    pub shutting_down: AtomicBool,
    /// Mirrors `state.poisoned.is_some()` for a lock-free check on the write path.
    pub poisoned_flag: AtomicBool,
    /// Write rate limit in bytes per second while the matrix is filling
    /// faster than column compaction drains it (0 = none), and the time the
    /// next throttled write may go.
    pub throttle_rate: AtomicU64,
    pub throttle_next: Mutex<std::time::Instant>,
    pub counters: Counters,
    pub threads: Mutex<Vec<JoinHandle<()>>>,
    /// Hands work to the prefault thread (None without one, or once shut
    /// down).
    pub prefault: Mutex<Option<std::sync::mpsc::Sender<PrefaultJob>>>,
    /// Memtable buffers the prefault thread made ready for the next
    /// memtable switch.
    pub spare_mem: Arc<Mutex<Option<MemBuffers>>>,
    pub recovery_micros: u64,
    /// Damage recovery found and stepped over: (region offset, what).
    pub recovery_anomalies: Vec<(u64, String)>,
    pub table_opts: TableOptions,
}

/// An open database. Cheap to clone; every clone is the same database,
/// and it is closed when the last clone is dropped (or by [`Db::close`]).
#[derive(Clone)]
pub struct Db {
    inner: Arc<DbInner>,
    _guard: Arc<CloseGuard>,
}

/// Shuts the database down when the last `Db` clone goes away. Background
/// threads hold `Arc<DbInner>` but not this guard.
struct CloseGuard {
    inner: Arc<DbInner>,
}

impl Drop for CloseGuard {
    fn drop(&mut self) {
        // Errors cannot be reported from Drop; `Db::close` reports them.
        let _ = self.inner.shutdown();
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

impl Db {
    /// Opens (creating if allowed) the database in `dir`, recovering
    /// whatever a crash left in the PM log.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = open::open(dir.as_ref(), opts)?;
        Ok(Db { _guard: Arc::new(CloseGuard { inner: inner.clone() }), inner })
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with write options (e.g. `sync`).
    pub fn put_opt(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, wo: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write_opt(&b, wo)
    }

    /// Removes `key` (a no-op if absent).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Removes `key` with write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, wo: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write_opt(&b, wo)
    }

    /// Applies a batch atomically: all of it or none, also after a crash.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(&batch, &WriteOptions::default())
    }

    /// Applies a batch atomically with write options.
    pub fn write_opt(&self, batch: &WriteBatch, wo: &WriteOptions) -> Result<()> {
        self.inner.write(batch, wo.sync)
    }

    /// The current value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// The value of `key` as of `ro.snapshot` (or now).
    pub fn get_opt(&self, key: impl AsRef<[u8]>, ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if key.len() > MAX_KEY_LEN {
            return Err(Error::InvalidArgument(format!("key of {} bytes exceeds the limit", key.len())));
        }
        match ro.snapshot {
            Some(seq) => self.inner.get_at(key, seq),
            None => {
                let (sv, seq) = self.inner.view_now();
                self.inner.get_in(&sv, key, seq)
            }
        }
    }

    /// Hints that `keys` are about to be read: asks the CPU for the first
    /// cache lines a point lookup of each reads (memtable filter blocks and
    /// index buckets, the matrix segments' index slots), so that the cache
    /// misses of a group of lookups overlap instead of coming one by one.
    /// Reads and changes nothing; a server calls it for a pipeline's keys.
    pub fn prefetch<K: AsRef<[u8]>>(&self, keys: &[K]) {
        let sv = self.inner.sv.load();
        for k in keys {
            let hash = key_hash(k.as_ref());
            for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
                m.prefetch(hash);
            }
            sv.matrix.prefetch(hash);
        }
    }

    /// Values of several keys, read at one consistent point (one view:
    /// its versions up to the read point are a prefix of the write order).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let (sv, seq) = self.inner.view_now();
        keys.iter().map(|k| self.inner.get_in(&sv, k.as_ref(), seq)).collect()
    }

    /// A consistent read view at the current point; released when dropped.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.clone())
    }

    /// Iterates the keys in `range` (both directions; see [`DbIter`]).
    pub fn iter(&self, range: impl Into<KeyRange>) -> Result<DbIter> {
        // The iterator builds its cursor at its first step; until it is
        // dropped, a snapshot keeps compaction from dropping what it reads.
        let pin = self.snapshot();
        DbIter::new(self.inner.clone(), range.into(), pin.sequence(), Some(pin))
    }

    /// Iterates `range` as of a snapshot sequence (the caller keeps that
    /// snapshot alive), or as of now.
    pub fn iter_opt(&self, range: impl Into<KeyRange>, ro: &ReadOptions) -> Result<DbIter> {
        match ro.snapshot {
            Some(seq) => DbIter::new(self.inner.clone(), range.into(), seq, None),
            None => self.iter(range),
        }
    }

    /// A positionable cursor (seek, next, prev) over `range` at the current point.
    pub fn cursor(&self, range: impl Into<KeyRange>) -> Result<Cursor> {
        self.iter(range)?.cursor()
    }

    /// Blocks until no flush or compaction is running or due (db_bench's
    /// `waitforcompaction`). Returns at once if background compaction is disabled.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_compactions()
    }

    /// Seals the memtable and waits until everything written so far is in tables.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_all()
    }

    /// Compacts every level overlapping `range` down to the bottom, dropping
    /// overwritten versions and tombstones not needed by snapshots.
    pub fn compact_range(&self, range: impl Into<KeyRange>) -> Result<()> {
        self.inner.compact_range(range.into())
    }

    /// Counters and the shape of the tree.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Reads every table block and checks every checksum and the key order.
    /// Returns the number of table entries verified.
    pub fn verify_checksums(&self) -> Result<u64> {
        self.inner.verify()
    }

    /// Makes every write so far durable against power loss (msync of the log).
    /// Fails once an msync has failed: that data may never reach the disk.
    pub fn sync(&self) -> Result<()> {
        if self.inner.poisoned_flag.load(Ordering::Acquire) {
            self.inner.check_writable()?;
        }
        self.inner.sync_log()
    }

    /// Stops background work, syncs the log and releases the directory.
    /// Other clones of this `Db` get `Error::Closed` afterwards.
    pub fn close(self) -> Result<()> {
        self.inner.shutdown()
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }
}

impl DbInner {
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if let Some(p) = &self.state.lock().poisoned {
            return Err(Error::Poisoned(p.clone()));
        }
        Ok(())
    }

    /// Refuses further writes until the database is reopened.
    pub(crate) fn poison(&self, why: &Error) {
        let mut st = self.state.lock();
        if st.poisoned.is_none() {
            st.poisoned = Some(why.to_string());
        }
        self.poisoned_flag.store(true, Ordering::Release);
        self.state_cv.notify_all();
    }

    /// The value of `key` at `seq`, which a registered snapshot protects.
    pub(crate) fn get_at(&self, key: &[u8], seq: SeqNo) -> Result<Option<Vec<u8>>> {
        self.get_in(&self.sv.load(), key, seq)
    }

    /// The readers' view and a read point for reading now. The view is
    /// taken first: it holds every write visible at that moment, with every
    /// version it read (a flush that drops versions older than the newest
    /// visible one builds a new view). Taking the point first would let a
    /// flush in between drop the version the point needs.
    pub(crate) fn view_now(&self) -> (arc_swap::Guard<Arc<SuperVersion>>, SeqNo) {
        let sv = self.sv.load();
        (sv, self.pipeline.visible())
    }

    /// The value of `key` at `seq` in the view `sv`.
    pub(crate) fn get_in(&self, sv: &SuperVersion, key: &[u8], seq: SeqNo) -> Result<Option<Vec<u8>>> {
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        let hash = key_hash(key);
        for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            match m.get(key, hash, seq)? {
                Lookup::Found(v) => return Ok(Some(v)),
                Lookup::Deleted => return Ok(None),
                Lookup::Missing => {}
            }
        }
        if !sv.matrix.is_empty() {
            match sv.matrix.get(key, seq, hash)? {
                Lookup::Found(v) => return Ok(Some(v)),
                Lookup::Deleted => return Ok(None),
                Lookup::Missing => {}
            }
        }
        match sv.version.get(&self.tables, key, hash, seq)? {
            Lookup::Found(v) => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// Cursors over every source that may hold keys of `range`, newest
    /// first, pinned by the returned superversion.
    pub(crate) fn source_iters(&self, range: &KeyRange) -> Result<Vec<Box<dyn InternalIterator>>> {
        let sv = self.sv.load_full();
        let mut out: Vec<Box<dyn InternalIterator>> = Vec::new();
        out.push(Box::new(sv.mem.iter()));
        for m in &sv.imms {
            out.push(Box::new(m.iter()));
        }
        let prefix = self.opts.prefix_extractor.as_deref().and_then(|x| crate::key::range_prefix(x, range));
        let skipped = sv.matrix.add_iterators(&mut out, prefix.as_deref());
        self.counters.prefix_skipped_rows.fetch_add(skipped as u64, Ordering::Relaxed);
        sv.version.add_iterators(&self.tables, &mut out)?;
        Ok(out)
    }

    /// One cursor over every source that may hold keys of `range`.
    pub(crate) fn merged_iter(&self, range: &KeyRange) -> Result<MergingIterator> {
        Ok(MergingIterator::new(self.source_iters(range)?))
    }

    /// Rebuilds the readers' view from `st` (call with `state` held).
    pub(crate) fn install_sv(&self, st: &State) {
        self.sv.store(Arc::new(SuperVersion {
            mem: st.mem.clone(),
            imms: st.imms.iter().rev().cloned().collect(),
            matrix: st.matrix.clone(),
            version: st.version.clone(),
        }));
    }

    /// Oldest sequence any reader may still read at.
    pub(crate) fn oldest_snapshot(&self) -> SeqNo {
        let snaps = self.snapshots.lock();
        let visible = self.pipeline.visible();
        snaps.keys().next().copied().map(|s| s.min(visible)).unwrap_or(visible)
    }

    /// msyncs the log so every write published so far is durable.
    pub(crate) fn sync_log(&self) -> Result<()> {
        self.sync_log_upto(self.pipeline.visible())
    }

    /// msyncs every log extent that may hold unsynced data; every write up
    /// to sequence `filled` must already be in PM. An extent leaves the list
    /// only when a newer one exists and all writes reserved in it are
    /// `<= filled`: a writer that reserved space in an older extent may
    /// still be copying into it after a newer extent was allocated, and a
    /// later sync must cover its bytes.
    ///
    /// A failed msync poisons the database before this returns: the kernel
    /// may have dropped the dirty pages, so a later sync that succeeds would
    /// not mean the data is durable (fsyncgate), and writers acknowledged
    /// after this call returns check for poison.
    pub(crate) fn sync_log_upto(&self, filled: u64) -> Result<()> {
        let list: Vec<UnsyncedLog> = self.unsynced.lock().clone();
        for e in &list {
            // The head first: without it recovery does not find the data.
            let reserved = e.reserved.load(Ordering::Acquire).min(e.len);
            let synced = e.head.sync().and_then(|_| self.region.sync(e.off, reserved));
            if let Err(err) = synced {
                let err = Error::from_pm(&self.region_path, err);
                self.poison(&err);
                return Err(err);
            }
        }
        let done: Vec<UnsyncedLog> =
            list.windows(2).filter(|w| w[1].first_seq <= filled.saturating_add(1)).map(|w| w[0].clone()).collect();
        if !done.is_empty() {
            self.unsynced.lock().retain(|e| !done.contains(e));
        }
        Ok(())
    }

    fn verify(&self) -> Result<u64> {
        if let Some((off, why)) = self.recovery_anomalies.first() {
            return Err(Error::corruption(&self.region_path, *off, why.clone()));
        }
        let v = self.sv.load().version.clone();
        let mut n = 0;
        for f in v.all_files() {
            n += self.tables.get(f.number)?.verify()?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Db, L0Kind, Options};

    /// The view a read takes first still serves its read point after a
    /// flush drops that version from the newer view (the flush keeps only
    /// the newest version visible to everyone): what `get` and `multi_get`
    /// rely on. Reading through the view loaded after the flush loses it.
    #[test]
    fn a_view_taken_before_a_flush_keeps_the_version_its_read_point_needs() {
        for l0 in [L0Kind::Matrix, L0Kind::Sstable] {
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open(dir.path(), Options { l0, ..Options::for_tests() }).unwrap();
            db.put(b"k", b"v1").unwrap();
            let (sv, seq) = db.inner.view_now();
            db.put(b"k", b"v2").unwrap();
            db.flush().unwrap();
            assert_eq!(db.inner.get_in(&sv, b"k", seq).unwrap().as_deref(), Some(&b"v1"[..]), "{l0:?}");
            // The newer view no longer holds v1: this is the read the old order made.
            assert_eq!(db.inner.get_at(b"k", seq).unwrap(), None, "{l0:?}");
        }
    }
}
