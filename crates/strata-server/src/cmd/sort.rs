//! SORT and SORT_RO over a list, set or sorted set: numeric or ALPHA
//! order, BY an external key (a `*` pattern, `key->field` for a hash
//! field; a pattern without `*` keeps the original order), LIMIT, GET
//! patterns (`#` is the element), ASC/DESC and STORE. As Redis does, a
//! set sorted BY a constant is still ordered when stored or when a script
//! asks (so replies do not depend on a set's internal order).

use std::cmp::Ordering;

use bytes::Bytes;

use super::{arg, hashes, int_arg, is, lists, sets, strings, CmdError, CmdResult, Ctx};
use crate::keyspace::KeyType;
use crate::resp::Reply;

/// The value a pattern names for `elem`: a string key's value or a hash
/// field; `None` when missing, of another type, or the pattern has no `*`.
fn lookup(ctx: &mut Ctx<'_>, pattern: &[u8], elem: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&c| c == b'*') else { return Ok(None) };
    let after = pattern.get(star + 1..).unwrap_or_default();
    let (post, field) = match after.windows(2).position(|w| w == b"->") {
        Some(i) if i + 2 < after.len() => (after.get(..i).unwrap_or_default(), after.get(i + 2..)),
        _ => (after, None),
    };
    let mut key = pattern.get(..star).unwrap_or_default().to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(post);
    let key = Bytes::from(key);
    let r = match field {
        Some(f) => hashes::hget(ctx, &[Bytes::from_static(b"hget"), key, Bytes::copy_from_slice(f)]),
        None => strings::get(ctx, &[Bytes::from_static(b"get"), key]),
    };
    Ok(match r {
        Ok(Reply::Bulk(b)) => Some(b.to_vec()),
        Ok(_) | Err(CmdError::WrongType) => None,
        Err(e) => return Err(e),
    })
}

fn bulks(r: Reply) -> Vec<Vec<u8>> {
    match r {
        Reply::Array(items) | Reply::Set(items) => items
            .into_iter()
            .filter_map(|i| match i {
                Reply::Bulk(b) => Some(b.to_vec()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn sort_generic(ctx: &mut Ctx<'_>, args: &[Bytes], read_only: bool) -> CmdResult {
    let key = Bytes::copy_from_slice(arg(args, 1));
    let (mut by, mut limit, mut gets, mut desc, mut alpha, mut store) = (None, None, Vec::new(), false, false, None);
    let mut i = 2;
    while i < args.len() {
        let a = arg(args, i);
        let left = args.len() - i - 1;
        if is(a, "asc") {
            desc = false;
        } else if is(a, "desc") {
            desc = true;
        } else if is(a, "alpha") {
            alpha = true;
        } else if is(a, "limit") && left >= 2 {
            limit = Some((int_arg(arg(args, i + 1))?, int_arg(arg(args, i + 2))?));
            i += 2;
        } else if is(a, "store") && left >= 1 && !read_only {
            store = Some(Bytes::copy_from_slice(arg(args, i + 1)));
            i += 1;
        } else if is(a, "by") && left >= 1 {
            by = Some(arg(args, i + 1).to_vec());
            i += 1;
        } else if is(a, "get") && left >= 1 {
            gets.push(arg(args, i + 1).to_vec());
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let kind = ctx.txn.meta(&key)?.map(|m| m.kind);
    let name = |n: &'static [u8]| Bytes::from_static(n);
    let mut elems = match kind {
        None => Vec::new(),
        Some(KeyType::List) => bulks(lists::lrange(ctx, &[name(b"lrange"), key.clone(), name(b"0"), name(b"-1")])?),
        Some(KeyType::Set) => bulks(sets::smembers(ctx, &[name(b"smembers"), key.clone()])?),
        Some(KeyType::ZSet) => {
            bulks(super::zrange::zrange(ctx, &[name(b"zrange"), key.clone(), name(b"0"), name(b"-1")])?)
        }
        Some(_) => return Err(CmdError::WrongType),
    };
    let mut dontsort = by.as_ref().is_some_and(|p| !p.contains(&b'*'));
    if dontsort && kind == Some(KeyType::Set) && (store.is_some() || ctx.in_script) {
        (dontsort, alpha, by) = (false, true, None);
    }
    if !dontsort {
        let mut keyed = Vec::with_capacity(elems.len());
        for e in elems {
            let v = match &by {
                Some(p) => lookup(ctx, p, &e)?,
                None => Some(e.clone()),
            };
            let score = if alpha {
                0.0
            } else {
                match &v {
                    None => 0.0,
                    Some(v) => match std::str::from_utf8(v).ok().and_then(|s| s.trim().parse::<f64>().ok()) {
                        Some(f) if !f.is_nan() => f,
                        _ => return Err(CmdError::Msg("ERR One or more scores can't be converted into double".into())),
                    },
                }
            };
            keyed.push((e, v, score));
        }
        keyed.sort_by(|a, b| {
            let cmp = if alpha {
                a.1.cmp(&b.1)
            } else {
                a.2.partial_cmp(&b.2).unwrap_or(Ordering::Equal).then_with(|| a.0.cmp(&b.0))
            };
            if desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        elems = keyed.into_iter().map(|(e, _, _)| e).collect();
    } else if desc && kind != Some(KeyType::Set) {
        elems.reverse();
    }
    if let Some((offset, count)) = limit {
        let len = elems.len() as i64;
        let start = offset.clamp(0, len);
        let end = if count < 0 { len } else { start.saturating_add(count).min(len) };
        elems = elems.get(start as usize..end as usize).unwrap_or_default().to_vec();
    }
    let mut out: Vec<Option<Vec<u8>>> = Vec::new();
    for e in &elems {
        if gets.is_empty() {
            out.push(Some(e.clone()));
        }
        for g in &gets {
            out.push(lookup(ctx, g, e)?);
        }
    }
    match store {
        Some(dest) => {
            // SORT runs under the locks of every stripe (its patterns may
            // name any key): tell WATCH the destination changed, even
            // when the result is empty, as Redis does.
            ctx.shared.locks.bump(&[dest.as_ref()], false);
            // The destination is replaced: `sortstore`, or `del` when the
            // result is empty and it existed (Redis's events).
            let old = ctx.txn.meta_for_write(&dest)?;
            if let Some(o) = &old {
                ctx.txn.delete_key(&dest, o)?;
            }
            let n = out.len();
            if n > 0 {
                let mut push = vec![name(b"rpush"), dest.clone()];
                push.extend(out.into_iter().map(|v| Bytes::from(v.unwrap_or_default())));
                lists::rpush(ctx, &push)?;
                ctx.notify(crate::pubsub::events::LIST, "sortstore", &dest);
            } else if old.is_some() {
                ctx.txn.note("del", &dest);
            }
            Ok(Reply::Int(n as i64))
        }
        None => Ok(Reply::Array(out.into_iter().map(|v| v.map_or(Reply::Nil, Reply::bulk_vec)).collect())),
    }
}

/// SORT's keys for COMMAND GETKEYS (Redis's sortGetKeys): the sorted key,
/// and the STORE destination, found by skipping the options' arguments.
pub(crate) fn command_keys(args: &[Bytes]) -> Vec<(usize, u32)> {
    use super::spec::key_flag::{ACCESS, OW, RO, UPDATE};
    let mut out = vec![(1, RO | ACCESS)];
    let mut i = 2;
    let mut store = None;
    while i < args.len() {
        let a = arg(args, i);
        let skip = if is(a, "limit") {
            2
        } else if is(a, "get") || is(a, "by") {
            1
        } else if is(a, "store") && i + 1 < args.len() {
            // The last STORE wins, as in SORT itself; what follows it is
            // looked at as an option again (as Redis's sortGetKeys does).
            store = Some(i + 1);
            0
        } else {
            0
        };
        i += 1 + skip;
    }
    if let Some(at) = store {
        out.push((at, OW | UPDATE));
    }
    out
}

/// SORT_RO's key for COMMAND GETKEYS: the sorted key.
pub(crate) fn command_keys_ro(_: &[Bytes]) -> Vec<(usize, u32)> {
    use super::spec::key_flag::{ACCESS, RO};
    vec![(1, RO | ACCESS)]
}

pub(crate) fn sort(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    sort_generic(ctx, args, false)
}

pub(crate) fn sort_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    sort_generic(ctx, args, true)
}
