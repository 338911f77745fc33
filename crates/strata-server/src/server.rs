//! The listener: accepts connections (on the tokio runtime) up to
//! `maxclients` and serves each on its own thread (see `connection`). On
//! shutdown it stops accepting, shuts every client socket down for reading
//! so that each thread finishes its current requests and exits, and waits
//! a bounded time for them.

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::cmd::Shared;
use crate::connection::serve;

/// Stack size of a connection thread.
const CONNECTION_STACK: usize = 512 << 10;

/// Open client sockets, to shut them down at shutdown.
type Registry = Arc<Mutex<HashMap<u64, TcpStream>>>;

/// Ends a connection's bookkeeping when its thread ends.
struct ClientGuard {
    shared: Arc<Shared>,
    registry: Registry,
    id: u64,
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
        self.shared.stats.connected_clients.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts and serves connections until shutdown is requested.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    let mut stop = shared.shutdown.subscribe();
    let registry: Registry = Arc::new(Mutex::new(HashMap::new()));
    let mut next_id = 0u64;
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
        next_id += 1;
        let id = next_id;
        if let Ok(clone) = std_stream.try_clone() {
            registry.lock().insert(id, clone);
        }
        shared.stats.connected_clients.fetch_add(1, Ordering::AcqRel);
        let guard = ClientGuard { shared: shared.clone(), registry: registry.clone(), id };
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
    for s in registry.lock().values() {
        let _ = s.shutdown(Shutdown::Read);
    }
    // Each thread finishes the requests it has, then exits.
    let deadline = Instant::now() + Duration::from_secs(10);
    while shared.stats.connected_clients.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
