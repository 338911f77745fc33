//! Sorted sets (Valkey's `t_zset.c`): a member's score lives under
//! `Z | klen | key | member` (f64 LE bits), the score order under
//! `z | klen | key | sortable(score) | member`; the meta holds the member
//! count. A sorted set emptied by a removal is deleted (a `del` event).

use super::Txn;
use crate::keyspace::{
    member_key, member_prefix, prefix_end, score_from_sortable, sortable_score, tag, zindex_key, KeyType, Meta,
};
use crate::numbers::ScoreBound;
use crate::pubsub::events::ZSET;
use crate::store::StoreResult;

/// Members with their scores, in order.
pub type Scored = Vec<(Vec<u8>, f64)>;

/// Every score: `[-inf, +inf]`.
pub const ALL: (ScoreBound, ScoreBound) =
    (ScoreBound { value: f64::NEG_INFINITY, exclusive: false }, ScoreBound { value: f64::INFINITY, exclusive: false });

fn decode_score(v: &[u8]) -> Option<f64> {
    Some(f64::from_le_bytes(v.get(..8)?.try_into().ok()?))
}

/// The score of `member` in the sorted set at `key`, if it is there.
pub fn score(txn: &mut Txn<'_>, key: &[u8], member: &[u8]) -> StoreResult<Option<f64>> {
    Ok(txn.get(&member_key(tag::ZSET, key, member))?.as_deref().and_then(decode_score))
}

/// Every member of the sorted set at `key` with its score, in member order.
pub fn all_members(txn: &mut Txn<'_>, key: &[u8]) -> StoreResult<Scored> {
    let prefix = member_prefix(tag::ZSET, key);
    let n = prefix.len();
    Ok(txn
        .scan_prefix(&prefix)?
        .into_iter()
        .map(|(k, v)| (k.get(n..).unwrap_or_default().to_vec(), decode_score(&v).unwrap_or(0.0)))
        .collect())
}

/// Stores `member` at `score` with its index entry, replacing the index
/// entry at `old` (its score before, if it had one). The count is the
/// caller's to keep.
pub fn put_member(txn: &mut Txn<'_>, key: &[u8], member: &[u8], score: f64, old: Option<f64>) {
    let score = if score == 0.0 { 0.0 } else { score };
    if let Some(o) = old {
        txn.delete(zindex_key(key, o, member));
    }
    txn.put(zindex_key(key, score, member), Vec::new());
    txn.put(member_key(tag::ZSET, key, member), score.to_le_bytes().to_vec());
}

/// Removes `member` (at `score`) and its index entry. The count is the
/// caller's to keep.
pub fn remove_member(txn: &mut Txn<'_>, key: &[u8], member: &[u8], score: f64) {
    txn.delete(zindex_key(key, score, member));
    txn.delete(member_key(tag::ZSET, key, member));
}

/// Removes `items` (members with their scores, all present) from the
/// sorted set at `key` (meta `old`), deleting the key when none is left.
pub fn remove_items(txn: &mut Txn<'_>, key: &[u8], old: &Meta, items: &[(Vec<u8>, f64)]) {
    for (m, s) in items {
        remove_member(txn, key, m, *s);
    }
    let n = items.len() as u64;
    if n > 0 {
        txn.put_count(key, Some(old), old.clone(), old.count().saturating_sub(n));
    }
}

/// ZADD's conditions.
#[derive(Default)]
pub struct AddFlags {
    /// Only add new members.
    pub nx: bool,
    /// Only update existing members.
    pub xx: bool,
    /// Update only to a greater score.
    pub gt: bool,
    /// Update only to a lower score.
    pub lt: bool,
    /// Add the given score to the current one.
    pub incr: bool,
}

/// What [`add`] did.
pub struct Added {
    /// Members that were new.
    pub added: i64,
    /// Members whose score changed.
    pub changed: i64,
    /// The last pair's new score (`None`: its update was skipped).
    pub last: Option<f64>,
}

/// Adds or updates the `(score, member)` pairs in the sorted set at `key`
/// (meta `old`, none for a new set, which this creates); `None` when a
/// resulting score is NaN (INCR of an infinity by its opposite).
pub fn add(
    txn: &mut Txn<'_>,
    key: &[u8],
    old: Option<&Meta>,
    f: &AddFlags,
    pairs: &[(f64, &[u8])],
) -> StoreResult<Option<Added>> {
    let mut count = old.map(Meta::count).unwrap_or(0);
    let mut out = Added { added: 0, changed: 0, last: None };
    for &(by, member) in pairs {
        let cur = score(txn, key, member)?;
        let new = match (f.incr, cur) {
            (true, Some(c)) => c + by,
            _ => by,
        };
        if new.is_nan() {
            return Ok(None);
        }
        match cur {
            Some(c) => {
                if f.nx || (f.gt && new <= c) || (f.lt && new >= c) {
                    out.last = None;
                    continue;
                }
                if new != c {
                    put_member(txn, key, member, new, Some(c));
                    out.changed += 1;
                }
            }
            None => {
                if f.xx {
                    out.last = None;
                    continue;
                }
                put_member(txn, key, member, new, None);
                out.added += 1;
                count += 1;
            }
        }
        out.last = Some(new);
    }
    let meta = old.cloned().unwrap_or_else(|| Meta::collection(KeyType::ZSet, 0, 0));
    if out.added > 0 || old.is_none() {
        txn.put_count(key, old, meta, count);
    }
    Ok(Some(out))
}

/// Removes `members` from the sorted set at `key` (meta `old`), deleting
/// the key when none is left; returns how many were there.
pub fn remove<M: AsRef<[u8]>>(
    txn: &mut Txn<'_>,
    key: &[u8],
    old: &Meta,
    members: impl IntoIterator<Item = M>,
) -> StoreResult<u64> {
    let mut removed = 0;
    for m in members {
        let m = m.as_ref();
        if let Some(s) = score(txn, key, m)? {
            remove_member(txn, key, m, s);
            removed += 1;
        }
    }
    if removed > 0 {
        txn.put_count(key, Some(old), old.clone(), old.count().saturating_sub(removed));
    }
    Ok(removed)
}

/// Walks the score index of `key` from `min` upward, calling `visit` with
/// each (member, score) inside [min, max] until it returns false.
pub fn walk(
    txn: &mut Txn<'_>,
    key: &[u8],
    min: ScoreBound,
    max: ScoreBound,
    mut visit: impl FnMut(&[u8], f64) -> bool,
) -> StoreResult<()> {
    let prefix = member_prefix(tag::ZSCORE, key);
    let plen = prefix.len();
    let mut start = prefix.clone();
    start.extend_from_slice(&sortable_score(min.value));
    let mut upper = prefix.clone();
    upper.extend_from_slice(&sortable_score(max.value));
    let end = prefix_end(&upper).or_else(|| prefix_end(&prefix));
    // Small first (a LIMIT or a rank near the start stops early), then
    // larger reads for a long walk.
    let mut chunk_len = 32;
    loop {
        let chunk = txn.scan(&start, end.as_deref(), chunk_len)?;
        let short = chunk.len() < chunk_len;
        chunk_len = (chunk_len * 4).min(1024);
        for (k, _) in &chunk {
            let Some(rest) = k.get(plen..) else { continue };
            let (Some(score), Some(member)) = (score_from_sortable(rest), rest.get(8..)) else { continue };
            if !min.below(score) {
                continue;
            }
            if !max.above(score) {
                return Ok(());
            }
            if !visit(member, score) {
                return Ok(());
            }
        }
        match chunk.last() {
            Some((k, _)) if !short => {
                start = k.clone();
                start.push(0);
            }
            _ => return Ok(()),
        }
    }
}

/// Every member in [min, max] with its score, in score order.
pub fn in_scores(txn: &mut Txn<'_>, key: &[u8], min: ScoreBound, max: ScoreBound) -> StoreResult<Scored> {
    let mut items = Vec::new();
    walk(txn, key, min, max, |m, s| {
        items.push((m.to_vec(), s));
        true
    })?;
    Ok(items)
}

/// The members at ranks `lo..=hi` (0: the lowest score) with their scores.
pub fn by_rank(txn: &mut Txn<'_>, key: &[u8], lo: u64, hi: u64) -> StoreResult<Scored> {
    let mut items = Vec::new();
    let mut idx = 0u64;
    walk(txn, key, ALL.0, ALL.1, |m, s| {
        if idx >= lo {
            items.push((m.to_vec(), s));
        }
        idx += 1;
        idx <= hi
    })?;
    Ok(items)
}

/// The members in [min, max] after skipping `offset`, at most `take` of
/// them, in score order.
pub fn by_score(
    txn: &mut Txn<'_>,
    key: &[u8],
    (min, max): (ScoreBound, ScoreBound),
    offset: usize,
    take: usize,
) -> StoreResult<Scored> {
    let mut items = Vec::new();
    let mut skip = offset;
    walk(txn, key, min, max, |m, s| {
        if skip > 0 {
            skip -= 1;
            return true;
        }
        items.push((m.to_vec(), s));
        items.len() < take
    })?;
    Ok(items)
}

/// The rank of `member`, whose score is `score`, in the sorted set at
/// `key`: how many members come before it (lower scores, then equal
/// scores with smaller names).
pub fn rank(txn: &mut Txn<'_>, key: &[u8], member: &[u8], score: f64) -> StoreResult<u64> {
    let mut before = 0;
    walk(txn, key, ALL.0, ScoreBound { value: score, exclusive: false }, |m, s| {
        if s < score || m < member {
            before += 1;
            true
        } else {
            false
        }
    })?;
    Ok(before)
}

/// One end of a lex range.
pub enum Lex {
    /// `-`: below everything.
    Min,
    /// `+`: above everything.
    Max,
    /// `[x` (inclusive) or `(x` (exclusive).
    At(Vec<u8>, bool),
}

impl Lex {
    /// Whether `m` is at or above this lower end.
    fn admits_from_below(&self, m: &[u8]) -> bool {
        match self {
            Lex::Min => true,
            Lex::Max => false,
            Lex::At(v, incl) => m > v.as_slice() || (*incl && m == v.as_slice()),
        }
    }

    /// Whether `m` is at or below this upper end.
    fn admits_from_above(&self, m: &[u8]) -> bool {
        match self {
            Lex::Min => false,
            Lex::Max => true,
            Lex::At(v, incl) => m < v.as_slice() || (*incl && m == v.as_slice()),
        }
    }
}

/// The members (with scores) in the lex range `min..max` of the sorted set
/// at `key`. As in Redis it is meant for sets whose members all have one
/// score: the members are walked in the set's (score, member) order, from
/// the first at or past the lower bound while they are within the upper
/// one (mirrored, highest first, with `rev`).
pub fn by_lex(txn: &mut Txn<'_>, key: &[u8], min: &Lex, max: &Lex, rev: bool) -> StoreResult<Scored> {
    let mut all = in_scores(txn, key, ALL.0, ALL.1)?;
    Ok(if rev {
        all.reverse();
        let start = all.iter().position(|(m, _)| max.admits_from_above(m)).unwrap_or(all.len());
        all.into_iter().skip(start).take_while(|(m, _)| min.admits_from_below(m)).collect()
    } else {
        let start = all.iter().position(|(m, _)| min.admits_from_below(m)).unwrap_or(all.len());
        all.into_iter().skip(start).take_while(|(m, _)| max.admits_from_above(m)).collect()
    })
}

/// Removes and returns up to `n` members with the lowest (or, with `max`,
/// highest) scores of the sorted set at `key` (meta `old`), noting
/// `zpopmin`/`zpopmax` before the `del` of an emptied set, in Redis's
/// order. ZPOPMAX walks the whole score index (the keyspace scans forward
/// only): O(n) where Redis is O(log n).
pub fn pop_n(txn: &mut Txn<'_>, key: &[u8], old: &Meta, max: bool, n: u64) -> StoreResult<Scored> {
    let mut items = Vec::new();
    if n > 0 {
        if max {
            items = in_scores(txn, key, ALL.0, ALL.1)?;
            let keep = items.len().saturating_sub(n as usize);
            items.drain(..keep);
            items.reverse();
        } else {
            walk(txn, key, ALL.0, ALL.1, |m, s| {
                items.push((m.to_vec(), s));
                (items.len() as u64) < n
            })?;
        }
    }
    for (m, s) in &items {
        remove_member(txn, key, m, *s);
    }
    if !items.is_empty() {
        let left = old.count().saturating_sub(items.len() as u64);
        txn.note_class(ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
        txn.put_count(key, Some(old), old.clone(), left);
    }
    Ok(items)
}

/// Replaces `dst`, whatever it holds, by a sorted set of `items` without
/// expiry; an empty result deletes it (a `del` event if it existed).
/// Returns the new set's size.
pub fn store(txn: &mut Txn<'_>, dst: &[u8], items: Scored) -> StoreResult<u64> {
    let old = txn.meta_for_write(dst)?;
    if let Some(o) = &old {
        txn.delete_key(dst, o)?;
    }
    let n = items.len() as u64;
    for (m, s) in &items {
        put_member(txn, dst, m, *s, None);
    }
    if n > 0 {
        txn.put_count(dst, None, Meta::collection(KeyType::ZSet, 0, 0), n);
    } else if old.is_some() {
        txn.note("del", dst);
    }
    Ok(n)
}
