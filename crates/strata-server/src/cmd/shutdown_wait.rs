//! A shutdown asked for and its wait for lagging replicas (Redis 7's
//! `shutdown-timeout`): the state SHUTDOWN, INFO and the write path read,
//! and that `crate::shutdown::supervise` drives.

use std::time::Instant;

use parking_lot::Mutex;

use super::Shared;
use crate::store::ShutdownSave;

/// A shutdown asked for and, while it waits for replicas, its state.
#[derive(Default)]
pub struct ShutdownWait {
    state: Mutex<WaitState>,
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct WaitState {
    /// A shutdown asked for, not yet taken by [`supervise`]: save mode,
    /// and NOW (no wait).
    asked: Option<(ShutdownSave, bool)>,
    /// The end of the wait for replicas, while it runs.
    until: Option<Instant>,
    /// SHUTDOWN ABORT came during the wait.
    aborted: bool,
    /// SHUTDOWN NOW came during the wait.
    now: bool,
    /// Waits that ended without a stop (aborted); a client blocked in
    /// SHUTDOWN since an earlier count gets an error.
    aborts: u64,
}

impl ShutdownWait {
    /// Asks [`supervise`] to shut down, waiting for replicas unless `now`.
    pub fn ask(&self, save: ShutdownSave, now: bool) {
        let mut s = self.state.lock();
        if s.until.is_some() {
            s.now |= now;
        } else {
            s.asked = Some((save, now));
        }
        drop(s);
        self.wake.notify_one();
    }

    /// SHUTDOWN ABORT: ends a wait in progress without stopping; false if
    /// there is none.
    pub fn abort(&self) -> bool {
        let mut s = self.state.lock();
        if s.until.is_none() {
            return false;
        }
        s.aborted = true;
        true
    }

    /// Whether a shutdown waits for replicas now (writes are refused).
    pub fn waiting(&self) -> bool {
        self.state.lock().until.is_some()
    }

    /// Milliseconds left of the wait for replicas (INFO's
    /// `shutdown_in_milliseconds`), 0 when none runs.
    pub fn remaining_ms(&self) -> u64 {
        self.state.lock().until.map_or(0, |u| u.saturating_duration_since(Instant::now()).as_millis() as u64)
    }

    /// How many waits were aborted so far.
    pub fn aborts(&self) -> u64 {
        self.state.lock().aborts
    }

    /// Waits until a shutdown is asked for, and takes it: save mode, NOW.
    pub async fn asked(&self) -> (ShutdownSave, bool) {
        loop {
            if let Some(a) = self.state.lock().asked.take() {
                return a;
            }
            self.wake.notified().await;
        }
    }

    /// A wait for replicas begins; it ends at `until` at the latest.
    pub fn begin(&self, until: Instant) {
        self.state.lock().until = Some(until);
    }

    /// Where the wait stands (the caller looks at the replicas too).
    pub fn poll(&self) -> WaitPoll {
        let mut s = self.state.lock();
        if s.aborted {
            *s = WaitState { aborts: s.aborts + 1, ..WaitState::default() };
            return WaitPoll::Aborted;
        }
        if s.now || s.until.is_none_or(|u| Instant::now() >= u) {
            return WaitPoll::Over;
        }
        WaitPoll::Waiting
    }
}

/// What [`ShutdownWait::poll`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum WaitPoll {
    /// SHUTDOWN ABORT came: the wait is over and the server keeps running.
    Aborted,
    /// The timeout passed or SHUTDOWN NOW came: stop now.
    Over,
    /// Still waiting.
    Waiting,
}

/// Whether any replica attached to `shared` has not acknowledged `offset`.
pub fn replicas_lag(shared: &Shared, offset: u64) -> bool {
    shared.replication.replica_acks().iter().any(|(_, ack, _, _)| *ack < offset)
}
