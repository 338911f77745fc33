//! A hash index from user key to the skiplist node of its newest version,
//! so a point lookup that hits the memtable costs a couple of cache misses
//! instead of a skiplist search (about twenty misses in a big memtable).
//!
//! Each bucket holds nothing, one node, or "collided". A key's bucket is
//! only ever moved to a newer version of the same key, or to "collided"
//! when a second key lands in it, and never back. So a bucket that is empty
//! or names another key proves the key is absent from the memtable, and a
//! bucket naming the key names its newest version. Inserts finish before
//! their write is published, so every version a reader may see is already
//! accounted for in its bucket.

use std::sync::atomic::{AtomicU32, Ordering};

const EMPTY: u32 = 0;
const COLLIDED: u32 = u32::MAX;

/// What a key's bucket holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Nothing: the key is not in the memtable.
    Empty,
    /// This node: the newest version of the key if the node is the key's
    /// (it may still be too new for the reader); otherwise the key is absent.
    Node(u32),
    /// Two keys share the bucket: search the skiplist.
    Collided,
}

/// The hash index; node numbers are skiplist node indexes (never 0, the head).
pub(crate) struct PointIndex {
    buckets: Box<[AtomicU32]>,
}

fn bucket_of(hash: u64, n: usize) -> usize {
    // The bloom filter uses the high bits for its block; take other bits.
    (((hash.rotate_left(17) & 0xffff_ffff) * n as u64) >> 32) as usize
}

impl PointIndex {
    /// An index with `buckets` buckets (about two per expected key keeps collisions rare).
    pub fn new(buckets: usize) -> PointIndex {
        PointIndex { buckets: (0..buckets.max(1)).map(|_| AtomicU32::new(EMPTY)).collect() }
    }

    /// Stores to one bucket in every 4 KiB page, so the pages are mapped
    /// before the first insert (call before the index is shared).
    pub fn prefault(&self) {
        for b in self.buckets.iter().step_by(4096 / std::mem::size_of::<AtomicU32>()) {
            b.store(EMPTY, Ordering::Relaxed);
        }
    }

    fn bucket(&self, hash: u64) -> Option<&AtomicU32> {
        self.buckets.get(bucket_of(hash, self.buckets.len()))
    }

    /// Asks for the cache line of the bucket of `hash`.
    pub fn prefetch(&self, hash: u64) {
        if let Some(b) = self.bucket(hash) {
            strata_pmem::prefetch(b);
        }
    }

    /// What the bucket of a key hash holds.
    pub fn probe(&self, hash: u64) -> Probe {
        match self.bucket(hash).map(|b| b.load(Ordering::Acquire)) {
            None | Some(COLLIDED) => Probe::Collided,
            Some(EMPTY) => Probe::Empty,
            Some(n) => Probe::Node(n),
        }
    }

    /// Records node `node`, a version of a key with hash `hash`.
    /// `compare(existing)` says whether an existing node is the same key
    /// (`Some`) and if so whether `node` is newer than it (`Some(true)`).
    pub fn record(&self, hash: u64, node: u32, compare: impl Fn(u32) -> Option<bool>) {
        let Some(b) = self.bucket(hash) else { return };
        let mut cur = b.load(Ordering::Acquire);
        loop {
            let new = match cur {
                EMPTY => node,
                COLLIDED => return,
                n => match compare(n) {
                    Some(true) => node,
                    Some(false) => return,
                    None => COLLIDED,
                },
            };
            // Release: a reader that sees the node number sees the node.
            match b.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_move_forward_only() {
        let ix = PointIndex::new(1);
        // Keys: node n belongs to key n / 100; newer means a larger node number.
        let cmp = |new: u32| move |old: u32| (old / 100 == new / 100).then_some(new > old);
        assert_eq!(ix.probe(7), Probe::Empty);
        ix.record(7, 105, cmp(105));
        assert_eq!(ix.probe(7), Probe::Node(105));
        ix.record(7, 103, cmp(103));
        assert_eq!(ix.probe(7), Probe::Node(105));
        ix.record(7, 109, cmp(109));
        assert_eq!(ix.probe(7), Probe::Node(109));
        // A second key in the same (only) bucket: from then on, search.
        ix.record(7, 201, cmp(201));
        assert_eq!(ix.probe(7), Probe::Collided);
        ix.record(7, 110, cmp(110));
        assert_eq!(ix.probe(7), Probe::Collided);
    }
}
