//! Merging the sorted runs of the matrix profile into L1 (see
//! `compaction::runs`). Like every compaction: write the new L1 tables,
//! then record the change in the MANIFEST, then let readers see it; a
//! crash before the MANIFEST append leaves the runs as they were.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::background::{mark_busy_inputs, unmark_busy_inputs};
use super::DbInner;
use crate::compaction::picker::key_may_exist_below;
use crate::compaction::runs::{pick_run_merge, RunMergeTask};
use crate::compaction::{build_tables, Dropper};
use crate::error::{Error, Result};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::version::{LevelIter, Version, VersionEdit};

impl DbInner {
    /// Runs a merge picked (and marked busy) by the caller, then unmarks it.
    pub(crate) fn run_run_merge(&self, t: &RunMergeTask, version: &Arc<Version>) -> Result<()> {
        let r = self.merge_runs(t, version);
        let mut st = self.state.lock();
        unmark_busy_inputs(&mut st, t.all_inputs());
        self.state_cv.notify_all();
        r
    }

    /// Merges the task's runs and the L1 tables they overlap into new L1
    /// tables and installs the result.
    fn merge_runs(&self, t: &RunMergeTask, version: &Arc<Version>) -> Result<()> {
        let mut edit = VersionEdit::default();
        for run in &t.runs {
            edit.run_deleted.extend(run.files.iter().map(|f| (run.id, f.number)));
        }
        edit.deleted.extend(t.next_inputs.iter().map(|f| (1, f.number)));
        let mut written = 0;
        if t.trivial_move {
            edit.added.extend(t.runs.iter().flat_map(|r| r.files.iter()).map(|f| (1, (**f).clone())));
        } else {
            // Newest run first, L1 last: the merge keeps the newest version
            // of a key that every snapshot sees.
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            for run in &t.runs {
                children.push(Box::new(LevelIter::for_compaction(self.tables.clone(), run.files.clone())));
            }
            if !t.next_inputs.is_empty() {
                children.push(Box::new(LevelIter::for_compaction(self.tables.clone(), t.next_inputs.clone())));
            }
            let mut it = MergingIterator::new(children);
            // Every run older than the output is an input; only the levels
            // below L1 can still hold a key a tombstone hides.
            let mut dropper = Dropper::new(self.oldest_snapshot(), |uk| key_may_exist_below(version, 1, uk));
            let next = || self.versions.lock().new_file_number();
            // While writers are paced because the matrix is filling, the
            // columns that drain it get the CPU first: a merge only makes
            // reads cheaper, unless runs pile up to twice their number.
            // Without tiering (runs left by an open with a larger
            // `max_runs`), columns wait for this merge: it never pauses.
            let urgent_at = 2 * self.opts.max_runs.max(1);
            let tiered = self.opts.tiered();
            let pause = || {
                tiered
                    && self.throttle_rate.load(Ordering::Relaxed) != 0
                    && self.sv.load().version.runs.len() < urgent_at
            };
            let mut ctx = self.build_ctx_pub(&next, self.opts.target_file_size);
            ctx.pause = Some(&pause);
            let outputs = build_tables(&ctx, &mut it, &mut dropper, &t.grandparents)?;
            written = outputs.iter().map(|f| f.size).sum();
            edit.added.extend(outputs.into_iter().map(|f| (1, f)));
            self.counters.compaction_bytes_read.fetch_add(t.input_bytes(), Ordering::Relaxed);
        }
        let obsolete = if t.trivial_move { Vec::new() } else { t.all_inputs().cloned().collect() };
        self.install_compaction(edit, written, obsolete)?;
        self.counters.run_merges.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Merges every complete run into L1 now, whatever their number
    /// (`compact_range`); waits for a merge that is already running.
    pub(crate) fn merge_all_runs(&self) -> Result<()> {
        loop {
            let picked = {
                let _vs = self.versions.lock();
                let active = self.matrix.lock().active_run();
                let mut st = self.state.lock();
                if let Some(p) = &st.poisoned {
                    return Err(Error::Poisoned(p.clone()));
                }
                if self.shutting_down.load(Ordering::Acquire) {
                    return Err(Error::Closed);
                }
                if !st.version.runs.iter().any(|r| Some(r.id) != active) {
                    return Ok(());
                }
                let t = pick_run_merge(&st.version, active, self.opts.max_runs, true, &st.busy);
                if let Some(t) = &t {
                    mark_busy_inputs(&mut st, t.all_inputs());
                }
                t.map(|t| (t, st.version.clone()))
            };
            match picked {
                Some((t, v)) => {
                    let r = self.run_run_merge(&t, &v);
                    self.delete_obsolete();
                    r?;
                }
                None => {
                    // A background merge holds the runs (or their L1 tables).
                    let mut st = self.state.lock();
                    self.state_cv.wait_for(&mut st, Duration::from_millis(20));
                }
            }
        }
    }
}
