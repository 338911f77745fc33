//! Deleting tables that range tombstones cover entirely: what makes a
//! dropped partition's space come back without rewriting anything, and a
//! `delete_range` over whole tables cheap (RocksDB's `DeleteFilesInRange`,
//! done by itself).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::DbInner;
use crate::engine::{Commit, Engine, State};
use crate::key::SeqNo;
use crate::l0::Job;
use crate::options::L0Kind;
use crate::version::{FileMeta, VersionEdit};

impl DbInner {
    /// A job deleting the tables a range tombstone visible to every reader
    /// covers, with them marked busy; None if there are none.
    ///
    /// Only levels whose tables nothing else indexes are searched: level 0
    /// of the `sstable` kind and L1 and below, except in `single-level`,
    /// whose PM tree names its tables (its compactions drop what the
    /// tombstones hide instead). The matrix's runs are left to its column
    /// compactions.
    pub(super) fn pick_range_drop(&self) -> Option<Job<'_>> {
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
            let edit = VersionEdit { deleted: doomed.iter().map(|(l, f)| (*l, f.number)).collect(), ..Default::default() };
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

    /// Whether a table waits to be deleted for a range tombstone.
    pub(super) fn range_drop_due(&self) -> bool {
        let oldest = self.eng.oldest_snapshot();
        let st = self.eng.state.lock();
        !self.covered_tables(&st, oldest).is_empty()
    }

    /// The tables of `st`'s version, not busy, that a range tombstone
    /// every reader at or past `oldest` sees covers entirely.
    fn covered_tables(&self, st: &State, oldest: SeqNo) -> Vec<(u32, Arc<FileMeta>)> {
        let first_level = match self.eng.opts.l0 {
            L0Kind::Sstable => 0,
            L0Kind::SingleLevel => return Vec::new(),
            _ => 1,
        };
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
