//! Mode `fs-fault --shards N`: the sharded front end (`stratakv::Sharded`)
//! on one simulated PM device per shard and one in-memory file system
//! wrapped in [`FaultFs`], which holds every shard's SSD side, the
//! coordinator log (`COORD`) and the shard-count file. One random plan
//! fails an operation of a shard's files or, a quarter of the time, of the
//! coordinator log. Writes are puts, deletes and batches that mostly span
//! shards. Checked as it goes:
//!
//! * a write that returned Ok is never lost, a failed batch is applied
//!   whole or not at all (per-key oracle with pending values);
//! * after an EIO on a write-side operation of a shard's files, that shard
//!   refuses writes; after a failed sync of the coordinator log, the front
//!   end does (fsyncgate: the log's durable contents are unknown);
//! * no file is synced or appended to after its sync failed;
//! * after ENOSPC on a shard, once space is freed, writing resumes;
//! * reads return committed or pending values;
//!
//! and at the end a process crash, a clean close, or a power cut (every
//! device and the file system at one instant), recovery without faults
//! (redoing cross-shard batches from the coordinator log) and the oracle on
//! every image. The ending is drawn first: before a power cut, batches are
//! written with `sync`, since a non-`sync` cross-shard batch is
//! all-or-nothing against a process crash only (DURABILITY.md, "Sharded").

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::{CrashModel, CrashState, SimPm};
use stratakv::fs::{FaultError, FaultFs, FaultOp, FsCrashMode, FsSnapshot, MemFs};
use stratakv::{Error, L0Kind, Sharded, ShardedOptions, WriteBatch};

use super::{error_name, plan};
use crate::oracle::Expected;
use crate::pm_crash::check::DIR;
use crate::pm_crash::sharded::{read_all, sharded_options};
use crate::report::Report;
use crate::workload::{to_batch, Gen, How, Op};
use crate::RunCfg;

/// Runs the mode with `cfg.shards` shards for the configured time.
pub fn run(cfg: &RunCfg) -> Report {
    let mut rep = Report::new("fs-fault", cfg.seed);
    rep.set("shards", crate::report::Value::Count(cfg.shards as u64));
    let deadline = cfg.deadline();
    let mut episode = 0u64;
    while Instant::now() < deadline {
        let seed = cfg.seed.wrapping_add(episode);
        rep.add("episodes", 1);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut what = String::new();
        if let Err(e) = run_episode(&mut rng, cfg.shards, &mut rep, &mut what) {
            rep.violation(seed, format!("{} shards: {e} [{what}]", cfg.shards));
            break;
        }
        if cfg.verbose && episode.is_multiple_of(20) {
            eprintln!("fs-fault --shards {}: {}", cfg.shards, rep.json());
        }
        episode += 1;
    }
    rep
}

/// How the episode ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    ProcessCrash,
    CleanClose,
    PowerCut,
}

/// Which shard's directory `path` is in, if any.
fn shard_of_path(path: &std::path::Path) -> Option<usize> {
    path.components().find_map(|c| c.as_os_str().to_str()?.strip_prefix("shard-")?.parse().ok())
}

/// Waits until shard `s` refuses writes (a liveness bound, as for one `Db`).
fn wait_shard_poisoned(db: &Sharded, s: usize) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let Some(shard) = db.shard(s) else { return false };
        if shard.stats().poisoned.is_some() {
            return true;
        }
        let _ = shard.flush();
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

fn run_episode(rng: &mut StdRng, shards: usize, rep: &mut Report, what: &mut String) -> Result<(), String> {
    let drawn = match rng.gen_range(0..10) {
        0..=3 => L0Kind::Matrix,
        4..=6 => L0Kind::Sstable,
        7..=8 => L0Kind::SingleLevel,
        _ => L0Kind::PmOnly,
    };
    let l0 = match std::env::var("STRATA_FS_FAULT_L0").ok().as_deref().and_then(L0Kind::parse) {
        Some(k) => k,
        None => drawn,
    };
    let mut opts = sharded_options(rng, shards, l0);
    opts.db.pm_full_timeout_ms = 300;
    // Small limits: trims of the coordinator log (a copy, a rename, a
    // directory sync) meet the faults too.
    opts.coord_log_limit = [1 << 10, 16 << 10, 16 << 20][rng.gen_range(0..3)];
    let sims: Vec<Arc<SimPm>> = (0..shards).map(|_| Arc::new(SimPm::new(opts.db.pm_size as usize))).collect();
    let clean = opts.clone();
    let mem = MemFs::new();
    let fault = FaultFs::over_mem(mem.clone());
    opts.db.fs = Arc::new(fault.clone());
    opts.pm_sims = sims.clone();
    let ending = match rng.gen_range(0..4) {
        0 => Ending::ProcessCrash,
        1 => Ending::CleanClose,
        _ => Ending::PowerCut,
    };
    let mut plan = plan::random_plan(rng);
    if rng.gen_bool(0.25) {
        // The coordinator log: writes and syncs of cross-shard batches.
        plan.op = if rng.gen_bool(0.5) { FaultOp::Append } else { FaultOp::Sync };
        plan.nth = rng.gen_range(1..25);
        plan.path_contains = Some("COORD");
    }
    let arm_before_open = rng.gen_bool(0.15);
    *what = format!(
        "l0 {}, fault {}{}{}",
        l0.name(),
        plan::describe(&plan),
        plan.path_contains.map(|p| format!(" on {p}")).unwrap_or_default(),
        if arm_before_open { " armed before open" } else { "" }
    );
    if arm_before_open {
        fault.inject(plan);
    }
    let open = |o: &ShardedOptions| Sharded::open(DIR, o.clone());
    let mut db = match open(&opts) {
        Ok(db) => db,
        Err(e) => {
            if !fault.fired() {
                return Err(format!("open failed without a fault: {e}"));
            }
            rep.add("open_failed_cleanly", 1);
            fault.clear();
            open(&opts).map_err(|e| format!("open after clearing the fault failed: {e}"))?
        }
    };
    if !arm_before_open {
        fault.inject(plan);
    }
    let mut expected = Expected::new();
    let mut gen = Gen::new(rng.gen_range(20..100), 2000);
    gen.mix.reopen = 1;
    gen.mix.range_delete = 0;
    gen.mix.drop_partition = 0;
    gen.mix.batch = 30;
    let ops = rng.gen_range(100..400);
    let mut consumed = fault.stats().fired.len();
    let mut poison_checked = false;
    let mut disk_full_errors = 0u64;
    let mut space_freed = false;
    for op_no in 0..ops {
        match gen.next(rng) {
            Op::Write { updates, sync, how: How::Batch } => {
                let sync = sync || (ending == Ending::PowerCut && updates.len() > 1);
                expected.begin(op_no, &updates);
                match db.write_opt(to_batch(&updates), sync) {
                    Ok(()) => {
                        expected.commit(&updates);
                        rep.add("writes_acked", 1);
                    }
                    Err(e) => {
                        expected.fail(op_no, &updates);
                        rep.add("writes_failed", 1);
                        rep.add(error_name(&e), 1);
                        if matches!(e, Error::DiskFull { .. }) {
                            disk_full_errors += 1;
                        }
                    }
                }
            }
            Op::Write { .. } => {}
            Op::Flush => {
                if let Err(e) = db.flush() {
                    rep.add(error_name(&e), 1);
                }
            }
            Op::Compact(r) => {
                if let Err(e) = db.compact_range(r) {
                    rep.add(error_name(&e), 1);
                }
            }
            Op::Sync => {
                if let Err(e) = db.sync() {
                    rep.add(error_name(&e), 1);
                }
            }
            Op::Reopen { clean } => {
                rep.add("cross_batches", db.stats().cross_batches);
                if clean {
                    let _ = db.close();
                } else {
                    drop(db);
                }
                db = super::reopen(|| open(&opts), &fault, rep)?;
                consumed = fault.stats().fired.len();
            }
        }
        if rng.gen_bool(0.2) {
            check_reads(&db, &expected, rng, gen.keys, rep)?;
        }
        let stats = fault.stats();
        super::fsyncgate(&stats)?;
        if !poison_checked && stats.fired.len() > consumed && plan::must_poison(&plan) {
            poison_checked = true;
            check_poisoned(&db, &stats.fired[consumed].path, &plan, rep)?;
            fault.clear();
        }
        if plan.error == FaultError::Enospc
            && !stats.fired.is_empty()
            && !space_freed
            && (disk_full_errors >= 2 || rng.gen_bool(0.05))
        {
            fault.clear();
            space_freed = true;
            // A failed sync of the coordinator log poisons the front end,
            // ENOSPC included; a full shard does not.
            if !db.stats().poisoned {
                if let Some(p) = db.stats().shards.iter().find_map(|s| s.poisoned.clone()) {
                    return Err(format!("a full disk poisoned a shard: {p}"));
                }
                db.flush().map_err(|e| format!("flush after space was freed failed: {e}"))?;
                let b = vec![(b"zz-after-enospc".to_vec(), Some(format!("{op_no}").into_bytes()))];
                expected.begin(op_no, &b);
                db.write_opt(to_batch(&b), true).map_err(|e| format!("write after space was freed failed: {e}"))?;
                expected.commit(&b);
                rep.add("resumed_after_space_freed", 1);
            }
        }
    }
    rep.add("ops", ops);
    rep.add("cross_batches", db.stats().cross_batches);
    let fired = fault.stats().fired.len() as u64;
    if fired > 0 {
        rep.add("faults_injected", 1);
        rep.add(&format!("faults_{}", plan.op.name()), 1);
        if plan.path_contains.is_some() {
            rep.add("faults_coord_log", 1);
        }
    }
    rep.add("fs_ops_failed", fired);
    end_episode(rng, db, ending, &clean, &sims, &mem, &fault, &expected, rep)
}

/// After an EIO on a write-side operation: the shard whose file failed
/// refuses writes, or (the coordinator log's sync) the front end does.
fn check_poisoned(
    db: &Sharded,
    path: &std::path::Path,
    plan: &stratakv::fs::FaultPlan,
    rep: &mut Report,
) -> Result<(), String> {
    match shard_of_path(path) {
        Some(s) => {
            if !wait_shard_poisoned(db, s) {
                return Err(format!("after a fault on {} shard {s} never refused writes", path.display()));
            }
            let shard = db.shard(s).ok_or("no such shard")?;
            match shard.put(b"zz-after-poison", b"x") {
                Err(Error::Poisoned(_)) => rep.add("shards_poisoned_after_eio", 1),
                r => return Err(format!("a poisoned shard answered a write with {r:?}")),
            }
        }
        // A trim's copy whose sync failed is removed; the log is untouched.
        None if path.ends_with("COORD.tmp") => rep.add("coord_trim_copies_failed", 1),
        None if plan.op == FaultOp::Sync => {
            if !db.stats().poisoned {
                // Poisoned when the next cross-shard batch finds the log failed.
                let mut b = WriteBatch::new();
                for i in 0..16 {
                    b.put(format!("zz-after-poison-{i}"), "x");
                }
                let _ = db.write_opt(b, true);
            }
            match db.put(b"zz-after-poison", b"x") {
                Err(Error::Poisoned(_)) => rep.add("front_end_poisoned_after_coord_sync_failure", 1),
                r => return Err(format!("after a failed sync of {} the front end answered {r:?}", path.display())),
            }
        }
        None => {}
    }
    Ok(())
}

fn check_reads(db: &Sharded, expected: &Expected, rng: &mut StdRng, keys: u32, rep: &mut Report) -> Result<(), String> {
    let asked: Vec<Vec<u8>> = (0..8).map(|_| crate::workload::key(rng.gen_range(0..keys))).collect();
    match db.multi_get(&asked) {
        Ok(vals) => {
            let got: BTreeMap<Vec<u8>, Vec<u8>> =
                asked.iter().zip(vals).filter_map(|(k, v)| Some((k.clone(), v?))).collect();
            rep.add("reads_checked", asked.len() as u64);
            expected.check_keys(&asked, &got).map_err(|e| format!("live read: {e}"))
        }
        Err(e) if e.is_corruption() => Err(format!("a live read reported corruption: {e}")),
        Err(_) => {
            rep.add("reads_failed", 1);
            Ok(())
        }
    }
}

/// Opens `(one image per shard, file system)` without faults and checks it.
fn recover_and_check(opts: &ShardedOptions, imgs: Vec<Vec<u8>>, fs: MemFs, expected: &Expected) -> Result<u64, String> {
    let mut o = opts.clone();
    o.pm_sims = imgs.into_iter().map(|i| Arc::new(SimPm::from_image(i))).collect();
    o.db.fs = Arc::new(fs);
    let db = Sharded::open(DIR, o).map_err(|e| format!("recovery failed: {e}"))?;
    let got: BTreeMap<Vec<u8>, Vec<u8>> =
        read_all(&db).map_err(|e| format!("reading the recovered database failed: {e}"))?.into_iter().collect();
    let n = expected.check(&got).map_err(|e| format!("{e} ({} parts redone)", db.stats().redone_parts))?;
    db.verify_checksums().map_err(|e| format!("check after recovery failed: {e}"))?;
    let mut b = WriteBatch::new();
    b.put("zz-after-recovery-a", "1").put("zz-after-recovery-b", "1").put("zz-after-recovery-c", "1");
    db.write_opt(b, true).map_err(|e| format!("write after recovery failed: {e}"))?;
    db.close().map_err(|e| format!("close after recovery failed: {e}"))?;
    Ok(n)
}

/// Every device's visible image (`None`) or crash state, and the file
/// system, at one instant.
fn cut(sims: &[Arc<SimPm>], mem: &MemFs) -> (FsSnapshot, Vec<(Vec<u8>, CrashState)>) {
    mem.snapshot_with(|| {
        let held: Vec<_> = sims.iter().map(|s| s.hold()).collect();
        held.iter().map(|h| (h.visible_image(), h.crash_state())).collect()
    })
}

#[allow(clippy::too_many_arguments)]
fn end_episode(
    rng: &mut StdRng,
    db: Sharded,
    ending: Ending,
    opts: &ShardedOptions,
    sims: &[Arc<SimPm>],
    mem: &MemFs,
    fault: &FaultFs,
    expected: &Expected,
    rep: &mut Report,
) -> Result<(), String> {
    let check = |imgs: Vec<Vec<u8>>, fs: MemFs, what: &str, rep: &mut Report| -> Result<(), String> {
        let n = recover_and_check(opts, imgs, fs, expected).map_err(|e| format!("{what}: {e}"))?;
        rep.add("crash_states", 1);
        rep.add("keys_checked", n);
        Ok(())
    };
    match ending {
        Ending::ProcessCrash => {
            let (snap, states) = cut(sims, mem);
            fault.power_cut();
            drop(db);
            let imgs = states.into_iter().map(|(v, _)| v).collect();
            check(imgs, snap.restore(FsCrashMode::KeepAll, rng), "after a process crash", rep)?;
            rep.add("process_crashes", 1);
        }
        Ending::CleanClose => {
            let _ = db.close();
            let (snap, states) = cut(sims, mem);
            let imgs = states.into_iter().map(|(v, _)| v).collect();
            check(imgs, snap.restore(FsCrashMode::KeepAll, rng), "after close and reopen", rep)?;
            rep.add("clean_reopens", 1);
        }
        Ending::PowerCut => {
            let (snap, states) = cut(sims, mem);
            fault.power_cut();
            drop(db);
            rep.add("power_cuts", 1);
            for mode in [FsCrashMode::DropUnsynced, FsCrashMode::KeepNamesDropData, FsCrashMode::TornTail] {
                for i in 0..3 {
                    let imgs = states
                        .iter()
                        .map(|(_, cs)| match i {
                            0 => cs.minimal_image(),
                            1 => cs.maximal_image(),
                            _ => cs.random_image(CrashModel::LinePrefix, rng),
                        })
                        .collect();
                    let what = format!("after a power cut (fs {}, pm images {i})", mode.name());
                    check(imgs, snap.restore(mode, rng), &what, rep)?;
                }
            }
        }
    }
    Ok(())
}
