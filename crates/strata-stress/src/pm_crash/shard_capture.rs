//! Taking crash points of a sharded database: every shard's simulated PM
//! device and the file system at one instant.
//!
//! A point holds every device still ([`SimPm::hold`]) and the file
//! system's lock at once, so no store, flush, fence or file-system
//! operation of any shard, of the coordinator log or of the shard-count
//! file runs between the states taken: one consistent cut. Two sources,
//! as for one device (see [`super::capture`]):
//!
//! * a device's observer (it runs with that device held) tries to hold
//!   every other device and the file system, and skips the point if one is
//!   busy (it never waits while holding a device);
//! * the file system's hook (it runs with the file-system lock) holds the
//!   devices in shard order, waiting (lock order: file system, then
//!   devices; observers only ever try, so nothing waits in a cycle).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_channel::Sender;
use parking_lot::RwLock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::{CrashState, SimPm};
use stratakv::fs::{FsSnapshot, MemFs, MemFsOp};
use stratakv::ShardedOptions;

use super::capture::{Phase, Progress, Rates};
use crate::oracle::History;

/// One crash point of a sharded database.
pub struct ShardCapture {
    /// Each shard's PM state, in shard order.
    pub pm: Vec<CrashState>,
    /// File-system state (shards' SSD side, coordinator log, shard count).
    pub fs: FsSnapshot,
    /// Writes acknowledged before the point.
    pub acked: u64,
    /// Writes started before the point.
    pub issued: u64,
    /// Where it came from.
    pub phase: Phase,
    /// Taken by the file-system hook (else by a device's observer).
    pub from_fs: bool,
    /// The episode's expected states.
    pub history: Arc<RwLock<History>>,
    /// Options to reopen with (devices and file system are replaced).
    pub opts: Arc<ShardedOptions>,
    /// Seed of the episode (for the violation message).
    pub seed: u64,
}

impl ShardCapture {
    /// Dirty cache lines over every device.
    pub fn dirty_lines(&self) -> usize {
        self.pm.iter().map(CrashState::dirty_lines).sum()
    }
}

/// What every source of one episode shares.
#[derive(Clone)]
pub struct Episode {
    /// Where points go.
    pub tx: Sender<ShardCapture>,
    /// The writer's progress.
    pub progress: Arc<Progress>,
    /// The writer's history.
    pub history: Arc<RwLock<History>>,
    /// Options to reopen with.
    pub opts: Arc<ShardedOptions>,
    /// Seed of the episode.
    pub seed: u64,
    /// How often points are taken.
    pub rates: Rates,
}

impl Episode {
    fn send(&self, pm: Vec<CrashState>, fs: FsSnapshot, acked: u64, from_fs: bool) {
        let issued = self.progress.issued.load(Ordering::SeqCst);
        let phase = Phase::current(self.progress.in_open.load(Ordering::SeqCst));
        let c = ShardCapture {
            pm,
            fs,
            acked,
            issued,
            phase,
            from_fs,
            history: self.history.clone(),
            opts: self.opts.clone(),
            seed: self.seed,
        };
        let _ = self.tx.send(c);
    }
}

/// Installs an observer on every device and the file-system hook.
pub fn install(sims: &[Arc<SimPm>], mem: &MemFs, ep: Episode) {
    for (i, sim) in sims.iter().enumerate() {
        let (all, mem, ep) = (sims.to_vec(), mem.clone(), ep.clone());
        let mut rng = StdRng::seed_from_u64(ep.seed ^ 0x0b5e_7ea1 ^ ((i as u64) << 32));
        sim.set_observer(Some(Box::new(move |_event, view| {
            let p = if view.dirty_lines() > 0 { ep.rates.pm_dirty } else { ep.rates.pm_clean };
            if !rng.gen_bool(p) {
                return;
            }
            // Device i is held (the observer runs inside its event): try
            // the others, then the file system, never waiting.
            let mut held = Vec::with_capacity(all.len());
            for (j, s) in all.iter().enumerate() {
                if j == i {
                    continue;
                }
                match s.try_hold() {
                    Some(h) => held.push((j, h)),
                    None => {
                        ep.progress.skipped.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
            let Some(fs) = mem.try_snapshot() else {
                ep.progress.skipped.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let acked = ep.progress.acked.load(Ordering::SeqCst);
            let mut pm: Vec<Option<CrashState>> = (0..all.len()).map(|_| None).collect();
            if let Some(slot) = pm.get_mut(i) {
                *slot = Some(view.crash_state());
            }
            for (j, h) in &held {
                if let Some(slot) = pm.get_mut(*j) {
                    *slot = Some(h.crash_state());
                }
            }
            drop(held);
            let pm: Vec<CrashState> = pm.into_iter().flatten().collect();
            ep.send(pm, fs, acked, false);
        })));
    }
    let all = sims.to_vec();
    let mut rng = StdRng::seed_from_u64(ep.seed ^ 0xf5_f5f5);
    mem.set_hook(Some(Box::new(move |_n, op, view| {
        let p = if op == MemFsOp::Append { ep.rates.fs_append } else { ep.rates.fs_meta };
        if !rng.gen_bool(p) {
            return;
        }
        let acked = ep.progress.acked.load(Ordering::SeqCst);
        let held: Vec<_> = all.iter().map(|s| s.hold()).collect();
        let pm = held.iter().map(|h| h.crash_state()).collect();
        drop(held);
        ep.send(pm, view.snapshot(), acked, true);
    })));
}

/// Removes the observers and the hook (they hold the devices: a cycle).
pub fn uninstall(sims: &[Arc<SimPm>], mem: &MemFs) {
    for s in sims {
        s.set_observer(None);
    }
    mem.set_hook(None);
}
