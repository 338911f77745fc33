//! The readers' view, the background state, and the engine's counters.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::version::{FileMeta, Version};

/// What a reader needs, swapped atomically: memtables and the version
/// (which holds level 0's state too).
pub(crate) struct SuperVersion {
    /// The mutable memtable.
    pub mem: Arc<Memtable>,
    /// Sealed memtables, newest first.
    pub imms: Vec<Arc<Memtable>>,
    /// The tables and level 0.
    pub version: Arc<Version>,
}

/// How writers must wait for level 0 (see `Level0::stall_policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stall {
    /// Writers stop until level 0 drains.
    pub stop: bool,
    /// Each writer is delayed once (LevelDB's slowdown).
    pub slow: bool,
}

/// Background state, behind the engine's `state` lock.
pub(crate) struct State {
    /// The mutable memtable.
    pub mem: Arc<Memtable>,
    /// Sealed memtables, oldest first.
    pub imms: VecDeque<Arc<Memtable>>,
    /// The current version (the version set's, as background work sees
    /// it); set with `Engine::set_version`, which keeps `stall` with it.
    pub version: Arc<Version>,
    /// How writers must wait for level 0 in `version`: worked out once per
    /// version rather than on every write.
    pub stall: Stall,
    /// Files being compacted.
    pub busy: HashSet<u64>,
    /// Files removed from the version, deleted once no version uses them.
    pub obsolete: Vec<Arc<FileMeta>>,
    /// Set when a write or background failure leaves durable state unknown.
    pub poisoned: Option<String>,
    /// A retryable background failure (the disk is full): flushes and
    /// compactions retry, writers get back-pressure and then this error.
    pub bg_error: Option<Error>,
    /// Since when a flush (or row merge) has been waiting for free PM
    /// slots; None while it is not.
    pub pm_wait_since: Option<Instant>,
    /// The `pm_wait_since` of the wait for which a stalled writer got
    /// `PmFull`: while that wait lasts, later stalled writers get it at once.
    pub pm_full_reported: Option<Instant>,
    /// The value of `bg_retries` when the attempt that set `bg_error` began.
    pub bg_error_retry: u64,
    /// Bumped by a caller that waits on background work while `bg_error`
    /// is set, to have it retried at once (the disk may have room again):
    /// only a failure of an attempt begun since then is reported to it.
    pub bg_retries: u64,
    /// Compactions running (of any kind).
    pub compactions_running: usize,
    /// Bumped with every notification of `cv` ([`State::changed`]): a
    /// thread that finds no work notes it first, and waits only if nothing
    /// changed while it looked (a notification may come before it waits).
    pub epoch: u64,
}

impl State {
    /// A state whose memtable is `mem` and whose version is `version`
    /// (in which writers wait as `stall` says).
    pub fn new(mem: Arc<Memtable>, version: Arc<Version>, stall: Stall) -> State {
        State {
            mem,
            imms: VecDeque::new(),
            version,
            stall,
            busy: HashSet::new(),
            obsolete: Vec::new(),
            poisoned: None,
            bg_error: None,
            pm_wait_since: None,
            pm_full_reported: None,
            bg_error_retry: 0,
            bg_retries: 0,
            compactions_running: 0,
            epoch: 0,
        }
    }

    /// `Poisoned` if the database refuses writes, else `Closed` if
    /// `closing`: what a caller waiting on background work gets instead.
    pub fn check(&self, closing: bool) -> Result<()> {
        if let Some(p) = &self.poisoned {
            return Err(Error::Poisoned(p.clone()));
        }
        if closing {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Notes a change other threads may be waiting for; the caller
    /// notifies the engine's `cv` (see [`super::Engine::notify`]).
    pub fn changed(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// Marks a compaction's input files busy and counts it as running.
    pub fn mark_busy<'a>(&mut self, inputs: impl Iterator<Item = &'a Arc<FileMeta>>) {
        for f in inputs {
            self.busy.insert(f.number);
        }
        self.compactions_running += 1;
    }

    /// Undoes [`State::mark_busy`].
    pub fn unmark_busy<'a>(&mut self, inputs: impl Iterator<Item = &'a Arc<FileMeta>>) {
        for f in inputs {
            self.busy.remove(&f.number);
        }
        self.compactions_running = self.compactions_running.saturating_sub(1);
    }
}

/// Counters behind `Stats`.
#[derive(Default)]
pub(crate) struct Counters {
    pub user_bytes: AtomicU64,
    /// `delete_range` calls.
    pub range_deletes: AtomicU64,
    /// Tables deleted whole because a range tombstone covered them.
    pub range_dropped_files: AtomicU64,
    /// `delete_range` tombstones removed because they hid nothing any more.
    pub range_tombstones_retired: AtomicU64,
    pub writes: AtomicU64,
    pub table_bytes_written: AtomicU64,
    pub flushes: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub stall_micros: AtomicU64,
    pub slowdowns: AtomicU64,
    pub gets: AtomicU64,
    pub columns: AtomicU64,
    pub run_merges: AtomicU64,
    pub throttled_micros: AtomicU64,
    /// Level-0 sources (matrix rows) an iterator left out by their prefix filter.
    pub prefix_skipped_rows: AtomicU64,
}
