//! Mode `pm-crash --shards N`: crash images of a sharded database
//! (`stratakv::Sharded`), one simulated PM device per shard and one
//! in-memory file system holding every shard's SSD side, the coordinator
//! log and the shard-count file, all taken at one instant (see
//! [`super::shard_capture`]).
//!
//! One thread writes through the front end: puts, deletes and batches of
//! 2..=8 keys, which mostly span shards; flushes, compactions, syncs and
//! reopens. Batches of more than one key are written with `sync`: without
//! it a cross-shard batch is all-or-nothing against a process crash only
//! (DURABILITY.md, "Sharded"; `kill --shards` checks that), and every image
//! here is a power cut. Single-key writes are durable on return with or
//! without `sync` (the simulated PM is DAX).
//!
//! Oracle per image (the same exact-state oracle as one device): the
//! database opens, redoing cross-shard batches from the coordinator log;
//! its contents equal the state after exactly the acknowledged writes, or
//! after those and the one in flight — so an acknowledged write is never
//! lost, nothing never written appears, and a batch is in every shard it
//! spans or in none; `verify_checksums` passes. Sometimes also: a write
//! after recovery survives a reopen and a power cut; a crash in the middle
//! of recovery (of the redo, say), recovered again, gives the same contents.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::{CrashModel, CrashState, SimPm};
use stratakv::fs::{FsCrashMode, FsSnapshot, MemFs};
use stratakv::{L0Kind, Sharded, ShardedOptions};

use super::capture::{Progress, Rates};
use super::check::{Budget, DIR};
use super::driver::{run_mode, Shared};
use super::shard_capture::{install, uninstall, Episode, ShardCapture};
use crate::oracle::{diff, History, Kvs, Model, Window};
use crate::report::{Report, Value};
use crate::workload::{to_batch, Gen, How, Op};
use crate::RunCfg;

/// Runs the mode with `cfg.shards` shards for the configured time.
pub fn run(cfg: &RunCfg) -> Report {
    let mut first = Report::new("pm-crash", cfg.seed);
    first.set("shards", Value::Count(cfg.shards as u64));
    let budget = Budget { cap: 0, samples: 8, p_write: 0.03, p_double: 0.03 };
    let shards = cfg.shards;
    run_mode(
        cfg,
        first,
        move |c: &ShardCapture, rng: &mut StdRng| {
            check_point(c, budget, rng).map_err(|e| (c.seed, format!("{} shards: {e}", c.pm.len())))
        },
        |c: &ShardCapture, k: Checked, rep: &mut Report| {
            rep.add("crash_points", 1);
            rep.add(c.phase.name(), 1);
            if c.from_fs {
                rep.add("points_at_fs_ops", 1);
            }
            rep.add("crash_states", k.states);
            rep.add("crash_states_fs_torn_or_names_kept", k.fs_variants);
            rep.add("in_flight_write_recovered", k.in_flight_applied);
            rep.add("parts_redone", k.redone);
            rep.add("writes_after_recovery_checked", k.post_writes);
            rep.add("crashes_during_recovery", k.double_crashes);
            rep.max("max_dirty_lines", k.dirty_lines);
        },
        move |seed, deadline, tx: &crossbeam_channel::Sender<ShardCapture>, shared: &Shared| {
            run_episode(seed, shards, deadline, tx, shared).map_err(|e| format!("{shards} shards: {e}"))
        },
    )
}

fn episode_options(rng: &mut StdRng, shards: usize) -> (ShardedOptions, L0Kind) {
    let l0 = match rng.gen_range(0..24) {
        0..=10 => L0Kind::Matrix,
        11..=14 => L0Kind::Sstable,
        15..=19 => L0Kind::SingleLevel,
        _ => L0Kind::PmOnly,
    };
    (sharded_options(rng, shards, l0), l0)
}

/// The options of an episode with `shards` shards (devices and file
/// system not yet set): each shard gets what one pm-crash database gets.
pub fn sharded_options(rng: &mut StdRng, shards: usize, l0: L0Kind) -> ShardedOptions {
    let mut base = super::episode_options(rng, l0);
    // The front end splits these budgets between the shards.
    base.matrix_bytes *= shards as u64;
    base.block_cache_bytes *= shards as u64;
    let mut o = ShardedOptions::new(shards, base);
    o.batch_cap = [1, 8, 32][rng.gen_range(0..3)];
    // Small, so the log is also emptied (after a sync of every shard) mid-episode.
    o.coord_log_limit = [1 << 10, 16 << 10, 1 << 20][rng.gen_range(0..3)];
    o.callers_apply = rng.gen_bool(0.5);
    o.pin_workers = false;
    o
}

fn run_episode(
    seed: u64,
    shards: usize,
    deadline: Instant,
    tx: &crossbeam_channel::Sender<ShardCapture>,
    shared: &Shared,
) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (template, l0) = episode_options(&mut rng, shards);
    let sims: Vec<Arc<SimPm>> = (0..shards).map(|_| Arc::new(SimPm::new(template.db.pm_size as usize))).collect();
    let mem = MemFs::new();
    let mut opts = template.clone();
    opts.pm_sims = sims.clone();
    opts.db.fs = Arc::new(mem.clone());
    let history = Arc::new(RwLock::new(History::new()));
    let progress = Arc::new(Progress::default());
    // A point costs a recovery of every shard per image: fewer points per
    // episode with more shards, so more episodes fit in the time.
    let scale = 2.0 / shards.max(2) as f64;
    let rates =
        Rates { pm_dirty: 0.03 * scale, pm_clean: 0.003 * scale, fs_meta: 0.15 * scale, fs_append: 0.02 * scale };
    let ep = Episode {
        tx: tx.clone(),
        progress: progress.clone(),
        history: history.clone(),
        opts: Arc::new(template),
        seed,
        rates,
    };
    install(&sims, &mem, ep);
    let result = drive(&mut rng, &opts, &history, &progress, deadline, shared);
    uninstall(&sims, &mem);
    let (writes, cross, reopens) = result?;
    let mut rep = shared.report.lock();
    rep.add("writes_acked", writes);
    rep.add("cross_batches", cross);
    rep.add("reopens", reopens);
    rep.add(&format!("episodes_{}_l0", l0.name().replace('-', "_")), 1);
    rep.add("points_skipped_busy", progress.skipped.load(Ordering::Relaxed));
    Ok(())
}

/// Every user key of a sharded database.
pub fn read_all(db: &Sharded) -> Result<Kvs, stratakv::Error> {
    let mut it = db.iter(..)?;
    let mut out = Vec::new();
    while let Some(kv) = it.try_next()? {
        out.push(kv);
    }
    Ok(out)
}

fn drive(
    rng: &mut StdRng,
    opts: &ShardedOptions,
    history: &RwLock<History>,
    progress: &Progress,
    deadline: Instant,
    shared: &Shared,
) -> Result<(u64, u64, u64), String> {
    let open = |p: &Progress| p.opening(|| Sharded::open(DIR, opts.clone()).map_err(|e| format!("open failed: {e}")));
    let mut db = open(progress)?;
    let mut gen = Gen::new(rng.gen_range(20..120), 3000);
    gen.mix.reopen = 1;
    gen.mix.range_delete = 0;
    gen.mix.drop_partition = 0;
    gen.mix.batch = 30;
    let ops = rng.gen_range(150..600);
    let (mut cross, mut reopens) = (0, 0);
    for _ in 0..ops {
        if Instant::now() >= deadline || shared.stop.load(Ordering::Relaxed) {
            break;
        }
        match gen.next(rng) {
            Op::Write { updates, sync, how: How::Batch } => {
                history.write().push(&updates);
                progress.issued.fetch_add(1, Ordering::SeqCst);
                db.write_opt(to_batch(&updates), sync || updates.len() > 1)
                    .map_err(|e| format!("write failed: {e}"))?;
                progress.acked.fetch_add(1, Ordering::SeqCst);
            }
            Op::Write { .. } => {}
            Op::Flush => db.flush().map_err(|e| format!("flush failed: {e}"))?,
            Op::Compact(r) => db.compact_range(r).map_err(|e| format!("compact_range failed: {e}"))?,
            Op::Sync => db.sync().map_err(|e| format!("sync failed: {e}"))?,
            Op::Reopen { clean } => {
                reopens += 1;
                cross += db.stats().cross_batches;
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
    cross += db.stats().cross_batches;
    progress.in_open.store(true, Ordering::SeqCst);
    db.close().map_err(|e| format!("close failed: {e}"))?;
    // The clean state: everything acknowledged, nothing else.
    let db = open(progress)?;
    let got = read_all(&db).map_err(|e| format!("read after reopen failed: {e}"))?;
    let h = history.read();
    h.check(&got, h.len(), h.len()).map_err(|e| format!("after a clean reopen: {e}"))?;
    db.verify_checksums().map_err(|e| format!("check failed: {e}"))?;
    db.close().map_err(|e| format!("close failed: {e}"))?;
    Ok((h.len(), cross, reopens))
}

/// Counts of one checked point.
#[derive(Debug, Default)]
struct Checked {
    states: u64,
    dirty_lines: u64,
    fs_variants: u64,
    in_flight_applied: u64,
    redone: u64,
    post_writes: u64,
    double_crashes: u64,
}

/// Opens a sharded database on one image per shard and a file system.
pub fn open_image(opts: &ShardedOptions, imgs: Vec<Vec<u8>>, fs: &MemFs) -> Result<(Sharded, Vec<Arc<SimPm>>), String> {
    let sims: Vec<Arc<SimPm>> = imgs.into_iter().map(|i| Arc::new(SimPm::from_image(i))).collect();
    let mut o = opts.clone();
    o.pm_sims = sims.clone();
    o.db.fs = Arc::new(fs.clone());
    Sharded::open(DIR, o).map(|db| (db, sims)).map_err(|e| format!("recovery failed: {e}"))
}

/// Image `i` of every device: 0 the minimal ones, 1 the maximal ones, then random.
fn images(pm: &[CrashState], i: u64, rng: &mut StdRng) -> (Vec<Vec<u8>>, CrashModel) {
    let model = if i.is_multiple_of(2) { CrashModel::LinePrefix } else { CrashModel::WordSubset };
    let imgs = pm
        .iter()
        .map(|cs| match i {
            0 => cs.minimal_image(),
            1 => cs.maximal_image(),
            _ => cs.random_image(model, rng),
        })
        .collect();
    (imgs, model)
}

fn check_point(c: &ShardCapture, budget: Budget, rng: &mut StdRng) -> Result<Checked, String> {
    let dirty = c.dirty_lines();
    let mut out = Checked { dirty_lines: dirty as u64, ..Default::default() };
    let window = c.history.read().window(c.acked, c.issued)?;
    let count = if dirty == 0 { 1 } else { 2 + budget.samples };
    for i in 0..count {
        let (imgs, model) = images(&c.pm, i, rng);
        let mode = super::check::random_fs_mode(rng);
        if mode != FsCrashMode::DropUnsynced {
            out.fs_variants += 1;
        }
        let what = || {
            format!(
                "point (acked {} issued {} phase {:?} from_fs {} dirty_lines {dirty}) image {i} model {model:?} fs {}",
                c.acked,
                c.issued,
                c.phase,
                c.from_fs,
                mode.name()
            )
        };
        let fs = c.fs.restore(mode, rng);
        let (got, n, redone) =
            check_image(&c.opts, imgs.clone(), &fs, &window).map_err(|e| format!("{}: {e}", what()))?;
        out.states += 1;
        out.redone += redone;
        if n > c.acked {
            out.in_flight_applied += 1;
        }
        if rng.gen_bool(budget.p_write) {
            post_write(&c.opts, imgs.clone(), &c.fs, mode, &got, rng).map_err(|e| format!("{}: {e}", what()))?;
            out.post_writes += 1;
        }
        if rng.gen_bool(budget.p_double)
            && double_crash(&c.opts, imgs, &c.fs, mode, &got, rng).map_err(|e| format!("{}: {e}", what()))?
        {
            out.double_crashes += 1;
        }
    }
    Ok(out)
}

/// Recovers one image and applies the oracle: the contents, how many
/// writes they hold, and how many shard parts the open redid.
fn check_image(
    opts: &ShardedOptions,
    imgs: Vec<Vec<u8>>,
    fs: &MemFs,
    window: &Window,
) -> Result<(Kvs, u64, u64), String> {
    let (db, _sims) = open_image(opts, imgs, fs)?;
    let redone = db.stats().redone_parts;
    let got = read_all(&db).map_err(|e| format!("reading the recovered database failed: {e}"))?;
    let n = window.check(&got).map_err(|e| format!("{e} ({redone} parts redone)"))?;
    db.verify_checksums().map_err(|e| format!("check after recovery failed: {e}"))?;
    Ok((got, n, redone))
}

fn to_model(got: &[(Vec<u8>, Vec<u8>)]) -> Model {
    got.iter().map(|(k, v)| (k.clone(), Arc::from(v.as_slice()))).collect()
}

fn same_or(got: &Kvs, want: &Model, what: &str) -> Result<(), String> {
    if crate::oracle::same(got, want) {
        Ok(())
    } else {
        Err(format!("{what}: {}", diff(got, want)))
    }
}

/// The states of every device and the file system at one instant.
fn cut(sims: &[Arc<SimPm>], fs: &MemFs) -> (FsSnapshot, Vec<CrashState>) {
    fs.snapshot_with(|| {
        let held: Vec<_> = sims.iter().map(|s| s.hold()).collect();
        held.iter().map(|h| h.crash_state()).collect()
    })
}

/// The recovered database accepts a sync cross-shard batch, and a power
/// cut after its close keeps it.
fn post_write(
    opts: &ShardedOptions,
    imgs: Vec<Vec<u8>>,
    snap: &FsSnapshot,
    mode: FsCrashMode,
    before: &Kvs,
    rng: &mut StdRng,
) -> Result<(), String> {
    let fs = snap.restore(mode, rng);
    let (db, sims) = open_image(opts, imgs, &fs)?;
    let mut want = to_model(before);
    let mut b = stratakv::WriteBatch::new();
    for k in ["zz-after-recovery-a", "zz-after-recovery-b", "zz-after-recovery-c"] {
        b.put(k, "x");
        want.insert(k.as_bytes().to_vec(), Arc::from(&b"x"[..]));
    }
    db.write_opt(b, true).map_err(|e| format!("write after recovery failed: {e}"))?;
    db.close().map_err(|e| format!("close after recovery failed: {e}"))?;
    let (fs2, cs) = cut(&sims, &fs);
    let fs3 = fs2.restore(FsCrashMode::DropUnsynced, rng);
    let (db, _) = open_image(opts, cs.iter().map(CrashState::minimal_image).collect(), &fs3)?;
    let got = read_all(&db).map_err(|e| e.to_string())?;
    same_or(&got, &want, "after a write following recovery and a power cut")
}

type Taken = Arc<Mutex<Option<(Vec<CrashState>, FsSnapshot)>>>;

/// Crashes in the middle of recovering the images (at a random event of a
/// random device, if every other device and the file system are free
/// then), recovers that, and expects the uninterrupted recovery's
/// contents. Returns whether such a point was taken.
fn double_crash(
    opts: &ShardedOptions,
    imgs: Vec<Vec<u8>>,
    snap: &FsSnapshot,
    mode: FsCrashMode,
    first: &Kvs,
    rng: &mut StdRng,
) -> Result<bool, String> {
    let fs = snap.restore(mode, rng);
    let (db, sims) = open_image(opts, imgs.clone(), &fs)?;
    let events: Vec<u64> = sims.iter().map(|s| s.events()).collect();
    drop(db);
    let Some(dev) = (0..events.len()).filter(|&d| events[d] > 0).max_by_key(|_| rng.gen::<u32>()) else {
        return Ok(false);
    };
    let at = rng.gen_range(1..=events[dev]);
    let fs = snap.restore(mode, rng);
    let sims: Vec<Arc<SimPm>> = imgs.into_iter().map(|i| Arc::new(SimPm::from_image(i))).collect();
    let taken: Taken = Arc::new(Mutex::new(None));
    let (t2, fs2, all) = (taken.clone(), fs.clone(), sims.clone());
    if let Some(s) = sims.get(dev) {
        s.set_observer(Some(Box::new(move |n, view| {
            if n != at {
                return;
            }
            let held: Option<Vec<_>> = all
                .iter()
                .enumerate()
                .map(|(j, s)| if j == dev { Some(None) } else { s.try_hold().map(Some) })
                .collect();
            let (Some(held), Some(fs)) = (held, fs2.try_snapshot()) else { return };
            let pm = held.iter().map(|h| h.as_ref().map(|h| h.crash_state()).unwrap_or_else(|| view.crash_state()));
            *t2.lock() = Some((pm.collect(), fs));
        })));
    }
    let mut o = opts.clone();
    o.pm_sims = sims.clone();
    o.db.fs = Arc::new(fs.clone());
    let db = Sharded::open(DIR, o).map_err(|e| format!("recovery (double-crash run) failed: {e}"))?;
    drop(db);
    for s in &sims {
        s.set_observer(None);
    }
    let Some((cs, fs_at)) = taken.lock().take() else { return Ok(false) };
    let imgs2 = cs.iter().map(|c| c.random_image(CrashModel::LinePrefix, rng)).collect();
    let fs3 = fs_at.restore(FsCrashMode::DropUnsynced, rng);
    let (db, _) =
        open_image(opts, imgs2, &fs3).map_err(|e| format!("second recovery after a crash in recovery: {e}"))?;
    let got = read_all(&db).map_err(|e| e.to_string())?;
    same_or(&got, &to_model(first), "a crash during recovery changed the recovered contents")?;
    Ok(true)
}
