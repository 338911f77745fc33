//! A crash-consistent B+-tree in PM (SLM-DB's global index, FAST & FAIR
//! updates): maps every user key to where its newest version is.
//!
//! - Nodes are 512-byte blocks of tree extents (`layout`, `node`), with a
//!   key prefix and a pointer per entry; the full key lives in a key record
//!   (`record`), which also holds the value in two slots switched by one
//!   8-byte selector word.
//! - Inserts and deletes shift entries in place with 8-byte stores, each
//!   persisted before the next, so every crash image reads as the node
//!   before or after the update (`insert`). Splits write the new right
//!   sibling whole, link it with one store (B-link), truncate the left
//!   node, then update the parent; a sibling missing from its parent after
//!   a crash is found by moving right and linked by the next writer.
//! - Nothing is rebuilt at open (`alloc::Writer::open` adopts the extent
//!   chain); there is no log.
//! - Readers are lock-free: they copy a node between two reads of a DRAM
//!   version counter for it and retry if a writer touched it. One writer
//!   at a time (a mutex).
//!
//! The anchor the engine records (once, at creation) is the head slot of
//! the tree's first extent; the root pointer is a word in that extent's
//! header, republished with one 8-byte store when the root splits.

mod alloc;
mod check;
mod insert;
mod iter;
mod layout;
mod node;
mod record;
mod search;
#[cfg(test)]
mod tests;
mod value;

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_pmem::{ExtentHead, Region};

pub(crate) use check::CheckReport;
pub(crate) use insert::Batch;
pub(crate) use iter::{RangeIter, RevRangeIter};
pub use layout::EXTENT_KIND_TREE;
pub(crate) use search::SortedGets;
pub(crate) use value::TreeValue;

use crate::error::{Error, Result};
use alloc::Writer;

/// Number of DRAM version counters readers validate node copies against.
const STRIPES: usize = 4096;

/// Counts of a tree, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TreeStats {
    /// Live entries (tombstones included).
    pub entries: u64,
    /// Nodes allocated (leaked ones from crashes included).
    pub nodes: u64,
    /// Bytes of key records allocated (superseded ones included).
    pub heap_bytes: u64,
    /// Bytes of PM extents the tree holds.
    pub pm_bytes: u64,
    /// Extents the tree holds.
    pub extents: u64,
}

/// The persistent B+-tree. Cheap to clone.
#[derive(Clone)]
pub(crate) struct PmTree {
    inner: Arc<Inner>,
}

/// State shared by the tree's handles and iterators.
pub(super) struct Inner {
    /// The PM region.
    region: Region,
    /// Path named in corruption errors.
    path: Arc<PathBuf>,
    /// Head slot of the first extent.
    anchor: u64,
    /// Region offset of the first extent (the root word is in its header).
    header_off: u64,
    /// Seqlock counters: odd while the writer changes a node mapping to it.
    stripes: Box<[AtomicU64]>,
    /// The one writer.
    writer: Mutex<Writer>,
    /// Live entries.
    entries: AtomicU64,
}

impl std::fmt::Debug for PmTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmTree").field("anchor", &self.inner.anchor).finish()
    }
}

impl PmTree {
    /// Creates an empty tree in fresh extents of `region`. Record
    /// [`PmTree::anchor`] (e.g. in the MANIFEST) to open it again; until
    /// then its extent is unreferenced, like any extent after allocation.
    pub fn create(region: &Region, path: &Path) -> Result<PmTree> {
        let mut w = Writer::create(region, path)?;
        let leaf = node::NodeImage::new(0, (0, 0), 0, 0, 0);
        let root = w.alloc_node(region, path, &leaf.bytes())?;
        let header_off = w.header_off();
        // The root leaf is durable (alloc_node) before the root word names it.
        w.pstore(path, header_off + layout::E_ROOT, root)?;
        let anchor = w.extents[0].head.slot;
        Ok(Self::build(region, path, anchor, header_off, w, 0))
    }

    /// Opens the tree anchored at head slot `anchor`, among the region's
    /// extent `heads` (from [`Region::heads`]). Adopts its extents; nothing
    /// is rebuilt. Counts the live entries by walking the leaves.
    pub fn open(region: &Region, path: &Path, anchor: u64, heads: &[ExtentHead]) -> Result<PmTree> {
        let w = Writer::open(region, path, anchor, heads)?;
        let header_off = w.header_off();
        let tree = Self::build(region, path, anchor, header_off, w, 0);
        let n = tree.count_entries()?;
        tree.inner.entries.store(n, Ordering::Relaxed);
        Ok(tree)
    }

    fn build(region: &Region, path: &Path, anchor: u64, header_off: u64, w: Writer, entries: u64) -> PmTree {
        PmTree {
            inner: Arc::new(Inner {
                region: region.clone(),
                path: Arc::new(path.to_path_buf()),
                anchor,
                header_off,
                stripes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
                writer: Mutex::new(w),
                entries: AtomicU64::new(entries),
            }),
        }
    }

    /// The head slot of the tree's first extent: what `open` takes.
    pub fn anchor(&self) -> u64 {
        self.inner.anchor
    }

    /// The extents the tree owns (all must stay allocated while it lives).
    pub fn extents(&self) -> Vec<ExtentHead> {
        self.inner.writer.lock().extents.iter().map(|e| e.head).collect()
    }

    /// The value of `key`, tombstones included.
    pub fn get(&self, key: &[u8]) -> Result<Option<TreeValue>> {
        self.inner.get(key)
    }

    /// Updates in ascending key order under one hold of the writer lock
    /// (see [`Batch`]); other writers wait until it is dropped.
    pub fn batch(&self) -> Batch<'_> {
        insert::Batch::new(&self.inner)
    }

    /// Inserts `key` or replaces its value (a batch of one).
    #[cfg(test)]
    pub fn upsert(&self, key: &[u8], v: TreeValue) -> Result<()> {
        self.batch().update(key, |_| Some(v)).map(|_| ())
    }

    /// Replaces the value of `key` only if it points at `expected_file`;
    /// returns whether it did (a batch of one).
    #[cfg(test)]
    pub fn replace_if(&self, key: &[u8], expected_file: u64, v: TreeValue) -> Result<bool> {
        let old = self.batch().update(key, |old| old.filter(|o| o.file == expected_file).map(|_| v))?;
        Ok(old.is_some_and(|o| o.file == expected_file))
    }

    /// Drops the entry of `key` only if it points at `expected_file`;
    /// returns whether it did.
    #[cfg(test)]
    pub fn remove_if(&self, key: &[u8], expected_file: u64) -> Result<bool> {
        self.batch().remove_if(key, expected_file)
    }

    /// Lookups in ascending key order that reuse the last leaf they read
    /// (see [`SortedGets`]).
    pub fn sorted_gets(&self) -> SortedGets<'_> {
        search::SortedGets::new(&self.inner)
    }

    /// Entries with keys in the range, ascending, following leaf siblings.
    pub fn range(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> RangeIter {
        RangeIter::new(self.inner.clone(), start, end)
    }

    /// Entries with keys in the range, descending (one descent per leaf).
    // Tested here; the single level scans through its tables for now.
    #[allow(dead_code)]
    pub fn range_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> RevRangeIter {
        RevRangeIter::new(self.inner.clone(), start, end)
    }

    /// Counts of entries, nodes and PM use.
    pub fn stats(&self) -> TreeStats {
        let w = self.inner.writer.lock();
        let mut s = TreeStats { entries: self.inner.entries.load(Ordering::Relaxed), ..TreeStats::default() };
        for e in &w.extents {
            s.nodes += (e.node_top - layout::FIRST_NODE) / layout::NODE_BYTES;
            s.heap_bytes += e.slot.len() - e.heap_low;
            s.pm_bytes += e.slot.len();
            s.extents += 1;
        }
        s
    }

    /// Structural check of the whole tree (see [`CheckReport`]).
    pub fn check(&self) -> Result<CheckReport> {
        let _w = self.inner.writer.lock();
        check::check(&self.inner)
    }

    /// Makes the tree durable against power loss on an ordinary-file
    /// region (msync of its extents; a no-op on DAX, tmpfs, the simulator).
    pub fn sync(&self) -> Result<()> {
        let w = self.inner.writer.lock();
        for e in &w.extents {
            self.inner.region.sync(e.slot.offset(), e.slot.len()).map_err(|e| Error::from_pm(&self.inner.path, e))?;
        }
        Ok(())
    }

    fn count_entries(&self) -> Result<u64> {
        let mut n = 0;
        for item in self.range(Bound::Unbounded, Bound::Unbounded) {
            item?;
            n += 1;
        }
        Ok(n)
    }
}

impl Inner {
    fn pm_err(&self, e: strata_pmem::PmError) -> Error {
        Error::from_pm(&self.path, e)
    }

    fn stripe(&self, off: u64) -> &AtomicU64 {
        &self.stripes[((off / layout::NODE_BYTES) as usize) % STRIPES]
    }

    /// Marks the start of a writer's change to node `off` (readers retry).
    fn begin(&self, off: u64) {
        self.stripe(off).fetch_add(1, Ordering::AcqRel);
    }

    /// Marks the end of a writer's change to node `off`.
    fn end(&self, off: u64) {
        self.stripe(off).fetch_add(1, Ordering::AcqRel);
    }

    /// A consistent copy of node `off`, decoded: copied between two equal,
    /// even reads of its version counter.
    fn snapshot(&self, off: u64) -> Result<node::Node> {
        let s = self.stripe(off);
        loop {
            let v1 = s.load(Ordering::Acquire);
            if v1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let raw = node::load(&self.region, &self.path, off)?;
            if s.load(Ordering::Acquire) == v1 {
                return raw.decode(&self.path);
            }
        }
    }

    /// The root node's offset.
    fn root(&self) -> Result<u64> {
        self.region.load_u64(self.header_off + layout::E_ROOT).map_err(|e| self.pm_err(e))
    }
}
