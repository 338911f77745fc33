//! Keyspace notifications of data commands: the events the command table
//! states for a write, and those computed from the arguments. A command that staged no write (SREM
//! of a missing member) publishes nothing, as in Redis; `new`, `expired`
//! and DEL's `del` come from the transaction's notes. The events are
//! published once the write committed (`commit`).

use bytes::Bytes;

use super::table::DataFn;
use super::table::Events;
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
    if !ctx.shared.pubsub.wants(u32::MAX) {
        return f(ctx, args);
    }
    if ctx.txn.notes.is_none() {
        ctx.txn.notes = Some(Vec::new());
    }
    let before = ctx.txn.ops;
    let mark = ctx.events.len();
    let r = f(ctx, args);
    let db = ctx.db;
    let own = ctx.events.split_off(mark.min(ctx.events.len()));
    let (dels, notes): (Vec<_>, Vec<_>) =
        ctx.txn.notes.as_mut().map(std::mem::take).unwrap_or_default().into_iter().partition(|(e, _)| *e == "del");
    for (event, key) in notes {
        ctx.events.push(KeyEvent { class: class_of_note(event), event, db, key });
    }
    let wrote = ctx.txn.ops != before;
    if wrote {
        ctx.events.extend(own);
    }
    let deleted = !dels.is_empty();
    let ok = matches!(&r, Ok(reply) if !reply.is_error());
    if wrote && ok {
        let mut push = |class, event, key: &[u8]| ctx.events.push(KeyEvent { class, event, db, key: key.to_vec() });
        match spec.events {
            Events::None => {}
            Events::Fixed(list) => {
                // EXPIRE into the past deleted the key: its event was `del`.
                let expired_now = deleted && list.iter().any(|e| e.event == "expire");
                for e in list.iter().filter(|_| !expired_now) {
                    if let Some(key) = args.get(e.arg) {
                        push(e.class, e.event, key);
                    }
                }
            }
            Events::Custom(events) => events(args, &mut push),
        }
    }
    for (event, key) in dels {
        ctx.events.push(KeyEvent { class: ev::GENERIC, event, db, key });
    }
    r
}

/// MSET, MSETNX: every key is set.
pub(crate) fn mset(args: &[Bytes], push: &mut dyn FnMut(u32, &'static str, &[u8])) {
    args.iter().skip(1).step_by(2).for_each(|k| push(ev::STRING, "set", k));
}

/// LMOVE, BLMOVE: Redis pushes onto the destination first.
pub(crate) fn lmove(args: &[Bytes], push: &mut dyn FnMut(u32, &'static str, &[u8])) {
    let left = |i| super::arg(args, i).eq_ignore_ascii_case(b"left");
    push(ev::LIST, if left(4) { "lpush" } else { "rpush" }, super::arg(args, 2));
    push(ev::LIST, if left(3) { "lpop" } else { "rpop" }, super::arg(args, 1));
}

/// GETEX: `persist` or `expire` as its option says.
pub(crate) fn getex(args: &[Bytes], push: &mut dyn FnMut(u32, &'static str, &[u8])) {
    let persist = args.iter().skip(2).any(|a| a.eq_ignore_ascii_case(b"persist"));
    push(ev::GENERIC, if persist { "persist" } else { "expire" }, super::arg(args, 1));
}

/// SET: `set`, and `expire` with an expiry option.
pub(crate) fn set(args: &[Bytes], push: &mut dyn FnMut(u32, &'static str, &[u8])) {
    push(ev::STRING, "set", super::arg(args, 1));
    if args.iter().skip(3).any(|a| is_expiry_option(a)) {
        push(ev::GENERIC, "expire", super::arg(args, 1));
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
