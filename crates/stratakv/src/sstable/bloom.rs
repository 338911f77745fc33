//! A bloom filter over the user keys of one table.
//!
//! The byte layout is in FORMAT.md, "SSTable (filter block)".
//! Probe i tests bit `(h1 + i*h2) mod nbits`, with h1/h2 the halves of
//! xxh3-64 of the user key (double hashing, Kirsch-Mitzenmacher).

/// Builds a filter for the given key hashes.
pub fn build(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    let bits_per_key = bits_per_key.clamp(1, 100);
    // ln 2 * bits/key probes minimise the false-positive rate.
    let probes = ((bits_per_key as f64) * 0.69).round().clamp(1.0, 30.0) as u8;
    let nbits = (hashes.len() as u64 * bits_per_key as u64).max(64);
    let nbytes = nbits.div_ceil(8) as usize;
    let nbits = nbytes as u64 * 8;
    let mut out = vec![0u8; nbytes + 1];
    for &h in hashes {
        let (mut x, delta) = split(h);
        for _ in 0..probes {
            let bit = x % nbits;
            if let Some(b) = out.get_mut((bit / 8) as usize) {
                *b |= 1 << (bit % 8);
            }
            x = x.wrapping_add(delta);
        }
    }
    if let Some(last) = out.last_mut() {
        *last = probes;
    }
    out
}

fn split(h: u64) -> (u64, u64) {
    let h1 = h & 0xffff_ffff;
    let h2 = (h >> 32) | 1;
    (h1, h2)
}

/// Whether the key with hash `h` may be in the set. Malformed filters say "maybe".
pub fn may_contain(filter: &[u8], h: u64) -> bool {
    let Some((&probes, bits)) = filter.split_last() else { return true };
    if bits.is_empty() || probes == 0 || probes > 30 {
        return true;
    }
    let nbits = bits.len() as u64 * 8;
    let (mut x, delta) = split(h);
    for _ in 0..probes {
        let bit = x % nbits;
        match bits.get((bit / 8) as usize) {
            Some(b) if b & (1 << (bit % 8)) == 0 => return false,
            _ => {}
        }
        x = x.wrapping_add(delta);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::key_hash;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let hashes: Vec<u64> = (0..10_000u32).map(|i| key_hash(&i.to_le_bytes())).collect();
        let f = build(&hashes, 10);
        assert!(hashes.iter().all(|h| may_contain(&f, *h)));
        let fp = (10_000..110_000u32).filter(|i| may_contain(&f, key_hash(&i.to_le_bytes()))).count();
        // ~1% expected at 10 bits/key.
        assert!(fp < 2_000, "false positives: {fp}");
    }

    #[test]
    fn malformed_filter_says_maybe() {
        assert!(may_contain(&[], 1));
        assert!(may_contain(&[0, 0, 0, 200], 1));
    }
}
