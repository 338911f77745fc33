//! Set commands: SADD, SREM, SPOP, SCARD, SMEMBERS, SISMEMBER, SMISMEMBER,
//! SINTER, SUNION, SDIFF. Members
//! live under `S | klen | key | member` with empty values.

use std::collections::BTreeSet;

use bytes::Bytes;
use rand::Rng;

use super::{arg, pop_count, read_typed, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::{member_key, member_prefix, prefix_end, KeyType, Meta};
use crate::resp::Reply;

pub(crate) fn sadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let old = write_typed(ctx, key, KeyType::Set)?;
    let mut count = old.as_ref().map(Meta::count).unwrap_or(0);
    let mut added = 0;
    for m in args.iter().skip(2) {
        let mk = member_key(b'S', key, m);
        if ctx.txn.get(&mk)?.is_none() {
            ctx.txn.put(mk, Vec::new());
            added += 1;
            count += 1;
        }
    }
    if added > 0 {
        let meta = old.clone().unwrap_or_else(|| Meta::collection(KeyType::Set, 0, 0));
        ctx.txn.put_count(key, old.as_ref(), meta, count);
    }
    Ok(Reply::Int(added))
}

pub(crate) fn srem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let Some(old) = write_typed(ctx, key, KeyType::Set)? else { return Ok(Reply::Int(0)) };
    let mut count = old.count();
    let mut removed = 0;
    for m in args.iter().skip(2) {
        let mk = member_key(b'S', key, m);
        if ctx.txn.get(&mk)?.is_some() {
            ctx.txn.delete(mk);
            removed += 1;
            count = count.saturating_sub(1);
        }
    }
    if removed > 0 {
        ctx.txn.put_count(key, Some(&old), old.clone(), count);
    }
    Ok(Reply::Int(removed))
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
    let want = count.unwrap_or(1);
    let prefix = member_prefix(b'S', key);
    let end = prefix_end(&prefix);
    // Start at a random point of the member space and wrap around.
    let mut start = prefix.clone();
    let random: [u8; 4] = rand::thread_rng().gen();
    start.extend_from_slice(&random);
    let mut picked = ctx.txn.scan(&start, end.as_deref(), want)?;
    if picked.len() < want {
        let more = ctx.txn.scan(&prefix, Some(&start), want - picked.len())?;
        picked.extend(more);
    }
    let n = prefix.len();
    let mut out = Vec::with_capacity(picked.len());
    for (k, _) in picked {
        out.push(Reply::bulk(k.get(n..).unwrap_or_default()));
        ctx.txn.delete(k);
    }
    let left = old.count().saturating_sub(out.len() as u64);
    if !out.is_empty() {
        ctx.txn.put_count(key, Some(&old), old.clone(), left);
    }
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
    let prefix = member_prefix(b'S', key);
    let n = prefix.len();
    let all = ctx.txn.scan_prefix(&prefix)?;
    Ok(Reply::Set(all.into_iter().map(|(k, _)| Reply::bulk(k.get(n..).unwrap_or_default())).collect()))
}

pub(crate) fn sismember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    if read_typed(ctx, key, KeyType::Set)?.is_none() {
        return Ok(Reply::Int(0));
    }
    Ok(Reply::Int(i64::from(ctx.txn.get(&member_key(b'S', key, arg(args, 2)))?.is_some())))
}

/// The members of the set at `key` (empty if absent), or WRONGTYPE.
pub(crate) fn members(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Vec<Vec<u8>>, CmdError> {
    if read_typed(ctx, key, KeyType::Set)?.is_none() {
        return Ok(Vec::new());
    }
    let prefix = member_prefix(b'S', key);
    let n = prefix.len();
    Ok(ctx.txn.scan_prefix(&prefix)?.into_iter().map(|(k, _)| k.get(n..).unwrap_or_default().to_vec()).collect())
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
        let here = exists && ctx.txn.get(&member_key(b'S', key, m))?.is_some();
        out.push(Reply::Int(i64::from(here)));
    }
    Ok(Reply::Array(out))
}
