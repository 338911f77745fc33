//! Memtable point lookups against a model, with the hash index small enough
//! that most buckets collide and with lookups at old sequence numbers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::Region;

use super::*;

fn region() -> Region {
    crate::test_util::sim_region(16 << 20)
}

fn check(capacity: usize, keys: u32, seed: u64) {
    let region = region();
    let mem = Memtable::new(1, region.clone(), PathBuf::from("sim.pm"), 1, capacity);
    let mut values = region.allocate(1, 64, 1).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    // key -> versions (seq, Some(value) or None for a delete)
    let mut model: BTreeMap<Vec<u8>, Vec<(u64, Option<u64>)>> = BTreeMap::new();
    let mut seqs: Vec<u64> = (1..=4000).collect();
    // Inserts arrive a little out of sequence order, as with concurrent writers.
    for i in 0..seqs.len() {
        let j = (i + rng.gen_range(0..4)).min(seqs.len() - 1);
        seqs.swap(i, j);
    }
    for &seq in &seqs {
        let key = format!("k{}", rng.gen_range(0..keys)).into_bytes();
        let value = if rng.gen_bool(0.15) {
            mem.add(seq, Kind::Delete, &key, 0, 0, 0).unwrap();
            None
        } else {
            let mut slot = values.reserve(8).unwrap();
            slot.write(0, &seq.to_le_bytes()).unwrap();
            mem.add(seq, Kind::Put, &key, slot.offset(), 8, 0).unwrap();
            Some(seq)
        };
        model.entry(key).or_default().push((seq, value));
    }
    for _ in 0..4000 {
        let key = format!("k{}", rng.gen_range(0..keys + 10)).into_bytes();
        let at = if rng.gen_bool(0.5) { 4000 } else { rng.gen_range(0..4000) };
        let want = match model.get(&key).and_then(|v| v.iter().filter(|(s, _)| *s <= at).max_by_key(|(s, _)| *s)) {
            None => Lookup::Missing,
            Some((_, None)) => Lookup::Deleted,
            Some((_, Some(v))) => Lookup::Found(v.to_le_bytes().to_vec()),
        };
        let got = mem.get(&key, crate::key::key_hash(&key), at).unwrap();
        assert_eq!(got, want, "key {} at seq {at}", String::from_utf8_lossy(&key));
    }
}

#[test]
fn lookups_match_the_model_with_few_and_many_collisions() {
    for seed in 0..4 {
        // 64 KiB: 2,048 buckets for up to 1,200 keys; 1 KiB: 32 buckets, nearly all collided.
        check(64 << 10, 1200, seed);
        check(1 << 10, 300, seed);
    }
}
