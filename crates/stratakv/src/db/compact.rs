//! Leveled compaction below level 0, and the calls that wait on background
//! work: `flush`, `compact_range`, `wait_for_compactions`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DbInner;
use crate::compaction::picker::key_may_exist_below;
use crate::compaction::{execute, pick, pick_range, sorted_input, table_input, CompactionTask, LevelPolicy, Merge};
use crate::engine::{Commit, Engine};
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::{compare_internal, KeyRange};
use crate::l0::Job;
use crate::version::{Version, VersionEdit};

impl DbInner {
    /// The sizes that drive the leveled picker.
    fn level_policy(&self) -> LevelPolicy {
        let o = &self.eng.opts;
        LevelPolicy {
            l0_trigger: o.l0_compaction_trigger,
            base_bytes: self.l0.l1_target_bytes(),
            multiplier: o.level_size_multiplier,
            target_file_size: o.target_file_size,
        }
    }

    /// A leveled compaction if one is due, with its inputs marked busy.
    pub(super) fn pick_leveled(&self) -> Option<Job<'_>> {
        let policy = self.level_policy();
        let vs = self.eng.versions.lock();
        let mut st = self.eng.state.lock();
        let t = pick(&st.version, &policy, &st.busy, &vs.compact_pointers)?;
        st.mark_busy(t.all_inputs());
        let v = st.version.tables_only();
        Some(Box::new(move |eng: &Engine| run_compaction_and_release(eng, &t, &v)))
    }

    /// A compaction of a table holding entries a range tombstone hides
    /// (see `tombstone_target`), with its inputs marked busy.
    pub(super) fn pick_tombstone_compaction(&self) -> Option<Job<'_>> {
        let (level, f) = self.tombstone_target()?;
        let policy = self.level_policy();
        let _vs = self.eng.versions.lock();
        let mut st = self.eng.state.lock();
        let t = pick_range(&st.version, &policy, level, Some(f.smallest_user()), Some(f.largest_user()), &st.busy)?;
        st.mark_busy(t.all_inputs());
        let v = st.version.tables_only();
        Some(Box::new(move |eng: &Engine| run_compaction_and_release(eng, &t, &v)))
    }

    /// Seals the memtable and waits until it and all earlier ones are in level 0.
    pub(crate) fn flush_all(&self) -> Result<()> {
        let eng = &self.eng;
        eng.check_writable()?;
        let target = {
            let mut w = eng.log.lock();
            if !w.mem.is_empty() {
                eng.switch_memtable(&mut w);
            }
            w.next_mem_id()
        };
        let mut st = eng.state.lock();
        // While the disk is full: since when, and the retry this call asked for.
        let mut full: Option<(Instant, u64)> = None;
        loop {
            st.check(eng.closing())?;
            if !st.imms.front().map(|m| m.id() < target).unwrap_or(false) {
                return Ok(());
            }
            // The disk is full and flushes keep retrying: have them retry
            // now (space may have been freed), and give up after a while,
            // as writers do, instead of waiting forever.
            if st.bg_error.is_some() {
                let (since, retry) = *full.get_or_insert_with(|| (Instant::now(), eng.request_retry(&mut st)));
                if let Some(e) = eng.disk_full_error(&st, since, retry) {
                    return Err(e);
                }
            } else {
                full = None;
            }
            eng.cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    /// Flushes, then pushes every file overlapping `range` down to the deepest level.
    pub(crate) fn compact_range(&self, range: KeyRange) -> Result<()> {
        let eng = &self.eng;
        self.flush_all()?;
        let (lo, hi) = range.user_bounds();
        let policy = self.level_policy();
        let mut level = eng.surface(self.l0.drain(eng))?;
        loop {
            let deepest = eng.version().deepest_level().unwrap_or(0).max(1);
            if level >= deepest {
                return Ok(());
            }
            loop {
                let picked = {
                    let mut st = eng.state.lock();
                    if let Some(p) = &st.poisoned {
                        return Err(crate::error::Error::Poisoned(p.clone()));
                    }
                    if st.version.overlapping(level, lo.as_deref(), hi.as_deref()).is_empty() {
                        break;
                    }
                    match pick_range(&st.version, &policy, level, lo.as_deref(), hi.as_deref(), &st.busy) {
                        Some(t) => {
                            st.mark_busy(t.all_inputs());
                            Some((t, st.version.tables_only()))
                        }
                        None => {
                            eng.cv.wait_for(&mut st, Duration::from_millis(20));
                            None
                        }
                    }
                };
                if let Some((t, v)) = picked {
                    let r = run_compaction_and_release(eng, &t, &v);
                    eng.delete_obsolete();
                    // A full disk is retryable (failed outputs were removed);
                    // anything else leaves state unknown.
                    eng.surface(r)?;
                }
            }
            level += 1;
        }
    }

    /// Whether any flush or compaction is running or due.
    fn background_work_pending(&self) -> bool {
        let eng = &self.eng;
        let vs = eng.versions.lock();
        let v = vs.current();
        let auto = !eng.opts.disable_auto_compaction;
        let l0 = self.l0.work_pending(eng, &v, auto);
        drop(vs);
        if self.range_drop_due() || self.retire_due() || (auto && self.tombstone_target().is_some()) {
            return true;
        }
        let vs = eng.versions.lock();
        let st = eng.state.lock();
        if !st.imms.is_empty() || st.compactions_running > 0 || l0 {
            return true;
        }
        auto && pick(&st.version, &self.level_policy(), &st.busy, &vs.compact_pointers).is_some()
    }

    /// Blocks until no background work is running or due.
    pub(crate) fn wait_for_compactions(&self) -> Result<()> {
        let eng = &self.eng;
        loop {
            eng.state.lock().check(eng.closing())?;
            if !self.background_work_pending() {
                return Ok(());
            }
            let mut st = eng.state.lock();
            eng.cv.wait_for(&mut st, Duration::from_millis(20));
        }
    }
}

/// Runs a leveled compaction picked (and marked busy) with `v` current,
/// then releases its inputs.
fn run_compaction_and_release(eng: &Engine, t: &CompactionTask, v: &Arc<Version>) -> Result<()> {
    let r = run_compaction(eng, t, v);
    let mut st = eng.state.lock();
    st.unmark_busy(t.all_inputs());
    eng.notify(&mut st);
    r
}

/// Merges a task's inputs into the next level and installs the result.
fn run_compaction(eng: &Engine, t: &CompactionTask, version: &Version) -> Result<()> {
    let out_level = t.output_level();
    let mut edit = VersionEdit::default();
    for f in t.inputs.iter() {
        edit.deleted.push((t.level as u32, f.number));
    }
    for f in t.next_inputs.iter() {
        edit.deleted.push((out_level as u32, f.number));
    }
    let mut written = 0;
    if t.trivial_move {
        for f in &t.inputs {
            edit.added.push((out_level as u32, (**f).clone()));
        }
    } else {
        let mut inputs: Vec<Box<dyn InternalIterator>> = Vec::new();
        if t.level == 0 {
            for f in &t.inputs {
                inputs.push(table_input(&eng.tables, f)?);
            }
        } else {
            inputs.push(sorted_input(&eng.tables, t.inputs.clone()));
        }
        if !t.next_inputs.is_empty() {
            inputs.push(sorted_input(&eng.tables, t.next_inputs.clone()));
        }
        let below = |uk: &[u8]| key_may_exist_below(version, out_level, uk);
        let next = || eng.new_file_number();
        let merge = Merge {
            inputs,
            oldest_snapshot: eng.oldest_snapshot(),
            may_exist_below: &below,
            grandparents: &t.grandparents,
        };
        let outputs = execute(&eng.build_ctx(&next, eng.opts.target_file_size), merge)?;
        written = outputs.iter().map(|f| f.size).sum();
        for f in outputs {
            edit.added.push((out_level as u32, f));
        }
        eng.counters.compaction_bytes_read.fetch_add(t.input_bytes(), Ordering::Relaxed);
    }
    if let Some(last) = t.inputs.iter().map(|f| &f.largest).max_by(|a, b| compare_internal(a, b)) {
        edit.compact_pointers.push((t.level as u32, last.clone()));
    }
    let obsolete = if t.trivial_move { Vec::new() } else { t.all_inputs().cloned().collect() };
    {
        let mut vs = eng.versions.lock();
        eng.commit(&mut vs, Commit { edit, obsolete, ..Default::default() })?;
    }
    eng.counters.table_bytes_written.fetch_add(written, Ordering::Relaxed);
    eng.counters.compactions.fetch_add(1, Ordering::Relaxed);
    Ok(())
}
