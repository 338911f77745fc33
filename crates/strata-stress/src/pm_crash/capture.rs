//! Taking crash points while the workload runs.
//!
//! A crash point is the PM crash state (what is durable, what may be) and
//! the file system's durable and visible state *at one instant*, plus how
//! many writes had been acknowledged and started then. Two sources:
//!
//! * the simulated PM's observer (after a store, flush or fence), which
//!   takes the file-system snapshot with `try_snapshot` (skipping the point
//!   if a file-system operation is in progress, so it never waits on it);
//! * the file system's hook (after a create, append, sync, rename, remove,
//!   directory sync), which holds the file-system lock and takes the PM
//!   state (lock order: file system, then PM; never the other way round).
//!
//! Captures go to the checkers through a small bounded channel; a full
//! channel blocks the workload, so every point taken is checked.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;
use parking_lot::RwLock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::{CrashState, SimPm};
use stratakv::fs::{FsSnapshot, MemFs, MemFsOp};
use stratakv::Options;

use crate::oracle::History;

/// Which code was running when the point was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// A foreground write (log append, batch commit, memtable switch).
    Write,
    /// The flush thread (memtable seal, row build and publish, row merge, L0 table).
    Flush,
    /// A compaction thread (column compaction, level compaction, extent recycling).
    Compact,
    /// Opening (recovery), closing, or a foreground flush/compact call.
    Other,
}

impl Phase {
    /// The phase of the calling thread.
    pub fn current(in_open: bool) -> Phase {
        let t = std::thread::current();
        match t.name() {
            Some(n) if n.starts_with("strata-flush") => Phase::Flush,
            Some(n) if n.starts_with("strata-compact") => Phase::Compact,
            _ if in_open => Phase::Other,
            _ => Phase::Write,
        }
    }

    /// Counter name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Write => "points_write",
            Phase::Flush => "points_flush",
            Phase::Compact => "points_compact",
            Phase::Other => "points_open_close",
        }
    }
}

/// One crash point to check.
pub struct Capture {
    /// PM state.
    pub pm: CrashState,
    /// File-system state.
    pub fs: FsSnapshot,
    /// Writes acknowledged before the point.
    pub acked: u64,
    /// Writes started before the point.
    pub issued: u64,
    /// Where it came from.
    pub phase: Phase,
    /// Taken by the file-system hook (else by the PM observer).
    pub from_fs: bool,
    /// The episode's expected states.
    pub history: Arc<RwLock<History>>,
    /// Options to reopen with (PM and file system are replaced).
    pub opts: Arc<Options>,
    /// Seed of the episode (for the violation message).
    pub seed: u64,
}

/// Progress of one episode's writer, read at each crash point.
#[derive(Default)]
pub struct Progress {
    /// Writes acknowledged.
    pub acked: AtomicU64,
    /// Writes started.
    pub issued: AtomicU64,
    /// The writer thread is inside open or close.
    pub in_open: AtomicBool,
    /// Points skipped because the file system was busy.
    pub skipped: AtomicU64,
}

impl Progress {
    /// Runs `f` (an open or a close) marked as inside one.
    pub fn opening<T>(&self, f: impl FnOnce() -> T) -> T {
        self.in_open.store(true, std::sync::atomic::Ordering::SeqCst);
        let r = f();
        self.in_open.store(false, std::sync::atomic::Ordering::SeqCst);
        r
    }
}

/// How often points are taken.
#[derive(Clone, Copy, Debug)]
pub struct Rates {
    /// Per PM event while some line is dirty.
    pub pm_dirty: f64,
    /// Per PM event with nothing dirty.
    pub pm_clean: f64,
    /// Per file-system sync, rename, create, remove or directory sync.
    pub fs_meta: f64,
    /// Per file-system append.
    pub fs_append: f64,
}

/// Installs the PM observer and the file-system hook of one episode.
#[allow(clippy::too_many_arguments)]
pub fn install(
    sim: &Arc<SimPm>,
    mem: &MemFs,
    tx: Sender<Capture>,
    progress: Arc<Progress>,
    history: Arc<RwLock<History>>,
    opts: Arc<Options>,
    seed: u64,
    rates: Rates,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0b5e_7ea1);
    let (mem2, tx2, progress2, history2, opts2) =
        (mem.clone(), tx.clone(), progress.clone(), history.clone(), opts.clone());
    sim.set_observer(Some(Box::new(move |_event, view| {
        let p = if view.dirty_lines() > 0 { rates.pm_dirty } else { rates.pm_clean };
        if !rng.gen_bool(p) {
            return;
        }
        let Some(fs) = mem2.try_snapshot() else {
            progress2.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let acked = progress2.acked.load(Ordering::SeqCst);
        let issued = progress2.issued.load(Ordering::SeqCst);
        let phase = Phase::current(progress2.in_open.load(Ordering::SeqCst));
        let c = Capture {
            pm: view.crash_state(),
            fs,
            acked,
            issued,
            phase,
            from_fs: false,
            history: history2.clone(),
            opts: opts2.clone(),
            seed,
        };
        let _ = tx2.send(c);
    })));
    let sim2 = sim.clone();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xf5_f5f5);
    mem.set_hook(Some(Box::new(move |_n, op, view| {
        let p = if op == MemFsOp::Append { rates.fs_append } else { rates.fs_meta };
        if !rng.gen_bool(p) {
            return;
        }
        // The PM state is taken a moment after the hook starts (its lock
        // may be busy) while writers, which need no file-system lock, go
        // on: bound the acknowledged count before and the started count
        // after it. The file system cannot change meanwhile (we hold it).
        let acked = progress.acked.load(Ordering::SeqCst);
        let phase = Phase::current(progress.in_open.load(Ordering::SeqCst));
        let pm = sim2.crash_state();
        let issued = progress.issued.load(Ordering::SeqCst);
        let c = Capture {
            pm,
            fs: view.snapshot(),
            acked,
            issued,
            phase,
            from_fs: true,
            history: history.clone(),
            opts: opts.clone(),
            seed,
        };
        let _ = tx.send(c);
    })));
}

/// Removes the observer and hook (they hold each other's device: a cycle).
pub fn uninstall(sim: &SimPm, mem: &MemFs) {
    sim.set_observer(None);
    mem.set_hook(None);
}
