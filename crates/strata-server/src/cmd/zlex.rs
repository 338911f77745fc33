//! Lexicographic ranges of sorted sets: ZRANGEBYLEX, ZREVRANGEBYLEX,
//! ZLEXCOUNT. As in Redis they are meant for sets whose members all have
//! one score; the members are walked in the set's (score, member) order,
//! from the first that is at or past the lower bound while they are
//! within the upper one (mirrored for the reverse command).

use bytes::Bytes;

use super::{arg, is, read_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::zset::{self, ALL};
use crate::keyspace::KeyType;
use crate::resp::Reply;

/// One end of a lex range.
pub(crate) enum Lex {
    /// `-`: below everything.
    Min,
    /// `+`: above everything.
    Max,
    /// `[x` (inclusive) or `(x` (exclusive).
    At(Vec<u8>, bool),
}

pub(crate) fn lex_arg(b: &[u8]) -> Result<Lex, CmdError> {
    match b.split_first() {
        Some((b'-', [])) => Ok(Lex::Min),
        Some((b'+', [])) => Ok(Lex::Max),
        Some((b'[', rest)) => Ok(Lex::At(rest.to_vec(), true)),
        Some((b'(', rest)) => Ok(Lex::At(rest.to_vec(), false)),
        _ => Err(CmdError::Msg("ERR min or max not valid string range item".into())),
    }
}

pub(crate) fn gte_min(m: &[u8], min: &Lex) -> bool {
    match min {
        Lex::Min => true,
        Lex::Max => false,
        Lex::At(v, incl) => m > v.as_slice() || (*incl && m == v.as_slice()),
    }
}

pub(crate) fn lte_max(m: &[u8], max: &Lex) -> bool {
    match max {
        Lex::Min => false,
        Lex::Max => true,
        Lex::At(v, incl) => m < v.as_slice() || (*incl && m == v.as_slice()),
    }
}

/// The members of `key` in lex range `min..max` (reverse order with `rev`).
fn in_range(ctx: &mut Ctx<'_>, key: &[u8], min: &Lex, max: &Lex, rev: bool) -> Result<Vec<Vec<u8>>, CmdError> {
    if read_typed(ctx, key, KeyType::ZSet)?.is_none() {
        return Ok(Vec::new());
    }
    let mut all: Vec<Vec<u8>> = zset::in_scores(&mut ctx.txn, key, ALL.0, ALL.1)?.into_iter().map(|(m, _)| m).collect();
    if rev {
        all.reverse();
        let start = all.iter().position(|m| lte_max(m, max)).unwrap_or(all.len());
        Ok(all.into_iter().skip(start).take_while(|m| gte_min(m, min)).collect())
    } else {
        let start = all.iter().position(|m| gte_min(m, min)).unwrap_or(all.len());
        Ok(all.into_iter().skip(start).take_while(|m| lte_max(m, max)).collect())
    }
}

fn range(ctx: &mut Ctx<'_>, args: &[Bytes], rev: bool) -> CmdResult {
    let key = arg(args, 1);
    let (a, b) = (lex_arg(arg(args, 2))?, lex_arg(arg(args, 3))?);
    let (min, max) = if rev { (b, a) } else { (a, b) };
    let mut offset = 0usize;
    let mut count: Option<usize> = None;
    match args.len() {
        4 => {}
        7 if is(arg(args, 4), "limit") => {
            let o = crate::numbers::parse_i64(arg(args, 5)).ok_or(CmdError::NotInt)?;
            let c = crate::numbers::parse_i64(arg(args, 6)).ok_or(CmdError::NotInt)?;
            if o < 0 {
                return Ok(Reply::Array(Vec::new()));
            }
            offset = o as usize;
            count = (c >= 0).then_some(c as usize);
        }
        _ => return Err(CmdError::Syntax),
    }
    let items = in_range(ctx, key, &min, &max, rev)?;
    Ok(Reply::Array(items.into_iter().skip(offset).take(count.unwrap_or(usize::MAX)).map(Reply::bulk_vec).collect()))
}

pub(crate) fn zrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    range(ctx, args, false)
}

pub(crate) fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    range(ctx, args, true)
}

pub(crate) fn zlexcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (min, max) = (lex_arg(arg(args, 2))?, lex_arg(arg(args, 3))?);
    Ok(Reply::Int(in_range(ctx, arg(args, 1), &min, &max, false)?.len() as i64))
}
