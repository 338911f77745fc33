//! Tests of the tree: a model test against a `BTreeMap` with reopens,
//! concurrent readers during writes, and crash images of the simulated PM
//! taken throughout inserts that split leaves, internal nodes and the root.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::{Backing, Region, RegionOptions, SimPm};

use super::*;

const PATH: &str = "strata.pm";

fn opts(len: u64) -> RegionOptions {
    RegionOptions { len, slot_bytes: 64 << 10, write_latency_ns: 0, create: true, expect_id: None }
}

fn sim_region(len: u64) -> (Region, Arc<SimPm>) {
    let sim = Arc::new(SimPm::new(len as usize));
    let r = Region::open(Backing::Sim(sim.clone()), &opts(len)).unwrap().0;
    (r, sim)
}

/// Opens the tree anchored at `anchor` in a region made from `image`.
fn reopen(image: Vec<u8>, anchor: u64) -> Result<(Region, PmTree)> {
    let len = image.len() as u64;
    let sim = Arc::new(SimPm::from_image(image));
    let region = Region::open(Backing::Sim(sim), &opts(len)).map_err(|e| Error::from_pm(Path::new(PATH), e))?.0;
    let heads = region.heads().map_err(|e| Error::from_pm(Path::new(PATH), e))?;
    let tree = PmTree::open(&region, Path::new(PATH), anchor, &heads)?;
    Ok((region, tree))
}

fn val(i: u64) -> TreeValue {
    TreeValue {
        file: i,
        block_offset: i * 4096 % (1 << 40),
        block_len: (i % 5000) as u32,
        tombstone: i.is_multiple_of(7),
    }
}

/// Keys that share 8-byte prefixes (ties), differ only past the prefix,
/// are shorter than the prefix, or are long; zero-padded numbers (db_bench's
/// keys: nodes skip their common bytes), and keys that are prefixes of
/// others or end in zero bytes (zero padding of entry prefixes ties them).
fn key(i: u64) -> Vec<u8> {
    match i % 6 {
        4 => format!("{:016}", i * 2654435761 % 10_000_000).into_bytes(),
        5 => {
            let mut k = format!("{:012}", i / 6 % 5000).into_bytes();
            k.extend(std::iter::repeat_n(0u8, (i / 30000 % 3) as usize));
            k
        }
        0 => format!("user{:08}", i).into_bytes(),
        1 => format!("sameprefix/{:06}", i * 7919 % 1_000_003).into_bytes(),
        2 => {
            let mut k = vec![b'L'; 300 + (i % 700) as usize];
            k.extend_from_slice(format!("{i}").as_bytes());
            k
        }
        _ => format!("k{}", i).into_bytes(),
    }
}

fn assert_matches(tree: &PmTree, model: &BTreeMap<Vec<u8>, TreeValue>) {
    let got: Vec<_> = tree.range(Bound::Unbounded, Bound::Unbounded).map(|r| r.unwrap()).collect();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "forward scan differs from the model");
    let mut rev: Vec<_> = tree.range_rev(Bound::Unbounded, Bound::Unbounded).map(|r| r.unwrap()).collect();
    rev.reverse();
    assert!(rev == want, "reverse scan differs from the model");
    let rep = tree.check().unwrap();
    assert_eq!(rep.entries, model.len() as u64);
    assert_eq!(tree.stats().entries, model.len() as u64);
}

#[test]
fn empty_tree_and_basic_operations() {
    let (region, _sim) = sim_region(4 << 20);
    let tree = PmTree::create(&region, Path::new(PATH)).unwrap();
    assert_eq!(tree.get(b"a").unwrap(), None);
    assert_eq!(tree.range(Bound::Unbounded, Bound::Unbounded).count(), 0);
    assert_eq!(tree.range_rev(Bound::Unbounded, Bound::Unbounded).count(), 0);
    tree.upsert(b"b", val(1)).unwrap();
    tree.upsert(b"a", val(2)).unwrap();
    tree.upsert(b"b", val(3)).unwrap();
    assert_eq!(tree.get(b"b").unwrap(), Some(val(3)));
    assert!(!tree.replace_if(b"b", 1, val(4)).unwrap());
    assert!(tree.replace_if(b"b", 3, val(4)).unwrap());
    assert!(!tree.replace_if(b"zz", 3, val(4)).unwrap());
    assert!(!tree.remove_if(b"a", 9).unwrap());
    assert!(tree.remove_if(b"a", 2).unwrap());
    assert_eq!(tree.get(b"a").unwrap(), None);
    assert_eq!(tree.stats().entries, 1);
    let big = TreeValue { file: 1 << 63, ..TreeValue::default() };
    assert!(tree.upsert(b"x", big).is_err());
    assert_eq!(tree.extents().len(), 1);
}

#[test]
fn model_with_reopens() {
    let len = 16u64 << 20;
    let (region, sim) = sim_region(len);
    let mut tree = PmTree::create(&region, Path::new(PATH)).unwrap();
    let anchor = tree.anchor();
    let mut _keep = (region, sim);
    let mut model: BTreeMap<Vec<u8>, TreeValue> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(26);
    let universe = 9000u64;
    for round in 0..4 {
        for _ in 0..4000 {
            let i = rng.gen_range(0..universe);
            let k = key(i);
            match rng.gen_range(0..10) {
                0..=4 => {
                    let v = val(rng.gen_range(0..1 << 20));
                    tree.upsert(&k, v).unwrap();
                    model.insert(k, v);
                }
                5 => {
                    let v = val(rng.gen_range(0..1 << 20));
                    let expected = model.get(&k).map(|x| x.file).unwrap_or(7);
                    let expected = if rng.gen_bool(0.8) { expected } else { expected + 1 };
                    let did = tree.replace_if(&k, expected, v).unwrap();
                    let should = model.get(&k).is_some_and(|x| x.file == expected);
                    assert_eq!(did, should);
                    if did {
                        model.insert(k, v);
                    }
                }
                6 | 7 => {
                    let expected = model.get(&k).map(|x| x.file).unwrap_or(7);
                    let did = tree.remove_if(&k, expected).unwrap();
                    assert_eq!(did, model.remove(&k).is_some());
                }
                8 => assert_eq!(tree.get(&k).unwrap(), model.get(&k).copied()),
                _ => {
                    let (a, b) = (key(rng.gen_range(0..universe)), key(rng.gen_range(0..universe)));
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    let got: Vec<_> =
                        tree.range(Bound::Included(&lo), Bound::Excluded(&hi)).take(50).map(|r| r.unwrap()).collect();
                    let want: Vec<_> = model
                        .range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Excluded(&hi)))
                        .take(50)
                        .map(|(k, v)| (k.clone(), *v))
                        .collect();
                    assert!(got == want, "range differs");
                    let got: Vec<_> = tree
                        .range_rev(Bound::Excluded(&lo), Bound::Included(&hi))
                        .take(50)
                        .map(|r| r.unwrap())
                        .collect();
                    let want: Vec<_> = model
                        .range::<Vec<u8>, _>((Bound::Excluded(&lo), Bound::Included(&hi)))
                        .rev()
                        .take(50)
                        .map(|(k, v)| (k.clone(), *v))
                        .collect();
                    assert!(got == want, "reverse range differs");
                }
            }
        }
        assert_matches(&tree, &model);
        // Reopen from a clean image: nothing rebuilt, same content.
        let image = _keep.1.visible_image();
        drop(tree);
        let (r2, t2) = reopen(image, anchor).unwrap();
        tree = t2;
        _keep = (r2.clone(), r2.sim().unwrap().clone());
        assert_matches(&tree, &model);
        let rep = tree.check().unwrap();
        assert!(rep.levels >= 3 || round == 0, "{rep:?}");
    }
    assert!(tree.stats().extents > 1, "{:?}", tree.stats());
}

/// Sorted batches (a flush's and a compaction's indexing): the finger on
/// the last leaf must land every key where a descent would, across splits
/// of leaves, internal nodes and the root, and pauses.
#[test]
fn sorted_batches_match_the_model() {
    let (region, _sim) = sim_region(32 << 20);
    let tree = PmTree::create(&region, Path::new(PATH)).unwrap();
    let mut model: BTreeMap<Vec<u8>, TreeValue> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(2626);
    for round in 0..12u64 {
        let mut keys: Vec<Vec<u8>> = (0..rng.gen_range(1..3000)).map(|_| key(rng.gen_range(0..20_000))).collect();
        keys.sort();
        keys.dedup();
        let mut b = tree.batch();
        for (i, k) in keys.iter().enumerate() {
            if i % 700 == 699 {
                b.pause();
            }
            let v = val(round * 100_000 + i as u64);
            // Every third round re-points only entries of one parity of file.
            let want_old = model.get(k).copied();
            let old = if round % 3 == 2 {
                b.update(k, |old| old.filter(|o| o.file % 2 == 0).map(|_| v)).unwrap()
            } else {
                b.update(k, |_| Some(v)).unwrap()
            };
            assert_eq!(old, want_old, "old value of {k:02x?}");
            if round % 3 != 2 || want_old.is_some_and(|o| o.file % 2 == 0) {
                model.insert(k.clone(), v);
            }
        }
        drop(b);
        assert_matches(&tree, &model);
        tree.check().unwrap();
        // Sorted lookups through one leaf copy at a time agree too.
        let mut probe: Vec<Vec<u8>> = (0..2000).map(|_| key(rng.gen_range(0..20_000))).collect();
        probe.sort();
        probe.dedup();
        let mut gets = tree.sorted_gets();
        for k in &probe {
            assert_eq!(gets.get(k).unwrap(), model.get(k).copied(), "sorted get {k:02x?}");
        }
    }
    assert!(tree.check().unwrap().levels >= 3);
}

#[test]
fn readers_never_miss_a_stable_key_during_writes() {
    let (region, _sim) = sim_region(16 << 20);
    let tree = PmTree::create(&region, Path::new(PATH)).unwrap();
    // Even keys are present throughout; odd keys are inserted, updated
    // and removed while readers run.
    for i in (0..3000u64).step_by(2) {
        tree.upsert(&key(i), val(i)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (tree, stop, reads) = (tree.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(r);
                while !stop.load(Ordering::Relaxed) {
                    let i = rng.gen_range(0..1500u64) * 2;
                    assert_eq!(tree.get(&key(i)).unwrap(), Some(val(i)), "stable key {i} missing");
                    if rng.gen_range(0..20) == 0 {
                        // Every stable key is in a concurrent scan.
                        let n = tree.range(Bound::Unbounded, Bound::Unbounded).inspect(|x| assert!(x.is_ok())).count();
                        assert!(n >= 1500, "a scan saw {n} entries");
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(9);
    for round in 0..3u64 {
        for i in (1..3000u64).step_by(2) {
            tree.upsert(&key(i), val(i + round)).unwrap();
        }
        for _ in 0..500 {
            let i = rng.gen_range(0..1500u64) * 2 + 1;
            let f = tree.get(&key(i)).unwrap().map(|v| v.file).unwrap_or(0);
            tree.remove_if(&key(i), f).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    tree.check().unwrap();
}

/// Crash images at many points of a workload that splits leaves, internal
/// nodes and the root (twice), updates values and removes entries: each
/// reopens without repair, passes `check`, holds every key whose call
/// returned before the crash with its value, and nothing never inserted;
/// a writer then continues on it.
#[test]
fn crash_images_during_splits_updates_and_removes() {
    let every: u64 = std::env::var("STRATA_PMTREE_CRASH_EVERY").ok().and_then(|s| s.parse().ok()).unwrap_or(173);
    let len = 2u64 << 20;
    let (region, sim) = sim_region(len);
    let tree = PmTree::create(&region, Path::new(PATH)).unwrap();
    let anchor = tree.anchor();
    let n = 900u64;
    // Operation log: (key index, value after the op; None = removed).
    type Ops = Vec<(u64, Option<TreeValue>)>;
    let ops: Arc<Mutex<Ops>> = Arc::new(Mutex::new(Vec::new()));
    let acked = Arc::new(AtomicU64::new(0));
    let failures: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let checked = Arc::new(AtomicU64::new(0));
    {
        let (ops, acked, failures, checked) = (ops.clone(), acked.clone(), failures.clone(), checked.clone());
        let mut rng = StdRng::seed_from_u64(77);
        sim.set_observer(Some(Box::new(move |ev, view| {
            if ev % every != 0 {
                return;
            }
            let done = acked.load(Ordering::SeqCst) as usize;
            let ops = ops.lock().clone();
            // The model after every acknowledged op; the op in flight may or may not be applied.
            let mut model: BTreeMap<u64, TreeValue> = BTreeMap::new();
            for (i, v) in &ops[..done] {
                match v {
                    Some(v) => model.insert(*i, *v),
                    None => model.remove(i),
                };
            }
            let in_flight = ops.get(done).copied();
            for img in crate::test_util::crash_images(&view.crash_state(), &mut rng) {
                if let Err(e) = verify_image(img, anchor, &model, in_flight) {
                    failures.lock().push(format!("event {ev}: {e}"));
                }
                checked.fetch_add(1, Ordering::Relaxed);
            }
        })));
    }
    let mut rng = StdRng::seed_from_u64(5);
    let push = |op: (u64, Option<TreeValue>)| ops.lock().push(op);
    for i in 0..n {
        let k = if i % 3 == 0 { i } else { n - i };
        push((k, Some(val(k))));
        tree.upsert(&key(k), val(k)).unwrap();
        acked.fetch_add(1, Ordering::SeqCst);
        if i % 10 == 9 {
            let j = rng.gen_range(0..n);
            if let Some(v) = tree.get(&key(j)).unwrap() {
                if rng.gen_bool(0.5) {
                    let nv = val(j + 100_000);
                    push((j, Some(nv)));
                    assert!(tree.replace_if(&key(j), v.file, nv).unwrap());
                } else {
                    push((j, None));
                    assert!(tree.remove_if(&key(j), v.file).unwrap());
                }
                acked.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    sim.set_observer(None);
    let rep = tree.check().unwrap();
    assert!(rep.levels >= 3, "the workload should split the root twice: {rep:?}");
    let f = failures.lock();
    assert!(f.is_empty(), "{} of {} images failed; first: {}", f.len(), checked.load(Ordering::Relaxed), f[0]);
    assert!(checked.load(Ordering::Relaxed) > 100);
}

fn verify_image(
    img: Vec<u8>,
    anchor: u64,
    model: &BTreeMap<u64, TreeValue>,
    in_flight: Option<(u64, Option<TreeValue>)>,
) -> std::result::Result<(), String> {
    let (_region, tree) = match reopen(img, anchor) {
        Ok(x) => x,
        // The crash came before the tree's first extent or root was durable.
        Err(_) if model.is_empty() => return Ok(()),
        Err(e) => return Err(format!("reopen: {e}")),
    };
    tree.check().map_err(|e| format!("check: {e}"))?;
    let flight_key = in_flight.map(|(i, _)| key(i));
    let found: Vec<(Vec<u8>, TreeValue)> =
        tree.range(Bound::Unbounded, Bound::Unbounded).collect::<Result<_>>().map_err(|e| e.to_string())?;
    let want: BTreeMap<Vec<u8>, TreeValue> = model.iter().map(|(i, v)| (key(*i), *v)).collect();
    for (k, v) in &found {
        if Some(k) == flight_key.as_ref() {
            let ok = want.get(k) == Some(v) || in_flight.and_then(|x| x.1) == Some(*v);
            if !ok {
                return Err(format!("in-flight key {:?} has value {v:?}", String::from_utf8_lossy(k)));
            }
            continue;
        }
        if want.get(k) != Some(v) {
            return Err(format!("key {:?} has {v:?}, want {:?}", String::from_utf8_lossy(k), want.get(k)));
        }
    }
    for (k, v) in &want {
        if Some(k) == flight_key.as_ref() {
            continue;
        }
        if tree.get(k).map_err(|e| e.to_string())? != Some(*v) {
            return Err(format!("acknowledged key {:?} lost", String::from_utf8_lossy(k)));
        }
    }
    // A writer continues on the image: fix-ups of unlinked siblings and
    // half-done shifts, then a clean check.
    for i in 0..60u64 {
        let k = key(1_000_000 + i * 37);
        tree.upsert(&k, val(i)).map_err(|e| format!("upsert after crash: {e}"))?;
    }
    if let Some(k) = &flight_key {
        if let Some(v) = tree.get(k).map_err(|e| e.to_string())? {
            tree.remove_if(k, v.file).map_err(|e| e.to_string())?;
        }
    }
    let rep = tree.check().map_err(|e| format!("check after writes: {e}"))?;
    if rep.pending_truncations > 1 {
        return Err(format!("{rep:?}"));
    }
    Ok(())
}
