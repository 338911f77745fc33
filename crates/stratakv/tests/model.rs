//! Model test: random operations against the engine and a BTreeMap, with
//! flush, compaction and close/reopen in between; they must agree.
//!
//! `STRATA_MODEL_CASES` and `STRATA_MODEL_OPS` scale the run; a failure
//! prints the seed, and `STRATA_MODEL_SEED` replays one case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{model_range, range, value, Model};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

use stratakv::{Db, FixedPrefix, IndexKind, KeyRange, L0Kind, Options, Partition, WriteBatch};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    // Mostly a small key space (overwrites, deletes of live keys), some long keys.
    let n = rng.gen_range(0..space);
    if rng.gen_bool(0.05) {
        format!("long-key-{n:06}-{}", "x".repeat(rng.gen_range(0..200))).into_bytes()
    } else {
        format!("k{n:06}").into_bytes()
    }
}

fn options(rng: &mut StdRng, l0: L0Kind) -> Options {
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.write_buffer_size = [8 << 10, 32 << 10, 64 << 10][rng.gen_range(0..3)];
    o.compression = [stratakv::Compression::None, stratakv::Compression::Lz4][rng.gen_range(0..2)];
    o.target_file_size = [16 << 10, 64 << 10][rng.gen_range(0..2)];
    o.max_bytes_for_level_base = 64 << 10;
    o.l0_compaction_trigger = rng.gen_range(2..5);
    o.matrix_hash_index = rng.gen_bool(0.5);
    o.prefix_extractor = prefix_extractor(rng);
    o.max_runs = max_runs(rng);
    // pm-only: braided over 1, 2 or 4 regions (fixed at creation), with
    // and without the lookup cache, zipper on or piling L0 lists up. (Drawn
    // for pm-only alone: the other profiles' cases stay as they were.)
    if l0 == L0Kind::PmOnly {
        o.pm_regions = [1, 2, 4][rng.gen_range(0..3)];
        listdb_dram(rng, &mut o);
    }
    o
}

/// pm-only's DRAM-only choices, which a reopen may change.
fn listdb_dram(rng: &mut StdRng, o: &mut Options) {
    o.listdb_lookup_cache_bytes = [0, 4 << 10, 1 << 20][rng.gen_range(0..3)];
    o.listdb_zipper = rng.gen_bool(0.8);
    o.listdb_max_l0 = rng.gen_range(1..4);
}

/// Sorted runs before L1: none (columns merge into L1) or a few.
fn max_runs(rng: &mut StdRng) -> usize {
    [1, 2, 3][rng.gen_range(0..3)]
}

/// Prefix groups of 100 keys (`k0001`), or none.
fn prefix_extractor(rng: &mut StdRng) -> Option<Arc<dyn stratakv::PrefixExtractor>> {
    rng.gen_bool(0.6).then(|| Arc::new(FixedPrefix(5)) as Arc<dyn stratakv::PrefixExtractor>)
}

struct Stats {
    ops: u64,
    reopens: u64,
    flushes: u64,
    compactions: u64,
    iterations: u64,
    /// Matrix rows that prefix filters let iterators skip.
    prefix_skipped_rows: u64,
    /// Column compactions and merges of runs into L1.
    columns: u64,
    run_merges: u64,
    slm_compactions: u64,
    slm_fallbacks: u64,
    listdb_merges: u64,
    listdb_dropped_nodes: u64,
    listdb_cache_hits: u64,
    learned_tables: u64,
    binary_tables: u64,
    partition_drops: u64,
}

impl Stats {
    fn absorb(&mut self, s: &stratakv::Stats) {
        self.learned_tables += s.learned_tables;
        self.binary_tables += s.binary_tables;
        self.listdb_merges += s.listdb_merges;
        self.listdb_dropped_nodes += s.listdb_dropped_nodes;
        self.listdb_cache_hits += s.listdb_cache_hits;
        self.slm_compactions += s.slm_compactions;
        self.slm_fallbacks += s.slm_fallbacks;
        self.prefix_skipped_rows += s.prefix_skipped_rows;
        self.columns += s.columns;
        self.run_merges += s.run_merges;
    }
}

fn run_case(seed: u64, ops: u64, l0: L0Kind, stats: &mut Stats) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(&mut rng, l0);
    // Learned or binary table indexes by the seed (not the random stream,
    // so the cases' operations stay as they were); some cases switch at
    // every reopen, mixing both kinds in one database.
    let switch_index = seed % 3 == 2;
    opts.table_index = if seed.is_multiple_of(2) { IndexKind::Learned } else { IndexKind::Binary };
    let space = [50u32, 500, 5000][rng.gen_range(0..3)];
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    // Partition "p" and its model, while it exists (created and dropped by
    // the op number, not the random stream, so the cases' operations stay
    // as they were; its keys come from the ops' own draws).
    let mut part: Option<(Partition, Model)> = None;
    let mut snaps: Vec<(stratakv::Snapshot, Model)> = Vec::new();
    for op in 0..ops {
        let ctx = || format!("seed {seed} op {op}");
        match rng.gen_range(0..1000) {
            0..=449 => {
                let (k, v) = (key(&mut rng, space), value(&mut rng));
                match &mut part {
                    Some((p, m)) if op % 4 == 1 => {
                        p.put(&k, &v).unwrap();
                        m.insert(k, v);
                    }
                    _ => {
                        db.put(&k, &v).unwrap();
                        model.insert(k, v);
                    }
                }
            }
            450..=549 => {
                let k = key(&mut rng, space);
                if op % 5 == 0 {
                    // A range delete from k over the next few keys the model has.
                    let (p, m) = match &mut part {
                        Some((p, m)) if op % 2 == 0 => (Some(&*p), m),
                        _ => (None, &mut model),
                    };
                    let end = m
                        .range(k.clone()..)
                        .nth(4)
                        .map(|(e, _)| e.clone())
                        .unwrap_or_else(|| [k.as_slice(), b"~"].concat());
                    match p {
                        Some(p) => p.delete_range(&k, &end).unwrap(),
                        None => db.delete_range(&k, &end).unwrap(),
                    }
                    let doomed: Vec<Vec<u8>> = m.range(k.clone()..end).map(|(k, _)| k.clone()).collect();
                    for d in doomed {
                        m.remove(&d);
                    }
                } else {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
            }
            550..=619 => {
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
                if let Some((p, m)) = &mut part {
                    // The batch spans partitions.
                    let k = key(&mut rng, space);
                    let v = [k.as_slice(), b"@p"].concat();
                    b.put_in(p, &k, &v);
                    m.insert(k, v);
                }
                db.write(b).unwrap();
            }
            620..=819 => {
                let k = key(&mut rng, space);
                if rng.gen_bool(0.3) {
                    // A hint only: it must leave every answer unchanged.
                    db.prefetch(&[k.clone(), key(&mut rng, space), Vec::new()]);
                }
                assert_eq!(
                    db.get(&k).unwrap(),
                    model.get(&k).cloned(),
                    "get {} at {}",
                    String::from_utf8_lossy(&k),
                    ctx()
                );
                if let Some((p, m)) = &part {
                    assert_eq!(p.get(&k).unwrap(), m.get(&k).cloned(), "partition get at {}", ctx());
                    if op % 8 == 0 {
                        let got: Vec<_> = p.iter(..).unwrap().collect();
                        let want: Vec<_> = m.clone().into_iter().collect();
                        assert!(got == want, "partition iter at {}", ctx());
                    }
                }
                // Now and then a batched read of the keys around it, present
                // and absent, repeated and out of order (no random draws, so
                // the cases' operations stay as they were).
                if op % 4 == 0 {
                    let mut keys: Vec<Vec<u8>> = model.range(k.clone()..).take(24).map(|(k, _)| k.clone()).collect();
                    keys.extend(keys.clone().iter().map(|k| [k.as_slice(), b"~"].concat()).take(8));
                    keys.push(k.clone());
                    keys.reverse();
                    keys.push(k.clone());
                    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
                    assert!(
                        db.multi_get(&keys).unwrap() == want,
                        "multi_get around {} at {}",
                        String::from_utf8_lossy(&k),
                        ctx()
                    );
                }
            }
            820..=869 => {
                stats.iterations += 1;
                let r = range(&mut rng, space, key);
                let want = model_range(&model, &r);
                let reverse = rng.gen_bool(0.5);
                let mut it = db.iter(r.clone()).unwrap();
                let got: Vec<_> = if reverse { it.by_ref().rev().collect() } else { it.by_ref().collect() };
                it.status().unwrap();
                let want: Vec<_> = if reverse { want.into_iter().rev().collect() } else { want };
                assert_eq!(got.len(), want.len(), "iter {r:?} reverse={reverse} at {}", ctx());
                assert!(got == want, "iter {r:?} reverse={reverse} differs at {}", ctx());
            }
            870..=889 => {
                // Zig-zag with a cursor.
                let it = db.iter(..).unwrap();
                let mut c = it.cursor().unwrap();
                let k = key(&mut rng, space);
                c.seek(&k).unwrap();
                let want = model.range(k.clone()..).next();
                assert_eq!(c.valid(), want.is_some(), "seek at {}", ctx());
                if let Some((wk, wv)) = want {
                    assert_eq!((c.key(), c.value()), (wk.as_slice(), wv.as_slice()), "seek at {}", ctx());
                    c.prev().unwrap();
                    let before = model.range(..wk.clone()).next_back();
                    assert_eq!(c.valid(), before.is_some(), "prev at {}", ctx());
                    if let Some((bk, _)) = before {
                        assert_eq!(c.key(), bk.as_slice(), "prev at {}", ctx());
                        c.next().unwrap();
                        assert_eq!(c.key(), wk.as_slice(), "next after prev at {}", ctx());
                    }
                }
            }
            890..=909 => {
                if snaps.len() < 4 {
                    snaps.push((db.snapshot(), model.clone()));
                } else {
                    let i = rng.gen_range(0..snaps.len());
                    let (s, m) = snaps.swap_remove(i);
                    for _ in 0..20 {
                        let k = key(&mut rng, space);
                        assert_eq!(s.get(&k).unwrap(), m.get(&k).cloned(), "snapshot get at {}", ctx());
                    }
                    let got: Vec<_> = s.iter(..).unwrap().collect();
                    let want: Vec<_> = m.into_iter().collect();
                    assert!(got == want, "snapshot iter at {}", ctx());
                }
            }
            910..=939 => {
                stats.flushes += 1;
                db.flush().unwrap();
                // Partitions come and go: a dropped one's keys never show
                // again, in it or in its successor under the same name.
                if op % 3 == 0 {
                    match part.take() {
                        None => part = Some((db.create_partition("p").unwrap(), Model::new())),
                        Some((p, m)) if op % 2 == 0 => {
                            db.drop_partition("p").unwrap();
                            assert!(p.get(b"x").is_err(), "a dropped partition's handle at {}", ctx());
                            stats.partition_drops += 1;
                            drop(m);
                        }
                        kept => part = kept,
                    }
                }
            }
            940..=954 => {
                stats.compactions += 1;
                let r = if rng.gen_bool(0.5) { KeyRange::all() } else { range(&mut rng, space, key) };
                db.compact_range(r).unwrap();
            }
            _ => {
                stats.reopens += 1;
                stats.absorb(&db.stats());
                snaps.clear();
                // Handles hold the database open.
                let had = part.take().map(|(_, m)| m);
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    drop(db);
                }
                // The row lookup structures live in DRAM only: a reopen may
                // switch between them.
                if rng.gen_bool(0.3) {
                    opts.matrix_hash_index = !opts.matrix_hash_index;
                }
                if rng.gen_bool(0.3) {
                    opts.prefix_extractor = prefix_extractor(&mut rng);
                }
                // So may the number of runs: runs left by a bigger setting
                // are merged into L1 before columns go there directly.
                if rng.gen_bool(0.3) {
                    opts.max_runs = max_runs(&mut rng);
                }
                if l0 == L0Kind::PmOnly && rng.gen_bool(0.3) {
                    listdb_dram(&mut rng, &mut opts);
                }
                if switch_index {
                    opts.table_index = match opts.table_index {
                        IndexKind::Learned => IndexKind::Binary,
                        IndexKind::Binary => IndexKind::Learned,
                    };
                }
                db = Db::open(dir.path(), opts.clone()).unwrap();
                part = had.map(|m| (db.partition("p").unwrap(), m));
            }
        }
        stats.ops += 1;
    }
    snaps.clear();
    stats.absorb(&db.stats());
    let part = part.map(|(_, m)| m);
    // Final full comparison after a reopen.
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    let got: Vec<_> = db.iter(..).unwrap().collect();
    let want: Vec<_> = model.into_iter().collect();
    assert!(got == want, "final state differs, seed {seed}");
    if let Some(m) = part {
        let got: Vec<_> = db.partition("p").unwrap().iter(..).unwrap().collect();
        assert!(got == m.into_iter().collect::<Vec<_>>(), "final partition state differs, seed {seed}");
    }
    db.verify_checksums().unwrap();
}

fn run(l0: L0Kind, base_seed: u64) {
    let cases = env("STRATA_MODEL_CASES", 12);
    let ops = env("STRATA_MODEL_OPS", 3000);
    let mut stats = Stats {
        ops: 0,
        reopens: 0,
        flushes: 0,
        compactions: 0,
        iterations: 0,
        prefix_skipped_rows: 0,
        columns: 0,
        run_merges: 0,
        slm_compactions: 0,
        slm_fallbacks: 0,
        listdb_merges: 0,
        listdb_dropped_nodes: 0,
        listdb_cache_hits: 0,
        learned_tables: 0,
        binary_tables: 0,
        partition_drops: 0,
    };
    let seeds: Vec<u64> = match std::env::var("STRATA_MODEL_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(s) => vec![s],
        None => (0..cases).map(|i| base_seed + i).collect(),
    };
    for seed in &seeds {
        run_case(*seed, ops, l0, &mut stats);
    }
    println!(
        "model[{}]: cases={} ops={} reopens={} flushes={} compactions={} range_scans={} prefix_skipped_rows={} \
         columns={} run_merges={} learned_tables={} binary_tables={} partition_drops={} mismatches=0",
        l0.name(),
        seeds.len(),
        stats.ops,
        stats.reopens,
        stats.flushes,
        stats.compactions,
        stats.iterations,
        stats.prefix_skipped_rows,
        stats.columns,
        stats.run_merges,
        stats.learned_tables,
        stats.binary_tables,
        stats.partition_drops
    );
    if seeds.len() > 1 {
        assert!(stats.partition_drops > 0, "no partition was ever dropped");
    }
    // Both index kinds must have been read, wherever there are tables.
    if l0 != L0Kind::PmOnly && seeds.len() > 1 {
        assert!(stats.learned_tables > 0 && stats.binary_tables > 0, "one table index kind never ran");
    }
    // The prefix filters and the runs must have been exercised, not only agreed with.
    if l0 == L0Kind::SingleLevel && seeds.len() > 1 {
        eprintln!(
            "single-level: {} selective compactions, {} snapshot reads searched the tables",
            stats.slm_compactions, stats.slm_fallbacks
        );
        assert!(stats.slm_compactions > 0, "no selective compaction ever ran");
        assert!(stats.slm_fallbacks > 0, "no snapshot read ever needed an older version than the tree's");
    }
    if l0 == L0Kind::PmOnly && seeds.len() > 1 {
        eprintln!(
            "pm-only: {} zipper merges, {} nodes dropped, {} lookup-cache hits",
            stats.listdb_merges, stats.listdb_dropped_nodes, stats.listdb_cache_hits
        );
        assert!(stats.listdb_merges > 0, "no zipper merge ever ran");
        assert!(stats.listdb_dropped_nodes > 0, "no older version was ever dropped");
        assert!(stats.listdb_cache_hits > 0, "the lookup cache never answered");
    }
    if l0 == L0Kind::Matrix && seeds.len() > 1 {
        assert!(stats.prefix_skipped_rows > 0, "no matrix row was ever skipped by a prefix filter");
        assert!(stats.run_merges > 0, "no run was ever merged into L1");
    }
}

#[test]
fn model_sstable_l0() {
    run(L0Kind::Sstable, 1000);
}

#[test]
fn model_matrix_l0() {
    run(L0Kind::Matrix, 5000);
}

#[test]
fn model_single_level_l0() {
    run(L0Kind::SingleLevel, 9000);
}

#[test]
fn model_pm_only_l0() {
    run(L0Kind::PmOnly, 12000);
}
