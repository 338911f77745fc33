//! Hash commands: HSET, HMSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS,
//! HDEL, HEXISTS, HLEN, HINCRBY, HINCRBYFLOAT, HSTRLEN. A small hash keeps
//! its fields packed in its meta entry ([`crate::keyspace::packed`]); one
//! that outgrows it keeps each field under `H | klen | key | field`.

use bytes::Bytes;

use super::{arg, int_arg, read_typed, write_typed, wrong_args, CmdError, CmdResult, Ctx};
use crate::keyspace::{member_key, member_prefix, packed, KeyType, Meta, Pairs};
use crate::resp::Reply;
use crate::store::StoreError;

fn corrupt(key: &[u8]) -> CmdError {
    CmdError::Store(StoreError(format!("corrupt packed hash '{}'", String::from_utf8_lossy(key))))
}

/// Where a hash's fields are, as a command that changes it sees them.
enum Fields {
    /// Packed in the meta (or a new hash): every field, sorted by name.
    Packed(Vec<(Vec<u8>, Vec<u8>)>),
    /// One engine entry per field.
    Entries,
}

/// A hash loaded to be changed; [`HashWrite::finish`] stages the result.
struct HashWrite {
    /// The meta as loaded (none: a new hash).
    old: Option<Meta>,
    fields: Fields,
    count: u64,
    changed: bool,
}

impl HashWrite {
    fn load(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<HashWrite, CmdError> {
        let old = write_typed(ctx, key, KeyType::Hash)?;
        let fields = match &old {
            // A new hash starts packed.
            None => Fields::Packed(Vec::new()),
            Some(m) if m.packed => Fields::Packed(
                packed::decode(&m.body)
                    .ok_or_else(|| corrupt(key))?
                    .into_iter()
                    .map(|(f, v)| (f.to_vec(), v.to_vec()))
                    .collect(),
            ),
            Some(_) => Fields::Entries,
        };
        let count = old.as_ref().map(Meta::count).unwrap_or(0);
        Ok(HashWrite { old, fields, count, changed: false })
    }

    fn get(&self, ctx: &mut Ctx<'_>, key: &[u8], f: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
        Ok(match &self.fields {
            Fields::Packed(pairs) => pairs
                .binary_search_by(|(pf, _)| pf.as_slice().cmp(f))
                .ok()
                .and_then(|i| pairs.get(i))
                .map(|(_, v)| v.clone()),
            Fields::Entries => ctx.txn.get(&member_key(b'H', key, f))?,
        })
    }

    /// Sets `f = v`; returns whether the field is new. `known` is what the
    /// caller already read of the field (saves a second read).
    fn set(
        &mut self,
        ctx: &mut Ctx<'_>,
        key: &[u8],
        f: &[u8],
        v: Vec<u8>,
        known: Option<bool>,
    ) -> Result<bool, CmdError> {
        self.changed = true;
        let new = match &mut self.fields {
            Fields::Packed(pairs) => match pairs.binary_search_by(|(pf, _)| pf.as_slice().cmp(f)) {
                Ok(i) => {
                    if let Some(slot) = pairs.get_mut(i) {
                        slot.1 = v;
                    }
                    false
                }
                Err(i) => {
                    pairs.insert(i, (f.to_vec(), v));
                    true
                }
            },
            Fields::Entries => {
                let fk = member_key(b'H', key, f);
                let existed = match known {
                    Some(e) => e,
                    None => ctx.txn.get(&fk)?.is_some(),
                };
                ctx.txn.put(fk, v);
                !existed
            }
        };
        if new {
            self.count += 1;
        }
        Ok(new)
    }

    /// Removes `f`; returns whether it was there.
    fn del(&mut self, ctx: &mut Ctx<'_>, key: &[u8], f: &[u8]) -> Result<bool, CmdError> {
        let gone = match &mut self.fields {
            Fields::Packed(pairs) => match pairs.binary_search_by(|(pf, _)| pf.as_slice().cmp(f)) {
                Ok(i) => {
                    pairs.remove(i);
                    true
                }
                Err(_) => false,
            },
            Fields::Entries => {
                let fk = member_key(b'H', key, f);
                let there = ctx.txn.get(&fk)?.is_some();
                if there {
                    ctx.txn.delete(fk);
                }
                there
            }
        };
        if gone {
            self.changed = true;
            self.count = self.count.saturating_sub(1);
        }
        Ok(gone)
    }

    /// Stages the changed hash: packed while it fits, moved to one entry
    /// per field (for good) once it does not, dropped when empty.
    fn finish(self, ctx: &mut Ctx<'_>, key: &[u8]) {
        if !self.changed {
            return;
        }
        let expire_ms = self.old.as_ref().map(|m| m.expire_ms).unwrap_or(0);
        match self.fields {
            Fields::Packed(pairs) if pairs.is_empty() => {
                if let Some(o) = &self.old {
                    ctx.txn.drop_meta(key, o);
                }
            }
            Fields::Packed(pairs) if packed::fits(&pairs) => {
                ctx.txn.put_meta(key, self.old.as_ref(), &Meta::packed_hash(&pairs, expire_ms));
            }
            Fields::Packed(pairs) => {
                let n = pairs.len() as u64;
                for (f, v) in pairs {
                    ctx.txn.put(member_key(b'H', key, &f), v);
                }
                ctx.txn.put_meta(key, self.old.as_ref(), &Meta::collection(KeyType::Hash, n, expire_ms));
            }
            Fields::Entries => {
                if let Some(o) = &self.old {
                    ctx.txn.put_count(key, Some(o), o.clone(), self.count);
                }
            }
        }
    }
}

/// Sets fields; returns how many were new. With `only_new`, existing
/// fields are left alone.
fn set_fields(ctx: &mut Ctx<'_>, key: &[u8], pairs: &[Bytes], only_new: bool) -> Result<i64, CmdError> {
    let mut h = HashWrite::load(ctx, key)?;
    let mut added = 0;
    for pair in pairs.chunks(2) {
        let [f, v] = pair else { continue };
        let known = if only_new {
            let there = h.get(ctx, key, f)?.is_some();
            if there {
                continue;
            }
            Some(false)
        } else {
            None
        };
        if h.set(ctx, key, f, v.to_vec(), known)? {
            added += 1;
        }
    }
    h.finish(ctx, key);
    Ok(added)
}

/// A hash as a read-only command sees it.
enum HashRead {
    /// No such key (or expired).
    Missing,
    /// Fields packed in this meta body.
    Packed(Meta),
    /// One engine entry per field.
    Entries,
}

fn load_read(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<HashRead, CmdError> {
    Ok(match read_typed(ctx, key, KeyType::Hash)? {
        None => HashRead::Missing,
        Some(m) if m.packed => HashRead::Packed(m),
        Some(_) => HashRead::Entries,
    })
}

/// The value of field `f` of a loaded hash.
fn read_field(ctx: &mut Ctx<'_>, key: &[u8], h: &HashRead, f: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    match h {
        HashRead::Missing => Ok(None),
        HashRead::Packed(m) => Ok(packed::find(&m.body, f).map_err(|()| corrupt(key))?.map(<[u8]>::to_vec)),
        HashRead::Entries => Ok(ctx.txn.get(&member_key(b'H', key, f))?),
    }
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
    match load_read(ctx, key)? {
        HashRead::Missing => Ok(Vec::new()),
        HashRead::Packed(m) => Ok(packed::decode(&m.body)
            .ok_or_else(|| corrupt(key))?
            .into_iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect()),
        HashRead::Entries => {
            let prefix = member_prefix(b'H', key);
            let n = prefix.len();
            Ok(ctx
                .txn
                .scan_prefix(&prefix)?
                .into_iter()
                .map(|(k, v)| (k.get(n..).unwrap_or_default().to_vec(), v))
                .collect())
        }
    }
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
    let mut h = HashWrite::load(ctx, key)?;
    if h.old.is_none() {
        return Ok(Reply::Int(0));
    }
    let mut removed = 0;
    for f in args.iter().skip(2) {
        if h.del(ctx, key, f)? {
            removed += 1;
        }
    }
    h.finish(ctx, key);
    Ok(Reply::Int(removed))
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
    let mut h = HashWrite::load(ctx, key)?;
    let f = arg(args, 2);
    let cur = h.get(ctx, key, f)?;
    let base = match &cur {
        None => 0,
        Some(v) => {
            crate::numbers::parse_i64(v).ok_or_else(|| CmdError::Msg("ERR hash value is not an integer".into()))?
        }
    };
    let new = base.checked_add(by).ok_or_else(|| CmdError::Msg("ERR increment or decrement would overflow".into()))?;
    h.set(ctx, key, f, new.to_string().into_bytes(), Some(cur.is_some()))?;
    h.finish(ctx, key);
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
    let mut h = HashWrite::load(ctx, key)?;
    let f = arg(args, 2);
    let cur = h.get(ctx, key, f)?;
    let base = match &cur {
        None => 0.0,
        Some(v) => crate::numbers::parse_f64(v).ok_or_else(|| CmdError::Msg("ERR hash value is not a float".into()))?,
    };
    let new = base + by;
    if !new.is_finite() {
        return Err(CmdError::Msg("ERR increment would produce NaN or Infinity".into()));
    }
    let text = super::strings::float_reply(new);
    h.set(ctx, key, f, text.clone(), Some(cur.is_some()))?;
    h.finish(ctx, key);
    Ok(Reply::bulk_vec(text))
}

/// HSTRLEN: the length of a field's value (0 if missing).
pub(crate) fn hstrlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let h = load_read(ctx, key)?;
    Ok(Reply::Int(read_field(ctx, key, &h, arg(args, 2))?.map(|v| v.len() as i64).unwrap_or(0)))
}
