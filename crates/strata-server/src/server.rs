//! The listener: accepts connections (on the tokio runtime) up to
//! `maxclients` and serves each on its own thread (see `connection`). On
//! shutdown it stops accepting and waits (a bounded time) until no
//! connection is executing requests; connections that have read requests
//! answer them, new requests are refused by closing.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::cmd::Shared;
use crate::connection::serve;

/// Stack size of a connection thread.
const CONNECTION_STACK: usize = 512 << 10;

/// Ends a connection's bookkeeping when its thread ends.
struct ClientGuard(Arc<Shared>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.stats.connected_clients.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts and serves connections until shutdown is requested.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    let mut stop = shared.shutdown.subscribe();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.changed() => break,
            r = listener.accept() => r,
        };
        let (mut stream, addr) = match accepted {
            Ok(x) => x,
            Err(_) => {
                // Out of file descriptors or similar: back off briefly.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        shared.stats.total_connections.fetch_add(1, Ordering::Relaxed);
        if shared.stats.connected_clients.load(Ordering::Acquire) >= shared.config.maxclients {
            shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                let _ = stream.shutdown().await;
            });
            continue;
        }
        let Ok(std_stream) = stream.into_std() else { continue };
        if std_stream.set_nonblocking(false).is_err() {
            continue;
        }
        shared.stats.connected_clients.fetch_add(1, Ordering::AcqRel);
        let guard = ClientGuard(shared.clone());
        let sh = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("strata-client".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                let _guard = guard;
                serve(sh, std_stream, addr.to_string());
            });
        // If no thread can be made, the guard inside the closure was dropped
        // with it: the connection is closed and accounted for.
        drop(spawned);
    }
    drop(listener);
    // Requests being executed finish and are answered; no new ones start.
    let deadline = Instant::now() + Duration::from_secs(30);
    while shared.busy.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
