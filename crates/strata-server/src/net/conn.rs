//! One client connection on an event loop: its buffers and session, and
//! the steps the loop drives each pass — read what arrived, run the
//! complete requests, and write every reply of the pass with as few
//! `write` calls as possible. Replies that must wait for a sync are held
//! in the output and go out, in order, once the loop's sync is done.
//! Malformed protocol closes only this connection.

use crate::replication::primary::Handover;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use mio::net::TcpStream;

use crate::cmd::{
    collect_script, execute_batch, script_done, Grouped, ScriptHost, ScriptJob, Session, Shared, Unblock,
};
use crate::resp::{parse_request, Reply};

/// Most requests of one connection run per loop pass (the rest wait for
/// the next pass, so one deep pipeline cannot starve the other clients).
const MAX_BATCH: usize = 1024;

/// Most bytes read from one connection per loop pass.
const MAX_READ_PER_PASS: usize = 1 << 20;

/// Unsent output above which a connection's requests wait (a client that
/// does not read its replies cannot make the server buffer without end).
/// Checked between chunks of [`CHUNK`] requests, so one pass can overshoot
/// it by at most one chunk's replies.
const OUTPUT_PAUSE: usize = 8 << 20;

/// Requests run between two checks of the output size.
const CHUNK: usize = 32;

/// Most unsent reply bytes of a client that must still authenticate.
const UNAUTH_OUTPUT: usize = (16 << 10) + 1024;

/// Written bytes at the front of the output buffer that are dropped (the
/// buffer compacted) although more output is still waiting.
const COMPACT_SENT: usize = 1 << 20;

/// Counts a connection in `connected_clients` until it is dropped.
pub struct ClientGuard(pub Arc<Shared>);

impl Drop for Conn {
    fn drop(&mut self) {
        // A client that leaves while blocked is no longer counted as blocked.
        let shared = self._guard.0.clone();
        self.unblock(&shared);
        crate::cmd::leave_all(&shared, &mut self.sess);
    }
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.stats.connected_clients.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Replies of one pass held in the output until a sync makes `ticket`
/// durable: `out[start..end]`, `replies` of them.
struct Hold {
    start: usize,
    end: usize,
    replies: usize,
    ticket: u64,
}

/// A client connection owned by one event loop.
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    /// The TLS session over `stream` (TLS port), or none (plain TCP).
    tls: Option<Box<rustls::ServerConnection>>,
    /// The TLS session's close_notify is queued (closing).
    sent_close_notify: bool,
    /// Bytes read and not yet parsed.
    rbuf: BytesMut,
    /// Requests parsed but not yet run (the output grew past the pause
    /// mark in the middle of a pass).
    queued: VecDeque<Vec<Bytes>>,
    /// Encoded replies not yet written; `out[..sent]` is written.
    out: Vec<u8>,
    sent: usize,
    sess: Session,
    /// The kernel may hold unread bytes (edge-triggered readiness).
    pub(crate) readable: bool,
    /// The poller reported the peer's end (or an error): read on to EOF
    /// even after a short read (see [`Conn::fill`]).
    pub(crate) peer_closed: bool,
    /// The peer sends nothing more (EOF or read error).
    eof: bool,
    /// Close once the output is written.
    pub(crate) closing: bool,
    /// Writing failed: close at once.
    pub(crate) broken: bool,
    /// Registered for writable readiness (output is waiting).
    pub(crate) want_write: bool,
    /// Queued for processing in the current pass.
    pub(crate) scheduled: bool,
    /// Held back until a running script ends or passes its time limit.
    pub(crate) deferred: bool,
    /// Last time bytes arrived (idle timeout).
    pub(crate) last_active: Instant,
    /// Replies of the current pass: whether any ran, where they start in
    /// `out`, how many.
    in_pass: bool,
    pass_start: usize,
    pass_replies: usize,
    /// Passes whose replies wait for a sync, oldest first (tickets only
    /// grow). Nothing after the first one's start is sent.
    holds: VecDeque<Hold>,
    _guard: ClientGuard,
}

/// What [`Conn::run`] left to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leftover {
    /// Nothing until new bytes arrive.
    Idle,
    /// Complete requests or unread bytes remain: process again next pass.
    More,
}

impl Conn {
    /// Wraps an accepted stream; with `tls`, a TLS session runs over it
    /// (a session that cannot start leaves the connection to be closed).
    pub(crate) fn new(
        shared: &Shared,
        stream: TcpStream,
        addr: String,
        guard: ClientGuard,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Conn {
        let _ = stream.set_nodelay(true);
        let session = tls.map(super::tls::session);
        let broken = matches!(session, Some(None));
        let mut sess = Session::new(shared, addr);
        sess.tls = session.is_some();
        sess.script_host = Some(ScriptHost(guard.0.clone()));
        Conn {
            stream,
            tls: session.flatten(),
            sent_close_notify: false,
            rbuf: BytesMut::new(),
            queued: VecDeque::new(),
            out: Vec::new(),
            sent: 0,
            sess,
            readable: true,
            peer_closed: false,
            eof: false,
            closing: false,
            broken,
            want_write: false,
            scheduled: false,
            deferred: false,
            last_active: Instant::now(),
            in_pass: false,
            pass_start: 0,
            pass_replies: 0,
            holds: VecDeque::new(),
            _guard: guard,
        }
    }

    /// Gives the connection its pub/sub mailbox.
    pub(crate) fn set_mailbox(&mut self, mb: Arc<crate::pubsub::Mailbox>) {
        self.sess.mailbox = Some(mb);
    }

    /// The connection's client id.
    pub(crate) fn client_id(&self) -> u64 {
        self.sess.id
    }

    /// Appends the pub/sub messages waiting for this connection to its
    /// output. A subscriber too far behind (more than
    /// [`crate::pubsub::OUTPUT_LIMIT`] unsent) is closed, as Redis closes
    /// a pub/sub client past its output buffer limit.
    pub(crate) fn take_mail(&mut self) {
        let Some(mb) = self.sess.mailbox.as_ref() else { return };
        if !mb.drain(self.sess.proto, &mut self.out) || self.unsent() > crate::pubsub::OUTPUT_LIMIT {
            self.broken = true;
        }
    }

    /// Unsent output bytes, held ones included (plus one while the TLS
    /// session has records to send).
    pub(crate) fn unsent(&self) -> usize {
        self.out.len() - self.sent + usize::from(self.tls.as_ref().is_some_and(|t| t.wants_write()))
    }

    /// Where the output that may be sent now ends: at the first held pass.
    fn sendable_end(&self) -> usize {
        self.holds.front().map_or(self.out.len(), |h| h.start)
    }

    /// Whether output waits that a writable socket would take now (the
    /// loop then asks for writable readiness).
    pub(crate) fn wants_write(&self) -> bool {
        self.sendable_end() > self.sent || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Replies produced so far in the current pass.
    pub(crate) fn pass_replies(&self) -> usize {
        if self.in_pass {
            self.pass_replies
        } else {
            0
        }
    }

    /// Whether a client that must still authenticate left more replies
    /// unread than Redis lets such a client have (its 16 KiB reply buffer
    /// and 1 KiB more): then it is closed, so that a client without the
    /// password cannot make the server hold its output.
    fn unauth_output_over(&self, shared: &Shared) -> bool {
        self.unsent() > UNAUTH_OUTPUT && shared.auth_required(self.sess.authed)
    }

    /// Whether this connection's requests wait until its output drains.
    pub(crate) fn paused(&self) -> bool {
        self.unsent() > OUTPUT_PAUSE
    }

    /// Whether replies of this pass are waiting to be released.
    pub(crate) fn ran_this_pass(&self) -> bool {
        self.in_pass
    }

    /// Reads what the kernel holds (up to a per-pass budget) into the
    /// request buffer. `scratch` is the loop's shared read buffer.
    fn fill(&mut self, scratch: &mut [u8]) {
        if let Some(tls) = self.tls.as_mut() {
            let f = super::tls::fill(tls, &mut self.stream, scratch, &mut self.rbuf, MAX_READ_PER_PASS);
            if f.got > 0 {
                self.last_active = Instant::now();
            }
            self.eof |= f.eof;
            self.readable = !f.drained;
            return;
        }
        let mut got = 0;
        while got < MAX_READ_PER_PASS {
            match self.stream.read(scratch) {
                Ok(0) => {
                    self.eof = true;
                    self.readable = false;
                    return;
                }
                Ok(n) => {
                    self.rbuf.extend_from_slice(scratch.get(..n).unwrap_or_default());
                    got += n;
                    self.last_active = Instant::now();
                    // A short read took all the kernel held: bytes that
                    // arrive later raise a new edge, so reading again
                    // would only fetch EWOULDBLOCK (one syscall per request
                    // saved, as tokio does). Not once the poller reported
                    // the peer's end: that edge is spent, read on to EOF.
                    if n < scratch.len() && !self.peer_closed {
                        self.readable = false;
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.readable = false;
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.eof = true;
                    self.readable = false;
                    return;
                }
            }
        }
    }

    /// Reads, parses and runs up to [`MAX_BATCH`] requests, appending their
    /// replies to the output (written later by [`Conn::flush`]).
    pub(crate) fn run(&mut self, shared: &Shared, scratch: &mut [u8]) -> Leftover {
        if self.closing || self.paused() {
            return Leftover::Idle;
        }
        if self.sess.parked() {
            // Waiting in a blocking command or for its script: only notice
            // the client leaving.
            if self.readable && !self.eof {
                self.fill(scratch);
            }
            if self.eof {
                self.closing = true;
                return Leftover::Idle;
            }
        }
        if !self.sess.script.is_empty() {
            if !script_done(&self.sess) {
                return Leftover::Idle;
            }
            self.begin_pass();
            self.pass_replies += collect_script(shared, &mut self.sess, &mut self.out);
            if !self.sess.script.is_empty() {
                // A later pipelined script still runs.
                return Leftover::Idle;
            }
        }
        if let Some(b) = self.sess.blocked.as_ref() {
            let unblock = shared.waiting.requested(self.sess.id);
            // Not while a script runs: the command would wait for its locks
            // (the loop looks at blocked clients again every few ms).
            if let Some(how) = unblock {
                let reply = match how {
                    Unblock::Timeout => b.nil.clone(),
                    Unblock::Error => Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
                };
                self.unblock(shared);
                self.begin_pass();
                reply.encode(self.sess.proto, &mut self.out);
                self.pass_replies += 1;
            } else if b.may_run(shared) && !shared.scripts.active() {
                // Run it again, ahead of what was sent after it.
                let args = b.args.clone();
                self.queued.push_front(args);
            } else if b.timed_out() {
                let nil = b.nil.clone();
                self.unblock(shared);
                self.begin_pass();
                nil.encode(self.sess.proto, &mut self.out);
                self.pass_replies += 1;
            } else {
                return Leftover::Idle;
            }
        }
        let limits = shared.config.limits;
        let mut protocol_error = self.parse_into_queue(shared);
        // Read only when every complete request already read is parsed (the
        // buffer holds at most one partial request): a deep pipeline then
        // waits in the kernel, TCP pushing back on the client, instead of
        // piling up here past the query buffer limit.
        let room = self.queued.len() < MAX_BATCH && protocol_error.is_none();
        if room && self.readable && !self.eof && !shared.is_shutting_down() {
            self.fill(scratch);
            protocol_error = self.parse_into_queue(shared);
        }
        let mut ran = 0;
        while !self.queued.is_empty() && ran < MAX_BATCH && !self.paused() {
            self.begin_pass();
            let n = CHUNK.min(self.queued.len());
            let chunk: Vec<Vec<Bytes>> = self.queued.drain(..n).collect();
            ran += n;
            let done = execute_batch(shared, &mut self.sess, chunk, &mut self.out);
            self.pass_replies += done.replies;
            if self.sess.handover.is_some() {
                // PSYNC/SYNC: the connection goes to a replica's thread.
                return Leftover::Idle;
            }
            if !done.keep_open {
                self.closing = true;
                return Leftover::Idle;
            }
            if self.sess.parked() {
                // Blocked or parked: what came after it waits, in order.
                for r in done.rest.into_iter().rev() {
                    self.queued.push_front(r);
                }
                return Leftover::Idle;
            }
            if self.unauth_output_over(shared) {
                // Redis closes such a client at once, without a reply.
                self.broken = true;
                return Leftover::Idle;
            }
            if self.queued.is_empty() && protocol_error.is_none() && ran < MAX_BATCH {
                // Parsed one at a time before authentication: the next.
                protocol_error = self.parse_into_queue(shared);
            }
        }
        // Requests may wait: queued, or still unparsed in the read buffer
        // when this pass ran its full share.
        let more_requests = !self.queued.is_empty() || ran >= MAX_BATCH;
        if more_requests && self.paused() {
            // Resumed by the event loop once the output drains.
            return Leftover::Idle;
        }
        if let Some(e) = protocol_error {
            Reply::err(format!("ERR {}", e.0)).encode(2, &mut self.out);
            self.closing = true;
            return Leftover::Idle;
        }
        if !more_requests && self.rbuf.len() >= limits.max_query_buffer {
            Reply::err("ERR client query buffer limit reached").encode(2, &mut self.out);
            self.closing = true;
            return Leftover::Idle;
        }
        if self.eof && !more_requests {
            // Answer what arrived before the end, then close.
            self.closing = true;
            return Leftover::Idle;
        }
        if more_requests || (self.readable && !self.eof) {
            Leftover::More
        } else {
            Leftover::Idle
        }
    }

    /// Before the loop runs its connections one by one: reads what
    /// arrived and takes the leading requests that may join the pass's
    /// shared group (keyspace commands, the connection in a plain state),
    /// at most `room`. Returns them with the connection's database and
    /// protocol; their replies come back through [`Conn::accept_group`],
    /// ahead of whatever [`Conn::run`] answers next.
    pub(crate) fn take_groupable(
        &mut self,
        shared: &Shared,
        scratch: &mut [u8],
        room: usize,
    ) -> Option<(usize, u8, Vec<Grouped>)> {
        if room == 0
            || self.closing
            || self.paused()
            || self.sess.parked()
            || !self.sess.script.is_empty()
            || self.sess.blocked.is_some()
        {
            return None;
        }
        // A protocol error stays in the buffer: `run` parses again, meets
        // it after the requests before it, and answers it.
        let mut error = self.parse_into_queue(shared);
        if error.is_none() && self.queued.len() < MAX_BATCH && self.readable && !self.eof && !shared.is_shutting_down()
        {
            self.fill(scratch);
            error = self.parse_into_queue(shared);
        }
        let _ = error;
        let mut taken = Vec::new();
        while taken.len() < room {
            let Some(args) = self.queued.front() else { break };
            let Some((id, spec, f)) = crate::cmd::groupable(shared, &self.sess, args) else { break };
            let Some(args) = self.queued.pop_front() else { break };
            taken.push((id, spec, f, args));
        }
        if taken.is_empty() {
            return None;
        }
        Some((self.sess.db, self.sess.proto, taken))
    }

    /// The replies of the requests [`Conn::take_groupable`] took.
    pub(crate) fn accept_group(&mut self, replies: Vec<Reply>) {
        self.begin_pass();
        for r in replies {
            r.encode(self.sess.proto, &mut self.out);
            self.pass_replies += 1;
        }
    }

    /// Starts collecting this pass's replies, if not yet.
    fn begin_pass(&mut self) {
        if !self.in_pass {
            self.in_pass = true;
            self.pass_start = self.out.len();
            self.pass_replies = 0;
        }
    }

    /// Whether the connection waits for its scripts and the first has ended.
    pub(crate) fn script_done(&self) -> bool {
        script_done(&self.sess)
    }

    /// Whether the connection waits for its script (parked).
    pub(crate) fn awaits_script(&self) -> bool {
        !self.sess.script.is_empty()
    }

    /// The scripts this pass parked the connection on, for the loop to
    /// hand to the script thread.
    pub(crate) fn take_script_jobs(&mut self) -> Vec<ScriptJob> {
        std::mem::take(&mut self.sess.script_job)
    }

    /// When the connection began to wait in a blocking command, if it does.
    pub(crate) fn blocked_seq(&self) -> Option<u64> {
        self.sess.blocked.as_ref().map(|b| b.seq)
    }

    /// Ends a wait in a blocking command (timeout or close).
    fn unblock(&mut self, shared: &Shared) {
        if self.sess.blocked.take().is_some() {
            shared.stats.blocked_clients.fetch_sub(1, Ordering::AcqRel);
            shared.waiting.leave(self.sess.id);
        }
    }

    /// Moves complete requests from the read buffer to the queue, up to
    /// [`MAX_BATCH`] queued; returns a protocol error if one is found.
    /// While the client must still authenticate, one request at a time
    /// under Redis's limits for such clients: whether the next one is held
    /// to them depends on whether this one authenticates.
    fn parse_into_queue(&mut self, shared: &Shared) -> Option<crate::resp::ProtocolError> {
        let unauth = shared.auth_required(self.sess.authed);
        let (limits, most) =
            if unauth { (shared.config.limits.unauthenticated(), 1) } else { (shared.config.limits, MAX_BATCH) };
        while self.queued.len() < most {
            match parse_request(&mut self.rbuf, &limits) {
                Ok(Some(r)) => self.queued.push_back(r),
                Ok(None) => return None,
                Err(e) => return Some(e),
            }
        }
        None
    }

    /// Ends the pass for this connection: its replies may be sent once
    /// `ticket` is durable (none: at once). Returns whether they are held.
    pub(crate) fn end_pass(&mut self, ticket: Option<u64>) -> bool {
        let held = match ticket {
            Some(ticket) if self.in_pass && self.out.len() > self.pass_start => {
                let hold = Hold { start: self.pass_start, end: self.out.len(), replies: self.pass_replies, ticket };
                self.holds.push_back(hold);
                true
            }
            _ => false,
        };
        self.in_pass = false;
        self.pass_replies = 0;
        held
    }

    /// Releases the held passes with tickets up to `upto`, which a sync
    /// made durable or, with `failure`, failed to: then each of their
    /// replies becomes that error (their writes are applied but not known
    /// to be durable).
    pub(crate) fn release(&mut self, upto: u64, failure: Option<&str>) {
        while let Some(h) = self.holds.front() {
            if h.ticket > upto {
                return;
            }
            if let Some(e) = failure {
                let (start, end) = (h.start, h.end);
                let mut errors = Vec::new();
                let error = Reply::err(e);
                for _ in 0..h.replies {
                    error.encode(self.sess.proto, &mut errors);
                }
                let delta = errors.len() as isize - (end - start) as isize;
                self.out.splice(start..end, errors);
                for later in self.holds.iter_mut().skip(1) {
                    later.start = later.start.saturating_add_signed(delta);
                    later.end = later.end.saturating_add_signed(delta);
                }
                self.pass_start = self.pass_start.saturating_add_signed(delta);
            }
            self.holds.pop_front();
        }
    }

    /// Writes as much unsent output as the socket takes.
    pub(crate) fn flush(&mut self) {
        if self.broken {
            // Closed at once (an error, or a limit): nothing more is sent.
            return;
        }
        let end = self.sendable_end();
        if let Some(tls) = self.tls.as_mut() {
            let rest = self.out.get(self.sent..end).unwrap_or_default();
            let (n, broken) = super::tls::flush(tls, &mut self.stream, rest);
            self.sent += n;
            if n > 0 {
                self.last_active = Instant::now();
            }
            if broken {
                self.broken = true;
                return;
            }
            if self.sent < self.out.len() {
                self.compact();
                return;
            }
            if self.closing && !tls.is_handshaking() && !self.sent_close_notify {
                // Everything is out: end the session cleanly (QUIT), so the
                // client sees close_notify rather than a truncated stream.
                self.sent_close_notify = true;
                tls.send_close_notify();
                if super::tls::flush(tls, &mut self.stream, &[]).1 {
                    self.broken = true;
                    return;
                }
            }
        }
        while self.sent < end {
            let Some(rest) = self.out.get(self.sent..end) else { break };
            match self.stream.write(rest) {
                Ok(0) => {
                    self.broken = true;
                    return;
                }
                Ok(n) => {
                    self.sent += n;
                    // A client that reads its replies is active (idle timeout).
                    self.last_active = Instant::now();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.compact();
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.broken = true;
                    return;
                }
            }
        }
        if !self.settle_output() {
            // Held replies wait for their sync.
            return;
        }
        if self.rbuf.is_empty() && self.rbuf.capacity() > (1 << 20) {
            self.rbuf = BytesMut::new();
        }
    }

    /// After a send: keeps what is still unsent (compacted), or empties
    /// the output, dropping a buffer grown over 1 MiB. True if all was sent.
    fn settle_output(&mut self) -> bool {
        if self.sent < self.out.len() {
            self.compact();
            return false;
        }
        self.out.clear();
        self.sent = 0;
        if self.out.capacity() > (1 << 20) {
            self.out = Vec::new();
        }
        true
    }

    /// The socket and the output a plain (not TLS) connection may send
    /// now, for a batched send of the whole pass (see [`Conn::sent_batch`]).
    pub(crate) fn plain_sendable(&self) -> Option<(std::os::fd::RawFd, &[u8])> {
        use std::os::fd::AsRawFd;
        if self.tls.is_some() || self.broken {
            return None;
        }
        let rest = self.out.get(self.sent..self.sendable_end())?;
        (!rest.is_empty()).then(|| (self.stream.as_raw_fd(), rest))
    }

    /// Takes the result of a batched send of [`Conn::plain_sendable`]'s
    /// bytes, as [`Conn::flush`] takes a `write`'s.
    pub(crate) fn sent_batch(&mut self, r: std::io::Result<usize>) {
        match r {
            Ok(0) => self.broken = true,
            Ok(n) => {
                self.sent += n;
                self.last_active = Instant::now();
                // More may wait: the socket is full, or replies are held.
                self.settle_output();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => self.compact(),
            Err(_) => self.broken = true,
        }
    }

    /// After PSYNC/SYNC, once no reply waits for a sync: what the
    /// replica's thread takes over (the handover, the output not yet
    /// sent, the bytes read and not yet parsed).
    pub(crate) fn take_handover(&mut self) -> Option<(Box<Handover>, Vec<u8>, Vec<u8>)> {
        if !self.holds.is_empty() || self.broken {
            return None;
        }
        let h = self.sess.handover.take()?;
        let out = self.out.get(self.sent..).unwrap_or_default().to_vec();
        Some((h, out, self.rbuf.split().to_vec()))
    }

    /// The peer's IP address (of `ip:port`).
    pub(crate) fn peer_ip(&self) -> String {
        let a = self.sess.addr.rsplit_once(':').map_or(self.sess.addr.as_str(), |(ip, _)| ip);
        a.trim_start_matches('[').trim_end_matches(']').to_string()
    }

    /// Whether the loop should close this connection now.
    pub(crate) fn done(&self) -> bool {
        self.broken || (self.closing && self.unsent() == 0)
    }

    /// Whether complete requests may wait in the buffer (shutdown drain).
    pub(crate) fn has_input(&self) -> bool {
        (!self.rbuf.is_empty() || !self.queued.is_empty()) && !self.closing
    }

    /// Drops the written front of the output while more waits, so a slow
    /// reader costs memory for what is unsent, not for all ever sent.
    fn compact(&mut self) {
        if self.sent < COMPACT_SENT || self.sent * 2 < self.out.len() {
            return;
        }
        self.out.drain(..self.sent);
        self.pass_start = self.pass_start.saturating_sub(self.sent);
        for h in &mut self.holds {
            h.start = h.start.saturating_sub(self.sent);
            h.end = h.end.saturating_sub(self.sent);
        }
        self.sent = 0;
    }
}
