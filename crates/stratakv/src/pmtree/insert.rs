//! The writer: FAST shifts inside a node, FAIR splits, parent links and
//! root growth, value updates and removals.
//!
//! Every store that a later store depends on is persisted before that
//! later store is made (`Writer::pstore`), so a crash image holds a prefix
//! of the steps under both crash models of the simulator (whole cache
//! lines or single 8-byte words surviving). Each prefix decodes (FAST
//! rules, `node`) to the node before or after the change.

use std::cmp::Ordering;
use std::sync::atomic::Ordering as AtomicOrdering;

use super::alloc::Writer;
use super::layout::*;
use super::node::{self, Node, NodeImage};
use super::record::record_image;
use super::search::{Descent, Target};
use super::value::TreeValue;
use super::Inner;
use crate::error::{Error, Result};

impl Inner {
    /// The writer's copy of a node (no other writer can change it).
    fn read_node(&self, off: u64) -> Result<Node> {
        node::load(&self.region, &self.path, off)?.decode(&self.path)
    }

    /// Compares the keys of two records.
    fn cmp_recs(&self, a: u64, b: u64) -> Result<Ordering> {
        Ok(self.record_key(a)?.cmp(self.record_key(b)?))
    }

    /// Descends to the leaf for `key`, first linking into its parent any
    /// node the descent had to reach by moving right (a split whose parent
    /// update a crash cut off). Each fix adds one link, so this ends.
    fn writer_descend(&self, w: &mut Writer, key: &[u8]) -> Result<Descent> {
        loop {
            let d = self.descend(Target::AtLeast(key), 0, |t, off| t.read_node(off))?;
            match d.moved {
                None => return Ok(d),
                Some((level, node)) => self.link_parent(w, level, node)?,
            }
        }
    }

    /// Brings node `off` back to the clean layout the shifts assume (live
    /// entries in raw slots `0..n`, then a 0 pointer), finishing what a
    /// crash interrupted: drops the copy of entries a split moved to the
    /// right sibling, and the slots left mid-shift. Each step keeps the
    /// node's content.
    fn normalize(&self, w: &mut Writer, off: u64) -> Result<Node> {
        loop {
            let n = self.read_node(off)?;
            if n.sibling != 0 {
                let (_, fence) = self.fence_of(n.sibling)?;
                let mut cut = None;
                for e in n.entries.iter().rev() {
                    if self.cmp_recs(self.entry_rec(n.level, e.ptr)?, fence)? == Ordering::Less {
                        break;
                    }
                    cut = Some(e.raw);
                }
                if let Some(raw) = cut {
                    self.begin(off);
                    let r = w.pstore(&self.path, off + entry_ptr(raw), 0);
                    self.end(off);
                    r?;
                    continue;
                }
            }
            if n.is_clean() {
                return Ok(n);
            }
            let live: Vec<usize> = n.entries.iter().map(|e| e.raw).collect();
            let Some(g) = (0..n.raw_len).rev().find(|i| !live.contains(i)) else {
                return Err(Error::corruption(&*self.path, off, "tree node layout cannot be cleaned"));
            };
            self.begin(off);
            let r = self.raw_remove(w, off, n.raw_len, g);
            self.end(off);
            r?;
        }
    }

    /// Removes raw slot `d` of the `r` raw slots of node `off`, shifting
    /// the slots after it left. The first store (SKIP) is the commit
    /// point of a removal; every later state reads the same.
    fn raw_remove(&self, w: &mut Writer, off: u64, r: usize, d: usize) -> Result<()> {
        if d + 1 == r {
            return w.pstore(&self.path, off + entry_ptr(d), 0);
        }
        let raw = node::load(&self.region, &self.path, off)?;
        let word = |at: u64| raw.words[(at / 8) as usize];
        w.pstore(&self.path, off + entry_ptr(d), SKIP)?;
        for i in d..r - 1 {
            // Key first: slot i is still skipped (SKIP, or a copy of slot
            // i-1); its pointer store then makes it the copy of slot i+1,
            // and slot i+1 becomes the skipped second copy.
            w.pstore(&self.path, off + entry_key(i), word(entry_key(i + 1)))?;
            w.pstore(&self.path, off + entry_ptr(i), word(entry_ptr(i + 1)))?;
        }
        w.pstore(&self.path, off + entry_ptr(r - 1), 0)
    }

    /// Inserts (prefix, ptr) at position `pos` of the clean, not full node `n`.
    fn insert_shift(&self, w: &mut Writer, n: &Node, pos: usize, prefix: u64, ptr: u64) -> Result<()> {
        let cnt = n.entries.len();
        let off = n.off;
        let raw = node::load(&self.region, &self.path, off)?;
        let word = |at: u64| raw.words[(at / 8) as usize];
        // The terminator moves one slot right; a slot past it may hold a
        // stale pointer from a truncation, so clear it first.
        if cnt + 1 < CAP && word(entry_ptr(cnt + 1)) != 0 {
            w.pstore(&self.path, off + entry_ptr(cnt + 1), 0)?;
        }
        for i in (pos..cnt).rev() {
            // Pointer first: slot i+1 becomes a copy of slot i's pointer,
            // which readers skip; then its key; slot i is then the copy.
            w.pstore(&self.path, off + entry_ptr(i + 1), word(entry_ptr(i)))?;
            w.pstore(&self.path, off + entry_key(i + 1), word(entry_key(i)))?;
        }
        if pos < cnt {
            // Slot pos and pos+1 hold the same entry; hide slot pos while
            // its key changes (the key store alone would rename the entry).
            w.pstore(&self.path, off + entry_ptr(pos), SKIP)?;
        }
        w.pstore(&self.path, off + entry_key(pos), prefix)?;
        // The commit point: the new entry appears with one 8-byte store.
        w.pstore(&self.path, off + entry_ptr(pos), ptr)
    }

    /// Splits the clean, full node `n`: the upper half goes to a new right
    /// sibling, written and persisted whole, then linked from `n` with one
    /// store, then `n` is truncated with one store. Returns the sibling.
    fn split(&self, w: &mut Writer, n: &Node) -> Result<u64> {
        let m = CAP / 2;
        let e = &n.entries;
        let (low_rec, leftmost, first) =
            if n.level == 0 { (e[m].ptr, 0, m) } else { (self.entry_rec(n.level, e[m].ptr)?, e[m].ptr, m + 1) };
        let low_key = self.record_key(low_rec)?;
        // The new node's keys lie in [low, the old sibling's fence): they
        // share the fences' common prefix, which its entry prefixes skip.
        // The rightmost node of a level has no upper fence and skips nothing.
        let skip = if n.sibling != 0 {
            let (_, high_rec) = self.fence_of(n.sibling)?;
            common_prefix(low_key, self.record_key(high_rec)?)
        } else {
            0
        };
        let mut img = NodeImage::new(n.level, (prefix_of(low_key), low_rec), n.sibling, leftmost, skip);
        for (i, x) in e[first..].iter().enumerate() {
            let p = if skip == n.skip {
                x.prefix
            } else {
                prefix_at(self.record_key(self.entry_rec(n.level, x.ptr)?)?, skip)
            };
            img.set(i, p, x.ptr);
        }
        let right = w.alloc_node(&self.region, &self.path, &img.bytes())?;
        self.begin(n.off);
        // Link before truncating: in between, the moved entries are in both
        // nodes (pointing at the same records), never in neither.
        let r =
            w.pstore(&self.path, n.off + N_SIBLING, right).and_then(|_| w.pstore(&self.path, n.off + entry_ptr(m), 0));
        self.end(n.off);
        r?;
        Ok(right)
    }

    /// Inserts the entry (key, ptr) into the node for `key` at `level`,
    /// starting at `off` and moving right as needed; splits when full.
    /// Returns whether the node it went into is `off` unsplit.
    fn insert_at(&self, w: &mut Writer, level: u16, mut off: u64, key: &[u8], ptr: u64) -> Result<bool> {
        let first = off;
        let mut split = false;
        let kp = prefix_of(key);
        loop {
            let n = self.normalize(w, off)?;
            if n.level != level {
                return Err(Error::corruption(&*self.path, off, format!("tree node not at level {level}")));
            }
            if n.sibling != 0 {
                let (p, r) = self.fence_of(n.sibling)?;
                if self.cmp_key(key, kp, p, r)? != Ordering::Less {
                    off = n.sibling;
                    continue;
                }
            }
            if n.entries.len() < CAP {
                let pos = self.position(&n, Target::AtLeast(key), false)?;
                self.begin(off);
                let r = self.insert_shift(w, &n, pos, prefix_at(key, n.skip), ptr);
                self.end(off);
                return r.map(|_| off == first && !split);
            }
            let right = self.split(w, &n)?;
            split = true;
            self.link_parent(w, level, right)?;
            // Loop: the entry goes into `n` or, past the fence, its sibling.
        }
    }

    /// Adds the separator of node `right` (at `level`) to its parent level,
    /// or grows a new root over the current root and `right`.
    fn link_parent(&self, w: &mut Writer, level: u16, right: u64) -> Result<()> {
        let (prefix, rec) = self.fence_of(right)?;
        let key = self.record_key(rec)?.to_vec();
        let root = self.root()?;
        let root_level = self.read_node(root)?.level;
        if root_level > level {
            let d = self.descend(Target::AtLeast(&key), level + 1, |t, off| t.read_node(off))?;
            return self.insert_at(w, level + 1, d.leaf.off, &key, right).map(|_| ());
        }
        let mut img = NodeImage::new(level + 1, (0, 0), 0, root, 0);
        img.set(0, prefix, right);
        let new_root = w.alloc_node(&self.region, &self.path, &img.bytes())?;
        // The new root is durable (alloc_node) before the root word names it.
        w.pstore(&self.path, self.header_off + E_ROOT, new_root)
    }

    /// Writes `v` into the record at `rec`: the unused slot, persisted,
    /// then the selector flipped with one 8-byte store.
    fn write_value(&self, w: &mut Writer, rec: u64, v: [u64; 2]) -> Result<()> {
        let sel = self.region.load_u64(rec + R_SELECT).map_err(|e| self.pm_err(e))?;
        let next = (sel & 1) ^ 1;
        let at = rec + R_SLOTS + 16 * next;
        w.store(&self.path, at, v[0])?;
        w.store(&self.path, at + 8, v[1])?;
        w.persist_range(&self.path, at, 16)?;
        w.pstore(&self.path, rec + R_SELECT, ((sel >> 1).wrapping_add(1) << 1) | next)
    }
}

/// The leaf the last update of a [`Batch`] used, and the key range it
/// covers as far as the batch knows.
struct Finger {
    leaf: u64,
    /// Keys at or past this (its right sibling's low fence) are not its.
    high: Option<Vec<u8>>,
    /// The last key updated there (the leaf holds keys at or above it).
    last: Vec<u8>,
}

/// Updates in ascending key order under one hold of the writer lock: a
/// key that falls in the leaf of the one before is found there without a
/// descent from the root (flushes and compactions index tables in key
/// order). Readers are not held up; other writers wait until it drops.
pub(crate) struct Batch<'a> {
    tree: &'a Inner,
    w: parking_lot::MutexGuard<'a, Writer>,
    finger: Option<Finger>,
}

impl<'a> Batch<'a> {
    pub(super) fn new(tree: &'a Inner) -> Batch<'a> {
        Batch { tree, w: tree.writer.lock(), finger: None }
    }

    /// Lets a waiting writer in between two updates (the finger is
    /// dropped: that writer may split its leaf).
    pub fn pause(&mut self) {
        self.finger = None;
        parking_lot::MutexGuard::unlocked_fair(&mut self.w, || {});
    }

    /// The leaf for `key`: the finger's, if `key` lies in its range, else
    /// by a descent (which links any sibling a crash left out of its parent).
    fn leaf_for(&mut self, key: &[u8]) -> Result<Node> {
        if let Some(f) = &self.finger {
            if key > f.last.as_slice() && f.high.as_deref().is_none_or(|h| key < h) {
                let n = self.tree.read_node(f.leaf)?;
                // The batch is the only writer, so the leaf's sibling (and
                // with it the range) changes only by the batch's own splits,
                // which drop the finger; checked anyway.
                if n.sibling == 0 || f.high.is_some() {
                    return Ok(n);
                }
            }
        }
        let d = self.tree.writer_descend(&mut self.w, key)?;
        let high = if d.leaf.sibling != 0 {
            let (_, rec) = self.tree.fence_of(d.leaf.sibling)?;
            Some(self.tree.record_key(rec)?.to_vec())
        } else {
            None
        };
        self.finger = Some(Finger { leaf: d.leaf.off, high, last: Vec::new() });
        Ok(d.leaf)
    }

    /// Looks `key` up and lets `decide` choose its new value from the old
    /// one (None: leave it as it is). Returns the old value. Keys must come
    /// in ascending order for the finger to help (any order is correct).
    pub fn update(
        &mut self,
        key: &[u8],
        decide: impl FnOnce(Option<TreeValue>) -> Option<TreeValue>,
    ) -> Result<Option<TreeValue>> {
        if key.len() > crate::key::MAX_KEY_LEN {
            return Err(Error::InvalidArgument(format!("key of {} bytes", key.len())));
        }
        let t = self.tree;
        let leaf = self.leaf_for(key)?;
        let found = t.find_in_leaf(&leaf, key)?.map(|i| leaf.entries[i].ptr);
        let old = match found {
            Some(rec) => Some(t.record_value(rec)?),
            None => None,
        };
        if let Some(v) = decide(old) {
            let enc = v.encode()?;
            match found {
                Some(rec) => t.write_value(&mut self.w, rec, enc)?,
                None => {
                    // The record is durable before the entry naming it is published.
                    let rec = self.w.alloc_record(&t.region, &t.path, &record_image(key, enc))?;
                    if !t.insert_at(&mut self.w, 0, leaf.off, key, rec)? {
                        self.finger = None;
                    }
                    t.entries.fetch_add(1, AtomicOrdering::Relaxed);
                }
            }
        }
        if let Some(f) = &mut self.finger {
            f.last.clear();
            f.last.extend_from_slice(key);
        }
        Ok(old)
    }

    /// Drops `key`'s entry if it points at `file`; returns whether it did.
    pub fn remove_if(&mut self, key: &[u8], file: u64) -> Result<bool> {
        let t = self.tree;
        let leaf = self.leaf_for(key)?;
        let n = t.normalize(&mut self.w, leaf.off)?;
        let removed = match t.find_in_leaf(&n, key)? {
            Some(i) if t.record_value(n.entries[i].ptr)?.file == file => {
                let e = n.entries[i];
                t.begin(n.off);
                let r = t.raw_remove(&mut self.w, n.off, n.raw_len, e.raw);
                t.end(n.off);
                r?;
                t.entries.fetch_sub(1, AtomicOrdering::Relaxed);
                true
            }
            _ => false,
        };
        if let Some(f) = &mut self.finger {
            f.last.clear();
            f.last.extend_from_slice(key);
        }
        Ok(removed)
    }
}
