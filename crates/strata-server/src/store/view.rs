//! Point-in-time read views of a store ([`Backend::snapshot`]): what a
//! full sync or an RDB image reads, while clients keep writing.
//!
//! A view reads the keyspace as it was when the view was taken, in
//! bounded batches ([`SnapshotView::scan`] stops at an entry count or a
//! byte total), so a walk over the whole data set holds one batch at a
//! time, never the data set.
//!
//! [`Backend::snapshot`]: super::Backend::snapshot

use std::collections::BTreeMap;
use std::ops::Bound;

use super::StoreResult;

/// Entries per batch and bytes per batch of a [`SnapshotView::scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// At most this many pairs.
    pub entries: usize,
    /// Stop once the pairs taken (keys and values) reach this many bytes;
    /// at least one pair is always taken, however large.
    pub bytes: usize,
}

impl Batch {
    /// Up to `entries` pairs, at most about `bytes` of them.
    pub fn new(entries: usize, bytes: usize) -> Batch {
        Batch { entries: entries.max(1), bytes: bytes.max(1) }
    }

    /// Whether a batch holding `n` pairs of `bytes` bytes is full.
    pub fn full(&self, n: usize, bytes: usize) -> bool {
        n >= self.entries || bytes >= self.bytes
    }
}

/// A consistent read-only view of one database at the moment it was
/// taken. Writes after that moment are not seen; the view keeps what it
/// reads alive (engine: a registered snapshot sequence) until dropped, so
/// a long-lived view holds back the space of what was overwritten since.
pub trait SnapshotView: Send + Sync {
    /// The value of `key` at the view's point.
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>>;

    /// Pairs with `start <= key < end` (no end: to the last key) at the
    /// view's point, in key order, as many as `batch` allows (fewer only
    /// at the end of the range).
    fn scan(&self, start: &[u8], end: Option<&[u8]>, batch: Batch) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>>;
}

/// Pairs from `next` until `batch` is full or `next` ends.
pub(crate) fn take_batch(
    batch: Batch,
    mut next: impl FnMut() -> StoreResult<Option<(Vec<u8>, Vec<u8>)>>,
) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while !batch.full(out.len(), bytes) {
        match next()? {
            Some((k, v)) => {
                bytes = bytes.saturating_add(k.len() + v.len());
                out.push((k, v));
            }
            None => break,
        }
    }
    Ok(out)
}

/// A view over an owned ordered map: a copy of a store's entries (the
/// memory store, whose data is in DRAM, copies it; see
/// `MemoryStore::snapshot`).
pub struct MapView {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl MapView {
    /// A view of `map`'s entries.
    pub fn new(map: BTreeMap<Vec<u8>, Vec<u8>>) -> MapView {
        MapView { map }
    }
}

impl SnapshotView for MapView {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.map.get(key).cloned())
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, batch: Batch) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        if end.is_some_and(|e| e <= start) {
            return Ok(Vec::new());
        }
        let hi = end.map_or(Bound::Unbounded, Bound::Excluded);
        let mut it = self.map.range::<[u8], _>((Bound::Included(start), hi));
        take_batch(batch, || Ok(it.next().map(|(k, v)| (k.clone(), v.clone()))))
    }
}

/// A view of an empty database (one that does not exist at the view's
/// point, as an engine partition not created yet).
pub struct EmptyView;

impl SnapshotView for EmptyView {
    fn get(&self, _key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        Ok(None)
    }

    fn scan(&self, _start: &[u8], _end: Option<&[u8]>, _batch: Batch) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_stop_at_entries_or_bytes() {
        let map: BTreeMap<Vec<u8>, Vec<u8>> = (0..10u8).map(|i| (vec![i], vec![0; 10])).collect();
        let v = MapView::new(map);
        assert_eq!(v.scan(&[], None, Batch::new(3, 1 << 20)).unwrap().len(), 3);
        // 11 bytes a pair: the pair that reaches 25 bytes is the last.
        assert_eq!(v.scan(&[], None, Batch::new(100, 25)).unwrap().len(), 3);
        // One pair at least, however large.
        assert_eq!(v.scan(&[], None, Batch::new(100, 1)).unwrap().len(), 1);
        assert_eq!(v.scan(&[8], Some(&[9]), Batch::new(100, 1 << 20)).unwrap(), vec![(vec![8], vec![0; 10])]);
        assert!(v.scan(&[9], Some(&[8]), Batch::new(100, 1 << 20)).unwrap().is_empty());
        assert_eq!(v.get(&[4]).unwrap(), Some(vec![0; 10]));
        assert!(EmptyView.scan(&[], None, Batch::new(1, 1)).unwrap().is_empty());
    }
}
