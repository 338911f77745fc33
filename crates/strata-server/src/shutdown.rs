//! Graceful shutdown on SIGTERM or SIGINT: stop accepting, finish the
//! requests in flight, then make everything durable (engine sync, log
//! fsync, final snapshot) before the process exits.

use std::sync::Arc;

use crate::cmd::Shared;

/// Waits for SIGTERM or SIGINT and asks the server to stop.
pub async fn on_signals(shared: Arc<Shared>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    shared.request_shutdown();
}
