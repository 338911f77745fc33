//! A DRAM hash index over one row: key hash → index of the row's first
//! element of that key, so a point lookup reads PM only for the element it
//! wants (one element, one key) instead of binary-searching the row.
//!
//! It is rebuilt from the key hashes the row stores, like the filters.
//! A slot is a `u32`: the element index plus one in the low `idx_bits`
//! bits (0 = empty), and a fingerprint of the hash in the bits above, so
//! most probes of absent keys end without touching PM. Linear probing at
//! a load of at most `MAX_LOAD` keeps a probe inside one or two cache lines.

/// Highest share of occupied slots.
const MAX_LOAD: f64 = 0.75;

/// Hash index of one row.
#[derive(Debug, Default)]
pub struct HashIndex {
    slots: Vec<u32>,
    idx_bits: u32,
}

impl HashIndex {
    /// An index of `hashes`, the row's stored key hashes in element order.
    /// Versions of one key are adjacent and share a hash: only the first
    /// element of each run of equal hashes is entered.
    pub fn build(hashes: &[u64]) -> HashIndex {
        let n = hashes.len();
        let keys = hashes.iter().zip(hashes.iter().skip(1)).filter(|(a, b)| a != b).count() + usize::from(n > 0);
        let idx_bits = u32::BITS - (n as u32).leading_zeros();
        let cap = ((keys as f64 / MAX_LOAD) as usize + 1).max(8);
        let mut ix = HashIndex { slots: vec![0; cap], idx_bits };
        let mut prev = None;
        for (i, &h) in hashes.iter().enumerate() {
            if prev != Some(h) {
                ix.insert(h, i as u32);
            }
            prev = Some(h);
        }
        ix
    }

    fn home(&self, h: u64) -> usize {
        (((h >> 32) * self.slots.len() as u64) >> 32) as usize
    }

    fn fingerprint(&self, h: u64) -> u32 {
        // The bits above the index; with 32 index bits there are none and
        // every occupied slot on the probe path is a candidate.
        (h as u32).checked_shl(self.idx_bits).unwrap_or(0)
    }

    fn idx_mask(&self) -> u32 {
        1u32.checked_shl(self.idx_bits).map(|b| b - 1).unwrap_or(u32::MAX)
    }

    fn insert(&mut self, h: u64, idx: u32) {
        let cap = self.slots.len();
        let mut pos = self.home(h);
        let slot = self.fingerprint(h) | (idx + 1);
        // The load bound leaves empty slots, so the walk ends.
        while let Some(s) = self.slots.get_mut(pos) {
            if *s == 0 {
                *s = slot;
                return;
            }
            pos = if pos + 1 == cap { 0 } else { pos + 1 };
        }
    }

    /// Element indexes that may begin the run of key hash `h`, in probe
    /// order. Every key of the row is among its hash's candidates; a
    /// candidate may belong to another key (same fingerprint).
    pub fn candidates(&self, h: u64) -> Candidates<'_> {
        Candidates { ix: self, pos: self.home(h), fp: self.fingerprint(h), left: self.slots.len() }
    }

    /// DRAM bytes used.
    pub fn bytes(&self) -> usize {
        self.slots.len() * 4
    }
}

/// Iterator of [`HashIndex::candidates`].
pub struct Candidates<'a> {
    ix: &'a HashIndex,
    pos: usize,
    fp: u32,
    left: usize,
}

impl Iterator for Candidates<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let mask = self.ix.idx_mask();
        while self.left > 0 {
            let s = *self.ix.slots.get(self.pos)?;
            if s == 0 {
                return None;
            }
            self.left -= 1;
            self.pos = if self.pos + 1 == self.ix.slots.len() { 0 } else { self.pos + 1 };
            if s & !mask == self.fp {
                return Some((s & mask) - 1);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sstable::key_hash;

    #[test]
    fn every_run_start_is_a_candidate_and_absent_keys_rarely_are() {
        // Runs of 1-3 versions per key, as a row holds them.
        let mut hashes = Vec::new();
        let mut starts = Vec::new();
        for k in 0..50_000u32 {
            let h = key_hash(&k.to_be_bytes());
            starts.push((h, hashes.len() as u32));
            hashes.extend(std::iter::repeat_n(h, 1 + (k % 3) as usize));
        }
        let ix = HashIndex::build(&hashes);
        for (h, first) in &starts {
            assert!(ix.candidates(*h).any(|c| c == *first), "run at {first} not found");
            assert!(ix.candidates(*h).all(|c| (c as usize) < hashes.len()));
        }
        let fp: usize = (50_000..150_000u32).map(|k| ix.candidates(key_hash(&k.to_be_bytes())).count()).sum();
        // 100k absent keys, 15 fingerprint bits: about 100k * probe length / 32768.
        assert!(fp < 1_000, "{fp} false candidates");
        assert!(ix.bytes() <= starts.len() * 4 * 4 / 3 + 64, "{} bytes", ix.bytes());
    }

    #[test]
    fn colliding_hashes_and_tiny_rows() {
        // Equal hashes everywhere: every run start is still reachable.
        let hashes = [7u64, 7, 9, 7, 7, 7, 9];
        let ix = HashIndex::build(&hashes);
        let c7: Vec<u32> = ix.candidates(7).collect();
        assert!(c7.contains(&0) && c7.contains(&3), "{c7:?}");
        let c9: Vec<u32> = ix.candidates(9).collect();
        assert!(c9.contains(&2) && c9.contains(&6), "{c9:?}");
        assert_eq!(HashIndex::build(&[]).candidates(7).count(), 0);
    }
}
