//! What the model tests share: random values and ranges, and the model's
//! answer for a range.

use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::StdRng;
use rand::Rng;
use stratakv::KeyRange;

/// The model: what the database should hold.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A value: mostly short, some empty, a few over a block and over 2 KiB.
pub fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..100) {
        0..=9 => 0,
        10..=89 => rng.gen_range(1..64),
        90..=98 => rng.gen_range(64..2048),
        _ => rng.gen_range(2048..20_000),
    };
    (0..len).map(|_| rng.gen()).collect()
}

/// A range over keys `k000000..` of `space`: 40 % the keys of one prefix
/// group (what prefix filters serve, a few key lengths around the
/// extractor's 5 bytes, cut from a key `key` draws), otherwise any bounds.
pub fn range(rng: &mut StdRng, space: u32, key: fn(&mut StdRng, u32) -> Vec<u8>) -> KeyRange {
    if rng.gen_bool(0.4) {
        let k = key(rng, space);
        let n = rng.gen_range(3..8).min(k.len());
        return KeyRange::prefix(&k[..n]);
    }
    let mut b = || -> Bound<Vec<u8>> {
        let k = format!("k{:06}", rng.gen_range(0..space)).into_bytes();
        match rng.gen_range(0..3) {
            0 => Bound::Unbounded,
            1 => Bound::Included(k),
            _ => Bound::Excluded(k),
        }
    };
    KeyRange { start: b(), end: b() }
}

/// The model's pairs in `r`, in key order.
pub fn model_range(m: &Model, r: &KeyRange) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().filter(|(k, _)| r.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}
