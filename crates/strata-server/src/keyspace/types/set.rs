//! Sets (Valkey's `t_set.c`): each member is an entry
//! `S | klen | key | member` with an empty value; the meta holds the
//! member count. A set emptied by a removal is deleted (a `del` event).

use std::collections::BTreeSet;

use rand::Rng;

use super::Txn;
use crate::keyspace::{member_key, member_prefix, prefix_end, tag, KeyType, Meta};
use crate::pubsub::events::SET;
use crate::store::StoreResult;

/// Whether `member` is in the set at `key`.
pub fn is_member(txn: &mut Txn<'_>, key: &[u8], member: &[u8]) -> StoreResult<bool> {
    Ok(txn.get(&member_key(tag::SET, key, member))?.is_some())
}

/// Every member of the set at `key`, in member order (none if missing).
pub fn members(txn: &mut Txn<'_>, key: &[u8]) -> StoreResult<Vec<Vec<u8>>> {
    let prefix = member_prefix(tag::SET, key);
    let n = prefix.len();
    Ok(txn.scan_prefix(&prefix)?.into_iter().map(|(k, _)| k.get(n..).unwrap_or_default().to_vec()).collect())
}

/// Adds `members` to the set at `key` (`old`: its meta, none for a new
/// set, which this creates); returns how many were not there.
pub fn add<M: AsRef<[u8]>>(
    txn: &mut Txn<'_>,
    key: &[u8],
    old: Option<&Meta>,
    members: impl IntoIterator<Item = M>,
) -> StoreResult<u64> {
    let mut added = 0;
    for m in members {
        let mk = member_key(tag::SET, key, m.as_ref());
        if txn.get(&mk)?.is_none() {
            txn.put(mk, Vec::new());
            added += 1;
        }
    }
    if added > 0 {
        let count = old.map(Meta::count).unwrap_or(0) + added;
        let meta = old.cloned().unwrap_or_else(|| Meta::collection(KeyType::Set, 0, 0));
        txn.put_count(key, old, meta, count);
    }
    Ok(added)
}

/// Removes `members` from the set at `key` (meta `old`), deleting the key
/// when none is left; returns how many were there.
pub fn remove<M: AsRef<[u8]>>(
    txn: &mut Txn<'_>,
    key: &[u8],
    old: &Meta,
    members: impl IntoIterator<Item = M>,
) -> StoreResult<u64> {
    let mut removed = 0;
    for m in members {
        let mk = member_key(tag::SET, key, m.as_ref());
        if txn.get(&mk)?.is_some() {
            txn.delete(mk);
            removed += 1;
        }
    }
    if removed > 0 {
        txn.put_count(key, Some(old), old.clone(), old.count().saturating_sub(removed));
    }
    Ok(removed)
}

/// Removes and returns up to `n` (at least 1) members of the set at `key`
/// (meta `old`), taken from a random point of the member order onwards.
pub fn pop_random(txn: &mut Txn<'_>, key: &[u8], old: &Meta, n: usize) -> StoreResult<Vec<Vec<u8>>> {
    let prefix = member_prefix(tag::SET, key);
    let end = prefix_end(&prefix);
    // Start at a random point of the member space and wrap around.
    let mut start = prefix.clone();
    let random: [u8; 4] = rand::thread_rng().gen();
    start.extend_from_slice(&random);
    let mut picked = txn.scan(&start, end.as_deref(), n)?;
    if picked.len() < n {
        let more = txn.scan(&prefix, Some(&start), n - picked.len())?;
        picked.extend(more);
    }
    let plen = prefix.len();
    let mut out = Vec::with_capacity(picked.len());
    for (k, _) in picked {
        out.push(k.get(plen..).unwrap_or_default().to_vec());
        txn.delete(k);
    }
    if !out.is_empty() {
        txn.put_count(key, Some(old), old.clone(), old.count().saturating_sub(out.len() as u64));
    }
    Ok(out)
}

/// Moves `member` from the set `src` (meta `sm`) to the set `dst` (meta
/// `dm`, none if missing), noting `srem`, the source's `del` if emptied,
/// then `sadd` if the member was new there (Redis's order); returns
/// whether `src` held it. A move onto the same set changes nothing.
pub fn move_member(
    txn: &mut Txn<'_>,
    (src, sm): (&[u8], &Meta),
    (dst, dm): (&[u8], Option<&Meta>),
    member: &[u8],
) -> StoreResult<bool> {
    let sk = member_key(tag::SET, src, member);
    if txn.get(&sk)?.is_none() {
        return Ok(false);
    }
    if src == dst {
        return Ok(true);
    }
    txn.delete(sk);
    txn.note_class(SET, "srem", src);
    txn.put_count(src, Some(sm), sm.clone(), sm.count().saturating_sub(1));
    let dk = member_key(tag::SET, dst, member);
    if txn.get(&dk)?.is_none() {
        txn.put(dk, Vec::new());
        let count = dm.map(Meta::count).unwrap_or(0) + 1;
        let meta = dm.cloned().unwrap_or_else(|| Meta::collection(KeyType::Set, 0, 0));
        txn.put_count(dst, dm, meta, count);
        txn.note_class(SET, "sadd", dst);
    }
    Ok(true)
}

/// Replaces `dst`, whatever it holds, by a set of `members` without
/// expiry; an empty result deletes it (a `del` event if it existed).
/// Returns the new set's size.
pub fn store(txn: &mut Txn<'_>, dst: &[u8], members: BTreeSet<Vec<u8>>) -> StoreResult<u64> {
    let old = txn.meta_for_write(dst)?;
    if let Some(o) = &old {
        txn.delete_key(dst, o)?;
    }
    let n = members.len() as u64;
    for m in members {
        txn.put(member_key(tag::SET, dst, &m), Vec::new());
    }
    if n > 0 {
        txn.put_count(dst, None, Meta::collection(KeyType::Set, 0, 0), n);
    } else if old.is_some() {
        txn.note("del", dst);
    }
    Ok(n)
}
