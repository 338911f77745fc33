//! Command dispatch: the command table, arity and auth checks, MULTI
//! queuing, key locking, and running a command inside a transaction.

mod connection;
mod hashes;
mod keys;
mod lists;
mod server;
mod sets;
mod strings;
mod table;
mod transactions;
mod zsets;

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::config::Config;
use crate::keyspace::{now_ms, KeyLocks, Meta, Txn};
use crate::resp::Reply;
use crate::store::{Backend, Pending, StoreError};

pub use table::{lookup, Keys, Run, Spec};

/// Counters shown by INFO.
#[derive(Default)]
pub struct ServerStats {
    /// Connections accepted since start.
    pub total_connections: AtomicU64,
    /// Connections open now.
    pub connected_clients: AtomicUsize,
    /// Connections refused by `maxclients`.
    pub rejected_connections: AtomicU64,
    /// Commands executed since start.
    pub total_commands: AtomicU64,
    /// Keys removed because they expired.
    pub expired_keys: AtomicU64,
    /// Last client id handed out.
    pub next_client_id: AtomicU64,
}

/// State shared by every connection.
pub struct Shared {
    /// Where the keyspace lives.
    pub store: Arc<dyn Backend>,
    /// Per-key locks.
    pub locks: KeyLocks,
    /// The configuration.
    pub config: Config,
    /// Top-level keys (DBSIZE).
    pub keys: AtomicI64,
    /// Keys with an expiry.
    pub expires: AtomicI64,
    /// INFO counters.
    pub stats: ServerStats,
    /// Start time (uptime).
    pub started: Instant,
    /// Set to true to stop the server (SHUTDOWN, signals).
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// Every write waits for durability (memory store with `appendfsync always`).
    pub store_always_durable: bool,
    /// Connections executing requests right now (shutdown waits for them).
    pub busy: AtomicUsize,
}

impl Shared {
    /// Builds the shared state and counts the keys already stored.
    pub fn new(store: Arc<dyn Backend>, config: Config) -> Result<Shared, StoreError> {
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let store_always_durable = config.appendfsync == Some(crate::store::aof::FsyncPolicy::Always);
        let shared = Shared {
            store,
            locks: KeyLocks::default(),
            config,
            keys: AtomicI64::new(0),
            expires: AtomicI64::new(0),
            stats: ServerStats::default(),
            started: Instant::now(),
            shutdown,
            store_always_durable,
            busy: AtomicUsize::new(0),
        };
        shared.check_format()?;
        shared.count_keys()?;
        Ok(shared)
    }

    fn check_format(&self) -> Result<(), StoreError> {
        use crate::keyspace::{VERSION, VERSION_KEY};
        match self.store.get(VERSION_KEY)? {
            Some(v) if v == VERSION => Ok(()),
            Some(v) => Err(StoreError(format!(
                "data directory holds server keyspace format {:?}, this server reads {:?}",
                String::from_utf8_lossy(&v),
                String::from_utf8_lossy(VERSION)
            ))),
            None => {
                if !self.store.scan(&[], None, 1)?.is_empty() {
                    return Err(StoreError("data directory holds data that is not a strata-server keyspace".into()));
                }
                let p = self.store.write(vec![(VERSION_KEY.to_vec(), Some(VERSION.to_vec()))], true)?;
                self.store.wait_durable(p)
            }
        }
    }

    fn count_keys(&self) -> Result<(), StoreError> {
        let (mut keys, mut expires) = (0i64, 0i64);
        let mut cursor = b"m".to_vec();
        loop {
            let chunk = self.store.scan(&cursor, Some(b"n"), 4096)?;
            for (_, v) in &chunk {
                keys += 1;
                if Meta::decode(v).is_some_and(|m| m.expire_ms != 0) {
                    expires += 1;
                }
            }
            match chunk.last() {
                Some((k, _)) if chunk.len() == 4096 => {
                    cursor = k.clone();
                    cursor.push(0);
                }
                _ => break,
            }
        }
        self.keys.store(keys, Ordering::Relaxed);
        self.expires.store(expires, Ordering::Relaxed);
        Ok(())
    }

    /// Asks the server to stop.
    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Whether shutdown was requested.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Marks the caller as executing requests, unless shutdown has begun
    /// (then `None`: the connection should close without executing).
    pub fn enter_busy(&self) -> Option<BusyGuard<'_>> {
        self.busy.fetch_add(1, Ordering::SeqCst);
        if self.is_shutting_down() {
            self.busy.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(BusyGuard(self))
    }
}

/// Held while a connection executes requests and writes their replies.
pub struct BusyGuard<'a>(&'a Shared);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Per-connection state.
#[derive(Debug)]
pub struct Session {
    /// CLIENT ID.
    pub id: u64,
    /// Protocol version: 2 or 3.
    pub proto: u8,
    /// Passed AUTH (or no password is set).
    pub authed: bool,
    /// CLIENT SETNAME.
    pub name: Option<Bytes>,
    /// Commands queued since MULTI.
    pub multi: Option<Vec<Vec<Bytes>>>,
    /// A command failed to queue: EXEC must abort.
    pub multi_failed: bool,
    /// QUIT was received: close after replying.
    pub quit: bool,
    /// Close without sending this command's reply (SHUTDOWN).
    pub silent: bool,
    /// CLIENT SETINFO LIB-NAME / LIB-VER.
    pub lib: (Option<String>, Option<String>),
    /// Peer address, for CLIENT LIST/INFO.
    pub addr: String,
    /// WATCHed lock stripes and their versions at WATCH time.
    pub watched: Vec<(usize, u64)>,
}

impl Session {
    /// A new connection's state.
    pub fn new(shared: &Shared, addr: String) -> Session {
        Session {
            id: shared.stats.next_client_id.fetch_add(1, Ordering::Relaxed) + 1,
            proto: 2,
            authed: shared.config.requirepass.is_none(),
            name: None,
            multi: None,
            multi_failed: false,
            quit: false,
            silent: false,
            lib: (None, None),
            addr,
            watched: Vec::new(),
        }
    }
}

/// Why a command failed; becomes an error reply.
#[derive(Debug)]
pub enum CmdError {
    /// `-WRONGTYPE`.
    WrongType,
    /// `-ERR value is not an integer or out of range`.
    NotInt,
    /// `-ERR syntax error`.
    Syntax,
    /// A storage failure.
    Store(StoreError),
    /// Any other error text (prefix included).
    Msg(String),
}

impl From<StoreError> for CmdError {
    fn from(e: StoreError) -> Self {
        CmdError::Store(e)
    }
}

impl CmdError {
    /// The error reply.
    pub fn into_reply(self) -> Reply {
        match self {
            CmdError::WrongType => Reply::err("WRONGTYPE Operation against a key holding the wrong kind of value"),
            CmdError::NotInt => Reply::err("ERR value is not an integer or out of range"),
            CmdError::Syntax => Reply::err("ERR syntax error"),
            CmdError::Store(e) => Reply::err(format!("ERR {e}")),
            CmdError::Msg(s) => Reply::err(s),
        }
    }
}

/// Result of a data command.
pub type CmdResult = Result<Reply, CmdError>;

/// What a data command works with.
pub struct Ctx<'a> {
    /// The transaction all reads and writes go through.
    pub txn: Txn<'a>,
    /// Shared server state.
    pub shared: &'a Shared,
    /// The client's protocol version.
    pub proto: u8,
}

/// `-ERR wrong number of arguments for 'x' command`.
pub fn wrong_args(name: &str) -> Reply {
    Reply::err(format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase()))
}

fn unknown_command(args: &[Bytes]) -> Reply {
    let name = args.first().map(|a| String::from_utf8_lossy(a).into_owned()).unwrap_or_default();
    let mut rest = String::new();
    for a in args.iter().skip(1) {
        if rest.len() >= 128 {
            break;
        }
        let s = String::from_utf8_lossy(a);
        let room = 128 - rest.len();
        let cut: String = s.chars().take(room).collect();
        rest.push_str(&format!("'{cut}' "));
    }
    let name: String = name.chars().take(128).collect();
    Reply::err(format!("ERR unknown command '{name}', with args beginning with: {rest}"))
}

/// Checks the command name and arity. `Err` carries the error reply.
fn validate(args: &[Bytes]) -> Result<&'static Spec, Reply> {
    let Some(first) = args.first() else { return Err(unknown_command(args)) };
    let Some(spec) = lookup(first) else { return Err(unknown_command(args)) };
    let n = args.len() as i64;
    let ok = if spec.arity >= 0 { n == i64::from(spec.arity) } else { n >= -i64::from(spec.arity) };
    if !ok {
        return Err(wrong_args(spec.name));
    }
    Ok(spec)
}

/// Runs one request and returns its reply (`None`: no reply, for an
/// empty request).
pub fn execute(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Option<Reply> {
    if args.is_empty() {
        return None;
    }
    shared.stats.total_commands.fetch_add(1, Ordering::Relaxed);
    let spec = match validate(args) {
        Ok(s) => s,
        Err(e) => {
            if sess.multi.is_some() {
                sess.multi_failed = true;
            }
            return Some(e);
        }
    };
    if !sess.authed && !matches!(spec.name, "auth" | "hello" | "quit") {
        return Some(Reply::err("NOAUTH Authentication required."));
    }
    if let Some(queue) = sess.multi.as_mut() {
        if !matches!(spec.name, "exec" | "discard" | "multi" | "watch" | "unwatch" | "quit" | "reset") {
            queue.push(args.to_vec());
            return Some(Reply::Simple("QUEUED"));
        }
    }
    Some(match spec.run {
        Run::Session(f) => f(shared, sess, args),
        Run::Data(f) => run_data(shared, sess.proto, spec, f, args),
    })
}

/// Whether `args` can join a group of keyspace commands run in one
/// transaction (see [`execute_batch`]): a valid, permitted data command
/// outside MULTI that does not lock the whole keyspace.
fn groupable(sess: &Session, args: &[Bytes]) -> Option<(&'static Spec, table::DataFn)> {
    if sess.multi.is_some() || !sess.authed {
        return None;
    }
    let spec = validate(args).ok()?;
    match spec.run {
        Run::Data(f) if spec.keys != Keys::Global => Some((spec, f)),
        _ => None,
    }
}

/// Most commands of one pipeline that share a transaction.
const MAX_GROUP: usize = 64;

/// Runs a pipeline of requests in order, appending the encoded replies to
/// `out`. Consecutive keyspace commands run as one group: under the locks
/// of all their keys, in one transaction, committed as one engine batch
/// (fewer, larger writes; each command still sees the ones before it).
/// Returns false when the connection must close after `out` is written.
pub fn execute_batch(shared: &Shared, sess: &mut Session, reqs: Vec<Vec<Bytes>>, out: &mut Vec<u8>) -> bool {
    let mut group: Vec<(&'static Spec, table::DataFn, Vec<Bytes>)> = Vec::new();
    let mut reqs = reqs.into_iter().peekable();
    while let Some(args) = reqs.next() {
        if let Some((spec, f)) = groupable(sess, &args) {
            group.push((spec, f, args));
            let next_joins = reqs.peek().is_some_and(|a| groupable(sess, a).is_some());
            if !next_joins || group.len() >= MAX_GROUP {
                run_group(shared, sess.proto, std::mem::take(&mut group), out);
            }
            continue;
        }
        if let Some(reply) = execute(shared, sess, &args) {
            if sess.silent {
                return false;
            }
            reply.encode(sess.proto, out);
        }
        if sess.quit {
            return false;
        }
    }
    true
}

fn run_group(shared: &Shared, proto: u8, group: Vec<(&'static Spec, table::DataFn, Vec<Bytes>)>, out: &mut Vec<u8>) {
    shared.stats.total_commands.fetch_add(group.len() as u64, Ordering::Relaxed);
    let keys: Vec<&[u8]> = group.iter().flat_map(|(spec, _, args)| keys_of(spec, args)).collect();
    let (replies, failed, pending) = {
        let _locks = shared.locks.lock(&keys);
        let mut ctx = Ctx { txn: Txn::new(shared.store.as_ref(), now_ms()), shared, proto };
        let replies: Vec<Reply> =
            group.iter().map(|(_, f, args)| f(&mut ctx, args).unwrap_or_else(CmdError::into_reply)).collect();
        let (r, pending) = commit(ctx, Reply::Nil, &keys, false);
        (replies, r.is_error().then_some(r), pending)
    };
    let failed = failed.or_else(|| match shared.store.wait_durable(pending) {
        Ok(()) => None,
        Err(e) => Some(Reply::err(format!("ERR {e}"))),
    });
    match failed {
        // Nothing of the group was applied (or made durable): every command gets the error.
        Some(e) => replies.iter().for_each(|_| e.encode(proto, out)),
        None => replies.iter().for_each(|r| r.encode(proto, out)),
    }
}

/// The user keys a command touches, for locking.
pub(crate) fn keys_of<'a>(spec: &Spec, args: &'a [Bytes]) -> Vec<&'a [u8]> {
    let rest = args.get(1..).unwrap_or_default();
    match spec.keys {
        Keys::None | Keys::Global => Vec::new(),
        Keys::First => rest.iter().take(1).map(|b| b.as_ref()).collect(),
        Keys::All => rest.iter().map(|b| b.as_ref()).collect(),
        Keys::Pairs => rest.iter().step_by(2).map(|b| b.as_ref()).collect(),
    }
}

fn run_data(shared: &Shared, proto: u8, spec: &Spec, f: table::DataFn, args: &[Bytes]) -> Reply {
    let keys = keys_of(spec, args);
    let (reply, pending) = {
        let _locks = if matches!(spec.keys, Keys::Global) { shared.locks.lock_all() } else { shared.locks.lock(&keys) };
        let mut ctx = Ctx { txn: Txn::new(shared.store.as_ref(), now_ms()), shared, proto };
        let reply = f(&mut ctx, args).unwrap_or_else(CmdError::into_reply);
        commit(ctx, reply, &keys, matches!(spec.keys, Keys::Global))
    };
    acknowledge(shared, reply, pending)
}

/// Waits (with the key locks released) until a committed write is durable;
/// the reply becomes an error if that fails.
pub(crate) fn acknowledge(shared: &Shared, reply: Reply, pending: Pending) -> Reply {
    match shared.store.wait_durable(pending) {
        Ok(()) => reply,
        Err(e) => Reply::err(format!("ERR {e}")),
    }
}

/// Commits a context's transaction (call with the key locks held); the
/// reply becomes an error if the write fails (nothing of it was applied).
/// The write is acknowledged only after [`acknowledge`].
pub(crate) fn commit(ctx: Ctx<'_>, reply: Reply, keys: &[&[u8]], all_keys: bool) -> (Reply, Pending) {
    let shared = ctx.shared;
    let cleared = ctx.txn.was_cleared();
    let dirty = ctx.txn.is_dirty();
    let expired = ctx.txn.expired;
    let durable = shared.config.durability_sync || shared.store_always_durable;
    match ctx.txn.commit(durable) {
        Ok((d, pending)) => {
            if cleared {
                shared.keys.store(d.keys, Ordering::Relaxed);
                shared.expires.store(d.expires, Ordering::Relaxed);
            } else {
                shared.keys.fetch_add(d.keys, Ordering::Relaxed);
                shared.expires.fetch_add(d.expires, Ordering::Relaxed);
            }
            shared.stats.expired_keys.fetch_add(expired, Ordering::Relaxed);
            if dirty {
                shared.locks.bump(keys, all_keys || cleared);
            }
            (reply, pending)
        }
        Err(e) => (Reply::err(format!("ERR {e}")), Pending::default()),
    }
}

/// Loads `key`'s meta for reading and checks its type.
pub(crate) fn read_typed(ctx: &mut Ctx<'_>, key: &[u8], kind: crate::keyspace::KeyType) -> Result<Option<Meta>, CmdError> {
    match ctx.txn.meta(key)? {
        Some(m) if m.kind != kind => Err(CmdError::WrongType),
        other => Ok(other),
    }
}

/// Loads `key`'s meta for writing (dropping it if expired) and checks its type.
pub(crate) fn write_typed(ctx: &mut Ctx<'_>, key: &[u8], kind: crate::keyspace::KeyType) -> Result<Option<Meta>, CmdError> {
    match ctx.txn.meta_for_write(key)? {
        Some(m) if m.kind != kind => Err(CmdError::WrongType),
        other => Ok(other),
    }
}

/// Parses an integer argument or fails with the standard error.
pub(crate) fn int_arg(b: &[u8]) -> Result<i64, CmdError> {
    crate::numbers::parse_i64(b).ok_or(CmdError::NotInt)
}

/// Argument `i` (the table's arity check guarantees presence; this
/// still never panics).
pub(crate) fn arg(args: &[Bytes], i: usize) -> &[u8] {
    args.get(i).map(|b| b.as_ref()).unwrap_or_default()
}

/// Case-insensitive comparison of an argument with a keyword.
pub(crate) fn is(b: &[u8], word: &str) -> bool {
    b.eq_ignore_ascii_case(word.as_bytes())
}
