//! Structural check (for `strata check` and the tests): every level's
//! sibling chain, key order within and across nodes, fences, child levels,
//! and every key record and value readable.

use std::collections::HashSet;

use super::layout::*;
use super::node;
use super::Inner;
use crate::error::{Error, Result};

/// What a check found in a tree it accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CheckReport {
    /// Live entries.
    pub entries: u64,
    /// Entries whose value is a tombstone.
    pub tombstones: u64,
    /// Leaf nodes.
    pub leaves: u64,
    /// Internal nodes.
    pub internal: u64,
    /// Levels (1 = the root is a leaf).
    pub levels: u64,
    /// Nodes reachable only through a left sibling (a split whose parent
    /// update a crash cut off; lookups move right, the next writer links them).
    pub unlinked: u64,
    /// Nodes still holding entries that a split copied to their right
    /// sibling (a crash before the truncation; readers ignore them).
    pub pending_truncations: u64,
}

/// Checks the tree; the caller holds the writer lock.
pub(super) fn check(t: &Inner) -> Result<CheckReport> {
    let bad = |off: u64, why: String| Error::corruption(&*t.path, off, why);
    let read = |off: u64| node::load(&t.region, &t.path, off).and_then(|r| r.decode(&t.path));
    let key_of = |level: u16, prefix: u64, ptr: u64, skip: usize| -> Result<Vec<u8>> {
        let rec = t.entry_rec(level, ptr)?;
        let k = t.record_key(rec)?;
        if prefix_at(k, skip) != prefix {
            return Err(bad(ptr, format!("tree entry prefix {prefix:#x} does not match its key")));
        }
        Ok(k.to_vec())
    };
    let root = t.root()?;
    let top = read(root)?.level;
    let mut rep = CheckReport { levels: top as u64 + 1, ..CheckReport::default() };
    let mut first = root;
    let mut parents: Option<HashSet<u64>> = None;
    let mut seen = HashSet::new();
    for level in (0..=top).rev() {
        let mut children = HashSet::new();
        let mut off = first;
        let mut prev_last: Option<Vec<u8>> = None;
        let mut is_first = true;
        let mut next_first = 0;
        while off != 0 {
            if !seen.insert(off) {
                return Err(bad(off, "tree node reached twice".into()));
            }
            let n = read(off)?;
            if n.level != level {
                return Err(bad(off, format!("tree node at level {} in the chain of level {level}", n.level)));
            }
            if is_first != (n.low_rec == 0) {
                return Err(bad(off, "tree node's low fence does not match its place in the chain".into()));
            }
            let low = if n.low_rec == 0 { None } else { Some(key_of(0, n.low_prefix, n.low_rec, 0)?) };
            if let (Some(l), Some(p)) = (&low, &prev_last) {
                if p >= l {
                    return Err(bad(off, "tree keys out of order across siblings".into()));
                }
            }
            let fence = if n.sibling != 0 {
                let (p, r) = t.fence_of(n.sibling)?;
                Some(key_of(0, p, r, 0)?)
            } else {
                None
            };
            if let (Some(l), Some(f)) = (&low, &fence) {
                if l >= f {
                    return Err(bad(off, "tree sibling fence not above the node's".into()));
                }
            }
            if parents.as_ref().is_some_and(|p| !p.contains(&off)) {
                rep.unlinked += 1;
            }
            if is_first && level > 0 {
                next_first = n.leftmost;
            }
            if level > 0 {
                children.insert(n.leftmost);
            }
            let mut last: Option<Vec<u8>> = low.clone();
            let mut truncated = false;
            for (i, e) in n.entries.iter().enumerate() {
                let k = key_of(level, e.prefix, e.ptr, n.skip)?;
                // Every key of a node shares its first `skip` bytes with the low fence.
                if n.skip > 0 && low.as_ref().is_none_or(|l| l.len() < n.skip || k.get(..n.skip) != l.get(..n.skip)) {
                    return Err(bad(
                        off + entry_key(e.raw),
                        format!("tree entry does not share the node's {} skipped bytes", n.skip),
                    ));
                }
                if fence.as_ref().is_some_and(|f| k >= *f) {
                    truncated = true;
                    break;
                }
                match &last {
                    Some(l) if (i > 0 && k <= *l) || (i == 0 && k < *l) => {
                        return Err(bad(off + entry_key(e.raw), "tree node entries out of order".into()));
                    }
                    _ => {}
                }
                if level == 0 {
                    let v = t.record_value(e.ptr)?;
                    rep.entries += 1;
                    rep.tombstones += v.tombstone as u64;
                } else {
                    let c = read(e.ptr)?;
                    if c.level + 1 != level {
                        return Err(bad(e.ptr, format!("tree child at level {} under level {level}", c.level)));
                    }
                    children.insert(e.ptr);
                }
                last = Some(k);
            }
            if level > 0 {
                let c = read(n.leftmost)?;
                if c.level + 1 != level {
                    return Err(bad(n.leftmost, "tree leftmost child at the wrong level".into()));
                }
            }
            rep.pending_truncations += truncated as u64;
            if level == 0 {
                rep.leaves += 1;
            } else {
                rep.internal += 1;
            }
            if !n.entries.is_empty() || low.is_some() {
                prev_last = last;
            }
            is_first = false;
            off = n.sibling;
        }
        parents = Some(children);
        first = next_first;
    }
    Ok(rep)
}
