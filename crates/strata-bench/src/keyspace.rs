//! How `--partitions` and `--key_ranges` lay the key numbers `[0, num)`
//! out, and which of them the deletehalf benchmarks keep.
//!
//! The key numbers are cut into P *contiguous* parts: part j holds
//! `[ceil(j·num/P), ceil((j+1)·num/P))`, so key i is in part
//! `floor(i·P/num)`. Contiguous rather than `i % P` so that one range
//! delete covers exactly one part: dropping the odd partitions, one
//! `delete_range` per odd part and point deletes of the odd parts' keys
//! then remove the same keys, and the three methods can be compared. With
//! `--partitions=P` each part is a partition of its own (a StrataKV
//! partition, a RocksDB column family); with `--key_ranges=P` the parts
//! are ranges of the one key space.
//!
//! The deletehalf benchmarks delete the odd parts (P/2 of them, rounded
//! down); the even parts survive. Reads draw from all of `[0, num)` as
//! db_bench does, or, with `--read_keys=survivors` (and after a deletehalf
//! in the same run), uniformly from the surviving key numbers.

use crate::keygen::Mt64;

/// The parts of the key numbers and the survivors of a deletehalf.
#[derive(Clone, Debug)]
pub struct KeySpace {
    num: u64,
    parts: u64,
    partitioned: bool,
    survivors_only: bool,
    /// (first key number, surviving key numbers before it) of each surviving part.
    kept: Vec<(u64, u64)>,
    kept_total: u64,
}

impl KeySpace {
    /// `parts` contiguous parts of `[0, num)` (at least one), each its own
    /// partition when `partitioned`.
    pub fn new(num: u64, parts: u64, partitioned: bool) -> KeySpace {
        let parts = parts.max(1);
        let mut ks = KeySpace { num, parts, partitioned, survivors_only: false, kept: Vec::new(), kept_total: 0 };
        for j in (0..parts).step_by(2) {
            let (lo, hi) = ks.range(j);
            ks.kept.push((lo, ks.kept_total));
            ks.kept_total += hi - lo;
        }
        ks
    }

    /// The number of parts.
    pub fn parts(&self) -> u64 {
        self.parts
    }

    /// Whether each part is a partition of its own.
    pub fn partitioned(&self) -> bool {
        self.partitioned
    }

    /// The part key number `k` belongs to.
    pub fn part_of(&self, k: u64) -> u64 {
        if self.num == 0 {
            return 0;
        }
        let p = u128::from(k.min(self.num - 1)) * u128::from(self.parts) / u128::from(self.num);
        u64::try_from(p).unwrap_or(self.parts - 1)
    }

    /// The partition an operation on key number `k` addresses (0, the
    /// engine's default key space, without partitions).
    pub fn partition_of(&self, k: u64) -> usize {
        if self.partitioned {
            usize::try_from(self.part_of(k)).unwrap_or(0)
        } else {
            0
        }
    }

    /// The key numbers `[lo, hi)` of part `j`.
    pub fn range(&self, j: u64) -> (u64, u64) {
        let start = |j: u64| {
            let x = (u128::from(j.min(self.parts)) * u128::from(self.num)).div_ceil(u128::from(self.parts));
            u64::try_from(x).unwrap_or(self.num)
        };
        (start(j), start(j + 1))
    }

    /// The parts a deletehalf deletes: the odd ones.
    pub fn doomed(&self) -> Vec<u64> {
        (1..self.parts).step_by(2).collect()
    }

    /// Key numbers in the surviving (even) parts.
    pub fn survivors(&self) -> u64 {
        self.kept_total
    }

    /// Whether reads draw from the survivors only.
    pub fn survivors_only(&self) -> bool {
        self.survivors_only
    }

    /// Makes reads draw from the survivors only (or from all key numbers).
    pub fn set_survivors_only(&mut self, on: bool) {
        self.survivors_only = on;
    }

    /// The next key number a read asks for: `rng.below(num)` as db_bench
    /// draws it, or a uniform draw among the survivors.
    pub fn draw(&self, rng: &mut Mt64) -> u64 {
        if !self.survivors_only {
            return rng.below(self.num);
        }
        let r = rng.below(self.kept_total);
        let i = self.kept.partition_point(|&(_, before)| before <= r).saturating_sub(1);
        self.kept.get(i).map_or(0, |&(lo, before)| lo + (r - before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_contiguous_and_cover_every_key() {
        for (num, parts) in [(10u64, 3u64), (1000, 16), (7, 7), (1_000_003, 16), (5, 1)] {
            let ks = KeySpace::new(num, parts, true);
            let mut next = 0;
            for j in 0..parts {
                let (lo, hi) = ks.range(j);
                assert_eq!(lo, next, "num {num} parts {parts} part {j}");
                assert!(hi > lo, "every part holds a key");
                for k in [lo, hi - 1] {
                    assert_eq!(ks.part_of(k), j, "key {k}");
                }
                next = hi;
            }
            assert_eq!(next, num);
        }
    }

    #[test]
    fn odd_parts_are_deleted_even_ones_survive() {
        let ks = KeySpace::new(1600, 16, true);
        assert_eq!(ks.doomed(), vec![1, 3, 5, 7, 9, 11, 13, 15]);
        assert_eq!(ks.survivors(), 800);
        // Parts of 62.5 keys: the even ones get the 63-key halves.
        assert_eq!(KeySpace::new(1000, 16, true).survivors(), 504);
        let ks = KeySpace::new(10, 3, false);
        assert_eq!(ks.doomed(), vec![1]);
        assert_eq!(ks.survivors(), 10 - 3);
        assert_eq!(ks.partition_of(9), 0, "without partitions every key is in the default key space");
        assert_eq!(KeySpace::new(10, 1, false).doomed(), Vec::<u64>::new());
    }

    #[test]
    fn draws_are_db_bench_draws_or_uniform_over_survivors() {
        let mut ks = KeySpace::new(1000, 4, true);
        let (mut a, mut b) = (Mt64::new(7), Mt64::new(7));
        for _ in 0..100 {
            assert_eq!(ks.draw(&mut a), b.below(1000));
        }
        ks.set_survivors_only(true);
        let mut hits = [0u32; 4];
        for _ in 0..20_000 {
            let k = ks.draw(&mut a);
            assert!(k < 1000);
            hits[ks.part_of(k) as usize] += 1;
        }
        assert_eq!((hits[1], hits[3]), (0, 0), "never a deleted part");
        assert!(hits[0] > 9000 && hits[2] > 9000, "{hits:?}");
        // Every surviving key number can be drawn.
        let small = {
            let mut s = KeySpace::new(9, 3, false);
            s.set_survivors_only(true);
            s
        };
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            seen.insert(small.draw(&mut a));
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 6, 7, 8]);
    }

    #[test]
    fn an_empty_key_space_draws_zero() {
        let mut ks = KeySpace::new(0, 1, false);
        ks.set_survivors_only(true);
        assert_eq!(ks.draw(&mut Mt64::new(1)), 0);
        assert_eq!(ks.part_of(5), 0);
    }
}
