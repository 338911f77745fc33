//! Mode `model`: long random runs against a `BTreeMap`, across both L0
//! kinds and many option sets ([`options`]), with reopens, snapshots,
//! iterators both ways (and iterators opened before later writes,
//! flushes and compactions), cursors, multi_get, flush and compaction at
//! random points. Every read must equal the model; at the end of a case
//! the database is reopened, compared whole and `check`ed.
//!
//! With `--shards N`, the cases run against the sharded front end
//! instead ([`sharded`]).
//!
//! `STRATA_MODEL_L0=<kind>` (`sstable`, `matrix`, `single-level`,
//! `pm-only`) runs only the cases of that level-0 kind; each keeps the
//! seed it has in a full run, so a reported seed reproduces either way.

pub mod options;
pub mod sharded;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stratakv::{Db, KeyRange, L0Kind, ReadOptions};

use crate::oracle::show;
use crate::report::Report;
use crate::workload::{partition_key, Gen, How, Op, PARTITION, PARTITION_KEY};
use crate::RunCfg;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Runs the mode for the configured time.
pub fn run(cfg: &RunCfg) -> Report {
    let mut rep = Report::new("model", cfg.seed);
    if cfg.shards > 0 {
        sharded::run(cfg, &mut rep);
        return rep;
    }
    let shm = if Path::new("/dev/shm").is_dir() {
        tempfile::Builder::new().prefix("strata-stress-model").tempdir_in("/dev/shm").ok()
    } else {
        None
    };
    let only = std::env::var("STRATA_MODEL_L0").ok().map(|s| {
        L0Kind::parse(&s).unwrap_or_else(|| {
            panic!("STRATA_MODEL_L0={s}: not a level-0 kind (sstable, matrix, single-level, pm-only)")
        })
    });
    let deadline = cfg.deadline();
    let mut case = 0u64;
    while Instant::now() < deadline {
        let seed = cfg.seed.wrapping_add(case);
        if only.is_some_and(|k| case_l0(&mut StdRng::seed_from_u64(seed)) != k) {
            case += 1;
            continue;
        }
        let shm_case = shm.as_ref().map(|d| d.path().join(format!("case{case}")));
        let r = run_case(seed, deadline, shm_case.as_deref(), &mut rep);
        if let Some(d) = &shm_case {
            let _ = std::fs::remove_dir_all(d);
        }
        if let Err(e) = r {
            rep.violation(seed, e);
            break;
        }
        rep.add("cases", 1);
        if cfg.verbose {
            eprintln!("model: {}", rep.json());
        }
        case += 1;
    }
    rep
}

fn range_of(m: &Map, r: &KeyRange) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().filter(|(k, _)| r.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn err<E: std::fmt::Display>(what: &str, at: u64) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what} failed at op {at}: {e}")
}

/// The level-0 kind of a case: the first draw of its seed's generator.
fn case_l0(rng: &mut StdRng) -> L0Kind {
    match rng.gen_range(0..4) {
        0 => L0Kind::Matrix,
        1 => L0Kind::Sstable,
        2 => L0Kind::SingleLevel,
        _ => L0Kind::PmOnly,
    }
}

fn run_case(seed: u64, deadline: Instant, shm: Option<&Path>, rep: &mut Report) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let l0 = case_l0(&mut rng);
    let (opts, name) = options::random_options(&mut rng, l0, shm);
    let dir = tempfile::Builder::new().prefix("strata-stress-model").tempdir().map_err(|e| e.to_string())?;
    let ctx = |e: String| format!("{e} [{name}]");
    let mut db = Db::open(dir.path(), opts.clone()).map_err(|e| ctx(format!("open failed: {e}")))?;
    let mut model = Map::new();
    // Partition `p`'s keys, by their oracle names.
    let mut pmodel = Map::new();
    let mut gen = Gen::new([50u32, 500, 3000][rng.gen_range(0..3)], [200usize, 3000, 20_000][rng.gen_range(0..3)]);
    gen.mix.reopen = 1;
    gen.mix.compact = 2;
    let mut snaps: Vec<(stratakv::Snapshot, Map)> = Vec::new();
    // Iterators opened earlier, consumed later: they read as of their opening.
    let mut open_iters: Vec<(stratakv::DbIter, Map, KeyRange)> = Vec::new();
    let ops = rng.gen_range(500..5000u64);
    for at in 0..ops {
        if Instant::now() >= deadline {
            break;
        }
        rep.add("ops", 1);
        match rng.gen_range(0..100) {
            0..=54 => match gen.next(&mut rng) {
                Op::Write { updates, sync, how } => {
                    crate::workload::write(&db, &updates, sync, &how).map_err(err("write", at)).map_err(ctx)?;
                    for (k, v) in updates {
                        // The partition's keys have a model of their own.
                        let m = if partition_key(&k).is_some() { &mut pmodel } else { &mut model };
                        match v {
                            Some(v) => m.insert(k, v),
                            None => m.remove(&k),
                        };
                    }
                    rep.add(
                        match how {
                            How::Batch => "writes",
                            How::DeleteRange { .. } => "range_deletes",
                            How::DropPartition => "partition_drops",
                        },
                        1,
                    );
                    if at % 16 == 0 {
                        check_partition(&db, &pmodel).map_err(|e| ctx(format!("partition at op {at}: {e}")))?;
                    }
                }
                Op::Flush => {
                    db.flush().map_err(err("flush", at)).map_err(ctx)?;
                    rep.add("flushes", 1);
                }
                Op::Compact(r) => {
                    db.compact_range(r).map_err(err("compact_range", at)).map_err(ctx)?;
                    rep.add("compactions", 1);
                }
                Op::Sync => db.sync().map_err(err("sync", at)).map_err(ctx)?,
                Op::Reopen { clean } => {
                    snaps.clear();
                    open_iters.clear();
                    if clean {
                        db.close().map_err(err("close", at)).map_err(ctx)?;
                    } else {
                        drop(db);
                    }
                    db = Db::open(dir.path(), opts.clone()).map_err(err("reopen", at)).map_err(ctx)?;
                    rep.add("reopens", 1);
                }
            },
            55..=74 => {
                let k = crate::workload::key(rng.gen_range(0..gen.keys));
                let got = db.get(&k).map_err(err("get", at)).map_err(ctx)?;
                if got.as_ref() != model.get(&k) {
                    return Err(ctx(format!(
                        "get {} at op {at}: {:?} want {:?}",
                        show(&k),
                        got.as_deref().map(show),
                        model.get(&k).map(|v| show(v))
                    )));
                }
                rep.add("gets", 1);
            }
            75..=77 => {
                let keys: Vec<Vec<u8>> =
                    (0..rng.gen_range(1..20)).map(|_| crate::workload::key(rng.gen_range(0..gen.keys))).collect();
                let got = db.multi_get(&keys).map_err(err("multi_get", at)).map_err(ctx)?;
                for (k, g) in keys.iter().zip(got) {
                    if g.as_ref() != model.get(k) {
                        return Err(ctx(format!("multi_get {} at op {at} differs", show(k))));
                    }
                }
                rep.add("multi_gets", 1);
            }
            78..=85 => {
                let r = if rng.gen_bool(0.2) { KeyRange::all() } else { gen.range(&mut rng) };
                let reverse = rng.gen_bool(0.5);
                let it = db.iter(r.clone()).map_err(err("iter", at)).map_err(ctx)?;
                check_iter(it, &range_of(&model, &r), reverse)
                    .map_err(|e| ctx(format!("iter {r:?} reverse={reverse} at op {at}: {e}")))?;
                rep.add(if reverse { "scans_reverse" } else { "scans_forward" }, 1);
            }
            86..=88 => {
                check_cursor(&db, &model, &gen, &mut rng).map_err(|e| ctx(format!("cursor at op {at}: {e}")))?;
                rep.add("cursor_walks", 1);
            }
            89..=92 => {
                if snaps.len() < 4 {
                    snaps.push((db.snapshot(), model.clone()));
                } else {
                    let i = rng.gen_range(0..snaps.len());
                    let (s, m) = snaps.swap_remove(i);
                    for _ in 0..10 {
                        let k = crate::workload::key(rng.gen_range(0..gen.keys));
                        if s.get(&k).map_err(err("snapshot get", at)).map_err(ctx)?.as_ref() != m.get(&k) {
                            return Err(ctx(format!("snapshot get {} at op {at} differs", show(&k))));
                        }
                    }
                    let it = db
                        .iter_opt(.., &ReadOptions { snapshot: Some(s.sequence()) })
                        .map_err(err("snapshot iter", at))
                        .map_err(ctx)?;
                    let want: Vec<_> = m.into_iter().collect();
                    check_iter(it, &want, rng.gen_bool(0.5))
                        .map_err(|e| ctx(format!("snapshot iter at op {at}: {e}")))?;
                    rep.add("snapshots_checked", 1);
                }
            }
            _ => {
                if open_iters.len() < 2 {
                    let r = if rng.gen_bool(0.5) { KeyRange::all() } else { gen.range(&mut rng) };
                    let it = db.iter(r.clone()).map_err(err("iter", at)).map_err(ctx)?;
                    open_iters.push((it, model.clone(), r));
                } else {
                    let (it, m, r) = open_iters.swap_remove(rng.gen_range(0..open_iters.len()));
                    check_iter(it, &range_of(&m, &r), rng.gen_bool(0.5)).map_err(|e| {
                        ctx(format!("iterator opened earlier, read after later writes, at op {at}: {e}"))
                    })?;
                    rep.add("early_iterators_checked", 1);
                }
            }
        }
    }
    snaps.clear();
    open_iters.clear();
    db.close().map_err(|e| ctx(format!("close failed: {e}")))?;
    let db = Db::open(dir.path(), opts).map_err(|e| ctx(format!("final reopen failed: {e}")))?;
    let it = db.iter(..).map_err(|e| ctx(e.to_string()))?;
    let want: Vec<_> = model.into_iter().collect();
    check_iter(it, &want, false).map_err(|e| ctx(format!("final contents: {e}")))?;
    check_partition(&db, &pmodel).map_err(|e| ctx(format!("final partition contents: {e}")))?;
    db.verify_checksums().map_err(|e| ctx(format!("check failed: {e}")))?;
    rep.add(
        match l0 {
            L0Kind::Matrix => "cases_matrix_l0",
            L0Kind::Sstable => "cases_sstable_l0",
            L0Kind::SingleLevel => "cases_single_level_l0",
            L0Kind::PmOnly => "cases_pm_only_l0",
        },
        1,
    );
    let s = db.stats();
    rep.max("max_levels", s.nonempty_levels as u64);
    Ok(())
}

/// Compares partition `p` whole with its model (absent = empty).
fn check_partition(db: &Db, pmodel: &Map) -> Result<(), String> {
    let got: Vec<(Vec<u8>, Vec<u8>)> = if db.list_partitions().iter().any(|p| p == PARTITION) {
        let p = db.partition(PARTITION).map_err(|e| e.to_string())?;
        let mut it = p.iter(..).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        while let Some((k, v)) = it.try_next().map_err(|e| e.to_string())? {
            out.push(([PARTITION_KEY, k.as_slice()].concat(), v));
        }
        out
    } else {
        Vec::new()
    };
    let want: Vec<(Vec<u8>, Vec<u8>)> = pmodel.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if got != want {
        return Err(format!("{} entries, want {}", got.len(), want.len()));
    }
    Ok(())
}

fn check_iter(mut it: stratakv::DbIter, want: &[(Vec<u8>, Vec<u8>)], reverse: bool) -> Result<(), String> {
    let got: Vec<(Vec<u8>, Vec<u8>)> = if reverse { it.by_ref().rev().collect() } else { it.by_ref().collect() };
    it.status().map_err(|e| e.to_string())?;
    let want: Vec<(Vec<u8>, Vec<u8>)> = if reverse { want.iter().rev().cloned().collect() } else { want.to_vec() };
    if got != want {
        let first = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        return Err(format!(
            "{} entries, want {}; first difference at {first}: {:?} vs {:?}",
            got.len(),
            want.len(),
            got.get(first).map(|(k, _)| show(k)),
            want.get(first).map(|(k, _)| show(k))
        ));
    }
    Ok(())
}

/// Seeks, then zig-zags next/prev, comparing with the model.
fn check_cursor(db: &Db, model: &Map, gen: &Gen, rng: &mut StdRng) -> Result<(), String> {
    let it = db.iter(..).map_err(|e| e.to_string())?;
    let mut c = it.cursor().map_err(|e| e.to_string())?;
    let k = crate::workload::key(rng.gen_range(0..gen.keys));
    c.seek(&k).map_err(|e| e.to_string())?;
    let mut want = model.range(k.clone()..).next().map(|(k, _)| k.clone());
    for _ in 0..rng.gen_range(1..12) {
        if c.valid() != want.is_some() {
            return Err(format!("valid={} want {:?}", c.valid(), want.as_deref().map(show)));
        }
        let Some(w) = want.clone() else { break };
        if c.key() != w.as_slice() || Some(c.value()) != model.get(&w).map(|v| v.as_slice()) {
            return Err(format!("at {} want {}", show(c.key()), show(&w)));
        }
        if rng.gen_bool(0.5) {
            c.next().map_err(|e| e.to_string())?;
            want =
                model.range((std::ops::Bound::Excluded(w), std::ops::Bound::Unbounded)).next().map(|(k, _)| k.clone());
        } else {
            c.prev().map_err(|e| e.to_string())?;
            want = model.range(..w).next_back().map(|(k, _)| k.clone());
        }
    }
    Ok(())
}
