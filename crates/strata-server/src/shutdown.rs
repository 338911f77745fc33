//! Graceful shutdown on SIGTERM, SIGINT or SHUTDOWN: first, as Redis 7
//! does, wait up to `shutdown-timeout` seconds for lagging replicas to
//! acknowledge the whole replication stream (writes are refused meanwhile,
//! `SHUTDOWN ABORT` cancels); then stop accepting, finish the requests in
//! flight and make everything durable (engine sync, log fsync, final
//! snapshot) before the process exits.
//!
//! The wait is what keeps a planned stop of a primary (a deploy, `systemctl
//! stop`) from losing the writes its replicas had not yet received: the
//! replica Sentinel promotes next has them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cmd::Shared;
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
}

/// Whether any attached replica has not acknowledged `offset`.
pub fn replicas_lag(shared: &Shared, offset: u64) -> bool {
    shared.replication.replica_acks().iter().any(|(_, ack, _, _)| *ack < offset)
}

/// Runs for the life of the server: waits for a signal or a SHUTDOWN,
/// then for lagging replicas (see the module), then asks the server to
/// stop.
pub async fn supervise(shared: Arc<Shared>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return;
    };
    loop {
        let (save, now) = tokio::select! {
            _ = term.recv() => (ShutdownSave::Default, false),
            _ = int.recv() => (ShutdownSave::Default, false),
            _ = shared.shutdown_wait.wake.notified() => match shared.shutdown_wait.state.lock().asked.take() {
                Some(a) => a,
                None => continue,
            },
        };
        if !now && !wait_for_replicas(&shared, &mut term, &mut int).await {
            continue;
        }
        shared.request_shutdown_saving(save);
        return;
    }
}

/// Waits up to `shutdown-timeout` for every replica to acknowledge the
/// stream as it is now; false if SHUTDOWN ABORT ended the wait.
async fn wait_for_replicas(
    shared: &Shared,
    term: &mut tokio::signal::unix::Signal,
    int: &mut tokio::signal::unix::Signal,
) -> bool {
    let timeout = shared.replication.settings.shutdown_timeout();
    let offset = shared.repl_stream.offset();
    if timeout.is_zero() || !replicas_lag(shared, offset) {
        return true;
    }
    eprintln!("strata-server: Waiting for replicas before shutting down.");
    shared.shutdown_wait.state.lock().until = Some(Instant::now() + timeout);
    shared.replication.request_acks();
    loop {
        tokio::select! {
            // A second signal stops the wait.
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
        let mut s = shared.shutdown_wait.state.lock();
        if s.aborted {
            *s = WaitState { aborts: s.aborts + 1, ..WaitState::default() };
            eprintln!("strata-server: Shutdown manually aborted.");
            return false;
        }
        if s.now || s.until.is_none_or(|u| Instant::now() >= u) || !replicas_lag(shared, offset) {
            break;
        }
    }
    let replicas = shared.replication.replica_acks();
    let mut lagging = 0;
    for (name, ack, lag, online) in &replicas {
        if *ack < offset {
            lagging += 1;
            let state = if *online { "online" } else { "sync" };
            eprintln!(
                "strata-server: Lagging replica {name} reported offset {} behind master, lag={lag}, state={state}.",
                offset - ack
            );
        }
    }
    eprintln!(
        "strata-server: {} of {} replicas are in sync when shutting down.",
        replicas.len() - lagging,
        replicas.len()
    );
    true
}
