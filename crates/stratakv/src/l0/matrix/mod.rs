//! Level 0 as the matrix container in PM (MatrixKV on ListDB's log; data
//! structures and policy in `crate::matrix`): a sealed memtable becomes a
//! row ([`seal`]), receiver rows are merged as they pile up, column
//! compaction moves key ranges of the compactor rows into sorted runs or
//! L1 ([`mod@column`]), and complete runs are merged into L1 ([`runs`]).
//!
//! Every change follows the same order: build the new PM structure (row)
//! or the new tables, persist them, then record the new matrix state in the
//! MANIFEST (the container root) together with any table changes, and only
//! then let readers see it. A crash before the MANIFEST append leaves the
//! old state, whose PM extents are untouched; unreferenced new extents are
//! retired at the next open.

mod column;
mod runs;
mod seal;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_pmem::ExtentHead;

use super::{Job, Lane, Level0, RecoverCx, Stall};
use crate::engine::{Engine, StallPolicy};
use crate::error::{Error, Result};
use crate::key::PrefixExtractor;
use crate::matrix::build::EXTENT_KIND_ROW;
use crate::matrix::policy::runs::merge_due;
use crate::matrix::policy::{self, RoundClock};
use crate::matrix::row::{row_bytes, Row};
use crate::matrix::{LiveRow, Matrix, MatrixRecord};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::stats::{LevelStats, Stats};
use crate::version::{L0State, Version};

/// The running compaction round, behind the kind's own lock (lock order:
/// after `versions`, before `state`).
#[derive(Debug, Default)]
struct Round {
    /// When it started, to pace writers.
    clock: RoundClock,
    /// The sorted run the round writes its columns to, once its first
    /// column has picked one (not persisted: a round resumed after a
    /// restart writes the rest to a new run, as its keys are disjoint from
    /// what the old run holds).
    run: Option<u64>,
    /// A column compaction is running.
    column_busy: bool,
}

impl Round {
    /// The run the running round writes to, if a round runs.
    fn active_run(&self, m: &Matrix) -> Option<u64> {
        self.run.filter(|_| m.round_active())
    }
}

/// The matrix level 0.
pub(crate) struct MatrixL0 {
    /// PM bytes the matrix may hold.
    limit: u64,
    /// Target bytes of one column.
    column_target: u64,
    /// Sorted runs gathered before they merge into L1.
    max_runs: usize,
    /// Columns write sorted runs (`max_runs` > 1) rather than merge into L1.
    tiered: bool,
    /// Threads a column is merged with.
    column_threads: usize,
    /// Rows per segment.
    rows_per_segment: usize,
    /// Receiver rows that trigger a row merge.
    merge_trigger: usize,
    /// Segments get hash indexes rather than bloom filters.
    hash_index: bool,
    /// Groups keys for the rows' prefix filters.
    prefix_extractor: Option<Arc<dyn PrefixExtractor>>,
    /// Target size of the tables columns and merges write.
    target_file_size: u64,
    /// The next row id to hand out (the MANIFEST record keeps it with
    /// every change).
    next_row_id: AtomicU64,
    round: Mutex<Round>,
}

impl MatrixL0 {
    /// The matrix level 0 of `opts`.
    pub fn new(opts: &Options) -> MatrixL0 {
        MatrixL0 {
            limit: opts.matrix_limit(),
            column_target: opts.column_target(),
            max_runs: opts.max_runs,
            tiered: opts.tiered(),
            column_threads: opts.column_threads,
            rows_per_segment: opts.rows_per_segment,
            merge_trigger: opts.merge_trigger(),
            hash_index: opts.matrix_hash_index,
            prefix_extractor: opts.prefix_extractor.clone(),
            target_file_size: opts.target_file_size,
            next_row_id: AtomicU64::new(1),
            round: Mutex::new(Round::default()),
        }
    }

    /// A matrix with no rows, segmented as this level 0 segments rows.
    fn empty_matrix(&self) -> Matrix {
        Matrix::new(self.rows_per_segment, self.hash_index)
    }

    /// A copy of version `v`'s matrix, to change and install (`recover`
    /// gives every version one; an empty one stands in otherwise).
    fn matrix_of(&self, v: &Version) -> Matrix {
        matrix_in(v).cloned().unwrap_or_else(|| self.empty_matrix())
    }

    /// Reads version `v`'s matrix without copying it.
    fn with_matrix<T>(&self, v: &Version, f: impl FnOnce(&Matrix) -> T) -> T {
        match matrix_in(v) {
            Some(m) => f(m),
            None => f(&self.empty_matrix()),
        }
    }

    /// Hands out a row id.
    fn new_row_id(&self) -> u64 {
        self.next_row_id.fetch_add(1, Ordering::Relaxed)
    }

    /// A live row over `row` as a flush or merge makes it (a receiver).
    fn live(&self, row: Row, first_log: u64, last_log: u64) -> Result<LiveRow> {
        LiveRow::new(row, 0, false, first_log, last_log, self.hash_index, self.prefix_extractor.as_deref())
    }

    /// `m`, to be installed: with the row ids handed out so far recorded.
    fn seal_state(&self, mut m: Matrix) -> Arc<Matrix> {
        m.next_row_id = m.next_row_id.max(self.next_row_id.load(Ordering::Relaxed));
        Arc::new(m)
    }

    /// Sets the write pace for the installed matrix `m` (see
    /// [`policy::throttle_rate`]).
    fn update_throttle(&self, eng: &Engine, m: &Matrix) {
        let secs = self.round.lock().clock.seconds_left(m.compactor_data_bytes());
        eng.throttle.set_rate(policy::throttle_rate(m.pm_bytes(), self.limit, secs));
    }

    /// Whether a compaction round should start in `m`.
    fn round_due(&self, eng: &Engine, m: &Matrix, force: bool) -> bool {
        policy::round_due(
            m.rows.len(),
            m.pm_bytes(),
            self.limit,
            eng.region.free_slots(),
            eng.region.slot_count(),
            force,
        )
    }
}

/// Version `v`'s matrix, if it has one (`recover` gives every version one).
pub(super) fn matrix_in(v: &Version) -> Option<&Matrix> {
    v.l0.as_ref().and_then(|s| s.as_any().downcast_ref::<Matrix>())
}

impl Level0 for MatrixL0 {
    fn name(&self) -> &'static str {
        "matrix"
    }

    /// Adopts the row extents the record names and the log extents their
    /// elements point into.
    fn recover(&self, cx: &RecoverCx<'_>, older_logs: &mut Vec<ExtentHead>) -> Result<Option<Arc<dyn L0State>>> {
        let record = match cx.record {
            Some(b) => MatrixRecord::decode(b).map_err(|why| Error::corruption(cx.manifest_path, 0, why))?,
            None => MatrixRecord { next_row_id: 1, rows: Vec::new() },
        };
        let path: &PathBuf = cx.region_path;
        let pm = |e| Error::from_pm(path, e);
        let mut row_extents = Vec::new();
        for m in &record.rows {
            let h = cx
                .heads
                .iter()
                .find(|h| h.kind == EXTENT_KIND_ROW && h.slot == m.slot && h.number == m.id && h.slots == m.slots)
                .copied()
                .ok_or_else(|| {
                    Error::corruption(path, m.slot, format!("matrix row {} is missing from the PM region", m.id))
                })?;
            row_extents.push(cx.region.adopt(h).map_err(pm)?);
        }
        for h in cx.heads.iter().filter(|h| h.kind == EXTENT_KIND_ROW) {
            if !record.rows.iter().any(|m| m.id == h.number && m.slot == h.slot) {
                // Built but never published (crash before its MANIFEST edit), or merged away.
                cx.region.retire(*h).map_err(pm)?;
            }
        }
        let mut row_logs = vec![Vec::new(); record.rows.len()];
        let mut unclaimed = Vec::new();
        for h in older_logs.drain(..) {
            match record.rows.iter().position(|m| (m.first_log..=m.last_log).contains(&h.number)) {
                Some(i) => row_logs[i].push(cx.region.adopt(h).map_err(pm)?),
                None => unclaimed.push(h),
            }
        }
        *older_logs = unclaimed;
        let mut live_rows = Vec::new();
        for ((m, ext), logs) in record.rows.iter().zip(row_extents).zip(row_logs) {
            let row = Row::open(ext, logs, cx.region_path.clone())?;
            live_rows.push(LiveRow::new(
                row,
                m.start,
                m.compactor,
                m.first_log,
                m.last_log,
                self.hash_index,
                self.prefix_extractor.as_deref(),
            )?);
        }
        self.next_row_id.store(record.next_row_id.max(1), Ordering::Relaxed);
        let m = Matrix::recovered(record.next_row_id, live_rows, self.rows_per_segment, self.hash_index);
        Ok(Some(Arc::new(m)))
    }

    fn flush(&self, eng: &Engine, imm: &Arc<Memtable>) -> Result<()> {
        self.seal_to_row(eng, imm)?;
        self.maybe_merge_rows(eng)
    }

    fn stall_policy(&self) -> StallPolicy {
        let limit = self.limit;
        Box::new(move |v: &Version| {
            // The matrix is full: wait for column compaction to free PM.
            let pm = matrix_in(v).map_or(0, Matrix::pm_bytes);
            Stall { stop: pm >= limit, slow: false }
        })
    }

    fn l1_target_bytes(&self) -> u64 {
        policy::l1_base_bytes(self.limit, self.max_runs)
    }

    fn flush_pm_bytes(&self, records: u64) -> u64 {
        // A memtable with no records makes no row (see `seal_to_row`).
        if records == 0 {
            0
        } else {
            row_bytes(records)
        }
    }

    fn lanes(&self) -> &'static [&'static str] {
        // Columns get a thread of their own: a long merge of runs or levels
        // never holds up draining the matrix (PM space).
        &["column"]
    }

    fn next_job(&self, eng: &Engine, lane: Lane) -> Result<Option<Job<'_>>> {
        match lane {
            Lane::Own(_) => {
                let task = {
                    let mut vs = eng.versions.lock();
                    self.pick_column_task(eng, &mut vs, false)?
                };
                Ok(task.map(|t| -> Job<'_> { Box::new(move |eng: &Engine| self.run_column(eng, &t)) }))
            }
            Lane::Shared => Ok(self
                .pick_run_merge(eng, false)
                .map(|(t, v)| -> Job<'_> { Box::new(move |eng: &Engine| self.run_run_merge(eng, &t, &v)) })),
        }
    }

    fn work_pending(&self, eng: &Engine, v: &Version, auto: bool) -> bool {
        let round = self.round.lock();
        if round.column_busy {
            return true;
        }
        auto && self.with_matrix(v, |m| {
            m.round_active() || self.round_due(eng, m, false) || merge_due(v, round.active_run(m), self.max_runs)
        })
    }

    fn drain(&self, eng: &Engine) -> Result<usize> {
        // Move the matrix into L1 column by column (or into a run, then
        // merge the runs into L1); compact_range then pushes L1 and below
        // down as usual. Runs go first when columns go straight to L1:
        // such a column waits until no run is left above L1.
        if self.tiered {
            self.drain_matrix(eng)?;
            self.merge_all_runs(eng)?;
        } else {
            self.merge_all_runs(eng)?;
            self.drain_matrix(eng)?;
        }
        Ok(1)
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn stats(&self, v: &Version, stats: &mut Stats) {
        stats.l0 = self.name();
        self.with_matrix(v, |m| {
            // L0 is the matrix: rows and their data.
            if let Some(l) = stats.levels.first_mut() {
                *l = LevelStats { level: 0, files: m.rows.len(), bytes: m.data_bytes() };
            }
            stats.matrix_rows = m.rows.len();
            stats.matrix_dram_bytes = m.dram_bytes();
            stats.matrix_data_bytes = m.data_bytes();
            stats.matrix_pm_bytes = m.pm_bytes();
        });
        stats.matrix_limit_bytes = self.limit;
    }
}
