//! Versions: immutable snapshots of which tables make up each level.
//!
//! A [`Version`] is shared through `Arc`; readers keep the one they started
//! with while compactions install new ones, so readers never block on
//! compaction. The [`VersionSet`] records every change as a
//! [`VersionEdit`] in the MANIFEST.

mod edit;
pub mod filename;
mod l0_state;
mod level_iter;
pub mod manifest;
mod multi_get;
pub mod range_del;
mod set;
mod table_cache;

pub use edit::VersionEdit;
pub(crate) use l0_state::L0State;
pub use level_iter::LevelIter;
pub use range_del::{RangeDels, RangeTomb};
pub use set::VersionSet;
pub use table_cache::TableCache;

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::Lookup;
use crate::key::{compare_internal, make_internal_key, user_key, Kind, ParsedKey, SeqNo, KIND_FOR_SEEK};

/// Number of levels (L0..L6).
pub const NUM_LEVELS: usize = 7;

/// What the version knows about one table file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMeta {
    /// File number (`<number>.sst`).
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Entries.
    pub entries: u64,
    /// Tombstones.
    pub deletions: u64,
    /// Smallest sequence number.
    pub smallest_seq: SeqNo,
    /// Largest sequence number.
    pub largest_seq: SeqNo,
}

impl FileMeta {
    /// Smallest user key.
    pub fn smallest_user(&self) -> &[u8] {
        user_key(&self.smallest)
    }

    /// Largest user key.
    pub fn largest_user(&self) -> &[u8] {
        user_key(&self.largest)
    }

    /// Whether the file's user-key range intersects `[lo, hi]` (None = unbounded).
    pub fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        let below = hi.map(|h| self.smallest_user() > h).unwrap_or(false);
        let above = lo.map(|l| self.largest_user() < l).unwrap_or(false);
        !(below || above)
    }
}

/// The files of `files` (sorted by key, user keys disjoint: a run or a level
/// below L0) whose user-key range intersects `[lo, hi]`, found by binary
/// search so that picking compactions and checking tombstones stay cheap in
/// a database of many thousands of tables.
pub fn sorted_overlapping<'a>(files: &'a [Arc<FileMeta>], lo: Option<&[u8]>, hi: Option<&[u8]>) -> &'a [Arc<FileMeta>] {
    // Largest user keys rise with the index, and so do smallest ones.
    let first = lo.map_or(0, |l| files.partition_point(|f| f.largest_user() < l));
    let rest = files.get(first..).unwrap_or(&[]);
    let len = hi.map_or(rest.len(), |h| rest.partition_point(|f| f.smallest_user() <= h));
    rest.get(..len).unwrap_or(&[])
}

/// A sorted run of tables that sits between L0 and L1 (the tiered runs of
/// the matrix profile): the output of one column-compaction round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Run id; a larger id holds newer data for any key both runs hold.
    pub id: u64,
    /// Tables sorted by key and disjoint.
    pub files: Vec<Arc<FileMeta>>,
}

impl Run {
    /// Bytes in the run's tables.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// The tables of every level, and what level 0 keeps besides tables, at
/// one point in time.
#[derive(Clone, Debug, Default)]
pub struct Version {
    /// `levels[0]` newest file first (files may overlap); deeper levels
    /// sorted by key and disjoint.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
    /// Sorted runs between L0 and L1, newest (largest id) first. Reads
    /// consult them after L0 and before L1.
    pub runs: Vec<Run>,
    /// Level 0's state outside table files (the matrix's rows), read
    /// before every table.
    pub(crate) l0: Option<Arc<dyn L0State>>,
    /// Range tombstones every layer's entries are subject to.
    pub range_dels: Arc<RangeDels>,
    /// How many range tombstones versions up to this one have added since
    /// the open: readers check it against the engine's count
    /// (`Engine::view_now`).
    pub range_epoch: u64,
    /// Range-partition split points, sorted: no table spans one.
    pub splits: Arc<Vec<Vec<u8>>>,
}

impl Version {
    /// A version with no files.
    pub fn empty() -> Version {
        Version {
            levels: vec![Vec::new(); NUM_LEVELS],
            runs: Vec::new(),
            l0: None,
            range_dels: range_del::no_range_dels(),
            range_epoch: 0,
            splits: Arc::new(Vec::new()),
        }
    }

    /// This version's tables without level 0's state: what background
    /// jobs hold while they run. A job holding the state would keep every
    /// matrix row of that moment, and the PM under it, allocated until it
    /// ends, after the matrix has let go of them.
    pub fn tables_only(&self) -> Arc<Version> {
        Arc::new(Version {
            levels: self.levels.clone(),
            runs: self.runs.clone(),
            l0: None,
            range_dels: self.range_dels.clone(),
            range_epoch: self.range_epoch,
            splits: self.splits.clone(),
        })
    }

    /// Every table of the version: levels and runs.
    pub fn all_files(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.levels.iter().flatten().chain(self.runs.iter().flat_map(|r| r.files.iter()))
    }

    /// Files of `level`.
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        self.levels.get(level).map(|v| v.as_slice()).unwrap_or(&[])
    }

    /// Total bytes in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files(level).iter().map(|f| f.size).sum()
    }

    /// Number of levels that hold at least one file (the runs count as one).
    pub fn nonempty_levels(&self) -> usize {
        self.levels.iter().filter(|l| !l.is_empty()).count() + usize::from(!self.runs.is_empty())
    }

    /// Deepest level holding a file, if any.
    pub fn deepest_level(&self) -> Option<usize> {
        self.levels.iter().rposition(|l| !l.is_empty())
    }

    /// Files of `level` whose user-key range intersects `[lo, hi]`.
    pub fn overlapping(&self, level: usize, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<Arc<FileMeta>> {
        if level == 0 {
            self.files(0).iter().filter(|f| f.overlaps(lo, hi)).cloned().collect()
        } else {
            sorted_overlapping(self.files(level), lo, hi).to_vec()
        }
    }

    /// The newest version of `ukey` (hash `hash`) with sequence <= `seq`
    /// below the memtables.
    pub fn get(&self, tables: &TableCache, ukey: &[u8], hash: u64, seq: SeqNo) -> Result<Lookup> {
        if let Some(l0) = &self.l0 {
            match l0.get(ukey, seq, hash, tables, self.files(0))? {
                Lookup::Missing => {}
                found => return Ok(found),
            }
        }
        let mut seek = Vec::with_capacity(ukey.len() + 8);
        make_internal_key(&mut seek, ukey, seq, KIND_FOR_SEEK);
        for f in self.files(0) {
            if ukey < f.smallest_user() || ukey > f.largest_user() {
                continue;
            }
            if let Some(r) = probe(tables, f, &seek, ukey, hash)? {
                return Ok(r);
            }
        }
        // Newest run first, then L1 and deeper: the first hit is the newest.
        let sorted = self.runs.iter().map(|r| &r.files).chain(self.levels.iter().skip(1));
        for files in sorted {
            let i = files.partition_point(|f| compare_internal(&f.largest, &seek) == Ordering::Less);
            if let Some(f) = files.get(i) {
                if ukey >= f.smallest_user() {
                    if let Some(r) = probe(tables, f, &seek, ukey, hash)? {
                        return Ok(r);
                    }
                }
            }
        }
        Ok(Lookup::Missing)
    }

    /// Asks for the cache lines a point lookup of a key with hash `hash`
    /// reads first in level 0's state.
    pub fn prefetch(&self, hash: u64) {
        if let Some(l0) = &self.l0 {
            l0.prefetch(hash);
        }
    }

    /// Cursors over everything below the memtables, newest source first:
    /// level 0's state, one per L0 file, one per run, one per deeper level.
    /// With `prefix` (every key the caller reads begins with it), level 0
    /// may leave out sources that hold no such key; returns how many it did.
    pub fn add_iterators(
        &self,
        tables: &Arc<TableCache>,
        out: &mut Vec<Box<dyn InternalIterator>>,
        prefix: Option<&[u8]>,
    ) -> Result<usize> {
        let skipped = self.l0.as_ref().map_or(0, |l0| l0.add_iterators(out, prefix));
        match self.l0.as_ref().and_then(|l0| l0.table_iterators(tables, self.files(0))) {
            Some(it) => out.push(it?),
            None => {
                for f in self.files(0) {
                    out.push(Box::new(tables.get(f.number)?.iter()));
                }
            }
        }
        let sorted = self.runs.iter().map(|r| &r.files).chain(self.levels.iter().skip(1));
        for files in sorted.filter(|f| !f.is_empty()) {
            out.push(Box::new(LevelIter::new(tables.clone(), files.clone())));
        }
        Ok(skipped)
    }
}

fn probe(tables: &TableCache, f: &FileMeta, seek: &[u8], ukey: &[u8], hash: u64) -> Result<Option<Lookup>> {
    let t = tables.get(f.number)?;
    let Some((k, v)) = t.get(seek, ukey, hash)? else { return Ok(None) };
    match ParsedKey::parse(&k).map(|p| p.kind) {
        Some(Kind::Put) => Ok(Some(Lookup::Found(v))),
        Some(Kind::Delete) => Ok(Some(Lookup::Deleted)),
        None => Err(crate::error::Error::corruption(t.path(), 0, "malformed internal key")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};
    use proptest::prelude::*;

    fn file(n: u64, lo: u8, hi: u8) -> Arc<FileMeta> {
        Arc::new(FileMeta {
            number: n,
            size: 1,
            smallest: internal_key(&[lo], 10, Kind::Put),
            largest: internal_key(&[hi], 1, Kind::Put),
            entries: 1,
            deletions: 0,
            smallest_seq: 1,
            largest_seq: 10,
        })
    }

    proptest! {
        /// The binary search finds exactly the files a linear scan finds,
        /// for every query range, bounded or not, empty or inverted.
        #[test]
        fn sorted_overlapping_agrees_with_a_linear_scan(
            cuts in proptest::collection::btree_set(0u8..200, 0..24),
            lo in proptest::option::of(0u8..210),
            hi in proptest::option::of(0u8..210),
        ) {
            // Disjoint files from consecutive pairs of distinct cut points.
            let cuts: Vec<u8> = cuts.into_iter().collect();
            let files: Vec<_> = cuts.chunks_exact(2).enumerate().map(|(i, c)| file(i as u64, c[0], c[1])).collect();
            let (lo, hi) = (lo.map(|b| vec![b]), hi.map(|b| vec![b]));
            let fast: Vec<u64> = sorted_overlapping(&files, lo.as_deref(), hi.as_deref()).iter().map(|f| f.number).collect();
            let slow: Vec<u64> =
                files.iter().filter(|f| f.overlaps(lo.as_deref(), hi.as_deref())).map(|f| f.number).collect();
            prop_assert_eq!(fast, slow);
        }
    }
}
