//! List commands: LPUSH, RPUSH, LPOP, RPOP, LRANGE, LLEN, LINDEX, LSET,
//! LTRIM. Elements
//! live under `L | klen | key | index u64 BE` for indexes head..tail; a push
//! on the left decrements head, on the right increments tail.

use bytes::Bytes;

use super::{arg, index_range, int_arg, pop_count, read_typed, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::{list_key, KeyType, Meta, LIST_MID};
use crate::pubsub::events::LIST;
use crate::resp::Reply;

pub(crate) fn push(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> CmdResult {
    let key = arg(args, 1);
    let old = write_typed(ctx, key, KeyType::List)?;
    let (mut head, mut tail) = old.as_ref().map(Meta::list_bounds).unwrap_or((LIST_MID, LIST_MID));
    for v in args.iter().skip(2) {
        if left {
            head = head.checked_sub(1).ok_or_else(|| CmdError::Msg("ERR list index space exhausted".into()))?;
            ctx.txn.put(list_key(key, head), v.to_vec());
        } else {
            ctx.txn.put(list_key(key, tail), v.to_vec());
            tail = tail.checked_add(1).ok_or_else(|| CmdError::Msg("ERR list index space exhausted".into()))?;
        }
    }
    let expire = old.as_ref().map(|m| m.expire_ms).unwrap_or(0);
    ctx.txn.put_meta(key, old.as_ref(), &Meta::list(head, tail, expire));
    Ok(Reply::Int(tail.saturating_sub(head) as i64))
}

pub(crate) fn lpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    push(ctx, args, true)
}

pub(crate) fn rpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    push(ctx, args, false)
}

/// Pops up to `n` elements of list `key` from one end; `None` when the key
/// holds no list elements (missing). A key of another type is WRONGTYPE.
/// Pops up to `n` elements from one end of list `key` (`None`: no such
/// key). With `notify`, publishes `lpop`/`rpop` (before the `del` of an
/// emptied list, in Redis's order); LMOVE publishes its own events.
pub(crate) fn pop_n(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    left: bool,
    n: u64,
    notify: bool,
) -> Result<Option<Vec<Vec<u8>>>, CmdError> {
    let Some(old) = write_typed(ctx, key, KeyType::List)? else { return Ok(None) };
    let (mut head, mut tail) = old.list_bounds();
    let n = n.min(tail.saturating_sub(head));
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let idx = if left { head } else { tail - 1 };
        let k = list_key(key, idx);
        out.push(ctx.txn.get(&k)?.unwrap_or_default());
        ctx.txn.delete(k);
        if left {
            head += 1;
        } else {
            tail -= 1;
        }
    }
    if notify && n > 0 {
        ctx.notify(LIST, if left { "lpop" } else { "rpop" }, key);
    }
    if head == tail {
        ctx.txn.drop_meta(key, &old);
    } else if n > 0 {
        ctx.txn.put_meta(key, Some(&old), &Meta::list(head, tail, old.expire_ms));
    }
    Ok(Some(out))
}

fn pop(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> CmdResult {
    let key = arg(args, 1);
    if args.len() > 3 {
        let name = if left { "lpop" } else { "rpop" };
        return Err(CmdError::Msg(format!("ERR wrong number of arguments for '{name}' command")));
    }
    let count = args.get(2).map(|c| pop_count(c)).transpose()?;
    let Some(popped) = pop_n(ctx, key, left, count.unwrap_or(1), true)? else {
        return Ok(if count.is_some() { Reply::NilArray } else { Reply::Nil });
    };
    let mut out: Vec<Reply> = popped.into_iter().map(Reply::bulk_vec).collect();
    Ok(match count {
        None => out.pop().unwrap_or(Reply::Nil),
        Some(_) => Reply::Array(out),
    })
}

pub(crate) fn lpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    pop(ctx, args, true)
}

pub(crate) fn rpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    pop(ctx, args, false)
}

pub(crate) fn lrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let (start, stop) = (int_arg(arg(args, 2))?, int_arg(arg(args, 3))?);
    let Some(meta) = read_typed(ctx, key, KeyType::List)? else { return Ok(Reply::Array(Vec::new())) };
    let (head, tail) = meta.list_bounds();
    let len = tail.saturating_sub(head) as i64;
    let Some((start, stop)) = index_range(start, stop, len) else { return Ok(Reply::Array(Vec::new())) };
    let from = list_key(key, head.saturating_add(start as u64));
    let to = list_key(key, head.saturating_add(stop as u64 + 1));
    let want = (stop - start + 1) as usize;
    let items = ctx.txn.scan(&from, Some(&to), want)?;
    Ok(Reply::Array(items.into_iter().map(|(_, v)| Reply::bulk_vec(v)).collect()))
}

pub(crate) fn llen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let m = read_typed(ctx, arg(args, 1), KeyType::List)?;
    Ok(Reply::Int(
        m.map(|m| {
            let (h, t) = m.list_bounds();
            t.saturating_sub(h) as i64
        })
        .unwrap_or(0),
    ))
}

pub(crate) fn lindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let i = int_arg(arg(args, 2))?;
    let Some(meta) = read_typed(ctx, key, KeyType::List)? else { return Ok(Reply::Nil) };
    let (head, tail) = meta.list_bounds();
    let len = tail.saturating_sub(head) as i64;
    let i = if i < 0 { len + i } else { i };
    if i < 0 || i >= len {
        return Ok(Reply::Nil);
    }
    Ok(ctx.txn.get(&list_key(key, head.saturating_add(i as u64)))?.map(Reply::bulk_vec).unwrap_or(Reply::Nil))
}

pub(crate) fn lset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let i = int_arg(arg(args, 2))?;
    let Some(meta) = write_typed(ctx, key, KeyType::List)? else {
        return Err(CmdError::Msg("ERR no such key".into()));
    };
    let (head, tail) = meta.list_bounds();
    let len = tail.saturating_sub(head) as i64;
    let i = if i < 0 { len.saturating_add(i) } else { i };
    if i < 0 || i >= len {
        return Err(CmdError::Msg("ERR index out of range".into()));
    }
    ctx.txn.put(list_key(key, head + i as u64), arg(args, 3).to_vec());
    Ok(Reply::ok())
}

pub(crate) fn ltrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let (start, stop) = (int_arg(arg(args, 2))?, int_arg(arg(args, 3))?);
    let Some(meta) = write_typed(ctx, key, KeyType::List)? else { return Ok(Reply::ok()) };
    let (head, tail) = meta.list_bounds();
    let len = tail.saturating_sub(head) as i64;
    let Some((start, stop)) = index_range(start, stop, len) else {
        // Nothing is kept: the key goes.
        ctx.txn.delete_key(key, &meta)?;
        ctx.txn.note("del", key);
        return Ok(Reply::ok());
    };
    let (new_head, new_tail) = (head + start as u64, head + stop as u64 + 1);
    for idx in (head..new_head).chain(new_tail..tail) {
        ctx.txn.delete(list_key(key, idx));
    }
    ctx.txn.put_meta(key, Some(&meta), &Meta::list(new_head, new_tail, meta.expire_ms));
    Ok(Reply::ok())
}

/// LPUSHX / RPUSHX: push only onto a list that exists.
fn pushx(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> CmdResult {
    if write_typed(ctx, arg(args, 1), KeyType::List)?.is_none() {
        return Ok(Reply::Int(0));
    }
    push(ctx, args, left)
}

pub(crate) fn lpushx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    pushx(ctx, args, true)
}

pub(crate) fn rpushx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    pushx(ctx, args, false)
}
