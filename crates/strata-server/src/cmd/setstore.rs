//! Set commands that write their result: SMOVE, SINTERSTORE,
//! SUNIONSTORE, SDIFFSTORE, and SINTERCARD. A destination is replaced
//! whole, whatever its type, and loses its expiry, as in Redis.

use std::collections::BTreeSet;

use bytes::Bytes;

use super::sets::members;
use super::{arg, is, read_typed, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::set;
use crate::keyspace::KeyType;
use crate::resp::Reply;

pub(crate) fn smove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (src, dst, m) = (arg(args, 1), arg(args, 2), arg(args, 3));
    let sm = write_typed(ctx, src, KeyType::Set)?;
    let dm = write_typed(ctx, dst, KeyType::Set)?;
    let Some(sm) = sm else { return Ok(Reply::Int(0)) };
    let moved = set::move_member(&mut ctx.txn, (src, &sm), (dst, dm.as_ref()), m)?;
    Ok(Reply::Int(i64::from(moved)))
}

/// Reads every source set (a wrong type anywhere fails first).
fn sources(ctx: &mut Ctx<'_>, keys: &[Bytes]) -> Result<Vec<BTreeSet<Vec<u8>>>, CmdError> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(members(ctx, k)?.into_iter().collect());
    }
    Ok(sets)
}

fn store(ctx: &mut Ctx<'_>, args: &[Bytes], op: fn(&mut BTreeSet<Vec<u8>>, BTreeSet<Vec<u8>>)) -> CmdResult {
    let dst = arg(args, 1);
    let mut sets = sources(ctx, args.get(2..).unwrap_or_default())?.into_iter();
    let mut acc = sets.next().unwrap_or_default();
    for s in sets {
        op(&mut acc, s);
    }
    Ok(Reply::Int(set::store(&mut ctx.txn, dst, acc)? as i64))
}

pub(crate) fn sinterstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    store(ctx, args, |acc, s| acc.retain(|m| s.contains(m)))
}

pub(crate) fn sunionstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    store(ctx, args, |acc, s| acc.extend(s))
}

pub(crate) fn sdiffstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    store(ctx, args, |acc, s| acc.retain(|m| !s.contains(m)))
}

/// The `[LIMIT limit]` after SINTERCARD's and ZINTERCARD's keys (0: none).
pub(crate) fn card_limit(opts: &[Bytes]) -> Result<u64, CmdError> {
    let mut limit = 0u64;
    let mut i = 0;
    while i < opts.len() {
        if is(arg(opts, i), "limit") && i + 1 < opts.len() {
            limit = crate::numbers::parse_i64(arg(opts, i + 1))
                .filter(|n| *n >= 0)
                .ok_or_else(|| CmdError::Msg("ERR LIMIT can't be negative".into()))? as u64;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(limit)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub(crate) fn sintercard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let numkeys = crate::numbers::parse_i64(arg(args, 1))
        .filter(|n| *n > 0)
        .ok_or_else(|| CmdError::Msg("ERR numkeys should be greater than 0".into()))? as usize;
    let rest = args.get(2..).unwrap_or_default();
    if numkeys > rest.len() {
        return Err(CmdError::Msg("ERR Number of keys can't be greater than number of args".into()));
    }
    let (keys, opts) = rest.split_at(numkeys);
    let limit = card_limit(opts)?;
    for k in keys {
        read_typed(ctx, k, KeyType::Set)?;
    }
    let mut sets = sources(ctx, keys)?.into_iter();
    let mut acc = sets.next().unwrap_or_default();
    for s in sets {
        acc.retain(|m| s.contains(m));
    }
    let n = acc.len() as u64;
    Ok(Reply::Int((if limit > 0 { n.min(limit) } else { n }) as i64))
}
