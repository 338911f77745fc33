//! A shard's worker and its applier. The applier folds what is already
//! queued (p2KVS's opportunistic batching): consecutive writes into one engine batch (one log append, one
//! msync when any of them asked for `sync`), consecutive gets into one
//! `multi_get`, at most `batch_cap` requests each. It never waits for more
//! requests to arrive, so batching adds no latency. The worker thread
//! applies whatever it drains; a blocking caller that finds its shard idle
//! applies the queue itself with the same applier (see `queue.rs`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::batch::WriteBatch;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::options::WriteOptions;

use super::layout::gsn_key;
use super::oneshot::dup_error;
use super::queue::{Queue, Req};

/// One worker's counters.
#[derive(Default)]
pub(crate) struct WorkerCounters {
    pub write_batches: AtomicU64,
    pub writes: AtomicU64,
    pub multi_gets: AtomicU64,
    pub gets: AtomicU64,
}

/// A part of a cross-shard batch this shard failed to apply (a full PM
/// region or disk): its record is in the coordinator log and other shards
/// may have applied theirs, so it is owed, not dropped.
struct Owed {
    gsn: u64,
    batch: WriteBatch,
    sync: bool,
}

/// Applies runs of one shard's requests to its engine.
pub(crate) struct Applier {
    db: Db,
    cap: usize,
    gsn_key: Vec<u8>,
    counters: Arc<WorkerCounters>,
    /// Owed parts, in GSN order. Each is applied before anything queued
    /// after it: the shard's writes stay in queue (GSN) order, and its GSN
    /// key never passes a part it lacks (recovery would then skip that
    /// part's redo and leave the batch half applied).
    owed: Mutex<Vec<Owed>>,
}

impl Applier {
    /// The applier of `db`, folding at most `cap` requests per engine call.
    pub(crate) fn new(db: Db, cap: usize, counters: Arc<WorkerCounters>) -> Applier {
        Applier { db, cap: cap.max(1), gsn_key: gsn_key(), counters, owed: Mutex::new(Vec::new()) }
    }

    /// Whether a failed cross-shard part still waits to be applied.
    pub(crate) fn owes(&self) -> bool {
        !self.owed.lock().is_empty()
    }

    /// Applies the owed parts, oldest first, each with its GSN; the first
    /// error stops it (that part and the later ones stay owed).
    pub(crate) fn settle(&self) -> Result<()> {
        let mut owed = self.owed.lock();
        while let Some(o) = owed.first() {
            let mut b = o.batch.clone();
            b.put_raw(&self.gsn_key, &o.gsn.to_be_bytes());
            self.db.write_opt(&b, &WriteOptions { sync: o.sync })?;
            owed.remove(0);
        }
        Ok(())
    }
}

/// Starts shard `idx`'s worker, pinned to core `core` if given.
pub(crate) fn spawn(
    idx: usize,
    applier: Arc<Applier>,
    queue: Arc<Queue>,
    core: Option<usize>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("strata-shard-{idx}"))
        .spawn(move || {
            if let Some(c) = core {
                pin(c);
            }
            let mut items = VecDeque::new();
            while queue.drain(&mut items) {
                applier.apply(&mut items);
                queue.release();
            }
        })
        .map_err(|e| Error::io(std::path::Path::new("thread"), "spawn", e))
}

/// Pins the calling thread to `core` (best effort: a refusal, e.g. by a
/// container's CPU set, leaves it unpinned).
fn pin(core: usize) {
    #[cfg(target_os = "linux")]
    {
        let mut set = rustix::thread::CpuSet::new();
        set.set(core);
        let _ = rustix::thread::sched_setaffinity(None, &set);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = core;
}

impl Applier {
    /// Applies a drained run in queue order, leaving `items` empty.
    pub(crate) fn apply(&self, items: &mut VecDeque<Req>) {
        while let Some(req) = items.pop_front() {
            match req {
                Req::Write { .. } => {
                    let mut run = vec![req];
                    while run.len() < self.cap && matches!(items.front(), Some(Req::Write { .. })) {
                        run.extend(items.pop_front());
                    }
                    self.apply_writes(run);
                }
                Req::Get { .. } => {
                    let mut run = vec![req];
                    while run.len() < self.cap && matches!(items.front(), Some(Req::Get { .. })) {
                        run.extend(items.pop_front());
                    }
                    self.read(run);
                }
                // Everything queued before the marker is applied (the
                // loop is in queue order), nothing after it.
                // An owed part is older than the marker: applied first if
                // it can be (a snapshot is taken either way; while a part is
                // owed, reads see its batch in the other shards only).
                Req::Snapshot { idx, done } => {
                    let _ = self.settle();
                    done.part_done(idx, self.db.snapshot())
                }
                Req::Sync { done } => done.part_done(self.settle().and_then(|()| self.db.sync())),
            }
        }
    }

    /// One engine batch for a run of writes. When the run holds a part of a
    /// cross-shard batch, the shard's meta key is set to the run's largest
    /// GSN in the same engine batch (recovery compares it with the
    /// coordinator log's records). Runs of single-shard writes leave it: no
    /// record can name them, and an extra key per write would double the
    /// memtable work of a lone put.
    ///
    /// Owed parts go first; if they still fail, so does the run. A cross
    /// part that fails is owed (its caller gets the error, and the batch is
    /// completed later here, or by the redo at the next open).
    fn apply_writes(&self, run: Vec<Req>) {
        let mut sync = false;
        let mut cross = Vec::new();
        let mut gsn = 0;
        let mut dones = Vec::with_capacity(run.len());
        let mut batch: Option<WriteBatch> = None;
        for req in run {
            if let Req::Write { gsn: g, batch: b, sync: s, cross: c, done } = req {
                sync |= s;
                if c {
                    cross.push(Owed { gsn: g, batch: b.clone(), sync: s });
                }
                gsn = gsn.max(g);
                dones.push(done);
                match &mut batch {
                    None => batch = Some(b),
                    Some(all) => all.append(&b),
                }
            }
        }
        let Some(mut batch) = batch else { return };
        if !cross.is_empty() {
            batch.put_raw(&self.gsn_key, &gsn.to_be_bytes());
        }
        self.counters.write_batches.fetch_add(1, Ordering::Relaxed);
        self.counters.writes.fetch_add(dones.len() as u64, Ordering::Relaxed);
        let r = self.settle().and_then(|()| self.db.write_opt(&batch, &WriteOptions { sync }));
        if r.is_err() {
            self.owed.lock().extend(cross);
        }
        for d in dones {
            d.part_done(r.as_ref().map(|_| ()).map_err(dup_error));
        }
    }

    /// One single-shard write applied by a caller holding the queue's claim
    /// with nothing queued (see `Sharded::write_direct`): owed parts first,
    /// as for any run.
    pub(crate) fn apply_direct(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        self.counters.write_batches.fetch_add(1, Ordering::Relaxed);
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.settle()?;
        self.db.write_opt(batch, &WriteOptions { sync })
    }

    /// One `multi_get` for a run of reads.
    fn read(&self, run: Vec<Req>) {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut parts = Vec::with_capacity(run.len());
        for req in run {
            if let Req::Get { keys: k, at, done } = req {
                parts.push((k.len(), at, done));
                keys.extend(k);
            }
        }
        self.counters.multi_gets.fetch_add(1, Ordering::Relaxed);
        self.counters.gets.fetch_add(parts.len() as u64, Ordering::Relaxed);
        match self.db.multi_get(&keys) {
            Ok(vals) => {
                let mut vals = vals.into_iter();
                for (n, at, done) in parts {
                    done.part_done(&at, Ok(vals.by_ref().take(n).collect()));
                }
            }
            Err(e) => {
                for (_, at, done) in parts {
                    done.part_done(&at, Err(dup_error(&e)));
                }
            }
        }
    }
}
