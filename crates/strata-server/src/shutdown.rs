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

use crate::cmd::shutdown_wait::{replicas_lag, WaitPoll};
use crate::cmd::Shared;
use crate::store::ShutdownSave;

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
            a = shared.shutdown_wait.asked() => a,
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
    shared.shutdown_wait.begin(Instant::now() + timeout);
    shared.replication.request_acks();
    loop {
        tokio::select! {
            // A second signal stops the wait.
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
        match shared.shutdown_wait.poll() {
            WaitPoll::Aborted => {
                eprintln!("strata-server: Shutdown manually aborted.");
                return false;
            }
            WaitPoll::Over => break,
            WaitPoll::Waiting if !replicas_lag(shared, offset) => break,
            WaitPoll::Waiting => {}
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
