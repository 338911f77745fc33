//! Lists (Valkey's `t_list.c`): elements live under
//! `L | klen | key | index u64 BE` for indexes head..tail, which the meta
//! holds; a push on the left decrements head, on the right increments
//! tail. An edit in the middle rewrites the elements after it (O(n), as
//! those commands are in Redis). A list emptied is deleted (a `del` event).

use super::Txn;
use crate::keyspace::{list_key, member_prefix, tag, Meta, LIST_MID};
use crate::pubsub::events::LIST;
use crate::store::{StoreError, StoreResult};

fn exhausted() -> StoreError {
    StoreError("list index space exhausted".into())
}

/// The number of elements of the list whose meta is `meta`.
pub fn len(meta: &Meta) -> u64 {
    let (head, tail) = meta.list_bounds();
    tail.saturating_sub(head)
}

/// Pushes `values` one by one onto the left (or right) end of the list at
/// `key` (meta `old`, none for a new list, which this creates); returns
/// the new length.
pub fn push<V: AsRef<[u8]>>(
    txn: &mut Txn<'_>,
    key: &[u8],
    old: Option<&Meta>,
    values: impl IntoIterator<Item = V>,
    left: bool,
) -> StoreResult<u64> {
    let (mut head, mut tail) = old.map(Meta::list_bounds).unwrap_or((LIST_MID, LIST_MID));
    for v in values {
        if left {
            head = head.checked_sub(1).ok_or_else(exhausted)?;
            txn.put(list_key(key, head), v.as_ref().to_vec());
        } else {
            txn.put(list_key(key, tail), v.as_ref().to_vec());
            tail = tail.checked_add(1).ok_or_else(exhausted)?;
        }
    }
    let expire = old.map(|m| m.expire_ms).unwrap_or(0);
    txn.put_meta(key, old, &Meta::list(head, tail, expire));
    Ok(tail.saturating_sub(head))
}

/// Removes and returns up to `n` elements from one end of the list at
/// `key` (meta `old`). With `note`, notes `lpop`/`rpop` (before the `del`
/// of an emptied list, in Redis's order); LMOVE notes its own events.
pub fn pop_n(txn: &mut Txn<'_>, key: &[u8], old: &Meta, left: bool, n: u64, note: bool) -> StoreResult<Vec<Vec<u8>>> {
    let (mut head, mut tail) = old.list_bounds();
    let n = n.min(tail.saturating_sub(head));
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let idx = if left { head } else { tail - 1 };
        let k = list_key(key, idx);
        out.push(txn.get(&k)?.unwrap_or_default());
        txn.delete(k);
        if left {
            head += 1;
        } else {
            tail -= 1;
        }
    }
    if note && n > 0 {
        txn.note_class(LIST, if left { "lpop" } else { "rpop" }, key);
    }
    if head == tail {
        txn.drop_meta(key, old);
    } else if n > 0 {
        txn.put_meta(key, Some(old), &Meta::list(head, tail, old.expire_ms));
    }
    Ok(out)
}

/// The elements at positions `start..=stop` (from the head, in range) of
/// the list at `key` (meta `meta`).
pub fn range(txn: &mut Txn<'_>, key: &[u8], meta: &Meta, start: u64, stop: u64) -> StoreResult<Vec<Vec<u8>>> {
    let (head, _) = meta.list_bounds();
    let from = list_key(key, head.saturating_add(start));
    let to = list_key(key, head.saturating_add(stop).saturating_add(1));
    let want = usize::try_from(stop.saturating_sub(start).saturating_add(1)).unwrap_or(usize::MAX);
    Ok(txn.scan(&from, Some(&to), want)?.into_iter().map(|(_, v)| v).collect())
}

/// Every element of the list at `key`, in order.
pub fn elements(txn: &mut Txn<'_>, key: &[u8]) -> StoreResult<Vec<Vec<u8>>> {
    Ok(txn.scan_prefix(&member_prefix(tag::LIST, key))?.into_iter().map(|(_, v)| v).collect())
}

/// The element at position `i` (from the head, in range) of the list at
/// `key` (meta `meta`).
pub fn get(txn: &mut Txn<'_>, key: &[u8], meta: &Meta, i: u64) -> StoreResult<Option<Vec<u8>>> {
    let (head, _) = meta.list_bounds();
    txn.get(&list_key(key, head.saturating_add(i)))
}

/// Replaces the element at position `i` (from the head, in range) of the
/// list at `key` (meta `meta`).
pub fn set(txn: &mut Txn<'_>, key: &[u8], meta: &Meta, i: u64, value: Vec<u8>) {
    let (head, _) = meta.list_bounds();
    txn.put(list_key(key, head + i), value);
}

/// Keeps only positions `keep = (start, stop)` (from the head, in range)
/// of the list at `key` (meta `meta`); `None` keeps nothing and deletes
/// the key (a `del` event).
pub fn trim(txn: &mut Txn<'_>, key: &[u8], meta: &Meta, keep: Option<(u64, u64)>) -> StoreResult<()> {
    let (head, tail) = meta.list_bounds();
    let Some((start, stop)) = keep else {
        txn.delete_key(key, meta)?;
        txn.note("del", key);
        return Ok(());
    };
    let (new_head, new_tail) = (head + start, head + stop + 1);
    for idx in (head..new_head).chain(new_tail..tail) {
        txn.delete(list_key(key, idx));
    }
    txn.put_meta(key, Some(meta), &Meta::list(new_head, new_tail, meta.expire_ms));
    Ok(())
}

/// Replaces the elements `before` of the list at `key` (meta `old`) by
/// `items`, dropping the key when there are none; writes only the
/// positions whose element changed.
pub fn rewrite(txn: &mut Txn<'_>, key: &[u8], old: &Meta, before: &[Vec<u8>], items: Vec<Vec<u8>>) {
    let (head, tail) = old.list_bounds();
    if items.is_empty() {
        for i in head..tail {
            txn.delete(list_key(key, i));
        }
        txn.drop_meta(key, old);
        return;
    }
    let new_tail = head + items.len() as u64;
    for (j, v) in items.into_iter().enumerate() {
        if before.get(j) != Some(&v) {
            txn.put(list_key(key, head + j as u64), v);
        }
    }
    for i in new_tail..tail {
        txn.delete(list_key(key, i));
    }
    txn.put_meta(key, Some(old), &Meta::list(head, new_tail, old.expire_ms));
}

/// Pops an element from one end of the list `src` (meta `sm`) and pushes
/// it onto one end of the list `dst` (meta `dm`, none if missing);
/// returns it, `None` if `src` had none. The events are the command's.
pub fn move_element(
    txn: &mut Txn<'_>,
    (src, sm): (&[u8], &Meta),
    (dst, dm): (&[u8], Option<&Meta>),
    from_left: bool,
    to_left: bool,
) -> StoreResult<Option<Vec<u8>>> {
    if let (true, Some(m)) = (src == dst, dm) {
        if len(m) == 1 {
            // One element moved onto its own list: nothing changes (and
            // the key is not emptied on the way), but the move happened.
            let v = get(txn, src, m, 0)?.unwrap_or_default();
            txn.put_meta(src, Some(m), m);
            return Ok(Some(v));
        }
    }
    let Some(v) = pop_n(txn, src, sm, from_left, 1, false)?.pop() else { return Ok(None) };
    // Reads see this transaction's writes: dst is loaded after the pop
    // (the same list when src == dst).
    let dm = txn.meta_for_write(dst)?;
    push(txn, dst, dm.as_ref(), [&v], to_left)?;
    Ok(Some(v))
}
