//! Hash commands: HSET, HMSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS,
//! HDEL, HEXISTS, HLEN, HINCRBY, HINCRBYFLOAT. Fields live under `H | klen | key | field`.

use bytes::Bytes;

use super::{arg, int_arg, read_typed, write_typed, wrong_args, CmdError, CmdResult, Ctx};
use crate::keyspace::{member_key, member_prefix, KeyType, Meta};
use crate::resp::Reply;

/// Sets fields; returns how many were new. With `only_new`, existing
/// fields are left alone.
fn set_fields(ctx: &mut Ctx<'_>, key: &[u8], pairs: &[Bytes], only_new: bool) -> Result<i64, CmdError> {
    let old = write_typed(ctx, key, KeyType::Hash)?;
    let mut count = old.as_ref().map(Meta::count).unwrap_or(0);
    let mut added = 0;
    for pair in pairs.chunks(2) {
        let [f, v] = pair else { continue };
        let fk = member_key(b'H', key, f);
        // A hash that does not exist has no fields in the store (a key's
        // members go with its meta), only those this command staged.
        let existed = if old.is_none() { ctx.txn.staged(&fk) } else { ctx.txn.get(&fk)?.is_some() };
        if existed && only_new {
            continue;
        }
        if !existed {
            count += 1;
            added += 1;
        }
        ctx.txn.put(fk, v.to_vec());
    }
    let meta = old.clone().unwrap_or_else(|| Meta::collection(KeyType::Hash, 0, 0));
    ctx.txn.put_count(key, old.as_ref(), meta, count);
    Ok(added)
}

pub(crate) fn hset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Ok(wrong_args("hset"));
    }
    Ok(Reply::Int(set_fields(ctx, arg(args, 1), args.get(2..).unwrap_or_default(), false)?))
}

pub(crate) fn hmset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Ok(wrong_args("hmset"));
    }
    set_fields(ctx, arg(args, 1), args.get(2..).unwrap_or_default(), false)?;
    Ok(Reply::ok())
}

pub(crate) fn hsetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(set_fields(ctx, arg(args, 1), args.get(2..4).unwrap_or_default(), true)?))
}

fn field(ctx: &mut Ctx<'_>, key: &[u8], f: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    Ok(ctx.txn.get(&member_key(b'H', key, f))?)
}

pub(crate) fn hget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    if read_typed(ctx, key, KeyType::Hash)?.is_none() {
        return Ok(Reply::Nil);
    }
    Ok(field(ctx, key, arg(args, 2))?.map(Reply::bulk_vec).unwrap_or(Reply::Nil))
}

pub(crate) fn hmget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let exists = read_typed(ctx, key, KeyType::Hash)?.is_some();
    let mut out = Vec::new();
    for f in args.iter().skip(2) {
        out.push(if exists { field(ctx, key, f)?.map(Reply::bulk_vec).unwrap_or(Reply::Nil) } else { Reply::Nil });
    }
    Ok(Reply::Array(out))
}

/// (field, value) pairs.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Every (field, value) of a hash, in field order.
pub(crate) fn all_fields(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Pairs, CmdError> {
    if read_typed(ctx, key, KeyType::Hash)?.is_none() {
        return Ok(Vec::new());
    }
    let prefix = member_prefix(b'H', key);
    let n = prefix.len();
    Ok(ctx.txn.scan_prefix(&prefix)?.into_iter().map(|(k, v)| (k.get(n..).unwrap_or_default().to_vec(), v)).collect())
}

pub(crate) fn hgetall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let pairs = all_fields(ctx, arg(args, 1))?;
    Ok(Reply::Map(pairs.into_iter().map(|(f, v)| (Reply::bulk_vec(f), Reply::bulk_vec(v))).collect()))
}

pub(crate) fn hkeys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Array(all_fields(ctx, arg(args, 1))?.into_iter().map(|(f, _)| Reply::bulk_vec(f)).collect()))
}

pub(crate) fn hvals(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Array(all_fields(ctx, arg(args, 1))?.into_iter().map(|(_, v)| Reply::bulk_vec(v)).collect()))
}

pub(crate) fn hdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let Some(old) = write_typed(ctx, key, KeyType::Hash)? else { return Ok(Reply::Int(0)) };
    let mut count = old.count();
    let mut removed = 0;
    for f in args.iter().skip(2) {
        let fk = member_key(b'H', key, f);
        if ctx.txn.get(&fk)?.is_some() {
            ctx.txn.delete(fk);
            removed += 1;
            count = count.saturating_sub(1);
        }
    }
    if removed > 0 {
        ctx.txn.put_count(key, Some(&old), old.clone(), count);
    }
    Ok(Reply::Int(removed))
}

pub(crate) fn hexists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    if read_typed(ctx, key, KeyType::Hash)?.is_none() {
        return Ok(Reply::Int(0));
    }
    Ok(Reply::Int(i64::from(field(ctx, key, arg(args, 2))?.is_some())))
}

pub(crate) fn hlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_typed(ctx, arg(args, 1), KeyType::Hash)?.map(|m| m.count() as i64).unwrap_or(0)))
}

pub(crate) fn hincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let by = int_arg(arg(args, 3))?;
    let old = write_typed(ctx, key, KeyType::Hash)?;
    let fk = member_key(b'H', key, arg(args, 2));
    let cur = ctx.txn.get(&fk)?;
    let base = match &cur {
        None => 0,
        Some(v) => {
            crate::numbers::parse_i64(v).ok_or_else(|| CmdError::Msg("ERR hash value is not an integer".into()))?
        }
    };
    let new = base.checked_add(by).ok_or_else(|| CmdError::Msg("ERR increment or decrement would overflow".into()))?;
    store_field(ctx, key, old, fk, cur.is_none(), new.to_string().into_bytes());
    Ok(Reply::Int(new))
}

/// Stores a field's new value; a new field also raises the hash's count
/// (creating the hash if `old` is none).
fn store_field(ctx: &mut Ctx<'_>, key: &[u8], old: Option<Meta>, field_key: Vec<u8>, is_new: bool, value: Vec<u8>) {
    ctx.txn.put(field_key, value);
    if is_new {
        let count = old.as_ref().map(Meta::count).unwrap_or(0) + 1;
        let meta = old.clone().unwrap_or_else(|| Meta::collection(KeyType::Hash, 0, 0));
        ctx.txn.put_count(key, old.as_ref(), meta, count);
    }
}

pub(crate) fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let by = crate::numbers::parse_f64(arg(args, 3))
        .ok_or_else(|| CmdError::Msg("ERR value is not a valid float".into()))?;
    let old = write_typed(ctx, key, KeyType::Hash)?;
    let fk = member_key(b'H', key, arg(args, 2));
    let cur = ctx.txn.get(&fk)?;
    let base = match &cur {
        None => 0.0,
        Some(v) => crate::numbers::parse_f64(v).ok_or_else(|| CmdError::Msg("ERR hash value is not a float".into()))?,
    };
    let new = base + by;
    if !new.is_finite() {
        return Err(CmdError::Msg("ERR increment would produce NaN or Infinity".into()));
    }
    let text = super::strings::float_reply(new);
    store_field(ctx, key, old, fk, cur.is_none(), text.clone());
    Ok(Reply::bulk_vec(text))
}

/// HSTRLEN: the length of a field's value (0 if missing).
pub(crate) fn hstrlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    if read_typed(ctx, key, KeyType::Hash)?.is_none() {
        return Ok(Reply::Int(0));
    }
    Ok(Reply::Int(field(ctx, key, arg(args, 2))?.map(|v| v.len() as i64).unwrap_or(0)))
}
