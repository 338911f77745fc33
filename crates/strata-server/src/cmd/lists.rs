//! List commands: LPUSH, RPUSH, LPOP, RPOP, LRANGE, LLEN, LINDEX, LSET,
//! LTRIM, LPUSHX, RPUSHX: arguments and replies; the storage is
//! [`crate::keyspace::types::list`]'s.

use bytes::Bytes;

use super::{arg, index_range, int_arg, pop_count, read_typed, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::list;
use crate::keyspace::KeyType;
use crate::resp::Reply;

pub(crate) fn push(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> CmdResult {
    let key = arg(args, 1);
    let old = write_typed(ctx, key, KeyType::List)?;
    Ok(Reply::Int(list::push(&mut ctx.txn, key, old.as_ref(), args.iter().skip(2), left)? as i64))
}

pub(crate) fn lpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    push(ctx, args, true)
}

pub(crate) fn rpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    push(ctx, args, false)
}

/// Pops up to `n` elements from one end of list `key` (`None`: no such
/// key), noting `lpop`/`rpop`. A key of another type is WRONGTYPE.
pub(crate) fn pop_n(ctx: &mut Ctx<'_>, key: &[u8], left: bool, n: u64) -> Result<Option<Vec<Vec<u8>>>, CmdError> {
    let Some(old) = write_typed(ctx, key, KeyType::List)? else { return Ok(None) };
    Ok(Some(list::pop_n(&mut ctx.txn, key, &old, left, n, true)?))
}

fn pop(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> CmdResult {
    let key = arg(args, 1);
    if args.len() > 3 {
        let name = if left { "lpop" } else { "rpop" };
        return Err(CmdError::Msg(format!("ERR wrong number of arguments for '{name}' command")));
    }
    let count = args.get(2).map(|c| pop_count(c)).transpose()?;
    let Some(popped) = pop_n(ctx, key, left, count.unwrap_or(1))? else {
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
    let len = list::len(&meta) as i64;
    let Some((start, stop)) = index_range(start, stop, len) else { return Ok(Reply::Array(Vec::new())) };
    let items = list::range(&mut ctx.txn, key, &meta, start as u64, stop as u64)?;
    Ok(Reply::Array(items.into_iter().map(Reply::bulk_vec).collect()))
}

pub(crate) fn llen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let m = read_typed(ctx, arg(args, 1), KeyType::List)?;
    Ok(Reply::Int(m.map(|m| list::len(&m) as i64).unwrap_or(0)))
}

pub(crate) fn lindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let i = int_arg(arg(args, 2))?;
    let Some(meta) = read_typed(ctx, key, KeyType::List)? else { return Ok(Reply::Nil) };
    let len = list::len(&meta) as i64;
    let i = if i < 0 { len + i } else { i };
    if i < 0 || i >= len {
        return Ok(Reply::Nil);
    }
    Ok(list::get(&mut ctx.txn, key, &meta, i as u64)?.map(Reply::bulk_vec).unwrap_or(Reply::Nil))
}

pub(crate) fn lset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let i = int_arg(arg(args, 2))?;
    let Some(meta) = write_typed(ctx, key, KeyType::List)? else {
        return Err(CmdError::Msg("ERR no such key".into()));
    };
    let len = list::len(&meta) as i64;
    let i = if i < 0 { len.saturating_add(i) } else { i };
    if i < 0 || i >= len {
        return Err(CmdError::Msg("ERR index out of range".into()));
    }
    list::set(&mut ctx.txn, key, &meta, i as u64, arg(args, 3).to_vec());
    Ok(Reply::ok())
}

pub(crate) fn ltrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let (start, stop) = (int_arg(arg(args, 2))?, int_arg(arg(args, 3))?);
    let Some(meta) = write_typed(ctx, key, KeyType::List)? else { return Ok(Reply::ok()) };
    // Nothing kept: the key goes.
    let keep = index_range(start, stop, list::len(&meta) as i64).map(|(a, b)| (a as u64, b as u64));
    list::trim(&mut ctx.txn, key, &meta, keep)?;
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
