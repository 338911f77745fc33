//! The replication stream: what each committed write sends to replicas,
//! as Redis 7.0 propagates it — its effects, not its computation. A write
//! goes as the client sent it unless the table names a rewrite
//! (`"propagate"` in `commands/*.json`: relative expiries become absolute,
//! blocking pops their non-blocking form) or its handler states what it
//! did (`Ctx::propagate_as`: SPOP's members, INCRBYFLOAT's result);
//! scripts send the writes they made, and a commit of several commands
//! (MULTI/EXEC, a script, a pass group) goes wrapped in MULTI/EXEC, with a
//! SELECT wherever the database changes. Replaying the stream on an empty
//! server rebuilds the same keyspace (tested below).
//!
//! The stream is kept in a backlog of `repl-backlog-size` bytes with its
//! replication offset (the bytes ever appended), from which a replica
//! that reconnects continues (PSYNC); each attached replica also has a
//! spool of its own ([`Feed`]) that every append goes to, so a slow or
//! syncing replica is not limited by the backlog's size. Nothing is
//! recorded until replication is switched on (the first replica, or a
//! full sync from a primary).
//!
//! While this server follows a primary the stream is the primary's, byte
//! for byte at the primary's offsets (Redis's
//! `replicationFeedStreamFromMasterStream`): the replication thread
//! appends what it applied ([`ReplStream::proxy`]) and local commits
//! record nothing, so sub-replicas see the same offsets as the primary's
//! replicas and can continue after a failover.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use super::{arg, is, Ctx, Spec};
use crate::replication::feed::Feed;

/// A command as sent to replicas.
pub type Command = Vec<Bytes>;

/// Rewrites a write's arguments (at the command's time `now_ms`) into the
/// commands a replica applies.
pub type PropagateFn = fn(&[Bytes], u64) -> Vec<Command>;

/// The replication stream of a server: the backlog and its offset.
#[derive(Default)]
pub struct ReplStream {
    /// Whether a backlog is kept (a replica attached, or a sync done).
    recording: AtomicBool,
    /// Whether the stream is a primary's, proxied (local commits are not
    /// recorded).
    following: AtomicBool,
    inner: Mutex<Backlog>,
}

#[derive(Default)]
struct Backlog {
    /// The bytes of the stream still held, ending at `offset`.
    bytes: VecDeque<u8>,
    /// Most bytes held.
    size: usize,
    /// Bytes ever appended (Redis's `master_repl_offset`).
    offset: u64,
    /// The database the stream last selected.
    db: Option<usize>,
    /// When bytes were last appended.
    last: Option<Instant>,
    /// The spools of the attached replicas.
    feeds: Vec<Arc<Feed>>,
}

impl Backlog {
    /// Drops the oldest bytes beyond `size`.
    fn trim(&mut self) {
        let excess = self.bytes.len().saturating_sub(self.size);
        self.bytes.drain(..excess);
    }
}

impl ReplStream {
    /// Starts recording into a backlog of `size` bytes (Redis creates its
    /// backlog when the first replica attaches).
    pub fn start(&self, size: usize) {
        self.resize(size);
        self.recording.store(true, Ordering::Release);
    }

    /// Sets the backlog's size, keeping the newest bytes.
    pub fn resize(&self, size: usize) {
        let mut b = self.inner.lock();
        b.size = size.max(1);
        b.trim();
    }

    /// Whether local writes are being recorded (a backlog kept, and not
    /// following a primary).
    pub fn recording(&self) -> bool {
        self.recording.load(Ordering::Acquire) && !self.following.load(Ordering::Acquire)
    }

    /// The replication offset: bytes ever appended to the stream.
    pub fn offset(&self) -> u64 {
        self.inner.lock().offset
    }

    /// The stream from `from` to the current offset, if the backlog still
    /// holds all of it (a partial resync); `None` if it does not.
    pub fn since(&self, from: u64) -> Option<Vec<u8>> {
        let b = self.inner.lock();
        let held = b.bytes.len() as u64;
        let first = b.offset - held;
        if from < first || from > b.offset {
            return None;
        }
        Some(b.bytes.iter().skip((from - first) as usize).copied().collect())
    }

    /// Makes the next write select its database again: a full sync's
    /// image starts the replica in database 0 (call under every key lock,
    /// where the image is taken).
    pub(crate) fn reselect(&self) {
        self.inner.lock().db = None;
    }

    /// Appends raw bytes to the backlog and every replica's spool.
    fn append(&self, b: &mut Backlog, out: impl Into<Bytes> + AsRef<[u8]>) {
        let bytes = out.as_ref();
        if bytes.is_empty() {
            return;
        }
        b.offset += bytes.len() as u64;
        b.bytes.extend(bytes);
        b.trim();
        b.last = Some(Instant::now());
        if !b.feeds.is_empty() {
            // An owned buffer becomes the shared chunk without a copy.
            let chunk: Bytes = out.into();
            for f in &b.feeds {
                f.push(chunk.clone());
            }
        }
    }

    /// Appends the writes of one commit: `(database, command)` in order.
    /// Nothing while following a primary (its stream is proxied instead).
    pub(crate) fn feed(&self, cmds: Vec<(usize, Command)>) {
        if cmds.is_empty() || self.following.load(Ordering::Acquire) {
            return;
        }
        let mut out = Vec::new();
        let mut b = self.inner.lock();
        // Several commands of one commit apply on a replica as one.
        let wrap = cmds.len() > 1;
        let mut db = b.db;
        let mut select = |out: &mut Vec<u8>, at: usize| {
            if db != Some(at) {
                encode(out, &[Bytes::from_static(b"SELECT"), Bytes::from(at.to_string())]);
                db = Some(at);
            }
        };
        if let (true, Some(&(first, _))) = (wrap, cmds.first()) {
            select(&mut out, first);
            encode(&mut out, &[Bytes::from_static(b"MULTI")]);
        }
        for (at, cmd) in &cmds {
            select(&mut out, *at);
            encode(&mut out, cmd);
        }
        if wrap {
            encode(&mut out, &[Bytes::from_static(b"EXEC")]);
        }
        b.db = db;
        self.append(&mut b, out);
    }
}

impl crate::replication::primary::Stream for ReplStream {
    fn offset(&self) -> u64 {
        ReplStream::offset(self)
    }

    fn attach(&self, from: u64, limit: crate::replication::settings::BufferLimit) -> Option<Arc<Feed>> {
        let mut b = self.inner.lock();
        let held = b.bytes.len() as u64;
        let first = b.offset - held;
        if from < first || from > b.offset {
            return None;
        }
        let feed = Arc::new(Feed::new(limit));
        if from < b.offset {
            let rest: Vec<u8> = b.bytes.iter().skip((from - first) as usize).copied().collect();
            feed.push(Bytes::from(rest));
        }
        b.feeds.push(feed.clone());
        Some(feed)
    }

    fn detach(&self, feed: &Arc<Feed>) {
        self.inner.lock().feeds.retain(|f| !Arc::ptr_eq(f, feed));
    }

    fn ping_if_idle(&self, idle: Duration) {
        // A replica's sub-replicas get the primary's PINGs.
        if self.following.load(Ordering::Acquire) {
            return;
        }
        let mut b = self.inner.lock();
        match b.last {
            Some(t) if t.elapsed() < idle => {}
            None => b.last = Some(Instant::now()),
            Some(_) => {
                let mut out = Vec::new();
                encode(&mut out, &[Bytes::from_static(b"PING")]);
                self.append(&mut b, out);
            }
        }
    }

    fn getack(&self) {
        if self.following.load(Ordering::Acquire) {
            return;
        }
        let mut out = Vec::new();
        encode(&mut out, &[Bytes::from_static(b"REPLCONF"), Bytes::from_static(b"GETACK"), Bytes::from_static(b"*")]);
        let mut b = self.inner.lock();
        self.append(&mut b, out);
    }

    fn backlog(&self) -> (bool, u64, u64, u64) {
        let b = self.inner.lock();
        let held = b.bytes.len() as u64;
        // Before the first replica: Redis's default size.
        let size = if b.size == 0 { 1 << 20 } else { b.size as u64 };
        let active = self.recording.load(Ordering::Acquire);
        (active, size, b.offset - held + 1, held)
    }

    fn start(&self, size: u64) {
        ReplStream::start(self, usize::try_from(size).unwrap_or(usize::MAX));
    }

    fn resize(&self, size: u64) {
        ReplStream::resize(self, usize::try_from(size).unwrap_or(usize::MAX));
    }

    fn set_limit(&self, limit: crate::replication::settings::BufferLimit) {
        for f in &self.inner.lock().feeds {
            f.set_limit(limit);
        }
    }

    fn free(&self) {
        self.recording.store(false, Ordering::Release);
        let mut b = self.inner.lock();
        b.bytes = VecDeque::new();
        b.db = None;
    }

    fn reset(&self, offset: u64) {
        let mut b = self.inner.lock();
        b.bytes.clear();
        b.offset = offset;
        b.db = None;
        // The sub-replicas' spools belong to the old history: they are
        // dropped by the caller (State::disconnect_replicas).
        b.feeds.clear();
    }

    fn set_following(&self, on: bool) {
        let mut b = self.inner.lock();
        // A new primary starts from an unknown database (Redis's
        // `slaveseldb = -1`).
        b.db = None;
        self.following.store(on, Ordering::Release);
    }

    fn proxy(&self, bytes: &[u8]) {
        let mut b = self.inner.lock();
        self.append(&mut b, Bytes::copy_from_slice(bytes));
    }
}

/// RESP multi-bulk encoding of one command.
fn encode(out: &mut Vec<u8>, cmd: &[Bytes]) {
    crate::resp::write_request(out, cmd);
}

/// Records what a data command sends to replicas, once it ran: nothing if
/// it wrote nothing or the stream is off; a script's own writes were
/// recorded as it made them.
pub(crate) fn record(ctx: &mut Ctx<'_>, spec: &Spec, args: &[Bytes], wrote: bool) {
    let stated = ctx.repl_override.take();
    let Some(log) = ctx.repl.as_mut() else { return };
    if !wrote || spec.has(super::flag::RUNS_SCRIPT) {
        return;
    }
    let db = ctx.db;
    let cmds = match (stated, spec.propagate) {
        (Some(cmds), _) => cmds,
        (None, Some(rewrite)) => rewrite(args, ctx.txn.now_ms),
        (None, None) => vec![args.to_vec()],
    };
    log.extend(cmds.into_iter().map(|c| (db, c)));
}

fn word(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn num(n: i64) -> Bytes {
    Bytes::from(n.to_string())
}

fn int(b: &[u8]) -> i64 {
    crate::numbers::parse_i64(b).unwrap_or(0)
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: `PEXPIREAT key ms` (a time in the
/// past deletes the key on the replica as it did here).
pub(crate) fn expire(args: &[Bytes], now: u64) -> Vec<Command> {
    let name = arg(args, 0);
    let n = int(arg(args, 2));
    let at = if is(name, "expire") {
        (now as i64).saturating_add(n.saturating_mul(1000))
    } else if is(name, "pexpire") {
        (now as i64).saturating_add(n)
    } else if is(name, "expireat") {
        n.saturating_mul(1000)
    } else {
        n
    };
    vec![vec![word("PEXPIREAT"), Bytes::copy_from_slice(arg(args, 1)), num(at)]]
}

/// SETEX key seconds value, PSETEX key ms value: `SET key value PXAT ms`.
pub(crate) fn setex(args: &[Bytes], now: u64) -> Vec<Command> {
    let n = int(arg(args, 2));
    let ms = if is(arg(args, 0), "setex") { n.saturating_mul(1000) } else { n };
    vec![vec![
        word("SET"),
        Bytes::copy_from_slice(arg(args, 1)),
        Bytes::copy_from_slice(arg(args, 3)),
        word("PXAT"),
        num((now as i64).saturating_add(ms)),
    ]]
}

/// SET with EX, PX or EXAT: the same SET with `PXAT ms`; and without
/// `GET`, which a replica has no use for (Redis 7.0 drops it too).
pub(crate) fn set(args: &[Bytes], now: u64) -> Vec<Command> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let a = arg(args, i);
        if i >= 3 && is(a, "get") {
            i += 1;
            continue;
        }
        let n = || int(arg(args, i + 1));
        let at = if i >= 3 && is(a, "ex") {
            Some((now as i64).saturating_add(n().saturating_mul(1000)))
        } else if i >= 3 && is(a, "px") {
            Some((now as i64).saturating_add(n()))
        } else if i >= 3 && is(a, "exat") {
            Some(n().saturating_mul(1000))
        } else {
            None
        };
        match (at, args.get(i)) {
            (Some(ms), _) => {
                out.extend([word("PXAT"), num(ms)]);
                i += 2;
            }
            (None, Some(b)) => {
                out.push(b.clone());
                i += 1;
            }
            (None, None) => break,
        }
    }
    vec![out]
}

/// GETEX: `PEXPIREAT key ms` for EX/PX/EXAT/PXAT, `PERSIST key`.
pub(crate) fn getex(args: &[Bytes], now: u64) -> Vec<Command> {
    let key = Bytes::copy_from_slice(arg(args, 1));
    let opt = arg(args, 2);
    if is(opt, "persist") {
        return vec![vec![word("PERSIST"), key]];
    }
    let n = int(arg(args, 3));
    let at = if is(opt, "ex") {
        (now as i64).saturating_add(n.saturating_mul(1000))
    } else if is(opt, "px") {
        (now as i64).saturating_add(n)
    } else if is(opt, "exat") {
        n.saturating_mul(1000)
    } else {
        n
    };
    vec![vec![word("PEXPIREAT"), key, num(at)]]
}

/// GETSET key value: `SET key value`, as Redis 7.0 propagates it.
pub(crate) fn getset(args: &[Bytes], _: u64) -> Vec<Command> {
    vec![vec![word("SET"), Bytes::copy_from_slice(arg(args, 1)), Bytes::copy_from_slice(arg(args, 2))]]
}

/// GETDEL: `DEL key`.
pub(crate) fn getdel(args: &[Bytes], _: u64) -> Vec<Command> {
    vec![vec![word("DEL"), Bytes::copy_from_slice(arg(args, 1))]]
}

/// RESTORE with a relative TTL: the same with the absolute time and
/// ABSTTL.
pub(crate) fn restore(args: &[Bytes], now: u64) -> Vec<Command> {
    let abs = args.iter().skip(4).any(|a| is(a, "absttl"));
    let ttl = int(arg(args, 2));
    let mut out = args.to_vec();
    if !abs && ttl > 0 {
        if let Some(t) = out.get_mut(2) {
            *t = num((now as i64).saturating_add(ttl));
        }
        out.push(word("ABSTTL"));
    }
    vec![out]
}

/// BLPOP/BRPOP `k1 .. kn timeout`: `LMPOP n k1 .. kn LEFT|RIGHT` (pops
/// from the first list that has an element, as the blocking pop did).
pub(crate) fn bpop(args: &[Bytes], _: u64) -> Vec<Command> {
    let keys = args.get(1..args.len().saturating_sub(1)).unwrap_or_default();
    let side = if is(arg(args, 0), "blpop") { word("LEFT") } else { word("RIGHT") };
    let mut c = vec![word("LMPOP"), num(keys.len() as i64)];
    c.extend(keys.iter().cloned());
    c.push(side);
    vec![c]
}

/// BZPOPMIN/BZPOPMAX `k1 .. kn timeout`: `ZMPOP n k1 .. kn MIN|MAX`.
pub(crate) fn bzpop(args: &[Bytes], _: u64) -> Vec<Command> {
    let keys = args.get(1..args.len().saturating_sub(1)).unwrap_or_default();
    let side = if is(arg(args, 0), "bzpopmin") { word("MIN") } else { word("MAX") };
    let mut c = vec![word("ZMPOP"), num(keys.len() as i64)];
    c.extend(keys.iter().cloned());
    c.push(side);
    vec![c]
}

/// BLMPOP/BZMPOP `timeout numkeys ...`: LMPOP/ZMPOP `numkeys ...`.
pub(crate) fn bmpop(args: &[Bytes], _: u64) -> Vec<Command> {
    let name = if is(arg(args, 0), "blmpop") { word("LMPOP") } else { word("ZMPOP") };
    let mut c = vec![name];
    c.extend(args.iter().skip(2).cloned());
    vec![c]
}

/// BLMOVE src dst from to timeout: `LMOVE src dst from to`; BRPOPLPUSH
/// src dst timeout: `RPOPLPUSH src dst`.
pub(crate) fn bmove(args: &[Bytes], _: u64) -> Vec<Command> {
    if is(arg(args, 0), "blmove") {
        let mut c = vec![word("LMOVE")];
        c.extend(args.iter().skip(1).take(4).cloned());
        vec![c]
    } else {
        let mut c = vec![word("RPOPLPUSH")];
        c.extend(args.iter().skip(1).take(2).cloned());
        vec![c]
    }
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use rand::{Rng, SeedableRng};

    use crate::cmd::tests::server;
    use crate::cmd::{execute, execute_batch, Session, Shared};
    use crate::resp::{parse_request, Limits, Reply};

    fn cmd(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    /// A random write or read over a few keys of every type, with the
    /// options whose propagation is rewritten.
    fn random_command(rng: &mut rand::rngs::StdRng) -> Vec<String> {
        let k = |rng: &mut rand::rngs::StdRng| format!("k{}", rng.gen_range(0..6));
        let n = |rng: &mut rand::rngs::StdRng| rng.gen_range(0..5).to_string();
        let hour = |rng: &mut rand::rngs::StdRng| (3600 + rng.gen_range(0..100)).to_string();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let (a, b, v) = (k(rng), k(rng), n(rng));
        match rng.gen_range(0..36) {
            0 => s(&["SET", &a, &v]),
            1 => s(&["SET", &a, &v, "EX", &hour(rng), "GET"]),
            2 => s(&["SET", &a, &v, "PX", &(hour(rng) + "000"), "NX"]),
            3 => s(&["SETEX", &a, &hour(rng), &v]),
            4 => s(&["INCRBYFLOAT", &a, "0.1"]),
            5 => s(&["APPEND", &a, &v]),
            6 => s(&["DEL", &a, &b]),
            7 => s(&["EXPIRE", &a, &hour(rng)]),
            8 => s(&["PEXPIRE", &a, "-1"]),
            9 => s(&["PERSIST", &a]),
            10 => s(&["GETDEL", &a]),
            11 => s(&["GETEX", &a, "EX", &hour(rng)]),
            12 => s(&["HSET", &a, &v, &v]),
            13 => s(&["HINCRBYFLOAT", &a, &v, "1.5"]),
            14 => s(&["HDEL", &a, &v]),
            15 => s(&["LPUSH", &a, &v, &v]),
            16 => s(&["RPOP", &a]),
            17 => s(&["LMPOP", "2", &a, &b, "LEFT", "COUNT", "2"]),
            18 => s(&["SADD", &a, &v, "x", "y"]),
            19 => s(&["SPOP", &a]),
            20 => s(&["SPOP", &a, "2"]),
            21 => s(&["SMOVE", &a, &b, &v]),
            22 => s(&["ZADD", &a, &v, &v]),
            23 => s(&["ZINCRBY", &a, "2", &v]),
            24 => s(&["ZPOPMIN", &a]),
            25 => s(&["ZUNIONSTORE", &b, "2", &a, &b]),
            26 => s(&["SINTERSTORE", &b, &a]),
            27 => s(&["RENAME", &a, &b]),
            28 => s(&["COPY", &a, &b, "DB", "1", "REPLACE"]),
            29 => s(&["MOVE", &a, "2"]),
            30 => s(&["SELECT", &rng.gen_range(0..3).to_string()]),
            31 => s(&["EVAL", "redis.call('incr', KEYS[1]) redis.call('expire', KEYS[1], 7200) return 1", "1", &a]),
            32 => s(&["SORT", &a, "ALPHA", "STORE", &b]),
            33 => s(&["GETSET", &a, &v]),
            34 => s(&["SET", &a, &v, "GET", "KEEPTTL"]),
            _ => s(&["RPUSH", &a, &v]),
        }
    }

    /// Every key of databases 0..3 with its DUMP and absolute expiry.
    fn contents(shared: &Shared) -> Vec<(usize, Vec<u8>, Reply, Reply)> {
        let mut sess = Session::new(shared, "check".into());
        let mut out = Vec::new();
        for db in 0..3 {
            execute(shared, &mut sess, &cmd(&["SELECT", &db.to_string()]));
            let Some(Reply::Array(keys)) = execute(shared, &mut sess, &cmd(&["KEYS", "*"])) else { panic!("keys") };
            for k in keys {
                let Reply::Bulk(k) = k else { panic!("key") };
                let dump = execute(shared, &mut sess, &[Bytes::from_static(b"DUMP"), k.clone()]).unwrap();
                let at = execute(shared, &mut sess, &[Bytes::from_static(b"PEXPIRETIME"), k.clone()]).unwrap();
                out.push((db, k.to_vec(), dump, at));
            }
        }
        out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out
    }

    /// Random writes through the dispatcher (one by one, in pipelined
    /// groups, in MULTI/EXEC and scripts); the stream they left, replayed
    /// on an empty server as a replica applies it, rebuilds the same
    /// keyspace: values, types and absolute expiries, in every database.
    #[test]
    fn replaying_the_stream_rebuilds_the_keyspace() {
        for seed in 0..4u64 {
            let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let (a, b) = (server(da.path()), server(db.path()));
            a.repl_stream.start(64 << 20);
            let mut sess = Session::new(&a, "client".into());
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            for _ in 0..300 {
                match rng.gen_range(0..10) {
                    0 => {
                        execute(&a, &mut sess, &cmd(&["MULTI"]));
                        for _ in 0..rng.gen_range(1..5) {
                            let c = random_command(&mut rng);
                            execute(&a, &mut sess, &cmd(&c.iter().map(String::as_str).collect::<Vec<_>>()));
                        }
                        execute(&a, &mut sess, &cmd(&["EXEC"]));
                    }
                    1 => {
                        let reqs: Vec<Vec<Bytes>> = (0..rng.gen_range(2..8))
                            .map(|_| cmd(&random_command(&mut rng).iter().map(String::as_str).collect::<Vec<_>>()))
                            .collect();
                        execute_batch(&a, &mut sess, reqs, &mut Vec::new());
                    }
                    _ => {
                        let c = random_command(&mut rng);
                        execute(&a, &mut sess, &cmd(&c.iter().map(String::as_str).collect::<Vec<_>>()));
                    }
                }
            }
            let mut stream = BytesMut::from(&a.repl_stream.since(0).unwrap()[..]);
            assert_eq!(stream.len() as u64, a.repl_stream.offset());
            let mut replica = Session::new(&b, "master".into());
            while let Some(c) = parse_request(&mut stream, &Limits::default()).unwrap() {
                if let Some(Reply::Error(e)) = execute(&b, &mut replica, &c) {
                    panic!("seed {seed}: the replica refused {c:?}: {e}");
                }
            }
            assert!(stream.is_empty());
            let (want, got) = (contents(&a), contents(&b));
            assert!(!want.is_empty());
            assert_eq!(want, got, "seed {seed}");
        }
    }

    /// Writes whose result a replica could not compute the same way send
    /// what they did.
    #[test]
    fn random_and_float_writes_send_their_result() {
        let d = tempfile::tempdir().unwrap();
        let a = server(d.path());
        let mut sess = Session::new(&a, "client".into());
        execute(&a, &mut sess, &cmd(&["SADD", "s", "a", "b", "c"]));
        execute(&a, &mut sess, &cmd(&["SET", "f", "1.5"]));
        a.repl_stream.start(1 << 20);
        let Some(Reply::Bulk(m)) = execute(&a, &mut sess, &cmd(&["SPOP", "s"])) else { panic!("spop") };
        execute(&a, &mut sess, &cmd(&["INCRBYFLOAT", "f", "0.25"]));
        execute(&a, &mut sess, &cmd(&["BLPOP", "nosuch", "s2", "1"]));
        execute(&a, &mut sess, &cmd(&["SETEX", "t", "100", "v"]));
        execute(&a, &mut sess, &cmd(&["GETSET", "t", "w"]));
        execute(&a, &mut sess, &cmd(&["SET", "t", "x", "GET"]));
        let mut stream = BytesMut::from(&a.repl_stream.since(0).unwrap()[..]);
        let mut got = Vec::new();
        while let Some(c) = parse_request(&mut stream, &Limits::default()).unwrap() {
            got.push(c.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>());
        }
        let m = String::from_utf8_lossy(&m).into_owned();
        assert_eq!(got[0], ["SELECT", "0"]);
        assert_eq!(got[1], ["SREM", "s", m.as_str()]);
        assert_eq!(got[2], ["SET", "f", "1.75", "KEEPTTL"]);
        // BLPOP found nothing and wrote nothing: no command.
        assert_eq!(got[3][..4], ["SET", "t", "v", "PXAT"]);
        // GETSET and SET ... GET go as plain SETs (Redis 7.0).
        assert_eq!(got[4], ["SET", "t", "w"]);
        assert_eq!(got[5], ["SET", "t", "x"]);
        assert_eq!(got.len(), 6);
    }

    #[test]
    fn the_backlog_keeps_its_size_and_tells_what_it_lost() {
        let s = super::ReplStream::default();
        s.start(64);
        for i in 0..10 {
            s.feed(vec![(0, cmd(&["SET", "k", &i.to_string()]))]);
        }
        let off = s.offset();
        assert!(off > 64);
        assert!(s.since(0).is_none(), "the start was dropped");
        assert_eq!(s.since(off).as_deref(), Some(&b""[..]));
        assert!(s.since(off - 20).is_some_and(|b| b.len() == 20));
        assert!(s.since(off + 1).is_none());
    }

    /// What a replica's thread reads: a PING only after the stream was
    /// idle, counted in the offset; its spool wakes it when the stream
    /// grows and holds what the backlog no longer does.
    #[test]
    fn replicas_see_pings_and_are_woken() {
        use crate::replication::primary::Stream;
        use std::time::Duration;
        let s = std::sync::Arc::new(super::ReplStream::default());
        s.start(1 << 20);
        s.ping_if_idle(Duration::ZERO);
        assert_eq!(Stream::offset(&*s), 0, "the first look only starts the clock");
        s.ping_if_idle(Duration::ZERO);
        assert_eq!(s.since(0).as_deref(), Some(&b"*1\r\n$4\r\nPING\r\n"[..]));
        s.ping_if_idle(Duration::from_secs(60));
        assert_eq!(Stream::offset(&*s), 14);
        let feed = s.attach(4, (0, 0, 0)).unwrap();
        assert_eq!(feed.take(Duration::ZERO).unwrap().concat(), b"$4\r\nPING\r\n");
        let t = {
            let s = s.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                s.feed(vec![(0, cmd(&["SET", "k", "v"]))]);
            })
        };
        let start = std::time::Instant::now();
        let got = feed.take(Duration::from_secs(10)).unwrap().concat();
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        assert_eq!(got.len() as u64, Stream::offset(&*s) - 14);
        let (active, size, first, held) = s.backlog();
        assert!(active && size == 1 << 20 && first == 1 && held == Stream::offset(&*s));
        // A spool keeps what a small backlog drops.
        s.resize(16);
        let from = Stream::offset(&*s);
        for i in 0..100 {
            s.feed(vec![(0, cmd(&["SET", "k", &i.to_string()]))]);
        }
        assert!(s.since(from).is_none());
        assert_eq!(feed.take(Duration::ZERO).unwrap().concat().len() as u64, Stream::offset(&*s) - from);
        s.detach(&feed);
        assert!(s.attach(0, (0, 0, 0)).is_none(), "the backlog lost the start");
    }

    /// Following a primary: local commits record nothing, the primary's
    /// bytes go in as they are at its offsets, and a promotion records
    /// again from there (with a SELECT first).
    #[test]
    fn a_replica_proxies_its_primarys_stream() {
        use crate::replication::primary::Stream;
        let s = super::ReplStream::default();
        s.start(1 << 20);
        s.set_following(true);
        s.reset(1000);
        assert!(!s.recording());
        s.feed(vec![(0, cmd(&["SET", "local", "1"]))]);
        assert_eq!(Stream::offset(&s), 1000);
        let primary = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
        s.proxy(primary);
        assert_eq!(Stream::offset(&s), 1000 + primary.len() as u64);
        assert_eq!(s.since(1000).as_deref(), Some(&primary[..]));
        s.set_following(false);
        assert!(s.recording());
        s.feed(vec![(3, cmd(&["DEL", "k"]))]);
        let tail = s.since(1000 + primary.len() as u64).unwrap();
        assert!(tail.starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"), "{:?}", String::from_utf8_lossy(&tail));
    }
}
