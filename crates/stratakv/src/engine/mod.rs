//! The engine's shared state: what the write path, the read path, the
//! background threads and the level-0 kinds (`l0/`) all work on. `db/` is
//! the facade over it; level-0 kinds use it without knowing `db/`.
//!
//! # Locks, in the only order they are taken
//!
//! 1. `log` write lock ([`LogWriter::lock`]: sequence numbers, log space,
//!    the mutable memtable)
//! 2. `versions` (the MANIFEST and the current version)
//! 3. a level-0 kind's own lock, if it has one (the matrix's round)
//! 4. `state` (sealed memtables, the version readers see, busy files,
//!    stall/poison/background error), with `cv` for waiting on it
//!
//! A thread holding a lock may take only locks later in this list; the
//! write lock and `versions` are never held together. The remaining
//! mutexes are leaves, never held while taking another: `snapshots`, the
//! throttle's clock, the pipeline's, the log's unsynced list, the prefault
//! thread's sender and spare buffers, and the table cache's.

mod background;
mod state;
mod throttle;

pub(crate) use state::{Counters, Stall, State, SuperVersion};
pub(crate) use throttle::Throttle;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use strata_pmem::Region;

use crate::compaction::BuildCtx;
use crate::error::Result;
use crate::fs::Fs;
use crate::key::SeqNo;
use crate::log::{LogWriter, Pipeline, WriteState};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::sstable::{BlockCache, TableOptions};
use crate::version::filename::table_path;
use crate::version::{FileMeta, L0State, TableCache, Version, VersionEdit, VersionSet};

/// The shared state of an open database (see the module doc).
pub(crate) struct Engine {
    /// The data directory.
    pub dir: PathBuf,
    /// Options, as validated and fixed at open.
    pub opts: Options,
    /// The file system tables and the MANIFEST live on.
    pub fs: Arc<dyn Fs>,
    /// The PM region.
    pub region: Region,
    /// The region file's path, for error messages.
    pub region_path: Arc<PathBuf>,
    /// Open tables and the block cache.
    pub tables: Arc<TableCache>,
    /// Table format options for new tables.
    pub table_opts: TableOptions,
    /// The log writer (holds the write lock).
    pub log: LogWriter,
    /// Publishes writes in sequence order.
    pub pipeline: Pipeline,
    /// The MANIFEST and the current version.
    pub versions: Mutex<VersionSet>,
    /// Background state.
    pub state: Mutex<State>,
    /// Signalled when background work may be due or has finished.
    pub cv: Condvar,
    /// What readers see, swapped atomically.
    pub sv: ArcSwap<SuperVersion>,
    /// Registered snapshots: sequence -> count.
    pub snapshots: Mutex<BTreeMap<SeqNo, usize>>,
    /// Paces writers while level 0 drains slower than they fill it.
    pub throttle: Throttle,
    /// Counters behind `Stats`.
    pub counters: Counters,
    /// How writers must wait for level 0 in a version (level 0's policy).
    stall_policy: StallPolicy,
    /// Set once `close` (or the last drop) began.
    pub shutting_down: AtomicBool,
    /// Mirrors `state.poisoned.is_some()` for a lock-free check on the write path.
    pub poisoned_flag: AtomicBool,
    /// The range tombstones the installed view holds (`Version::range_epoch`).
    pub range_epoch: AtomicU64,
}

/// Level 0's rule for how writers must wait in a version.
pub(crate) type StallPolicy = Box<dyn Fn(&Version) -> Stall + Send + Sync>;

/// What an open has made ready for the engine.
pub(crate) struct EngineParts {
    /// The data directory.
    pub dir: PathBuf,
    /// Validated options, with the database's level 0.
    pub opts: Options,
    /// The file system.
    pub fs: Arc<dyn Fs>,
    /// The PM region.
    pub region: Region,
    /// Its file's path.
    pub region_path: Arc<PathBuf>,
    /// The replayed MANIFEST, with level 0's state installed.
    pub versions: VersionSet,
    /// The memtable the log replay rebuilt.
    pub mem: Arc<Memtable>,
    /// The number the next log extent gets.
    pub next_log_number: u64,
    /// The last sequence number in the log or the MANIFEST.
    pub last_seq: SeqNo,
    /// Level 0's stall rule.
    pub stall_policy: StallPolicy,
}

/// A change to record in the MANIFEST and install for readers.
#[derive(Default)]
pub(crate) struct Commit {
    /// The edit.
    pub edit: VersionEdit,
    /// Level 0's new state, if the change has one.
    pub l0: Option<Arc<dyn L0State>>,
    /// The sealed memtable whose data the change holds now (dropped from
    /// the sealed list).
    pub flushed: Option<u64>,
    /// Table files the change no longer uses (deleted once no version does).
    pub obsolete: Vec<Arc<FileMeta>>,
}

impl Engine {
    /// The engine of a database opened this far; no thread runs yet.
    pub fn new(p: EngineParts) -> Engine {
        let opts = p.opts;
        let blocks = (opts.block_cache_bytes > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_bytes)));
        let tables = Arc::new(TableCache::new(p.fs.clone(), &p.dir, blocks).with_direct_reads(opts.use_direct_reads));
        let version = p.versions.current();
        let log = LogWriter::new(
            p.region.clone(),
            p.region_path.to_path_buf(),
            p.mem.clone(),
            p.next_log_number,
            p.last_seq + 1,
            opts.write_buffer_size,
        );
        if opts.entry_towers() {
            log.keep_free(crate::log::cleaning_reserve(p.region.slot_count()));
        }
        let sv = SuperVersion { mem: p.mem.clone(), imms: Vec::new(), version: version.clone() };
        Engine {
            dir: p.dir,
            fs: p.fs,
            region: p.region,
            region_path: p.region_path,
            tables,
            table_opts: TableOptions {
                block_size: opts.block_size,
                restart_interval: opts.block_restart_interval,
                bloom_bits_per_key: opts.bloom_bits_per_key,
                compression: opts.compression,
                index: opts.table_index,
            },
            log,
            pipeline: Pipeline::new(p.last_seq),
            versions: Mutex::new(p.versions),
            state: Mutex::new(State::new(p.mem, version.clone(), (p.stall_policy)(&version))),
            cv: Condvar::new(),
            sv: ArcSwap::from_pointee(sv),
            snapshots: Mutex::new(BTreeMap::new()),
            throttle: Throttle::default(),
            counters: Counters::default(),
            shutting_down: AtomicBool::new(false),
            poisoned_flag: AtomicBool::new(false),
            range_epoch: AtomicU64::new(version.range_epoch),
            stall_policy: p.stall_policy,
            opts,
        }
    }

    /// Wakes every thread waiting on `cv` for a change of `st` (call with
    /// `state` held).
    pub fn notify(&self, st: &mut State) {
        st.changed();
        self.cv.notify_all();
    }

    /// Rebuilds the readers' view from `st` (call with `state` held).
    pub fn install_sv(&self, st: &State) {
        self.sv.store(Arc::new(SuperVersion {
            mem: st.mem.clone(),
            imms: st.imms.iter().rev().cloned().collect(),
            version: st.version.clone(),
        }));
    }

    /// The readers' view and a read point for reading now. The view is
    /// taken first: it holds every write visible at that moment, with every
    /// version it read (a flush that drops versions older than the newest
    /// visible one builds a new view). Taking the point first would let a
    /// flush in between drop the version the point needs.
    ///
    /// A range tombstone is installed in the view before its sequence is
    /// published (`DbInner::delete_range`), so a point taken after the
    /// view may be at or past a tombstone the view lacks; then the view is
    /// taken again (rare: only while a `delete_range` completes).
    pub fn view_now(&self) -> (arc_swap::Guard<Arc<SuperVersion>>, SeqNo) {
        loop {
            let sv = self.sv.load();
            let seq = self.pipeline.visible();
            // Read after the point: a tombstone published at or before it
            // was counted before its publication.
            if sv.version.range_epoch >= self.range_epoch.load(Ordering::Acquire) {
                return (sv, seq);
            }
        }
    }

    /// Oldest sequence any reader may still read at.
    pub fn oldest_snapshot(&self) -> SeqNo {
        let snaps = self.snapshots.lock();
        let visible = self.pipeline.visible();
        snaps.keys().next().copied().map(|s| s.min(visible)).unwrap_or(visible)
    }

    /// msyncs the log so every write published so far is durable.
    pub fn sync_log(&self) -> Result<()> {
        self.sync_log_upto(self.pipeline.visible())
    }

    /// msyncs the log up to sequence `filled` (see [`LogWriter::sync_upto`]).
    /// A failed msync poisons the database before this returns: writers
    /// acknowledged after it check for poison.
    pub fn sync_log_upto(&self, filled: u64) -> Result<()> {
        self.log.sync_upto(filled).inspect_err(|e| self.poison(e))
    }

    /// [`Engine::sync_log_upto`] for a caller that waits for it to
    /// acknowledge a write (see [`LogWriter::waited_sync_upto`]).
    pub fn sync_log_waited(&self, filled: u64) -> Result<()> {
        self.log.waited_sync_upto(filled).inspect_err(|e| self.poison(e))
    }

    /// Seals the mutable memtable, starts a new one, and lets background
    /// work flush the sealed one.
    pub fn switch_memtable(&self, w: &mut WriteState) {
        let old = self.log.new_memtable(w);
        let mut st = self.state.lock();
        st.imms.push_back(old);
        st.mem = w.mem.clone();
        self.install_sv(&st);
        self.notify(&mut st);
    }

    /// Records `c` in the MANIFEST (`vs` is the locked version set) and
    /// installs the new version for readers.
    pub fn commit(&self, vs: &mut VersionSet, c: Commit) -> Result<()> {
        vs.log_and_apply_l0(c.edit, c.l0)?;
        self.publish(vs, c.flushed, c.obsolete);
        Ok(())
    }

    /// Makes `vs`'s current version the one readers and background work
    /// see, after dropping the sealed memtable `flushed` and noting the
    /// files that became `obsolete`.
    pub fn publish(&self, vs: &VersionSet, flushed: Option<u64>, obsolete: Vec<Arc<FileMeta>>) {
        let mut st = self.state.lock();
        if let Some(id) = flushed {
            if st.imms.front().map(|m| m.id()) == Some(id) {
                st.imms.pop_front();
            }
        }
        self.set_version(&mut st, vs.current());
        st.obsolete.extend(obsolete);
        self.install_sv(&st);
        // After the view that holds them (see `view_now`).
        self.range_epoch.store(st.version.range_epoch, Ordering::Release);
        self.notify(&mut st);
    }

    /// Makes `v` the version background work sees (call with `state`
    /// held), with how writers must wait in it.
    pub fn set_version(&self, st: &mut State, v: Arc<Version>) {
        st.stall = (self.stall_policy)(&v);
        st.version = v;
    }

    /// The current version, as background work sees it.
    pub fn version(&self) -> Arc<Version> {
        self.state.lock().version.clone()
    }

    /// The current version's tables, for a job to hold while it runs (see
    /// [`Version::tables_only`]).
    pub fn tables_version(&self) -> Arc<Version> {
        self.state.lock().version.tables_only()
    }

    /// Hands out a table file number.
    pub fn new_file_number(&self) -> u64 {
        self.versions.lock().new_file_number()
    }

    /// Where and how a merge writes tables of about `target` bytes, with
    /// file numbers from `next`.
    pub fn build_ctx<'a>(&'a self, next: &'a dyn Fn() -> u64, target: u64) -> BuildCtx<'a> {
        let v = self.version();
        BuildCtx {
            fs: &*self.fs,
            dir: &self.dir,
            table: self.table_opts.clone(),
            target_file_size: target,
            next_number: next,
            stop: Some(&self.shutting_down),
            pause: None,
            range_dels: v.range_dels.clone(),
            splits: v.splits.clone(),
        }
    }

    /// Deletes table files that no version references any more.
    pub fn delete_obsolete(&self) {
        let doomed: Vec<Arc<FileMeta>> = {
            let mut st = self.state.lock();
            let (dead, alive): (Vec<_>, Vec<_>) =
                std::mem::take(&mut st.obsolete).into_iter().partition(|f| Arc::strong_count(f) == 1);
            st.obsolete = alive;
            dead
        };
        for f in doomed {
            self.tables.evict(f.number);
            // Best effort: an undeleted orphan is removed at the next open.
            let _ = self.fs.remove(&table_path(&self.dir, f.number));
        }
    }

    /// Whether the database is closing.
    pub fn closing(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}
