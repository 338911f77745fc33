//! Mode `model --shards N`: the same generated writes, flushes,
//! compactions, syncs and reopens against the sharded front end
//! (`stratakv::Sharded`) and a `BTreeMap`, with gets, multi-gets,
//! iterators both ways and snapshots checked against it; batches span
//! shards. Partition operations and range deletes, which the front end
//! does not offer, are not generated.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stratakv::{KeyRange, L0Kind, Options, Sharded, ShardedOptions, WriteBatch};

use crate::oracle::show;
use crate::report::Report;
use crate::workload::{oracle_key, Gen, How, Op};
use crate::RunCfg;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Runs sharded model cases for the configured time.
pub fn run(cfg: &RunCfg, rep: &mut Report) {
    let deadline = cfg.deadline();
    let mut case = 0u64;
    while Instant::now() < deadline {
        let seed = cfg.seed.wrapping_add(case);
        if let Err(e) = run_case(seed, cfg.shards, deadline, rep) {
            rep.violation(seed, format!("{} shards: {e}", cfg.shards));
            break;
        }
        rep.add("cases", 1);
        case += 1;
    }
}

fn key_of(rng: &mut StdRng, gen: &Gen) -> Vec<u8> {
    oracle_key(rng.gen_bool(0.2), rng.gen_range(0..gen.keys))
}

fn run_case(seed: u64, shards: usize, deadline: Instant, rep: &mut Report) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut o = Options::for_tests();
    o.l0 = [L0Kind::Matrix, L0Kind::Sstable][rng.gen_range(0..2)];
    o.write_buffer_size = [8 << 10, 32 << 10, 64 << 10][rng.gen_range(0..3)];
    let mut opts = ShardedOptions::new(shards, o);
    opts.batch_cap = [1, 8, 32][rng.gen_range(0..3)];
    opts.coord_log_limit = [4 << 10, 1 << 20][rng.gen_range(0..2)];
    opts.callers_apply = rng.gen_bool(0.5);
    let name = format!(
        "{} shards, l0 {}, batch cap {}, callers apply {}",
        shards,
        opts.db.l0.name(),
        opts.batch_cap,
        opts.callers_apply
    );
    let dir = tempfile::Builder::new().prefix("strata-stress-model-sharded").tempdir().map_err(|e| e.to_string())?;
    let ctx = |at: u64, e: String| format!("op {at}: {e} [{name}]");
    let mut db = Sharded::open(dir.path(), opts.clone()).map_err(|e| ctx(0, format!("open failed: {e}")))?;
    let mut model = Map::new();
    let mut gen = Gen::new([50u32, 500, 3000][rng.gen_range(0..3)], [200usize, 3000][rng.gen_range(0..2)]);
    gen.mix.range_delete = 0;
    gen.mix.drop_partition = 0;
    gen.mix.compact = 2;
    let mut snaps: Vec<(stratakv::ShardedSnapshot, Map)> = Vec::new();
    let ops = rng.gen_range(500..5000u64);
    for at in 0..ops {
        if Instant::now() >= deadline {
            break;
        }
        rep.add("ops", 1);
        match rng.gen_range(0..100) {
            0..=54 => match gen.next(&mut rng) {
                Op::Write { updates, sync, how: How::Batch } => {
                    let mut b = WriteBatch::new();
                    for (k, v) in &updates {
                        match v {
                            Some(v) => b.put(k, v),
                            None => b.delete(k),
                        };
                    }
                    db.write_opt(b, sync).map_err(|e| ctx(at, format!("write: {e}")))?;
                    for (k, v) in updates {
                        match v {
                            Some(v) => model.insert(k, v),
                            None => model.remove(&k),
                        };
                    }
                    rep.add("writes", 1);
                }
                Op::Write { .. } => {}
                Op::Flush => db.flush().map_err(|e| ctx(at, format!("flush: {e}")))?,
                Op::Compact(r) => db.compact_range(r).map_err(|e| ctx(at, format!("compact: {e}")))?,
                Op::Sync => db.sync().map_err(|e| ctx(at, format!("sync: {e}")))?,
                Op::Reopen { clean } => {
                    snaps.clear();
                    rep.add("cross_batches", db.stats().cross_batches);
                    if clean {
                        db.close().map_err(|e| ctx(at, format!("close: {e}")))?;
                    } else {
                        drop(db);
                    }
                    db = Sharded::open(dir.path(), opts.clone()).map_err(|e| ctx(at, format!("reopen: {e}")))?;
                    rep.add("reopens", 1);
                }
            },
            55..=74 => {
                let k = key_of(&mut rng, &gen);
                let got = db.get(&k).map_err(|e| ctx(at, format!("get: {e}")))?;
                if got != model.get(&k).cloned() {
                    return Err(ctx(at, format!("get {} differs", show(&k))));
                }
            }
            75..=84 => {
                let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..40)).map(|_| key_of(&mut rng, &gen)).collect();
                let got = db.multi_get(&keys).map_err(|e| ctx(at, format!("multi_get: {e}")))?;
                let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
                if got != want {
                    return Err(ctx(at, "multi_get differs".into()));
                }
            }
            85..=94 => {
                let mut bound = || match rng.gen_range(0..3) {
                    0 => Bound::Unbounded,
                    1 => Bound::Included(key_of(&mut rng, &gen)),
                    _ => Bound::Excluded(key_of(&mut rng, &gen)),
                };
                let r = KeyRange { start: bound(), end: bound() };
                let reverse = rng.gen_bool(0.5);
                let mut it = db.iter(r.clone()).map_err(|e| ctx(at, format!("iter: {e}")))?;
                let mut got: Vec<_> = if reverse { it.by_ref().rev().collect() } else { it.by_ref().collect() };
                it.status().map_err(|e| ctx(at, format!("iter: {e}")))?;
                if reverse {
                    got.reverse();
                }
                let want: Vec<_> =
                    model.iter().filter(|(k, _)| r.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
                if got != want {
                    return Err(ctx(
                        at,
                        format!("iter {r:?} reverse={reverse}: {} items, want {}", got.len(), want.len()),
                    ));
                }
                rep.add("iterations", 1);
            }
            _ => {
                if snaps.len() < 3 {
                    snaps.push((db.snapshot().map_err(|e| ctx(at, format!("snapshot: {e}")))?, model.clone()));
                } else {
                    let (s, m) = snaps.swap_remove(rng.gen_range(0..snaps.len()));
                    let got: Vec<_> = s.iter(..).map_err(|e| ctx(at, format!("snapshot iter: {e}")))?.collect();
                    if got.len() != m.len() || got.iter().zip(&m).any(|((a, b), (c, d))| a != c || b != d) {
                        return Err(ctx(at, "snapshot iter differs".into()));
                    }
                    rep.add("snapshot_checks", 1);
                }
            }
        }
    }
    snaps.clear();
    rep.add("cross_batches", db.stats().cross_batches);
    db.close().map_err(|e| ctx(ops, format!("close: {e}")))?;
    let db = Sharded::open(dir.path(), opts).map_err(|e| ctx(ops, format!("final reopen: {e}")))?;
    let got: Vec<_> = db.iter(..).map_err(|e| ctx(ops, format!("final iter: {e}")))?.collect();
    if got.len() != model.len() || got.iter().zip(&model).any(|((a, b), (c, d))| a != c || b != d) {
        return Err(ctx(ops, "final state differs".into()));
    }
    db.verify_checksums().map_err(|e| ctx(ops, format!("check: {e}")))?;
    Ok(())
}
