//! MULTI/EXEC/DISCARD: queued commands run under the locks of all their
//! keys in one transaction, committed as one atomic engine write batch.

use bytes::Bytes;

use super::{acknowledge, commit, keys_of, lookup, CmdError, Ctx, Keys, Run, Session, Shared};
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
    Reply::ok()
}

pub(crate) fn watch(_: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    if sess.multi.is_some() {
        return Reply::err("ERR WATCH inside MULTI is not allowed");
    }
    Reply::err("ERR WATCH is not supported by strata-server (MULTI/EXEC blocks are atomic without it)")
}

pub(crate) fn unwatch(_: &Shared, _: &mut Session, _: &[Bytes]) -> Reply {
    Reply::ok()
}

pub(crate) fn exec(shared: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    let Some(queue) = sess.multi.take() else { return Reply::err("ERR EXEC without MULTI") };
    if std::mem::take(&mut sess.multi_failed) {
        return Reply::err("EXECABORT Transaction discarded because of previous errors.");
    }
    let cmds: Vec<_> = queue.iter().filter_map(|args| Some((lookup(args.first()?)?, args))).collect();
    let global = cmds.iter().any(|(s, _)| s.keys == Keys::Global);
    let keys: Vec<&[u8]> = cmds.iter().flat_map(|(s, a)| keys_of(s, a)).collect();
    let (reply, pending) = {
        let _locks = if global { shared.locks.lock_all() } else { shared.locks.lock(&keys) };
        let mut ctx = Ctx { txn: Txn::new(shared.store.as_ref(), now_ms()), shared, proto: sess.proto };
        let mut replies = Vec::with_capacity(cmds.len());
        for (spec, args) in cmds {
            replies.push(match spec.run {
                Run::Session(f) => f(shared, sess, args),
                Run::Data(f) => f(&mut ctx, args).unwrap_or_else(CmdError::into_reply),
            });
        }
        commit(ctx, Reply::Array(replies))
    };
    acknowledge(shared, reply, pending)
}
