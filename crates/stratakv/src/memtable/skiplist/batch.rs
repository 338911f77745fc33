//! Inserting a batch of keys: searches side by side (their cache misses
//! overlap) and short walks from the previous key for keys that follow it.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;

use super::{SkipList, HEAD, MAX_HEIGHT};
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
        let mut prev = self.search_side_by_side(items, &nodes, &searched).into_iter();
        let mut finger = [HEAD; MAX_HEIGHT];
        for (j, (&(key, _, _), &(idx, height, pp))) in items.iter().zip(&nodes).enumerate() {
            let p = if follows(j) {
                self.preds_near(key, pp, height, &finger).unwrap_or_else(|| self.search(key, pp))
            } else {
                prev.next().unwrap_or([HEAD; MAX_HEIGHT])
            };
            self.link_in(idx, key, pp, height, &p);
            // What the next key starts from: this node on its levels, its
            // predecessors above them (all smaller than any later key).
            finger = p;
            for f in finger.iter_mut().take(height) {
                *f = idx;
            }
        }
        Some(nodes.into_iter().map(|(idx, _, _)| idx).collect())
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
    fn search_side_by_side(
        &self,
        items: &[(&[u8], u64, u64)],
        nodes: &[(u32, usize, u64)],
        which: &[usize],
    ) -> Vec<[u32; MAX_HEIGHT]> {
        let top = self.height.load(Ordering::Relaxed);
        let mut prev = vec![[HEAD; MAX_HEIGHT]; which.len()];
        let key_of = |a: usize| which.get(a).and_then(|&j| items.get(j).zip(nodes.get(j))).map(|(i, n)| (i.0, n.2));
        // Whether key `a` sorts after key `a - 1`: only then may it start
        // where the one before it stopped.
        let ascending: Vec<bool> = (0..which.len())
            .map(|a| match (a.checked_sub(1).and_then(key_of), key_of(a)) {
                (Some((x, _)), Some((y, _))) => crate::key::compare_internal(x, y) == CmpOrdering::Less,
                _ => false,
            })
            .collect();
        // Chains: (key walking now, end of the chain, node reached).
        let mut chains: Vec<(usize, usize, u32)> = Vec::with_capacity(which.len());
        for level in (0..top).rev() {
            let above = |p: &[u32; MAX_HEIGHT]| p.get(level + 1).copied().unwrap_or(HEAD);
            chains.clear();
            let mut a = 0;
            while a < prev.len() {
                let from = prev.get(a).map(above).unwrap_or(HEAD);
                let mut end = a + 1;
                while end < prev.len() && ascending.get(end) == Some(&true) && prev.get(end).map(above) == Some(from) {
                    end += 1;
                }
                chains.push((a, end, from));
                a = end;
            }
            while !chains.is_empty() {
                chains.retain_mut(|(a, end, x)| {
                    let Some((key, pp)) = key_of(*a) else { return false };
                    match self.step(key, pp, *x, level) {
                        Some(n) => {
                            *x = n;
                            if let Some(w) = self.link_slot(n, level) {
                                strata_pmem::prefetch(w);
                            }
                            true
                        }
                        None => {
                            if let Some(slot) = prev.get_mut(*a).and_then(|p| p.get_mut(level)) {
                                *slot = *x;
                            }
                            *a += 1;
                            *a < *end
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
    fn preds_near(
        &self,
        probe: &[u8],
        pp: u64,
        height: usize,
        finger: &[u32; MAX_HEIGHT],
    ) -> Option<[u32; MAX_HEIGHT]> {
        const MOST_STEPS: usize = 8;
        let mut prev = *finger;
        for (level, slot) in prev.iter_mut().enumerate().take(height) {
            let mut steps = 0;
            while let Some(n) = self.step(probe, pp, *slot, level) {
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
