//! Reading the matrix: point lookups through segment probes, fences and
//! hints, and cursors over the rows.

use std::any::Any;

use super::iter::RowIter;
use super::probe::{RowProbe, SegProbe};
use super::row::{Elem, Row};
use super::state::Matrix;
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::{key_prefix, make_internal_key, prefix_hash, Kind, Lookup, SeqNo, KIND_FOR_SEEK};
use crate::version::L0State;

/// Longest window a point lookup scans by key hash instead of searching.
const HASH_SCAN_LIMIT: u32 = 64;

/// The answer a row's element `e` gives to a point lookup.
fn found(row: &Row, e: &Elem) -> Result<Lookup> {
    match e.kind() {
        Some(Kind::Put) => Ok(Lookup::Found(row.value(e)?.to_vec())),
        _ => Ok(Lookup::Deleted),
    }
}

impl Matrix {
    /// Asks for the cache lines a lookup of a key with hash `hash` reads
    /// first: each segment's index slot or filter block.
    pub fn prefetch(&self, hash: u64) {
        for g in &self.groups {
            match &g.probe {
                Some(SegProbe::Bloom(f)) => f.prefetch(hash),
                Some(SegProbe::Index(ix)) => ix.prefetch(hash),
                None => {}
            }
        }
    }

    /// The newest version of `ukey` with sequence <= `seq` (`hash` = its key hash).
    pub fn get(&self, ukey: &[u8], seq: SeqNo, hash: u64) -> Result<Lookup> {
        if self.rows.is_empty() {
            return Ok(Lookup::Missing);
        }
        let mut probe = Vec::with_capacity(ukey.len() + 8);
        make_internal_key(&mut probe, ukey, seq, KIND_FOR_SEEK);
        let prefix = key_prefix(ukey);
        // Window in the next row, valid if that row is `hint_row`: [lo, hi).
        let mut hint: Option<(u64, u32, u32)> = None;
        let mut cands = Vec::new();
        for g in &self.groups {
            let rows = self.rows.get(g.first..g.first + g.len).unwrap_or_default();
            match &g.probe {
                Some(SegProbe::Bloom(f)) if !f.may_contain(hash) => {
                    hint = None;
                    continue;
                }
                Some(SegProbe::Bloom(_)) | None => {}
                Some(SegProbe::Index(ix)) => {
                    // Candidates come newest row first, so the first version
                    // visible at `seq` is the newest. Candidates before a
                    // row's `start` are keys already moved to L1 (columns
                    // end at user-key boundaries, in every compactor row).
                    ix.candidates(hash, &mut cands);
                    for &(id, c) in &cands {
                        let Some(lr) = rows.iter().find(|r| r.row.id() == id) else { continue };
                        if c < lr.start {
                            continue;
                        }
                        if let Some(e) = lr.row.find_in_run(ukey, hash, seq, c)? {
                            return found(&lr.row, &e);
                        }
                    }
                    hint = None;
                    continue;
                }
            }
            for lr in rows {
                let row = &lr.row;
                match &lr.probe {
                    RowProbe::Segment => {}
                    RowProbe::Bloom(f) if !f.may_contain(hash) => {
                        hint = None;
                        continue;
                    }
                    RowProbe::Bloom(_) => {}
                }
                let n = row.len();
                let (mut lo, mut hi) = lr.window(ukey);
                if let Some((_, l, h)) = hint.filter(|h| h.0 == row.id()) {
                    lo = lo.max(l);
                    hi = hi.min(h);
                }
                let (lo, hi) = (lo.max(lr.start), hi.min(n));
                // The window holds every visible version of the key (fences
                // and hints bound it by key order), so when it is short a
                // scan of its key hashes finds the version with the fewest
                // PM reads. A miss here (a filter false positive) still needs
                // the binary search below for the next row's hints.
                if hi.saturating_sub(lo) <= HASH_SCAN_LIMIT {
                    if let Some(e) = row.find_in_window(ukey, hash, seq, lo, hi)? {
                        return found(row, &e);
                    }
                }
                let idx = row.lower_bound(&probe, prefix, lo, hi)?;
                if idx < n {
                    let e = row.elem(idx)?;
                    if e.prefix == prefix && row.user_key(&e)? == ukey && idx >= lr.start {
                        return found(row, &e);
                    }
                }
                // The older row's first element >= probe lies between the
                // hints of our neighbours of the probe.
                let lo_h = if idx > 0 { row.elem(idx - 1)?.hint } else { 0 };
                let hi_h = if idx < n { row.elem(idx)?.hint.saturating_add(1) } else { u32::MAX };
                hint = Some((row.header().older_id, lo_h, hi_h));
            }
        }
        Ok(Lookup::Missing)
    }

    /// Cursors over every row's live part, newest first. With `prefix`
    /// (every key the caller will read begins with it), rows whose prefix
    /// filter rules it out are left out; returns how many were.
    pub fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>, prefix: Option<&[u8]>) -> usize {
        let hash = prefix.map(prefix_hash);
        let mut skipped = 0;
        for r in &self.rows {
            if hash.is_some_and(|h| !r.may_hold_prefix(h)) {
                skipped += 1;
                continue;
            }
            out.push(Box::new(RowIter::with_fences(r.row.clone(), r.start, r.row.len(), r.fences.clone())));
        }
        skipped
    }

    /// DRAM held by the rows' filters, fences and prefix filters and by the segments' indexes or filters.
    pub fn dram_bytes(&self) -> u64 {
        let rows: usize = self
            .rows
            .iter()
            .map(|r| r.probe.bytes() + r.fences.bytes() + r.prefixes.as_ref().map_or(0, |f| f.bytes()))
            .sum();
        let segs: usize = self.groups.iter().filter_map(|g| g.probe.as_ref()).map(|f| f.bytes()).sum();
        (rows + segs) as u64
    }
}

impl L0State for Matrix {
    fn record(&self) -> Vec<u8> {
        Matrix::record(self).encode()
    }

    fn get(
        &self,
        ukey: &[u8],
        seq: SeqNo,
        hash: u64,
        _tables: &crate::version::TableCache,
        _l0_files: &[std::sync::Arc<crate::version::FileMeta>],
    ) -> Result<Lookup> {
        Matrix::get(self, ukey, seq, hash)
    }

    fn prefetch(&self, hash: u64) {
        Matrix::prefetch(self, hash)
    }

    fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>, prefix: Option<&[u8]>) -> usize {
        Matrix::add_iterators(self, out, prefix)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
