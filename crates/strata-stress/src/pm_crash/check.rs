//! Checking one crash point: build its crash images, recover each, apply
//! the oracle.
//!
//! Images: under the line-prefix model (each dirty cache line keeps a
//! prefix of its pending stores) every image when there are at most `cap`,
//! else `samples` random ones plus the minimal and maximal image; under the
//! word-subset model (each 8-byte word independently) the same with half
//! the samples. The SSD side is the file system's durable state (unsynced
//! data and directory entries lost), sometimes torn or with all names kept.
//!
//! Oracle per image: the database opens; its contents equal the state
//! after exactly the acknowledged writes, or after those and the one in
//! flight; `verify_checksums` passes. Sometimes also: it accepts a write
//! and keeps it across a reopen; a crash in the middle of its recovery,
//! recovered again, gives the same contents (recovery is idempotent).

use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::Rng;
use strata_pmem::{CrashModel, CrashState, SimPm};
use stratakv::fs::{FsCrashMode, FsSnapshot, MemFs};
use stratakv::{Db, Options};

use super::capture::Capture;
use crate::oracle::{diff, Kvs, Model, Window};

type Taken = Arc<Mutex<Option<(CrashState, Option<FsSnapshot>)>>>;
use crate::workload::read_all;

/// Where the database lives inside the in-memory file system.
pub const DIR: &str = "/db";

/// How many images to try per point.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Enumerate every image when there are at most this many.
    pub cap: u64,
    /// Otherwise this many random images (plus minimal and maximal).
    pub samples: u64,
    /// Chance of the extra write-and-reopen check per image.
    pub p_write: f64,
    /// Chance of the crash-during-recovery check per image.
    pub p_double: f64,
}

/// Counts of one checked point.
#[derive(Debug, Default)]
pub struct Checked {
    /// Images recovered.
    pub states: u64,
    /// Of which under the word-subset model.
    pub word_states: u64,
    /// All images of the point were enumerated.
    pub exhaustive: bool,
    /// Dirty lines at the point.
    pub dirty_lines: u64,
    /// Images recovered with a torn or names-kept file system.
    pub fs_variants: u64,
    /// Writes after recovery that were checked across a reopen.
    pub post_writes: u64,
    /// Crashes during recovery, recovered again.
    pub double_crashes: u64,
    /// The in-flight write was found applied.
    pub in_flight_applied: u64,
}

fn image_indices(cs: &CrashState, model: CrashModel, cap: u64, samples: u64, rng: &mut StdRng) -> (Vec<Vec<u8>>, bool) {
    let n = cs.image_count(model);
    if n <= cap {
        return ((0..n).map(|i| cs.image(model, i)).collect(), true);
    }
    let mut out = vec![cs.minimal_image(), cs.maximal_image()];
    for _ in 0..samples {
        out.push(cs.random_image(model, rng));
    }
    (out, false)
}

/// Opens a database on a crash image.
pub fn open_image(opts: &Options, img: Vec<u8>, fs: &MemFs) -> Result<(Db, Arc<SimPm>), String> {
    let sim = Arc::new(SimPm::from_image(img));
    let mut o = opts.clone();
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(fs.clone());
    Db::open(DIR, o).map(|db| (db, sim)).map_err(|e| format!("recovery failed: {e}"))
}

fn contents(db: &Db) -> Result<Kvs, String> {
    read_all(db).map_err(|e| format!("reading the recovered database failed: {e}"))
}

/// The SSD side of a crash image: usually unsynced data and names lost,
/// sometimes a torn tail or names kept with their data lost.
pub fn random_fs_mode(rng: &mut StdRng) -> FsCrashMode {
    match rng.gen_range(0..8) {
        0 => FsCrashMode::TornTail,
        1 => FsCrashMode::KeepNamesDropData,
        _ => FsCrashMode::DropUnsynced,
    }
}

/// Checks every image of one point; `Err` is a violation.
pub fn check_point(c: &Capture, budget: Budget, rng: &mut StdRng) -> Result<Checked, String> {
    let mut out = Checked { dirty_lines: c.pm.dirty_lines() as u64, ..Default::default() };
    let window = c.history.read().window(c.acked, c.issued)?;
    let (line_imgs, exhaustive) = image_indices(&c.pm, CrashModel::LinePrefix, budget.cap, budget.samples, rng);
    out.exhaustive = exhaustive;
    let mut work: Vec<(Vec<u8>, CrashModel)> = line_imgs.into_iter().map(|i| (i, CrashModel::LinePrefix)).collect();
    if c.pm.dirty_lines() > 0 {
        let (w, _) = image_indices(&c.pm, CrashModel::WordSubset, budget.cap / 2, budget.samples / 2, rng);
        // Index 0 and the maximal image are the same under both models.
        work.extend(w.into_iter().skip(1).map(|i| (i, CrashModel::WordSubset)));
    }
    for (i, (img, model)) in work.into_iter().enumerate() {
        let mode = random_fs_mode(rng);
        if mode != FsCrashMode::DropUnsynced {
            out.fs_variants += 1;
        }
        let fs = c.fs.restore(mode, rng);
        let what = || {
            format!(
                "point (acked {} issued {} phase {:?} from_fs {} dirty_lines {}) image {i} model {model:?} fs {}",
                c.acked,
                c.issued,
                c.phase,
                c.from_fs,
                c.pm.dirty_lines(),
                mode.name()
            )
        };
        let first = check_image(&c.opts, img.clone(), &fs, &window).map_err(|e| format!("{}: {e}", what()))?;
        if first.1 > c.acked {
            out.in_flight_applied += 1;
        }
        out.states += 1;
        if model == CrashModel::WordSubset {
            out.word_states += 1;
        }
        if rng.gen_bool(budget.p_write) {
            post_write(&c.opts, img.clone(), &c.fs, mode, &first.0, rng).map_err(|e| format!("{}: {e}", what()))?;
            out.post_writes += 1;
        }
        if rng.gen_bool(budget.p_double)
            && double_crash(&c.opts, img, &c.fs, mode, &first.0, rng).map_err(|e| format!("{}: {e}", what()))?
        {
            out.double_crashes += 1;
        }
    }
    Ok(out)
}

/// Recovers one image and applies the oracle; returns the contents and
/// how many writes they hold.
fn check_image(opts: &Options, img: Vec<u8>, fs: &MemFs, window: &Window) -> Result<(Kvs, u64), String> {
    let (db, _sim) = open_image(opts, img, fs)?;
    let got = contents(&db)?;
    let n = window.check(&got)?;
    db.verify_checksums().map_err(|e| format!("check after recovery failed: {e}"))?;
    Ok((got, n))
}

fn to_model(got: &[(Vec<u8>, Vec<u8>)]) -> Model {
    got.iter().map(|(k, v)| (k.clone(), Arc::from(v.as_slice()))).collect()
}

/// The recovered database accepts a sync write, and a reopen keeps it.
fn post_write(
    opts: &Options,
    img: Vec<u8>,
    snap: &FsSnapshot,
    mode: FsCrashMode,
    before: &[(Vec<u8>, Vec<u8>)],
    rng: &mut StdRng,
) -> Result<(), String> {
    let fs = snap.restore(mode, rng);
    let (db, sim) = open_image(opts, img, &fs)?;
    let key = b"zz-after-recovery".to_vec();
    db.put_opt(&key, b"x", &stratakv::WriteOptions { sync: true })
        .map_err(|e| format!("write after recovery failed: {e}"))?;
    db.close().map_err(|e| format!("close after recovery failed: {e}"))?;
    // A power cut right after the acknowledged write.
    let (fs2, cs) = fs.snapshot_with(|| sim.crash_state());
    let fs3 = fs2.restore(FsCrashMode::DropUnsynced, rng);
    let (db, _) = open_image(opts, cs.minimal_image(), &fs3)?;
    let got = contents(&db)?;
    let mut want = to_model(before);
    want.insert(key, Arc::from(&b"x"[..]));
    if !crate::oracle::same(&got, &want) {
        return Err(format!("after a write following recovery and a power cut: {}", diff(&got, &want)));
    }
    Ok(())
}

/// Crashes in the middle of recovering `img`, recovers that, and expects
/// the same contents as the uninterrupted recovery. Returns whether a
/// crash point inside recovery existed.
fn double_crash(
    opts: &Options,
    img: Vec<u8>,
    snap: &FsSnapshot,
    mode: FsCrashMode,
    first: &[(Vec<u8>, Vec<u8>)],
    rng: &mut StdRng,
) -> Result<bool, String> {
    // Count the PM events of one recovery.
    let fs = snap.restore(mode, rng);
    let (db, sim) = open_image(opts, img.clone(), &fs)?;
    let events = sim.events();
    drop(db);
    if events == 0 {
        return Ok(false);
    }
    let at = rng.gen_range(1..=events);
    let fs = snap.restore(mode, rng);
    let sim = Arc::new(SimPm::from_image(img));
    let taken: Taken = Arc::new(Mutex::new(None));
    let (t2, fs2) = (taken.clone(), fs.clone());
    sim.set_observer(Some(Box::new(move |n, view| {
        if n == at {
            *t2.lock() = Some((view.crash_state(), fs2.try_snapshot()));
        }
    })));
    let mut o = opts.clone();
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(fs.clone());
    let db = Db::open(DIR, o).map_err(|e| format!("recovery (double-crash run) failed: {e}"))?;
    drop(db);
    sim.set_observer(None);
    let Some((cs, Some(fs_at))) = taken.lock().take() else {
        return Ok(false);
    };
    let img2 = cs.random_image(CrashModel::LinePrefix, rng);
    let fs3 = fs_at.restore(FsCrashMode::DropUnsynced, rng);
    let (db, _) =
        open_image(opts, img2, &fs3).map_err(|e| format!("second recovery after a crash in recovery: {e}"))?;
    let got = contents(&db)?;
    let want = to_model(first);
    if !crate::oracle::same(&got, &want) {
        return Err(format!("a crash during recovery changed the recovered contents: {}", diff(&got, &want)));
    }
    Ok(true)
}
