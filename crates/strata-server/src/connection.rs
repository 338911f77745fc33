//! One client connection, served on its own OS thread: read bytes, parse
//! every complete request, run them in order, write the replies.
//! Malformed protocol closes only this connection.
//!
//! Why a thread per connection and not a task on the async runtime: every
//! command calls the engine, and engine calls block (PM back-pressure, the
//! msync of a durable write, SSD reads). They must not run on the runtime's
//! reactor threads, and handing each request to a blocking pool and back
//! costs two cross-thread wake-ups per request. A connection thread calls
//! the engine directly, and with `--durability sync` every waiting client
//! thread joins the same group commit. The runtime (tokio) accepts
//! connections, handles signals and shutdown.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;

use crate::cmd::{execute_batch, Session, Shared};
use crate::resp::{parse_request, Reply};

/// Most requests run before their replies are written (longer pipelines
/// are answered in parts).
const MAX_BATCH: usize = 1024;

/// Read sizes: idle connections hold little memory; bulk uploads read big.
const MIN_READ: usize = 16 << 10;
const MAX_READ: usize = 1 << 20;

fn write_error(stream: &mut TcpStream, text: &str) {
    let mut out = Vec::new();
    Reply::err(text).encode(2, &mut out);
    let _ = stream.write_all(&out);
}

/// Serves `stream` until the client leaves, misbehaves or idles out. At
/// shutdown, requests already read are answered; a thread idle in `read`
/// simply ends with the process.
pub fn serve(shared: Arc<Shared>, mut stream: TcpStream, addr: String) {
    let _ = stream.set_nodelay(true);
    if shared.config.timeout > 0 {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(shared.config.timeout)));
    }
    let limits = shared.config.limits;
    let mut buf = BytesMut::with_capacity(4 << 10);
    let mut out = Vec::new();
    // Read buffer: small for idle clients, doubled while reads fill it.
    let mut chunk = vec![0u8; MIN_READ];
    let mut sess = Session::new(&shared, addr);
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
            // Shutdown waits for this guard: requests read are answered.
            let Some(_busy) = shared.enter_busy() else { return };
            out.clear();
            let keep = execute_batch(&shared, &mut sess, reqs, &mut out);
            if !out.is_empty() && stream.write_all(&out).is_err() {
                return;
            }
            if !keep {
                let _ = stream.shutdown(Shutdown::Write);
                return;
            }
            if out.capacity() > (1 << 20) {
                out = Vec::new();
            }
            if protocol_error.is_none() {
                continue;
            }
        }
        if let Some(e) = protocol_error {
            write_error(&mut stream, &format!("ERR {}", e.0));
            return;
        }
        if buf.len() >= limits.max_query_buffer {
            write_error(&mut stream, "ERR client query buffer limit reached");
            return;
        }
        // The buffer grows with what has arrived, never by a declared length.
        let got = loop {
            match stream.read(&mut chunk) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match got {
            Ok(n) if n > 0 => {
                buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
                if n == chunk.len() && chunk.len() < MAX_READ {
                    chunk.resize(chunk.len() * 2, 0);
                } else if n < MIN_READ && chunk.len() > MIN_READ {
                    chunk = vec![0u8; MIN_READ];
                }
            }
            // EOF, error, or idle timeout (WouldBlock/TimedOut).
            _ => return,
        }
        if shared.is_shutting_down() {
            return;
        }
    }
}
