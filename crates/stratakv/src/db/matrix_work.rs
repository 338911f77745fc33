//! Background work of the matrix L0: sealing memtables into rows, merging
//! receiver rows, and column compaction into L1.
//!
//! Every change follows the same order: build the new PM structure (row)
//! or the new L1 tables, persist them, then record the new matrix state in
//! the MANIFEST (the container root) together with any L1 changes, and only
//! then let readers see it. A crash before the MANIFEST append leaves the
//! old state, whose PM extents are untouched; unreferenced new extents are
//! retired at the next open.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DbInner;
use crate::coding::varint_len;
use crate::compaction::picker::key_may_exist_below;
use crate::compaction::{build_tables, Dropper};
use crate::error::{Error, Result};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::key_hash;
use crate::key::key_prefix;
use crate::key::{Kind, ParsedKey};
use crate::matrix::build::{build_row, compare_elems, RowEntry, RowSpec};
use crate::matrix::column::{pick_column, ColumnTask};
use crate::matrix::iter::RowIter;
use crate::matrix::merge::{pick_merge, MergeCandidate};
use crate::matrix::row::{Elem, Row};
use crate::matrix::{LiveRow, MatrixState, SoloProbe};
use crate::memtable::Memtable;
use crate::version::{FileMeta, LevelIter, Version, VersionEdit, VersionSet};

/// Percent of the matrix budget at which a column-compaction round starts.
/// A round frees PM only when it ends (a log extent holds keys from the
/// whole key space), so writers run fast after a round and slow near its
/// end. Starting rounds early keeps the compactor busy instead of idle
/// while writers refill PM, and keeps that sawtooth shallow. Each round
/// writes one sorted run, so smaller rounds mean more runs per L1 merge
/// (`max_runs` is sized for this). Measured (4.2M x 1 KiB fillrandom,
/// alternating runs): 40% with pacing from 40% and 6 runs gave a median
/// lowest second of 0.67 (data dir) and 0.79 (/dev/shm), against 0.61 and
/// 0.59 for 60% with pacing from 70% and 4 runs, at the same throughput and
/// write amplification.
const ROUND_PERCENT: u64 = 40;

/// Percent of the matrix budget above which writers are paced: from where
/// rounds start, so the pace is set for the whole round rather than for
/// its last part only.
const THROTTLE_PERCENT: u64 = 40;

/// One key range of a column compaction, merged by one thread.
struct ColumnPart {
    slices: Vec<(Arc<Row>, u32, u32)>,
    l1: Vec<Arc<FileMeta>>,
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
}

impl DbInner {
    /// Turns a sealed memtable into the newest matrix row.
    pub(crate) fn seal_to_row(&self, imm: &Arc<Memtable>) -> Result<()> {
        let oldest = self.oldest_snapshot();
        // Tombstones stay: older versions may live in older rows or levels.
        let mut dropper = Dropper::new(oldest, |_| true);
        let mut entries = Vec::with_capacity(imm.len());
        let mut it = imm.iter();
        it.seek_to_first()?;
        while it.valid() {
            if dropper.keep(it.key()) {
                let p = ParsedKey::parse(it.key())
                    .ok_or_else(|| Error::corruption(&self.region_path, 0, "malformed key in memtable"))?;
                let (voff, vlen) = it.value_location().unwrap_or((0, 0));
                let klen = p.user_key.len() as u64;
                let key_off = match p.kind {
                    Kind::Put => voff - varint_len(vlen as u64) as u64 - klen,
                    Kind::Delete => voff - klen,
                };
                entries.push(RowEntry {
                    elem: Elem {
                        prefix: key_prefix(p.user_key),
                        trailer: p.seq << 8 | p.kind as u64,
                        key_off,
                        key_len: klen as u32,
                        value_len: if p.kind == Kind::Put { vlen } else { 0 },
                        hint: 0,
                    },
                    hash: key_hash(p.user_key),
                });
            }
            it.next()?;
        }
        let log_bytes = imm.log_bytes();
        let logs = imm.extents();
        let (first_log, last_log) = (imm.first_log(), imm.next_log().saturating_sub(1).max(imm.first_log()));
        let row = if entries.is_empty() {
            None
        } else {
            // A retry after a full region rebuilds from the same entries.
            let mut entries = entries;
            Some(self.with_pm_space(|| {
                let (id, older) = {
                    let mut m = self.matrix.lock();
                    (m.new_row_id(), m.rows.first().map(|r| r.row.clone()))
                };
                let spec =
                    RowSpec { id, entries: &mut entries, older: older.as_deref(), log_bytes, logs: logs.clone() };
                build_row(&self.region, &self.shared_region_path, spec)
            })?)
        };
        let live = match row {
            Some(r) => Some(LiveRow::new(
                r,
                0,
                false,
                first_log,
                last_log,
                self.opts.matrix_hash_index,
                self.opts.prefix_extractor.as_deref(),
            )?),
            None => None,
        };
        // The row points into the log, and the edit raises log_number: on an
        // ordinary file the log entries must be msynced before the MANIFEST
        // relies on them (the row itself was msynced by build_row).
        if self.needs_msync() {
            self.sync_log()?;
        }
        let mut vs = self.versions.lock();
        let mut m = self.matrix.lock();
        let mut next = m.clone();
        // If the edit fails, the MANIFEST may still name the new row: keep it.
        let mut pin: Option<Box<dyn std::any::Any + Send>> = None;
        if let Some(l) = live {
            pin = Some(Box::new(l.row.clone()));
            next.push_newest(l);
        }
        let edit = VersionEdit {
            log_number: Some(imm.next_log()),
            last_sequence: Some(imm.last_seq().max(vs.last_sequence)),
            matrix: Some(next.record().encode()),
            ..Default::default()
        };
        vs.log_and_apply_pinned(edit, pin)?;
        *m = next;
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        if st.imms.front().map(|x| x.id()) == Some(imm.id()) {
            st.imms.pop_front();
        }
        st.version = vs.current();
        self.publish_matrix(&mut st, &m);
        Ok(())
    }

    /// Runs `build`, retrying while it fails for lack of free PM slots
    /// (column compaction frees them). A device out of space (a full tmpfs
    /// under the region) is returned: the caller backs off and writers get
    /// the error after `pm_full_timeout_ms`, as for a full disk.
    ///
    /// While it waits, `State::pm_wait_since` tells writers stalled behind
    /// the unflushed memtables why, so they fail after `pm_full_timeout_ms`
    /// instead of waiting for ever (say, iterators pin every flushed
    /// memtable's log and the thread holding them writes).
    fn with_pm_space<T>(&self, mut build: impl FnMut() -> Result<T>) -> Result<T> {
        let mut waited = false;
        let result = loop {
            match build() {
                Err(e @ Error::PmFull(_)) => {
                    drop(e);
                    waited = true;
                    let mut st = self.state.lock();
                    st.pm_wait_since.get_or_insert_with(Instant::now);
                    if let Some(p) = &st.poisoned {
                        break Err(Error::Poisoned(p.clone()));
                    }
                    if self.shutting_down.load(Ordering::Acquire) {
                        break Err(Error::Closed);
                    }
                    self.state_cv.notify_all();
                    self.state_cv.wait_for(&mut st, Duration::from_millis(20));
                }
                other => break other,
            }
        };
        if waited {
            self.state.lock().pm_wait_since = None;
            self.state_cv.notify_all();
        }
        result
    }

    /// Installs the matrix state `m` for readers (call with `state` held),
    /// and sets the write throttle.
    pub(crate) fn publish_matrix(&self, st: &mut super::State, m: &MatrixState) {
        st.matrix = m.view();
        st.matrix_data_bytes = m.data_bytes();
        st.matrix_pm_bytes = m.pm_bytes();
        st.installs += 1;
        self.install_sv(st);
        self.state_cv.notify_all();
        self.update_throttle(m, st.matrix_pm_bytes);
    }

    /// Above `THROTTLE_PERCENT` of the matrix budget, limits the write rate
    /// to what fits in the remaining room until the running compaction round
    /// frees PM, so writers slow down smoothly instead of stopping when the
    /// matrix is full.
    fn update_throttle(&self, m: &MatrixState, used: u64) {
        let limit = self.opts.matrix_limit();
        let soft = limit / 100 * THROTTLE_PERCENT;
        let rate = if used < soft {
            0
        } else {
            let free = limit.saturating_sub(used) as f64;
            let secs = m.round_seconds_left().max(0.05);
            // Never below 1 MiB/s: the hard stop at the limit still holds.
            (free / secs).max((1 << 20) as f64) as u64
        };
        self.throttle_rate.store(rate, Ordering::Relaxed);
    }

    /// Merges adjacent receiver rows into one row when there are too many
    /// receiver rows (fewer rows to search, shadowed versions gone); which
    /// rows, `pick_merge` says.
    pub(crate) fn maybe_merge_rows(&self) -> Result<()> {
        let (group, older) = {
            let m = self.matrix.lock();
            let cands: Vec<MergeCandidate> = m
                .rows
                .iter()
                .map(|r| MergeCandidate { seg: r.seg, elems: u64::from(r.remaining()), receiver: !r.compactor })
                .collect();
            let Some(w) = pick_merge(&cands, self.opts.rows_per_segment, self.opts.merge_trigger()) else {
                return Ok(());
            };
            let older = m.rows.get(w.end).map(|r| r.row.clone());
            match m.rows.get(w) {
                Some(group) => (group.to_vec(), older),
                None => return Ok(()),
            }
        };
        let oldest = self.oldest_snapshot();
        let mut dropper = Dropper::new(oldest, |_| true);
        let mut cursors: Vec<(Arc<Row>, u32)> = group.iter().map(|r| (r.row.clone(), r.start)).collect();
        let mut entries = Vec::with_capacity(group.iter().map(|r| r.remaining() as usize).sum());
        let mut ikey = Vec::new();
        loop {
            // The smallest current element across the group (rows are newest first).
            let mut best: Option<(usize, Elem)> = None;
            for (i, (row, pos)) in cursors.iter().enumerate() {
                if *pos >= row.len() {
                    continue;
                }
                let e = row.elem(*pos)?;
                best = match best {
                    None => Some((i, e)),
                    Some((bi, be)) => {
                        if compare_elems(&self.region, &self.region_path, &e, &be)? == CmpOrdering::Less {
                            Some((i, e))
                        } else {
                            Some((bi, be))
                        }
                    }
                };
            }
            let Some((i, e)) = best else { break };
            let Some((row, pos)) = cursors.get_mut(i) else { break };
            let uk = row.user_key(&e)?;
            ikey.clear();
            ikey.extend_from_slice(uk);
            ikey.extend_from_slice(&e.trailer.to_le_bytes());
            if dropper.keep(&ikey) {
                entries.push(RowEntry { elem: Elem { hint: 0, ..e }, hash: row.hash(*pos)? });
            }
            *pos += 1;
        }
        let ids: Vec<u64> = group.iter().map(|r| r.row.id()).collect();
        let log_bytes: u64 = group.iter().map(|r| r.row.header().log_bytes).sum();
        let mut logs = Vec::new();
        for r in &group {
            logs.extend(r.row.logs().iter().cloned());
        }
        let first_log = group.iter().map(|r| r.first_log).min().unwrap_or(0);
        let last_log = group.iter().map(|r| r.last_log).max().unwrap_or(0);
        // A retry after a full region rebuilds from the same entries.
        let row = self.with_pm_space(|| {
            let id = self.matrix.lock().new_row_id();
            let spec = RowSpec { id, entries: &mut entries, older: older.as_deref(), log_bytes, logs: logs.clone() };
            build_row(&self.region, &self.shared_region_path, spec)
        })?;
        let merged = LiveRow::new(
            row,
            0,
            false,
            first_log,
            last_log,
            self.opts.matrix_hash_index,
            self.opts.prefix_extractor.as_deref(),
        )?;
        let probe = SoloProbe::of(&merged.row, self.opts.matrix_hash_index)?;
        let mut vs = self.versions.lock();
        let mut m = self.matrix.lock();
        // A compaction round may have started meanwhile and claimed these
        // rows; then they must stay as they are (dropping `merged` frees it).
        let still_receivers = ids.iter().all(|id| m.rows.iter().any(|r| r.row.id() == *id && !r.compactor));
        if !still_receivers {
            return Ok(());
        }
        let mut next = m.clone();
        let pin: Box<dyn std::any::Any + Send> = Box::new(merged.row.clone());
        next.replace(&ids, merged, probe);
        vs.log_and_apply_pinned(VersionEdit { matrix: Some(next.record().encode()), ..Default::default() }, Some(pin))?;
        *m = next;
        let mut st = self.state.lock();
        st.version = vs.current();
        self.publish_matrix(&mut st, &m);
        Ok(())
    }

    /// Whether the matrix should start a compaction round now.
    pub(crate) fn round_due(&self, m: &MatrixState, force: bool) -> bool {
        if m.rows.is_empty() {
            return false;
        }
        let low_pm = self.region.free_slots() * 4 < self.region.slot_count();
        force || m.pm_bytes() >= self.opts.matrix_limit() / 100 * ROUND_PERCENT || low_pm
    }

    /// Picks the next column if one is due (`vs` is the locked version
    /// set; takes `matrix` and `state`). Marks its L1 inputs busy.
    pub(crate) fn pick_column_task(&self, vs: &mut VersionSet, force: bool) -> Result<Option<ColumnTask>> {
        let mut m = self.matrix.lock();
        let mut st = self.state.lock();
        if st.column_busy {
            return Ok(None);
        }
        let tiered = self.opts.tiered();
        if !tiered && st.version.runs.iter().any(|r| Some(r.id) != m.active_run()) {
            // Runs left by an open with max_runs > 1 are newer than L1: a
            // column merged into L1 now would sit below older data. The
            // run merge moves them into L1 first.
            return Ok(None);
        }
        if !m.round_active() {
            if !self.round_due(&m, force) {
                return Ok(None);
            }
            m.begin_round();
        }
        let l1 = if tiered { Vec::new() } else { st.version.files(1).to_vec() };
        let mut task = pick_column(&m.rows, &l1, self.opts.column_target(), &st.busy)?;
        if let Some(t) = &mut task {
            st.column_busy = true;
            for f in &t.l1_inputs {
                st.busy.insert(f.number);
            }
            if tiered {
                // Run ids come from the file numbers: a later round's run
                // gets a larger id, as its data is newer.
                let run = *m.round_run.get_or_insert_with(|| vs.new_file_number());
                t.run = Some(run);
            }
        }
        Ok(task)
    }

    /// Merges one column into L1 and records the new state.
    pub(crate) fn run_column(&self, t: &ColumnTask) -> Result<()> {
        let result = self.run_column_inner(t);
        let mut st = self.state.lock();
        st.column_busy = false;
        for f in &t.l1_inputs {
            st.busy.remove(&f.number);
        }
        self.state_cv.notify_all();
        result
    }

    /// Merges one part of a column (a key range) into new L1 tables.
    fn merge_column_part(
        &self,
        part: &ColumnPart,
        version: &Version,
        oldest: u64,
        to_run: bool,
    ) -> Result<Vec<FileMeta>> {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for (row, s, e) in &part.slices {
            if e > s {
                children.push(Box::new(RowIter::new(row.clone(), *s, *e)));
            }
        }
        if !part.l1.is_empty() {
            children.push(Box::new(LevelIter::for_compaction(self.tables.clone(), part.l1.clone())));
        }
        let mut it = MergingIterator::new(children);
        let next = || self.versions.lock().new_file_number();
        let ctx = self.build_ctx_pub(&next, self.opts.target_file_size);
        if to_run {
            // Below a run: older runs and every level.
            let mut dropper = Dropper::new(oldest, |uk| key_may_exist_below(version, 0, uk));
            build_tables(&ctx, &mut it, &mut dropper, &[])
        } else {
            let mut dropper = Dropper::new(oldest, |uk| key_may_exist_below(version, 1, uk));
            let grandparents = version.overlapping(2, Some(&part.lo), part.hi.as_deref());
            build_tables(&ctx, &mut it, &mut dropper, &grandparents)
        }
    }

    /// Splits a column in two key ranges (at an L1 table boundary, or at a
    /// sampled key if it overlaps no L1 table) so two threads can merge it.
    fn split_column(&self, t: &ColumnTask) -> Result<Vec<ColumnPart>> {
        let whole =
            ColumnPart { slices: t.slices.clone(), l1: t.l1_inputs.clone(), lo: t.lo.clone(), hi: t.hi.clone() };
        if self.opts.column_threads < 2 || t.bytes < self.opts.column_target() / 4 {
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

    fn run_column_inner(&self, t: &ColumnTask) -> Result<()> {
        let version = self.state.lock().version.clone();
        let oldest = self.oldest_snapshot();
        let parts = self.split_column(t)?;
        let results: Vec<Result<Vec<FileMeta>>> = if parts.len() == 1 {
            parts.iter().map(|p| self.merge_column_part(p, &version, oldest, t.run.is_some())).collect()
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = parts
                    .iter()
                    .map(|p| s.spawn(|| self.merge_column_part(p, &version, oldest, t.run.is_some())))
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
                let _ = self.fs.remove(&crate::version::filename::table_path(&self.dir, f.number));
            }
            return Err(e);
        }
        let written: u64 = outputs.iter().map(|f| f.size).sum();
        let read: u64 = t.bytes + t.l1_inputs.iter().map(|f| f.size).sum::<u64>();
        let mut vs = self.versions.lock();
        let mut m = self.matrix.lock();
        let mut next_state = m.clone();
        next_state.apply_column(&t.ends());
        let mut edit = VersionEdit {
            deleted: t.l1_inputs.iter().map(|f| (1, f.number)).collect(),
            matrix: Some(next_state.record().encode()),
            ..Default::default()
        };
        match t.run {
            Some(run) => edit.run_added = outputs.into_iter().map(|f| (run, f)).collect(),
            None => edit.added = outputs.into_iter().map(|f| (1, f)).collect(),
        }
        vs.log_and_apply(edit)?;
        *m = next_state;
        self.counters.table_bytes_written.fetch_add(written, Ordering::Relaxed);
        self.counters.compaction_bytes_read.fetch_add(read, Ordering::Relaxed);
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        self.counters.columns.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        st.version = vs.current();
        st.obsolete.extend(t.l1_inputs.iter().cloned());
        self.publish_matrix(&mut st, &m);
        Ok(())
    }

    /// Compacts every row that exists now into L1, column by column (for
    /// `compact_range`). Rows sealed meanwhile may be compacted too.
    pub(crate) fn drain_matrix(&self) -> Result<()> {
        let limit = match self.matrix.lock().rows.first() {
            Some(r) => r.row.id(),
            None => return Ok(()),
        };
        loop {
            let task = {
                let mut vs = self.versions.lock();
                if !self.matrix.lock().rows.iter().any(|r| r.row.id() <= limit) {
                    return Ok(());
                }
                self.pick_column_task(&mut vs, true)?
            };
            match task {
                Some(t) => self.run_column(&t)?,
                None => {
                    // Another column is running, or its L1 inputs are busy.
                    let mut st = self.state.lock();
                    if let Some(p) = &st.poisoned {
                        return Err(Error::Poisoned(p.clone()));
                    }
                    self.state_cv.wait_for(&mut st, Duration::from_millis(10));
                }
            }
        }
    }
}
