//! Sorted-set commands: ZADD, ZREM, ZCARD, ZSCORE, ZINCRBY, ZRANGEBYSCORE,
//! ZREVRANGEBYSCORE, ZCOUNT, ZRANGE (with BYSCORE, REV, LIMIT), ZREVRANGE,
//! ZRANK, ZREVRANK: arguments, selections and replies; the storage is
//! [`crate::keyspace::types::zset`]'s.

use bytes::Bytes;

use super::{arg, index_range, int_arg, is, read_typed, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::zset::{self, AddFlags, Added, Scored};
use crate::keyspace::KeyType;
use crate::numbers::{parse_f64, ScoreBound};
use crate::resp::Reply;

fn not_float() -> CmdError {
    CmdError::Msg("ERR value is not a valid float".into())
}

/// Checks the type of `key` and adds or updates `pairs` in it.
fn add(ctx: &mut Ctx<'_>, key: &[u8], f: &AddFlags, pairs: &[(f64, &[u8])]) -> Result<Added, CmdError> {
    let old = write_typed(ctx, key, KeyType::ZSet)?;
    zset::add(&mut ctx.txn, key, old.as_ref(), f, pairs)?
        .ok_or_else(|| CmdError::Msg("ERR resulting score is not a number (NaN)".into()))
}

pub(crate) fn zadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut f = AddFlags::default();
    let mut ch = false;
    let mut i = 2;
    while let Some(a) = args.get(i) {
        match a.to_ascii_lowercase().as_slice() {
            b"nx" => f.nx = true,
            b"xx" => f.xx = true,
            b"gt" => f.gt = true,
            b"lt" => f.lt = true,
            b"ch" => ch = true,
            b"incr" => f.incr = true,
            _ => break,
        }
        i += 1;
    }
    let rest = args.get(i..).unwrap_or_default();
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(CmdError::Msg("ERR XX and NX options at the same time are not compatible".into()));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::Msg("ERR GT, LT, and/or NX options at the same time are not compatible".into()));
    }
    if f.incr && rest.len() > 2 {
        return Err(CmdError::Msg("ERR INCR option supports a single increment-element pair".into()));
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks(2) {
        if let [s, m] = p {
            pairs.push((parse_f64(s).ok_or_else(not_float)?, m.as_ref()));
        }
    }
    let Added { added, changed, last } = add(ctx, arg(args, 1), &f, &pairs)?;
    if f.incr {
        return Ok(last.map(Reply::Double).unwrap_or(Reply::Nil));
    }
    Ok(Reply::Int(if ch { added + changed } else { added }))
}

pub(crate) fn zincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let by = parse_f64(arg(args, 2)).ok_or_else(not_float)?;
    let f = AddFlags { incr: true, ..AddFlags::default() };
    let added = add(ctx, arg(args, 1), &f, &[(by, arg(args, 3))])?;
    Ok(added.last.map(Reply::Double).unwrap_or(Reply::Nil))
}

pub(crate) fn zrem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let Some(old) = write_typed(ctx, key, KeyType::ZSet)? else { return Ok(Reply::Int(0)) };
    Ok(Reply::Int(zset::remove(&mut ctx.txn, key, &old, args.iter().skip(2))? as i64))
}

pub(crate) fn zcard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_typed(ctx, arg(args, 1), KeyType::ZSet)?.map(|m| m.count() as i64).unwrap_or(0)))
}

pub(crate) fn zscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    if read_typed(ctx, key, KeyType::ZSet)?.is_none() {
        return Ok(Reply::Nil);
    }
    Ok(zset::score(&mut ctx.txn, key, arg(args, 2))?.map(Reply::Double).unwrap_or(Reply::Nil))
}

/// Members with scores in the shape Redis uses: flat in RESP2 (and for
/// `flat`), [member, score] pairs in RESP3.
pub(crate) fn scored(proto: u8, items: Vec<(Vec<u8>, f64)>, withscores: bool, flat: bool) -> Reply {
    if !withscores {
        return Reply::Array(items.into_iter().map(|(m, _)| Reply::bulk_vec(m)).collect());
    }
    if proto >= 3 && !flat {
        return Reply::Array(
            items.into_iter().map(|(m, s)| Reply::Array(vec![Reply::bulk_vec(m), Reply::Double(s)])).collect(),
        );
    }
    Reply::Array(items.into_iter().flat_map(|(m, s)| [Reply::bulk_vec(m), Reply::Double(s)]).collect())
}

/// The score bounds at argument positions `min` and `max`.
fn bounds(args: &[Bytes], min: usize, max: usize) -> Result<(ScoreBound, ScoreBound), CmdError> {
    let e = || CmdError::Msg("ERR min or max is not a float".into());
    Ok((ScoreBound::parse(arg(args, min)).ok_or_else(e)?, ScoreBound::parse(arg(args, max)).ok_or_else(e)?))
}

/// Which members a range command selects.
pub(crate) enum RangeBy {
    /// By rank, Redis-style start/stop indexes.
    Index(i64, i64),
    /// By score, between two bounds.
    Score(ScoreBound, ScoreBound),
}

/// A parsed ZRANGE-family request.
pub(crate) struct RangeQuery {
    pub(crate) by: RangeBy,
    /// Highest score first (ranks count from the highest too).
    pub(crate) rev: bool,
    /// LIMIT offset count (score ranges only; a negative count means all).
    pub(crate) limit: Option<(i64, i64)>,
    pub(crate) withscores: bool,
}

/// The options after a range's bounds.
#[derive(Default)]
struct RangeOptions {
    withscores: bool,
    limit: Option<(i64, i64)>,
}

/// Parses WITHSCORES and LIMIT (ZRANGE's own options: `zrange`).
fn range_options(args: &[Bytes], from: usize) -> Result<RangeOptions, CmdError> {
    let mut o = RangeOptions::default();
    let mut i = from;
    while let Some(a) = args.get(i) {
        if is(a, "withscores") {
            o.withscores = true;
        } else if is(a, "limit") && i + 2 < args.len() {
            o.limit = Some((int_arg(arg(args, i + 1))?, int_arg(arg(args, i + 2))?));
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

fn run_range(ctx: &mut Ctx<'_>, key: &[u8], q: RangeQuery) -> CmdResult {
    let items = range_items(ctx, key, &q)?.unwrap_or_default();
    Ok(scored(ctx.proto, items, q.withscores, false))
}

/// The members (with scores) a rank or score range selects; `None` if the
/// key is missing, WRONGTYPE if it is not a sorted set.
pub(crate) fn range_items(ctx: &mut Ctx<'_>, key: &[u8], q: &RangeQuery) -> Result<Option<Scored>, CmdError> {
    let empty = || Ok(Some(Vec::new()));
    let Some(meta) = read_typed(ctx, key, KeyType::ZSet)? else { return Ok(None) };
    let items = match q.by {
        RangeBy::Index(start, stop) => {
            let len = meta.count() as i64;
            let Some((start, stop)) = index_range(start, stop, len) else { return empty() };
            // Reverse ranks count from the highest score: walk the same
            // members in score order, then turn them round.
            let (lo, hi) = if q.rev { (len - 1 - stop, len - 1 - start) } else { (start, stop) };
            let mut items = zset::by_rank(&mut ctx.txn, key, lo as u64, hi as u64)?;
            if q.rev {
                items.reverse();
            }
            items
        }
        RangeBy::Score(min, max) => {
            let (offset, count) = q.limit.unwrap_or((0, -1));
            if offset < 0 || count == 0 {
                return empty();
            }
            let take = usize::try_from(count).unwrap_or(usize::MAX);
            if q.rev {
                // The index is kept in ascending order only: collect, then reverse.
                let mut items = zset::in_scores(&mut ctx.txn, key, min, max)?;
                items.reverse();
                items.into_iter().skip(offset as usize).take(take).collect()
            } else {
                zset::by_score(&mut ctx.txn, key, (min, max), offset as usize, take)?
            }
        }
    };
    Ok(Some(items))
}

pub(crate) fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (min, max) = bounds(args, 2, 3)?;
    let RangeOptions { withscores, limit, .. } = range_options(args, 4)?;
    run_range(ctx, arg(args, 1), RangeQuery { by: RangeBy::Score(min, max), rev: false, limit, withscores })
}

pub(crate) fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (min, max) = bounds(args, 3, 2)?;
    let RangeOptions { withscores, limit, .. } = range_options(args, 4)?;
    run_range(ctx, arg(args, 1), RangeQuery { by: RangeBy::Score(min, max), rev: true, limit, withscores })
}

pub(crate) fn zcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let (min, max) = bounds(args, 2, 3)?;
    if read_typed(ctx, key, KeyType::ZSet)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let mut n = 0;
    zset::walk(&mut ctx.txn, key, min, max, |_, _| {
        n += 1;
        true
    })?;
    Ok(Reply::Int(n))
}

fn limit_needs_byscore() -> CmdError {
    CmdError::Msg("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX".into())
}

pub(crate) fn zrevrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let RangeOptions { withscores, limit, .. } = range_options(args, 4)?;
    if limit.is_some() {
        return Err(limit_needs_byscore());
    }
    let by = RangeBy::Index(int_arg(arg(args, 2))?, int_arg(arg(args, 3))?);
    run_range(ctx, arg(args, 1), RangeQuery { by, rev: true, limit: None, withscores })
}

fn rank(ctx: &mut Ctx<'_>, args: &[Bytes], rev: bool) -> CmdResult {
    let (key, member) = (arg(args, 1), arg(args, 2));
    let Some(meta) = read_typed(ctx, key, KeyType::ZSet)? else { return Ok(Reply::Nil) };
    let Some(score) = zset::score(&mut ctx.txn, key, member)? else { return Ok(Reply::Nil) };
    let before = zset::rank(&mut ctx.txn, key, member, score)? as i64;
    Ok(Reply::Int(if rev { meta.count() as i64 - 1 - before } else { before }))
}

pub(crate) fn zrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    rank(ctx, args, false)
}

pub(crate) fn zrevrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    rank(ctx, args, true)
}
