//! Keyspace notifications of data commands: the events the command table
//! states for a write, and those computed from the arguments. A command that staged no write (SREM
//! of a missing member) publishes nothing, as in Redis; `new`, `expired`
//! and DEL's `del` come from the transaction's notes. The events are
//! published once the write committed (`commit`).

use bytes::Bytes;

use super::spec::DataFn;
use super::spec::{Events, Push};
use super::{CmdResult, Ctx, Spec};
use crate::pubsub::events::{self as ev, KeyEvent};

/// The class of an event the transaction noted.
fn class_of_note(event: &str) -> u32 {
    match event {
        "new" => ev::NEW,
        "expired" => ev::EXPIRED,
        _ => ev::GENERIC,
    }
}

/// Runs data command `f` and, with keyspace notifications on, records the
/// events its writes publish at commit: the transaction's notes (`new`,
/// `expired` first, `del` last, in Redis's order), the events the handler
/// published itself where it chose the key at run time (`Ctx::notify`),
/// and those the table states for the command.
pub(crate) fn call(ctx: &mut Ctx<'_>, spec: &Spec, f: DataFn, args: &[Bytes]) -> CmdResult {
    let before = ctx.ops();
    let r = if ctx.shared.pubsub.wants(u32::MAX) { with_events(ctx, spec, f, args) } else { f(ctx, args) };
    let wrote = ctx.ops() != before;
    send_expired(ctx, spec.has(super::flag::WRITE));
    super::propagate::record(ctx, spec, args, wrote);
    r
}

/// Sends replicas a DEL for each key a write command found expired
/// (removed, or passed over as absent), ahead of the command: a Redis
/// replica keeps an expired key until its primary deletes it, and would
/// otherwise apply the write to the old value (and its past expiry), or
/// read it (a ZUNIONSTORE's source). A read command's finds are dropped:
/// they change nothing on a replica, and the sweeper deletes the key.
fn send_expired(ctx: &mut Ctx<'_>, write: bool) {
    let (db, keys) = (ctx.db, std::mem::take(&mut ctx.txn.expired_keys));
    let mut dels: Vec<(usize, Vec<u8>)> = keys.into_iter().map(|k| (db, k)).collect();
    for (other, txn) in ctx.others.iter_mut() {
        dels.extend(std::mem::take(&mut txn.expired_keys).into_iter().map(|k| (*other, k)));
    }
    let Some(log) = ctx.repl.as_mut().filter(|_| write) else { return };
    let mut sent: Vec<&(usize, Vec<u8>)> = Vec::with_capacity(dels.len());
    for del in &dels {
        // A key read twice (ZUNIONSTORE k 2 k k) is deleted once.
        if !sent.contains(&del) {
            sent.push(del);
            log.push((del.0, vec![Bytes::from_static(b"DEL"), Bytes::copy_from_slice(&del.1)]));
        }
    }
}

/// [`call`] with keyspace notifications on.
fn with_events(ctx: &mut Ctx<'_>, spec: &Spec, f: DataFn, args: &[Bytes]) -> CmdResult {
    if ctx.txn.notes.is_none() {
        ctx.txn.notes = Some(Vec::new());
    }
    let before = ctx.txn.ops;
    let r = f(ctx, args);
    let db = ctx.db;
    let notes = ctx.txn.notes.as_mut().map(std::mem::take).unwrap_or_default();
    let event = |(class, event, key): (u32, &'static str, Vec<u8>)| KeyEvent {
        class: if class == 0 { class_of_note(event) } else { class },
        event,
        db,
        key,
    };
    if matches!(spec.events, Events::None) {
        // The handler published its events where it wrote: in order.
        ctx.events.extend(notes.into_iter().map(event));
        return r;
    }
    let (dels, notes): (Vec<_>, Vec<_>) = notes.into_iter().partition(|(_, e, _)| *e == "del");
    ctx.events.extend(notes.into_iter().map(event));
    let wrote = ctx.txn.ops != before;
    let ok = matches!(&r, Ok(reply) if !reply.is_error());
    if wrote && ok {
        // An event stated `kept` is not published when the command deleted
        // its key (EXPIRE into the past, a STORE of an empty result): the
        // `del` stands for it, as in Redis.
        let deleted = |key: &[u8]| dels.iter().any(|(_, _, k)| k.as_slice() == key);
        let mut push = |class, name, key: &[u8], kept: bool| {
            if !(kept && deleted(key)) {
                ctx.events.push(KeyEvent { class, event: name, db, key: key.to_vec() });
            }
        };
        match spec.events {
            Events::None => {}
            Events::Fixed(list) => {
                for e in list {
                    if let Some(key) = args.get(e.arg) {
                        push(e.class, e.event, key, e.kept);
                    }
                }
            }
            Events::Custom(events) => events(args, &mut push),
        }
    }
    ctx.events.extend(dels.into_iter().map(event));
    r
}

/// MSET, MSETNX: every key is set.
pub(crate) fn mset(args: &[Bytes], push: &mut Push<'_>) {
    args.iter().skip(1).step_by(2).for_each(|k| push(ev::STRING, "set", k, false));
}

/// LMOVE, BLMOVE: Redis pushes onto the destination first.
pub(crate) fn lmove(args: &[Bytes], push: &mut Push<'_>) {
    let left = |i| super::arg(args, i).eq_ignore_ascii_case(b"left");
    push(ev::LIST, if left(4) { "lpush" } else { "rpush" }, super::arg(args, 2), false);
    push(ev::LIST, if left(3) { "lpop" } else { "rpop" }, super::arg(args, 1), false);
}

/// ZADD: `zincr` with INCR, else `zadd`.
pub(crate) fn zadd(args: &[Bytes], push: &mut Push<'_>) {
    let incr = args.iter().skip(2).any(|a| a.eq_ignore_ascii_case(b"incr"));
    push(ev::ZSET, if incr { "zincr" } else { "zadd" }, super::arg(args, 1), false);
}

/// GETEX: `persist` or `expire` as its option says.
pub(crate) fn getex(args: &[Bytes], push: &mut Push<'_>) {
    let persist = args.iter().skip(2).any(|a| a.eq_ignore_ascii_case(b"persist"));
    push(ev::GENERIC, if persist { "persist" } else { "expire" }, super::arg(args, 1), true);
}

/// SET: `set`, and `expire` with an expiry option.
pub(crate) fn set(args: &[Bytes], push: &mut Push<'_>) {
    push(ev::STRING, "set", super::arg(args, 1), false);
    if args.iter().skip(3).any(|a| is_expiry_option(a)) {
        push(ev::GENERIC, "expire", super::arg(args, 1), false);
    }
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
