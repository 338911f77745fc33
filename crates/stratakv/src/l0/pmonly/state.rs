//! The pm-only level 0's state in a version: the L0 lists (newest first),
//! the L1 list, and leases on every extent their nodes are in.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_pmem::ExtentHead;

use super::cache::LookupCache;
use super::record::{ListRecord, Record};
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::{trailer, Lookup, SeqNo, KIND_FOR_SEEK, MAX_SEQ};
use crate::log::thread_region;
use crate::pmlist::iter::ListIter;
use crate::pmlist::node::Node;
use crate::pmlist::{ListHead, ListSpace};
use crate::version::{FileMeta, L0State, TableCache, Version};

/// A head block of the root extent, handed back to the free pool when the
/// last version naming it goes (a reader of an old version may still walk
/// a merged list's head).
#[derive(Debug)]
pub(crate) struct BlockLease {
    /// Block number in the root extent (0 is L1's and never leased).
    pub block: u32,
    pool: Arc<Mutex<Vec<u32>>>,
}

impl Drop for BlockLease {
    fn drop(&mut self) {
        self.pool.lock().push(self.block);
    }
}

/// What a pm-only level 0 shares across its versions (not persisted).
#[derive(Debug)]
pub(crate) struct Shared {
    /// The lookup cache, if on.
    pub cache: Option<LookupCache>,
    /// The highest sequence bound a zipper merge has dropped versions
    /// below: a plain read that started before it re-reads (see `get`).
    pub bound: AtomicU64,
    /// Free head blocks.
    pub pool: Arc<Mutex<Vec<u32>>>,
    /// Lookups that searched the lists.
    pub list_searches: AtomicU64,
    /// The newest era.
    pub era: Mutex<Arc<Era>>,
}

impl Shared {
    /// Takes a free head block.
    pub fn take_block(&self) -> Option<Arc<BlockLease>> {
        let block = self.pool.lock().pop()?;
        Some(Arc::new(BlockLease { block, pool: self.pool.clone() }))
    }

    /// A lease on `block`, taken out of the pool (recovery).
    pub fn claim_block(&self, block: u32) -> Arc<BlockLease> {
        self.pool.lock().retain(|&b| b != block);
        Arc::new(BlockLease { block, pool: self.pool.clone() })
    }
}

/// Leases on the extents added to the lists after a version was made.
///
/// Readers of an old version walk the live L1 list, which may by now hold
/// nodes of lists linked after their version, and copies log cleaning
/// made since (in relocation extents that a later cleaning may empty
/// again): each version holds the era it was made in, each era the next
/// one, and each era the extents added in it (by a flush or a cleaning),
/// so a reader keeps every extent it can meet leased until it is done
/// (epoch-based reclamation, with the eras as epochs).
#[derive(Debug, Default)]
pub(crate) struct Era {
    /// Held only for the leases.
    _added: Vec<strata_pmem::Extent>,
    next: std::sync::OnceLock<Arc<Era>>,
}

impl Era {
    /// Starts the era after `self`, holding `added`.
    pub fn follow(self: &Arc<Era>, added: Vec<strata_pmem::Extent>) -> Arc<Era> {
        let next = Arc::new(Era { _added: added, next: std::sync::OnceLock::new() });
        // Each era is followed once: the caller holds the versions lock and
        // passes the newest era.
        let _ = self.next.set(next.clone());
        next
    }
}

impl Drop for Era {
    fn drop(&mut self) {
        // Unlinked one by one: a long chain (a long-lived iterator) must
        // not recurse.
        let mut next = self.next.take();
        while let Some(e) = next {
            next = match Arc::try_unwrap(e) {
                Ok(mut era) => era.next.take(),
                Err(_) => None,
            };
        }
    }
}

/// One L0 list.
#[derive(Clone, Debug)]
pub(crate) struct ListInfo {
    /// Its id.
    pub id: u64,
    /// Its head block.
    pub block: Arc<BlockLease>,
    /// Numbers of the log extents its nodes are in.
    pub logs: Vec<u64>,
}

/// The state.
#[derive(Debug, Clone)]
pub(crate) struct PmOnlyState {
    /// The region and the extents leased.
    pub space: Arc<ListSpace>,
    /// The root extent's head word.
    pub root: ExtentHead,
    /// Its region offset.
    pub root_off: u64,
    /// Regions the lists are braided over.
    pub regions: usize,
    /// L0 lists, newest first.
    pub lists: Vec<ListInfo>,
    /// Log extents holding L1 nodes.
    pub l1_logs: Vec<u64>,
    /// Relocation extents holding L1 nodes.
    pub l1_relocs: Vec<u64>,
    /// The next relocation extent number.
    pub next_reloc: u64,
    /// The list being merged into L1 (0: none).
    pub merging: u64,
    /// The next list id.
    pub next_list_id: u64,
    /// Shared across versions.
    pub shared: Arc<Shared>,
    /// The era the state was made in (see [`Era`]).
    pub era: Arc<Era>,
}

/// Version `v`'s pm-only state, if it has one.
pub(crate) fn pm_only_in(v: &Version) -> Option<&PmOnlyState> {
    v.l0.as_ref().and_then(|s| s.as_any().downcast_ref::<PmOnlyState>())
}

impl PmOnlyState {
    /// The list whose head is `block`.
    pub fn head(&self, block: u32) -> ListHead {
        ListHead { block: self.root_off + block as u64 * ListHead::block_bytes(self.regions), regions: self.regions }
    }

    /// The L1 list.
    pub fn l1(&self) -> ListHead {
        self.head(0)
    }

    /// Every list, newest first (L0 lists, then L1).
    pub fn all_lists(&self) -> impl Iterator<Item = ListHead> + '_ {
        self.lists.iter().map(|l| self.head(l.block.block)).chain(std::iter::once(self.l1()))
    }

    /// The persistent part.
    pub fn to_record(&self) -> Record {
        Record {
            root: (self.root.slot, self.root.slots, self.root.number),
            regions: self.regions as u32,
            next_list_id: self.next_list_id,
            merging: self.merging,
            lists: self
                .lists
                .iter()
                .map(|l| ListRecord { id: l.id, block: l.block.block, logs: l.logs.clone() })
                .collect(),
            l1_logs: self.l1_logs.clone(),
            l1_relocs: self.l1_relocs.clone(),
            next_reloc: self.next_reloc,
        }
    }

    /// The cached node for `ukey` (hash `hash`) if the cache has it and
    /// it is visible at `seq`; errors count as a miss (the slot may be stale).
    fn cached(&self, ukey: &[u8], seq: SeqNo, hash: u64) -> Option<Node> {
        let (off, tag) = self.shared.cache.as_ref()?.probe(hash)?;
        let ext = self.space.extent_of(off)?;
        if !LookupCache::tag_matches(tag, ext.head().number) {
            return None;
        }
        let n = self.space.node(off).ok()?;
        (n.seq() <= seq && self.space.key_of(&n).ok()? == ukey).then_some(n)
    }

    /// The newest version of `ukey` at `seq` in the cache or the lists.
    fn find(&self, ukey: &[u8], seq: SeqNo, hash: u64) -> Result<Option<Node>> {
        if let Some(n) = self.cached(ukey, seq, hash) {
            if let Some(c) = &self.shared.cache {
                c.hits.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(Some(n));
        }
        self.shared.list_searches.fetch_add(1, Ordering::Relaxed);
        let r = thread_region(self.regions);
        let t = trailer(seq, KIND_FOR_SEEK);
        for list in self.all_lists() {
            if let Some(n) = self.space.seek(list, r, ukey, t)? {
                if self.space.key_of(&n)? == ukey {
                    return Ok(Some(n));
                }
            }
        }
        Ok(None)
    }

    fn answer(&self, n: Option<Node>) -> Result<Lookup> {
        Ok(match n {
            None => Lookup::Missing,
            Some(n) if n.is_delete() => Lookup::Deleted,
            Some(n) => Lookup::Found(self.space.value_of(&n)?.to_vec()),
        })
    }
}

impl L0State for PmOnlyState {
    fn record(&self) -> Vec<u8> {
        self.to_record().encode()
    }

    /// A zipper merge drops versions that no registered snapshot needs, in
    /// place; a plain read whose sequence is below the merge's bound may
    /// have lost its version to it, so it reads the newest version instead
    /// (which is linearizable: that version was written while it ran).
    /// Snapshots are registered, so their sequence is never below a bound.
    fn get(&self, ukey: &[u8], seq: SeqNo, hash: u64, _t: &TableCache, _f: &[Arc<FileMeta>]) -> Result<Lookup> {
        let found = self.find(ukey, seq, hash)?;
        if seq < self.shared.bound.load(Ordering::Acquire) {
            return self.answer(self.find(ukey, MAX_SEQ, hash)?);
        }
        self.answer(found)
    }

    fn prefetch(&self, hash: u64) {
        if let Some(c) = &self.shared.cache {
            c.prefetch(hash);
        }
    }

    fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>, _prefix: Option<&[u8]>) -> usize {
        // A cursor outlives the version it came from: it keeps a copy of
        // the state, whose leases keep its head blocks and extents.
        let keep: Arc<dyn Any + Send + Sync> = Arc::new(self.clone());
        for list in self.all_lists() {
            out.push(Box::new(ListIter::new(keep.clone(), self.space.clone(), list)));
        }
        0
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
