//! Internal iterators: cursors over internal keys with fallible moves.
//!
//! Every source (memtable, SSTable, a level, the matrix) implements
//! [`InternalIterator`]; [`MergingIterator`] combines them and
//! [`crate::db::DbIter`] turns the merged stream of versions into the user's
//! view (newest visible version per key, tombstones hidden, bounds applied).

mod merging;

pub use merging::MergingIterator;

use crate::batch::RecordLoc;
use crate::error::Result;

/// A cursor over internal keys in internal-key order (user key ascending,
/// then newest first).
///
/// Positioning methods return an error if a source is unreadable; after an
/// error the cursor is not valid. `key`/`value` may only be called while
/// `valid()`; otherwise they return empty slices.
pub trait InternalIterator: Send {
    /// Whether the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Moves to the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Moves to the first entry >= `target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the next entry. REQUIRES: valid.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry. REQUIRES: valid.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];

    /// Where the current entry's record lies in the PM log, for sources
    /// that index log records (memtables, matrix rows); None for others.
    fn log_record(&self) -> Result<Option<RecordLoc>> {
        Ok(None)
    }

    /// Moves to the last entry <= `target`.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if !self.valid() {
            self.seek_to_last()
        } else if crate::key::compare_internal(self.key(), target) == std::cmp::Ordering::Greater {
            self.prev()
        } else {
            Ok(())
        }
    }
}

/// An iterator over a sorted vector (tests).
#[cfg(test)]
#[derive(Debug, Default)]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

#[cfg(test)]
impl VecIterator {
    /// Wraps entries, which must be sorted by internal key.
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIterator {
        VecIterator { entries, pos: None }
    }

    fn entry(&self) -> Option<&(Vec<u8>, Vec<u8>)> {
        self.pos.and_then(|p| self.entries.get(p))
    }
}

#[cfg(test)]
impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.entry().is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = if self.entries.is_empty() { None } else { Some(0) };
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.entries.len().checked_sub(1);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i =
            self.entries.partition_point(|(k, _)| crate::key::compare_internal(k, target) == std::cmp::Ordering::Less);
        self.pos = if i < self.entries.len() { Some(i) } else { None };
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.pos = self.pos.map(|p| p + 1).filter(|p| *p < self.entries.len());
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.entry().map(|e| e.0.as_slice()).unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.entry().map(|e| e.1.as_slice()).unwrap_or(&[])
    }
}
