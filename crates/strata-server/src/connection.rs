//! One client connection: read bytes, parse every complete request,
//! run the batch on the blocking pool (engine calls block), write the
//! replies in order. Malformed protocol closes only this connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::cmd::{execute, Session, Shared};
use crate::resp::{parse_request, Reply};

/// Most requests run in one blocking hop (longer pipelines are split).
const MAX_BATCH: usize = 1024;

/// Runs requests in order; returns the session and the encoded replies.
fn run_batch(shared: &Shared, mut sess: Session, reqs: Vec<Vec<Bytes>>) -> (Session, Vec<u8>) {
    let mut out = Vec::with_capacity(reqs.len() * 16);
    for args in reqs {
        if let Some(reply) = execute(shared, &mut sess, &args) {
            if sess.silent {
                break;
            }
            reply.encode(sess.proto, &mut out);
        }
        if sess.quit {
            break;
        }
    }
    (sess, out)
}

/// Serves `stream` until the client leaves, misbehaves, idles out, or
/// the server shuts down.
pub async fn serve(shared: Arc<Shared>, mut stream: TcpStream, addr: SocketAddr, mut shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let limits = shared.config.limits;
    let idle = shared.config.timeout;
    let mut buf = BytesMut::with_capacity(16 << 10);
    let mut sess = Some(Session::new(&shared, addr.to_string()));
    loop {
        let mut reqs = Vec::new();
        let mut protocol_error = None;
        while reqs.len() < MAX_BATCH {
            match parse_request(&mut buf, &limits) {
                Ok(Some(r)) => reqs.push(r),
                Ok(None) => break,
                Err(e) => {
                    protocol_error = Some(e);
                    break;
                }
            }
        }
        if !reqs.is_empty() {
            let Some(s) = sess.take() else { return };
            let sh = shared.clone();
            let Ok((s, out)) = tokio::task::spawn_blocking(move || run_batch(&sh, s, reqs)).await else { return };
            if !out.is_empty() && stream.write_all(&out).await.is_err() {
                return;
            }
            if s.quit {
                let _ = stream.flush().await;
                return;
            }
            sess = Some(s);
            if protocol_error.is_none() {
                continue;
            }
        }
        if let Some(e) = protocol_error {
            let mut out = Vec::new();
            Reply::err(format!("ERR {}", e.0)).encode(2, &mut out);
            let _ = stream.write_all(&out).await;
            return;
        }
        if buf.len() >= limits.max_query_buffer {
            let mut out = Vec::new();
            Reply::err("ERR client query buffer limit reached").encode(2, &mut out);
            let _ = stream.write_all(&out).await;
            return;
        }
        let want = buf.len().clamp(16 << 10, 8 << 20);
        if buf.capacity() - buf.len() < want / 2 {
            buf.reserve(want);
        }
        let read = stream.read_buf(&mut buf);
        let n = tokio::select! {
            biased;
            _ = shutdown.changed() => return,
            r = async {
                if idle > 0 {
                    tokio::time::timeout(Duration::from_secs(idle), read).await.unwrap_or(Ok(0))
                } else {
                    read.await
                }
            } => r,
        };
        match n {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
