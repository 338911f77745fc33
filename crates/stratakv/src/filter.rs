//! A cache-line-blocked bloom filter over key hashes, in DRAM: the one
//! filter of memtables (filled concurrently by writers) and of matrix rows
//! and segments (rebuilt from the hashes each row stores).
//!
//! Each key sets `PROBES` bits inside one 512-bit block, so a lookup costs
//! one cache miss per filter. (Table filters are a different, on-disk
//! format: `sstable/bloom.rs`.)

use std::sync::atomic::{AtomicU64, Ordering};

const BLOCK_BITS: u64 = 512;
const PROBES: u32 = 6;

/// A blocked bloom filter. Bits are only ever set, with `fetch_or`, so
/// concurrent inserts and lookups need no lock; a lookup racing an insert
/// of the same key may miss it, which is fine: a memtable publishes the
/// entry to readers only after the insert.
#[derive(Debug, Default)]
pub(crate) struct BlockedBloom {
    blocks: Box<[Block]>,
}

/// One 512-bit block, aligned to a cache line so a probe costs one miss
/// (an 8-byte-aligned block straddles two lines seven times in eight).
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Block([AtomicU64; 8]);

impl Clone for BlockedBloom {
    /// A copy of the bits (a matrix segment's filter grows copy-on-write:
    /// readers keep the old one).
    fn clone(&self) -> BlockedBloom {
        let blocks = self
            .blocks
            .iter()
            .map(|b| Block(std::array::from_fn(|i| AtomicU64::new(b.0[i].load(Ordering::Relaxed)))))
            .collect();
        BlockedBloom { blocks }
    }
}

/// A second, independent-enough hash for the in-block positions.
fn mix(h: u64) -> u64 {
    let mut x = h ^ (h >> 33);
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

impl BlockedBloom {
    /// A filter sized for `keys` keys at `bits_per_key`.
    pub fn with_capacity(keys: usize, bits_per_key: u32) -> BlockedBloom {
        let bits = (keys as u64 * bits_per_key.max(1) as u64).max(BLOCK_BITS);
        let n = bits.div_ceil(BLOCK_BITS) as usize;
        BlockedBloom { blocks: (0..n).map(|_| Block::default()).collect() }
    }

    /// A filter holding `hashes`, sized for `count` keys.
    pub fn from_hashes<'a>(hashes: impl IntoIterator<Item = &'a u64>, count: usize, bits_per_key: u32) -> BlockedBloom {
        let mut f = BlockedBloom::with_capacity(count, bits_per_key);
        for h in hashes {
            f.insert_mut(*h);
        }
        f
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

    /// Adds a key hash to a filter nobody else holds: plain stores instead
    /// of `fetch_or` (the matrix builds its filters this way).
    pub fn insert_mut(&mut self, h: u64) {
        let n = self.blocks.len() as u64;
        let Some(b) = self.blocks.get_mut((((h >> 32) * n) >> 32) as usize) else { return };
        let mut m = mix(h);
        for _ in 0..PROBES {
            let bit = (m & 511) as usize;
            if let Some(w) = b.0.get_mut(bit / 64) {
                *w.get_mut() |= 1 << (bit % 64);
            }
            m >>= 9;
        }
    }

    /// Asks for the cache line a probe of `h` reads (see `Db::prefetch`).
    pub fn prefetch(&self, h: u64) {
        if let Some(b) = self.block(h) {
            strata_pmem::prefetch(b);
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

    /// DRAM bytes used.
    pub fn bytes(&self) -> usize {
        self.blocks.len() * 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::key_hash;

    #[test]
    fn no_false_negatives_few_false_positives() {
        let hs: Vec<u64> = (0..20_000u32).map(|i| key_hash(&i.to_be_bytes())).collect();
        let f = BlockedBloom::from_hashes(&hs, hs.len(), 10);
        assert!(hs.iter().all(|h| f.may_contain(*h)));
        let fp = (20_000..120_000u32).filter(|i| f.may_contain(key_hash(&i.to_be_bytes()))).count();
        assert!(fp < 3_000, "false positives {fp} of 100000");
    }

    #[test]
    fn a_clone_keeps_the_bits_and_grows_apart() {
        let f = BlockedBloom::with_capacity(100, 10);
        f.insert(1);
        let mut g = f.clone();
        g.insert_mut(2);
        assert!(g.may_contain(1) && g.may_contain(2));
        assert!(f.may_contain(1));
        assert_eq!(f.bytes(), g.bytes());
    }
}
