//! Command dispatch: the command table, arity and auth checks, MULTI
//! queuing, key locking, and running a command inside a transaction.

mod bitfield;
mod bits;
mod blocking;
mod busy;
mod cmdstats;
mod collscan;
mod connection;
mod debug;
mod dump;
mod hashes;
mod introspect;
mod keys;
mod lcs;
mod listedit;
mod lists;
mod memory;
mod notify;
mod object;
mod propagate;
mod pubsub;
mod random;
mod rename;
mod replication;
mod script;
mod server;
mod session;
mod sets;
mod setstore;
mod shared;
mod sort;
mod spec;
mod strings;
mod table;
mod transactions;
mod zalgebra;
mod zlex;
mod zmore;
mod zpop;
mod zrange;
mod zsets;

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::keyspace::{now_ms, Meta, Txn};
use crate::resp::Reply;
use crate::store::StoreError;

pub use blocking::{Unblock, Waiting};
pub use cmdstats::CommandStats;
pub use propagate::ReplStream;
pub use pubsub::{leave_all, Subscriptions};
pub use replication::install_replication;
pub use script::{
    collect as collect_script, lua_time_limit, run_all as run_scripts, script_done, ScriptHost, ScriptJob, ScriptWait,
    Scripts,
};
pub use session::{Blocked, Session};
pub use shared::{ServerStats, Shared};
pub use spec::{flag, Run, Spec};
pub use table::lookup;
pub(crate) use table::{all as commands, count as command_count, name_of as command_name, resolve};

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
    /// A blocking command found nothing to take and wrote nothing: wait up
    /// to `timeout` seconds (0: forever) and run it again; where it cannot
    /// wait (MULTI) the reply is `nil`.
    WouldBlock {
        /// Seconds to wait.
        timeout: f64,
        /// The reply when the wait ends without result.
        nil: Box<Reply>,
    },
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
            CmdError::WouldBlock { nil, .. } => *nil,
        }
    }
}

/// Result of a data command.
pub type CmdResult = Result<Reply, CmdError>;

/// What a data command works with.
pub struct Ctx<'a> {
    /// The transaction all reads and writes of the selected database go
    /// through.
    pub txn: Txn<'a>,
    /// The selected database (`txn`'s).
    pub db: usize,
    /// Transactions over other databases this context touched (SELECT in
    /// MULTI, MOVE, FLUSHALL), committed with `txn`.
    others: Vec<(usize, Txn<'a>)>,
    /// Shared server state.
    pub shared: &'a Shared,
    /// The client's protocol version.
    pub proto: u8,
    /// The command runs inside a script (SORT orders a set it would leave
    /// unsorted).
    pub in_script: bool,
    /// A blocked command run again because a key changed: keys that now
    /// hold another type are passed over (Redis wakes a blocked client
    /// only for a key of the type it waits on), not an error.
    pub retry: bool,
    /// Keyspace events of this context's writes, published at commit.
    pub(crate) events: Vec<crate::pubsub::events::KeyEvent>,
    /// What this context's writes send to replicas, by database (`None`:
    /// the replication stream is off), fed to it at commit.
    pub(crate) repl: Option<Vec<(usize, propagate::Command)>>,
    /// What the running command states it did, for the stream
    /// ([`Ctx::propagate_as`]).
    pub(crate) repl_override: Option<Vec<propagate::Command>>,
}

impl<'a> Ctx<'a> {
    /// A context over database `db` at time `now`.
    pub fn new(shared: &'a Shared, db: usize, proto: u8, now: u64) -> Ctx<'a> {
        Ctx {
            txn: Txn::new(shared.store_of(db), now),
            db,
            others: Vec::new(),
            shared,
            proto,
            retry: false,
            events: Vec::new(),
            in_script: false,
            repl: shared.repl_stream.recording().then(Vec::new),
            repl_override: None,
        }
    }

    /// States what the running write did, as commands a replica applies,
    /// where sending it as the client did would not do (SPOP's random
    /// members, INCRBYFLOAT's result).
    pub(crate) fn propagate_as(&mut self, cmds: Vec<propagate::Command>) {
        if self.repl.is_some() {
            self.repl_override = Some(cmds);
        }
    }

    /// Writes staged so far, in every database this context touched.
    pub(crate) fn ops(&self) -> u64 {
        self.txn.ops + self.others.iter().map(|(_, t)| t.ops).sum::<u64>()
    }

    /// The transaction over database `db` (the selected one's is `txn`).
    pub(crate) fn txn_of(&mut self, db: usize) -> &mut Txn<'a> {
        if db == self.db {
            return &mut self.txn;
        }
        let at = match self.others.iter().position(|(d, _)| *d == db) {
            Some(i) => i,
            None => {
                self.others.push((db, self.txn.sibling(self.shared.store_of(db))));
                self.others.len() - 1
            }
        };
        match self.others.get_mut(at) {
            Some((_, t)) => t,
            None => &mut self.txn, // not reached: `at` was just found or pushed
        }
    }

    /// Publishes keyspace event `event` of `class` for `key` of the
    /// selected database once the write commits: for a handler that
    /// chooses the key at run time (the list BLPOP popped from).
    pub(crate) fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        self.notify_in(self.db, class, event, key);
    }

    /// [`Ctx::notify`] for a key of database `db` (MOVE, COPY ... DB).
    /// Events of the selected database join the transaction's notes, so
    /// that they keep their order with the `del` of an emptied key.
    pub(crate) fn notify_in(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        if !self.shared.pubsub.wants(class) {
            return;
        }
        if db == self.db && self.txn.notes.is_some() {
            self.txn.note_class(class, event, key);
        } else {
            self.events.push(crate::pubsub::events::KeyEvent { class, event, db, key: key.to_vec() });
        }
    }

    /// Publishes an event at commit in the order of these calls, ahead of
    /// the transaction's notes (MOVE: `move_from` here, `move_to` there).
    pub(crate) fn notify_direct(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        if self.shared.pubsub.wants(class) {
            self.events.push(crate::pubsub::events::KeyEvent { class, event, db, key: key.to_vec() });
        }
    }

    /// Whether anything is staged in any database.
    pub(crate) fn is_dirty(&self) -> bool {
        self.txn.is_dirty() || self.others.iter().any(|(_, t)| t.is_dirty())
    }

    /// Makes `db` the selected database (SELECT inside MULTI).
    pub(crate) fn select(&mut self, db: usize) {
        if db == self.db {
            return;
        }
        let next = match self.others.iter().position(|(d, _)| *d == db) {
            Some(i) => self.others.swap_remove(i).1,
            None => self.txn.sibling(self.shared.store_of(db)),
        };
        let prev = std::mem::replace(&mut self.txn, next);
        self.others.push((self.db, prev));
        self.db = db;
    }
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

/// Checks the command name and arity: the command's table index and
/// spec, or the error reply (with the index of a command that exists).
fn validate(args: &[Bytes]) -> Result<(usize, &'static Spec), (Option<usize>, Reply)> {
    let Some(first) = args.first() else { return Err((None, unknown_command(args))) };
    if first.is_empty() {
        return Err((None, unknown_command(args)));
    }
    let Some((id, spec)) = table::resolve(args) else { return Err((None, unknown_command(args))) };
    if !spec.arity_ok(args.len()) {
        return Err((Some(id), wrong_args(spec.name)));
    }
    Ok((id, spec))
}

/// The error of a write sent to a read-only replica.
pub(crate) const READONLY: &str = "READONLY You can't write against a read only replica.";

/// The errors of a replication setting, as Redis's `processCommand`:
/// `-MASTERDOWN` on a replica whose link is down with
/// `replica-serve-stale-data no` (commands flagged `stale` pass), and
/// `-NOREPLICAS` for a write (or an EXEC of queued writes) on a primary
/// with fewer good replicas than `min-replicas-to-write`.
fn replication_refusal(shared: &Shared, sess: &Session, spec: &Spec) -> Option<Reply> {
    if sess.master {
        return None;
    }
    let r = &shared.replication;
    if !spec.has(flag::STALE) && !r.serves_stale() {
        return Some(Reply::err("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."));
    }
    // The setting first: an EXEC's queue is looked at only when it is on.
    if !(spec.has(flag::WRITE) || spec.name == "exec") || !r.too_few_replicas() {
        return None;
    }
    let writes = spec.has(flag::WRITE)
        || sess.multi.as_ref().is_some_and(|q| q.iter().any(|a| validate(a).is_ok_and(|(_, s)| s.has(flag::WRITE))));
    writes.then(|| Reply::err("NOREPLICAS Not enough good replicas to write."))
}

/// Runs one request and returns its reply (`None`: no reply, for an
/// empty request). Error replies are counted (INFO errorstats).
pub fn execute(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Option<Reply> {
    let reply = execute_one(shared, sess, args);
    if let Some(Reply::Error(e)) = &reply {
        shared.stats.count_error(e);
    }
    reply
}

fn execute_one(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Option<Reply> {
    if args.is_empty() {
        return None;
    }
    shared.stats.total_commands.fetch_add(1, Ordering::Relaxed);
    let (id, spec) = match validate(args) {
        Ok(s) => s,
        Err((id, e)) => {
            if sess.multi.is_some() {
                sess.multi_failed = true;
            }
            shared.cmdstats.rejected(id);
            return Some(e);
        }
    };
    if shared.auth_required(sess.authed) && !spec.has(flag::NO_AUTH) {
        let e = Reply::err("NOAUTH Authentication required.");
        shared.cmdstats.rejected(Some(id));
        return Some(e);
    }
    if spec.has(flag::WRITE) && !sess.master && shared.replication.refuses_writes() {
        if sess.multi.is_some() {
            sess.multi_failed = true;
        }
        shared.cmdstats.rejected(Some(id));
        return Some(Reply::err(READONLY));
    }
    if let Some(refused) = replication_refusal(shared, sess, spec) {
        shared.cmdstats.rejected(Some(id));
        if spec.name == "exec" {
            // Redis's execCommandAbort: the transaction goes.
            let _ = transactions::discard(shared, sess, args);
            let Reply::Error(e) = refused else { return Some(refused) };
            return Some(Reply::err(format!("EXECABORT Transaction discarded because of: {e}")));
        }
        if sess.multi.is_some() {
            sess.multi_failed = true;
        }
        return Some(refused);
    }
    if sess.proto == 2 && sess.subs.active() && !spec.has(flag::SUBSCRIBED_OK) {
        return Some(pubsub::not_allowed(spec, args));
    }
    if let Some(refused) = busy::refusal(shared, sess, spec) {
        return Some(refused);
    }
    if let Some(queue) = sess.multi.as_mut() {
        // Redis 7 refuses these inside a transaction (and aborts the EXEC):
        // a queued SHUTDOWN would let EXEC stop the server.
        if spec.has(flag::NO_MULTI) {
            sess.multi_failed = true;
            return Some(Reply::err("ERR Command not allowed inside a transaction"));
        }
        // UNWATCH is queued, as in Redis: the watch still guards this EXEC.
        if !spec.has(flag::MULTI_CONTROL) {
            queue.push(args.to_vec());
            return Some(Reply::Simple("QUEUED"));
        }
    }
    let started = std::time::Instant::now();
    let reply = match spec.run {
        // WAIT may block the client (in EXEC it answers at once).
        Run::Session(_) if spec.name == "wait" => replication::wait_blocking(shared, sess, args),
        Run::Session(f) => Some(f(shared, sess, args)),
        Run::Data(f) if spec.has(flag::BLOCKING) => blocking::run(shared, sess, spec, f, args),
        // A connection's script runs on the script thread, so that its
        // event loop can serve the others (-BUSY, SCRIPT KILL) meanwhile.
        Run::Data(f) if spec.has(flag::RUNS_SCRIPT) && sess.script_host.is_some() => {
            let host = sess.script_host.clone()?;
            script::offload(&host, sess, id, spec, f, args)
        }
        Run::Data(f) => Some(run_data(shared, (sess.db, sess.proto, sess.master), spec, f, args)),
    };
    // A blocked command or a parked script is counted when it answers.
    if let Some(r) = &reply {
        shared.cmdstats.ran(id, cmdstats::usec_since(started), r);
    }
    reply
}

/// Whether `args` can join a group of keyspace commands run in one
/// transaction (see [`execute_batch`]): a valid, permitted data command
/// outside MULTI that does not lock the whole keyspace.
pub(crate) fn groupable(
    shared: &Shared,
    sess: &Session,
    args: &[Bytes],
) -> Option<(usize, &'static Spec, spec::DataFn)> {
    // Replies silenced (CLIENT REPLY) or RESP2 subscribed mode: one by one.
    if sess.multi.is_some()
        || shared.auth_required(sess.authed)
        || sess.reply_off
        || sess.reply_skip > 0
        || sess.subs.active()
    {
        return None;
    }
    // While a script runs every command goes through `execute` (-BUSY).
    if shared.scripts.active() {
        return None;
    }
    let (id, spec) = validate(args).ok()?;
    // A write on a read-only replica is refused by `execute`, and so
    // are the refusals of replication settings.
    if spec.has(flag::WRITE) && !sess.master && shared.replication.refuses_writes() {
        return None;
    }
    if replication_refusal(shared, sess, spec).is_some() {
        return None;
    }
    match spec.run {
        Run::Data(f) if !spec.has(flag::LOCK_ALL) && !spec.has(flag::BLOCKING) => Some((id, spec, f)),
        _ => None,
    }
}

/// Most commands of one pipeline that share a transaction.
pub(crate) const MAX_GROUP: usize = 64;

/// What [`execute_batch`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Replies appended to the output.
    pub replies: usize,
    /// False when the connection must close once the output is written.
    pub keep_open: bool,
    /// Requests not run because one blocked or its script was parked (the
    /// session's `blocked`, `script`); they run, in order, after it.
    pub rest: Vec<Vec<Bytes>>,
}

/// Runs a pipeline of requests in order, appending the encoded replies to
/// `out`. Consecutive keyspace commands run as one group: under the locks
/// of all their keys, in one transaction, committed as one engine batch
/// (fewer, larger writes; each command still sees the ones before it).
///
/// Durability is the caller's: with `--durability sync` the replies must
/// not be sent before the store's [`crate::store::Backend::last_ticket`],
/// taken after the batch, is durable (the event loops hold them until then).
pub fn execute_batch(shared: &Shared, sess: &mut Session, reqs: Vec<Vec<Bytes>>, out: &mut Vec<u8>) -> BatchOutcome {
    let mut group: Vec<Grouped> = Vec::new();
    let mut replies = 0;
    let mut reqs = reqs.into_iter().peekable();
    // Whether the current request may join a group (looked up once each).
    let mut joins = reqs.peek().and_then(|a| groupable(shared, sess, a));
    while let Some(args) = reqs.next() {
        if let Some((id, spec, f)) = joins {
            group.push((id, spec, f, args));
            joins = reqs.peek().and_then(|a| groupable(shared, sess, a));
            if joins.is_none() || group.len() >= MAX_GROUP {
                replies += run_group(shared, sess.db, sess.proto, std::mem::take(&mut group), out);
            }
            continue;
        }
        let was_subscribed = sess.subs.active();
        if let Some(reply) = execute(shared, sess, &args) {
            if sess.silent {
                return BatchOutcome { replies, keep_open: false, rest: Vec::new() };
            }
            // Messages that arrived before this reply (an UNSUBSCRIBE's
            // included), or that it published to the connection itself, go
            // before it, as in Redis (which writes them at publish).
            if let Some(mb) = sess.mailbox.as_ref().filter(|_| was_subscribed || sess.subs.active()) {
                if !mb.drain(sess.proto, out) {
                    return BatchOutcome { replies, keep_open: false, rest: Vec::new() };
                }
            }
            let silenced = sess.reply_off || sess.reply_skip > 0;
            sess.reply_skip = sess.reply_skip.saturating_sub(1);
            if !silenced || reply.is_push() {
                reply.encode(sess.proto, out);
                replies += 1;
            }
        }
        if sess.quit {
            return BatchOutcome { replies, keep_open: false, rest: Vec::new() };
        }
        if sess.parked() {
            // Scripts right after a parked one are parked too (one pass).
            while reqs.peek().is_some_and(|a| script::park_next(shared, sess, a)) {
                reqs.next();
            }
            return BatchOutcome { replies, keep_open: true, rest: reqs.collect() };
        }
        // The command may have changed the session (AUTH, MULTI, ...).
        joins = reqs.peek().and_then(|a| groupable(shared, sess, a));
    }
    BatchOutcome { replies, keep_open: true, rest: Vec::new() }
}

/// One command of a group: its table index, spec, handler and arguments.
pub(crate) type Grouped = (usize, &'static Spec, spec::DataFn, Vec<Bytes>);

/// Every command reads its key's meta first: starts all those reads'
/// cache misses now, so they overlap instead of coming one by one.
pub(crate) fn prefetch_metas(shared: &Shared, db: usize, keys: &[&[u8]]) {
    if keys.len() > 1 {
        let metas: Vec<Vec<u8>> = keys.iter().map(|k| crate::keyspace::meta_key(k)).collect();
        shared.store_of(db).prefetch(&metas);
    }
}

/// Runs a group of keyspace commands in one transaction; returns the
/// number of replies appended.
fn run_group(shared: &Shared, db: usize, proto: u8, group: Vec<Grouped>, out: &mut Vec<u8>) -> usize {
    let group: Vec<(u8, Grouped)> = group.into_iter().map(|g| (proto, g)).collect();
    let replies = run_group_replies(shared, db, &group);
    for r in &replies {
        r.encode(proto, out);
    }
    replies.len()
}

/// Runs keyspace commands of database `db` (each with its client's
/// protocol version) as one group: under the locks of all their keys, in
/// one transaction, committed as one engine batch; each command sees the
/// ones before it. The event loops also run the leading keyspace commands
/// of every connection of a pass as one such group (fewer, larger engine
/// writes when many clients write at once). Returns the replies in order.
pub(crate) fn run_group_replies(shared: &Shared, db: usize, group: &[(u8, Grouped)]) -> Vec<Reply> {
    run_group_as(shared, db, group, false)
}

/// [`run_group_replies`]; `master`: for the replica's master client (see
/// `Txn::keep_expired`).
pub(crate) fn run_group_as(shared: &Shared, db: usize, group: &[(u8, Grouped)], master: bool) -> Vec<Reply> {
    shared.stats.total_commands.fetch_add(group.len() as u64, Ordering::Relaxed);
    let started = std::time::Instant::now();
    let keys: Vec<&[u8]> = group.iter().flat_map(|(_, (_, spec, _, args))| keys_of(spec, args)).collect();
    prefetch_metas(shared, db, &keys);
    let (replies, failed) = {
        let _locks = shared.locks.lock(&keys);
        let mut ctx = Ctx::new(shared, db, group.first().map_or(2, |g| g.0), now_ms());
        ctx.txn.keep_expired = master;
        let replies: Vec<Reply> = group
            .iter()
            .map(|(proto, (_, spec, f, args))| {
                ctx.proto = *proto;
                notify::call(&mut ctx, spec, *f, args).unwrap_or_else(CmdError::into_reply)
            })
            .collect();
        let r = commit(ctx, Reply::Nil, &keys);
        (replies, r.is_error().then_some(r))
    };
    match failed {
        // Nothing of the group was applied. One command's write may be what
        // the store refused (a key over the engine's limit): run them again
        // one by one, so only that command fails, as it would in Redis.
        Some(_) => group
            .iter()
            .map(|(proto, (id, spec, f, args))| {
                let started = std::time::Instant::now();
                let r = run_data(shared, (db, *proto, master), spec, *f, args);
                shared.cmdstats.ran(*id, cmdstats::usec_since(started), &r);
                if let Reply::Error(e) = &r {
                    shared.stats.count_error(e);
                }
                r
            })
            .collect(),
        None => {
            // The group's time, shared out evenly.
            let each = cmdstats::usec_since(started) / replies.len().max(1) as u64;
            for ((_, (id, ..)), r) in group.iter().zip(&replies) {
                shared.cmdstats.ran(*id, each, r);
                if let Reply::Error(e) = r {
                    shared.stats.count_error(e);
                }
            }
            replies
        }
    }
}

/// The user keys a command touches, for locking: what its key specs
/// find (none for a command that locks everything).
pub(crate) fn keys_of<'a>(spec: &Spec, args: &'a [Bytes]) -> Vec<&'a [u8]> {
    if spec.has(flag::LOCK_ALL) {
        return Vec::new();
    }
    // Most commands name one key, at a fixed place: no search.
    if let [spec::KeySpec { begin: spec::Begin::Index(at), find: spec::Find::Range { lastkey: 0, .. }, flags, .. }] =
        spec.key_specs
    {
        if flags & spec::key_flag::NOT_KEY == 0 {
            return usize::try_from(*at).ok().and_then(|i| args.get(i)).map(|k| vec![k.as_ref()]).unwrap_or_default();
        }
    }
    match spec.key_args(args, true) {
        Some(at) => at.into_iter().filter_map(|(i, _)| args.get(i).map(|a| a.as_ref())).collect(),
        None => Vec::new(),
    }
}

/// Runs a data command alone in database `db` for a client of protocol
/// `proto`; `master`: the replica's master client (see `Txn::keep_expired`).
fn run_data(
    shared: &Shared,
    (db, proto, master): (usize, u8, bool),
    spec: &Spec,
    f: spec::DataFn,
    args: &[Bytes],
) -> Reply {
    let keys = keys_of(spec, args);
    let _locks = if spec.has(flag::LOCK_ALL) { shared.locks.lock_all() } else { shared.locks.lock(&keys) };
    let mut ctx = Ctx::new(shared, db, proto, now_ms());
    ctx.txn.keep_expired = master;
    let reply = notify::call(&mut ctx, spec, f, args).unwrap_or_else(CmdError::into_reply);
    commit(ctx, reply, &keys)
}

/// Commits a context's transaction (call with the key locks held); the
/// reply becomes an error if the write fails (nothing of it was applied).
/// With `--durability sync` the reply may be sent only once the store's
/// `last_ticket` (taken after this) is durable.
pub(crate) fn commit(ctx: Ctx<'_>, reply: Reply, keys: &[&[u8]]) -> Reply {
    let shared = ctx.shared;
    let durable = shared.replies_wait_for_sync();
    let events = ctx.events;
    let repl = ctx.repl;
    let mut txns = ctx.others;
    txns.push((ctx.db, ctx.txn));
    // A FLUSHALL goes first: the writes after it in the same MULTI, in
    // any database, must land on the emptied keyspace.
    if let Some(i) = txns.iter().position(|(_, t)| t.clears_everything()) {
        let first = txns.remove(i);
        txns.insert(0, first);
    }
    // One database's transaction after another: each is atomic (one batch,
    // or one clear then one batch), a MULTI over several is not across a
    // crash.
    let mut dirty = false;
    // The user keys the writes change: WATCH is told of those only (an
    // SMOVE that adds nothing to its destination, a read-only command in a
    // pass group with writers, leave theirs alone), or of every key of the
    // command if a write names no user key.
    let mut changed: Option<Vec<usize>> = Some(Vec::new());
    for (db, txn) in txns {
        let was_cleared = txn.was_cleared();
        let was_dirty = txn.is_dirty();
        match (changed.as_mut(), txn.written_user_keys()) {
            (Some(c), Some(keys)) => c.extend(keys.into_iter().map(crate::keyspace::locks::stripe_of)),
            _ => changed = None,
        }
        let expired = txn.expired;
        let d = match txn.commit(durable) {
            Ok((d, _pending)) => d,
            Err(e) => {
                if dirty {
                    // Some earlier database's batch was applied.
                    shared.locks.bump(keys, false);
                }
                return Reply::err(format!("ERR {e}"));
            }
        };
        let counts = shared.db(db);
        if was_cleared {
            counts.keys.store(d.keys, Ordering::Relaxed);
            counts.expires.store(d.expires, Ordering::Relaxed);
        } else {
            counts.keys.fetch_add(d.keys, Ordering::Relaxed);
            counts.expires.fetch_add(d.expires, Ordering::Relaxed);
        }
        shared.stats.expired_keys.fetch_add(expired, Ordering::Relaxed);
        if was_cleared {
            // Under the locks of every stripe (a flush locks everything):
            // WATCHes of keys this database held see it at EXEC.
            counts.flushes.fetch_add(1, Ordering::AcqRel);
        }
        dirty |= was_dirty;
    }
    if dirty {
        // A flush touches stripes through the database's flush count.
        match changed.as_mut() {
            Some(stripes) => {
                stripes.sort_unstable();
                stripes.dedup();
                shared.locks.bump_stripes(stripes.iter().copied());
            }
            None => shared.locks.bump(keys, false),
        }
    }
    notify::publish(shared, &events);
    if let Some(cmds) = repl {
        // Under the key locks still: writes to one key reach the stream
        // in the order they were applied.
        shared.repl_stream.feed(cmds);
    }
    reply
}

/// Loads `key`'s meta for reading and checks its type.
pub(crate) fn read_typed(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    kind: crate::keyspace::KeyType,
) -> Result<Option<Meta>, CmdError> {
    match ctx.txn.meta(key)? {
        Some(m) if m.kind != kind => Err(CmdError::WrongType),
        other => Ok(other),
    }
}

/// Loads `key`'s meta for writing (dropping it if expired) and checks its type.
pub(crate) fn write_typed(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    kind: crate::keyspace::KeyType,
) -> Result<Option<Meta>, CmdError> {
    match ctx.txn.meta_for_write(key)? {
        Some(m) if m.kind != kind => Err(CmdError::WrongType),
        other => Ok(other),
    }
}

/// Parses an integer argument or fails with the standard error.
pub(crate) fn int_arg(b: &[u8]) -> Result<i64, CmdError> {
    crate::numbers::parse_i64(b).ok_or(CmdError::NotInt)
}

/// A pop count (LPOP, SPOP, ZPOPMIN): a non-negative integer, with
/// Redis's message for anything else, non-integers included.
pub(crate) fn pop_count(b: &[u8]) -> Result<u64, CmdError> {
    match crate::numbers::parse_i64(b) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(CmdError::Msg("ERR value is out of range, must be positive".into())),
    }
}

/// Redis's start/stop index pair (LRANGE, ZRANGE) over `len` elements:
/// negative indexes count from the end, a start before the first element
/// is clamped to it, a stop past the last to it; `None` when the range is
/// empty (including a stop that is still negative after counting back).
pub(crate) fn index_range(start: i64, stop: i64, len: i64) -> Option<(i64, i64)> {
    let start = if start < 0 { len.saturating_add(start).max(0) } else { start };
    let stop = if stop < 0 { len.saturating_add(stop) } else { stop.min(len - 1) };
    (start <= stop && start < len).then_some((start, stop))
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// A server over an engine in `dir` (small PM and write buffer).
    pub(crate) fn server(dir: &std::path::Path) -> Shared {
        let o = stratakv::Options { pm_size: 64 << 20, write_buffer_size: 256 << 10, ..Default::default() };
        let store = std::sync::Arc::new(crate::store::engine::EngineStore::open(dir, o).unwrap());
        let flags = crate::config::Flags::parse_from(["strata-server", "--dir", dir.to_str().unwrap()]);
        Shared::new(store, crate::config::Config::from_flags(flags).unwrap()).unwrap()
    }

    fn cmd(shared: &Shared, sess: &Session, proto: u8, args: &[&[u8]]) -> (u8, Grouped) {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let (id, spec, f) = groupable(shared, sess, &args).expect("a keyspace command");
        (proto, (id, spec, f, args))
    }

    /// A group of several clients' commands (the event loop's pass-wide
    /// group): each command sees the ones before it, replies are shaped
    /// for each client's protocol, and when the store refuses the group's
    /// batch (one key over the engine's limit) only that command fails.
    #[test]
    fn a_group_of_several_clients_commands_runs_in_order_and_fails_one_command_alone() {
        let dir = tempfile::tempdir().unwrap();
        let shared = server(dir.path());
        let sess = Session::new(&shared, "test".into());
        let long = vec![b'k'; 70_000];
        let group = vec![
            cmd(&shared, &sess, 2, &[b"INCR", b"n"]),
            cmd(&shared, &sess, 3, &[b"INCR", b"n"]),
            cmd(&shared, &sess, 2, &[b"HSET", b"h", b"f", b"1"]),
            cmd(&shared, &sess, 3, &[b"HGETALL", b"h"]),
            cmd(&shared, &sess, 2, &[b"HGETALL", b"h"]),
            cmd(&shared, &sess, 2, &[b"GET", b"n"]),
        ];
        let replies = run_group_replies(&shared, 0, &group);
        let encoded: Vec<Vec<u8>> = replies
            .iter()
            .zip(&group)
            .map(|(r, (proto, _))| {
                let mut out = Vec::new();
                r.encode(*proto, &mut out);
                out
            })
            .collect();
        let want: [&[u8]; 6] = [
            b":1\r\n",
            b":2\r\n",
            b":1\r\n",
            b"%1\r\n$1\r\nf\r\n$1\r\n1\r\n",
            b"*2\r\n$1\r\nf\r\n$1\r\n1\r\n",
            b"$1\r\n2\r\n",
        ];
        for (got, want) in encoded.iter().zip(want) {
            assert_eq!(String::from_utf8_lossy(got), String::from_utf8_lossy(want));
        }
        let group = vec![
            cmd(&shared, &sess, 2, &[b"INCR", b"n"]),
            cmd(&shared, &sess, 2, &[b"SET", &long, b"x"]),
            cmd(&shared, &sess, 2, &[b"INCR", b"n"]),
        ];
        let replies = run_group_replies(&shared, 0, &group);
        assert_eq!(replies[0], Reply::Int(3));
        assert!(replies[1].is_error(), "{:?}", replies[1]);
        assert_eq!(replies[2], Reply::Int(4), "the others ran, once each");
    }
}
