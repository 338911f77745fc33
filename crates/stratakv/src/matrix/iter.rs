//! A cursor over the live part of one row.

use std::sync::Arc;

use super::fences::Fences;
use super::row::{Elem, Row};
use crate::batch::RecordLoc;
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::key_prefix;
use crate::key::user_key;

/// How far ahead of the cursor keys are prefetched.
const PREFETCH_AHEAD: u32 = 6;

/// Iterates elements `[start, end)` of a row as internal keys and values.
pub struct RowIter {
    row: Arc<Row>,
    start: u32,
    end: u32,
    pos: Option<u32>,
    key: Vec<u8>,
    value: (u64, u32),
    /// The row's DRAM fences, if the caller has them: a seek then searches
    /// PM only inside the window they give.
    fences: Option<Arc<Fences>>,
}

impl RowIter {
    /// A cursor over elements `[start, end)`.
    pub fn new(row: Arc<Row>, start: u32, end: u32) -> RowIter {
        let end = end.min(row.len());
        RowIter { row, start: start.min(end), end, pos: None, key: Vec::new(), value: (0, 0), fences: None }
    }

    /// A cursor over elements `[start, end)` whose seeks use `fences`.
    pub(super) fn with_fences(row: Arc<Row>, start: u32, end: u32, fences: Arc<Fences>) -> RowIter {
        RowIter { fences: Some(fences), ..RowIter::new(row, start, end) }
    }

    fn land(&mut self, i: u32) -> Result<()> {
        self.land_dir(i, true)
    }

    fn land_dir(&mut self, i: u32, forward: bool) -> Result<()> {
        if i < self.start || i >= self.end {
            self.pos = None;
            return Ok(());
        }
        // Keys live in the log in write order, so a scan reads them at
        // random: ask for one a few steps ahead to overlap the misses.
        if forward {
            self.row.prefetch_key(i + PREFETCH_AHEAD);
        } else if let Some(j) = i.checked_sub(PREFETCH_AHEAD) {
            self.row.prefetch_key(j);
        }
        let e: Elem = self.row.elem(i)?;
        let uk = self.row.user_key(&e)?;
        self.key.clear();
        self.key.extend_from_slice(uk);
        self.key.extend_from_slice(&e.trailer.to_le_bytes());
        // Check the value's range now so value() cannot fail later.
        let v = self.row.value(&e)?;
        self.value = (e.value_off(), v.len() as u32);
        self.pos = Some(i);
        Ok(())
    }
}

impl InternalIterator for RowIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.land(self.start)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        match self.end.checked_sub(1) {
            Some(i) => self.land_dir(i, false),
            None => {
                self.pos = None;
                Ok(())
            }
        }
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let ukey = user_key(target);
        let (mut lo, mut hi) = (self.start, self.end);
        if let Some(f) = &self.fences {
            // The window holds every version of `ukey` and, at `hi`, the
            // first larger key: the answer lies in [lo, hi] either way.
            let (wl, wh) = f.window(ukey, self.row.len());
            lo = lo.max(wl).min(self.end);
            hi = hi.min(wh).max(lo);
        }
        let i = self.row.lower_bound(target, key_prefix(ukey), lo, hi)?;
        self.land(i)
    }

    fn next(&mut self) -> Result<()> {
        match self.pos {
            Some(i) => self.land(i + 1),
            None => Ok(()),
        }
    }

    fn prev(&mut self) -> Result<()> {
        match self.pos {
            Some(i) if i > self.start => self.land_dir(i - 1, false),
            _ => {
                self.pos = None;
                Ok(())
            }
        }
    }

    fn log_record(&self) -> Result<Option<RecordLoc>> {
        let Some(i) = self.pos else { return Ok(None) };
        let e = self.row.elem(i)?;
        Ok(Some(RecordLoc {
            key_off: e.key_off,
            key_len: e.key_len,
            value_len: e.value_len,
            hash: Some(self.row.hash(i)?),
            node_off: None,
        }))
    }

    fn key(&self) -> &[u8] {
        if self.pos.is_some() {
            &self.key
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if self.pos.is_none() || self.value.1 == 0 {
            return &[];
        }
        // land() read this range successfully; the row's leases keep it mapped.
        self.row.region_read(self.value.0, self.value.1).unwrap_or(&[])
    }
}
