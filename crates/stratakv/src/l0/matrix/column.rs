//! Column compaction: one key range of the compactor rows at a time, into
//! the round's sorted run or merged with the L1 tables it overlaps.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{matrix_in, MatrixL0};
use crate::compaction::picker::key_may_exist_below;
use crate::compaction::{execute, sorted_input, Merge};
use crate::engine::{Commit, Engine};
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::matrix::iter::RowIter;
use crate::matrix::policy::column::{pick_column, ColumnTask};
use crate::matrix::row::Row;
use crate::matrix::Matrix;
use crate::version::filename::table_path;
use crate::version::{FileMeta, Version, VersionEdit, VersionSet};

/// One key range of a column compaction, merged by one thread.
struct ColumnPart {
    slices: Vec<(Arc<Row>, u32, u32)>,
    l1: Vec<Arc<FileMeta>>,
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
}

impl MatrixL0 {
    /// Picks the next column if one is due (`vs` is the locked version
    /// set; takes the round's lock and `state`), starting a round first if
    /// one is due (`force`: if the matrix holds any row). Marks the
    /// column's L1 inputs busy.
    pub(super) fn pick_column_task(
        &self,
        eng: &Engine,
        vs: &mut VersionSet,
        force: bool,
    ) -> Result<Option<ColumnTask>> {
        let mut round = self.round.lock();
        let mut st = eng.state.lock();
        if round.column_busy {
            return Ok(None);
        }
        let current = vs.current();
        let empty = self.empty_matrix();
        let cur = matrix_in(&current).unwrap_or(&empty);
        if !self.tiered && st.version.runs.iter().any(|r| Some(r.id) != round.active_run(cur)) {
            // Runs left by an open with max_runs > 1 are newer than L1: a
            // column merged into L1 now would sit below older data. The
            // run merge moves them into L1 first.
            return Ok(None);
        }
        let mut begun = None;
        if !cur.round_active() {
            if !self.round_due(eng, cur, force) {
                return Ok(None);
            }
            // Every current row joins the compactor group. The group needs
            // no record of its own: the round's first column records it,
            // and a round cut short by a crash starts anew.
            let mut m = cur.clone();
            m.begin_round();
            round.run = None;
            round.clock.begin(m.compactor_data_bytes());
            begun = Some(self.seal_state(m));
        }
        let m: &Matrix = begun.as_deref().unwrap_or(cur);
        let l1 = if self.tiered { Vec::new() } else { st.version.files(1).to_vec() };
        let mut task = pick_column(&m.rows, &l1, self.column_target, &st.busy)?;
        if let Some(b) = begun {
            vs.install_l0(b);
            eng.set_version(&mut st, vs.current());
            eng.install_sv(&st);
        }
        if let Some(t) = &mut task {
            round.column_busy = true;
            for f in &t.l1_inputs {
                st.busy.insert(f.number);
            }
            if self.tiered {
                // Run ids come from the file numbers: a later round's run
                // gets a larger id, as its data is newer.
                let run = *round.run.get_or_insert_with(|| vs.new_file_number());
                t.run = Some(run);
            }
        }
        Ok(task)
    }

    /// Merges one column into L1 (or its run) and records the new state;
    /// releases the column's inputs whatever the outcome.
    pub(super) fn run_column(&self, eng: &Engine, t: &ColumnTask) -> Result<()> {
        let result = self.run_column_inner(eng, t);
        let mut round = self.round.lock();
        round.column_busy = false;
        let mut st = eng.state.lock();
        for f in &t.l1_inputs {
            st.busy.remove(&f.number);
        }
        eng.notify(&mut st);
        result
    }

    /// Merges one part of a column (a key range) into new tables.
    fn merge_column_part(
        &self,
        eng: &Engine,
        part: &ColumnPart,
        version: &Version,
        oldest: u64,
        to_run: bool,
    ) -> Result<Vec<FileMeta>> {
        let mut inputs: Vec<Box<dyn InternalIterator>> = Vec::new();
        for (row, s, e) in &part.slices {
            if e > s {
                inputs.push(Box::new(RowIter::new(row.clone(), *s, *e)));
            }
        }
        if !part.l1.is_empty() {
            inputs.push(sorted_input(&eng.tables, part.l1.clone()));
        }
        let next = || eng.new_file_number();
        let ctx = eng.build_ctx(&next, self.target_file_size);
        if to_run {
            // Below a run: older runs and every level.
            let below = |uk: &[u8]| key_may_exist_below(version, 0, uk);
            execute(&ctx, Merge { inputs, oldest_snapshot: oldest, may_exist_below: &below, grandparents: &[] })
        } else {
            let below = |uk: &[u8]| key_may_exist_below(version, 1, uk);
            let grandparents = version.overlapping(2, Some(&part.lo), part.hi.as_deref());
            execute(
                &ctx,
                Merge { inputs, oldest_snapshot: oldest, may_exist_below: &below, grandparents: &grandparents },
            )
        }
    }

    /// Splits a column in two key ranges (at an L1 table boundary, or at a
    /// sampled key if it overlaps no L1 table) so two threads can merge it.
    fn split_column(&self, t: &ColumnTask) -> Result<Vec<ColumnPart>> {
        let whole =
            ColumnPart { slices: t.slices.clone(), l1: t.l1_inputs.clone(), lo: t.lo.clone(), hi: t.hi.clone() };
        if self.column_threads < 2 || t.bytes < self.column_target / 4 {
            return Ok(vec![whole]);
        }
        let mid: Vec<u8> = match t.l1_inputs.len() {
            0 => {
                let Some((row, s, e)) = t.slices.iter().max_by_key(|(_, s, e)| e - s) else { return Ok(vec![whole]) };
                let m = row.elem(s + (e - s) / 2)?;
                row.user_key(&m)?.to_vec()
            }
            1 => return Ok(vec![whole]),
            n => t.l1_inputs.get(n / 2 - 1).map(|f| f.largest_user().to_vec()).unwrap_or_default(),
        };
        if mid.as_slice() < t.lo.as_slice() || t.hi.as_deref().map(|h| mid.as_slice() >= h).unwrap_or(false) {
            return Ok(vec![whole]);
        }
        let mut a = Vec::new();
        let mut b = Vec::new();
        for (row, s, e) in &t.slices {
            let cut = row.upper_bound_user(&mid, *s)?.min(*e);
            a.push((row.clone(), *s, cut));
            b.push((row.clone(), cut, *e));
        }
        let l1a: Vec<_> = t.l1_inputs.iter().filter(|f| f.largest_user() <= mid.as_slice()).cloned().collect();
        let l1b: Vec<_> = t.l1_inputs.iter().filter(|f| f.smallest_user() > mid.as_slice()).cloned().collect();
        if l1a.len() + l1b.len() != t.l1_inputs.len() {
            return Ok(vec![whole]);
        }
        let mut hi_b = mid.clone();
        hi_b.push(0);
        Ok(vec![
            ColumnPart { slices: a, l1: l1a, lo: t.lo.clone(), hi: Some(mid) },
            ColumnPart { slices: b, l1: l1b, lo: hi_b, hi: t.hi.clone() },
        ])
    }

    fn run_column_inner(&self, eng: &Engine, t: &ColumnTask) -> Result<()> {
        let version = eng.tables_version();
        let oldest = eng.oldest_snapshot();
        let parts = self.split_column(t)?;
        let to_run = t.run.is_some();
        let results: Vec<Result<Vec<FileMeta>>> = if parts.len() == 1 {
            parts.iter().map(|p| self.merge_column_part(eng, p, &version, oldest, to_run)).collect()
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = parts
                    .iter()
                    .map(|p| s.spawn(|| self.merge_column_part(eng, p, &version, oldest, to_run)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(Error::Pm("column compaction thread panicked".into()))))
                    .collect()
            })
        };
        let mut outputs = Vec::new();
        let mut failure = None;
        for r in results {
            match r {
                Ok(files) => outputs.extend(files),
                Err(e) => failure = Some(e),
            }
        }
        if let Some(e) = failure {
            // The other parts' tables are not referenced by anything: remove them.
            for f in &outputs {
                let _ = eng.fs.remove(&table_path(&eng.dir, f.number));
            }
            return Err(e);
        }
        let written: u64 = outputs.iter().map(|f| f.size).sum();
        let read: u64 = t.bytes + t.l1_inputs.iter().map(|f| f.size).sum::<u64>();
        let mut vs = eng.versions.lock();
        let mut next = self.matrix_of(&vs.current());
        next.apply_column(&t.ends());
        let round_over = !next.round_active();
        let next = self.seal_state(next);
        let mut edit =
            VersionEdit { deleted: t.l1_inputs.iter().map(|f| (1, f.number)).collect(), ..Default::default() };
        match t.run {
            Some(run) => edit.run_added = outputs.into_iter().map(|f| (run, f)).collect(),
            None => edit.added = outputs.into_iter().map(|f| (1, f)).collect(),
        }
        let obsolete = t.l1_inputs.clone();
        eng.commit(&mut vs, Commit { edit, l0: Some(next.clone()), obsolete, ..Default::default() })?;
        if round_over {
            self.round.lock().clock.end();
        }
        eng.counters.table_bytes_written.fetch_add(written, Ordering::Relaxed);
        eng.counters.compaction_bytes_read.fetch_add(read, Ordering::Relaxed);
        eng.counters.compactions.fetch_add(1, Ordering::Relaxed);
        eng.counters.columns.fetch_add(1, Ordering::Relaxed);
        self.update_throttle(eng, &next);
        Ok(())
    }

    /// Compacts every row that exists now into L1, column by column (for
    /// `compact_range`). Rows sealed meanwhile may be compacted too.
    pub(super) fn drain_matrix(&self, eng: &Engine) -> Result<()> {
        let Some(limit) = self.with_matrix(&eng.version(), |m| m.rows.first().map(|r| r.row.id())) else {
            return Ok(());
        };
        loop {
            let task = {
                let mut vs = eng.versions.lock();
                if !self.with_matrix(&vs.current(), |m| m.rows.iter().any(|r| r.row.id() <= limit)) {
                    return Ok(());
                }
                self.pick_column_task(eng, &mut vs, true)?
            };
            match task {
                Some(t) => self.run_column(eng, &t)?,
                // Another column is running, or its L1 inputs are busy.
                None => eng.wait_a_while(Duration::from_millis(10))?,
            }
        }
    }
}
