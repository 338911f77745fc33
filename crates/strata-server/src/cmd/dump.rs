//! DUMP and RESTORE: a key's value in Redis's serialized form ([`rdb`]),
//! and a key made from one (from this server or from Redis). RESTORE
//! writes the value through the type's own commands, in the command's one
//! transaction, so the new key is written as any other and atomically.

use bytes::Bytes;

use super::{arg, hashes, is, keys, lists, sets, zsets, CmdError, CmdResult, Ctx};
use crate::keyspace::types::{list, string, zset};
use crate::keyspace::{KeyType, Meta};
use crate::rdb::{self, Refused, Value};
use crate::resp::reply::format_double;
use crate::resp::Reply;

/// The whole value of `key`, whose meta is `meta`.
fn read_value(ctx: &mut Ctx<'_>, key: &[u8], meta: &Meta) -> Result<Value, CmdError> {
    Ok(match meta.kind {
        KeyType::String => Value::String(meta.body.clone()),
        KeyType::Hash => Value::Hash(hashes::all_fields(ctx, key)?),
        KeyType::List => Value::List(list::elements(&mut ctx.txn, key)?),
        KeyType::Set => Value::Set(sets::members(ctx, key)?),
        KeyType::ZSet => Value::ZSet(zset::all_members(&mut ctx.txn, key)?),
    })
}

pub(crate) fn dump(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let Some(meta) = ctx.txn.meta(key)? else { return Ok(Reply::Nil) };
    let value = read_value(ctx, key, &meta)?;
    Ok(Reply::bulk_vec(rdb::dump(&value)))
}

/// A command's arguments: its name, `key`, then `rest`.
fn command(name: &str, key: &[u8], rest: impl IntoIterator<Item = Vec<u8>>) -> Vec<Bytes> {
    let mut v = vec![Bytes::copy_from_slice(name.as_bytes()), Bytes::copy_from_slice(key)];
    v.extend(rest.into_iter().map(Bytes::from));
    v
}

/// Writes `value` as the new key `key` (absent in the transaction).
fn write_value(ctx: &mut Ctx<'_>, key: &[u8], value: Value, expire_ms: u64) -> Result<(), CmdError> {
    match value {
        Value::String(s) => {
            string::write(&mut ctx.txn, key, None, s, expire_ms);
            return Ok(());
        }
        Value::Hash(pairs) => {
            hashes::hset(ctx, &command("hset", key, pairs.into_iter().flat_map(|(f, v)| [f, v])))?;
        }
        Value::List(items) => {
            lists::rpush(ctx, &command("rpush", key, items))?;
        }
        Value::Set(items) => {
            sets::sadd(ctx, &command("sadd", key, items))?;
        }
        Value::ZSet(members) => {
            let args = members.into_iter().flat_map(|(m, s)| [format_double(s).into_bytes(), m]);
            zsets::zadd(ctx, &command("zadd", key, args))?;
        }
    }
    if expire_ms != 0 {
        keys::pexpireat(ctx, &command("pexpireat", key, [expire_ms.to_string().into_bytes()]))?;
    }
    Ok(())
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f],
/// checked in Redis 7's order.
pub(crate) fn restore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, false, false);
    let mut i = 4;
    while i < args.len() {
        let a = arg(args, i);
        let has_value = i + 1 < args.len();
        if is(a, "replace") {
            replace = true;
        } else if is(a, "absttl") {
            absttl = true;
        } else if is(a, "idletime") && has_value && !freq {
            let n = crate::numbers::parse_i64(arg(args, i + 1)).ok_or(CmdError::NotInt)?;
            if n < 0 {
                return Err(CmdError::Msg("ERR Invalid IDLETIME value, must be >= 0".into()));
            }
            idle = true;
            i += 1;
        } else if is(a, "freq") && has_value && !idle {
            let n = crate::numbers::parse_i64(arg(args, i + 1)).ok_or(CmdError::NotInt)?;
            if !(0..=255).contains(&n) {
                return Err(CmdError::Msg("ERR Invalid FREQ value, must be >= 0 and <= 255".into()));
            }
            freq = true;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let old = ctx.txn.meta_for_write(key)?;
    if old.is_some() && !replace {
        return Err(CmdError::Msg("BUSYKEY Target key name already exists.".into()));
    }
    let ttl = crate::numbers::parse_i64(arg(args, 2)).ok_or(CmdError::NotInt)?;
    if ttl < 0 {
        return Err(CmdError::Msg("ERR Invalid TTL value, must be >= 0".into()));
    }
    let value = rdb::restore(arg(args, 3)).map_err(|e| {
        CmdError::Msg(
            match e {
                Refused::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
                Refused::BadFormat => "ERR Bad data format",
                Refused::TooLarge => {
                    "ERR DUMP payload too large to restore here (a string over 256 MiB, or over 256 MiB decoded)"
                }
            }
            .into(),
        )
    })?;
    if let Some(m) = old {
        ctx.txn.delete_key(key, &m)?;
    }
    // A relative TTL that overflows past the largest time lands in the
    // past in Redis (signed wrap-around): no key, as there.
    let expire_ms = match (ttl, absttl) {
        (0, _) => Some(0),
        (t, true) => Some(t as u64),
        (t, false) => i64::try_from(ctx.txn.now_ms).ok().and_then(|now| now.checked_add(t)).map(|at| at as u64),
    };
    // Already past its expiry: the key is not created (an old one is
    // still deleted with REPLACE), as in Redis.
    let Some(expire_ms) = expire_ms.filter(|&at| !ctx.txn.is_past(at)) else { return Ok(Reply::ok()) };
    write_value(ctx, key, value, expire_ms)?;
    Ok(Reply::ok())
}
