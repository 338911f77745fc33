//! MULTI/EXEC/DISCARD/WATCH: queued commands run under the locks of all
//! their keys in one transaction, committed as one atomic engine write
//! batch (one per database, if SELECT in the block changes databases).
//! WATCH remembers the versions of the watched keys' lock stripes; EXEC
//! aborts (null reply) if any changed. A commit moves on the stripes of
//! the user keys its writes change (not those a command only read, or
//! changed nothing of: an SMOVE's destination that had the member). A
//! change to another key of the same stripe also aborts it: a false alarm
//! the client retries, never a missed change. FLUSHDB/FLUSHALL count flushes per database instead of touching
//! every stripe: EXEC aborts if a database that held a watched key (when
//! it was watched) was flushed since, as Redis does.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{commit, flag, keys_of, resolve, CmdError, Ctx, Run, Session, Shared};
use crate::keyspace::locks::stripe_of;
use crate::keyspace::{now_ms, Txn};
use crate::resp::Reply;

pub(crate) fn multi(_: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    if sess.multi.is_some() {
        return Reply::err("ERR MULTI calls can not be nested");
    }
    sess.multi = Some(Vec::new());
    sess.multi_failed = false;
    Reply::ok()
}

pub(crate) fn discard(_: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    if sess.multi.take().is_none() {
        return Reply::err("ERR DISCARD without MULTI");
    }
    sess.multi_failed = false;
    sess.unwatch();
    Reply::ok()
}

pub(crate) fn watch(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    if sess.multi.is_some() {
        return Reply::err("ERR WATCH inside MULTI is not allowed");
    }
    let mut txn = Txn::new(shared.store_of(sess.db), now_ms());
    let db = shared.db(sess.db);
    for k in args.iter().skip(1) {
        let stripe = stripe_of(k);
        if !sess.watched.iter().any(|(s, _)| *s == stripe) {
            sess.watched.push((stripe, shared.locks.version(stripe)));
        }
        // Read before the key: a flush after this read is seen at EXEC.
        let flushes = db.flushes.load(Ordering::Acquire);
        match txn.meta(k) {
            Ok(Some(m)) => {
                // Expiring is a change nobody writes: remember when it happens.
                if m.expire_ms != 0 {
                    sess.watch_deadline = Some(sess.watch_deadline.map_or(m.expire_ms, |d| d.min(m.expire_ms)));
                }
                // A flush touches the watched keys that exist (Redis).
                if !sess.watched_flushes.iter().any(|(d, _)| *d == sess.db) {
                    sess.watched_flushes.push((sess.db, flushes));
                }
            }
            Ok(None) => {}
            Err(e) => return CmdError::Store(e).into_reply(),
        }
    }
    Reply::ok()
}

pub(crate) fn unwatch(_: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    sess.unwatch();
    Reply::ok()
}

pub(crate) fn exec(shared: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    let Some(queue) = sess.multi.take() else { return Reply::err("ERR EXEC without MULTI") };
    let watched = std::mem::take(&mut sess.watched);
    let watched_flushes = std::mem::take(&mut sess.watched_flushes);
    let deadline = sess.watch_deadline.take();
    if std::mem::take(&mut sess.multi_failed) {
        return Reply::err("EXECABORT Transaction discarded because of previous errors.");
    }
    let cmds: Vec<_> = queue.iter().filter_map(|args| Some((resolve(args)?.1, args))).collect();
    let global = cmds.iter().any(|(s, _)| s.has(flag::LOCK_ALL));
    let keys: Vec<&[u8]> = cmds.iter().flat_map(|(s, a)| keys_of(s, a)).collect();
    {
        let _locks = if global {
            shared.locks.lock_all()
        } else {
            let mut stripes: Vec<usize> = keys.iter().map(|k| stripe_of(k)).collect();
            stripes.extend(watched.iter().map(|(s, _)| *s));
            shared.locks.lock_stripes(stripes)
        };
        let now = now_ms();
        let flushed = watched_flushes.iter().any(|&(d, n)| shared.db(d).flushes.load(Ordering::Acquire) != n);
        if flushed || watched.iter().any(|&(s, v)| shared.locks.version(s) != v) || deadline.is_some_and(|d| d <= now) {
            return Reply::NilArray;
        }
        // A replica applies each of its primary's multi-command commits
        // as a transaction: overlap their keys' misses as a group does.
        super::prefetch_metas(shared, sess.db, &keys);
        let mut ctx = Ctx::new(shared, sess.db, sess.proto, now);
        ctx.txn.keep_expired = sess.master;
        let mut replies = Vec::with_capacity(cmds.len());
        for (spec, args) in cmds {
            replies.push(match spec.run {
                Run::Session(f) => {
                    let r = f(shared, sess, args);
                    // SELECT: the commands after it act on its database.
                    ctx.select(sess.db);
                    r
                }
                Run::Data(f) => super::notify::call(&mut ctx, spec, f, args).unwrap_or_else(CmdError::into_reply),
            });
        }
        commit(ctx, Reply::Array(replies), &keys)
    }
}
