//! More sorted-set commands: ZMSCORE, ZREMRANGEBYRANK, ZREMRANGEBYSCORE,
//! ZREMRANGEBYLEX and ZINTERCARD, with Redis 7's replies and errors.

use bytes::Bytes;

use super::zalgebra::source;
use super::zlex::lex_arg;
use super::zrange::lex_items;
use super::zsets::{range_items, RangeBy, RangeQuery};
use super::{arg, int_arg, read_typed, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::zset;
use crate::keyspace::KeyType;
use crate::numbers::ScoreBound;
use crate::resp::Reply;

/// ZMSCORE key member [member ...]
pub(crate) fn zmscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let exists = read_typed(ctx, key, KeyType::ZSet)?.is_some();
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in args.iter().skip(2) {
        let s = if exists { zset::score(&mut ctx.txn, key, m)? } else { None };
        out.push(s.map(Reply::Double).unwrap_or(Reply::Nil));
    }
    Ok(Reply::Array(out))
}

/// Which members a ZREMRANGEBY* removes.
enum Remove {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(zset::Lex, zset::Lex),
}

/// Removes the selected members; the range is parsed before the key is
/// looked at, as in Redis.
fn remove_range(ctx: &mut Ctx<'_>, key: &[u8], what: Remove) -> CmdResult {
    let Some(old) = write_typed(ctx, key, KeyType::ZSet)? else { return Ok(Reply::Int(0)) };
    let items = match what {
        Remove::Rank(start, stop) => {
            let q = RangeQuery { by: RangeBy::Index(start, stop), rev: false, limit: None, withscores: true };
            range_items(ctx, key, &q)?
        }
        Remove::Score(min, max) => {
            let q = RangeQuery { by: RangeBy::Score(min, max), rev: false, limit: None, withscores: true };
            range_items(ctx, key, &q)?
        }
        Remove::Lex(min, max) => lex_items(ctx, key, &min, &max, false, None)?,
    }
    .unwrap_or_default();
    zset::remove_items(&mut ctx.txn, key, &old, &items);
    Ok(Reply::Int(items.len() as i64))
}

/// ZREMRANGEBYRANK key start stop
pub(crate) fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let what = Remove::Rank(int_arg(arg(args, 2))?, int_arg(arg(args, 3))?);
    remove_range(ctx, arg(args, 1), what)
}

/// ZREMRANGEBYSCORE key min max
pub(crate) fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let e = || CmdError::Msg("ERR min or max is not a float".into());
    let min = ScoreBound::parse(arg(args, 2)).ok_or_else(e)?;
    let max = ScoreBound::parse(arg(args, 3)).ok_or_else(e)?;
    remove_range(ctx, arg(args, 1), Remove::Score(min, max))
}

/// ZREMRANGEBYLEX key min max
pub(crate) fn zremrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let what = Remove::Lex(lex_arg(arg(args, 2))?, lex_arg(arg(args, 3))?);
    remove_range(ctx, arg(args, 1), what)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]: sources may be sorted
/// sets or sets, as for ZINTER.
pub(crate) fn zintercard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let numkeys = int_arg(arg(args, 1))?;
    if numkeys < 1 {
        return Err(CmdError::Msg("ERR at least 1 input key is needed for 'zintercard' command".into()));
    }
    let rest = args.get(2..).unwrap_or_default();
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > rest.len() {
        return Err(CmdError::Syntax);
    }
    let (keys, opts) = rest.split_at(numkeys);
    let limit = super::setstore::card_limit(opts)?;
    let mut sources = Vec::with_capacity(keys.len());
    for k in keys {
        sources.push(source(ctx, k)?);
    }
    let mut it = sources.into_iter();
    let mut acc = it.next().flatten().unwrap_or_default();
    for s in it {
        let s = s.unwrap_or_default();
        acc.retain(|m, _| s.contains_key(m));
    }
    let n = acc.len() as u64;
    Ok(Reply::Int((if limit > 0 { n.min(limit) } else { n }) as i64))
}
