//! The listener: accepts connections up to `maxclients`, serves each on
//! its own task, and on shutdown stops accepting and waits (a bounded
//! time) for connections to finish their current requests.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::cmd::Shared;
use crate::connection::serve;

/// Decrements the connected-clients count when a connection ends.
struct ClientGuard(Arc<Shared>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.stats.connected_clients.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts and serves connections until shutdown is requested.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    let mut stop = shared.shutdown.subscribe();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.changed() => break,
            r = listener.accept() => r,
        };
        // Reap finished connection tasks so the set stays small.
        while tasks.try_join_next().is_some() {}
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
            tasks.spawn(async move {
                let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                let _ = stream.shutdown().await;
            });
            continue;
        }
        shared.stats.connected_clients.fetch_add(1, Ordering::AcqRel);
        let guard = ClientGuard(shared.clone());
        let rx = shared.shutdown.subscribe();
        let sh = shared.clone();
        tasks.spawn(async move {
            let _guard = guard;
            serve(sh, stream, addr, rx).await;
        });
    }
    drop(listener);
    // Connections see the shutdown too; give in-flight requests time to finish.
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
}
