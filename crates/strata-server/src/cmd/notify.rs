//! Keyspace notifications of data commands: which event a write of each
//! command publishes for which key. A command that staged no write (SREM
//! of a missing member) publishes nothing, as in Redis; `new`, `expired`
//! and DEL's `del` come from the transaction's notes. The events are
//! published once the write committed (`commit`).

use bytes::Bytes;

use super::table::DataFn;
use super::{CmdResult, Ctx, Spec};
use crate::pubsub::events::{self as ev, KeyEvent};

/// (class, event, argument index of the key) for command `name`.
fn events_of(name: &str) -> &'static [(u32, &'static str, usize)] {
    use ev::{GENERIC as G, HASH as H, LIST as L, SET as S, STRING as T, ZSET as Z};
    match name {
        "set" | "setnx" | "getset" => &[(T, "set", 1)],
        "setex" | "psetex" => &[(T, "set", 1), (G, "expire", 1)],
        "append" => &[(T, "append", 1)],
        "incr" | "decr" | "incrby" | "decrby" => &[(T, "incrby", 1)],
        "incrbyfloat" => &[(T, "incrbyfloat", 1)],
        "setrange" => &[(T, "setrange", 1)],
        "setbit" | "bitfield" => &[(T, "setbit", 1)],
        "bitop" => &[(T, "set", 2)],
        "getdel" => &[(G, "del", 1)],
        "expire" | "pexpire" | "expireat" | "pexpireat" => &[(G, "expire", 1)],
        "persist" => &[(G, "persist", 1)],
        "rename" | "renamenx" => &[(G, "rename_from", 1), (G, "rename_to", 2)],
        "copy" => &[(G, "copy_to", 2)],
        "restore" => &[(G, "restore", 1)],
        "lpush" | "lpushx" => &[(L, "lpush", 1)],
        "rpush" | "rpushx" => &[(L, "rpush", 1)],
        "lpop" | "blpop" => &[(L, "lpop", 1)],
        "rpop" | "brpop" => &[(L, "rpop", 1)],
        "rpoplpush" | "brpoplpush" => &[(L, "lpush", 2), (L, "rpop", 1)],
        "linsert" => &[(L, "linsert", 1)],
        "lset" => &[(L, "lset", 1)],
        "ltrim" => &[(L, "ltrim", 1)],
        "lrem" => &[(L, "lrem", 1)],
        "hset" | "hmset" | "hsetnx" => &[(H, "hset", 1)],
        "hdel" => &[(H, "hdel", 1)],
        "hincrby" => &[(H, "hincrby", 1)],
        "hincrbyfloat" => &[(H, "hincrbyfloat", 1)],
        "sadd" => &[(S, "sadd", 1)],
        "srem" => &[(S, "srem", 1)],
        "spop" => &[(S, "spop", 1)],
        "smove" => &[(S, "srem", 1), (S, "sadd", 2)],
        "sinterstore" => &[(S, "sinterstore", 1)],
        "sunionstore" => &[(S, "sunionstore", 1)],
        "sdiffstore" => &[(S, "sdiffstore", 1)],
        "zadd" => &[(Z, "zadd", 1)],
        "zincrby" => &[(Z, "zincr", 1)],
        "zrem" => &[(Z, "zrem", 1)],
        "zpopmin" | "bzpopmin" => &[(Z, "zpopmin", 1)],
        "zpopmax" | "bzpopmax" => &[(Z, "zpopmax", 1)],
        "zunionstore" => &[(Z, "zunionstore", 1)],
        "zinterstore" => &[(Z, "zinterstore", 1)],
        "zdiffstore" => &[(Z, "zdiffstore", 1)],
        _ => &[],
    }
}

/// The class of an event the transaction noted.
fn class_of_note(event: &str) -> u32 {
    match event {
        "new" => ev::NEW,
        "expired" => ev::EXPIRED,
        _ => ev::GENERIC,
    }
}

/// Runs data command `f` and, with keyspace notifications on, records the
/// events its writes publish at commit.
pub(crate) fn call(ctx: &mut Ctx<'_>, spec: &Spec, f: DataFn, args: &[Bytes]) -> CmdResult {
    if !ctx.shared.pubsub.wants(u32::MAX) {
        return f(ctx, args);
    }
    if ctx.txn.notes.is_none() {
        ctx.txn.notes = Some(Vec::new());
    }
    let before = ctx.txn.ops;
    let r = f(ctx, args);
    let db = ctx.db;
    // `new` and `expired` come before the command's events, `del` (DEL, or
    // a collection emptied) after them, in Redis's order.
    let (dels, notes): (Vec<_>, Vec<_>) =
        ctx.txn.notes.as_mut().map(std::mem::take).unwrap_or_default().into_iter().partition(|(e, _)| *e == "del");
    for (event, key) in notes {
        ctx.events.push(KeyEvent { class: class_of_note(event), event, db, key });
    }
    let deleted = !dels.is_empty();
    let wrote = ctx.txn.ops != before;
    // EXPIRE into the past deleted the key: its event was `del`.
    let expired_now = deleted && spec.name.contains("expire");
    if matches!(&r, Ok(reply) if wrote && !reply.is_error()) && !expired_now {
        let mut push = |class, event, key: &[u8]| ctx.events.push(KeyEvent { class, event, db, key: key.to_vec() });
        match spec.name {
            // Every key of MSET is set.
            "mset" | "msetnx" => args.iter().skip(1).step_by(2).for_each(|k| push(ev::STRING, "set", k)),
            "lmove" | "blmove" => {
                let left = |i| super::arg(args, i).eq_ignore_ascii_case(b"left");
                // Redis pushes onto the destination first.
                push(ev::LIST, if left(4) { "lpush" } else { "rpush" }, super::arg(args, 2));
                push(ev::LIST, if left(3) { "lpop" } else { "rpop" }, super::arg(args, 1));
            }
            "getex" => {
                let persist = args.iter().skip(2).any(|a| a.eq_ignore_ascii_case(b"persist"));
                push(ev::GENERIC, if persist { "persist" } else { "expire" }, super::arg(args, 1));
            }
            name => {
                for &(class, event, at) in events_of(name) {
                    if let Some(key) = args.get(at) {
                        push(class, event, key);
                    }
                }
                if name == "set" && args.iter().skip(3).any(|a| is_expiry_option(a)) {
                    push(ev::GENERIC, "expire", super::arg(args, 1));
                }
            }
        }
    }
    for (event, key) in dels {
        ctx.events.push(KeyEvent { class: ev::GENERIC, event, db, key });
    }
    r
}

fn is_expiry_option(a: &[u8]) -> bool {
    ["ex", "px", "exat", "pxat"].iter().any(|o| a.eq_ignore_ascii_case(o.as_bytes()))
}

/// Publishes the events of a committed write.
pub(crate) fn publish(ctx_shared: &super::Shared, events: &[KeyEvent]) {
    for e in events {
        ctx_shared.pubsub.notify_event(e);
    }
}
