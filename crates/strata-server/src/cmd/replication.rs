//! REPLICAOF / SLAVEOF and ROLE, and the "master client" through which the
//! replication thread ([`crate::replication`]) writes: a session that may
//! write on a read-only replica and whose replies are dropped.

use std::sync::{Arc, Weak};

use bytes::Bytes;

use super::{arg, execute, is, Session, Shared};
use crate::rdb::read::Entry;
use crate::replication::{Applier, RoleView};
use crate::resp::Reply;

/// REPLICAOF host port | REPLICAOF NO ONE (and SLAVEOF, the same).
pub(crate) fn replicaof(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    let (host, port) = (arg(args, 1), arg(args, 2));
    if is(host, "no") && is(port, "one") {
        shared.replication.promote();
        return Reply::ok();
    }
    if sess.master {
        return Reply::err("ERR Command is not valid when client is a replica.");
    }
    let port = match crate::numbers::parse_i64(port) {
        Some(p) => match u16::try_from(p) {
            Ok(p) if p > 0 => p,
            _ => return Reply::err("ERR Invalid master port"),
        },
        None => return Reply::err("ERR value is not an integer or out of range"),
    };
    let host = String::from_utf8_lossy(host).into_owned();
    match shared.replication.follow(host, port) {
        Ok(()) => Reply::Simple("OK"),
        Err(e) => Reply::err(format!("ERR {e}")),
    }
}

/// ROLE: `["master", offset, []]` or `["slave", host, port, state, offset]`.
pub(crate) fn role(shared: &Shared, _: &mut Session, _: &[Bytes]) -> Reply {
    match shared.replication.role() {
        RoleView::Primary { offset, replicas } => {
            let replicas = replicas
                .into_iter()
                .map(|(ip, port, ack)| {
                    Reply::Array(vec![Reply::bulk(ip), Reply::bulk(port.to_string()), Reply::bulk(ack.to_string())])
                })
                .collect();
            Reply::Array(vec![Reply::bulk("master"), Reply::Int(offset as i64), Reply::Array(replicas)])
        }
        RoleView::Replica { host, port, state, offset } => Reply::Array(vec![
            Reply::bulk("slave"),
            Reply::bulk(host),
            Reply::Int(i64::from(port)),
            Reply::bulk(state),
            Reply::Int(offset),
        ]),
    }
}

/// The replication backlog's size (Redis's `repl-backlog-size` default).
const BACKLOG: usize = 1 << 20;

/// REPLCONF listening-port <port> | capa <..> | ack <offset> | getack
/// <..> | ...: +OK (acks from a replica's link are read by its thread;
/// here they are ignored, as Redis ignores them from a normal client).
pub(crate) fn replconf(_: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return Reply::err("ERR syntax error");
    }
    let mut i = 1;
    while i + 1 < args.len() {
        let (opt, val) = (arg(args, i), arg(args, i + 1));
        if is(opt, "listening-port") {
            match crate::numbers::parse_i64(val).and_then(|p| u16::try_from(p).ok()) {
                Some(p) => sess.repl_port = p,
                None => return Reply::err("ERR value is not an integer or out of range"),
            }
        } else if is(opt, "ack") || is(opt, "getack") {
            // No reply to these, as in Redis.
            sess.reply_skip = 1;
            return Reply::ok();
        }
        i += 2;
    }
    Reply::ok()
}

/// PSYNC replid offset, SYNC: a partial resync (`+CONTINUE`) when the
/// replication id is ours and the backlog holds the stream from `offset`
/// (the first byte the replica lacks, counted from 1, as Redis sends it),
/// else a full one (`+FULLRESYNC replid offset`, then the RDB image); the
/// connection then goes to a replica's thread ([`crate::replication::primary`]).
pub(crate) fn psync(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    if sess.tls {
        return Reply::err("ERR replication over TLS is not supported yet");
    }
    if sess.master {
        return Reply::err("ERR Command is not valid when client is a replica.");
    }
    let sync = is(arg(args, 0), "sync");
    let replid = shared.replication.replid();
    shared.repl_stream.start(BACKLOG);
    // Redis asks for the first byte it lacks, counting from 1.
    let asked = crate::numbers::parse_i64(arg(args, 2)).and_then(|o| u64::try_from(o).ok()?.checked_sub(1));
    let partial = match asked {
        Some(o) if !sync && arg(args, 1) == replid.as_bytes() && shared.repl_stream.since(o).is_some() => Some(o),
        _ => None,
    };
    let (views, offset, preamble) = match partial {
        Some(o) => (None, o, format!("+CONTINUE {replid}\r\n")),
        None => {
            let taken = {
                // No write commits between the views and the offset.
                let _all = shared.locks.lock_all();
                shared.repl_stream.reselect();
                shared.store.snapshot_databases(shared.dbs.len()).map(|v| (v, shared.repl_stream.offset()))
            };
            let (views, offset) = match taken {
                Ok(t) => t,
                Err(e) => return Reply::err(format!("ERR taking the image: {e}")),
            };
            let line = if sync { String::new() } else { format!("+FULLRESYNC {replid} {offset}\r\n") };
            (Some(views), offset, line)
        }
    };
    sess.handover = Some(Box::new(crate::replication::primary::Handover {
        preamble: preamble.into_bytes(),
        views,
        offset,
        replid,
        stream: shared.repl_stream.clone(),
        dir: shared.config.dir.clone(),
        listening_port: sess.repl_port,
        redis_ver: super::connection::REDIS_VERSION,
    }));
    // The thread sends the reply (SYNC has none).
    sess.reply_skip = 1;
    Reply::ok()
}

/// WAIT numreplicas timeout's arguments, or its error.
fn wait_args(shared: &Shared, args: &[Bytes]) -> Result<(usize, i64), Reply> {
    if shared.replication.is_replica() {
        return Err(Reply::err(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is \
             configured to be writable (which is not the default) writes to replicas are just local and are not \
             propagated.",
        ));
    }
    let int = |i| {
        crate::numbers::parse_i64(arg(args, i)).ok_or_else(|| Reply::err("ERR value is not an integer or out of range"))
    };
    let (n, timeout) = (int(1)?, int(2)?);
    if timeout < 0 {
        return Err(Reply::err("ERR timeout is negative"));
    }
    Ok((usize::try_from(n).unwrap_or(0), timeout))
}

/// WAIT in a transaction: how many replicas acknowledged the stream so
/// far (no waiting, as Redis answers there).
pub(crate) fn wait(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    match wait_args(shared, args) {
        Ok(_) => Reply::Int(shared.replication.acked(shared.repl_stream.offset()) as i64),
        Err(e) => e,
    }
}

/// WAIT numreplicas timeout: blocks the client until `numreplicas`
/// replicas acknowledged the stream up to where it was when WAIT came (at
/// least this client's last write) or `timeout` ms passed (0: forever);
/// answers how many did. Run again on every poll of blocked clients.
pub(crate) fn wait_blocking(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Option<Reply> {
    let (n, timeout) = match wait_args(shared, args) {
        Ok(a) => a,
        Err(e) => return Some(e),
    };
    let waiting = sess.blocked.as_ref().and_then(|b| b.wait.map(|w| (w, b.timed_out())));
    let target = waiting.map_or_else(|| shared.repl_stream.offset(), |((t, _), _)| t);
    let acked = shared.replication.acked(target);
    if acked >= n || waiting.is_some_and(|(_, out)| out) {
        if sess.blocked.take().is_some() {
            shared.stats.blocked_clients.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            shared.waiting.leave(sess.id);
        }
        return Some(Reply::Int(acked as i64));
    }
    if waiting.is_none() {
        shared.stats.blocked_clients.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        shared.waiting.enter(sess.id);
        let deadline =
            (timeout > 0).then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout as u64));
        let seq = shared.stats.block_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        sess.blocked = Some(super::Blocked {
            args: args.to_vec(),
            deadline,
            versions: Vec::new(),
            nil: Reply::Int(acked as i64),
            seq,
            wait: Some((target, n)),
        });
        shared.replication.request_acks();
    }
    None
}

/// The master client: runs what the primary sends through the normal
/// dispatch, in a session of its own.
struct MasterClient {
    shared: Weak<Shared>,
    sess: Option<Session>,
}

impl MasterClient {
    /// Runs `args` in the master session; an error reply becomes `Err`.
    fn run(&mut self, args: &[Bytes]) -> Result<(), String> {
        let shared = self.shared.upgrade().ok_or("the server is gone")?;
        let sess = match self.sess.as_mut() {
            Some(s) => s,
            None => {
                let mut s = Session::new(&shared, "master".into());
                s.master = true;
                s.authed = true;
                self.sess.insert(s)
            }
        };
        match execute(&shared, sess, args) {
            Some(Reply::Error(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

fn bytes(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}

impl Applier for MasterClient {
    fn flush_all(&mut self) -> Result<(), String> {
        self.run(&[bytes(b"FLUSHALL")])?;
        // Functions go too, as a Redis replica drops them at a full sync.
        self.run(&[bytes(b"FUNCTION"), bytes(b"FLUSH")])
    }

    fn load(&mut self, e: Entry) -> Result<(), String> {
        let db = e.db.to_string();
        self.run(&[bytes(b"SELECT"), Bytes::from(db)])?;
        let payload = crate::rdb::dump(&e.value);
        let ttl = e.expire_ms.unwrap_or(0).to_string();
        self.run(&[
            bytes(b"RESTORE"),
            Bytes::from(e.key),
            Bytes::from(ttl),
            Bytes::from(payload),
            bytes(b"REPLACE"),
            bytes(b"ABSTTL"),
        ])?;
        self.run(&[bytes(b"SELECT"), bytes(b"0")])
    }

    fn load_function(&mut self, code: Vec<u8>) -> Result<(), String> {
        self.run(&[bytes(b"FUNCTION"), bytes(b"LOAD"), bytes(b"REPLACE"), Bytes::from(code)])
    }

    fn apply(&mut self, args: &[Bytes]) -> Result<(), String> {
        self.run(args)
    }

    fn stopping(&self) -> bool {
        self.shared.upgrade().is_none_or(|s| s.is_shutting_down())
    }
}

/// Lets the replication thread write through the dispatch (call once at
/// start, before any REPLICAOF).
pub fn install_replication(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    shared.replication.install(Arc::new(move || {
        weak.upgrade()?;
        Some(Box::new(MasterClient { shared: weak.clone(), sess: None }) as Box<dyn Applier>)
    }));
}
