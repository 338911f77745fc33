//! List commands that edit the middle of a list or move between lists:
//! LINSERT, LREM, LMOVE, RPOPLPUSH, LPOS: arguments and replies; the
//! storage (an edit in the middle rewrites the elements after it) is
//! [`crate::keyspace::types::list`]'s.

use bytes::Bytes;

use super::{arg, int_arg, is, write_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::list;
use crate::keyspace::KeyType;
use crate::resp::Reply;

pub(crate) fn linsert(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let after = match arg(args, 2) {
        w if is(w, "after") => true,
        w if is(w, "before") => false,
        _ => return Err(CmdError::Syntax),
    };
    let (pivot, value) = (arg(args, 3), arg(args, 4));
    let Some(old) = write_typed(ctx, key, KeyType::List)? else { return Ok(Reply::Int(0)) };
    let before = list::elements(&mut ctx.txn, key)?;
    let Some(at) = before.iter().position(|e| e.as_slice() == pivot) else { return Ok(Reply::Int(-1)) };
    let mut items = before.clone();
    items.insert(if after { at + 1 } else { at }, value.to_vec());
    let len = items.len() as i64;
    list::rewrite(&mut ctx.txn, key, &old, &before, items);
    Ok(Reply::Int(len))
}

pub(crate) fn lrem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let count = int_arg(arg(args, 2))?;
    let value = arg(args, 3);
    let Some(old) = write_typed(ctx, key, KeyType::List)? else { return Ok(Reply::Int(0)) };
    let before = list::elements(&mut ctx.txn, key)?;
    let limit = if count == 0 { usize::MAX } else { usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX) };
    let mut keep = vec![true; before.len()];
    let mut removed = 0usize;
    let order: Box<dyn Iterator<Item = usize>> =
        if count < 0 { Box::new((0..before.len()).rev()) } else { Box::new(0..before.len()) };
    for i in order {
        if removed == limit {
            break;
        }
        if before.get(i).is_some_and(|e| e.as_slice() == value) {
            if let Some(k) = keep.get_mut(i) {
                *k = false;
            }
            removed += 1;
        }
    }
    if removed > 0 {
        let items = before.iter().zip(&keep).filter(|(_, k)| **k).map(|(e, _)| e.clone()).collect();
        list::rewrite(&mut ctx.txn, key, &old, &before, items);
    }
    Ok(Reply::Int(removed as i64))
}

/// LEFT (true) or RIGHT (false).
fn side(b: &[u8]) -> Result<bool, CmdError> {
    if is(b, "left") {
        Ok(true)
    } else if is(b, "right") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Pops from `src` at one end and pushes onto `dst` at one end; nil when
/// `src` is empty. A wrong type of `dst` fails before anything changes.
pub(crate) fn move_one(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from_left: bool, to_left: bool) -> CmdResult {
    let Some(sm) = write_typed(ctx, src, KeyType::List)? else { return Ok(Reply::Nil) };
    let dm = write_typed(ctx, dst, KeyType::List)?;
    let moved = list::move_element(&mut ctx.txn, (src, &sm), (dst, dm.as_ref()), from_left, to_left)?;
    Ok(moved.map(Reply::bulk_vec).unwrap_or(Reply::Nil))
}

pub(crate) fn lmove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (from, to) = (side(arg(args, 3))?, side(arg(args, 4))?);
    move_one(ctx, arg(args, 1), arg(args, 2), from, to)
}

pub(crate) fn rpoplpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    move_one(ctx, arg(args, 1), arg(args, 2), false, true)
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
pub(crate) fn lpos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (key, value) = (arg(args, 1), arg(args, 2));
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut i = 3;
    while i < args.len() {
        let (opt, val) = (arg(args, i), args.get(i + 1));
        let Some(val) = val else { return Err(CmdError::Syntax) };
        let n = crate::numbers::parse_i64(val);
        // COUNT and MAXLEN: a non-integer gets the "negative" message, as
        // in Redis.
        let neg = |what: &str| CmdError::Msg(format!("ERR {what} can't be negative"));
        if is(opt, "rank") {
            let n = n.ok_or(CmdError::NotInt)?;
            if n == 0 {
                return Err(CmdError::Msg(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... \
                     or use negative to start from the end of the list"
                        .into(),
                ));
            }
            if n == i64::MIN {
                return Err(CmdError::Msg(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807".into(),
                ));
            }
            rank = n;
        } else if is(opt, "count") {
            count = Some(n.filter(|n| *n >= 0).ok_or_else(|| neg("COUNT"))?);
        } else if is(opt, "maxlen") {
            maxlen = n.filter(|n| *n >= 0).ok_or_else(|| neg("MAXLEN"))?;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let none = || if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil };
    if super::read_typed(ctx, key, KeyType::List)?.is_none() {
        return Ok(none());
    }
    let items = list::elements(&mut ctx.txn, key)?;
    let len = items.len();
    let order: Box<dyn Iterator<Item = usize>> = if rank < 0 { Box::new((0..len).rev()) } else { Box::new(0..len) };
    let limit = if maxlen == 0 { usize::MAX } else { maxlen as usize };
    let want = match count {
        Some(0) => usize::MAX,
        Some(c) => c as usize,
        None => 1,
    };
    let mut skip = rank.unsigned_abs() - 1;
    let mut found = Vec::new();
    for idx in order.take(limit) {
        if items.get(idx).is_some_and(|e| e.as_slice() == value) {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(Reply::Int(idx as i64));
            if found.len() >= want {
                break;
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    })
}
