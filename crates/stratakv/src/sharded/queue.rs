//! Each shard's request queue: a mutex-guarded deque and a condvar. Many
//! callers push, one worker drains.
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
    Write { gsn: u64, batch: WriteBatch, sync: bool, done: Arc<WriteJoin> },
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
}

/// One shard's queue.
pub(crate) struct Queue {
    state: Mutex<QueueState>,
    cv: Condvar,
}

impl Queue {
    pub(crate) fn new() -> Arc<Queue> {
        Arc::new(Queue { state: Mutex::new(QueueState { items: VecDeque::new(), closed: false }), cv: Condvar::new() })
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

    /// Waits for requests and moves every queued one into `into` (which must
    /// be empty). Never waits once something is queued: batching only folds
    /// what is already there. Returns false once the queue is closed and empty.
    pub(crate) fn drain(&self, into: &mut VecDeque<Req>) -> bool {
        let mut idle = 0;
        let mut s = self.state.lock();
        while s.items.is_empty() {
            if s.closed {
                return false;
            }
            if idle < IDLE_YIELDS {
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
        std::mem::swap(&mut s.items, into);
        true
    }
}
