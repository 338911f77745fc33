//! TLS over a connection's non-blocking socket (rustls): read the records
//! the socket holds and take out the plaintext; put plaintext in as the
//! session has room and write its records out. Nothing here blocks: a
//! `WouldBlock` ends the step, and the event loop registers for writable
//! readiness while the session still has records to send.

use std::io::{ErrorKind, Read, Write};

use bytes::BytesMut;
use mio::net::TcpStream;
use rustls::ServerConnection;

/// Plaintext a session buffers before its writer takes no more (the rest
/// waits in the connection's output, which counts toward its pause mark).
const SESSION_BUFFER: usize = 256 << 10;

/// What [`fill`] found.
pub(crate) struct Filled {
    /// Plaintext bytes appended.
    pub got: usize,
    /// The peer closed (or the session failed; its alert, if any, is left
    /// for [`flush`]).
    pub eof: bool,
    /// The socket had nothing more (readiness is used up).
    pub drained: bool,
}

/// A server session for a new connection, with its plaintext buffer bounded.
pub(crate) fn session(config: std::sync::Arc<rustls::ServerConfig>) -> Option<Box<ServerConnection>> {
    let mut s = ServerConnection::new(config).ok()?;
    s.set_buffer_limit(Some(SESSION_BUFFER));
    Some(Box::new(s))
}

/// Reads TLS records from the socket until it would block (or `budget`
/// plaintext bytes arrived) and appends their plaintext to `rbuf`.
pub(crate) fn fill(
    tls: &mut ServerConnection,
    stream: &mut TcpStream,
    scratch: &mut [u8],
    rbuf: &mut BytesMut,
    budget: usize,
) -> Filled {
    let mut got = 0;
    loop {
        // Plaintext already decrypted goes first, so none is left behind.
        loop {
            match tls.reader().read(scratch) {
                // A close_notify: the peer sends nothing more.
                Ok(0) => return Filled { got, eof: true, drained: true },
                Ok(n) => {
                    rbuf.extend_from_slice(scratch.get(..n).unwrap_or_default());
                    got += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // The socket closed without close_notify.
                Err(_) => return Filled { got, eof: true, drained: true },
            }
        }
        if got >= budget {
            return Filled { got, eof: false, drained: false };
        }
        match tls.read_tls(stream) {
            Ok(0) => return Filled { got, eof: true, drained: true },
            Ok(_) => {
                if tls.process_new_packets().is_err() {
                    return Filled { got, eof: true, drained: true };
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Filled { got, eof: false, drained: true },
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Filled { got, eof: true, drained: true },
        }
    }
}

/// Writes the session's records to the socket, feeding it plaintext from
/// `data` as it has room. Returns the plaintext bytes taken and whether
/// the socket failed.
pub(crate) fn flush(tls: &mut ServerConnection, stream: &mut TcpStream, data: &[u8]) -> (usize, bool) {
    let mut taken = 0;
    loop {
        while tls.wants_write() {
            match tls.write_tls(stream) {
                Ok(0) => return (taken, true),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return (taken, false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return (taken, true),
            }
        }
        let rest = data.get(taken..).unwrap_or_default();
        if rest.is_empty() {
            return (taken, false);
        }
        match tls.writer().write(rest) {
            Ok(n) if n > 0 => taken += n,
            // The session is full (or still shaking hands) and has nothing
            // to send: the rest waits for the next writable event.
            Ok(_) if !tls.wants_write() => return (taken, false),
            Ok(_) => {}
            Err(_) => return (taken, true),
        }
    }
}
