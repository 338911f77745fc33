//! ZRANGE with every Redis 7 option (BYSCORE, BYLEX, REV, LIMIT,
//! WITHSCORES) and ZRANGESTORE, which writes the same selection to a
//! destination key; parsed in the order and with the errors of Redis's
//! `zrangeGenericCommand`.

use bytes::Bytes;

use super::zlex::lex_arg;
use super::zsets::{range_items, scored, RangeBy, RangeQuery};
use super::{arg, int_arg, is, read_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::zset::{self, Lex, Scored};
use crate::keyspace::KeyType;
use crate::numbers::ScoreBound;
use crate::resp::Reply;

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// ZRANGE key min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub(crate) fn zrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    generic(ctx, args, 1, false)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
pub(crate) fn zrangestore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    generic(ctx, args, 2, true)
}

fn generic(ctx: &mut Ctx<'_>, args: &[Bytes], src_at: usize, store: bool) -> CmdResult {
    let (mut by, mut rev, mut withscores, mut limit) = (None, false, false, None);
    let mut j = src_at + 3;
    while j < args.len() {
        let a = arg(args, j);
        let left = args.len() - j - 1;
        if !store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            limit = Some((int_arg(arg(args, j + 1))?, int_arg(arg(args, j + 2))?));
            j += 2;
        } else if !rev && is(a, "rev") {
            rev = true;
        } else if by.is_none() && is(a, "bylex") {
            by = Some(By::Lex);
        } else if by.is_none() && is(a, "byscore") {
            by = Some(By::Score);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let by = by.unwrap_or(By::Rank);
    // Redis's default count is -1: "LIMIT o -1" with ranks passes.
    if by == By::Rank && limit.is_some_and(|(_, c)| c != -1) {
        return Err(CmdError::Msg(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX".into(),
        ));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::Msg("ERR syntax error, WITHSCORES not supported in combination with BYLEX".into()));
    }
    // Score and lex ranges are given as max, min with REV.
    let (lo, hi) = if rev && by != By::Rank { (src_at + 2, src_at + 1) } else { (src_at + 1, src_at + 2) };
    let src = arg(args, src_at);
    let items = match by {
        By::Rank => {
            let q = RangeQuery {
                by: RangeBy::Index(int_arg(arg(args, lo))?, int_arg(arg(args, hi))?),
                rev,
                limit: None,
                withscores,
            };
            range_items(ctx, src, &q)?
        }
        By::Score => {
            let e = || CmdError::Msg("ERR min or max is not a float".into());
            let min = ScoreBound::parse(arg(args, lo)).ok_or_else(e)?;
            let max = ScoreBound::parse(arg(args, hi)).ok_or_else(e)?;
            range_items(ctx, src, &RangeQuery { by: RangeBy::Score(min, max), rev, limit, withscores })?
        }
        By::Lex => {
            let (min, max) = (lex_arg(arg(args, lo))?, lex_arg(arg(args, hi))?);
            lex_items(ctx, src, &min, &max, rev, limit)?
        }
    };
    if store {
        return store_items(ctx, arg(args, 1), items.unwrap_or_default());
    }
    Ok(scored(ctx.proto, items.unwrap_or_default(), withscores, false))
}

/// Members (with scores) in a lex range, after LIMIT; `None` if missing.
pub(crate) fn lex_items(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    min: &Lex,
    max: &Lex,
    rev: bool,
    limit: Option<(i64, i64)>,
) -> Result<Option<Scored>, CmdError> {
    if read_typed(ctx, key, KeyType::ZSet)?.is_none() {
        return Ok(None);
    }
    let (offset, count) = limit.unwrap_or((0, -1));
    if offset < 0 || count == 0 {
        return Ok(Some(Vec::new()));
    }
    let take = usize::try_from(count).unwrap_or(usize::MAX);
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    let items = zset::by_lex(&mut ctx.txn, key, min, max, rev)?.into_iter().skip(skip).take(take).collect();
    Ok(Some(items))
}

/// Replaces `dst` with a sorted set of `items` (deletes it when empty).
pub(crate) fn store_items(ctx: &mut Ctx<'_>, dst: &[u8], items: Scored) -> CmdResult {
    Ok(Reply::Int(zset::store(&mut ctx.txn, dst, items)? as i64))
}
