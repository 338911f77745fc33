//! The end of an fs-fault episode: a process crash, a clean close, or a
//! power cut (SSD: unsynced data and names lost, torn tails, or names kept;
//! PM: minimal, maximal and random images), then recovery without faults
//! and the per-key oracle.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::Rng;
use strata_pmem::{CrashModel, SimPm};
use stratakv::fs::{FaultFs, FsCrashMode, MemFs};
use stratakv::{Db, Options, WriteOptions};

use crate::oracle::Expected;
use crate::pm_crash::check::DIR;
use crate::report::Report;
use crate::workload::read_all;

/// Opens `(pm image, file system)` without faults and checks it. Returns
/// the number of keys checked.
pub fn recover_and_check(opts: &Options, img: Vec<u8>, fs: MemFs, expected: &Expected) -> Result<u64, String> {
    let sim = Arc::new(SimPm::from_image(img));
    let mut o = opts.clone();
    o.pm_sim = Some(sim);
    o.fs = Arc::new(fs);
    let db = Db::open(DIR, o).map_err(|e| format!("recovery failed: {e}"))?;
    let got: BTreeMap<Vec<u8>, Vec<u8>> =
        read_all(&db).map_err(|e| format!("reading the recovered database failed: {e}"))?.into_iter().collect();
    let n = expected.check(&got)?;
    db.verify_checksums().map_err(|e| format!("check after recovery failed: {e}"))?;
    // The recovered database is usable.
    db.put_opt(b"zz-after-recovery", b"1", &WriteOptions { sync: true })
        .map_err(|e| format!("write after recovery failed: {e}"))?;
    db.close().map_err(|e| format!("close after recovery failed: {e}"))?;
    Ok(n)
}

/// Ends the episode with a random kind of crash and checks every image.
#[allow(clippy::too_many_arguments)]
pub fn end_episode(
    rng: &mut StdRng,
    db: Db,
    opts: &Options,
    sim: &Arc<SimPm>,
    mem: &MemFs,
    fault: &FaultFs,
    expected: &Expected,
    rep: &mut Report,
) -> Result<(), String> {
    match rng.gen_range(0..4) {
        0 => {
            // Process crash: the kernel keeps every write.
            let (snap, img) = mem.snapshot_with(|| sim.visible_image());
            fault.power_cut();
            drop(db);
            let n = recover_and_check(opts, img, snap.restore(FsCrashMode::KeepAll, rng), expected)
                .map_err(|e| format!("after a process crash: {e}"))?;
            rep.add("process_crashes", 1);
            rep.add("crash_states", 1);
            rep.add("keys_checked", n);
        }
        1 => {
            // Clean close (its errors are reported, not a violation), reopen.
            let _ = db.close();
            let (snap, img) = mem.snapshot_with(|| sim.visible_image());
            let n = recover_and_check(opts, img, snap.restore(FsCrashMode::KeepAll, rng), expected)
                .map_err(|e| format!("after close and reopen: {e}"))?;
            rep.add("clean_reopens", 1);
            rep.add("crash_states", 1);
            rep.add("keys_checked", n);
        }
        _ => {
            // Power cut: both devices frozen at one instant.
            let (snap, cs) = mem.snapshot_with(|| sim.crash_state());
            fault.power_cut();
            drop(db);
            rep.add("power_cuts", 1);
            for mode in [FsCrashMode::DropUnsynced, FsCrashMode::KeepNamesDropData, FsCrashMode::TornTail] {
                let imgs = [cs.minimal_image(), cs.maximal_image(), cs.random_image(CrashModel::LinePrefix, rng)];
                for (i, img) in imgs.into_iter().enumerate() {
                    let fs = snap.restore(mode, rng);
                    let n = recover_and_check(opts, img, fs, expected)
                        .map_err(|e| format!("after a power cut (fs {}, pm image {i}): {e}", mode.name()))?;
                    rep.add("crash_states", 1);
                    rep.add("keys_checked", n);
                }
            }
        }
    }
    Ok(())
}
