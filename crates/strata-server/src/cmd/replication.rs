//! REPLICAOF / SLAVEOF, ROLE, REPLCONF, PSYNC / SYNC, WAIT, and the
//! "master client" through which the replication thread
//! ([`crate::replication`]) writes: a session that may write on a
//! read-only replica, whose replies are dropped and whose writes are not
//! recorded (the primary's stream is proxied instead). Full syncs' images
//! are taken here ([`take_image`]), under every key lock.

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
        } else if is(opt, "capa") {
            sess.repl_capa_eof |= is(val, "eof");
            sess.repl_capa_psync2 |= is(val, "psync2");
        } else if is(opt, "ack") || is(opt, "getack") {
            // No reply to these, as in Redis.
            sess.reply_skip = 1;
            return Reply::ok();
        }
        i += 2;
    }
    Reply::ok()
}

/// PSYNC replid offset, SYNC: a partial resync (`+CONTINUE [replid]`)
/// when the id is ours, or our previous one with `offset` at most
/// `second_repl_offset`, and the backlog holds the stream from `offset`
/// (the first byte the replica lacks, counted from 1, as Redis sends it);
/// else a full one (`+FULLRESYNC replid offset`, then the RDB image), sent
/// by the replica's thread. The connection then goes to that thread
/// ([`crate::replication::primary`]). A replica whose own link is down
/// refuses, as Redis does.
pub(crate) fn psync(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    use crate::replication::primary::{Handover, Resync};
    if sess.tls {
        return Reply::err("ERR replication over TLS is not supported yet");
    }
    if sess.master {
        return Reply::err("ERR Command is not valid when client is a replica.");
    }
    let st = &shared.replication;
    if !st.can_serve_sync() {
        return Reply::err("NOMASTERLINK Can't SYNC while not connected with my master");
    }
    let sync = is(arg(args, 0), "sync");
    // Redis asks for the first byte it lacks, counting from 1; an offset
    // that is no number is refused before anything starts, as there.
    let asked = crate::numbers::parse_i64(arg(args, 2));
    if !sync && asked.is_none() {
        return Reply::err("ERR value is not an integer or out of range");
    }
    shared.repl_stream.start(st.settings.backlog_size() as usize);
    let asked_id = arg(args, 1);
    let (id, id2, second) = st.ids();
    let known = asked_id == id.as_bytes() || (asked_id == id2.as_bytes() && asked.is_some_and(|o| o <= second));
    let partial = match asked.and_then(|o| u64::try_from(o).ok()?.checked_sub(1)) {
        Some(from) if !sync && known => {
            use crate::replication::primary::Stream;
            shared.repl_stream.attach(from, st.settings.replica_limit())
        }
        _ => None,
    };
    let resync = match partial {
        Some(feed) => {
            st.count_sync(false, true, false);
            let line = if sess.repl_capa_psync2 { format!("+CONTINUE {id}\r\n") } else { "+CONTINUE\r\n".into() };
            Resync::Partial { preamble: line.into_bytes(), feed }
        }
        None => {
            st.count_sync(true, false, !sync && asked_id != b"?");
            Resync::Full { psync: !sync, eof: sess.repl_capa_eof }
        }
    };
    sess.handover = Some(Box::new(Handover {
        resync,
        stream: shared.repl_stream.clone(),
        dir: shared.config.dir.clone(),
        listening_port: sess.repl_port,
        redis_ver: super::connection::REDIS_VERSION,
    }));
    // The thread sends the reply (SYNC has none).
    sess.reply_skip = 1;
    Reply::ok()
}

/// A full sync's image: the views of every database, the stream offset
/// they match and the replica's spool attached there, taken under every
/// key lock (no write commits between them) and the replication thread's
/// apply lock (on a replica, no batch of the primary's stream is half
/// applied and proxied).
pub fn take_image(
    shared: &Shared,
    limit: crate::replication::settings::BufferLimit,
) -> Result<crate::replication::primary::Image, String> {
    use crate::replication::primary::Stream;
    let _applying = shared.replication.apply_lock.lock();
    let _all = shared.locks.lock_all();
    shared.repl_stream.reselect();
    let views = shared.store.snapshot_databases(shared.dbs.len()).map_err(|e| format!("taking the image: {e}"))?;
    let offset = shared.repl_stream.offset();
    let feed = shared.repl_stream.attach(offset, limit).ok_or("the stream moved while the image was taken")?;
    Ok(crate::replication::primary::Image { views, offset, feed, replid: shared.replication.replid() })
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
    /// The master session (made on first use).
    fn session<'s>(sess: &'s mut Option<Session>, shared: &Shared) -> &'s mut Session {
        sess.get_or_insert_with(|| {
            let mut s = Session::new(shared, "master".into());
            s.master = true;
            s.authed = true;
            s
        })
    }

    /// Runs `args` in the master session; an error reply becomes `Err`.
    fn run(&mut self, args: &[Bytes]) -> Result<(), String> {
        let shared = self.shared.upgrade().ok_or("the server is gone")?;
        let sess = Self::session(&mut self.sess, &shared);
        match execute(&shared, sess, args) {
            Some(Reply::Error(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

/// The name of a command, for an error line.
fn name_of(args: &[Bytes]) -> String {
    String::from_utf8_lossy(args.first().map(|a| a.as_ref()).unwrap_or_default()).into_owned()
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

    fn apply_batch(&mut self, cmds: Vec<Vec<Bytes>>) -> Vec<(String, String)> {
        let Some(shared) = self.shared.upgrade() else { return vec![(String::new(), "the server is gone".into())] };
        let sess = Self::session(&mut self.sess, &shared);
        let mut errors = Vec::new();
        let mut group: Vec<(u8, super::Grouped)> = Vec::new();
        // A group is one engine batch (the primary's pipeline of writes is
        // applied as a client's would be): far fewer commits than one per
        // command, which is what a replica's apply rate is bound by.
        let flush = |group: &mut Vec<(u8, super::Grouped)>, db: usize, errors: &mut Vec<(String, String)>| {
            let replies = super::run_group_as(&shared, db, group, true);
            for (r, (_, (_, _, _, args))) in replies.into_iter().zip(group.iter()) {
                if let Reply::Error(e) = r {
                    errors.push((name_of(args), e));
                }
            }
            group.clear();
        };
        for args in cmds {
            if let Some((id, spec, f)) = super::groupable(&shared, sess, &args) {
                group.push((sess.proto, (id, spec, f, args)));
                if group.len() >= super::MAX_GROUP {
                    flush(&mut group, sess.db, &mut errors);
                }
                continue;
            }
            if !group.is_empty() {
                flush(&mut group, sess.db, &mut errors);
            }
            if let Some(Reply::Error(e)) = execute(&shared, sess, &args) {
                errors.push((name_of(&args), e));
            }
        }
        if !group.is_empty() {
            flush(&mut group, sess.db, &mut errors);
        }
        errors
    }

    fn stopping(&self) -> bool {
        self.shared.upgrade().is_none_or(|s| s.is_shutting_down())
    }

    fn is_empty(&mut self) -> bool {
        self.shared
            .upgrade()
            .is_none_or(|s| s.dbs.iter().all(|d| d.keys.load(std::sync::atomic::Ordering::Relaxed) <= 0))
    }

    fn discard(&mut self) {
        if self.sess.as_ref().is_some_and(|s| s.multi.is_some()) {
            let _ = self.run(&[bytes(b"DISCARD")]);
        }
    }
}

/// Lets the replication thread write through the dispatch (call once at
/// start, before any REPLICAOF).
pub fn install_replication(shared: &Arc<Shared>) {
    for (name, value) in &shared.config.repl_settings {
        // Checked when the file was read.
        let _ = shared.replication.settings.set(name, value);
    }
    shared.replication.set_spool_dir(shared.config.dir.clone());
    crate::replication::spawn_cron(&shared.replication);
    let weak = Arc::downgrade(shared);
    shared.replication.install_snapshotter(Arc::new(move |limit| {
        let shared = weak.upgrade().ok_or("the server is gone")?;
        take_image(&shared, limit)
    }));
    let weak = Arc::downgrade(shared);
    shared.replication.install(Arc::new(move || {
        weak.upgrade()?;
        Some(Box::new(MasterClient { shared: weak.clone(), sess: None }) as Box<dyn Applier>)
    }));
}
