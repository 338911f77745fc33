//! A concurrent blocked bloom filter over the user keys of a memtable, so a
//! lookup that misses the memtable (most of them, once data is in tables)
//! costs one cache line instead of a skiplist search.

use std::sync::atomic::{AtomicU64, Ordering};

const PROBES: u32 = 6;

/// Bits are only ever set, with `fetch_or`, so concurrent inserts and
/// lookups need no lock; a lookup racing an insert of the same key may miss
/// it, which is fine: the entry is not yet published to readers either.
pub(crate) struct AtomicBloom {
    blocks: Box<[Block]>,
}

/// One 512-bit block, aligned to a cache line so a probe costs one miss.
#[derive(Default)]
#[repr(C, align(64))]
struct Block([AtomicU64; 8]);

fn mix(h: u64) -> u64 {
    let mut x = h ^ (h >> 33);
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

impl AtomicBloom {
    /// A filter sized for `keys` keys at about 10 bits each.
    pub fn new(keys: usize) -> AtomicBloom {
        let n = (keys * 10).div_ceil(512).max(1);
        AtomicBloom { blocks: (0..n).map(|_| Default::default()).collect() }
    }

    /// Stores to one word in every 4 KiB page, so the pages are mapped
    /// before the first insert (call before the filter is shared).
    pub fn prefault(&self) {
        for b in self.blocks.iter().step_by(4096 / std::mem::size_of::<Block>()) {
            b.0[0].store(0, Ordering::Relaxed);
        }
    }

    fn block(&self, h: u64) -> Option<&[AtomicU64; 8]> {
        self.blocks.get((((h >> 32) * self.blocks.len() as u64) >> 32) as usize).map(|b| &b.0)
    }

    /// Asks for the cache line a probe of `h` reads (see [`crate::Db::prefetch`]).
    pub fn prefetch(&self, h: u64) {
        if let Some(b) = self.block(h) {
            strata_pmem::prefetch(b);
        }
    }

    /// Adds a key hash.
    pub fn insert(&self, h: u64) {
        let Some(b) = self.block(h) else { return };
        let mut m = mix(h);
        for _ in 0..PROBES {
            let bit = (m & 511) as usize;
            if let Some(w) = b.get(bit / 64) {
                w.fetch_or(1 << (bit % 64), Ordering::Relaxed);
            }
            m >>= 9;
        }
    }

    /// Whether a key with hash `h` may have been inserted.
    pub fn may_contain(&self, h: u64) -> bool {
        let Some(b) = self.block(h) else { return true };
        let mut m = mix(h);
        for _ in 0..PROBES {
            let bit = (m & 511) as usize;
            if b.get(bit / 64).map(|w| w.load(Ordering::Relaxed) & (1 << (bit % 64)) == 0).unwrap_or(false) {
                return false;
            }
            m >>= 9;
        }
        true
    }
}
