//! Each shard's request queue: a mutex-guarded deque and a condvar. Many
//! callers push; whoever holds the queue's `busy` claim applies what it
//! drained: the shard's worker, or a caller that found the shard idle
//! (combining). One claim at a time keeps the queue's order the order of
//! application.
//!
//! Pushing to several queues at once (a cross-shard batch, a snapshot's
//! marker, a multi-get) locks them in shard order and pushes to all before
//! unlocking any: every queue then has that request at the same point
//! relative to every other multi-queue push, which is what makes a
//! cross-shard batch and a snapshot's cut consistent. The GSN is taken
//! under the same locks, so each queue holds its writes in GSN order.

use std::collections::VecDeque;

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::db::Snapshot;

use super::oneshot::{Gather, GetJoin, WriteJoin};

/// Times an idle worker yields before it sleeps on the condvar.
const IDLE_YIELDS: usize = 16;

/// A request to a shard's worker.
pub(crate) enum Req {
    /// Apply `batch` (this shard's part of a write) with its GSN.
    /// `cross`: the batch spans shards (it has a coordinator record).
    Write { gsn: u64, batch: WriteBatch, sync: bool, cross: bool, done: Arc<WriteJoin> },
    /// Read `keys`; their values go to positions `at` of the caller's result.
    Get { keys: Vec<Vec<u8>>, at: Vec<usize>, done: Arc<GetJoin> },
    /// Take this shard's snapshot for a cross-shard cut (slot `idx`).
    Snapshot { idx: usize, done: Arc<Gather<Snapshot>> },
    /// Make everything applied so far durable (msync of the shard's log).
    Sync { done: Arc<WriteJoin> },
}

/// What a queue's lock guards.
pub(crate) struct QueueState {
    pub items: VecDeque<Req>,
    /// No more requests: the worker drains and exits.
    pub closed: bool,
    /// Someone (the worker or a caller) is applying a drained run; nobody
    /// else may drain until it releases.
    busy: bool,
    /// Writes pushed and not yet applied (queued or in the run being applied).
    unapplied: usize,
    /// Writes in the run being applied.
    taken: usize,
}

impl QueueState {
    /// Queues a write (counted until the run holding it is applied).
    pub(crate) fn push_write(&mut self, r: Req) {
        self.unapplied += 1;
        self.items.push_back(r);
    }

    /// Moves the queued requests into `into` as the next run.
    fn take_run(&mut self, into: &mut VecDeque<Req>) {
        self.taken = self.items.iter().filter(|r| matches!(r, Req::Write { .. })).count();
        std::mem::swap(&mut self.items, into);
    }

    /// The run being applied is done.
    fn run_done(&mut self) {
        self.unapplied = self.unapplied.saturating_sub(self.taken);
        self.taken = 0;
    }
}

/// One shard's queue.
pub(crate) struct Queue {
    state: Mutex<QueueState>,
    cv: Condvar,
}

impl Queue {
    pub(crate) fn new() -> Arc<Queue> {
        Arc::new(Queue {
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                closed: false,
                busy: false,
                unapplied: 0,
                taken: 0,
            }),
            cv: Condvar::new(),
        })
    }

    /// Locks the queue for pushing.
    pub(crate) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock()
    }

    /// Wakes the worker after a push (no system call when it is not asleep).
    pub(crate) fn notify(&self) {
        self.cv.notify_one();
    }

    /// Marks the queue closed and wakes the worker.
    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
        self.cv.notify_all();
    }

    /// The worker's side: waits for requests while the queue is unclaimed,
    /// claims it and moves every queued request into `into` (which must be
    /// empty). Never waits once something is queued: batching only folds
    /// what is already there. Returns false once the queue is closed and
    /// empty. The caller applies the run, then calls [`Queue::release`].
    pub(crate) fn drain(&self, into: &mut VecDeque<Req>) -> bool {
        let mut idle = 0;
        let mut s = self.state.lock();
        while s.items.is_empty() || s.busy {
            if s.closed && s.items.is_empty() && !s.busy {
                return false;
            }
            if idle < IDLE_YIELDS && !s.busy {
                // Yield before sleeping: a request usually comes soon, and
                // a sleeping worker costs each caller a wake-up call.
                idle += 1;
                drop(s);
                std::thread::yield_now();
                s = self.state.lock();
                continue;
            }
            self.cv.wait(&mut s);
        }
        s.busy = true;
        s.take_run(into);
        true
    }

    /// A caller's side: claims the queue if nobody holds it and it has
    /// requests, moving them into `into`. False when the worker or another
    /// caller is applying (that one, or the worker after it, will apply
    /// what is queued) or nothing is queued.
    pub(crate) fn try_claim(&self, into: &mut VecDeque<Req>) -> bool {
        let mut s = self.state.lock();
        if s.busy || s.items.is_empty() {
            return false;
        }
        s.busy = true;
        s.take_run(into);
        true
    }

    /// A caller's side, for a request it would otherwise push: claims the
    /// queue if it is open, unclaimed and empty, running `on_claim` under
    /// the lock (so what it takes, a GSN, is ordered with every push). The
    /// caller applies its request, then ends the claim with
    /// [`Queue::next_run`] or [`Queue::release`].
    pub(crate) fn claim_idle(&self, on_claim: impl FnOnce()) -> bool {
        let mut s = self.state.lock();
        if s.busy || s.closed || !s.items.is_empty() {
            return false;
        }
        s.busy = true;
        on_claim();
        true
    }

    /// Whether every write pushed so far is applied (reads may still be
    /// queued or running): a read of the shard's engine now sees them all,
    /// a caller's own unwaited async writes included.
    pub(crate) fn writes_applied(&self) -> bool {
        self.state.lock().unapplied == 0
    }

    /// For a holder done with its run: takes what was queued meanwhile as
    /// its next run (keeping the claim) and returns true, or, with nothing
    /// queued, ends the claim and returns false.
    pub(crate) fn next_run(&self, into: &mut VecDeque<Req>) -> bool {
        let mut s = self.state.lock();
        s.run_done();
        if s.items.is_empty() {
            s.busy = false;
            let closed = s.closed;
            drop(s);
            if closed {
                self.cv.notify_all();
            }
            return false;
        }
        s.take_run(into);
        true
    }

    /// Ends a claim; wakes the worker when requests came meanwhile (or the
    /// queue was closed), since their pushers may have counted on the holder.
    pub(crate) fn release(&self) {
        let wake = {
            let mut s = self.state.lock();
            s.run_done();
            s.busy = false;
            !s.items.is_empty() || s.closed
        };
        if wake {
            self.cv.notify_all();
        }
    }
}
