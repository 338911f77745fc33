//! One event loop: a thread that multiplexes many connections with epoll
//! (mio) and runs their commands inline, the way Redis does.
//!
//! A pass: wait for readiness; for every ready connection read what
//! arrived and run the complete requests (engine calls are short; a
//! blocked engine — back-pressure — blocks the loop briefly); then every
//! connection's replies of the pass go out in one `write`. With
//! `--durability sync` they are first held behind a ticket covering every
//! write a reply of the pass could reveal; the loop serves further passes
//! while requests keep arriving (at most [`SYNC_WAIT`] or
//! [`SYNC_REPLIES`]), then one shared sync makes every held ticket durable
//! and the held replies go out. Redis syncs after every pass; gathering
//! the passes that arrive back to back into one sync spends less CPU on
//! syncs when many clients write, and costs a lone client nothing (its
//! next poll finds no request, so the sync runs at once).

use std::io::ErrorKind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use super::conn::{Conn, Leftover};
use super::Incoming;
use crate::cmd::Shared;
use crate::pubsub::{LoopMail, Mailbox};
use crate::replication::primary::Handover;
use crate::store::Pending;

/// The token of the loop's waker (new connections, shutdown).
pub(crate) const WAKER: Token = Token(usize::MAX);

/// Size of the loop's shared read buffer.
const SCRATCH: usize = 64 << 10;

/// How long a stopping loop keeps trying to write pending replies.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// How often a loop with clients in blocking commands looks at them.
const BLOCKED_POLL: Duration = Duration::from_millis(5);

/// One database's pass-wide group: its database, the connections that
/// joined it with how many commands each, and the commands (each with its
/// client's protocol version), in that order.
type PassGroup = (usize, Vec<(usize, usize)>, Vec<(u8, crate::cmd::Grouped)>);

/// Sends one io_uring submission takes (more go in further submissions).
const SEND_RING: u32 = 256;

/// Most commands of one pass run as one shared group.
const PASS_GROUP: usize = 1024;

/// Longest a held reply waits for more passes to share its sync.
const SYNC_WAIT: Duration = Duration::from_micros(1000);

/// Held replies after which the loop syncs without waiting for more.
const SYNC_REPLIES: usize = 1024;

/// How often a loop with clients held back by a running script looks
/// whether the script has ended or passed its time limit.
const DEFERRED_POLL: Duration = Duration::from_millis(1);

/// The state of one event loop thread.
pub(crate) struct EventLoop {
    shared: Arc<Shared>,
    poll: Poll,
    incoming: Receiver<Incoming>,
    /// Connections by token; `free` lists empty slots.
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Connections on this loop (the acceptor balances by it).
    load: Arc<AtomicUsize>,
    scratch: Vec<u8>,
    /// Connections to process this pass, and those left for the next one.
    queue: Vec<usize>,
    carry: Vec<usize>,
    /// Connections held back while a script runs, before its time limit
    /// (their commands would wait for the script's locks).
    deferred: Vec<usize>,
    last_idle_check: Instant,
    /// Connections of this loop with pub/sub mail (publishers list them
    /// and wake the loop).
    mail: Arc<LoopMail>,
    /// Connections with replies held for a sync, the newest ticket they
    /// wait for, how many replies, and since when.
    holding: Vec<usize>,
    held_ticket: u64,
    held_replies: usize,
    held_since: Instant,
    /// Sends the replies of many connections in one system call (none
    /// where the kernel refuses io_uring: one `write` each, as before).
    sends: Option<strata_pmem::SendRing>,
}

impl EventLoop {
    /// A loop over `poll` that takes new connections from `incoming`.
    pub(crate) fn new(
        shared: Arc<Shared>,
        poll: Poll,
        incoming: Receiver<Incoming>,
        load: Arc<AtomicUsize>,
        mail: Arc<LoopMail>,
    ) -> EventLoop {
        let sends = shared.config.io_uring.then(|| strata_pmem::SendRing::new(SEND_RING).ok()).flatten();
        EventLoop {
            shared,
            poll,
            incoming,
            conns: Vec::new(),
            free: Vec::new(),
            load,
            scratch: vec![0u8; SCRATCH],
            queue: Vec::new(),
            carry: Vec::new(),
            deferred: Vec::new(),
            last_idle_check: Instant::now(),
            mail,
            holding: Vec::new(),
            held_ticket: 0,
            held_replies: 0,
            held_since: Instant::now(),
            sends,
        }
    }

    /// Serves connections until shutdown, then answers the requests already
    /// read, writes the replies (for a bounded time) and closes everything.
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        while !self.shared.is_shutting_down() {
            // Blocked clients are looked at every few ms (a write to one of
            // their keys, maybe from another loop, or their timeout).
            let blocked = self.shared.stats.blocked_clients.load(Ordering::Relaxed) > 0;
            let timeout = if !self.carry.is_empty() || !self.holding.is_empty() {
                // Held replies: only look whether more requests are ready.
                Duration::ZERO
            } else if !self.deferred.is_empty() {
                // A script runs: look again soon (it ends, or passes its limit).
                DEFERRED_POLL
            } else if blocked {
                BLOCKED_POLL
            } else {
                Duration::from_millis(1000)
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != ErrorKind::Interrupted {
                    eprintln!("strata-server: event loop poll failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            if !self.holding.is_empty() && events.is_empty() && self.carry.is_empty() {
                // No more requests right now: sync what is held.
                self.sync_held();
            }
            self.queue.clear();
            for idx in std::mem::take(&mut self.carry) {
                self.schedule(idx);
            }
            if !self.deferred.is_empty() && !self.holds_clients() {
                for idx in std::mem::take(&mut self.deferred) {
                    if let Some(c) = self.conn(idx) {
                        c.deferred = false;
                    }
                    self.schedule(idx);
                }
            }
            for ev in events.iter() {
                if ev.token() == WAKER {
                    self.take_incoming();
                    self.take_mail();
                    continue;
                }
                let idx = ev.token().0;
                if ev.is_writable() {
                    self.on_writable(idx);
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    if let Some(c) = self.conn(idx) {
                        c.readable = true;
                        c.peer_closed |= ev.is_read_closed() || ev.is_error();
                    }
                    self.schedule(idx);
                }
            }
            if blocked {
                // Longest waiting first, as Redis serves them.
                let mut waiting: Vec<(u64, usize)> = self
                    .conns
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| c.as_ref().and_then(|c| c.blocked_seq()).map(|s| (s, i)))
                    .collect();
                waiting.sort_unstable();
                for (_, idx) in waiting {
                    self.schedule(idx);
                }
            }
            self.pass();
            if !self.holding.is_empty() && (self.held_replies >= SYNC_REPLIES || self.held_since.elapsed() >= SYNC_WAIT)
            {
                self.sync_held();
            }
            self.close_idle();
        }
        self.drain();
    }

    /// Whether a script runs, not yet past `lua-time-limit`: clients wait
    /// (Redis serves nobody meanwhile), other than those waiting for it.
    fn holds_clients(&self) -> bool {
        let scripts = &self.shared.scripts;
        // One atomic load on the common path: no script.
        scripts.active() && !scripts.busy(crate::cmd::lua_time_limit(&self.shared))
    }

    fn conn(&mut self, idx: usize) -> Option<&mut Conn> {
        self.conns.get_mut(idx).and_then(Option::as_mut)
    }

    fn schedule(&mut self, idx: usize) {
        if let Some(c) = self.conn(idx) {
            if !c.scheduled {
                c.scheduled = true;
                self.queue.push(idx);
            }
        }
    }

    /// Registers connections handed over by the acceptor.
    fn take_incoming(&mut self) {
        while let Ok(inc) = self.incoming.try_recv() {
            let idx = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            let mut stream = mio::net::TcpStream::from_std(inc.stream);
            if self.poll.registry().register(&mut stream, Token(idx), Interest::READABLE).is_err() {
                self.free.push(idx);
                continue; // dropping the stream and guard closes and uncounts it
            }
            let mut conn = Conn::new(&self.shared, stream, inc.addr, inc.guard, inc.tls);
            conn.set_mailbox(Mailbox::new(conn.client_id(), idx, self.mail.clone()));
            if let Some(slot) = self.conns.get_mut(idx) {
                *slot = Some(conn);
                self.load.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Moves pub/sub mail into the output of the connections that have
    /// some, and writes it. Runs between passes, so the output holds no
    /// reply still waiting for the pass's sync.
    fn take_mail(&mut self) {
        for idx in self.mail.take() {
            let Some(c) = self.conn(idx) else { continue };
            c.take_mail();
            c.flush();
            // Rung by the script thread: the script's reply is ready.
            let script_done = c.script_done();
            self.after_flush(idx);
            if script_done {
                self.schedule(idx);
            }
        }
    }

    fn on_writable(&mut self, idx: usize) {
        let Some(c) = self.conn(idx) else { return };
        let was_paused = c.paused();
        c.flush();
        let resume = was_paused && !c.paused();
        self.after_flush(idx);
        if resume {
            self.schedule(idx);
        }
    }

    /// Runs the leading keyspace commands of every scheduled connection
    /// as one group per database: one transaction and one engine batch for
    /// the pass instead of one per connection (with many clients writing
    /// at once, the log, memtable and sync costs are shared out). Each
    /// connection's commands keep their order; their replies come first
    /// among the pass's.
    fn run_pass_group(&mut self, queue: &[usize]) {
        if queue.len() < 2 || self.holds_clients() {
            return;
        }
        let shared = self.shared.clone();
        let mut groups: Vec<PassGroup> = Vec::new();
        let mut total = 0;
        for &idx in queue {
            let scratch = &mut self.scratch;
            let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else { continue };
            let Some((db, proto, cmds)) = c.take_groupable(&shared, scratch, PASS_GROUP - total) else { continue };
            total += cmds.len();
            let slot = match groups.iter().position(|g| g.0 == db) {
                Some(i) => i,
                None => {
                    groups.push((db, Vec::new(), Vec::new()));
                    groups.len() - 1
                }
            };
            if let Some(g) = groups.get_mut(slot) {
                g.1.push((idx, cmds.len()));
                g.2.extend(cmds.into_iter().map(|cmd| (proto, cmd)));
            }
        }
        for (db, members, cmds) in groups {
            if members.len() > 1 {
                shared.stats.pass_groups.fetch_add(1, Ordering::Relaxed);
                shared.stats.pass_grouped_commands.fetch_add(cmds.len() as u64, Ordering::Relaxed);
            }
            let mut replies = crate::cmd::run_group_replies(&shared, db, &cmds).into_iter();
            for (idx, n) in members {
                let mine: Vec<_> = replies.by_ref().take(n).collect();
                if let Some(c) = self.conn(idx) {
                    c.accept_group(mine);
                }
            }
        }
    }

    /// One pass over the scheduled connections: run, sync once, reply.
    fn pass(&mut self) {
        let shared = self.shared.clone();
        let queue = std::mem::take(&mut self.queue);
        self.run_pass_group(&queue);
        let mut ran = false;
        let (mut scripts, mut script_jobs) = (Vec::new(), Vec::new());
        for &idx in &queue {
            // Looked at for each connection: a script may start in the pass.
            let hold = self.holds_clients();
            let scratch = &mut self.scratch;
            let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else { continue };
            if hold && !c.awaits_script() {
                if !c.deferred {
                    c.deferred = true;
                    self.deferred.push(idx);
                }
                continue;
            }
            if c.run(&shared, scratch) == Leftover::More {
                self.carry.push(idx);
            }
            ran |= c.ran_this_pass();
            let jobs = c.take_script_jobs();
            if !jobs.is_empty() {
                scripts.push(idx);
                script_jobs.extend(jobs);
            }
        }
        // The replies of the pass wait for every write they could reveal.
        let ticket = if ran && shared.replies_wait_for_sync() { shared.store.last_ticket().0 } else { None };
        for &idx in &queue {
            let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else { continue };
            c.scheduled = false;
            let replies = c.pass_replies();
            if c.end_pass(ticket) {
                if self.holding.is_empty() {
                    self.held_since = Instant::now();
                }
                self.held_replies += replies;
                if !self.holding.contains(&idx) {
                    self.holding.push(idx);
                }
            }
        }
        self.flush_all(&queue);
        if let Some(t) = ticket {
            self.held_ticket = self.held_ticket.max(t);
        }
        self.queue = queue;
        if !scripts.is_empty() {
            // After the pass's replies are out: the scripts of the pass go to
            // the script thread together, and the loop waits for them (until
            // one passes lua-time-limit). Those that ended answer next pass.
            crate::cmd::run_scripts(&shared, script_jobs);
            for idx in scripts {
                if self.conn(idx).is_some_and(|c| c.script_done()) {
                    self.carry.push(idx);
                }
            }
        }
    }

    /// Makes every held ticket durable with one shared sync and sends the
    /// held replies (each becomes the error if the sync failed).
    fn sync_held(&mut self) {
        let upto = self.held_ticket;
        let failure = match self.shared.store.wait_durable(Pending(Some(upto))) {
            Ok(()) => None,
            Err(e) => Some(format!("ERR {e}")),
        };
        let held = std::mem::take(&mut self.holding);
        for &idx in &held {
            if let Some(c) = self.conn(idx) {
                c.release(upto, failure.as_deref());
            }
        }
        self.held_replies = 0;
        self.flush_all(&held);
    }

    /// Writes what each of these connections may send: the plain ones in
    /// one batched submission, the TLS ones one by one.
    fn flush_all(&mut self, idxs: &[usize]) {
        if let Some(ring) = self.sends.as_mut().filter(|r| r.usable()) {
            let mut batched: Vec<usize> = Vec::with_capacity(idxs.len());
            let mut sends: Vec<strata_pmem::SendTo<'_>> = Vec::with_capacity(idxs.len());
            for &idx in idxs {
                if let Some((fd, buf)) = self.conns.get(idx).and_then(Option::as_ref).and_then(Conn::plain_sendable) {
                    batched.push(idx);
                    sends.push(strata_pmem::SendTo { fd, buf });
                }
            }
            if !sends.is_empty() {
                let results = ring.send_all(&sends);
                drop(sends);
                for (idx, r) in batched.into_iter().zip(results) {
                    if let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) {
                        c.sent_batch(r);
                    }
                }
            }
        }
        for &idx in idxs {
            // TLS connections, and what a batch did not take.
            if let Some(c) = self.conn(idx) {
                if c.wants_write() && !c.want_write {
                    c.flush();
                }
            }
            self.after_flush(idx);
        }
    }

    /// Closes a finished connection, or (de)registers write interest.
    fn after_flush(&mut self, idx: usize) {
        let registry = self.poll.registry();
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else { return };
        if c.done() {
            self.close(idx);
            return;
        }
        if let Some((h, out, input)) = c.take_handover() {
            self.hand_over(idx, *h, out, input);
            return;
        }
        let want = c.wants_write();
        if want != c.want_write {
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            if registry.reregister(&mut c.stream, Token(idx), interest).is_err() {
                self.close(idx);
                return;
            }
            c.want_write = want;
        }
    }

    /// Gives a connection that ran PSYNC/SYNC to a replica's thread: a
    /// blocking duplicate of its socket goes there, the loop forgets it.
    fn hand_over(&mut self, idx: usize, h: Handover, out: Vec<u8>, input: Vec<u8>) {
        use std::os::fd::AsFd;
        let Some(c) = self.conn(idx) else { return };
        let ip = c.peer_ip();
        let dup = c.stream.as_fd().try_clone_to_owned();
        self.close(idx);
        match dup {
            Ok(fd) => {
                let sock = std::net::TcpStream::from(fd);
                crate::replication::primary::serve(self.shared.replication.clone(), h, sock, out, input, ip);
            }
            Err(e) => eprintln!("strata-server: handing a replica's connection over: {e}"),
        }
    }

    fn close(&mut self, idx: usize) {
        if let Some(slot) = self.conns.get_mut(idx) {
            if let Some(mut c) = slot.take() {
                let _ = self.poll.registry().deregister(&mut c.stream);
                self.free.push(idx);
                self.load.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.carry.retain(|&i| i != idx);
        self.deferred.retain(|&i| i != idx);
        self.holding.retain(|&i| i != idx);
    }

    /// Closes connections idle longer than `--timeout` (checked each second).
    fn close_idle(&mut self) {
        let timeout = self.shared.config.timeout;
        if timeout == 0 || self.last_idle_check.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last_idle_check = Instant::now();
        let limit = Duration::from_secs(timeout);
        let idle: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            // Reading replies counts as activity: a client that neither
            // sends nor reads is closed even with output pending, as Redis does.
            .filter_map(|(i, c)| c.as_ref().filter(|c| c.last_active.elapsed() >= limit).map(|_| i))
            .collect();
        for idx in idle {
            self.close(idx);
        }
    }

    /// At shutdown: answers requests already read (no new reads), writes
    /// replies for a bounded time, closes every connection.
    fn drain(&mut self) {
        for _ in 0..64 {
            let pending: Vec<usize> = self
                .conns
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.as_ref().filter(|c| c.has_input()).map(|_| i))
                .collect();
            if pending.is_empty() {
                break;
            }
            self.queue.clear();
            for idx in pending {
                self.schedule(idx);
            }
            self.pass();
        }
        let deadline = Instant::now() + DRAIN_TIME;
        let mut events = Events::with_capacity(1024);
        while Instant::now() < deadline && self.conns.iter().flatten().any(|c| c.unsent() > 0) {
            if !self.holding.is_empty() {
                self.sync_held();
            }
            let _ = self.poll.poll(&mut events, Some(Duration::from_millis(50)));
            for ev in events.iter() {
                if ev.token() != WAKER && ev.is_writable() {
                    self.on_writable(ev.token().0);
                }
            }
        }
        for idx in 0..self.conns.len() {
            self.close(idx);
        }
    }
}
