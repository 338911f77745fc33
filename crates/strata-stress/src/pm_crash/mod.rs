//! Mode `pm-crash`: crash images of simulated PM and of the SSD side at
//! random points of a random workload, recovery on each, an exact oracle.
//!
//! Each episode opens a fresh database on a small simulated PM device
//! (`SimPm`, which records every store, cache-line flush and fence) and an
//! in-memory file system (`MemFs`, which keeps what was fsynced), with
//! tiny sizes so memtables seal, matrix rows are built, published and
//! merged, columns are compacted into L1, levels compact and PM extents
//! are recycled within a few hundred writes. One thread writes (puts,
//! deletes, batches, sync or not; flushes, compactions, reopens); crash
//! points are taken during its writes, the background threads' work, and
//! open/close (recovery itself). Checker threads recover every crash
//! point's images and apply the oracle (see [`check`]).
//!
//! The simulator models DAX PM: a write is durable once it returns, with
//! or without `sync`, so every acknowledged write must survive.
//!
//! With `--shards N` the episodes run the sharded front end instead, one
//! simulated device per shard ([`sharded`]).

pub mod capture;
pub mod check;
pub mod driver;
pub mod shard_capture;
pub mod sharded;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::SimPm;
use stratakv::fs::MemFs;
use stratakv::{Db, L0Kind, Options};

use crate::oracle::History;
use crate::report::Report;
use crate::workload::{Gen, Op};
use crate::RunCfg;
use capture::{Capture, Progress, Rates};
use check::{check_point, Budget, DIR};
use driver::{run_mode, Shared};

/// Options of a pm-crash episode: a 1 MiB region of 8 KiB slots and tiny
/// memtables, matrix, tables and levels.
pub fn episode_options(rng: &mut StdRng, l0: L0Kind) -> Options {
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.pm_slot_bytes = 8 << 10;
    o.pm_size = 1 << 20;
    o.write_buffer_size = [4 << 10, 6 << 10, 12 << 10][rng.gen_range(0..3)];
    o.matrix_bytes = 256 << 10;
    o.column_bytes = 24 << 10;
    o.target_file_size = 8 << 10;
    o.max_bytes_for_level_base = 32 << 10;
    o.level_size_multiplier = 4;
    o.block_size = 256;
    o.rows_per_segment = 2;
    o.max_receiver_rows = rng.gen_range(2..5);
    o.l0_compaction_trigger = rng.gen_range(2..4);
    o.block_cache_bytes = if rng.gen_bool(0.5) { 0 } else { 64 << 10 };
    o.pm_full_timeout_ms = 5_000;
    if l0 == L0Kind::PmOnly {
        o.pm_regions = [1, 2, 4][rng.gen_range(0..3)];
        o.listdb_lookup_cache_bytes = if rng.gen_bool(0.5) { 0 } else { 64 << 10 };
    }
    o.table_index = if rng.gen_bool(0.5) { stratakv::IndexKind::Learned } else { stratakv::IndexKind::Binary };
    o
}

/// Runs the mode for the configured time.
pub fn run(cfg: &RunCfg) -> Report {
    if cfg.shards > 0 {
        return sharded::run(cfg);
    }
    let budget = Budget { cap: 64, samples: 12, p_write: 0.02, p_double: 0.02 };
    run_mode(
        cfg,
        Report::new("pm-crash", cfg.seed),
        move |c: &Capture, rng: &mut StdRng| check_point(c, budget, rng).map_err(|e| (c.seed, e)),
        |c: &Capture, k: check::Checked, rep: &mut Report| {
            rep.add("crash_points", 1);
            rep.add(c.phase.name(), 1);
            if c.from_fs {
                rep.add("points_at_fs_ops", 1);
            }
            rep.add(if k.exhaustive { "points_exhaustive" } else { "points_sampled" }, 1);
            rep.add("crash_states", k.states);
            rep.add("crash_states_word_subset", k.word_states);
            rep.add("crash_states_fs_torn_or_names_kept", k.fs_variants);
            rep.add("in_flight_write_recovered", k.in_flight_applied);
            rep.add("writes_after_recovery_checked", k.post_writes);
            rep.add("crashes_during_recovery", k.double_crashes);
            rep.max("max_dirty_lines", k.dirty_lines);
        },
        run_episode,
    )
}

/// One episode: a fresh database, a random workload with crash points, a
/// final clean reopen. `Err` is a violation seen by the writer itself.
fn run_episode(
    seed: u64,
    deadline: Instant,
    tx: &crossbeam_channel::Sender<Capture>,
    shared: &Shared,
) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let l0 = match rng.gen_range(0..24) {
        0..=10 => L0Kind::Matrix,
        11..=14 => L0Kind::Sstable,
        15..=19 => L0Kind::SingleLevel,
        _ => L0Kind::PmOnly,
    };
    let base = episode_options(&mut rng, l0);
    let sim = Arc::new(SimPm::new(base.pm_size as usize));
    let mem = MemFs::new();
    let mut opts = base.clone();
    opts.pm_sim = Some(sim.clone());
    opts.fs = Arc::new(mem.clone());
    let history = Arc::new(RwLock::new(History::new()));
    let progress = Arc::new(Progress::default());
    let rates = Rates { pm_dirty: 0.03, pm_clean: 0.003, fs_meta: 0.15, fs_append: 0.01 };
    capture::install(&sim, &mem, tx.clone(), progress.clone(), history.clone(), Arc::new(base), seed, rates);
    let result = drive(&mut rng, &opts, &history, &progress, deadline, shared);
    capture::uninstall(&sim, &mem);
    let (writes, flushes, compactions, reopens, stats) = result?;
    let mut rep = shared.report.lock();
    rep.add("writes_acked", writes);
    rep.add("flush_calls", flushes);
    rep.add("compact_calls", compactions);
    rep.add("reopens", reopens);
    rep.add(
        match l0 {
            L0Kind::Matrix => "episodes_matrix_l0",
            L0Kind::Sstable => "episodes_sstable_l0",
            L0Kind::SingleLevel => "episodes_single_level_l0",
            L0Kind::PmOnly => "episodes_pm_only_l0",
        },
        1,
    );
    rep.add("memtable_seals", stats.flushes);
    rep.add("compactions", stats.compactions);
    rep.add("column_compactions", stats.columns);
    rep.add("points_skipped_fs_busy", progress.skipped.load(Ordering::Relaxed));
    Ok(())
}

type Drove = (u64, u64, u64, u64, stratakv::Stats);

fn drive(
    rng: &mut StdRng,
    opts: &Options,
    history: &RwLock<History>,
    progress: &Progress,
    deadline: Instant,
    shared: &Shared,
) -> Result<Drove, String> {
    let open = |p: &Progress| p.opening(|| Db::open(DIR, opts.clone()).map_err(|e| format!("open failed: {e}")));
    let mut db = open(progress)?;
    let mut gen = Gen::new(rng.gen_range(20..120), 3000);
    gen.mix.reopen = 1;
    let ops = rng.gen_range(150..700);
    let (mut flushes, mut compactions, mut reopens) = (0, 0, 0);
    let mut stats = stratakv::Stats::default();
    let mut add_stats = |s: stratakv::Stats| {
        stats.flushes += s.flushes;
        stats.compactions += s.compactions;
        stats.columns += s.columns;
    };
    for _ in 0..ops {
        if Instant::now() >= deadline || shared.stop.load(Ordering::Relaxed) {
            break;
        }
        match gen.next(rng) {
            Op::Write { updates, sync, how } => {
                history.write().push(&updates);
                progress.issued.fetch_add(1, Ordering::SeqCst);
                crate::workload::write(&db, &updates, sync, &how).map_err(|e| format!("write failed: {e}"))?;
                progress.acked.fetch_add(1, Ordering::SeqCst);
            }
            Op::Flush => {
                flushes += 1;
                db.flush().map_err(|e| format!("flush failed: {e}"))?;
            }
            Op::Compact(r) => {
                compactions += 1;
                db.compact_range(r).map_err(|e| format!("compact_range failed: {e}"))?;
            }
            Op::Sync => db.sync().map_err(|e| format!("sync failed: {e}"))?,
            Op::Reopen { clean } => {
                reopens += 1;
                add_stats(db.stats());
                progress.in_open.store(true, Ordering::SeqCst);
                if clean {
                    db.close().map_err(|e| format!("close failed: {e}"))?;
                } else {
                    drop(db);
                }
                db = open(progress)?;
            }
        }
    }
    add_stats(db.stats());
    progress.in_open.store(true, Ordering::SeqCst);
    db.close().map_err(|e| format!("close failed: {e}"))?;
    // The clean state: everything acknowledged, nothing else.
    let db = open(progress)?;
    let got = crate::workload::read_all(&db).map_err(|e| format!("read after reopen failed: {e}"))?;
    let h = history.read();
    h.check(&got, h.len(), h.len()).map_err(|e| format!("after a clean reopen: {e}"))?;
    db.verify_checksums().map_err(|e| format!("check failed: {e}"))?;
    db.close().map_err(|e| format!("close failed: {e}"))?;
    Ok((h.len(), flushes, compactions, reopens, stats))
}
