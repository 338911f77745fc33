//! SORT and SORT_RO: sort a list, set or sorted set numerically or
//! lexicographically, optionally by the values of other keys (`BY`), take a
//! `LIMIT`, fetch other keys' values for each element (`GET`), and `STORE`
//! the result as a list; following Redis 7's `sortCommandGeneric`.
//!
//! Every argument is locked as a key (the sorted key and STORE's
//! destination among them, so WATCH sees the store); the keys BY and GET
//! patterns name are read without their locks, each read atomic on its
//! own, as another connection's write may land between two of them.

use std::cmp::Ordering;

use bytes::Bytes;

use super::zsets::{walk, ALL};
use super::{arg, int_arg, is, CmdError, CmdResult, Ctx};
use crate::keyspace::{list_key, member_key, member_prefix, KeyType, Meta, LIST_MID};
use crate::resp::Reply;

/// The parsed request.
struct Request<'a> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    store: Option<&'a [u8]>,
    by: Option<&'a [u8]>,
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
}

fn parse<'a>(args: &'a [Bytes], read_only: bool) -> Result<Request<'a>, CmdError> {
    let mut r =
        Request { desc: false, alpha: false, limit: None, store: None, by: None, dont_sort: false, gets: Vec::new() };
    let mut j = 2;
    while j < args.len() {
        let a = arg(args, j);
        let left = args.len() - j - 1;
        if is(a, "asc") {
            r.desc = false;
        } else if is(a, "desc") {
            r.desc = true;
        } else if is(a, "alpha") {
            r.alpha = true;
        } else if is(a, "limit") && left >= 2 {
            r.limit = Some((int_arg(arg(args, j + 1))?, int_arg(arg(args, j + 2))?));
            j += 2;
        } else if is(a, "store") && left >= 1 && !read_only {
            r.store = Some(arg(args, j + 1));
            j += 1;
        } else if is(a, "by") && left >= 1 {
            let p = arg(args, j + 1);
            r.by = Some(p);
            // A pattern with no '*' names one key for every element:
            // nothing to sort by.
            r.dont_sort = !p.contains(&b'*');
            j += 1;
        } else if is(a, "get") && left >= 1 {
            r.gets.push(arg(args, j + 1));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(r)
}

/// The value `pattern` names for element `elem`: `#` is the element, the
/// first `*` is replaced by it, and `key->field` reads a hash field.
fn lookup(ctx: &mut Ctx<'_>, pattern: &[u8], elem: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else { return Ok(None) };
    let after = pattern.get(star + 1..).unwrap_or_default();
    let arrow = after.windows(2).position(|w| w == b"->").filter(|&p| p + 2 < after.len());
    let (key_tail, field) = match arrow {
        Some(p) => (after.get(..p).unwrap_or_default(), after.get(p + 2..)),
        None => (after, None),
    };
    let mut key = pattern.get(..star).unwrap_or_default().to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(key_tail);
    let Some(meta) = ctx.txn.meta(&key)? else { return Ok(None) };
    match field {
        Some(f) if meta.kind == KeyType::Hash => Ok(ctx.txn.get(&member_key(b'H', &key, f))?),
        None if meta.kind == KeyType::String => Ok(Some(meta.body)),
        _ => Ok(None),
    }
}

/// The elements of `key` (list order, set byte order, sorted-set order).
fn elements(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<(Option<KeyType>, Vec<Vec<u8>>), CmdError> {
    let Some(meta) = ctx.txn.meta(key)? else { return Ok((None, Vec::new())) };
    let items = match meta.kind {
        KeyType::List => ctx.txn.scan_prefix(&member_prefix(b'L', key))?.into_iter().map(|(_, v)| v).collect(),
        KeyType::Set => super::sets::members(ctx, key)?,
        KeyType::ZSet => {
            let mut out = Vec::new();
            walk(ctx, key, ALL.0, ALL.1, |m, _| {
                out.push(m.to_vec());
                true
            })?;
            out
        }
        _ => return Err(CmdError::WrongType),
    };
    Ok((Some(meta.kind), items))
}

fn not_double() -> CmdError {
    CmdError::Msg("ERR One or more scores can't be converted into double".into())
}

/// What an element is compared by.
enum SortKey {
    Num(f64),
    Text(Option<Vec<u8>>),
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE dst]
pub(crate) fn sort(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    generic(ctx, args, false)
}

/// SORT_RO: SORT without STORE.
pub(crate) fn sort_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    generic(ctx, args, true)
}

fn generic(ctx: &mut Ctx<'_>, args: &[Bytes], read_only: bool) -> CmdResult {
    let mut r = parse(args, read_only)?;
    let (kind, items) = elements(ctx, arg(args, 1))?;
    // An unsorted set would come out in an arbitrary order: where the
    // result is stored, sort it lexicographically (as Redis does).
    if r.dont_sort && kind == Some(KeyType::Set) && r.store.is_some() {
        (r.dont_sort, r.alpha, r.by) = (false, true, None);
    }
    let mut keyed: Vec<(Vec<u8>, SortKey)> = Vec::with_capacity(items.len());
    for e in items {
        let k = if r.dont_sort {
            SortKey::Num(0.0)
        } else {
            let by = match r.by {
                Some(p) => lookup(ctx, p, &e)?,
                None => Some(e.clone()),
            };
            if r.alpha {
                SortKey::Text(by)
            } else {
                match by {
                    None => SortKey::Num(0.0),
                    Some(v) => {
                        SortKey::Num(crate::numbers::parse_f64(&v).filter(|x| !x.is_nan()).ok_or_else(not_double)?)
                    }
                }
            }
        };
        keyed.push((e, k));
    }
    if !r.dont_sort {
        keyed.sort_by(|(ea, ka), (eb, kb)| {
            let c = match (ka, kb) {
                (SortKey::Num(a), SortKey::Num(b)) => {
                    a.partial_cmp(b).unwrap_or(Ordering::Equal).then_with(|| ea.cmp(eb))
                }
                (SortKey::Text(a), SortKey::Text(b)) => match (a, b) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(a), Some(b)) => a.cmp(b),
                },
                _ => Ordering::Equal,
            };
            if r.desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    let n = keyed.len() as i64;
    let (start, end) = match r.limit {
        None => (0, n - 1),
        Some((off, count)) => {
            let start = off.max(0);
            let end = if count < 0 { n - 1 } else { start.saturating_add(count) - 1 };
            if start >= n {
                (n, n - 1)
            } else {
                (start, end.min(n - 1))
            }
        }
    };
    let chosen = keyed.into_iter().skip(start as usize).take((end - start + 1).max(0) as usize);
    let mut out: Vec<Option<Vec<u8>>> = Vec::new();
    for (e, _) in chosen {
        if r.gets.is_empty() {
            out.push(Some(e));
        } else {
            for g in &r.gets {
                out.push(lookup(ctx, g, &e)?);
            }
        }
    }
    match r.store {
        Some(dst) => store(ctx, dst, out),
        None => Ok(Reply::Array(out.into_iter().map(|v| v.map(Reply::bulk_vec).unwrap_or(Reply::Nil)).collect())),
    }
}

/// Replaces `dst` with a list of `values` (missing ones as empty
/// strings), or deletes it when there are none.
fn store(ctx: &mut Ctx<'_>, dst: &[u8], values: Vec<Option<Vec<u8>>>) -> CmdResult {
    if let Some(old) = ctx.txn.meta_for_write(dst)? {
        ctx.txn.delete_key(dst, &old)?;
    }
    let n = values.len() as u64;
    for (i, v) in values.into_iter().enumerate() {
        ctx.txn.put(list_key(dst, LIST_MID + i as u64), v.unwrap_or_default());
    }
    if n > 0 {
        ctx.txn.put_meta(dst, None, &Meta::list(LIST_MID, LIST_MID + n, 0));
    }
    Ok(Reply::Int(n as i64))
}
