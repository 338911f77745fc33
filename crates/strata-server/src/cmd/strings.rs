//! String commands: GET, SET, SETNX, SETEX, PSETEX, GETSET, GETDEL, MGET,
//! MSET, MSETNX, INCR/DECR[BY], INCRBYFLOAT, APPEND, STRLEN, GETEX,
//! GETRANGE, SETRANGE.

use bytes::Bytes;

use super::{arg, int_arg, is, read_typed, wrong_args, CmdError, CmdResult, Ctx};
use crate::keyspace::types::string;
use crate::keyspace::KeyType;
use crate::resp::Reply;

fn string_value(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    Ok(read_typed(ctx, key, KeyType::String)?.map(|m| m.body))
}

pub(crate) fn get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(string_value(ctx, arg(args, 1))?.map(Reply::bulk_vec).unwrap_or(Reply::Nil))
}

/// How SET treats the expiry.
enum Ttl {
    /// Remove any expiry.
    Clear,
    /// Keep the current expiry.
    Keep,
    /// Expire at this Unix millisecond.
    At(u64),
}

fn expire_at(ctx: &Ctx<'_>, n: i64, unit: i64, absolute: bool, name: &str) -> Result<u64, CmdError> {
    let invalid = || CmdError::Msg(format!("ERR invalid expire time in '{name}' command"));
    if n <= 0 {
        return Err(invalid());
    }
    let ms = n.checked_mul(unit).ok_or_else(invalid)?;
    let at = if absolute { ms } else { ms.checked_add(ctx.txn.now_ms as i64).ok_or_else(invalid)? };
    Ok(at as u64)
}

/// The expiry time given by SET's or GETEX's `EX|PX|EXAT|PXAT n` option.
fn option_expire_at(ctx: &Ctx<'_>, option: &str, n: &[u8], name: &str) -> Result<u64, CmdError> {
    let (unit, absolute) = match option {
        "ex" => (1000, false),
        "px" => (1, false),
        "exat" => (1000, true),
        _ => (1, true),
    };
    expire_at(ctx, int_arg(n)?, unit, absolute, name)
}

/// The core of SET and its variants; `None` when NX/XX prevented it.
fn set_value(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    value: &[u8],
    ttl: Ttl,
    nx: bool,
    xx: bool,
    get: bool,
) -> Result<(bool, Option<Vec<u8>>), CmdError> {
    // Without GET only the old type and expiry matter (the directory may
    // answer without the old value).
    let old = if get { ctx.txn.meta_for_write(key)? } else { ctx.txn.meta_for_overwrite(key)? };
    let old_value = match &old {
        Some(m) if get && m.kind != KeyType::String => return Err(CmdError::WrongType),
        Some(m) if get && m.kind == KeyType::String => Some(m.body.clone()),
        _ => None,
    };
    if (nx && old.is_some()) || (xx && old.is_none()) {
        return Ok((false, old_value));
    }
    let expire_ms = match ttl {
        Ttl::Clear => 0,
        Ttl::Keep => old.as_ref().map(|m| m.expire_ms).unwrap_or(0),
        Ttl::At(t) => t,
    };
    string::replace(&mut ctx.txn, key, old, value.to_vec(), expire_ms)?;
    Ok((true, old_value))
}

pub(crate) fn set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (key, value) = (arg(args, 1), arg(args, 2));
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut ttl = Ttl::Clear;
    // Which expiry option was given: repeating it is allowed (the last
    // value wins), mixing two is a syntax error, as in Redis 7.
    let mut ttl_option: Option<&'static str> = None;
    let mut i = 3;
    while i < args.len() {
        let a = arg(args, i);
        let next = args.get(i + 1);
        let expiry = ["keepttl", "ex", "px", "exat", "pxat"].into_iter().find(|o| is(a, o));
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "get") {
            get = true;
        } else if let Some(opt) = expiry.filter(|o| ttl_option.is_none_or(|t| t == *o)) {
            ttl_option = Some(opt);
            if opt == "keepttl" {
                ttl = Ttl::Keep;
            } else {
                let Some(n) = next else { return Err(CmdError::Syntax) };
                ttl = Ttl::At(option_expire_at(ctx, opt, n, "set")?);
                i += 1;
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let (done, old) = set_value(ctx, key, value, ttl, nx, xx, get)?;
    Ok(match (get, done) {
        (true, _) => old.map(Reply::bulk_vec).unwrap_or(Reply::Nil),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Nil,
    })
}

pub(crate) fn setnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (done, _) = set_value(ctx, arg(args, 1), arg(args, 2), Ttl::Clear, true, false, false)?;
    Ok(Reply::Int(i64::from(done)))
}

fn setex_generic(ctx: &mut Ctx<'_>, args: &[Bytes], unit: i64, name: &str) -> CmdResult {
    let at = expire_at(ctx, int_arg(arg(args, 2))?, unit, false, name)?;
    set_value(ctx, arg(args, 1), arg(args, 3), Ttl::At(at), false, false, false)?;
    Ok(Reply::ok())
}

pub(crate) fn setex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    setex_generic(ctx, args, 1000, "setex")
}

pub(crate) fn psetex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    setex_generic(ctx, args, 1, "psetex")
}

pub(crate) fn getset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (_, old) = set_value(ctx, arg(args, 1), arg(args, 2), Ttl::Clear, false, false, true)?;
    Ok(old.map(Reply::bulk_vec).unwrap_or(Reply::Nil))
}

pub(crate) fn getdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    match ctx.txn.meta_for_write(key)? {
        None => Ok(Reply::Nil),
        Some(m) if m.kind != KeyType::String => Err(CmdError::WrongType),
        Some(m) => {
            ctx.txn.delete_key(key, &m)?;
            Ok(Reply::bulk_vec(m.body))
        }
    }
}

pub(crate) fn mget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    // One batched read of every key's meta (the engine's multi_get).
    let metas = ctx.txn.metas(args.get(1..).unwrap_or_default())?;
    let out = metas
        .into_iter()
        .map(|m| match m {
            Some(m) if m.kind == KeyType::String => Reply::bulk_vec(m.body),
            _ => Reply::Nil,
        })
        .collect();
    Ok(Reply::Array(out))
}

pub(crate) fn mset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Ok(wrong_args("mset"));
    }
    for pair in args.get(1..).unwrap_or_default().chunks(2) {
        if let [k, v] = pair {
            set_value(ctx, k, v, Ttl::Clear, false, false, false)?;
        }
    }
    Ok(Reply::ok())
}

pub(crate) fn msetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Ok(wrong_args("msetnx"));
    }
    let pairs = args.get(1..).unwrap_or_default();
    for k in pairs.iter().step_by(2) {
        if ctx.txn.meta(k)?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    for pair in pairs.chunks(2) {
        if let [k, v] = pair {
            set_value(ctx, k, v, Ttl::Clear, false, false, false)?;
        }
    }
    Ok(Reply::Int(1))
}

fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> CmdResult {
    let old = ctx.txn.meta_for_write(key)?;
    let (cur, expire) = match &old {
        None => (0, 0),
        Some(m) if m.kind != KeyType::String => return Err(CmdError::WrongType),
        Some(m) => (crate::numbers::parse_i64(&m.body).ok_or(CmdError::NotInt)?, m.expire_ms),
    };
    let new = cur.checked_add(by).ok_or_else(|| CmdError::Msg("ERR increment or decrement would overflow".into()))?;
    string::write(&mut ctx.txn, key, old.as_ref(), new.to_string().into_bytes(), expire);
    Ok(Reply::Int(new))
}

pub(crate) fn incr(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, arg(args, 1), 1)
}

pub(crate) fn decr(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, arg(args, 1), -1)
}

pub(crate) fn incrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let by = int_arg(arg(args, 2))?;
    incr_by(ctx, arg(args, 1), by)
}

pub(crate) fn decrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let by = int_arg(arg(args, 2))?;
    let neg = by.checked_neg().ok_or_else(|| CmdError::Msg("ERR decrement would overflow".into()))?;
    incr_by(ctx, arg(args, 1), neg)
}

pub(crate) fn append(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let old = ctx.txn.meta_for_write(key)?;
    let (body, expire) = match &old {
        Some(m) if m.kind != KeyType::String => return Err(CmdError::WrongType),
        Some(m) => ([m.body.as_slice(), arg(args, 2)].concat(), m.expire_ms),
        None => (arg(args, 2).to_vec(), 0),
    };
    let len = body.len() as i64;
    string::write(&mut ctx.txn, key, old.as_ref(), body, expire);
    Ok(Reply::Int(len))
}

pub(crate) fn strlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(string_value(ctx, arg(args, 1))?.map(|v| v.len() as i64).unwrap_or(0)))
}

pub(crate) use crate::keyspace::MAX_STRING;

/// A float increment's result as Redis prints it: plain digits, no exponent.
pub(crate) fn float_reply(v: f64) -> Vec<u8> {
    format!("{v}").into_bytes()
}

pub(crate) fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let not_float = || CmdError::Msg("ERR value is not a valid float".into());
    let by = crate::numbers::parse_f64(arg(args, 2)).ok_or_else(not_float)?;
    let old = ctx.txn.meta_for_write(key)?;
    let (cur, expire) = match &old {
        None => (0.0, 0),
        Some(m) if m.kind != KeyType::String => return Err(CmdError::WrongType),
        Some(m) => (crate::numbers::parse_f64(&m.body).ok_or_else(not_float)?, m.expire_ms),
    };
    let new = cur + by;
    if !new.is_finite() {
        return Err(CmdError::Msg("ERR increment would produce NaN or Infinity".into()));
    }
    let text = float_reply(new);
    string::write(&mut ctx.txn, key, old.as_ref(), text.clone(), expire);
    // The result, not the sum: a replica's arithmetic may round otherwise
    // (Redis adds in long double).
    ctx.propagate_as(vec![vec![
        Bytes::from_static(b"SET"),
        Bytes::copy_from_slice(key),
        Bytes::from(text.clone()),
        Bytes::from_static(b"KEEPTTL"),
    ]]);
    Ok(Reply::bulk_vec(text))
}

pub(crate) fn getex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    // None: leave the expiry; Some(0): PERSIST; Some(t): expire at t.
    let mut set: Option<u64> = None;
    let mut option: Option<&'static str> = None;
    let mut i = 2;
    while let Some(a) = args.get(i) {
        let o = ["persist", "ex", "px", "exat", "pxat"].into_iter().find(|o| is(a, o));
        let Some(o) = o.filter(|o| option.is_none_or(|p| p == *o)) else { return Err(CmdError::Syntax) };
        option = Some(o);
        if o == "persist" {
            set = Some(0);
        } else {
            let Some(n) = args.get(i + 1) else { return Err(CmdError::Syntax) };
            set = Some(option_expire_at(ctx, o, n, "getex")?);
            i += 1;
        }
        i += 1;
    }
    let Some(old) = (if set.is_some() { ctx.txn.meta_for_write(key)? } else { ctx.txn.meta(key)? }) else {
        return Ok(Reply::Nil);
    };
    if old.kind != KeyType::String {
        return Err(CmdError::WrongType);
    }
    if let Some(at) = set {
        string::set_expiry(&mut ctx.txn, key, &old, at)?;
        if ctx.txn.is_past(at) {
            // The key was deleted: replicas get a DEL, as from Redis, not
            // an expiry in the past (which a Redis replica keeps).
            ctx.propagate_as(vec![vec![Bytes::from_static(b"DEL"), Bytes::copy_from_slice(key)]]);
        }
    }
    Ok(Reply::bulk_vec(old.body))
}

pub(crate) fn getrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (start, end) = (int_arg(arg(args, 2))?, int_arg(arg(args, 3))?);
    let v = string_value(ctx, arg(args, 1))?.unwrap_or_default();
    let len = v.len() as i64;
    // Redis's rules: count back from the end, then clamp both ends to the string.
    let start = if start < 0 { len.saturating_add(start).max(0) } else { start };
    let end = if end < 0 { len.saturating_add(end).max(0) } else { end }.min(len - 1);
    if len == 0 || start > end {
        return Ok(Reply::bulk(b""));
    }
    Ok(Reply::bulk(v.get(start as usize..=end as usize).unwrap_or_default()))
}

pub(crate) fn setrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let offset = int_arg(arg(args, 2))?;
    let value = arg(args, 3);
    if offset < 0 {
        return Err(CmdError::Msg("ERR offset is out of range".into()));
    }
    let old = ctx.txn.meta_for_write(key)?;
    let (mut body, expire) = match &old {
        None => (Vec::new(), 0),
        Some(m) if m.kind != KeyType::String => return Err(CmdError::WrongType),
        Some(m) => (m.body.clone(), m.expire_ms),
    };
    if value.is_empty() {
        // Nothing to write: the key is neither created nor changed.
        return Ok(Reply::Int(body.len() as i64));
    }
    let end = (offset as u64).saturating_add(value.len() as u64);
    if end > MAX_STRING {
        return Err(CmdError::Msg("ERR string exceeds maximum allowed size (proto-max-bulk-len)".into()));
    }
    let (offset, end) = (offset as usize, end as usize);
    if body.len() < end {
        body.resize(end, 0);
    }
    body[offset..end].copy_from_slice(value);
    let len = body.len() as i64;
    string::write(&mut ctx.txn, key, old.as_ref(), body, expire);
    Ok(Reply::Int(len))
}

/// SET's key for COMMAND GETKEYSANDFLAGS (Redis's setGetKeys): read and
/// updated with GET, else overwritten.
pub(crate) fn command_keys(args: &[Bytes]) -> Vec<(usize, u32)> {
    use super::spec::key_flag::{ACCESS, OW, RW, UPDATE};
    let get = args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
    vec![(1, if get { RW | ACCESS | UPDATE } else { OW | UPDATE })]
}
