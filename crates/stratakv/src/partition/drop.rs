//! Deleting tables that range tombstones cover entirely: what makes a
//! dropped partition's space come back without rewriting anything, and a
//! `delete_range` over whole tables cheap (RocksDB's `DeleteFilesInRange`,
//! done by itself).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::db::DbInner;
use std::ops::Bound;

use crate::engine::{Commit, Engine, State, SuperVersion};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::{internal_key, KeyRange, Kind, ParsedKey, SeqNo, MAX_SEQ};
use crate::l0::Job;
use crate::version::range_del::DROPPED;
use crate::version::RangeTomb;
use crate::version::{FileMeta, VersionEdit};

/// Most entries a look at one tombstone reads before giving up for now.
const RETIRE_SCAN: usize = 20_000;

impl DbInner {
    /// A job deleting the tables a range tombstone visible to every reader
    /// covers, with them marked busy; None if there are none.
    ///
    /// Only levels whose tables nothing else indexes are searched
    /// (`Level0::first_free_level`): the single level's PM tree names its
    /// tables, and its compactions drop what the tombstones hide instead.
    /// The matrix's runs are left to its column compactions.
    pub(crate) fn pick_range_drop(&self) -> Option<Job<'_>> {
        let oldest = self.eng.oldest_snapshot();
        let mut st = self.eng.state.lock();
        let doomed = self.covered_tables(&st, oldest);
        if doomed.is_empty() {
            return None;
        }
        let files: Vec<Arc<FileMeta>> = doomed.iter().map(|d| d.1.clone()).collect();
        st.mark_busy(files.iter());
        drop(st);
        Some(Box::new(move |eng: &Engine| {
            let edit =
                VersionEdit { deleted: doomed.iter().map(|(l, f)| (*l, f.number)).collect(), ..Default::default() };
            let r = {
                let mut vs = eng.versions.lock();
                eng.commit(&mut vs, Commit { edit, obsolete: files.clone(), ..Default::default() })
            };
            if r.is_ok() {
                eng.counters.range_dropped_files.fetch_add(files.len() as u64, Ordering::Relaxed);
            }
            let mut st = eng.state.lock();
            st.unmark_busy(files.iter());
            eng.notify(&mut st);
            r
        }))
    }

    /// A job removing the `delete_range` tombstones that hide nothing any
    /// more, if the version changed since the last look and some do. A
    /// tombstone at S over `[s, e)` hides nothing once no source (the
    /// memtables, level 0, the tables) holds an entry of a key in `[s, e)`
    /// older than S: compactions dropped them, or there never were any.
    /// Every later write has a sequence above S, so none can need it
    /// after. Dropped partitions' tombstones stay: their ids are never
    /// reused, and a write in flight at the drop may still land there.
    pub(crate) fn pick_retire(&self) -> Option<Job<'_>> {
        let (sv, _) = self.eng.view_now();
        let v = &sv.version;
        if v.range_dels.tombs().iter().all(|t| t.seq == DROPPED) {
            return None;
        }
        {
            // A `Weak` keeps the version's allocation, so no later version
            // can have its address and pass for it.
            let mut checked = self.retire_checked.lock();
            if std::ptr::eq(checked.as_ptr(), Arc::as_ptr(v)) {
                return None;
            }
            *checked = Arc::downgrade(v);
        }
        let mut done = Vec::new();
        for t in v.range_dels.tombs().iter().filter(|t| t.seq != DROPPED) {
            // An error (a table gone to a compaction meanwhile) keeps the
            // tombstone until the next look.
            if let Ok(true) = self.hides_nothing(&sv, t) {
                done.push(t.clone());
            }
        }
        if done.is_empty() {
            return None;
        }
        // Work is due until the job's edit makes a new version to look at
        // (`retire_due`).
        *self.retire_checked.lock() = std::sync::Weak::new();
        Some(Box::new(move |eng: &Engine| {
            let mut vs = eng.versions.lock();
            let live: Vec<RangeTomb> =
                done.into_iter().filter(|t| vs.current().range_dels.tombs().contains(t)).collect();
            if live.is_empty() {
                return Ok(());
            }
            let n = live.len() as u64;
            let edit = VersionEdit { range_dels_removed: live, ..Default::default() };
            eng.commit(&mut vs, Commit { edit, ..Default::default() })?;
            eng.counters.range_tombstones_retired.fetch_add(n, Ordering::Relaxed);
            Ok(())
        }))
    }

    /// Whether no source of `sv` holds an entry `t` hides (looking at no
    /// more than `RETIRE_SCAN` entries: past that, it may).
    fn hides_nothing(&self, sv: &SuperVersion, t: &RangeTomb) -> crate::error::Result<bool> {
        let range = KeyRange { start: Bound::Included(t.start.clone()), end: Bound::Excluded(t.end.clone()) };
        let mut it = MergingIterator::new(self.source_iters_in(sv, &range)?);
        it.seek(&internal_key(&t.start, MAX_SEQ, Kind::Put))?;
        for _ in 0..RETIRE_SCAN {
            if !it.valid() {
                return Ok(true);
            }
            let Some(p) = ParsedKey::parse(it.key()) else { return Ok(false) };
            if p.user_key >= t.end.as_slice() {
                return Ok(true);
            }
            if p.seq < t.seq {
                return Ok(false);
            }
            it.next()?;
        }
        Ok(false)
    }

    /// Whether a table waits to be deleted for a range tombstone.
    pub(crate) fn range_drop_due(&self) -> bool {
        let oldest = self.eng.oldest_snapshot();
        let st = self.eng.state.lock();
        !self.covered_tables(&st, oldest).is_empty()
    }

    /// The tables of `st`'s version, not busy, that a range tombstone
    /// every reader at or past `oldest` sees covers entirely.
    fn covered_tables(&self, st: &State, oldest: SeqNo) -> Vec<(u32, Arc<FileMeta>)> {
        let Some(first_level) = self.l0.first_free_level() else { return Vec::new() };
        let v = &st.version;
        if v.range_dels.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (level, files) in v.levels.iter().enumerate().skip(first_level) {
            for f in files {
                if !st.busy.contains(&f.number)
                    && v.range_dels.covers_file(f.smallest_user(), f.largest_user(), f.largest_seq, oldest)
                {
                    out.push((level as u32, f.clone()));
                }
            }
        }
        out
    }
}

impl DbInner {
    /// Whether `pick_retire` has a version it has not looked at yet.
    pub(crate) fn retire_due(&self) -> bool {
        let v = self.eng.version();
        v.range_dels.tombs().iter().any(|t| t.seq != DROPPED)
            && !std::ptr::eq(self.retire_checked.lock().as_ptr(), Arc::as_ptr(&self.eng.sv.load().version))
    }

    /// A table of L1 or below holding entries a `delete_range` tombstone
    /// hides from every reader, which no compaction may ever rewrite (the
    /// bottom level is not compacted): compacting it into the next level
    /// drops them, and then the tombstone can go (RocksDB marks such
    /// tables for compaction too). Tables found to hold none are noted and
    /// not read again.
    pub(crate) fn tombstone_target(&self) -> Option<(usize, Arc<FileMeta>)> {
        let first = self.l0.first_free_level()?.max(1);
        let oldest = self.eng.oldest_snapshot();
        let v = self.eng.version();
        let tombs: Vec<&RangeTomb> =
            v.range_dels.tombs().iter().filter(|t| t.seq != DROPPED && t.seq <= oldest).collect();
        if tombs.is_empty() {
            return None;
        }
        let mut clean = self.tombstone_clean.lock();
        for level in first..crate::version::NUM_LEVELS - 1 {
            for f in v.files(level) {
                // A table a tombstone covers whole is deleted whole
                // (`pick_range_drop`), not rewritten: compacting it would
                // drop the same entries at the cost of reading them, and
                // raced the range drop for the table.
                if v.range_dels.covers_file(f.smallest_user(), f.largest_user(), f.largest_seq, oldest) {
                    continue;
                }
                for t in &tombs {
                    if f.smallest_seq >= t.seq
                        || f.largest_user() < t.start.as_slice()
                        || f.smallest_user() >= t.end.as_slice()
                        || clean.contains(&(f.number, t.seq))
                    {
                        continue;
                    }
                    match self.holds_hidden(f, t) {
                        Ok(true) => return Some((level, f.clone())),
                        Ok(false) => {
                            clean.insert((f.number, t.seq));
                        }
                        Err(_) => {}
                    }
                }
            }
        }
        None
    }

    /// Whether table `f` holds an entry `t` hides (reading no more than
    /// `RETIRE_SCAN` entries of the range: past that, it may).
    fn holds_hidden(&self, f: &FileMeta, t: &RangeTomb) -> crate::error::Result<bool> {
        let mut it = crate::compaction::table_input(&self.eng.tables, f)?;
        let from = t.start.as_slice().max(f.smallest_user());
        it.seek(&internal_key(from, MAX_SEQ, Kind::Put))?;
        for _ in 0..RETIRE_SCAN {
            if !it.valid() {
                return Ok(false);
            }
            let Some(p) = ParsedKey::parse(it.key()) else { return Ok(true) };
            if p.user_key >= t.end.as_slice() {
                return Ok(false);
            }
            if p.seq < t.seq {
                return Ok(true);
            }
            it.next()?;
        }
        Ok(true)
    }
}
