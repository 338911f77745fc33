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

/// Batches of up to 300 records of random keys (some keys several times in
/// one batch), linked in key order once past `SORT_BATCH`: point lookups
/// at any sequence and a full scan agree with the model.
#[test]
fn big_batches_of_random_keys_match_the_model() {
    for seed in 0..4 {
        let region = region();
        let mem = std::sync::Arc::new(Memtable::new(1, region.clone(), PathBuf::from("sim.pm"), 1, 64 << 10));
        let mut values = region.allocate(1, 64, 1).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut model: BTreeMap<Vec<u8>, Vec<(u64, Option<u64>)>> = BTreeMap::new();
        let mut seq = 1u64;
        while seq < 3000 {
            let n = rng.gen_range(1..300usize);
            let keys: Vec<Vec<u8>> = (0..n).map(|_| format!("k{}", rng.gen_range(0..500)).into_bytes()).collect();
            let mut records: Vec<(Kind, &[u8], u64, u32, u32)> = Vec::new();
            for (i, key) in keys.iter().enumerate() {
                let s = seq + i as u64;
                let value = if rng.gen_bool(0.15) {
                    records.push((Kind::Delete, key, 0, 0, 0));
                    None
                } else {
                    let mut slot = values.reserve(8).unwrap();
                    slot.write(0, &s.to_le_bytes()).unwrap();
                    records.push((Kind::Put, key, slot.offset(), 8, 0));
                    Some(s)
                };
                model.entry(key.clone()).or_default().push((s, value));
            }
            mem.add_batch(seq, &records).unwrap();
            seq += n as u64;
        }
        for _ in 0..3000 {
            let key = format!("k{}", rng.gen_range(0..510)).into_bytes();
            let at = if rng.gen_bool(0.5) { seq } else { rng.gen_range(0..seq) };
            let want = match model.get(&key).and_then(|v| v.iter().filter(|(s, _)| *s <= at).max_by_key(|(s, _)| *s)) {
                None => Lookup::Missing,
                Some((_, None)) => Lookup::Deleted,
                Some((_, Some(v))) => Lookup::Found(v.to_le_bytes().to_vec()),
            };
            assert_eq!(mem.get(&key, crate::key::key_hash(&key), at).unwrap(), want, "seed {seed}");
        }
        // Every version, in internal-key order (user key up, newest first).
        let mut it = mem.iter();
        it.seek_to_first().unwrap();
        let mut seen: Vec<(Vec<u8>, u64)> = Vec::new();
        while it.valid() {
            let p = crate::key::ParsedKey::parse(it.key()).unwrap();
            seen.push((p.user_key.to_vec(), p.seq));
            it.next().unwrap();
        }
        let mut want: Vec<(Vec<u8>, u64)> =
            model.iter().flat_map(|(k, vs)| vs.iter().map(move |(s, _)| (k.clone(), *s))).collect();
        want.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        assert_eq!(seen, want, "seed {seed}");
    }
}
