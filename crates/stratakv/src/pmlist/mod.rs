//! Persistent skiplists whose nodes are pm-only log entries (ListDB, seed
//! 001 and `shared/reference/seed-systems.md` §3): a sealed memtable becomes
//! an L0 list by linking its entries in key order ([`link_sorted`]), and
//! zipper compaction merges the oldest L0 list into the one L1 list in
//! place ([`zipper`]). No key or value is ever copied; only link words are
//! written, each with one atomic 8-byte store, so lock-free readers always
//! walk a sorted list.
//!
//! **Braiding**: with `regions` PM regions (NUMA nodes), level 0 is one
//! global list that starts at region 0's head, and each level above is a
//! list per region holding only that region's nodes, so a search walks its
//! own region's upper levels and then the global bottom level.
//!
//! **Persistence**: every link store is flushed, and a step's stores are
//! fenced before the next step depends on them. Level 0 is the list;
//! upper levels are hints that only ever point forward to a node at least
//! as large, so a crash that loses an upper-level store costs search steps,
//! never a key.

pub(crate) mod clean;
pub(crate) mod iter;
pub(crate) use crate::log::node;
pub(crate) mod zipper;

#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

use strata_pmem::{Extent, Region};

use crate::error::{Error, Result};
use node::{Node, MAX_HEIGHT};

/// The PM a set of lists lives in: the region, and leases on the extents
/// their nodes and heads are in (sorted by offset), which link stores are
/// checked against.
pub(crate) struct ListSpace {
    /// The PM region.
    pub region: Region,
    /// Its file, for errors.
    pub path: Arc<PathBuf>,
    extents: Vec<Extent>,
}

impl std::fmt::Debug for ListSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListSpace").field("extents", &self.extents.len()).finish()
    }
}

/// Where a search stands: the address of a node's (or head's) `next[0]`,
/// and the node (None: a head, before every key).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pos {
    /// Region offset of `next[0]`.
    pub links: u64,
    /// The node, if not a head.
    pub node: Option<Node>,
}

impl Pos {
    fn head(links: u64) -> Pos {
        Pos { links, node: None }
    }

    fn at(n: Node) -> Pos {
        Pos { links: n.links(), node: Some(n) }
    }
}

/// A list: its head block (`MAX_HEIGHT` link words per region) and the
/// number of regions it is braided over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListHead {
    /// Region offset of the head block.
    pub block: u64,
    /// PM regions (>= 1).
    pub regions: usize,
}

impl ListHead {
    /// Bytes of a head block for `regions` regions.
    pub fn block_bytes(regions: usize) -> u64 {
        (regions.max(1) * MAX_HEIGHT * 8) as u64
    }

    /// Address of region `r`'s head `next[0]`.
    pub fn links(&self, r: usize) -> u64 {
        self.block + (r * MAX_HEIGHT * 8) as u64
    }

    /// The region whose upper lists node `n` joins.
    pub fn region_of(&self, n: &Node) -> usize {
        n.region % self.regions.max(1)
    }
}

impl ListSpace {
    /// The space of `extents` in `region`.
    pub fn new(region: Region, path: Arc<PathBuf>, mut extents: Vec<Extent>) -> ListSpace {
        extents.sort_by_key(|e| e.offset());
        extents.dedup_by_key(|e| e.offset());
        ListSpace { region, path, extents }
    }

    /// The leased extents, by offset.
    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    /// The leased extent holding region offset `off`.
    pub fn extent_of(&self, off: u64) -> Option<&Extent> {
        let i = self.extents.partition_point(|e| e.offset() <= off).checked_sub(1)?;
        self.extents.get(i).filter(|e| e.contains(off))
    }

    fn pm(&self, e: strata_pmem::PmError) -> Error {
        Error::from_pm(&self.path, e)
    }

    /// The node at `off`. Readers may meet nodes of extents this space
    /// does not lease (a list linked after their version was made, merged
    /// into L1 since); the owner of the space keeps those leased too (the
    /// pm-only state's eras), so only the region's bounds are checked.
    pub fn node(&self, off: u64) -> Result<Node> {
        Node::read(&self.region, off).map_err(|e| self.pm(e))
    }

    /// The link word at `links + 8 level`.
    pub fn next(&self, links: u64, level: usize) -> Result<u64> {
        self.region.load_u64(links + 8 * level as u64).map_err(|e| self.pm(e))
    }

    /// Stores link word `word` and flushes it (fence with [`ListSpace::fence`]).
    pub fn store(&self, word: u64, value: u64) -> Result<()> {
        let ext = self
            .extent_of(word)
            .ok_or_else(|| Error::corruption(&*self.path, word, "skiplist store outside the list's extents"))?;
        ext.store_link(word, value).map_err(|e| self.pm(e))?;
        self.region.flush(word, 8);
        Ok(())
    }

    /// Stores and persists link word `word` (flush and fence).
    pub fn publish(&self, word: u64, value: u64) -> Result<()> {
        self.store(word, value)?;
        self.fence();
        Ok(())
    }

    /// Completes earlier flushes.
    pub fn fence(&self) {
        self.region.fence();
    }

    /// Orders node `n` against internal key (`ukey`, `trailer`).
    pub fn cmp(&self, n: &Node, ukey: &[u8], trailer: u64) -> Result<Ordering> {
        n.cmp_to(&self.region, ukey, trailer).map_err(|e| self.pm(e))
    }

    /// The user key of node `n`.
    pub fn key_of(&self, n: &Node) -> Result<&[u8]> {
        n.key(&self.region).map_err(|e| self.pm(e))
    }

    /// The value of node `n` (empty for a tombstone).
    pub fn value_of(&self, n: &Node) -> Result<&[u8]> {
        n.value(&self.region).map_err(|e| self.pm(e))
    }

    /// Moves right from `x` along `level` while the next node comes before
    /// the target (`before` says whether it does). Returns where it stopped
    /// and the node after it that is not before the target (None: the end
    /// of the level), as this walk read it.
    fn advance(
        &self,
        mut x: Pos,
        level: usize,
        before: &mut dyn FnMut(&Node) -> Result<bool>,
    ) -> Result<(Pos, Option<Node>)> {
        loop {
            let nx = self.next(x.links, level)?;
            if nx == 0 {
                return Ok((x, None));
            }
            let n = self.node(nx)?;
            if !before(&n)? {
                #[cfg(test)]
                if level == 0 {
                    hook::stopped(&n);
                }
                return Ok((x, Some(n)));
            }
            x = Pos::at(n);
        }
    }

    /// The last position before the target at every level of `list`,
    /// searching region `r`'s upper levels and then the global level 0,
    /// and the first node of level 0 not before the target (None: none).
    ///
    /// That node is the one the search read after the level-0 position:
    /// reading the position's link again may give a node a merge has
    /// linked in since, which can come before the target (a node of the
    /// list merged in after it, or, in an L0 list being merged, an L1 node
    /// its merged node now points at).
    pub fn search_by(
        &self,
        list: ListHead,
        r: usize,
        before: &mut dyn FnMut(&Node) -> Result<bool>,
    ) -> Result<([Pos; MAX_HEIGHT], Option<Node>)> {
        let mut x = Pos::head(list.links(r % list.regions.max(1)));
        let mut out = [x; MAX_HEIGHT];
        for level in (1..MAX_HEIGHT).rev() {
            x = self.advance(x, level, before)?.0;
            out[level] = x;
        }
        if x.node.is_none() {
            x = Pos::head(list.links(0));
        }
        let (at, succ) = self.advance(x, 0, before)?;
        out[0] = at;
        Ok((out, succ))
    }

    /// The last position before the target at every level of `list` (see
    /// [`ListSpace::search_by`]).
    pub fn preds_by(
        &self,
        list: ListHead,
        r: usize,
        before: &mut dyn FnMut(&Node) -> Result<bool>,
    ) -> Result<[Pos; MAX_HEIGHT]> {
        Ok(self.search_by(list, r, before)?.0)
    }

    /// [`ListSpace::preds_by`] for the internal key (`ukey`, `trailer`).
    pub fn preds(&self, list: ListHead, r: usize, ukey: &[u8], trailer: u64) -> Result<[Pos; MAX_HEIGHT]> {
        self.preds_by(list, r, &mut |n| Ok(self.cmp(n, ukey, trailer)? == Ordering::Less))
    }

    /// The first node of `list` at or after (`ukey`, `trailer`), searching
    /// from region `r`: one search, whose own reads decide (see
    /// [`ListSpace::search_by`]), so a merge running meanwhile never makes
    /// it land before the target.
    pub fn seek(&self, list: ListHead, r: usize, ukey: &[u8], trailer: u64) -> Result<Option<Node>> {
        Ok(self.search_by(list, r, &mut |n| Ok(self.cmp(n, ukey, trailer)? == Ordering::Less))?.1)
    }

    /// The node `links` (a `next[0]` address) points at, if any.
    pub fn next_node(&self, links: u64) -> Result<Option<Node>> {
        match self.next(links, 0)? {
            0 => Ok(None),
            nx => self.node(nx).map(Some),
        }
    }

    /// Links `nodes` (sorted by internal key, unlinked) into the empty list
    /// `list`: each level grows at its tail, so only link words are
    /// written. Persisted when this returns; publishing the list is the
    /// caller's.
    pub fn link_sorted(&self, list: ListHead, nodes: &[u64]) -> Result<()> {
        let regions = list.regions.max(1);
        let mut tails: Vec<[u64; MAX_HEIGHT]> = (0..regions).map(|r| [list.links(r); MAX_HEIGHT]).collect();
        let mut tail0 = list.links(0);
        for &off in nodes {
            let n = self.node(off)?;
            self.store(tail0, off)?;
            tail0 = n.links();
            let r = list.region_of(&n);
            for (level, t) in tails[r].iter_mut().enumerate().take(n.height).skip(1) {
                self.store(*t + 8 * level as u64, off)?;
                *t = n.links();
            }
        }
        // Every tail ends its level (a node's links may hold anything
        // before it is linked), and heads of empty levels are cleared.
        self.store(tail0, 0)?;
        for (r, levels) in tails.iter().enumerate() {
            for (level, &t) in levels.iter().enumerate() {
                if level > 0 || r > 0 {
                    self.store(t + 8 * level as u64, 0)?;
                }
            }
        }
        self.fence();
        Ok(())
    }

    /// Calls `f` for every node of `list` in order (level 0); a node out of
    /// order is corruption (so a damaged link cannot make a cycle).
    pub fn walk(&self, list: ListHead, mut f: impl FnMut(&Node) -> Result<()>) -> Result<()> {
        let mut at = list.links(0);
        let mut prev: Option<Node> = None;
        while let Some(n) = self.next_node(at)? {
            if let Some(p) = prev {
                if self.cmp(&n, self.key_of(&p)?, p.trailer)? != Ordering::Greater {
                    return Err(Error::corruption(&*self.path, n.off, "skiplist level 0 is out of order"));
                }
            }
            f(&n)?;
            at = n.links();
            prev = Some(n);
        }
        Ok(())
    }
}

/// Test hook: runs a step of the test's own (a merge, say) in the middle
/// of a search, after it has read where it stops on level 0.
#[cfg(test)]
pub(crate) mod hook {
    use std::cell::RefCell;

    use super::node::Node;

    type Hook = Box<dyn FnMut(&Node) -> bool>;

    thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Calls `f` with the node each level-0 search on this thread stops
    /// before, until it returns true. It may search and merge the lists
    /// itself (it is not called meanwhile).
    pub fn on_stop(f: impl FnMut(&Node) -> bool + 'static) {
        HOOK.with(|h| *h.borrow_mut() = Some(Box::new(f)));
    }

    /// Removes the hook.
    pub fn clear() {
        HOOK.with(|h| *h.borrow_mut() = None);
    }

    pub(super) fn stopped(n: &Node) {
        let Some(mut f) = HOOK.with(|h| h.borrow_mut().take()) else { return };
        if !f(n) {
            HOOK.with(|h| {
                let mut slot = h.borrow_mut();
                if slot.is_none() {
                    *slot = Some(f);
                }
            });
        }
    }
}
