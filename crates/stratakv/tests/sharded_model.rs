//! Model test of the sharded front end: random operations against
//! `Sharded` and a BTreeMap, with flush, compaction, snapshots, both
//! iteration directions (and both at once), async writes and close/reopen,
//! for 1, 2 and 4 shards; they must agree.
//!
//! `STRATA_MODEL_CASES` and `STRATA_MODEL_OPS` scale the run; a failure
//! prints the seed, and `STRATA_MODEL_SEED` replays one case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{model_range, range, value, Model};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use stratakv::{Error, KeyRange, L0Kind, Options, Sharded, ShardedOptions, WriteBatch, META_PREFIX};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    let n = rng.gen_range(0..space);
    match rng.gen_range(0..100) {
        0..=3 => format!("long-key-{n:06}-{}", "x".repeat(rng.gen_range(0..200))).into_bytes(),
        // Keys just below the front end's reserved prefix.
        4 => [&[0xff, 0xff, 0xff, 0xff, 0xff][..], format!("{n}").as_bytes()].concat(),
        _ => format!("k{n:06}").into_bytes(),
    }
}

fn options(rng: &mut StdRng, shards: usize) -> ShardedOptions {
    let mut o = Options::for_tests();
    o.l0 = [L0Kind::Matrix, L0Kind::Sstable][rng.gen_range(0..2)];
    o.write_buffer_size = [8 << 10, 32 << 10][rng.gen_range(0..2)];
    o.max_bytes_for_level_base = 64 << 10;
    o.target_file_size = 16 << 10;
    let mut s = ShardedOptions::new(shards, o);
    s.batch_cap = [1, 4, 32][rng.gen_range(0..3)];
    // Blocking calls applied by the caller (combining) or by the worker.
    s.callers_apply = rng.gen_bool(0.5);
    // A small limit so the coordinator log is emptied while running.
    s.coord_log_limit = [4 << 10, 1 << 20][rng.gen_range(0..2)];
    s
}

/// Steps `it` from both ends at random, as a double-ended iterator allows,
/// and returns the items in key order.
fn zigzag(rng: &mut StdRng, mut it: stratakv::ShardedIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        let item = if rng.gen_bool(0.5) { it.next().map(|x| (true, x)) } else { it.next_back().map(|x| (false, x)) };
        match item {
            Some((true, x)) => front.push(x),
            Some((false, x)) => back.push(x),
            None => break,
        }
    }
    it.status().unwrap();
    front.extend(back.into_iter().rev());
    front
}

fn run_case(seed: u64, ops: u64, shards: usize, counts: &mut [u64; 4]) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let opts = options(&mut rng, shards);
    let space = [50u32, 500, 3000][rng.gen_range(0..3)];
    let mut db = Sharded::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    let mut snaps: Vec<(stratakv::ShardedSnapshot, Model)> = Vec::new();
    for op in 0..ops {
        let ctx = || format!("seed {seed} shards {shards} op {op}");
        match rng.gen_range(0..1000) {
            0..=399 | 960..=989 => {
                let (k, v) = (key(&mut rng, space), value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            400..=469 => {
                let k = key(&mut rng, space);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            470..=549 => {
                // A batch, usually over several shards; one key may repeat.
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = key(&mut rng, space);
                    if rng.gen_bool(0.7) {
                        let v = value(&mut rng);
                        b.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        b.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write_opt(b, rng.gen_bool(0.1)).unwrap();
            }
            550..=579 => {
                // Several writes in flight at once, then a read of each: the
                // queue applies them in order before the reads.
                let mut pending = Vec::new();
                let mut keys = Vec::new();
                for _ in 0..rng.gen_range(1..40) {
                    let (k, v) = (key(&mut rng, space), value(&mut rng));
                    pending.push(db.put_async(&k, &v, false));
                    model.insert(k.clone(), v);
                    keys.push(k);
                }
                let reads: Vec<_> = keys.iter().map(|k| db.get_async(k)).collect();
                for p in pending {
                    p.wait().unwrap();
                }
                for (k, r) in keys.iter().zip(reads) {
                    assert_eq!(r.wait().unwrap().pop().flatten(), model.get(k).cloned(), "async get at {}", ctx());
                }
            }
            580..=779 => {
                let k = key(&mut rng, space);
                assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "get at {}", ctx());
                if op % 4 == 0 {
                    let mut keys: Vec<Vec<u8>> = model.range(k.clone()..).take(24).map(|(k, _)| k.clone()).collect();
                    keys.push([k.as_slice(), b"~"].concat());
                    keys.push(k.clone());
                    keys.reverse();
                    keys.push(k.clone());
                    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
                    assert!(db.multi_get(&keys).unwrap() == want, "multi_get at {}", ctx());
                }
            }
            780..=849 => {
                counts[0] += 1;
                let r = range(&mut rng, space, key);
                let want = model_range(&model, &r);
                let it = db.iter(r.clone()).unwrap();
                let got: Vec<_> = match rng.gen_range(0..3) {
                    0 => it.collect(),
                    1 => {
                        let mut v: Vec<_> = it.rev().collect();
                        v.reverse();
                        v
                    }
                    _ => zigzag(&mut rng, it),
                };
                assert_eq!(got.len(), want.len(), "iter {r:?} at {}", ctx());
                assert!(got == want, "iter {r:?} differs at {}", ctx());
            }
            850..=889 => {
                if snaps.len() < 4 {
                    snaps.push((db.snapshot().unwrap(), model.clone()));
                } else {
                    counts[1] += 1;
                    let i = rng.gen_range(0..snaps.len());
                    let (s, m) = snaps.swap_remove(i);
                    for _ in 0..20 {
                        let k = key(&mut rng, space);
                        assert_eq!(s.get(&k).unwrap(), m.get(&k).cloned(), "snapshot get at {}", ctx());
                    }
                    let got: Vec<_> = s.iter(..).unwrap().rev().collect();
                    let want: Vec<_> = m.into_iter().rev().collect();
                    assert!(got == want, "snapshot iter at {}", ctx());
                }
            }
            890..=929 => db.flush().unwrap(),
            930..=949 => {
                let r = if rng.gen_bool(0.5) { KeyRange::all() } else { range(&mut rng, space, key) };
                db.compact_range(r).unwrap();
            }
            950..=959 => {
                // The reserved prefix is refused everywhere.
                let k = [&META_PREFIX[..], b"x"].concat();
                assert!(matches!(db.put(&k, b"v"), Err(Error::InvalidArgument(_))), "{}", ctx());
                assert!(matches!(db.get(&k), Err(Error::InvalidArgument(_))), "{}", ctx());
                let mut b = WriteBatch::new();
                b.put(b"k000001", b"lost").put(&k, b"v");
                assert!(db.write(b).is_err(), "{}", ctx());
            }
            _ => {
                counts[2] += 1;
                let st = db.stats();
                counts[3] += st.cross_batches;
                snaps.clear();
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    drop(db);
                }
                // Another shard count is refused, never re-hashed.
                let wrong = ShardedOptions { shards: shards + 1, ..opts.clone() };
                match Sharded::open(dir.path(), wrong) {
                    Err(Error::ShardCount { stored, .. }) => assert_eq!(stored, shards),
                    other => panic!("reopen with another count: {other:?} at {}", ctx()),
                }
                db = Sharded::open(dir.path(), opts.clone()).unwrap();
                assert!(db.stats().gsn >= st.gsn, "GSN went back at {}", ctx());
            }
        }
    }
    snaps.clear();
    db.close().unwrap();
    let db = Sharded::open(dir.path(), opts).unwrap();
    let got: Vec<_> = db.iter(..).unwrap().collect();
    let want: Vec<_> = model.into_iter().collect();
    assert!(got == want, "final state differs, seed {seed}");
    db.verify_checksums().unwrap();
}

fn run(shards: usize, base_seed: u64) {
    let cases = env("STRATA_MODEL_CASES", 6);
    let ops = env("STRATA_MODEL_OPS", 3000);
    let seeds: Vec<u64> = match std::env::var("STRATA_MODEL_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(s) => vec![s],
        None => (0..cases).map(|i| base_seed + i).collect(),
    };
    let mut counts = [0u64; 4];
    for seed in &seeds {
        run_case(*seed, ops, shards, &mut counts);
    }
    println!(
        "sharded model[{shards}]: cases={} ops={} range_scans={} snapshot_checks={} reopens={} cross_batches={} mismatches=0",
        seeds.len(),
        ops * seeds.len() as u64,
        counts[0],
        counts[1],
        counts[2],
        counts[3]
    );
    if shards > 1 && seeds.len() > 1 {
        assert!(counts[3] > 0, "no batch ever spanned shards");
    }
}

#[test]
fn sharded_model_1() {
    run(1, 20_000);
}

#[test]
fn sharded_model_2() {
    run(2, 21_000);
}

#[test]
fn sharded_model_4() {
    run(4, 22_000);
}

/// Writers commit batches that set one key in every shard to the same
/// value while readers take snapshots, iterate and multi-get: every cut
/// they see holds each batch whole.
#[test]
fn cuts_hold_cross_shard_batches_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Sharded::open(dir.path(), ShardedOptions::new(4, Options::for_tests())).unwrap());
    let keys: Vec<Vec<u8>> = (0..16).map(|i| format!("group-{i:02}").into_bytes()).collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let (db, keys) = (db.clone(), keys.clone());
            std::thread::spawn(move || {
                for i in 0..400u32 {
                    let v = format!("{t}-{i}");
                    let mut b = WriteBatch::new();
                    for k in &keys {
                        b.put(k, &v);
                    }
                    db.write(b).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (db, keys, stop) = (db.clone(), keys.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut cuts = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let vals: Vec<Option<Vec<u8>>> = match (r + cuts) % 3 {
                        0 => db.multi_get(&keys).unwrap(),
                        1 => db.iter(KeyRange::prefix("group-")).unwrap().map(|(_, v)| Some(v)).collect(),
                        _ => {
                            let s = db.snapshot().unwrap();
                            keys.iter().map(|k| s.get(k).unwrap()).collect()
                        }
                    };
                    assert!(vals.windows(2).all(|w| w[0] == w[1]), "a cut split a batch: {vals:?}");
                    cuts += 1;
                }
                cuts
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let cuts: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(cuts > 10, "readers saw only {cuts} cuts");
    let st = db.stats();
    assert_eq!(st.cross_batches, 1200);
    assert!(st.writes >= 1200 * 4, "{st:?}");
}

/// A blocking read sees the caller's own async writes that it has not
/// waited for (they are queued before the read, or the shard is not idle
/// and the read goes through the queue behind them), with either applier.
#[test]
fn blocking_reads_see_unwaited_async_writes() {
    for callers_apply in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = ShardedOptions::new(3, Options::for_tests());
        o.callers_apply = callers_apply;
        let db = Sharded::open(dir.path(), o).unwrap();
        let mut pending = Vec::new();
        for i in 0..2000u32 {
            let k = format!("k{:04}", i % 97);
            pending.push(db.put_async(&k, i.to_be_bytes(), false));
            assert_eq!(db.get(&k).unwrap(), Some(i.to_be_bytes().to_vec()), "callers_apply {callers_apply}");
            let ks = [k.clone(), format!("k{:04}", (i + 1) % 97)];
            assert_eq!(db.multi_get(&ks).unwrap()[0], Some(i.to_be_bytes().to_vec()));
        }
        for p in pending {
            p.wait().unwrap();
        }
    }
}
