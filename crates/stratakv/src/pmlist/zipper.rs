//! Zipper compaction (ListDB §3.7 of the reference notes): the oldest L0
//! list is merged into the L1 list in place.
//!
//! 1. **Scan**, head to tail of the L0 list, writing nothing: for each L0
//!    node find its predecessors in L1 (level 0 globally, upper levels in
//!    the node's region), with fingers that only move forward, and push
//!    them on a stack.
//! 2. **Merge**, popping the stack (tail to head, descending keys): splice
//!    each node in after its level-0 predecessor with two 8-byte stores,
//!    each persisted (`node.next = pred.next`, then `pred.next = node`),
//!    then its upper levels the same way. Larger nodes that share the
//!    predecessor are already in place, so `pred.next` is the right
//!    successor, and a reader walking L1 at any moment sees a sorted list
//!    holding every key.
//!
//! What ListDB's code lacks is added here. **Equal keys**: the merge only
//! adds; it notes the older versions the new node hides from every reader
//! at or above `bound` ([`Zipped::shadowed`]), and they are unlinked later
//! ([`drop_shadowed`], upper levels first, then level 0), once no reader
//! that could be positioned on them (an iterator made while the L0 list
//! was still read) is left: a reader walking back from such a version
//! must still meet the version that hides it. **Tombstones** are linked
//! like any node, and reaped ([`reap`]) a grace period after the versions
//! they hid were unlinked.
//! **A merge cut short by a crash** is run again from the start: a node
//! whose predecessor already points at it was merged, and so was every
//! larger one (the merge goes tail to head), so the scan stops there; a
//! step cut short is redone from what its stores left.

use super::node::{Node, MAX_HEIGHT};
use super::{ListHead, ListSpace, Pos};
use crate::error::Result;
use crate::key::SeqNo;

/// What a merge did.
#[derive(Debug, Default)]
pub(crate) struct Zipped {
    /// L0 nodes linked into L1.
    pub merged: u64,
    /// Older versions that a newer one now hides from every reader at or
    /// above the bound: [`drop_shadowed`] them once no reader that could
    /// be positioned on them is left.
    pub shadowed: Vec<u64>,
    /// Tombstones linked into L1 that hide every older version from every
    /// reader at or above the bound: [`reap`] them when no iterator that
    /// existed during the merge is left.
    pub tombstones: Vec<u64>,
}

/// Whichever of `a` and `b` (positions on one level, both before the
/// target) is further along.
fn further(space: &ListSpace, a: Pos, b: Pos) -> Result<Pos> {
    Ok(match (a.node, b.node) {
        (None, _) => b,
        (_, None) => a,
        (Some(x), Some(y)) => {
            if space.cmp(&x, space.key_of(&y)?, y.trailer)? == std::cmp::Ordering::Less {
                b
            } else {
                a
            }
        }
    })
}

/// The scan phase: every L0 node not yet in L1, ascending, with its L1
/// predecessors.
fn scan(space: &ListSpace, l0: ListHead, l1: ListHead) -> Result<Vec<(Node, [Pos; MAX_HEIGHT])>> {
    let regions = l1.regions.max(1);
    let mut fingers: Vec<[Pos; MAX_HEIGHT]> = (0..regions).map(|r| [Pos::head(l1.links(r)); MAX_HEIGHT]).collect();
    let mut cur0 = Pos::head(l1.links(0));
    let mut stack = Vec::new();
    let mut at = l0.links(0);
    while let Some(n) = space.next_node(at)? {
        let key = space.key_of(&n)?;
        let mut before = |m: &Node| Ok(space.cmp(m, key, n.trailer)? == std::cmp::Ordering::Less);
        let r = l1.region_of(&n);
        let mut preds = [Pos::head(l1.links(r)); MAX_HEIGHT];
        let mut x = fingers[r][MAX_HEIGHT - 1];
        for level in (1..MAX_HEIGHT).rev() {
            x = further(space, x, fingers[r][level])?;
            x = space.advance(x, level, &mut before)?.0;
            preds[level] = x;
            fingers[r][level] = x;
        }
        let start = if x.node.is_none() { cur0 } else { further(space, x, cur0)? };
        let p0 = space.advance(start, 0, &mut before)?.0;
        preds[0] = p0;
        cur0 = p0;
        if space.next(p0.links, 0)? == n.off {
            // Merged before a crash, and so is every larger node.
            break;
        }
        at = n.links();
        stack.push((n, preds));
    }
    Ok(stack)
}

/// Unlinks `m` from the upper levels of `list` (before it leaves level 0).
pub(crate) fn unlink_upper(space: &ListSpace, list: ListHead, m: &Node) -> Result<()> {
    if m.height < 2 {
        return Ok(());
    }
    let key = space.key_of(m)?.to_vec();
    let p = space.preds(list, list.region_of(m), &key, m.trailer)?;
    for level in (1..m.height).rev() {
        let word = p[level].links + 8 * level as u64;
        if space.next(p[level].links, level)? == m.off {
            space.publish(word, space.next(m.links(), level)?)?;
        }
    }
    Ok(())
}

/// Merges list `l0` into list `l1` (see the module doc). Versions that a
/// newer version hides from every reader at or above `bound` are dropped.
pub(crate) fn zip(space: &ListSpace, l0: ListHead, l1: ListHead, bound: SeqNo) -> Result<Zipped> {
    let mut stack = scan(space, l0, l1)?;
    let mut out = Zipped::default();
    while let Some((n, preds)) = stack.pop() {
        splice(space, &n, &preds, bound, &mut out)?;
    }
    Ok(out)
}

/// Merges one node (the merge phase's step): two stores on level 0, then
/// the upper levels. Nothing is unlinked here: the older versions `n`
/// hides from every reader at or above `bound` are only noted (see the
/// module doc), and so is `n` if it is a tombstone that will then hide
/// nothing.
fn splice(space: &ListSpace, n: &Node, preds: &[Pos; MAX_HEIGHT], bound: SeqNo, out: &mut Zipped) -> Result<()> {
    let key = space.key_of(n)?;
    // The older versions of the key that follow the predecessor.
    let succ = space.next(preds[0].links, 0)?;
    let mut at = succ;
    let mut newer = n.seq();
    let mut all_hidden = true;
    while at != 0 {
        let m = space.node(at)?;
        if space.key_of(&m)? != key {
            break;
        }
        if newer <= bound {
            out.shadowed.push(m.off);
        } else {
            newer = m.seq();
            all_hidden = false;
        }
        at = space.next(m.links(), 0)?;
    }
    if space.next(n.links(), 0)? != succ {
        space.publish(n.links(), succ)?;
    }
    space.publish(preds[0].links, n.off)?;
    if n.is_delete() && n.seq() <= bound && all_hidden {
        out.tombstones.push(n.off);
    }
    out.merged += 1;
    for (level, p) in preds.iter().enumerate().take(n.height).skip(1) {
        let at = 8 * level as u64;
        space.publish(n.links() + at, space.next(p.links, level)?)?;
        space.publish(p.links + at, n.off)?;
    }
    Ok(())
}

/// Unlinks node `off` from `l1` if it is still linked there (upper levels
/// first, then level 0); returns whether it was.
fn unlink(space: &ListSpace, l1: ListHead, off: u64, hides_nothing: bool) -> Result<bool> {
    let t = space.node(off)?;
    let key = space.key_of(&t)?.to_vec();
    let preds = space.preds(l1, l1.region_of(&t), &key, t.trailer)?;
    if space.next(preds[0].links, 0)? != off {
        return Ok(false);
    }
    let after = space.next(t.links(), 0)?;
    if hides_nothing && after != 0 && space.key_of(&space.node(after)?)? == key.as_slice() {
        return Ok(false);
    }
    unlink_upper(space, l1, &t)?;
    space.publish(preds[0].links, after)?;
    Ok(true)
}

/// Unlinks from `l1` the older versions a merge noted as hidden
/// ([`Zipped::shadowed`]) that are still linked. Call it only when no
/// reader that could see them is left. Returns the nodes unlinked.
pub(crate) fn drop_shadowed(space: &ListSpace, l1: ListHead, shadowed: &[u64]) -> Result<Vec<u64>> {
    unlink_each(space, l1, shadowed, false)
}

/// The nodes of `offs` that [`unlink`] unlinked.
fn unlink_each(space: &ListSpace, l1: ListHead, offs: &[u64], hides_nothing: bool) -> Result<Vec<u64>> {
    let mut dead = Vec::new();
    for &off in offs {
        if unlink(space, l1, off, hides_nothing)? {
            dead.push(off);
        }
    }
    Ok(dead)
}

/// Every node of `l1` that a newer version of its key hides from every
/// reader (at open, when no snapshot exists).
pub(crate) fn all_shadowed(space: &ListSpace, l1: ListHead) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    let mut prev: Vec<u8> = Vec::new();
    let mut first = true;
    space.walk(l1, |n| {
        let key = space.key_of(n)?;
        if !first && key == prev.as_slice() {
            out.push(n.off);
        } else {
            prev.clear();
            prev.extend_from_slice(key);
        }
        first = false;
        Ok(())
    })?;
    Ok(out)
}

/// Unlinks from `l1` each tombstone in `tombstones` that is still linked
/// and still hides nothing (no older version follows it; a newer one would
/// have unlinked it already). Call it only when no reader that could have
/// met a version it hid is left. Returns the nodes unlinked.
pub(crate) fn reap(space: &ListSpace, l1: ListHead, tombstones: &[u64]) -> Result<Vec<u64>> {
    unlink_each(space, l1, tombstones, true)
}
