//! The acceptor: accepts connections (on a small tokio runtime that also
//! handles signals) up to `maxclients` and hands each to an event loop
//! (see `net`). On shutdown it stops accepting; the loops answer what
//! they have read and exit.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::cmd::Shared;
use crate::net::{ClientGuard, Incoming, Loops};

/// The reply to a client refused by protected mode (Redis's, where
/// `strata-server` names the server and the flag).
const PROTECTED_MODE_DENIED: &str = "-DENIED strata-server is running in protected mode because protected mode is \
    enabled and no password is set for the default user. In this mode connections are only accepted from the \
    loopback interface. If you want to connect from external computers, either restart the server with \
    '--protected-mode no' (or 'protected-mode no' in its config file), making sure it is not publicly accessible \
    from the internet, or set a password for the default user ('--requirepass', or 'CONFIG SET requirepass' from \
    the loopback interface).\r\n";

/// How long an accept at `maxclients` waits for closed connections to be
/// uncounted before it refuses.
const CLOSE_GRACE: Duration = Duration::from_millis(200);

/// The TLS port: its listener and rustls settings.
pub type TlsListener = (TcpListener, Arc<rustls::ServerConfig>);

/// Accepts a connection on `l`, or waits forever without a listener.
async fn accept(l: Option<&TcpListener>) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
    match l {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// Accepts connections on the plain port and the TLS port (either may be
/// absent) until shutdown is requested.
pub async fn run(shared: Arc<Shared>, plain: Option<TcpListener>, tls: Option<TlsListener>, loops: &mut Loops) {
    let mut stop = shared.shutdown.subscribe();
    let (tls_listener, tls_config) = match tls {
        Some((l, c)) => (Some(l), Some(c)),
        None => (None, None),
    };
    loop {
        let (accepted, secure) = tokio::select! {
            biased;
            _ = stop.changed() => break,
            r = accept(plain.as_ref()) => (r, None),
            r = accept(tls_listener.as_ref()) => (r, tls_config.clone()),
        };
        let (mut stream, addr) = match accepted {
            Ok(x) => x,
            Err(_) => {
                // Out of file descriptors or similar: back off briefly.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shared.protected_mode.load(Ordering::Relaxed) && !addr.ip().is_loopback() && !shared.has_password() {
            // Redis's protected mode: without a password, only loopback.
            shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = stream.write_all(PROTECTED_MODE_DENIED.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
            continue;
        }
        shared.stats.total_connections.fetch_add(1, Ordering::Relaxed);
        let full = || shared.stats.connected_clients.load(Ordering::Acquire) >= shared.config.maxclients;
        if full() {
            // Only open connections count. One a client has just closed is
            // uncounted when its event loop reads the end of the stream,
            // which may come a moment after this accept (a client that
            // reconnects at once): give the loops that moment.
            let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
            while full() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        if full() {
            shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                let _ = stream.shutdown().await;
            });
            continue;
        }
        // tokio leaves the std stream non-blocking, as the loops need it.
        let Ok(std_stream) = stream.into_std() else { continue };
        shared.stats.connected_clients.fetch_add(1, Ordering::AcqRel);
        let guard = ClientGuard(shared.clone());
        loops.assign(Incoming { stream: std_stream, addr: addr.to_string(), guard, tls: secure });
    }
    drop(plain);
    drop(tls_listener);
}
