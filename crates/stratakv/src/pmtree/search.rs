//! Descent and lookup: key comparison by prefix, then full key on a tie;
//! moving right along B-link siblings wherever a key is at or past the
//! sibling's low fence (a split not yet reflected in the parent).

use std::cmp::Ordering;

use super::layout::*;
use super::node::Node;
use super::value::TreeValue;
use super::Inner;
use crate::error::{Error, Result};

/// What a descent looks for.
#[derive(Clone, Copy, Debug)]
pub(super) enum Target<'a> {
    /// The leaf holding `key` (keys >= a fence go right of it).
    AtLeast(&'a [u8]),
    /// The leaf holding the largest keys below `key` (only keys > a fence go right).
    #[allow(dead_code)] // only descending ranges (`PmTree::range_rev`) use it
    Below(&'a [u8]),
    /// The rightmost leaf.
    #[allow(dead_code)] // as `Below`
    Max,
}

/// Where a descent ended.
pub(super) struct Descent {
    /// The leaf, as copied.
    pub leaf: Node,
    /// The first move right the descent made: (level, node moved to).
    pub moved: Option<(u16, u64)>,
}

impl Inner {
    /// Compares `key` with the key (prefix, full key behind `rec`).
    pub(super) fn cmp_key(&self, key: &[u8], kp: u64, prefix: u64, rec: u64) -> Result<Ordering> {
        match kp.cmp(&prefix) {
            Ordering::Equal => Ok(key.cmp(self.record_key(rec)?)),
            o => Ok(o),
        }
    }

    /// The record holding entry `e`'s full key: the entry's own in a leaf,
    /// the child's low fence in an internal node.
    pub(super) fn entry_rec(&self, level: u16, ptr: u64) -> Result<u64> {
        if level == 0 {
            return Ok(ptr);
        }
        let rec = self.region.load_u64(ptr + N_LOW_REC).map_err(|e| self.pm_err(e))?;
        if rec == 0 {
            return Err(Error::corruption(&*self.path, ptr, "tree child named by a separator has no low fence"));
        }
        Ok(rec)
    }

    /// Whether `t` lies at or past (for `Below`: strictly past) the fence
    /// (prefix, rec) of a right sibling.
    fn past(&self, t: Target<'_>, prefix: u64, rec: u64) -> Result<bool> {
        if rec == 0 {
            return Err(Error::corruption(&*self.path, rec, "tree sibling without a low fence"));
        }
        Ok(match t {
            Target::Max => true,
            Target::AtLeast(k) => self.cmp_key(k, prefix_of(k), prefix, rec)? != Ordering::Less,
            Target::Below(k) => self.cmp_key(k, prefix_of(k), prefix, rec)? == Ordering::Greater,
        })
    }

    /// Number of `node`'s entries whose keys are before `t` (at or before
    /// for `AtLeast`, strictly before for `Below`): the routing position.
    pub(super) fn position(&self, node: &Node, t: Target<'_>, upto_equal: bool) -> Result<usize> {
        let (mut lo, mut hi) = (0usize, node.entries.len());
        // A target routed to this node shares its first `skip` bytes.
        let kp = match t {
            Target::AtLeast(k) | Target::Below(k) => prefix_at(k, node.skip),
            Target::Max => 0,
        };
        while lo < hi {
            let mid = (lo + hi) / 2;
            let e = node.entries[mid];
            let before = match t {
                Target::Max => true,
                Target::AtLeast(k) | Target::Below(k) => {
                    let o = match kp.cmp(&e.prefix) {
                        Ordering::Equal => k.cmp(self.record_key(self.entry_rec(node.level, e.ptr)?)?),
                        o => o,
                    };
                    o == Ordering::Greater || (upto_equal && o == Ordering::Equal)
                }
            };
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The fence (prefix, record) of the node at `off`.
    pub(super) fn fence_of(&self, off: u64) -> Result<(u64, u64)> {
        let w = |at: u64| self.region.load_u64(off + at).map_err(|e| self.pm_err(e));
        Ok((w(N_LOW_PREFIX)?, w(N_LOW_REC)?))
    }

    /// Descends from the root to the node for `t` at level `stop` (0: the
    /// leaf). `read` copies a node (a seqlock snapshot for readers; a plain
    /// read for the writer).
    pub(super) fn descend(
        &self,
        t: Target<'_>,
        stop: u16,
        read: impl Fn(&Inner, u64) -> Result<Node>,
    ) -> Result<Descent> {
        let mut off = self.root()?;
        let mut path = Vec::new();
        let mut moved = None;
        let mut expect: Option<u16> = None;
        // The parent's next child after the one taken: when a node's sibling
        // is that child, the parent's separator (the sibling's immutable low
        // fence) already showed the target lies left of it, so the fence
        // need not be read (two PM loads saved per level).
        let mut bound: Option<u64> = None;
        // A bound on hops, so a corrupted cycle is an error, not a hang.
        let mut hops = 0u64;
        loop {
            let mut node = read(self, off)?;
            while node.sibling != 0 && bound != Some(node.sibling) {
                let (p, r) = self.fence_of(node.sibling)?;
                if !self.past(t, p, r)? {
                    break;
                }
                off = node.sibling;
                node = read(self, off)?;
                if moved.is_none() {
                    moved = Some((node.level, off));
                }
                hops += 1;
                if hops > 1 << 40 {
                    return Err(Error::corruption(&*self.path, off, "tree sibling chain does not end"));
                }
            }
            if expect.is_some_and(|l| l != node.level) {
                return Err(Error::corruption(
                    &*self.path,
                    off,
                    format!("tree node at level {} not {expect:?}", node.level),
                ));
            }
            path.push(off);
            if node.level == stop {
                return Ok(Descent { leaf: node, moved });
            }
            if path.len() > 64 || node.level < stop {
                return Err(Error::corruption(&*self.path, off, "tree deeper than 64 levels"));
            }
            let upto_equal = !matches!(t, Target::Below(_));
            let pos = self.position(&node, t, upto_equal)?;
            off = if pos == 0 { node.leftmost } else { node.entries[pos - 1].ptr };
            bound = node.entries.get(pos).map(|e| e.ptr);
            expect = Some(node.level - 1);
        }
    }

    /// Index of `key`'s entry in `leaf`, if present.
    pub(super) fn find_in_leaf(&self, leaf: &Node, key: &[u8]) -> Result<Option<usize>> {
        let pos = self.position(leaf, Target::AtLeast(key), false)?;
        if let Some(e) = leaf.entries.get(pos) {
            if e.prefix == prefix_at(key, leaf.skip) && self.record_key(e.ptr)? == key {
                return Ok(Some(pos));
            }
        }
        Ok(None)
    }

    /// Lock-free lookup.
    pub(super) fn get(&self, key: &[u8]) -> Result<Option<TreeValue>> {
        let d = self.descend(Target::AtLeast(key), 0, |t, off| t.snapshot(off))?;
        match self.find_in_leaf(&d.leaf, key)? {
            Some(i) => self.record_value(d.leaf.entries[i].ptr).map(Some),
            None => Ok(None),
        }
    }
}

/// Lock-free lookups in ascending key order (a compaction's liveness test)
/// that keep a copy of the last leaf read and answer from it while keys
/// stay below its right sibling's fence.
///
/// The copy may go stale while writers work. That is safe for a caller
/// who asks "does the tree still point this key at one of these tables"
/// about tables no other writer re-points (a compaction's own inputs):
/// other writers only move entries away from them (a flush's newer
/// version), so a stale "yes" is re-checked when re-pointing, and a
/// stale "no" was already final when the copy was taken.
pub(crate) struct SortedGets<'a> {
    tree: &'a Inner,
    leaf: Option<Node>,
    /// The fence of the copy's right sibling (None: the last leaf).
    high: Option<Vec<u8>>,
    last: Vec<u8>,
}

impl<'a> SortedGets<'a> {
    pub(super) fn new(tree: &'a Inner) -> SortedGets<'a> {
        SortedGets { tree, leaf: None, high: None, last: Vec::new() }
    }

    /// The value of `key` (see the type's note on staleness).
    pub fn get(&mut self, key: &[u8]) -> Result<Option<TreeValue>> {
        let hit = self.leaf.is_some() && key > self.last.as_slice() && self.high.as_deref().is_none_or(|h| key < h);
        if !hit {
            let d = self.tree.descend(Target::AtLeast(key), 0, |t, off| t.snapshot(off))?;
            self.high = if d.leaf.sibling != 0 {
                let (_, rec) = self.tree.fence_of(d.leaf.sibling)?;
                Some(self.tree.record_key(rec)?.to_vec())
            } else {
                None
            };
            self.leaf = Some(d.leaf);
        }
        self.last.clear();
        self.last.extend_from_slice(key);
        let Some(leaf) = &self.leaf else { return Ok(None) };
        match self.tree.find_in_leaf(leaf, key)? {
            Some(i) => self.tree.record_value(leaf.entries[i].ptr).map(Some),
            None => Ok(None),
        }
    }
}
