//! Single-level's state in a version: the tree, the tables' key counts,
//! and the compaction in flight. Lookups go memtables → tree → one block.

use std::any::Any;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::counters::ReadCounters;
use super::record::Record;
use super::scan::ScanIter;
use crate::error::Result;
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::{make_internal_key, Kind, Lookup, ParsedKey, SeqNo, KIND_FOR_SEEK, MAX_SEQ};
use crate::pmtree::PmTree;
use crate::sstable::BlockHandle;
use crate::version::{FileMeta, L0State, TableCache};

/// See the module doc.
pub(crate) struct SingleState {
    /// The global index.
    pub tree: Arc<PmTree>,
    /// Anchor, counts, pending compaction.
    pub rec: Record,
    /// Tables the leaf scans and range queries had marked as candidates
    /// when this state was made (the stall policy may take no lock, so it
    /// counts these rather than the live marks).
    pub marked: Arc<HashSet<u64>>,
    /// Shared counters.
    pub reads: Arc<ReadCounters>,
}

impl std::fmt::Debug for SingleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleState").field("rec", &self.rec).field("marked", &self.marked.len()).finish()
    }
}

impl SingleState {
    /// Tables whose live keys fell to `live_percent` of their total.
    pub fn low_live(&self, live_percent: u32) -> Vec<u64> {
        self.rec
            .counts
            .iter()
            .filter(|(_, c)| c.total > 0 && c.alive * 100 <= c.total * live_percent as u64)
            .map(|(n, _)| *n)
            .collect()
    }

    /// The compaction candidates among `files` (the version's tables): those
    /// whose live keys fell to `live_percent` of their total, and those in
    /// `marks`, less the tables still being indexed (`flushing`, and
    /// `indexing`). A set, so a table both mostly dead and marked counts
    /// once: the stall policy and the compaction picker both count this
    /// way, so writers are never stopped for candidates the picker does
    /// not see.
    pub fn candidates_in(
        &self,
        files: &[Arc<FileMeta>],
        live_percent: u32,
        marks: &HashSet<u64>,
        indexing: &HashSet<u64>,
    ) -> HashSet<u64> {
        let live: HashSet<u64> =
            numbers(files).into_iter().filter(|n| !indexing.contains(n) && !self.rec.flushing.contains(n)).collect();
        let mut c: HashSet<u64> = self.low_live(live_percent).into_iter().collect();
        c.extend(marks.iter().copied());
        c.retain(|n| live.contains(n));
        c
    }

    /// Reads the newest version of `ukey` in block `h` of table `file`:
    /// `(seq, lookup)`, or None if the block has no version of it.
    fn read_block(
        &self,
        tables: &TableCache,
        file: u64,
        h: BlockHandle,
        ukey: &[u8],
    ) -> Result<Option<(SeqNo, Lookup)>> {
        let t = tables.get(file)?;
        let mut seek = Vec::with_capacity(ukey.len() + 8);
        make_internal_key(&mut seek, ukey, MAX_SEQ, KIND_FOR_SEEK);
        self.reads.block_reads.fetch_add(1, Ordering::Relaxed);
        let Some((k, v)) = t.get_in_block(h, &seek, ukey)? else { return Ok(None) };
        Ok(ParsedKey::parse(&k).map(|p| (p.seq, if p.kind == Kind::Put { Lookup::Found(v) } else { Lookup::Deleted })))
    }

    /// The newest version <= `seq` over every table that may hold `ukey`:
    /// for a snapshot older than the tree's version of the key. Tables keep
    /// the versions a snapshot can see (compaction drops only what no
    /// snapshot reads).
    fn search_tables(
        &self,
        tables: &TableCache,
        files: &[Arc<FileMeta>],
        ukey: &[u8],
        seq: SeqNo,
        hash: u64,
    ) -> Result<Lookup> {
        self.reads.fallbacks.fetch_add(1, Ordering::Relaxed);
        let mut seek = Vec::with_capacity(ukey.len() + 8);
        make_internal_key(&mut seek, ukey, seq, KIND_FOR_SEEK);
        let mut best: Option<(SeqNo, Lookup)> = None;
        for f in files.iter().filter(|f| f.smallest_user() <= ukey && ukey <= f.largest_user()) {
            let t = tables.get(f.number)?;
            self.reads.block_reads.fetch_add(1, Ordering::Relaxed);
            if let Some((k, v)) = t.get(&seek, ukey, hash)? {
                if let Some(p) = ParsedKey::parse(&k) {
                    if best.as_ref().is_none_or(|(s, _)| p.seq > *s) {
                        best = Some((p.seq, if p.kind == Kind::Put { Lookup::Found(v) } else { Lookup::Deleted }));
                    }
                }
            }
        }
        Ok(best.map(|(_, l)| l).unwrap_or(Lookup::Deleted))
    }
}

impl L0State for SingleState {
    fn record(&self) -> Vec<u8> {
        self.rec.encode()
    }

    /// The tree is the whole truth below the memtables: a key it lacks is
    /// absent (never `Missing`). A tree entry may name a table newer than
    /// this version (the tree is not versioned), or, for a moment, one a
    /// compaction just deleted: then the lookup retries, and finally
    /// searches this version's tables.
    fn get(&self, ukey: &[u8], seq: SeqNo, hash: u64, tables: &TableCache, files: &[Arc<FileMeta>]) -> Result<Lookup> {
        self.reads.gets.fetch_add(1, Ordering::Relaxed);
        for _ in 0..3 {
            let Some(v) = self.tree.get(ukey)? else { return Ok(Lookup::Deleted) };
            let h = BlockHandle { offset: v.block_offset, size: v.block_len as u64 };
            match self.read_block(tables, v.file, h, ukey) {
                Ok(Some((s, found))) if s <= seq => return Ok(found),
                // A snapshot older than the newest version.
                Ok(Some(_)) => return self.search_tables(tables, files, ukey, seq, hash),
                Ok(None) => break,
                // The table went away under us: the tree moved on.
                Err(_) if !files.iter().any(|f| f.number == v.file) => continue,
                Err(e) => return Err(e),
            }
        }
        self.search_tables(tables, files, ukey, seq, hash)
    }

    fn prefetch(&self, _hash: u64) {}

    /// One merged cursor over the tables that watches a scan's windows
    /// (range-query sequentiality).
    fn table_iterators(
        &self,
        tables: &Arc<TableCache>,
        l0_files: &[Arc<FileMeta>],
    ) -> Option<Result<Box<dyn InternalIterator>>> {
        let open = || -> Result<Box<dyn InternalIterator>> {
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::with_capacity(l0_files.len());
            for f in l0_files {
                children.push(Box::new(tables.get(f.number)?.iter()));
            }
            let files = l0_files.iter().map(|f| f.number).collect();
            Ok(Box::new(ScanIter::new(MergingIterator::new(children), files, self.reads.clone())))
        };
        Some(open())
    }

    /// The tables are the version's level 0, which `Version` adds itself.
    fn add_iterators(&self, _out: &mut Vec<Box<dyn InternalIterator>>, _prefix: Option<&[u8]>) -> usize {
        0
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The state of `v`, if it is single-level's.
pub(crate) fn single_in(v: &crate::version::Version) -> Option<&SingleState> {
    v.l0.as_ref().and_then(|s| s.as_any().downcast_ref::<SingleState>())
}

/// Table numbers of `files` as a set.
pub(crate) fn numbers(files: &[Arc<FileMeta>]) -> HashSet<u64> {
    files.iter().map(|f| f.number).collect()
}
