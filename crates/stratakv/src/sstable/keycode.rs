//! Order-preserving numeric codes for a table's user keys (TridentKV's
//! string-key encoding), the input of the learned index.
//!
//! A [`KeyCode`] is a mixed-radix number over the symbols seen at each byte
//! position of one group of keys: a position's digit is the rank of the
//! key's byte among the bytes the group's keys have there, with "the key
//! has ended" as the smallest symbol. Positions every key agrees on (the
//! group's common prefix) cost nothing; positions after the last one that
//! tells two adjacent keys apart are left out. Codes stay below 2^53 so
//! that a model can use them as exact `f64`s; [`group_keys`] splits a
//! table's keys into contiguous groups that each fit.
//!
//! For the group's own keys the code is strictly increasing. For any other
//! byte string it is weakly increasing: a probe that falls between two
//! symbols takes the largest code under the smaller one, so a probe never
//! codes above a key it sorts below. That is what lets a lookup of an
//! absent key still land on the right block.

use crate::coding::{put_bytes, put_varint, Reader};

/// Codes are below this, so every code is an exact `f64`.
pub const CODE_LIMIT: u64 = 1 << 53;

/// The symbols seen at one byte position: the bytes, and whether some key ended before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Alphabet {
    bytes: [u64; 4],
    end: bool,
}

/// Where a probe's symbol falls among an alphabet's.
enum Digit {
    /// The symbol is in the alphabet; its rank.
    Exact(u64),
    /// It is not; this many symbols are smaller.
    Between(u64),
}

impl Alphabet {
    fn add(&mut self, b: Option<u8>) {
        match b {
            Some(b) => self.bytes[(b >> 6) as usize] |= 1 << (b & 63),
            None => self.end = true,
        }
    }

    fn radix(&self) -> u64 {
        self.bytes.iter().map(|w| w.count_ones() as u64).sum::<u64>() + self.end as u64
    }

    fn digit(&self, b: Option<u8>) -> Digit {
        let Some(b) = b else {
            return if self.end { Digit::Exact(0) } else { Digit::Between(0) };
        };
        let (word, bit) = ((b >> 6) as usize, b & 63);
        let below: u64 = self.bytes.iter().take(word).map(|w| w.count_ones() as u64).sum::<u64>()
            + self.bytes.get(word).map_or(0, |w| (w & ((1u64 << bit) - 1)).count_ones() as u64)
            + self.end as u64;
        if self.bytes.get(word).is_some_and(|w| w & (1 << bit) != 0) {
            Digit::Exact(below)
        } else {
            Digit::Between(below)
        }
    }
}

/// The code of one group of keys: their common prefix, then one alphabet
/// per position that tells keys apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyCode {
    prefix: Vec<u8>,
    alphabets: Vec<Alphabet>,
    /// `weights[i]` = product of the radices after position i.
    weights: Vec<u64>,
    /// Product of all radices: every code is below it.
    total: u64,
}

impl KeyCode {
    /// The code fitted to `keys` (sorted, distinct), or None if their codes
    /// would not stay below [`CODE_LIMIT`].
    pub fn fit(keys: &[&[u8]]) -> Option<KeyCode> {
        let (first, last) = (keys.first()?, keys.last()?);
        let common = lcp(first, last);
        // Positions up to the last one where two adjacent keys first differ.
        let depth = keys.windows(2).map(|w| lcp(w[0], w[1]) + 1).max().unwrap_or(common).max(common);
        let mut alphabets = vec![Alphabet::default(); depth - common];
        for k in keys {
            for (i, a) in alphabets.iter_mut().enumerate() {
                a.add(k.get(common + i).copied());
            }
        }
        KeyCode::from_parts(first.get(..common)?.to_vec(), alphabets)
    }

    fn from_parts(prefix: Vec<u8>, alphabets: Vec<Alphabet>) -> Option<KeyCode> {
        let mut weights = vec![0u64; alphabets.len()];
        let mut total = 1u64;
        for (i, a) in alphabets.iter().enumerate().rev() {
            weights[i] = total;
            total = total.checked_mul(a.radix().max(1)).filter(|t| *t <= CODE_LIMIT)?;
        }
        Some(KeyCode { prefix, alphabets, weights, total })
    }

    /// The code of any byte string: exact for the group's keys, and never
    /// above the code of a group key that sorts after it (nor below one
    /// that sorts before it).
    pub fn code(&self, key: &[u8]) -> u64 {
        let n = self.prefix.len();
        let head = key.get(..n.min(key.len())).unwrap_or(&[]);
        match head.cmp(self.prefix.get(..head.len()).unwrap_or(&[])) {
            std::cmp::Ordering::Less => return 0,
            std::cmp::Ordering::Greater => return self.total - 1,
            // A proper prefix of the common prefix sorts before every key.
            std::cmp::Ordering::Equal if key.len() < n => return 0,
            std::cmp::Ordering::Equal => {}
        }
        let mut code = 0u64;
        for (i, (a, w)) in self.alphabets.iter().zip(&self.weights).enumerate() {
            let sym = key.get(n + i).copied();
            match a.digit(sym) {
                // Once a key has ended it has ended at every later position,
                // whose digit is then 0.
                Digit::Exact(d) if sym.is_none() => return code + d * w,
                Digit::Exact(d) => code += d * w,
                // Below every key of this subtree: its smallest code.
                Digit::Between(0) => return code,
                // Above every key whose symbol here is the next smaller one,
                // below every key with the next larger: the largest code of
                // the smaller one's subtree.
                Digit::Between(j) => return code + (j - 1) * w + (w - 1),
            }
        }
        code
    }

    /// One more than the largest code.
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// DRAM held.
    pub fn memory_bytes(&self) -> usize {
        self.prefix.len() + self.alphabets.len() * (std::mem::size_of::<Alphabet>() + 8) + 32
    }

    /// Appends the encoding (FORMAT.md, "Learned index block").
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_bytes(dst, &self.prefix);
        put_varint(dst, self.alphabets.len() as u64);
        for a in &self.alphabets {
            dst.push(a.end as u8);
            for w in a.bytes {
                dst.extend_from_slice(&w.to_le_bytes());
            }
        }
    }

    /// Decodes; None if malformed or over [`CODE_LIMIT`].
    pub fn decode(r: &mut Reader<'_>) -> Option<KeyCode> {
        let prefix = r.len_bytes()?.to_vec();
        let n = usize::try_from(r.varint()?).ok()?;
        let mut alphabets = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            let end = match r.u8()? {
                0 => false,
                1 => true,
                _ => return None,
            };
            let mut bytes = [0u64; 4];
            for w in &mut bytes {
                *w = r.u64()?;
            }
            alphabets.push(Alphabet { bytes, end });
        }
        KeyCode::from_parts(prefix, alphabets)
    }
}

/// Length of the common prefix of two byte strings.
fn lcp(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Splits sorted, distinct `keys` into contiguous groups whose codes each
/// fit below [`CODE_LIMIT`], greedily (each group as long as it can be).
/// Returns the index of each group's first key.
pub fn group_keys(keys: &[&[u8]]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut g = GroupFit::default();
    for (i, k) in keys.iter().enumerate() {
        if i == 0 || !g.try_add(keys[i - 1], k) {
            starts.push(i);
            g = GroupFit::start(k);
        }
    }
    starts
}

/// The alphabets of a growing group, to tell whether one more key fits.
#[derive(Default)]
struct GroupFit {
    first: Vec<u8>,
    /// Alphabets by absolute position, of every key so far.
    alphabets: Vec<Alphabet>,
    /// Shortest key so far: every later position has "ended" in its alphabet.
    min_len: usize,
    depth: usize,
}

impl GroupFit {
    fn start(k: &[u8]) -> GroupFit {
        let mut g = GroupFit { first: k.to_vec(), alphabets: Vec::new(), min_len: k.len(), depth: 0 };
        g.record(k);
        g
    }

    fn record(&mut self, k: &[u8]) {
        if self.alphabets.len() < k.len() {
            self.alphabets.resize(k.len(), Alphabet::default());
        }
        for (a, b) in self.alphabets.iter_mut().zip(k) {
            a.add(Some(*b));
        }
        self.min_len = self.min_len.min(k.len());
    }

    /// Adds `k` (after `prev`) if the group's codes still fit.
    fn try_add(&mut self, prev: &[u8], k: &[u8]) -> bool {
        let common = lcp(&self.first, k);
        let depth = self.depth.max(lcp(prev, k) + 1).max(common);
        let radix = |alphabets: &[Alphabet], p: usize, extra: Option<u8>| -> u64 {
            let mut a = alphabets.get(p).copied().unwrap_or_default();
            if p >= self.min_len.min(k.len()) {
                a.end = true;
            }
            if let Some(b) = extra {
                a.add(Some(b));
            }
            a.radix().max(1)
        };
        let mut total = 1u64;
        for p in common..depth {
            total = match total.checked_mul(radix(&self.alphabets, p, k.get(p).copied())) {
                Some(t) if t <= CODE_LIMIT => t,
                _ => return false,
            };
        }
        self.depth = depth;
        self.record(k);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(mut keys: Vec<Vec<u8>>, probes: &[Vec<u8>]) -> Result<(), TestCaseError> {
        keys.sort();
        keys.dedup();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let starts = group_keys(&refs);
        prop_assert!(!starts.is_empty() || keys.is_empty());
        for (gi, &s) in starts.iter().enumerate() {
            let e = starts.get(gi + 1).copied().unwrap_or(keys.len());
            let group = &refs[s..e];
            let code = KeyCode::fit(group).expect("a group fits by construction");
            let mut enc = Vec::new();
            code.encode_to(&mut enc);
            prop_assert_eq!(&KeyCode::decode(&mut Reader::new(&enc)).unwrap(), &code);
            // Strictly increasing on the group's own keys.
            for w in group.windows(2) {
                prop_assert!(code.code(w[0]) < code.code(w[1]), "{:?} !< {:?}", w[0], w[1]);
            }
            // Weakly increasing on everything, group keys and probes mixed.
            let mut all: Vec<&[u8]> = group.to_vec();
            all.extend(probes.iter().map(|p| p.as_slice()));
            all.sort();
            for w in all.windows(2) {
                prop_assert!(code.code(w[0]) <= code.code(w[1]), "{:?} > {:?}", w[0], w[1]);
            }
            for k in &all {
                prop_assert!(code.code(k) < code.total());
            }
        }
        Ok(())
    }

    fn db_bench_key(n: u64) -> Vec<u8> {
        format!("{n:016}").into_bytes()
    }

    fn probes_of(keys: &[Vec<u8>], extra: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut p: Vec<Vec<u8>> = extra.to_vec();
        for k in keys.iter().take(64) {
            let mut a = k.clone();
            a.push(0);
            p.push(a);
            if let Some(l) = k.last() {
                let mut b = k.clone();
                *b.last_mut().unwrap() = l.wrapping_add(1);
                p.push(b);
                p.push(k[..k.len() - 1].to_vec());
            }
        }
        p.push(Vec::new());
        p.push(vec![0xff; 40]);
        p
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Random lengths and bytes, with a shared prefix drawn from a few.
        #[test]
        fn random_keys_keep_their_order(
            head in prop::sample::select(vec![b"".to_vec(), b"user".to_vec(), b"\x00\x00".to_vec(), vec![0xff; 9]]),
            tails in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 1..300),
            extra in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..30), 0..40),
        ) {
            let keys: Vec<Vec<u8>> = tails.iter().map(|t| [head.as_slice(), t].concat()).collect();
            let probes = probes_of(&keys, &extra);
            check(keys, &probes)?;
        }

        /// Small alphabets make long codes and force groups apart.
        #[test]
        fn narrow_alphabets_and_long_keys(
            tails in prop::collection::vec(prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', b'b', b'z', 0xff]), 0..80), 1..300),
            extra in prop::collection::vec(prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', b'c', 0xfe, 0xff]), 0..80), 0..40),
        ) {
            let probes = probes_of(&tails, &extra);
            check(tails, &probes)?;
        }

        /// db_bench keys (16 decimal digits) and YCSB keys ("user" + a hash in decimal).
        #[test]
        fn benchmark_key_shapes(
            nums in prop::collection::vec(any::<u64>(), 1..400),
            bound in prop::sample::select(vec![1_000u64, 4_000_000, u64::MAX]),
        ) {
            let db: Vec<Vec<u8>> = nums.iter().map(|n| db_bench_key(n % bound)).collect();
            let probes = probes_of(&db, &[db_bench_key(bound / 2), b"0".to_vec(), b"1".to_vec()]);
            check(db, &probes)?;
            let ycsb: Vec<Vec<u8>> = nums.iter().map(|n| format!("user{n}").into_bytes()).collect();
            let probes = probes_of(&ycsb, &[b"user".to_vec(), b"user9".to_vec(), b"usea".to_vec()]);
            check(ycsb, &probes)?;
        }
    }

    #[test]
    fn db_bench_keys_need_one_group() {
        let keys: Vec<Vec<u8>> = (0..100_000u64).map(|i| db_bench_key(i * 37)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        assert_eq!(group_keys(&refs), vec![0]);
        let c = KeyCode::fit(&refs).unwrap();
        // Ten digits per position, leading zeros free.
        assert!(c.total() <= 10_000_000, "{}", c.total());
    }

    #[test]
    fn random_binary_keys_split_into_groups_that_fit() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut keys: Vec<Vec<u8>> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_be_bytes().repeat(3)
            })
            .collect();
        keys.sort();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let starts = group_keys(&refs);
        assert!(!starts.is_empty());
        for (i, &s) in starts.iter().enumerate() {
            let e = starts.get(i + 1).copied().unwrap_or(keys.len());
            assert!(KeyCode::fit(&refs[s..e]).is_some());
        }
    }
}
