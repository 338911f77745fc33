//! A cache-line-blocked bloom filter over key hashes, kept in DRAM for
//! rows and segments of rows (rebuilt from the hashes stored in each row).
//!
//! Each key sets `PROBES` bits inside one 512-bit block, so a lookup costs
//! one cache miss per filter.

const BLOCK_BITS: u64 = 512;
const PROBES: u32 = 6;

/// A blocked bloom filter.
#[derive(Clone, Debug, Default)]
pub struct BlockedBloom {
    blocks: Vec<Block>,
}

/// One 512-bit block, aligned to a cache line so a probe costs one miss
/// (an 8-byte-aligned block straddles two lines seven times in eight).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Block([u64; 8]);

fn mix(h: u64) -> u64 {
    // A second, independent-enough hash for the in-block positions.
    let mut x = h ^ (h >> 33);
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

impl BlockedBloom {
    /// A filter sized for `keys` keys at `bits_per_key`.
    pub fn with_capacity(keys: usize, bits_per_key: u32) -> BlockedBloom {
        let bits = (keys as u64 * bits_per_key.max(1) as u64).max(BLOCK_BITS);
        let n = bits.div_ceil(BLOCK_BITS) as usize;
        BlockedBloom { blocks: vec![Block::default(); n] }
    }

    /// A filter holding `hashes`.
    pub fn from_hashes<'a>(hashes: impl IntoIterator<Item = &'a u64>, count: usize, bits_per_key: u32) -> BlockedBloom {
        let mut f = BlockedBloom::with_capacity(count, bits_per_key);
        for h in hashes {
            f.insert(*h);
        }
        f
    }

    fn block_of(&self, h: u64) -> usize {
        (((h >> 32) * self.blocks.len() as u64) >> 32) as usize
    }

    /// Adds a key hash.
    pub fn insert(&mut self, h: u64) {
        let b = self.block_of(h);
        let mut m = mix(h);
        if let Some(block) = self.blocks.get_mut(b) {
            for _ in 0..PROBES {
                let bit = (m & 511) as usize;
                if let Some(w) = block.0.get_mut(bit / 64) {
                    *w |= 1 << (bit % 64);
                }
                m >>= 9;
            }
        }
    }

    /// Asks for the cache line a probe of `h` reads.
    pub fn prefetch(&self, h: u64) {
        if let Some(b) = self.blocks.get(self.block_of(h)) {
            strata_pmem::prefetch(b);
        }
    }

    /// Whether a key with hash `h` may have been inserted.
    pub fn may_contain(&self, h: u64) -> bool {
        let Some(block) = self.blocks.get(self.block_of(h)) else { return true };
        let mut m = mix(h);
        for _ in 0..PROBES {
            let bit = (m & 511) as usize;
            if block.0.get(bit / 64).map(|w| w & (1 << (bit % 64)) == 0).unwrap_or(false) {
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
    use crate::sstable::key_hash;

    #[test]
    fn no_false_negatives_few_false_positives() {
        let hs: Vec<u64> = (0..20_000u32).map(|i| key_hash(&i.to_be_bytes())).collect();
        let f = BlockedBloom::from_hashes(&hs, hs.len(), 10);
        assert!(hs.iter().all(|h| f.may_contain(*h)));
        let fp = (20_000..120_000u32).filter(|i| f.may_contain(key_hash(&i.to_be_bytes()))).count();
        assert!(fp < 3_000, "false positives {fp} of 100000");
    }
}
