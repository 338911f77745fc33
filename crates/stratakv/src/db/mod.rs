//! The database: the public [`Db`] API over the engine (`crate::engine`)
//! and whichever level 0 it was created with (`crate::l0`).
//!
//! | file | what |
//! | --- | --- |
//! | `mod.rs` | [`Db`]: the API |
//! | `open.rs` | opening: lock, MANIFEST, PM region, level 0, log replay |
//! | `write.rs` | the write path: back-pressure, reservation, copy into PM, publication |
//! | `read.rs` | point lookups and the sources an iterator merges |
//! | `iter.rs`, `snapshot.rs` | iterators and snapshots |
//! | `threads.rs` | every background thread's loop, and shutdown |
//! | `compact.rs` | leveled compaction, `flush`, `compact_range`, waiting for background work |
//! | `stats.rs` | `Db::stats` |

mod compact;
mod iter;
mod open;
mod read;
mod snapshot;
mod stats;
mod threads;
mod write;

pub use iter::{Cursor, DbIter};
pub use open::REGION_FILE;
pub use snapshot::Snapshot;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::batch::WriteBatch;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fs::FileLock;
use crate::key::{key_hash, KeyRange, MAX_KEY_LEN};
use crate::l0::Level0;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::stats::Stats;

/// An open database's insides: the engine, its level 0, and what belongs
/// to the open itself.
pub(crate) struct DbInner {
    /// The shared state.
    pub eng: Engine,
    /// The level 0 the database was created with.
    pub l0: Box<dyn Level0>,
    /// Background threads, joined at shutdown.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The directory lock, held while open.
    _lock: Box<dyn FileLock>,
    /// How long the open took, recovery included.
    recovery_micros: u64,
    /// Damage recovery found and stepped over: (region offset, what).
    recovery_anomalies: Vec<(u64, String)>,
    /// The database has (or had) partitions: keys beginning with the
    /// partitions' mark are theirs, not the default partition's.
    pub(crate) partitioned: std::sync::atomic::AtomicBool,
    /// Serializes creating and dropping partitions.
    pub(crate) partition_ops: Mutex<()>,
    /// The version (its address) whose range tombstones were last looked
    /// at for retirement (`pick_retire`).
    pub(crate) retire_checked: Mutex<std::sync::Weak<crate::version::Version>>,
    /// (table, tombstone sequence) pairs found to hold nothing the
    /// tombstone hides (`tombstone_target`).
    pub(crate) tombstone_clean: Mutex<std::collections::HashSet<(u64, u64)>>,
    /// Per live partition id, the flag its handles check (cleared on drop).
    pub(crate) live_partitions: Mutex<std::collections::HashMap<u32, Arc<std::sync::atomic::AtomicBool>>>,
}

/// An open database. Cheap to clone; every clone is the same database,
/// and it is closed when the last clone is dropped (or by [`Db::close`]).
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<DbInner>,
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
        f.debug_struct("Db").field("dir", &self.inner.eng.dir).finish()
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
                let (sv, seq) = self.inner.eng.view_now();
                self.inner.get_in(&sv, key, seq)
            }
        }
    }

    /// Hints that `keys` are about to be read: asks the CPU for the first
    /// cache lines a point lookup of each reads (memtable filter blocks and
    /// index buckets, level 0's index slots), so that the cache
    /// misses of a group of lookups overlap instead of coming one by one.
    /// Reads and changes nothing; a server calls it for a pipeline's keys.
    pub fn prefetch<K: AsRef<[u8]>>(&self, keys: &[K]) {
        let sv = self.inner.eng.sv.load();
        for k in keys {
            let hash = key_hash(k.as_ref());
            for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
                m.prefetch(hash);
            }
            sv.version.prefetch(hash);
        }
    }

    /// Values of several keys, read at one consistent point (one view:
    /// its versions up to the read point are a prefix of the write order).
    ///
    /// Keys the memtables do not answer are looked up in the tables
    /// together: their data blocks are deduplicated and read in one batch
    /// (io_uring, or a thread pool; `Stats::read_batching` says which).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let (sv, seq) = self.inner.eng.view_now();
        self.inner.multi_get_in(&sv, keys, seq)
    }

    /// A consistent read view at the current point; released when dropped.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.clone())
    }

    /// Iterates the keys in `range` (both directions; see [`DbIter`]).
    pub fn iter(&self, range: impl Into<KeyRange>) -> Result<DbIter> {
        // The iterator builds its cursor at its first step; until it is
        // dropped, a snapshot keeps compaction from dropping what it reads.
        self.inner.iter_engine(self.inner.default_range(range.into()), None)
    }

    /// Iterates `range` as of a snapshot sequence (the caller keeps that
    /// snapshot alive), or as of now.
    pub fn iter_opt(&self, range: impl Into<KeyRange>, ro: &ReadOptions) -> Result<DbIter> {
        self.inner.iter_engine(self.inner.default_range(range.into()), ro.snapshot)
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
        if self.inner.eng.poisoned_flag.load(Ordering::Acquire) {
            self.inner.eng.check_writable()?;
        }
        self.inner.eng.sync_log_waited(self.inner.eng.pipeline.visible())
    }

    /// Stops background work, syncs the log and releases the directory.
    /// Other clones of this `Db` get `Error::Closed` afterwards.
    pub fn close(self) -> Result<()> {
        self.inner.shutdown()
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.inner.eng.dir
    }
}

impl DbInner {
    /// Reads every table block and checks every checksum and the key
    /// order; reports damage recovery stepped over in the PM log first.
    fn verify(&self) -> Result<u64> {
        if let Some((off, why)) = self.recovery_anomalies.first() {
            return Err(Error::corruption(&*self.eng.region_path, *off, why.clone()));
        }
        let v = self.eng.sv.load().version.clone();
        let mut n = 0;
        for f in v.all_files() {
            n += self.eng.tables.get(f.number)?.verify()?;
        }
        self.l0.check(&self.eng)?;
        Ok(n)
    }
}

/// What unit tests of other modules reach through a `Db`.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::Db;
    use crate::engine::Engine;

    /// The engine under `db`.
    pub fn engine_of(db: &Db) -> &Engine {
        &db.inner.eng
    }

    /// The level 0 of `db`.
    pub fn l0_of(db: &Db) -> &dyn crate::l0::Level0 {
        &*db.inner.l0
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
            let (sv, seq) = db.inner.eng.view_now();
            db.put(b"k", b"v2").unwrap();
            db.flush().unwrap();
            assert_eq!(db.inner.get_in(&sv, b"k", seq).unwrap().as_deref(), Some(&b"v1"[..]), "{l0:?}");
            // The newer view no longer holds v1: this is the read the old order made.
            assert_eq!(db.inner.get_at(b"k", seq).unwrap(), None, "{l0:?}");
        }
    }
}
