//! Blocking list pops: BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH, and the
//! non-blocking LMPOP.
//!
//! A blocking command that finds every list empty fails with
//! [`CmdError::WouldBlock`] having written nothing. Outside MULTI the
//! connection then waits on its event loop (no thread of its own): it
//! remembers the versions of its keys' lock stripes and is run again when
//! one changes (a write to one of its keys, or a false alarm from another
//! key of the stripe) or when its timeout passes (see `net::conn`). Inside
//! MULTI, and at EXEC, it answers as if timed out at once, as Redis does.
//! CLIENT UNBLOCK ends a wait from another connection ([`Waiting`]).

use ahash::AHashMap;
use bytes::Bytes;
use parking_lot::Mutex;

use std::sync::atomic::Ordering;

use super::listedit::move_one;
use super::lists::pop_n;
use super::{arg, commit, is, keys_of, notify, spec, Blocked, CmdError, CmdResult, Ctx, Session, Shared, Spec};
use crate::keyspace::{now_ms, KeyType};
use crate::resp::Reply;

/// How CLIENT UNBLOCK ends a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unblock {
    /// As if the timeout had passed (the null reply).
    Timeout,
    /// With the `UNBLOCKED` error.
    Error,
}

/// The clients waiting in a blocking command, by client id, each with the
/// CLIENT UNBLOCK asked for it, if any (its loop answers it when it next
/// looks at its blocked clients, within a few ms).
#[derive(Default)]
pub struct Waiting(Mutex<AHashMap<u64, Option<Unblock>>>);

impl Waiting {
    /// Client `id` begins to wait.
    pub(crate) fn enter(&self, id: u64) {
        self.0.lock().insert(id, None);
    }

    /// Client `id` no longer waits (served, timed out, unblocked, gone).
    pub(crate) fn leave(&self, id: u64) {
        self.0.lock().remove(&id);
    }

    /// CLIENT UNBLOCK: whether client `id` waits (and was not already
    /// asked to stop); it is then answered as `how` says.
    pub(crate) fn request(&self, id: u64, how: Unblock) -> bool {
        match self.0.lock().get_mut(&id) {
            Some(slot @ None) => {
                *slot = Some(how);
                true
            }
            _ => false,
        }
    }

    /// The CLIENT UNBLOCK asked for client `id`, if any.
    pub(crate) fn requested(&self, id: u64) -> Option<Unblock> {
        self.0.lock().get(&id).copied().flatten()
    }
}

/// Runs a blocking command outside MULTI: its reply, or `None` with
/// `sess.blocked` set when it must wait (nothing was written). A command
/// run again keeps the deadline it had.
pub(super) fn run(shared: &Shared, sess: &mut Session, spec: &Spec, f: spec::DataFn, args: &[Bytes]) -> Option<Reply> {
    let keys = keys_of(spec, args);
    let _locks = shared.locks.lock(&keys);
    let mut ctx = Ctx::new(shared, sess.db, sess.proto, now_ms());
    ctx.retry = sess.blocked.is_some();
    match notify::call(&mut ctx, spec, f, args) {
        Err(CmdError::WouldBlock { timeout, nil }) => {
            // Read under the locks: any later write to a key moves them on.
            let versions = keys
                .iter()
                .map(|k| {
                    let s = crate::keyspace::locks::stripe_of(k);
                    (s, shared.locks.version(s))
                })
                .collect();
            let (deadline, seq) = match sess.blocked.take() {
                Some(b) => (b.deadline, b.seq),
                None => {
                    shared.stats.blocked_clients.fetch_add(1, Ordering::AcqRel);
                    shared.waiting.enter(sess.id);
                    let deadline = (timeout > 0.0)
                        .then(|| std::time::Instant::now() + std::time::Duration::from_secs_f64(timeout.min(1e9)));
                    (deadline, shared.stats.block_seq.fetch_add(1, Ordering::Relaxed))
                }
            };
            // A wait that times out answers with a null array, whatever the
            // command (Redis 7); `nil` is the answer where it cannot wait.
            let _ = nil;
            sess.blocked =
                Some(Blocked { args: args.to_vec(), deadline, versions, nil: Reply::NilArray, seq, wait: None });
            None
        }
        r => {
            if sess.blocked.take().is_some() {
                shared.stats.blocked_clients.fetch_sub(1, Ordering::AcqRel);
                shared.waiting.leave(sess.id);
            }
            Some(commit(ctx, r.unwrap_or_else(CmdError::into_reply), &keys))
        }
    }
}

/// A timeout argument in seconds (0: forever), checked as Redis checks it.
pub(crate) fn timeout_arg(b: &[u8]) -> Result<f64, CmdError> {
    let t = crate::numbers::parse_f64(b)
        .filter(|t| t.is_finite())
        .ok_or_else(|| CmdError::Msg("ERR timeout is not a float or out of range".into()))?;
    if t < 0.0 {
        return Err(CmdError::Msg("ERR timeout is negative".into()));
    }
    Ok(t)
}

/// Whether `key` exists with a type other than list.
fn wrong_type(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<bool, CmdError> {
    Ok(ctx.txn.meta(key)?.is_some_and(|m| m.kind != KeyType::List))
}

fn bpop(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> CmdResult {
    let timeout = timeout_arg(arg(args, args.len() - 1))?;
    let keys = args.get(1..args.len() - 1).unwrap_or_default();
    // In order: a key of another type is an error where it comes, as in
    // Redis (passed over when run again after blocking).
    for k in keys {
        if ctx.retry && wrong_type(ctx, k)? {
            continue;
        }
        if let Some(mut v) = pop_n(ctx, k, left, 1)? {
            if let Some(v) = v.pop() {
                return Ok(Reply::Array(vec![Reply::bulk(k), Reply::bulk_vec(v)]));
            }
        }
    }
    Err(CmdError::WouldBlock { timeout, nil: Box::new(Reply::NilArray) })
}

pub(crate) fn blpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    bpop(ctx, args, true)
}

pub(crate) fn brpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    bpop(ctx, args, false)
}

fn side(b: &[u8]) -> Result<bool, CmdError> {
    if is(b, "left") {
        Ok(true)
    } else if is(b, "right") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

fn bmove(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from: bool, to: bool, timeout: f64) -> CmdResult {
    if ctx.retry && wrong_type(ctx, src)? {
        return Err(CmdError::WouldBlock { timeout, nil: Box::new(Reply::Nil) });
    }
    match move_one(ctx, src, dst, from, to)? {
        Reply::Nil => Err(CmdError::WouldBlock { timeout, nil: Box::new(Reply::Nil) }),
        r => Ok(r),
    }
}

pub(crate) fn blmove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (from, to) = (side(arg(args, 3))?, side(arg(args, 4))?);
    let timeout = timeout_arg(arg(args, 5))?;
    bmove(ctx, arg(args, 1), arg(args, 2), from, to, timeout)
}

pub(crate) fn brpoplpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let timeout = timeout_arg(arg(args, 3))?;
    bmove(ctx, arg(args, 1), arg(args, 2), false, true, timeout)
}

/// `numkeys key [key ...] LEFT|RIGHT [COUNT count]` from `at`: the keys,
/// the side, the count.
fn mpop_args(args: &[Bytes], at: usize) -> Result<(Vec<Bytes>, bool, u64), CmdError> {
    let numkeys = crate::numbers::parse_i64(arg(args, at))
        .filter(|n| *n > 0)
        .ok_or_else(|| CmdError::Msg("ERR numkeys should be greater than 0".into()))? as usize;
    let rest = args.get(at + 1..).unwrap_or_default();
    // The keys, then at least LEFT|RIGHT.
    if numkeys >= rest.len() {
        return Err(CmdError::Syntax);
    }
    let (keys, opts) = rest.split_at(numkeys);
    let Some(where_) = opts.first() else { return Err(CmdError::Syntax) };
    let left = side(where_)?;
    let count = match opts.len() {
        1 => 1,
        3 if is(arg(opts, 1), "count") => crate::numbers::parse_i64(arg(opts, 2))
            .filter(|n| *n > 0)
            .ok_or_else(|| CmdError::Msg("ERR count should be greater than 0".into()))?
            as u64,
        _ => return Err(CmdError::Syntax),
    };
    Ok((keys.to_vec(), left, count))
}

fn mpop(ctx: &mut Ctx<'_>, keys: &[Bytes], left: bool, count: u64) -> Result<Option<Reply>, CmdError> {
    for k in keys {
        if ctx.retry && wrong_type(ctx, k)? {
            continue;
        }
        if let Some(v) = pop_n(ctx, k, left, count)? {
            if !v.is_empty() {
                let items = v.into_iter().map(Reply::bulk_vec).collect();
                return Ok(Some(Reply::Array(vec![Reply::bulk(k), Reply::Array(items)])));
            }
        }
    }
    Ok(None)
}

pub(crate) fn lmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (keys, left, count) = mpop_args(args, 1)?;
    Ok(mpop(ctx, &keys, left, count)?.unwrap_or(Reply::NilArray))
}

pub(crate) fn blmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let timeout = timeout_arg(arg(args, 1))?;
    let (keys, left, count) = mpop_args(args, 2)?;
    match mpop(ctx, &keys, left, count)? {
        Some(r) => Ok(r),
        None => Err(CmdError::WouldBlock { timeout, nil: Box::new(Reply::NilArray) }),
    }
}
