//! SSCAN, HSCAN, ZSCAN: the members of one set, hash or sorted set.
//!
//! Every call answers with all the members (filtered by MATCH) and cursor
//! 0: COUNT is a hint, and Redis too returns a small collection whole in
//! one call. That keeps SCAN's guarantees exactly (every member present for
//! the whole iteration is returned, none twice) whatever writes run
//! between calls. A cursor other than 0 (not one this server handed out)
//! ends the iteration with nothing.

use bytes::Bytes;

use super::{arg, is, read_typed, CmdError, CmdResult, Ctx};
use crate::glob::glob_match;
use crate::keyspace::types::{set, zset};
use crate::keyspace::KeyType;
use crate::resp::reply::format_double;
use crate::resp::Reply;

/// MATCH pattern of the options from `from` on (COUNT is checked and ignored).
fn options(args: &[Bytes], from: usize) -> Result<Option<Vec<u8>>, CmdError> {
    let mut pattern = None;
    let mut i = from;
    while i < args.len() {
        let (opt, val) = (arg(args, i), args.get(i + 1));
        let Some(val) = val else { return Err(CmdError::Syntax) };
        if is(opt, "match") {
            pattern = Some(val.to_vec());
        } else if is(opt, "count") {
            let n = crate::numbers::parse_i64(val).ok_or(CmdError::NotInt)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(pattern)
}

fn scan_members(ctx: &mut Ctx<'_>, args: &[Bytes], kind: KeyType) -> CmdResult {
    let cursor: u64 = std::str::from_utf8(arg(args, 2))
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::Msg("ERR invalid cursor".into()))?;
    let pattern = options(args, 3)?;
    let key = arg(args, 1);
    let done = |items: Vec<Reply>| Reply::Array(vec![Reply::bulk("0"), Reply::Array(items)]);
    if read_typed(ctx, key, kind)?.is_none() || cursor != 0 {
        return Ok(done(Vec::new()));
    }
    // Each member, with the value or score that follows it in the reply.
    let members: Vec<(Vec<u8>, Option<Reply>)> = match kind {
        KeyType::Hash => {
            super::hashes::all_fields(ctx, key)?.into_iter().map(|(f, v)| (f, Some(Reply::bulk_vec(v)))).collect()
        }
        KeyType::ZSet => zset::all_members(&mut ctx.txn, key)?
            .into_iter()
            .map(|(m, s)| (m, Some(Reply::bulk(format_double(s)))))
            .collect(),
        _ => set::members(&mut ctx.txn, key)?.into_iter().map(|m| (m, None)).collect(),
    };
    let mut items = Vec::new();
    for (member, v) in members {
        if pattern.as_ref().is_some_and(|p| !glob_match(p, &member)) {
            continue;
        }
        items.push(Reply::bulk_vec(member));
        items.extend(v);
    }
    Ok(done(items))
}

pub(crate) fn sscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    scan_members(ctx, args, KeyType::Set)
}

pub(crate) fn hscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    scan_members(ctx, args, KeyType::Hash)
}

pub(crate) fn zscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    scan_members(ctx, args, KeyType::ZSet)
}
