//! Set commands: SADD, SREM, SPOP, SCARD, SMEMBERS, SISMEMBER, SMISMEMBER,
//! SINTER, SUNION, SDIFF: arguments and replies; the storage is
//! [`crate::keyspace::types::set`]'s.

use std::collections::BTreeSet;

use bytes::Bytes;

use super::{arg, pop_count, read_typed, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::set;
use crate::keyspace::KeyType;
use crate::resp::Reply;

pub(crate) fn sadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let old = write_typed(ctx, key, KeyType::Set)?;
    Ok(Reply::Int(set::add(&mut ctx.txn, key, old.as_ref(), args.iter().skip(2))? as i64))
}

pub(crate) fn srem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let Some(old) = write_typed(ctx, key, KeyType::Set)? else { return Ok(Reply::Int(0)) };
    Ok(Reply::Int(set::remove(&mut ctx.txn, key, &old, args.iter().skip(2))? as i64))
}

pub(crate) fn spop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = args.get(2).map(|c| pop_count(c).map(|n| n as usize)).transpose()?;
    let Some(old) = write_typed(ctx, key, KeyType::Set)? else {
        return Ok(if count.is_some() { Reply::Set(Vec::new()) } else { Reply::Nil });
    };
    if count == Some(0) {
        // A scan for 0 items still returns one; SPOP key 0 removes nothing.
        return Ok(Reply::Set(Vec::new()));
    }
    let popped = set::pop_random(&mut ctx.txn, key, &old, count.unwrap_or(1))?;
    // Replicas remove the members chosen here, not members of their own.
    let mut srem = vec![Bytes::from_static(b"SREM"), Bytes::copy_from_slice(key)];
    srem.extend(popped.iter().map(|m| Bytes::copy_from_slice(m)));
    ctx.propagate_as(vec![srem]);
    let mut out: Vec<Reply> = popped.into_iter().map(Reply::bulk_vec).collect();
    Ok(match count {
        None => out.pop().unwrap_or(Reply::Nil),
        Some(_) => Reply::Set(out),
    })
}

pub(crate) fn scard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_typed(ctx, arg(args, 1), KeyType::Set)?.map(|m| m.count() as i64).unwrap_or(0)))
}

pub(crate) fn smembers(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    if read_typed(ctx, key, KeyType::Set)?.is_none() {
        return Ok(Reply::Set(Vec::new()));
    }
    Ok(Reply::Set(set::members(&mut ctx.txn, key)?.into_iter().map(Reply::bulk_vec).collect()))
}

pub(crate) fn sismember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    if read_typed(ctx, key, KeyType::Set)?.is_none() {
        return Ok(Reply::Int(0));
    }
    Ok(Reply::Int(i64::from(set::is_member(&mut ctx.txn, key, arg(args, 2))?)))
}

/// The members of the set at `key` (empty if absent), or WRONGTYPE.
pub(crate) fn members(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Vec<Vec<u8>>, CmdError> {
    if read_typed(ctx, key, KeyType::Set)?.is_none() {
        return Ok(Vec::new());
    }
    Ok(set::members(&mut ctx.txn, key)?)
}

/// SINTER, SUNION and SDIFF: reads every set first, so a wrong type
/// anywhere is an error, as in Redis.
fn combine(ctx: &mut Ctx<'_>, args: &[Bytes], op: fn(&mut BTreeSet<Vec<u8>>, BTreeSet<Vec<u8>>)) -> CmdResult {
    let mut sets = Vec::with_capacity(args.len() - 1);
    for k in args.iter().skip(1) {
        sets.push(members(ctx, k)?.into_iter().collect::<BTreeSet<_>>());
    }
    let mut sets = sets.into_iter();
    let mut acc = sets.next().unwrap_or_default();
    for s in sets {
        op(&mut acc, s);
    }
    Ok(Reply::Set(acc.into_iter().map(Reply::bulk_vec).collect()))
}

pub(crate) fn sinter(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    combine(ctx, args, |acc, s| acc.retain(|m| s.contains(m)))
}

pub(crate) fn sunion(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    combine(ctx, args, |acc, s| acc.extend(s))
}

pub(crate) fn sdiff(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    combine(ctx, args, |acc, s| acc.retain(|m| !s.contains(m)))
}

pub(crate) fn smismember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let exists = read_typed(ctx, key, KeyType::Set)?.is_some();
    let mut out = Vec::with_capacity(args.len().saturating_sub(2));
    for m in args.iter().skip(2) {
        let here = exists && set::is_member(&mut ctx.txn, key, m)?;
        out.push(Reply::Int(i64::from(here)));
    }
    Ok(Reply::Array(out))
}
