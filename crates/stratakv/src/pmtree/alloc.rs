//! Node and key-record space: a chain of tree extents, each carved by two
//! bump pointers (nodes upwards from `FIRST_NODE`, key records downwards
//! from the end), persisted after the object is written and before it is
//! linked. A crash can leak the space of an object written but never
//! linked; nothing linked is ever handed out twice. No log is needed.

use std::collections::HashSet;
use std::path::Path;

use strata_pmem::{ExtentHead, Region, Slot};

use super::layout::*;
use crate::error::{Error, Result};

/// Smallest tree extent: a record of the longest key (64 KiB) fits, with
/// the header and a node.
const MIN_EXTENT_BYTES: u64 = 128 << 10;
/// Largest extent asked for (a region's slot size may round it up).
const MAX_EXTENT_BYTES: u64 = 1 << 20;

/// Bytes of a new tree extent in `region`: a sixteenth of a small region
/// (so the tree can open in the small regions tests and stress runs
/// use), 1 MiB otherwise.
fn extent_bytes(region: &Region) -> u64 {
    (region.len() / 16).clamp(MIN_EXTENT_BYTES, MAX_EXTENT_BYTES)
}

/// One extent of the tree, with the writer's handle on its bytes.
pub(super) struct TreeExtent {
    /// Its head word.
    pub head: ExtentHead,
    /// Write access to the whole extent.
    pub slot: Slot,
    /// End of the node area (relative), as published.
    pub node_top: u64,
    /// Start of the key-record area (relative), as published.
    pub heap_low: u64,
}

/// The writer's state: the extents, in chain order.
pub(super) struct Writer {
    /// Extents in chain order (the first holds the root word).
    pub extents: Vec<TreeExtent>,
}

fn pm(path: &Path) -> impl Fn(strata_pmem::PmError) -> Error + '_ {
    move |e| Error::from_pm(path, e)
}

impl Writer {
    /// Allocates and initialises a new extent (not yet linked into the chain).
    fn new_extent(region: &Region, path: &Path, number: u64) -> Result<TreeExtent> {
        let slots = extent_bytes(region).div_ceil(region.slot_bytes()).max(1);
        let mut w = region.allocate(EXTENT_KIND_TREE, slots, number).map_err(pm(path))?;
        let len = w.remaining();
        let mut slot = w.reserve(len).ok_or_else(|| Error::Pm("tree extent smaller than asked".into()))?;
        let mut hdr = [0u64; 8];
        hdr[(E_MAGIC / 8) as usize] = EXTENT_MAGIC;
        hdr[(E_NUMBER / 8) as usize] = number;
        hdr[(E_NODE_TOP / 8) as usize] = FIRST_NODE;
        hdr[(E_HEAP_LOW / 8) as usize] = len;
        hdr[(E_VERSION / 8) as usize] = TREE_VERSION;
        let bytes: Vec<u8> = hdr.iter().flat_map(|w| w.to_le_bytes()).collect();
        slot.write(0, &bytes).map_err(pm(path))?;
        slot.persist(0, 64).map_err(pm(path))?;
        Ok(TreeExtent { head: w.extent().head(), slot, node_top: FIRST_NODE, heap_low: len })
    }

    /// A writer over one fresh extent (the first of a new tree).
    pub fn create(region: &Region, path: &Path) -> Result<Writer> {
        Ok(Writer { extents: vec![Self::new_extent(region, path, 1)?] })
    }

    /// Adopts the chain starting at head slot `anchor` (no rebuild: each
    /// extent's bump pointers say what is in use).
    pub fn open(region: &Region, path: &Path, anchor: u64, heads: &[ExtentHead]) -> Result<Writer> {
        let mut extents: Vec<TreeExtent> = Vec::new();
        let mut next = Some(anchor);
        let mut seen = HashSet::new();
        while let Some(slot_no) = next {
            if !seen.insert(slot_no) {
                return Err(Error::corruption(path, 0, format!("tree extent chain loops at slot {slot_no}")));
            }
            let head = heads
                .iter()
                .find(|h| h.slot == slot_no && h.kind == EXTENT_KIND_TREE)
                .copied()
                .ok_or_else(|| Error::corruption(path, 0, format!("no tree extent at slot {slot_no}")))?;
            let mut w = region.adopt_writer(head).map_err(pm(path))?;
            let len = w.remaining();
            let slot = w.reserve(len).ok_or_else(|| Error::Pm("tree extent smaller than its head says".into()))?;
            let base = slot.offset();
            let word = |at: u64| region.load_u64(base + at).map_err(pm(path));
            let number = extents.len() as u64 + 1;
            if word(E_MAGIC)? != EXTENT_MAGIC || word(E_VERSION)? != TREE_VERSION || word(E_NUMBER)? != number {
                return Err(Error::corruption(
                    path,
                    base,
                    format!("not tree extent number {number} of a known version"),
                ));
            }
            let (node_top, heap_low) = (word(E_NODE_TOP)?, word(E_HEAP_LOW)?);
            if node_top < FIRST_NODE || node_top % NODE_BYTES != 0 || heap_low > len || node_top > heap_low {
                return Err(Error::corruption(
                    path,
                    base + E_NODE_TOP,
                    format!("tree extent bump pointers {node_top}/{heap_low} do not fit {len} bytes"),
                ));
            }
            let link = word(E_NEXT)?;
            next = link.checked_sub(1);
            extents.push(TreeExtent { head, slot, node_top, heap_low });
        }
        Ok(Writer { extents })
    }

    /// Region offset of the first extent (its header holds the root word).
    pub fn header_off(&self) -> u64 {
        self.extents[0].slot.offset()
    }

    fn extent_of(&mut self, off: u64, path: &Path) -> Result<&mut TreeExtent> {
        self.extents
            .iter_mut()
            .find(|e| off >= e.slot.offset() && off + 8 <= e.slot.offset() + e.slot.len())
            .ok_or_else(|| Error::corruption(path, off, "tree pointer outside the tree's extents"))
    }

    /// Stores `value` into the word at region offset `off` of a tree
    /// extent and persists it before returning: every ordered step of a
    /// shift is durable before the next, so a crash image holds a prefix
    /// of the steps even where single 8-byte words survive independently.
    pub fn pstore(&mut self, path: &Path, off: u64, value: u64) -> Result<()> {
        let e = self.extent_of(off, path)?;
        let at = off - e.slot.offset();
        e.slot.store_u64(at, value).map_err(pm(path))?;
        e.slot.persist(at, 8).map_err(pm(path))
    }

    /// Stores without persisting (for words a later `persist_range` covers).
    pub fn store(&mut self, path: &Path, off: u64, value: u64) -> Result<()> {
        let e = self.extent_of(off, path)?;
        let at = off - e.slot.offset();
        e.slot.store_u64(at, value).map_err(pm(path))
    }

    /// Persists `[off, off+len)`.
    pub fn persist_range(&mut self, path: &Path, off: u64, len: u64) -> Result<()> {
        let e = self.extent_of(off, path)?;
        let at = off - e.slot.offset();
        e.slot.persist(at, len).map_err(pm(path))
    }

    /// Makes room for `bytes` more in the last extent, chaining a new
    /// extent if they do not fit: the new extent is initialised and
    /// persisted, then linked with one 8-byte store.
    fn room(&mut self, region: &Region, path: &Path, bytes: u64) -> Result<()> {
        let fits = |e: &TreeExtent| e.node_top + bytes <= e.heap_low;
        if self.extents.last().is_some_and(fits) {
            return Ok(());
        }
        let number = self.extents.len() as u64 + 1;
        let fresh = Self::new_extent(region, path, number)?;
        if !fits(&fresh) {
            return Err(Error::InvalidArgument(format!("tree object of {bytes} bytes larger than an extent")));
        }
        let link = fresh.head.slot + 1;
        let Some(last) = self.extents.last_mut() else {
            return Err(Error::Pm("tree has no extents".into()));
        };
        last.slot.publish_u64(E_NEXT, link).map_err(pm(path))?;
        self.extents.push(fresh);
        Ok(())
    }

    /// Writes a new node and persists it and the node bump pointer; the
    /// caller links it afterwards. Returns its region offset.
    pub fn alloc_node(&mut self, region: &Region, path: &Path, bytes: &[u8]) -> Result<u64> {
        self.room(region, path, NODE_BYTES)?;
        let Some(e) = self.extents.last_mut() else {
            return Err(Error::Pm("tree has no extents".into()));
        };
        let at = e.node_top;
        e.slot.write(at, bytes).map_err(pm(path))?;
        e.slot.flush(at, NODE_BYTES).map_err(pm(path))?;
        e.node_top += NODE_BYTES;
        // The bump word and the node are made durable by one fence; their
        // order does not matter (a durable bump over a lost node only
        // leaks it), only that both are durable before the link.
        e.slot.store_u64(E_NODE_TOP, e.node_top).map_err(pm(path))?;
        e.slot.persist(E_NODE_TOP, 8).map_err(pm(path))?;
        Ok(e.slot.offset() + at)
    }

    /// Writes a new key record, persisted with the heap bump pointer, like
    /// `alloc_node`. Returns its region offset.
    pub fn alloc_record(&mut self, region: &Region, path: &Path, bytes: &[u8]) -> Result<u64> {
        let len = (bytes.len() as u64).div_ceil(8) * 8;
        self.room(region, path, len)?;
        let Some(e) = self.extents.last_mut() else {
            return Err(Error::Pm("tree has no extents".into()));
        };
        let at = e.heap_low - len;
        e.slot.write(at, bytes).map_err(pm(path))?;
        e.slot.flush(at, len).map_err(pm(path))?;
        e.heap_low = at;
        e.slot.store_u64(E_HEAP_LOW, e.heap_low).map_err(pm(path))?;
        e.slot.persist(E_HEAP_LOW, 8).map_err(pm(path))?;
        Ok(e.slot.offset() + at)
    }
}
