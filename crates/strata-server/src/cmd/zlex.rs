//! Lexicographic ranges of sorted sets: ZRANGEBYLEX, ZREVRANGEBYLEX,
//! ZLEXCOUNT: arguments and replies; the walk is [`zset::by_lex`].

use bytes::Bytes;

use super::{arg, is, read_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::zset::{self, Lex};
use crate::keyspace::KeyType;
use crate::resp::Reply;

/// Parses one end of a lex range (`-`, `+`, `[x`, `(x`).
pub(crate) fn lex_arg(b: &[u8]) -> Result<Lex, CmdError> {
    match b.split_first() {
        Some((b'-', [])) => Ok(Lex::Min),
        Some((b'+', [])) => Ok(Lex::Max),
        Some((b'[', rest)) => Ok(Lex::At(rest.to_vec(), true)),
        Some((b'(', rest)) => Ok(Lex::At(rest.to_vec(), false)),
        _ => Err(CmdError::Msg("ERR min or max not valid string range item".into())),
    }
}

/// The members of `key` in lex range `min..max` (reverse order with `rev`).
fn in_range(ctx: &mut Ctx<'_>, key: &[u8], min: &Lex, max: &Lex, rev: bool) -> Result<Vec<Vec<u8>>, CmdError> {
    if read_typed(ctx, key, KeyType::ZSet)?.is_none() {
        return Ok(Vec::new());
    }
    Ok(zset::by_lex(&mut ctx.txn, key, min, max, rev)?.into_iter().map(|(m, _)| m).collect())
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
