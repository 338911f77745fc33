//! Sorted-set pops: ZPOPMIN, ZPOPMAX, ZMPOP, and the blocking
//! BZPOPMIN, BZPOPMAX, BZMPOP (waiting as the blocking list pops do, see
//! `blocking`); the pop itself is [`zset::pop_n`].

use bytes::Bytes;

use super::blocking::timeout_arg;
use super::zsets::scored;
use super::{arg, is, pop_count, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::zset::{self, Scored};
use crate::keyspace::KeyType;
use crate::resp::Reply;

/// Pops up to `n` members with the lowest (or highest, `max`) scores;
/// `None` when the key is missing.
fn pop_n(ctx: &mut Ctx<'_>, key: &[u8], max: bool, n: u64) -> Result<Option<Scored>, CmdError> {
    let Some(old) = write_typed(ctx, key, KeyType::ZSet)? else { return Ok(None) };
    Ok(Some(zset::pop_n(&mut ctx.txn, key, &old, max, n)?))
}

/// ZPOPMIN and ZPOPMAX: `key [count]`.
fn zpop(ctx: &mut Ctx<'_>, args: &[Bytes], max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = args.get(2).map(|c| pop_count(c)).transpose()?;
    let items = pop_n(ctx, arg(args, 1), max, count.unwrap_or(1))?.unwrap_or_default();
    Ok(scored(ctx.proto, items, true, count.is_none()))
}

pub(crate) fn zpopmin(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    zpop(ctx, args, false)
}

pub(crate) fn zpopmax(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    zpop(ctx, args, true)
}

fn bzpop(ctx: &mut Ctx<'_>, args: &[Bytes], max: bool) -> CmdResult {
    let timeout = timeout_arg(arg(args, args.len() - 1))?;
    let keys = args.get(1..args.len() - 1).unwrap_or_default();
    for k in keys {
        if ctx.retry && ctx.txn.meta(k)?.is_some_and(|m| m.kind != KeyType::ZSet) {
            continue;
        }
        if let Some(mut items) = pop_n(ctx, k, max, 1)? {
            if let Some((m, s)) = items.pop() {
                return Ok(Reply::Array(vec![Reply::bulk(k), Reply::bulk_vec(m), Reply::Double(s)]));
            }
        }
    }
    Err(CmdError::WouldBlock { timeout, nil: Box::new(Reply::NilArray) })
}

pub(crate) fn bzpopmin(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    bzpop(ctx, args, false)
}

pub(crate) fn bzpopmax(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    bzpop(ctx, args, true)
}

/// `numkeys key [key ...] MIN|MAX [COUNT count]` from `at`.
fn mpop_args(args: &[Bytes], at: usize) -> Result<(Vec<Bytes>, bool, u64), CmdError> {
    let numkeys = crate::numbers::parse_i64(arg(args, at))
        .filter(|n| *n > 0)
        .ok_or_else(|| CmdError::Msg("ERR numkeys should be greater than 0".into()))? as usize;
    let rest = args.get(at + 1..).unwrap_or_default();
    if numkeys >= rest.len() {
        return Err(CmdError::Syntax);
    }
    let (keys, opts) = rest.split_at(numkeys);
    let w = arg(opts, 0);
    let max = if is(w, "max") {
        true
    } else if is(w, "min") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let count = match opts.len() {
        1 => 1,
        3 if is(arg(opts, 1), "count") => crate::numbers::parse_i64(arg(opts, 2))
            .filter(|n| *n > 0)
            .ok_or_else(|| CmdError::Msg("ERR count should be greater than 0".into()))?
            as u64,
        _ => return Err(CmdError::Syntax),
    };
    Ok((keys.to_vec(), max, count))
}

fn mpop(ctx: &mut Ctx<'_>, keys: &[Bytes], max: bool, count: u64) -> Result<Option<Reply>, CmdError> {
    for k in keys {
        if ctx.retry && ctx.txn.meta(k)?.is_some_and(|m| m.kind != KeyType::ZSet) {
            continue;
        }
        if let Some(items) = pop_n(ctx, k, max, count)? {
            if !items.is_empty() {
                // Pairs of [member, score], also in RESP2.
                let pairs =
                    items.into_iter().map(|(m, s)| Reply::Array(vec![Reply::bulk_vec(m), Reply::Double(s)])).collect();
                return Ok(Some(Reply::Array(vec![Reply::bulk(k), Reply::Array(pairs)])));
            }
        }
    }
    Ok(None)
}

pub(crate) fn zmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (keys, max, count) = mpop_args(args, 1)?;
    Ok(mpop(ctx, &keys, max, count)?.unwrap_or(Reply::NilArray))
}

pub(crate) fn bzmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let timeout = timeout_arg(arg(args, 1))?;
    let (keys, max, count) = mpop_args(args, 2)?;
    match mpop(ctx, &keys, max, count)? {
        Some(r) => Ok(r),
        None => Err(CmdError::WouldBlock { timeout, nil: Box::new(Reply::NilArray) }),
    }
}
