//! Inserting a batch of keys: searches side by side (their cache misses
//! overlap) and short walks from the previous key for keys that follow it.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;

use super::order::{common_prefix, Pos};
use super::{SkipList, MAX_HEIGHT};
use crate::key::user_key;

/// Whether internal key `b` sorts after `a` with a user key that shares
/// most of `a`'s bytes (at least 8 and half of the shorter): the next
/// field of one record, the next key of a sequential load. Such keys are
/// usually a few nodes apart in the list.
fn near_after(a: &[u8], b: &[u8]) -> bool {
    let (ua, ub) = (user_key(a), user_key(b));
    let shared = ua.iter().zip(ub).take_while(|(x, y)| x == y).count();
    shared >= 8 && shared * 2 >= ua.len().min(ub.len()) && crate::key::compare_internal(a, b) == CmpOrdering::Less
}

impl SkipList {
    /// Inserts several keys (none already present, none equal), like
    /// [`SkipList::insert`] for each, and returns their nodes in order.
    ///
    /// A key that follows the one before it in the batch and shares most of
    /// its bytes (the fields of one record, written in order) is found by
    /// walking a few steps forward from where the previous key went in, on
    /// the levels it needs only, instead of a search from the top: a full
    /// search compares against a long shared prefix at every level. The
    /// other keys are searched side by side, level by level: their steps do
    /// not depend on each other, so the CPU overlaps their cache misses (on
    /// random keys a lone search waits on one miss at a time). A key linked
    /// in earlier in the batch may then sit between a later key and its
    /// predecessor; linking walks forward from the predecessor, as after a
    /// lost race with another writer.
    pub fn insert_batch(&self, items: &[(&[u8], u64, u64)]) -> Option<Vec<u32>> {
        let mut nodes = Vec::with_capacity(items.len());
        for &(key, off, len) in items {
            nodes.push(self.new_node(key, off, len)?);
        }
        let follows = |j: usize| j > 0 && items.get(j - 1).zip(items.get(j)).is_some_and(|(a, b)| near_after(a.0, b.0));
        let searched: Vec<usize> = (0..items.len()).filter(|&j| !follows(j)).collect();
        let mut prev = self.search_side_by_side(items, &searched).into_iter();
        let mut finger = [Pos::HEAD; MAX_HEIGHT];
        let mut last: &[u8] = &[];
        for (j, (&(key, _, _), &(idx, height))) in items.iter().zip(&nodes).enumerate() {
            let p = if follows(j) {
                // The finger was found for the key before this one.
                let up = user_key(key);
                let f = common_prefix(user_key(last), up) as u32;
                let near = finger.map(|at| self.rebase(at, f, up));
                self.preds_near(key, height, &near).unwrap_or_else(|| self.search(key))
            } else {
                prev.next().unwrap_or([Pos::HEAD; MAX_HEIGHT])
            };
            self.link_in(idx, key, height, &p);
            // What the next key starts from: this node on its levels, its
            // predecessors above them (all smaller than any later key).
            finger = p;
            let own = Pos { node: idx, lcp: user_key(key).len() as u32 };
            for f in finger.iter_mut().take(height) {
                *f = own;
            }
            last = key;
        }
        Some(nodes.into_iter().map(|(idx, _)| idx).collect())
    }

    /// Predecessors at every level of the keys `which` (indexes into
    /// `items`), the searches going down the levels side by side.
    ///
    /// Keys that follow each other in ascending order and share their
    /// predecessor one level up walk that level as one chain: the second
    /// starts where the first stopped (every node passed is smaller than
    /// both), so on the upper levels a sorted batch walks each stretch of a
    /// level once instead of once per key. Chains advance round robin, one
    /// step each per round, so on the lower levels, where keys part ways,
    /// the CPU still overlaps their cache misses.
    fn search_side_by_side(&self, items: &[(&[u8], u64, u64)], which: &[usize]) -> Vec<[Pos; MAX_HEIGHT]> {
        let top = self.height.load(Ordering::Relaxed);
        let mut prev = vec![[Pos::HEAD; MAX_HEIGHT]; which.len()];
        let key_of = |a: usize| which.get(a).and_then(|&j| items.get(j)).map(|i| i.0);
        // Whether key `a` sorts after key `a - 1`: only then may it start
        // where the one before it stopped; and then the common prefix of
        // their user keys (to carry the position over).
        let ascending: Vec<Option<u32>> = (0..which.len())
            .map(|a| match (a.checked_sub(1).and_then(key_of), key_of(a)) {
                (Some(x), Some(y)) if crate::key::compare_internal(x, y) == CmpOrdering::Less => {
                    Some(common_prefix(user_key(x), user_key(y)) as u32)
                }
                _ => None,
            })
            .collect();
        // Chains: (key walking now, end of the chain, position reached for
        // the key walking now).
        let mut chains: Vec<(usize, usize, Pos)> = Vec::with_capacity(which.len());
        for level in (0..top).rev() {
            let above = |p: &[Pos; MAX_HEIGHT]| p.get(level + 1).copied().unwrap_or(Pos::HEAD);
            chains.clear();
            let mut a = 0;
            while a < prev.len() {
                let from = prev.get(a).map(above).unwrap_or(Pos::HEAD);
                let mut end = a + 1;
                while end < prev.len()
                    && ascending.get(end).is_some_and(|f| f.is_some())
                    && prev.get(end).map(|p| above(p).node) == Some(from.node)
                {
                    end += 1;
                }
                chains.push((a, end, from));
                a = end;
            }
            while !chains.is_empty() {
                chains.retain_mut(|(a, end, x)| {
                    let Some(key) = key_of(*a) else { return false };
                    match self.step(key, *x, level) {
                        Some(n) => {
                            *x = n;
                            if let Some(w) = self.link_slot(n.node, level) {
                                strata_pmem::prefetch(w);
                            }
                            true
                        }
                        None => {
                            if let Some(slot) = prev.get_mut(*a).and_then(|p| p.get_mut(level)) {
                                *slot = *x;
                            }
                            *a += 1;
                            if *a >= *end {
                                return false;
                            }
                            // The next key of the chain starts here.
                            if let (Some(Some(f)), Some(next)) = (ascending.get(*a), key_of(*a)) {
                                *x = self.rebase(*x, *f, user_key(next));
                            }
                            true
                        }
                    }
                });
            }
        }
        prev
    }

    /// Predecessors of a probe on levels `0..height` found by walking
    /// forward from `finger` (nodes with smaller keys; kept above `height`),
    /// or None when some level needs more than a few steps: the probe is
    /// not near the finger in the list, and a search from the top is cheaper.
    fn preds_near(&self, probe: &[u8], height: usize, finger: &[Pos; MAX_HEIGHT]) -> Option<[Pos; MAX_HEIGHT]> {
        const MOST_STEPS: usize = 8;
        let mut prev = *finger;
        for (level, slot) in prev.iter_mut().enumerate().take(height) {
            let mut steps = 0;
            while let Some(n) = self.step(probe, *slot, level) {
                steps += 1;
                if steps > MOST_STEPS {
                    return None;
                }
                *slot = n;
            }
        }
        Some(prev)
    }
}
