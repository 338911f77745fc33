//! Hash commands: HSET, HMSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS,
//! HDEL, HEXISTS, HLEN, HINCRBY, HINCRBYFLOAT, HSTRLEN: arguments and
//! replies; the storage (packed or one entry per field) is
//! [`crate::keyspace::types::hash`]'s.

use bytes::Bytes;

use super::{arg, int_arg, read_typed, write_typed, wrong_args, CmdError, CmdResult, Ctx};
use crate::keyspace::types::hash::{self, HashRead, HashWrite};
use crate::keyspace::{KeyType, Pairs};
use crate::resp::Reply;

/// Loads the hash at `key` to change it (WRONGTYPE for another type).
fn load_write(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<HashWrite, CmdError> {
    let old = write_typed(ctx, key, KeyType::Hash)?;
    Ok(HashWrite::load(key, old)?)
}

/// Sets fields; returns how many were new. With `only_new`, existing
/// fields are left alone.
fn set_fields(ctx: &mut Ctx<'_>, key: &[u8], pairs: &[Bytes], only_new: bool) -> Result<i64, CmdError> {
    let old = write_typed(ctx, key, KeyType::Hash)?;
    Ok(hash::set_fields(&mut ctx.txn, key, old, pairs, only_new)? as i64)
}

/// Loads the hash at `key` to read it (WRONGTYPE for another type).
fn load_read(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<HashRead, CmdError> {
    Ok(HashRead::new(read_typed(ctx, key, KeyType::Hash)?))
}

/// The value of field `f` of a loaded hash.
fn read_field(ctx: &mut Ctx<'_>, key: &[u8], h: &HashRead, f: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    Ok(h.field(&mut ctx.txn, key, f)?)
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

pub(crate) fn hget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let h = load_read(ctx, key)?;
    Ok(read_field(ctx, key, &h, arg(args, 2))?.map(Reply::bulk_vec).unwrap_or(Reply::Nil))
}

pub(crate) fn hmget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let h = load_read(ctx, key)?;
    let mut out = Vec::with_capacity(args.len().saturating_sub(2));
    for f in args.iter().skip(2) {
        out.push(read_field(ctx, key, &h, f)?.map(Reply::bulk_vec).unwrap_or(Reply::Nil));
    }
    Ok(Reply::Array(out))
}

/// Every (field, value) of a hash, in field order.
pub(crate) fn all_fields(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Pairs, CmdError> {
    Ok(load_read(ctx, key)?.all(&mut ctx.txn, key)?)
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
    Ok(Reply::Int(hash::delete_fields(&mut ctx.txn, key, old, args.iter().skip(2))? as i64))
}

pub(crate) fn hexists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let h = load_read(ctx, key)?;
    Ok(Reply::Int(i64::from(read_field(ctx, key, &h, arg(args, 2))?.is_some())))
}

pub(crate) fn hlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(read_typed(ctx, arg(args, 1), KeyType::Hash)?.map(|m| m.count() as i64).unwrap_or(0)))
}

pub(crate) fn hincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let by = int_arg(arg(args, 3))?;
    let mut h = load_write(ctx, key)?;
    let f = arg(args, 2);
    let cur = h.get(&mut ctx.txn, key, f)?;
    let base = match &cur {
        None => 0,
        Some(v) => {
            crate::numbers::parse_i64(v).ok_or_else(|| CmdError::Msg("ERR hash value is not an integer".into()))?
        }
    };
    let new = base.checked_add(by).ok_or_else(|| CmdError::Msg("ERR increment or decrement would overflow".into()))?;
    h.set(&mut ctx.txn, key, f, new.to_string().into_bytes(), Some(cur.is_some()))?;
    h.finish(&mut ctx.txn, key);
    Ok(Reply::Int(new))
}

pub(crate) fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let by = crate::numbers::parse_f64(arg(args, 3))
        .ok_or_else(|| CmdError::Msg("ERR value is not a valid float".into()))?;
    // Checked before the key's type, as Redis 7 does.
    if !by.is_finite() {
        return Err(CmdError::Msg("ERR value is NaN or Infinity".into()));
    }
    let mut h = load_write(ctx, key)?;
    let f = arg(args, 2);
    let cur = h.get(&mut ctx.txn, key, f)?;
    let base = match &cur {
        None => 0.0,
        Some(v) => crate::numbers::parse_f64(v).ok_or_else(|| CmdError::Msg("ERR hash value is not a float".into()))?,
    };
    let new = base + by;
    if !new.is_finite() {
        return Err(CmdError::Msg("ERR increment would produce NaN or Infinity".into()));
    }
    let text = super::strings::float_reply(new);
    h.set(&mut ctx.txn, key, f, text.clone(), Some(cur.is_some()))?;
    h.finish(&mut ctx.txn, key);
    ctx.propagate_as(vec![vec![
        Bytes::from_static(b"HSET"),
        Bytes::copy_from_slice(key),
        Bytes::copy_from_slice(f),
        Bytes::from(text.clone()),
    ]]);
    Ok(Reply::bulk_vec(text))
}

/// HSTRLEN: the length of a field's value (0 if missing).
pub(crate) fn hstrlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let h = load_read(ctx, key)?;
    Ok(Reply::Int(read_field(ctx, key, &h, arg(args, 2))?.map(|v| v.len() as i64).unwrap_or(0)))
}
