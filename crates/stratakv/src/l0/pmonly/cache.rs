//! ListDB's L0 lookup cache: a DRAM direct-mapped table from key hash to
//! the node of the key's newest flushed version. A flush overwrites the
//! bucket of every key it links, so a bucket holds either the newest
//! flushed version of its key or another key's node; a reader compares the
//! key. A slot also carries 16 bits of the number of the log extent the
//! node is in: a reader uses the slot only if its view still leases that
//! extent, so a node whose extent was freed (and perhaps reused) is never
//! read.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of a slot holding the node's region offset.
const OFF_BITS: u32 = 48;

/// The cache.
#[derive(Debug)]
pub(crate) struct LookupCache {
    slots: Box<[AtomicU64]>,
    mask: u64,
    /// Lookups the cache answered.
    pub hits: AtomicU64,
}

impl LookupCache {
    /// A cache of at most `bytes` of DRAM (None for less than one slot).
    pub fn new(bytes: usize) -> Option<LookupCache> {
        let n = (bytes / 8).checked_next_power_of_two()?;
        let n = if n * 8 > bytes { n / 2 } else { n };
        if n == 0 {
            return None;
        }
        Some(LookupCache {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            mask: n as u64 - 1,
            hits: AtomicU64::new(0),
        })
    }

    /// DRAM it takes.
    pub fn dram_bytes(&self) -> usize {
        self.slots.len() * 8
    }

    fn slot(&self, hash: u64) -> Option<&AtomicU64> {
        self.slots.get(((hash >> 20) & self.mask) as usize)
    }

    /// Points `hash`'s bucket at the node at `off`, in the log extent
    /// numbered `log`.
    pub fn insert(&self, hash: u64, off: u64, log: u64) {
        if let Some(s) = self.slot(hash) {
            s.store(off | (log & 0xffff) << OFF_BITS, Ordering::Release);
        }
    }

    /// The node `hash`'s bucket points at, with its extent tag.
    pub fn probe(&self, hash: u64) -> Option<(u64, u64)> {
        let w = self.slot(hash)?.load(Ordering::Acquire);
        (w != 0).then_some((w & ((1 << OFF_BITS) - 1), w >> OFF_BITS))
    }

    /// Whether extent number `log` matches the tag `probe` returned.
    pub fn tag_matches(tag: u64, log: u64) -> bool {
        tag == log & 0xffff
    }

    /// Asks for the cache line of `hash`'s bucket.
    pub fn prefetch(&self, hash: u64) {
        if let Some(s) = self.slot(hash) {
            strata_pmem::prefetch(s);
        }
    }
}
