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
//! What ListDB's code lacks is added here. **Equal keys**: the older
//! versions that follow the new node are kept only while a snapshot at or
//! above `bound` can see them; the rest are unlinked (upper levels first,
//! then level 0 by re-pointing the last kept version past them, one store
//! for the whole run). **Tombstones** are linked like any node: an
//! iterator that met an older version before it was unlinked must still
//! meet the tombstone that hid it. A tombstone no reader needs is reaped
//! later ([`reap`]), once every iterator that could have met the versions
//! it hid is gone.
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
    /// Nodes no longer in any list (older versions unlinked from L1), for
    /// the owners of their extents.
    pub dead: Vec<u64>,
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
            x = space.advance(x, level, &mut before)?;
            preds[level] = x;
            fingers[r][level] = x;
        }
        let start = if x.node.is_none() { cur0 } else { further(space, x, cur0)? };
        let p0 = space.advance(start, 0, &mut before)?;
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
        splice(space, [l0, l1], &n, &preds, bound, &mut out)?;
    }
    Ok(out)
}

/// Merges one node (the merge phase's step). A node dropped is unlinked
/// from the upper levels of both lists: a reader of the L0 list (an older
/// version's) searches its upper levels too, and must not land on a node
/// its level 0 no longer reaches.
fn splice(
    space: &ListSpace,
    [l0, l1]: [ListHead; 2],
    n: &Node,
    preds: &[Pos; MAX_HEIGHT],
    bound: SeqNo,
    out: &mut Zipped,
) -> Result<()> {
    let key = space.key_of(n)?;
    // The older versions of the key that follow the predecessor.
    let mut run = Vec::new();
    let mut tail = space.next(preds[0].links, 0)?;
    while tail != 0 {
        let m = space.node(tail)?;
        if space.key_of(&m)? != key {
            break;
        }
        run.push(m);
        tail = space.next(m.links(), 0)?;
    }
    let mut chain: Vec<Node> = Vec::with_capacity(run.len() + 1);
    chain.push(*n);
    let mut newer = n.seq();
    let mut dropped = Vec::new();
    for m in run {
        if newer <= bound {
            dropped.push(m);
        } else {
            newer = m.seq();
            chain.push(m);
        }
    }
    for m in &dropped {
        unlink_upper(space, l1, m)?;
        unlink_upper(space, l0, m)?;
        out.dead.push(m.off);
    }
    // Level 0, last link first: the list stays sorted and complete after
    // every store, and the new node appears with the last one.
    let mut succ = tail;
    for m in chain.iter().rev() {
        if space.next(m.links(), 0)? != succ {
            space.publish(m.links(), succ)?;
        }
        succ = m.off;
    }
    if space.next(preds[0].links, 0)? != succ {
        space.publish(preds[0].links, succ)?;
    }
    if n.is_delete() && n.seq() <= bound && chain.len() == 1 {
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

/// Unlinks from `l1` each tombstone in `tombstones` that is still linked
/// and still hides nothing (no older version follows it; a newer one would
/// have unlinked it already). Call it only when no reader that could have
/// met a version it hid is left. Returns the nodes unlinked.
pub(crate) fn reap(space: &ListSpace, l1: ListHead, tombstones: &[u64]) -> Result<Vec<u64>> {
    let mut dead = Vec::new();
    for &off in tombstones {
        let t = space.node(off)?;
        let key = space.key_of(&t)?.to_vec();
        let preds = space.preds(l1, l1.region_of(&t), &key, t.trailer)?;
        if space.next(preds[0].links, 0)? != off {
            continue;
        }
        let after = space.next(t.links(), 0)?;
        if after != 0 && space.key_of(&space.node(after)?)? == key.as_slice() {
            continue;
        }
        unlink_upper(space, l1, &t)?;
        space.publish(preds[0].links, after)?;
        dead.push(off);
    }
    Ok(dead)
}
