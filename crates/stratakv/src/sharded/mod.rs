//! The sharded front end (p2KVS): N independent [`Db`] instances in
//! subdirectories of one directory, keys hash-partitioned over them, one
//! worker thread per instance fed by a queue, opportunistic batching, and
//! global sequence numbers that keep a cross-shard batch atomic and give
//! consistent snapshots.
//!
//! | file | what |
//! | --- | --- |
//! | `mod.rs` | [`Sharded`]: the API, and handing requests to the queues |
//! | `open.rs` | opening: shard count, shards, coordinator redo, workers |
//! | `layout.rs` | the directory layout, the key hash, the reserved meta key |
//! | `queue.rs`, `worker.rs` | the per-shard queues and the workers that fold them |
//! | `combine.rs` | blocking callers applying an idle queue, and direct reads |
//! | `coord.rs` | the coordinator log of cross-shard batches |
//! | `oneshot.rs` | completions: blocking wait or future |
//! | `iter.rs` | consistent snapshots and the merged iterator |
//!
//! **PM regions.** Each shard has its own PM region (its own file, in its
//! own directory or under `pm_dir/shard-XXX`), sized `pm_size / N`. Shards
//! then share nothing: no allocator, log tail or recovery is contended or
//! coupled between them, which is the point of sharding, and each shard is
//! an ordinary database that every tool can open. A share of one region
//! would need a partitioned allocator and a joint recovery for no gain on a
//! file-backed region (the page cache is shared anyway).
//!
//! **Atomicity.** See `coord.rs`: a redo record per cross-shard batch in a
//! small coordinator log, written before any shard gets a part, and each
//! shard's applied GSN stored in the same engine batch as its data.

mod combine;
mod coord;
mod iter;
mod layout;
mod oneshot;
mod open;
mod queue;
mod trim;
mod worker;

pub use coord::COORD_FILE;
pub use iter::{ShardedIter, ShardedSnapshot};
pub use layout::{recorded_shards, META_PREFIX, SHARDS_FILE};
pub use oneshot::Completion;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;
use strata_pmem::SimPm;

use crate::batch::WriteBatch;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::key::KeyRange;
use crate::options::Options;
use crate::stats::Stats;

use combine::Touched;
use coord::CoordLog;
use iter::check_key;
use layout::{is_meta, shard_of};
use oneshot::{Gather, GetJoin, WriteJoin};
use queue::{Queue, Req};
use worker::{Applier, WorkerCounters};

/// How to open a sharded database.
#[derive(Clone, Debug)]
pub struct ShardedOptions {
    /// Number of shards, fixed at creation. Default: 2.
    pub shards: usize,
    /// Options of every shard; the PM, memtable and block-cache budgets are
    /// split evenly between the shards.
    pub db: Options,
    /// Most requests a worker folds into one engine batch or one
    /// `multi_get`. Default: 32 (p2KVS).
    pub batch_cap: usize,
    /// Pin each worker to a core of its own when there are more cores than
    /// shards (core 0 stays free for callers). Default: true.
    pub pin_workers: bool,
    /// Once the coordinator log holds this many bytes, its records are
    /// dropped as soon as every shard has made their parts durable, with no
    /// writer waiting for it (see DURABILITY.md). Default: 16 MiB.
    pub coord_log_limit: u64,
    /// A blocking caller (the sync API) whose shard's queue is idle applies
    /// the queue itself, with the same folding as the worker, instead of
    /// handing its request over: no thread switch and no wake-up per
    /// request, and callers that arrive meanwhile are folded into its run
    /// (combining). The worker still serves the async API and whatever is
    /// queued while a caller applies. Default: true.
    pub callers_apply: bool,
    /// Simulated PM devices, one per shard in shard order, used instead of
    /// region files (crash tests); empty (the default) for region files.
    /// `db.pm_sim` must then be `None` (it may serve a single shard).
    pub pm_sims: Vec<Arc<SimPm>>,
}

impl Default for ShardedOptions {
    fn default() -> Self {
        ShardedOptions {
            shards: 2,
            db: Options::default(),
            batch_cap: 32,
            pin_workers: true,
            coord_log_limit: 16 << 20,
            callers_apply: true,
            pm_sims: Vec::new(),
        }
    }
}

impl ShardedOptions {
    /// `shards` shards with the given per-shard options and the defaults.
    pub fn new(shards: usize, db: Options) -> ShardedOptions {
        ShardedOptions { shards, db, ..ShardedOptions::default() }
    }
}

/// Counters of a sharded database: each shard's own, and the workers'.
#[derive(Clone, Debug, Default)]
pub struct ShardedStats {
    /// Each shard's engine statistics.
    pub shards: Vec<Stats>,
    /// Engine batches the workers wrote.
    pub write_batches: u64,
    /// Write requests they held (per shard part); over `write_batches`, the folding factor.
    pub writes: u64,
    /// `multi_get` calls the workers made.
    pub multi_gets: u64,
    /// Read requests those served.
    pub gets: u64,
    /// Batches that spanned shards (coordinator records written).
    pub cross_batches: u64,
    /// Shard parts the last open redid from the coordinator log.
    pub redone_parts: u64,
    /// The last GSN handed out.
    pub gsn: u64,
    /// Whether the workers are pinned to cores.
    pub pinned: bool,
    /// Whether the front end refuses writes because the coordinator log
    /// failed (reopen). Each shard's own state is in `shards`.
    pub poisoned: bool,
}

/// A sharded database. Share it between threads with `Arc`; it is closed
/// when dropped (or by [`Sharded::close`]).
pub struct Sharded {
    dir: PathBuf,
    dbs: Vec<Db>,
    queues: Vec<Arc<Queue>>,
    /// Each shard's applier, shared by its worker and combining callers.
    appliers: Vec<Arc<Applier>>,
    callers_apply: bool,
    workers: Mutex<Vec<JoinHandle<()>>>,
    counters: Vec<Arc<WorkerCounters>>,
    /// The last GSN handed out; taken under the queue locks it is pushed with.
    gsn: AtomicU64,
    coord: Mutex<CoordLog>,
    /// The trim under way (see `trim.rs`): the log's length when it began,
    /// and its sync markers' completion. Used with `coord` locked.
    trim: Mutex<Option<(u64, Completion<()>)>>,
    /// A sync or cut-back of the coordinator log failed: its durable
    /// contents are unknown, so the front end refuses writes until reopened.
    poisoned: AtomicBool,
    coord_limit: u64,
    cross_batches: AtomicU64,
    redone: u64,
    pinned: bool,
}

impl std::fmt::Debug for Sharded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharded").field("dir", &self.dir).field("shards", &self.dbs.len()).finish()
    }
}

impl Sharded {
    /// Opens (creating if allowed) the sharded database in `dir`, redoing
    /// any cross-shard batch a crash left partly applied.
    pub fn open(dir: impl AsRef<Path>, opts: ShardedOptions) -> Result<Sharded> {
        open::open(dir.as_ref(), opts)
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.dbs.len()
    }

    /// Shard `i`'s database (for tools: checks, statistics). Writing to it
    /// directly bypasses the GSNs and the hash: don't.
    pub fn shard(&self, i: usize) -> Option<&Db> {
        self.dbs.get(i)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, false)
    }

    /// Sets `key` to `value`; with `sync`, durable against power loss on return.
    pub fn put_opt(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, sync: bool) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write_opt(b, sync)
    }

    /// Sets `key` to `value`; with `sync`, durable against power loss on return.
    pub fn put_async(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, sync: bool) -> Completion<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write_async(b, sync)
    }

    /// Removes `key`.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write_opt(b, false)
    }

    /// Applies a batch atomically, also across shards and across a crash.
    ///
    /// A batch over several shards that fails in one of them (a full PM
    /// region or disk) after its record reached the coordinator log is
    /// still completed, whole: that shard applies its part before any later
    /// write of its own, and a reopen redoes it. Until then, reads may see
    /// the batch in the other shards only.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, false)
    }

    /// Applies a batch atomically; with `sync`, durable on return.
    pub fn write_opt(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        let batch = match self.write_direct(batch, sync) {
            Ok(r) => return r,
            Err(batch) => batch,
        };
        let (c, t) = self.submit(batch, sync);
        self.kick(&t, true);
        if sync {
            c.parking().wait()
        } else {
            c.wait()
        }
    }

    /// Queues a batch and returns its completion (wait for it, or await it).
    pub fn write_async(&self, batch: WriteBatch, sync: bool) -> Completion<()> {
        let (c, t) = self.submit(batch, sync);
        self.kick(&t, false);
        if sync {
            c.parking()
        } else {
            c
        }
    }

    /// Pushes a batch (no worker woken yet: see [`Sharded::kick`]).
    fn submit(&self, batch: WriteBatch, sync: bool) -> (Completion<()>, Touched) {
        if let Err(e) = self.check_write(&batch) {
            return (Completion::ready(Err(e)), Touched::None);
        }
        let n = self.dbs.len();
        let (first, single) = {
            let mut shards = batch.iter().map(|(_, k, _)| shard_of(k, n));
            let Some(first) = shards.next() else { return (Completion::ready(Ok(())), Touched::None) };
            (first, shards.all(|s| s == first))
        };
        if single {
            return (self.push_write(first, batch, sync), Touched::One(first));
        }
        let mut parts: Vec<Option<WriteBatch>> = (0..n).map(|_| None).collect();
        for (kind, k, v) in batch.iter() {
            if let Some(p) = parts.get_mut(shard_of(k, n)) {
                let p = p.get_or_insert_with(WriteBatch::new);
                match kind {
                    crate::key::Kind::Put => p.put(k, v),
                    crate::key::Kind::Delete => p.delete(k),
                };
            }
        }
        let parts: Vec<(usize, WriteBatch)> =
            parts.into_iter().enumerate().filter_map(|(i, p)| Some((i, p?))).collect();
        let touched = Touched::Many(parts.iter().map(|(s, _)| *s).collect());
        (self.push_cross(parts, sync), touched)
    }

    fn check_write(&self, batch: &WriteBatch) -> Result<()> {
        if let Some(why) = batch.invalid() {
            return Err(Error::InvalidArgument(why.to_string()));
        }
        if let Some((_, k, _)) = batch.iter().find(|(_, k, _)| is_meta(k)) {
            check_key(k)?;
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned("the coordinator log failed; reopen".into()));
        }
        Ok(())
    }

    /// One shard's write: GSN and push under the queue's lock, so the queue
    /// holds its writes in GSN order.
    fn push_write(&self, s: usize, batch: WriteBatch, sync: bool) -> Completion<()> {
        let Some(q) = self.queues.get(s) else { return Completion::ready(Err(Error::Closed)) };
        let (join, c) = WriteJoin::new(1);
        {
            let mut g = q.lock();
            if g.closed {
                return Completion::ready(Err(Error::Closed));
            }
            let gsn = self.gsn.fetch_add(1, Ordering::Relaxed) + 1;
            g.push_write(Req::Write { gsn, batch, sync, cross: false, done: join });
        }
        c
    }

    /// A batch over several shards (`parts` in shard order): its record is
    /// in the coordinator log before any shard's queue has a part, and the
    /// parts are pushed under every involved queue's lock at once (see
    /// `queue.rs`), with the coordinator's lock held so records are in GSN order.
    fn push_cross(&self, parts: Vec<(usize, WriteBatch)>, sync: bool) -> Completion<()> {
        let mut coord = self.coord.lock();
        let (join, c) = WriteJoin::new(parts.len());
        {
            let mut guards = Vec::with_capacity(parts.len());
            for (s, _) in &parts {
                match self.queues.get(*s) {
                    Some(q) => guards.push(q.lock()),
                    None => return Completion::ready(Err(Error::Closed)),
                }
            }
            if guards.iter().any(|g| g.closed) {
                return Completion::ready(Err(Error::Closed));
            }
            let gsn = self.gsn.fetch_add(1, Ordering::Relaxed) + 1;
            let refs: Vec<(usize, &WriteBatch)> = parts.iter().map(|(s, b)| (*s, b)).collect();
            if let Err(e) = coord.append(gsn, &refs, sync) {
                // Nothing was queued: the batch is applied nowhere. A log
                // whose durable state is unknown takes no more records.
                if coord.failed() {
                    self.poisoned.store(true, Ordering::Release);
                }
                return Completion::ready(Err(e));
            }
            for ((_, batch), g) in parts.iter().zip(guards.iter_mut()) {
                g.push_write(Req::Write { gsn, batch: batch.clone(), sync, cross: true, done: join.clone() });
            }
        }
        self.cross_batches.fetch_add(1, Ordering::Relaxed);
        self.trim_coord(&mut coord);
        c
    }

    /// Pushes a sync marker into every queue; done once each shard has
    /// applied what was queued before it and made it durable.
    fn sync_all(&self) -> Completion<()> {
        let (join, c) = WriteJoin::new(self.queues.len());
        for q in &self.queues {
            let mut g = q.lock();
            if g.closed {
                join.part_done(Err(Error::Closed));
                continue;
            }
            g.items.push_back(Req::Sync { done: join.clone() });
        }
        c
    }

    /// Makes every write queued so far durable against power loss.
    pub fn sync(&self) -> Result<()> {
        let c = self.sync_all();
        self.kick(&Touched::All, true);
        c.parking().wait()
    }

    /// The current value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        Ok(self.multi_get(&[key])?.pop().flatten())
    }

    /// The value of `key` (a one-element vector), as a completion.
    pub fn get_async(&self, key: impl AsRef<[u8]>) -> Completion<Vec<Option<Vec<u8>>>> {
        self.multi_get_async(&[key])
    }

    /// Values of several keys, read at one consistent cut of the shards.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        if let Some(db) = self.direct_reader(keys) {
            return db.multi_get(keys);
        }
        let (c, t) = self.push_gets(keys);
        self.kick(&t, true);
        c.wait()
    }

    /// Values of several keys, as a completion. The per-shard parts are
    /// pushed under all their queues' locks at once, so the read is one cut.
    pub fn multi_get_async<K: AsRef<[u8]>>(&self, keys: &[K]) -> Completion<Vec<Option<Vec<u8>>>> {
        let (c, t) = self.push_gets(keys);
        self.kick(&t, false);
        c
    }

    /// Pushes a multi-get's per-shard parts (no worker woken yet).
    fn push_gets<K: AsRef<[u8]>>(&self, keys: &[K]) -> (Completion<Vec<Option<Vec<u8>>>>, Touched) {
        let n = self.dbs.len();
        let mut parts: Vec<(Vec<Vec<u8>>, Vec<usize>)> = (0..n).map(|_| (Vec::new(), Vec::new())).collect();
        for (i, k) in keys.iter().enumerate() {
            let k = k.as_ref();
            if let Err(e) = check_key(k) {
                return (Completion::ready(Err(e)), Touched::None);
            }
            if let Some(p) = parts.get_mut(shard_of(k, n)) {
                p.0.push(k.to_vec());
                p.1.push(i);
            }
        }
        let mask: Vec<bool> = parts.iter().map(|p| !p.0.is_empty()).collect();
        let used = mask.iter().filter(|&&u| u).count();
        if used == 0 {
            return (Completion::ready(Ok(Vec::new())), Touched::None);
        }
        let (join, c) = GetJoin::new(used, keys.len());
        {
            let mut guards = Vec::with_capacity(used);
            for (q, _) in self.queues.iter().zip(&mask).filter(|(_, &u)| u) {
                guards.push(q.lock());
            }
            if guards.iter().any(|g| g.closed) {
                return (Completion::ready(Err(Error::Closed)), Touched::None);
            }
            for ((keys, at), g) in parts.iter_mut().filter(|p| !p.0.is_empty()).zip(guards.iter_mut()) {
                g.items.push_back(Req::Get { keys: std::mem::take(keys), at: std::mem::take(at), done: join.clone() });
            }
        }
        let touched = Touched::Many(mask.iter().enumerate().filter(|(_, &u)| u).map(|(i, _)| i).collect());
        (c, touched)
    }

    /// A consistent view of every shard: a marker is pushed into every queue
    /// at once, and each worker takes its shard's snapshot when it reaches
    /// the marker, after everything queued before it and before anything
    /// queued after. A cross-shard batch is before the marker in all its
    /// queues or after it in all, and a write that completed before the call
    /// is before it; so the cut holds whole batches and every completed write.
    pub fn snapshot(&self) -> Result<ShardedSnapshot> {
        let (g, c) = Gather::new(self.queues.len());
        {
            let mut guards: Vec<_> = self.queues.iter().map(|q| q.lock()).collect();
            if guards.iter().any(|g| g.closed) {
                return Err(Error::Closed);
            }
            for (idx, q) in guards.iter_mut().enumerate() {
                q.items.push_back(Req::Snapshot { idx, done: g.clone() });
            }
        }
        self.kick(&Touched::All, true);
        c.wait().map(ShardedSnapshot::new)
    }

    /// Iterates the keys in `range` at a consistent cut, merging the shards.
    pub fn iter(&self, range: impl Into<KeyRange>) -> Result<ShardedIter> {
        self.snapshot()?.iter(range)
    }

    /// Seals every shard's memtable and waits until every write completed
    /// before the call is in tables.
    pub fn flush(&self) -> Result<()> {
        self.dbs.iter().try_for_each(Db::flush)
    }

    /// Compacts every shard's levels overlapping `range` down to the bottom.
    pub fn compact_range(&self, range: impl Into<KeyRange>) -> Result<()> {
        let range = range.into();
        self.dbs.iter().try_for_each(|d| d.compact_range(range.clone()))
    }

    /// Blocks until no shard has a flush or compaction running or due.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.dbs.iter().try_for_each(Db::wait_for_compactions)
    }

    /// Checks every table checksum of every shard; the entries verified.
    pub fn verify_checksums(&self) -> Result<u64> {
        self.dbs.iter().map(Db::verify_checksums).sum()
    }

    /// The shards' statistics and the workers' counters.
    pub fn stats(&self) -> ShardedStats {
        let mut s = ShardedStats {
            shards: self.dbs.iter().map(Db::stats).collect(),
            cross_batches: self.cross_batches.load(Ordering::Relaxed),
            redone_parts: self.redone,
            gsn: self.gsn.load(Ordering::Relaxed),
            pinned: self.pinned,
            poisoned: self.poisoned.load(Ordering::Acquire),
            ..ShardedStats::default()
        };
        for c in &self.counters {
            s.write_batches += c.write_batches.load(Ordering::Relaxed);
            s.writes += c.writes.load(Ordering::Relaxed);
            s.multi_gets += c.multi_gets.load(Ordering::Relaxed);
            s.gets += c.gets.load(Ordering::Relaxed);
        }
        s
    }

    /// Stops the workers once their queues are empty, makes every shard
    /// durable, empties the coordinator log and closes the shards.
    pub fn close(self) -> Result<()> {
        self.stop_workers();
        for a in &self.appliers {
            // Left owed, a part is redone from its record at the next open.
            let _ = a.settle();
        }
        let mut first = self.persist_gsn();
        for db in &self.dbs {
            if let Err(e) = db.sync() {
                first = first.and(Err(e));
            }
        }
        if first.is_ok() && !self.owes() && !self.poisoned.load(Ordering::Acquire) {
            first = self.coord.lock().truncate();
        }
        first
    }

    /// Records the GSN counter in every shard, so the next open resumes
    /// above every GSN handed out (runs of single-shard writes do not record
    /// theirs). Only with every queue applied and no part owed: a shard's
    /// GSN key must never claim a cross-shard part it lacks.
    fn persist_gsn(&self) -> Result<()> {
        if self.owes() || self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        let gsn = self.gsn.load(Ordering::Acquire);
        for db in &self.dbs {
            let mut b = WriteBatch::new();
            b.put_raw(&layout::gsn_key(), &gsn.to_be_bytes());
            db.write(b)?;
        }
        Ok(())
    }

    /// Whether a shard still owes a part of a cross-shard batch.
    fn owes(&self) -> bool {
        self.appliers.iter().any(|a| a.owes())
    }

    fn stop_workers(&self) {
        for q in &self.queues {
            q.close();
        }
        for h in self.workers.lock().drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Sharded {
    fn drop(&mut self) {
        // Queued requests are applied before the workers exit; the shards
        // close when their last handle (here) goes.
        self.stop_workers();
        let _ = self.persist_gsn();
    }
}
