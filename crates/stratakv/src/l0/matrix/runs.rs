//! Merging the sorted runs that column compactions write into L1 (policy
//! in `matrix::policy::runs`). Like every compaction: write the new L1
//! tables, then record the change in the MANIFEST, then let readers see it;
//! a crash before the MANIFEST append leaves the runs as they were.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::MatrixL0;
use crate::compaction::picker::key_may_exist_below;
use crate::compaction::{execute, sorted_input, Merge};
use crate::engine::{Commit, Engine};
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::matrix::policy::runs::{pick_run_merge, RunMergeTask};
use crate::version::{Version, VersionEdit};

impl MatrixL0 {
    /// Picks a merge of the complete runs into L1 if one is due (with
    /// `force`, if any complete run exists) and marks its inputs busy.
    pub(super) fn pick_run_merge(&self, eng: &Engine, force: bool) -> Option<(RunMergeTask, Arc<Version>)> {
        let vs = eng.versions.lock();
        let v = vs.current();
        let active = self.with_matrix(&v, |m| self.round.lock().active_run(m));
        let mut st = eng.state.lock();
        let t = pick_run_merge(&st.version, active, self.max_runs, force, &st.busy)?;
        st.mark_busy(t.all_inputs());
        Some((t, st.version.tables_only()))
    }

    /// Runs a merge picked (and marked busy) by [`MatrixL0::pick_run_merge`],
    /// then unmarks it.
    pub(super) fn run_run_merge(&self, eng: &Engine, t: &RunMergeTask, version: &Arc<Version>) -> Result<()> {
        let r = self.merge_runs(eng, t, version);
        let mut st = eng.state.lock();
        st.unmark_busy(t.all_inputs());
        eng.notify(&mut st);
        r
    }

    /// Merges the task's runs and the L1 tables they overlap into new L1
    /// tables and installs the result.
    fn merge_runs(&self, eng: &Engine, t: &RunMergeTask, version: &Version) -> Result<()> {
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
            let mut inputs: Vec<Box<dyn InternalIterator>> = Vec::new();
            for run in &t.runs {
                inputs.push(sorted_input(&eng.tables, run.files.clone()));
            }
            if !t.next_inputs.is_empty() {
                inputs.push(sorted_input(&eng.tables, t.next_inputs.clone()));
            }
            // Every run older than the output is an input; only the levels
            // below L1 can still hold a key a tombstone hides.
            let below = |uk: &[u8]| key_may_exist_below(version, 1, uk);
            let next = || eng.new_file_number();
            // While writers are paced because the matrix is filling, the
            // columns that drain it get the CPU first: a merge only makes
            // reads cheaper, unless runs pile up to twice their number.
            // Without tiering (runs left by an open with a larger
            // `max_runs`), columns wait for this merge: it never pauses.
            let urgent_at = 2 * self.max_runs.max(1);
            let pause = || self.tiered && eng.throttle.active() && eng.sv.load().version.runs.len() < urgent_at;
            let mut ctx = eng.build_ctx(&next, self.target_file_size);
            ctx.pause = Some(&pause);
            let merge = Merge {
                inputs,
                oldest_snapshot: eng.oldest_snapshot(),
                may_exist_below: &below,
                grandparents: &t.grandparents,
            };
            let outputs = execute(&ctx, merge)?;
            written = outputs.iter().map(|f| f.size).sum();
            edit.added.extend(outputs.into_iter().map(|f| (1, f)));
            eng.counters.compaction_bytes_read.fetch_add(t.input_bytes(), Ordering::Relaxed);
        }
        let obsolete = if t.trivial_move { Vec::new() } else { t.all_inputs().cloned().collect() };
        {
            let mut vs = eng.versions.lock();
            eng.commit(&mut vs, Commit { edit, obsolete, ..Default::default() })?;
        }
        eng.counters.table_bytes_written.fetch_add(written, Ordering::Relaxed);
        eng.counters.compactions.fetch_add(1, Ordering::Relaxed);
        eng.counters.run_merges.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Merges every complete run into L1 now, whatever their number
    /// (`compact_range`); waits for a merge that is already running.
    pub(super) fn merge_all_runs(&self, eng: &Engine) -> Result<()> {
        loop {
            eng.state.lock().check(eng.closing())?;
            let any_complete = {
                let vs = eng.versions.lock();
                let v = vs.current();
                let active = self.with_matrix(&v, |m| self.round.lock().active_run(m));
                v.runs.iter().any(|r| Some(r.id) != active)
            };
            if !any_complete {
                return Ok(());
            }
            match self.pick_run_merge(eng, true) {
                Some((t, v)) => {
                    let r = self.run_run_merge(eng, &t, &v);
                    eng.delete_obsolete();
                    r?;
                }
                // A background merge holds the runs (or their L1 tables).
                None => eng.wait_a_while(Duration::from_millis(20))?,
            }
        }
    }
}
