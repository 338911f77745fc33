//! Sealing a memtable into the newest row, and merging receiver rows.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::MatrixL0;
use crate::compaction::Dropper;
use crate::engine::{Commit, Engine};
use crate::error::{Error, Result};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::{key_hash, key_prefix, Kind, ParsedKey};
use crate::matrix::build::{build_row, RowEntry, RowSpec};
use crate::matrix::iter::RowIter;
use crate::matrix::policy::merge::{pick_merge, MergeCandidate};
use crate::matrix::row::Elem;
use crate::matrix::SoloProbe;
use crate::memtable::Memtable;
use crate::version::VersionEdit;

/// The row elements for the entries of `it` that `dropper` keeps: each
/// points at the entry's record in the PM log, which the source says where
/// it lies (a memtable or matrix rows), so nothing is copied.
/// `hint` is how many entries to expect.
fn collect_entries(
    it: &mut dyn InternalIterator,
    dropper: &mut Dropper<'_>,
    eng: &Engine,
    hint: usize,
) -> Result<Vec<RowEntry>> {
    let mut entries = Vec::with_capacity(hint);
    it.seek_to_first()?;
    while it.valid() {
        if dropper.keep(it.key()) {
            let bad = |why: &str| Error::corruption(&*eng.region_path, 0, why.to_string());
            let p = ParsedKey::parse(it.key()).ok_or_else(|| bad("malformed key in a level-0 source"))?;
            let loc = it.log_record()?.ok_or_else(|| bad("a level-0 source entry is not in the PM log"))?;
            entries.push(RowEntry {
                elem: Elem {
                    prefix: key_prefix(p.user_key),
                    trailer: p.seq << 8 | p.kind as u64,
                    key_off: loc.key_off,
                    key_len: loc.key_len,
                    value_len: if p.kind == Kind::Put { loc.value_len } else { 0 },
                    hint: 0,
                },
                hash: loc.hash.unwrap_or_else(|| key_hash(p.user_key)),
            });
        }
        it.next()?;
    }
    Ok(entries)
}

impl MatrixL0 {
    /// Turns a sealed memtable into the newest matrix row.
    pub(super) fn seal_to_row(&self, eng: &Engine, imm: &Arc<Memtable>) -> Result<()> {
        // Tombstones stay: older versions may live in older rows or levels.
        let mut dropper = Dropper::new(eng.oldest_snapshot(), |_| true);
        let mut entries = collect_entries(&mut imm.iter(), &mut dropper, eng, imm.len())?;
        let log_bytes = imm.log_bytes();
        let logs = imm.extents();
        let (first_log, last_log) = (imm.first_log(), imm.next_log().saturating_sub(1).max(imm.first_log()));
        let live = if entries.is_empty() {
            None
        } else {
            // A retry after a full region rebuilds from the same entries.
            let row = eng.with_pm_space(|| {
                let older = self.with_matrix(&eng.version(), |m| m.rows.first().map(|r| r.row.clone()));
                let spec = RowSpec {
                    id: self.new_row_id(),
                    entries: &mut entries,
                    older: older.as_deref(),
                    log_bytes,
                    logs: logs.clone(),
                };
                build_row(&eng.region, &eng.region_path, spec)
            })?;
            Some(self.live(row, first_log, last_log)?)
        };
        // The row points into the log, and the edit raises log_number: on an
        // ordinary file the log entries must be msynced before the MANIFEST
        // relies on them (the row itself was msynced by build_row).
        if eng.log.needs_msync() {
            eng.sync_log()?;
        }
        let mut vs = eng.versions.lock();
        let mut next = self.matrix_of(&vs.current());
        if let Some(l) = live {
            next.push_newest(l);
        }
        let next = self.seal_state(next);
        let edit = VersionEdit {
            log_number: Some(imm.next_log()),
            last_sequence: Some(imm.last_seq().max(vs.last_sequence)),
            ..Default::default()
        };
        // If the edit fails, the MANIFEST may still name the new row: the
        // version set keeps the state (and the row's lease) until it is
        // replaced.
        eng.commit(&mut vs, Commit { edit, l0: Some(next.clone()), flushed: Some(imm.id()), ..Default::default() })?;
        eng.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.update_throttle(eng, &next);
        Ok(())
    }

    /// Merges adjacent receiver rows into one row when there are too many
    /// receiver rows (fewer rows to search, shadowed versions gone); which
    /// rows, `pick_merge` says.
    pub(super) fn maybe_merge_rows(&self, eng: &Engine) -> Result<()> {
        let v = eng.version();
        let picked = self.with_matrix(&v, |m| {
            let cands: Vec<MergeCandidate> = m
                .rows
                .iter()
                .map(|r| MergeCandidate { seg: r.seg, elems: u64::from(r.remaining()), receiver: !r.compactor })
                .collect();
            let w = pick_merge(&cands, self.rows_per_segment, self.merge_trigger)?;
            let older = m.rows.get(w.end).map(|r| r.row.clone());
            m.rows.get(w).map(|group| (group.to_vec(), older))
        });
        drop(v);
        let Some((group, older)) = picked else { return Ok(()) };
        // Rows are newest first, so on equal keys the newer row's version
        // comes first.
        let sources: Vec<Box<dyn InternalIterator>> =
            group.iter().map(|r| Box::new(RowIter::new(r.row.clone(), r.start, r.row.len())) as _).collect();
        let mut dropper = Dropper::new(eng.oldest_snapshot(), |_| true);
        let hint = group.iter().map(|r| r.remaining() as usize).sum();
        let mut entries = collect_entries(&mut MergingIterator::new(sources), &mut dropper, eng, hint)?;
        let ids: Vec<u64> = group.iter().map(|r| r.row.id()).collect();
        let log_bytes: u64 = group.iter().map(|r| r.row.header().log_bytes).sum();
        let logs: Vec<_> = group.iter().flat_map(|r| r.row.logs().iter().cloned()).collect();
        let first_log = group.iter().map(|r| r.first_log).min().unwrap_or(0);
        let last_log = group.iter().map(|r| r.last_log).max().unwrap_or(0);
        // A retry after a full region rebuilds from the same entries.
        let row = eng.with_pm_space(|| {
            let spec = RowSpec {
                id: self.new_row_id(),
                entries: &mut entries,
                older: older.as_deref(),
                log_bytes,
                logs: logs.clone(),
            };
            build_row(&eng.region, &eng.region_path, spec)
        })?;
        let merged = self.live(row, first_log, last_log)?;
        let probe = SoloProbe::of(&merged.row, self.hash_index)?;
        let mut vs = eng.versions.lock();
        let mut next = self.matrix_of(&vs.current());
        // A compaction round may have started meanwhile and claimed these
        // rows; then they must stay as they are (dropping `merged` frees it).
        let still_receivers = ids.iter().all(|id| next.rows.iter().any(|r| r.row.id() == *id && !r.compactor));
        if !still_receivers {
            return Ok(());
        }
        next.replace(&ids, merged, probe);
        let next = self.seal_state(next);
        eng.commit(&mut vs, Commit { l0: Some(next.clone()), ..Default::default() })?;
        self.update_throttle(eng, &next);
        Ok(())
    }
}
