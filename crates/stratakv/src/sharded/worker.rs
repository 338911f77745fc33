//! A shard's worker: the one thread that touches the shard's engine for
//! queued requests, folding what is already queued (p2KVS's opportunistic
//! batching): consecutive writes into one engine batch (one log append, one
//! msync when any of them asked for `sync`), consecutive gets into one
//! `multi_get`, at most `batch_cap` requests each. It never waits for more
//! requests to arrive, so batching adds no latency.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

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

struct Worker {
    db: Db,
    queue: Arc<Queue>,
    cap: usize,
    gsn_key: Vec<u8>,
    counters: Arc<WorkerCounters>,
}

/// Starts shard `idx`'s worker, pinned to core `core` if given.
pub(crate) fn spawn(
    idx: usize,
    db: Db,
    queue: Arc<Queue>,
    cap: usize,
    core: Option<usize>,
    counters: Arc<WorkerCounters>,
) -> Result<JoinHandle<()>> {
    let w = Worker { db, queue, cap: cap.max(1), gsn_key: gsn_key(), counters };
    std::thread::Builder::new()
        .name(format!("strata-shard-{idx}"))
        .spawn(move || {
            if let Some(c) = core {
                pin(c);
            }
            w.run();
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

impl Worker {
    fn run(self) {
        let mut items = VecDeque::new();
        while self.queue.drain(&mut items) {
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
                    Req::Snapshot { idx, done } => done.part_done(idx, self.db.snapshot()),
                    Req::Sync { done } => done.part_done(self.db.sync()),
                }
            }
        }
    }

    /// One engine batch for a run of writes, with the shard's meta key set
    /// to the run's largest GSN in the same batch (recovery compares it with
    /// the coordinator log's records).
    fn apply_writes(&self, run: Vec<Req>) {
        let mut sync = false;
        let mut gsn = 0;
        let mut dones = Vec::with_capacity(run.len());
        let mut batch: Option<WriteBatch> = None;
        for req in run {
            if let Req::Write { gsn: g, batch: b, sync: s, done } = req {
                sync |= s;
                gsn = gsn.max(g);
                dones.push(done);
                match &mut batch {
                    None => batch = Some(b),
                    Some(all) => all.append(&b),
                }
            }
        }
        let Some(mut batch) = batch else { return };
        batch.put_raw(&self.gsn_key, &gsn.to_be_bytes());
        self.counters.write_batches.fetch_add(1, Ordering::Relaxed);
        self.counters.writes.fetch_add(dones.len() as u64, Ordering::Relaxed);
        let r = self.db.write_opt(&batch, &WriteOptions { sync });
        for d in dones {
            d.part_done(r.as_ref().map(|_| ()).map_err(dup_error));
        }
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
