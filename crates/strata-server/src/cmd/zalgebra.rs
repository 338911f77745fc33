//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their *STORE forms, and
//! ZINTERCARD. Sources may be sorted sets or sets (a set member scores 1),
//! as in Redis. WEIGHTS multiply, AGGREGATE SUM|MIN|MAX combines; a NaN
//! from `inf + -inf` or `inf * 0` becomes 0, as Redis makes it.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::zsets::scored;
use super::{arg, is, CmdError, CmdResult, Ctx};
use crate::keyspace::types::set;
use crate::keyspace::types::zset::{self, Scored, ALL};
use crate::keyspace::KeyType;

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// The members and scores of sorted set or set `key` (none if missing).
pub(crate) fn source(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<BTreeMap<Vec<u8>, f64>>, CmdError> {
    let Some(meta) = ctx.txn.meta(key)? else { return Ok(None) };
    let mut out = BTreeMap::new();
    match meta.kind {
        KeyType::ZSet => out.extend(zset::in_scores(&mut ctx.txn, key, ALL.0, ALL.1)?),
        KeyType::Set => out.extend(set::members(&mut ctx.txn, key)?.into_iter().map(|m| (m, 1.0))),
        _ => return Err(CmdError::WrongType),
    }
    Ok(Some(out))
}

fn no_nan(v: f64) -> f64 {
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Parses `numkeys key... [WEIGHTS ...] [AGGREGATE ...] [WITHSCORES]` from
/// `at` and computes the result, sorted by score then member.
fn compute(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    at: usize,
    op: Op,
    name: &str,
    store: bool,
) -> Result<(Scored, bool), CmdError> {
    let numkeys = crate::numbers::parse_i64(arg(args, at)).ok_or(CmdError::NotInt)?;
    if numkeys < 1 {
        return Err(CmdError::Msg(format!("ERR at least 1 input key is needed for '{name}' command")));
    }
    let rest = args.get(at + 1..).unwrap_or_default();
    let numkeys = numkeys as usize;
    if numkeys > rest.len() {
        return Err(CmdError::Syntax);
    }
    let (keys, mut opts) = rest.split_at(numkeys);
    let mut weights = vec![1.0; numkeys];
    let mut agg = Agg::Sum;
    let mut withscores = false;
    while let Some(o) = opts.first() {
        if op != Op::Diff && is(o, "weights") && opts.len() > numkeys {
            for (w, a) in weights.iter_mut().zip(opts.get(1..=numkeys).unwrap_or_default()) {
                *w = crate::numbers::parse_f64(a)
                    .ok_or_else(|| CmdError::Msg("ERR weight value is not a float".into()))?;
            }
            opts = opts.get(numkeys + 1..).unwrap_or_default();
        } else if op != Op::Diff && is(o, "aggregate") && opts.len() > 1 {
            let a = arg(opts, 1);
            agg = if is(a, "sum") {
                Agg::Sum
            } else if is(a, "min") {
                Agg::Min
            } else if is(a, "max") {
                Agg::Max
            } else {
                return Err(CmdError::Syntax);
            };
            opts = opts.get(2..).unwrap_or_default();
        } else if !store && is(o, "withscores") {
            withscores = true;
            opts = opts.get(1..).unwrap_or_default();
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut sources = Vec::with_capacity(numkeys);
    for k in keys {
        sources.push(source(ctx, k)?);
    }
    let mut acc: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    let combine = |a: f64, b: f64| match agg {
        Agg::Sum => no_nan(a + b),
        Agg::Min => a.min(b),
        Agg::Max => a.max(b),
    };
    match op {
        Op::Union => {
            for (src, w) in sources.into_iter().zip(&weights) {
                for (m, s) in src.unwrap_or_default() {
                    let v = no_nan(s * w);
                    let e = acc.entry(m).or_insert(f64::NAN);
                    *e = if e.is_nan() { v } else { combine(*e, v) };
                }
            }
        }
        Op::Inter => {
            let mut it = sources.into_iter().zip(&weights);
            if let Some((first, w)) = it.next() {
                acc = first.unwrap_or_default().into_iter().map(|(m, s)| (m, no_nan(s * w))).collect();
            }
            for (src, w) in it {
                let src = src.unwrap_or_default();
                acc = acc
                    .into_iter()
                    .filter_map(|(m, a)| src.get(&m).map(|s| (m.clone(), combine(a, no_nan(s * w)))))
                    .collect();
            }
        }
        Op::Diff => {
            let mut it = sources.into_iter();
            acc = it.next().flatten().unwrap_or_default();
            for src in it.flatten() {
                acc.retain(|m, _| !src.contains_key(m));
            }
        }
    }
    let mut items: Vec<(Vec<u8>, f64)> = acc.into_iter().collect();
    items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok((items, withscores))
}

fn read(ctx: &mut Ctx<'_>, args: &[Bytes], op: Op, name: &str) -> CmdResult {
    let (items, withscores) = compute(ctx, args, 1, op, name, false)?;
    Ok(scored(ctx.proto, items, withscores, false))
}

fn store(ctx: &mut Ctx<'_>, args: &[Bytes], op: Op, name: &str) -> CmdResult {
    let dst = arg(args, 1);
    let (items, _) = compute(ctx, args, 2, op, name, true)?;
    super::zrange::store_items(ctx, dst, items)
}

pub(crate) fn zunion(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    read(ctx, args, Op::Union, "zunion")
}

pub(crate) fn zinter(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    read(ctx, args, Op::Inter, "zinter")
}

pub(crate) fn zdiff(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    read(ctx, args, Op::Diff, "zdiff")
}

pub(crate) fn zunionstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    store(ctx, args, Op::Union, "zunionstore")
}

pub(crate) fn zinterstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    store(ctx, args, Op::Inter, "zinterstore")
}

pub(crate) fn zdiffstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    store(ctx, args, Op::Diff, "zdiffstore")
}
