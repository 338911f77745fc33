//! Level 0 as ListDB's PM skiplists (`pm-only`): all data stays in PM, in
//! the log entries it was written to. A sealed memtable becomes an L0 list
//! by linking its entries' nodes in key order (no key or value copied),
//! and zipper compaction merges the oldest L0 list into the one L1 list in
//! place, dropping versions nobody can read ([`crate::pmlist`]). No table
//! is written: the leveled levels stay empty and the only SSD file is the
//! MANIFEST (kept there, not in PM, because it is also where every other
//! profile's state lives, and one edit per flush or merge is cheap).
//!
//! # Order of a flush
//! 1. The memtable's newest versions are linked into a free head block of
//!    the root extent, persisted.
//! 2. One MANIFEST edit publishes the list (its head block and log
//!    extents) and advances the log number. A crash before it leaves the
//!    log live: recovery replays it and the next flush links it again.
//!
//! # Order of a zipper merge
//! 1. An edit records which list is being merged.
//! 2. The merge runs (every store persisted as it goes).
//! 3. An edit drops the list and hands its log extents to L1, less those
//!    with no node left. A crash between 1 and 3 is finished at open: the
//!    merge is idempotent.
//!
//! # Space
//! The extents' live nodes are counted (at open, by walking the lists;
//! then kept up to date by flushes and merges). A log extent whose nodes
//! are all unlinked leaves the state; readers of older versions keep it
//! leased until they finish, then its slots are free.

mod cache;
mod clean;
mod live;
mod record;
mod state;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_pmem::{Extent, ExtentHead};

use self::cache::LookupCache;
use self::live::Live;
use self::record::Record;
use self::state::{pm_only_in, Era, ListInfo, PmOnlyState, Shared};
use super::{Job, Lane, Level0, RecoverCx, Stall};
use crate::compaction::Dropper;
use crate::engine::{Commit, Engine, StallPolicy};
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key::{key_hash, ParsedKey, SeqNo, MAX_SEQ};
use crate::log::EXTENT_KIND_LOG;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::pmlist::zipper::{drop_shadowed, reap, zip};
use crate::pmlist::{ListHead, ListSpace};
use crate::stats::{LevelStats, Stats};
use crate::version::{L0State, Version, VersionEdit};

/// Extent kind of the root extent (list head blocks).
pub const EXTENT_KIND_LISTS: u8 = 4;
/// Extent kind of relocation extents (L1 nodes log cleaning moved; entries
/// as in log extents, never replayed).
pub const EXTENT_KIND_RELOC: u8 = 5;

/// What one merge hid: the sequence published when it ended, the older
/// versions to unlink, and the tombstones to reap after them.
type PendingDrop = (SeqNo, Vec<NodeRef>, Vec<NodeRef>);

/// What a merge whose last edit failed noted: its list's id, the older
/// versions and the tombstones.
type Unfinished = (u64, Vec<NodeRef>, Vec<NodeRef>);

/// A node noted for later, with the number of the extent it is in: by then
/// another step may have unlinked it (a version noted twice, a node log
/// cleaning moved) and its extent may be free, or reused by another; the
/// node is read only if its extent is still the same and still leased.
type NodeRef = (u64, (u8, u64));

/// `offs` as [`NodeRef`]s in `space`.
fn node_refs(space: &ListSpace, offs: &[u64]) -> Vec<NodeRef> {
    offs.iter().filter_map(|&o| space.extent_of(o).map(|e| (o, (e.head().kind, e.head().number)))).collect()
}

/// The offsets of `refs` whose extent `space` still leases.
fn still_there(space: &ListSpace, refs: impl IntoIterator<Item = NodeRef>) -> Vec<u64> {
    refs.into_iter()
        .filter(|&(o, id)| space.extent_of(o).is_some_and(|e| (e.head().kind, e.head().number) == id))
        .map(|(o, _)| o)
        .collect()
}

/// Most head blocks (L0 lists + 1) a root extent is cut into.
const MAX_BLOCKS: u64 = 256;

/// ListDB's level 0.
pub(crate) struct PmOnlyL0 {
    regions: usize,
    zipper: bool,
    cache_bytes: usize,
    max_l0: usize,
    shared: Mutex<Option<Arc<Shared>>>,
    /// Live nodes per extent (by region offset).
    live: Mutex<HashMap<u64, Live>>,
    /// Held by a merge from its first edit to its last.
    merging: Mutex<()>,
    merges: AtomicU64,
    merged_nodes: AtomicU64,
    cleanings: AtomicU64,
    moved_nodes: AtomicU64,
    dropped_nodes: AtomicU64,
    /// L0 lists that trigger a merge (and stop writers at `max_l0`).
    trigger: Mutex<usize>,
    /// Relocation extents a running cleaning fills: counted only when it
    /// ends, so every edit meanwhile must keep them.
    filling: Mutex<Vec<Extent>>,

    /// Older versions to unlink, with the last sequence published when
    /// their merge ended: unlinked once every snapshot (and so every
    /// iterator) is newer. Their merges' tombstones go to `to_reap` then.
    to_drop: Mutex<Vec<PendingDrop>>,
    /// Tombstones to reap, likewise with the sequence published when the
    /// versions they hid were unlinked.
    to_reap: Mutex<Vec<(SeqNo, Vec<NodeRef>)>>,
    /// What a merge whose last edit failed (a full disk) noted, with the
    /// id of its list: kept out of `to_drop` until that merge's edit is
    /// made. Until then the list is still named, its head still leads to
    /// the merged nodes, and the merge is redone by walking from it (now,
    /// or by recovery after a crash): a tombstone reaped or a version
    /// dropped meanwhile would be spliced back, or its extent freed under
    /// the walk.
    unfinished: Mutex<Option<Unfinished>>,
    /// What recovery let go of that the MANIFEST still names until the
    /// next edit: the head block of a list it merged, and every extent it
    /// found (a merge redone after another crash walks that list again).
    held: Mutex<Vec<Box<dyn std::any::Any + Send + Sync>>>,
}

impl PmOnlyL0 {
    /// The level 0 of `opts`.
    pub fn new(opts: &Options) -> PmOnlyL0 {
        PmOnlyL0 {
            regions: opts.pm_regions.clamp(1, 15),
            zipper: opts.listdb_zipper,
            cache_bytes: opts.listdb_lookup_cache_bytes,
            max_l0: opts.listdb_max_l0.max(1),
            shared: Mutex::new(None),
            live: Mutex::new(HashMap::new()),
            merging: Mutex::new(()),
            merges: AtomicU64::new(0),
            merged_nodes: AtomicU64::new(0),
            cleanings: AtomicU64::new(0),
            moved_nodes: AtomicU64::new(0),
            dropped_nodes: AtomicU64::new(0),
            trigger: Mutex::new(1),
            filling: Mutex::new(Vec::new()),

            to_drop: Mutex::new(Vec::new()),
            to_reap: Mutex::new(Vec::new()),
            unfinished: Mutex::new(None),
            held: Mutex::new(Vec::new()),
        }
    }

    fn shared(&self) -> Result<Arc<Shared>> {
        self.shared.lock().clone().ok_or_else(|| Error::Pm("pm-only level 0 used before recovery".into()))
    }

    /// A copy of version `v`'s state, to change and install.
    fn state_of(v: &Version) -> Result<PmOnlyState> {
        pm_only_in(v).cloned().ok_or_else(|| Error::Pm("version without a pm-only state".into()))
    }

    /// The lists at which writers stop.
    fn stop_at(&self) -> usize {
        if self.zipper {
            self.max_l0
        } else {
            *self.trigger.lock()
        }
    }

    /// Unlinks the older versions of merges that ended before every
    /// snapshot and iterator now open began, and reaps the tombstones whose
    /// hidden versions were unlinked before them (caller holds `merging`).
    fn reap_due(&self, eng: &Engine, st: &PmOnlyState) -> Result<()> {
        let oldest = eng.oldest_snapshot();
        let drops: Vec<(Vec<NodeRef>, Vec<NodeRef>)> = {
            let mut pending = self.to_drop.lock();
            let (due, keep): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(stamp, _, _)| *stamp < oldest);
            *pending = keep;
            due.into_iter().map(|(_, s, t)| (s, t)).collect()
        };
        let reaps: Vec<NodeRef> = {
            let mut pending = self.to_reap.lock();
            let (due, keep): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(stamp, _)| *stamp < oldest);
            *pending = keep;
            due.into_iter().flat_map(|(_, t)| t).collect()
        };
        let mut dead = Vec::new();
        let mut tombstones = Vec::new();
        for (shadowed, t) in drops {
            dead.extend(drop_shadowed(&st.space, st.l1(), &still_there(&st.space, shadowed))?);
            tombstones.extend(t);
        }
        if !tombstones.is_empty() {
            self.to_reap.lock().push((eng.pipeline.visible(), tombstones));
        }
        dead.extend(reap(&st.space, st.l1(), &still_there(&st.space, reaps))?);
        self.count(&st.space, dead.iter().copied(), false);
        self.dropped_nodes.fetch_add(dead.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Merges the oldest L0 list into L1 (see the module doc); false if
    /// there is none.
    fn merge_oldest(&self, eng: &Engine) -> Result<bool> {
        let _g = self.merging.lock();
        let shared = self.shared()?;
        let cur = Self::state_of(&eng.version())?;
        let Some(x) = cur.lists.last().cloned() else {
            self.reap_due(eng, &cur)?;
            return Ok(false);
        };
        if cur.merging != x.id {
            let mut vs = eng.versions.lock();
            let mut next = Self::state_of(&vs.current())?;
            next.merging = x.id;
            eng.commit(&mut vs, Commit { l0: Some(Arc::new(next)), ..Default::default() })?;
            self.held.lock().clear();
        }
        // Readers at or above the bound are registered snapshots or
        // started after it; plain reads below it re-read (state.rs).
        let bound = eng.oldest_snapshot();
        shared.bound.fetch_max(bound, Ordering::AcqRel);
        self.reap_due(eng, &cur)?;
        let z = zip(&cur.space, cur.head(x.block.block), cur.l1(), bound)?;
        let (mut shadowed, mut tombstones) = (node_refs(&cur.space, &z.shadowed), node_refs(&cur.space, &z.tombstones));
        if let Some((id, s, t)) = self.unfinished.lock().take() {
            if id == x.id {
                shadowed.extend(s);
                tombstones.extend(t);
            }
        }
        if eng.log.needs_msync() {
            for e in cur.space.extents() {
                cur.space.region.sync(e.offset(), e.len()).map_err(|e| Error::from_pm(&cur.space.path, e))?;
            }
        }
        self.merges.fetch_add(1, Ordering::Relaxed);
        self.merged_nodes.fetch_add(z.merged, Ordering::Relaxed);
        let mut vs = eng.versions.lock();
        let mut next = Self::state_of(&vs.current())?;
        next.lists.retain(|l| l.id != x.id);
        next.l1_logs.extend(x.logs.iter().copied());
        next.l1_logs.sort_unstable();
        next.l1_logs.dedup();
        next.merging = 0;
        let next = self.reshape(next, &[], &[]);
        if let Err(e) = eng.commit(&mut vs, Commit { l0: Some(Arc::new(next)), ..Default::default() }) {
            *self.unfinished.lock() = Some((x.id, shadowed, tombstones));
            return Err(e);
        }
        self.to_drop.lock().push((eng.pipeline.visible(), shadowed, tombstones));
        Ok(true)
    }
}

impl Level0 for PmOnlyL0 {
    /// No tables: level 0 holds everything in PM.
    fn first_free_level(&self) -> Option<usize> {
        None
    }

    fn name(&self) -> &'static str {
        "pm-only"
    }

    /// Adopts the root extent and the log extents the lists are in,
    /// finishes a merge a crash cut short, and counts the live nodes.
    fn recover(&self, cx: &RecoverCx<'_>, older_logs: &mut Vec<ExtentHead>) -> Result<Option<Arc<dyn L0State>>> {
        let path = cx.region_path;
        let pm = |e| Error::from_pm(path, e);
        let record = match cx.record {
            Some(b) => Some(Record::decode(b).map_err(|why| Error::corruption(cx.manifest_path, 0, why))?),
            None => None,
        };
        let regions = record.as_ref().map_or(self.regions, |r| r.regions as usize);
        let named = |h: &ExtentHead| {
            record.as_ref().is_some_and(|r| h.kind == EXTENT_KIND_LISTS && (h.slot, h.slots, h.number) == r.root)
        };
        let mut root = None;
        for h in cx.heads.iter().filter(|h| h.kind == EXTENT_KIND_LISTS) {
            if named(h) {
                root = Some(cx.region.adopt(*h).map_err(pm)?);
            } else {
                // Allocated by an open that never published it.
                cx.region.retire(*h).map_err(pm)?;
            }
        }
        let root = match (root, &record) {
            (Some(r), _) => r,
            (None, Some(_)) => {
                return Err(Error::corruption(&**path, 0, "the pm-only root extent is missing from the PM region"))
            }
            (None, None) => {
                let w = cx.region.allocate(EXTENT_KIND_LISTS, 1, 1).map_err(pm)?;
                let e = w.extent().clone();
                // L1's head block starts empty; other blocks are cleared when used.
                for i in 0..ListHead::block_bytes(regions) / 8 {
                    e.store_link(e.offset() + 8 * i, 0).map_err(pm)?;
                }
                cx.region.persist(e.offset(), ListHead::block_bytes(regions));
                e
            }
        };
        let blocks = (root.len() / ListHead::block_bytes(regions)).min(MAX_BLOCKS);
        if blocks < 3 {
            return Err(Error::InvalidArgument(format!(
                "PM slots of {} bytes are too small for pm-only list heads",
                root.len()
            )));
        }
        let shared = Arc::new(Shared {
            cache: LookupCache::new(self.cache_bytes),
            bound: AtomicU64::new(0),
            pool: Arc::new(Mutex::new((1..blocks as u32).rev().collect())),
            list_searches: AtomicU64::new(0),
            era: Mutex::new(Arc::new(Era::default())),
        });
        let record = record.unwrap_or(Record {
            root: (root.head().slot, root.head().slots, root.head().number),
            regions: regions as u32,
            next_list_id: 1,
            merging: 0,
            lists: Vec::new(),
            l1_logs: Vec::new(),
            l1_relocs: Vec::new(),
            next_reloc: 1,
        });
        let wanted: HashSet<u64> =
            record.lists.iter().flat_map(|l| l.logs.iter().copied()).chain(record.l1_logs.iter().copied()).collect();
        let mut extents = vec![root.clone()];
        for h in cx.heads.iter().filter(|h| h.kind == EXTENT_KIND_RELOC) {
            if record.l1_relocs.contains(&h.number) {
                extents.push(cx.region.adopt(*h).map_err(pm)?);
            } else {
                // Allocated for a cleaning the MANIFEST never recorded, or emptied.
                cx.region.retire(*h).map_err(pm)?;
            }
        }
        let mut unclaimed = Vec::new();
        for h in older_logs.drain(..) {
            if wanted.contains(&h.number) {
                extents.push(cx.region.adopt(h).map_err(pm)?);
            } else {
                unclaimed.push(h);
            }
        }
        *older_logs = unclaimed;
        let mut lists = Vec::new();
        for l in &record.lists {
            if l.block == 0 || l.block as u64 >= blocks {
                return Err(Error::corruption(
                    cx.manifest_path,
                    0,
                    format!("pm-only list {} has head block {}", l.id, l.block),
                ));
            }
            lists.push(ListInfo { id: l.id, block: shared.claim_block(l.block), logs: l.logs.clone() });
        }
        let mut st = PmOnlyState {
            space: Arc::new(ListSpace::new(cx.region.clone(), path.clone(), extents)),
            root: root.head(),
            root_off: root.offset(),
            regions,
            lists,
            l1_logs: record.l1_logs.clone(),
            l1_relocs: record.l1_relocs.clone(),
            next_reloc: record.next_reloc.max(1),
            merging: record.merging,
            next_list_id: record.next_list_id.max(1),
            era: shared.era.lock().clone(),
            shared: shared.clone(),
        };
        if st.merging != 0 {
            if let Some(i) = st.lists.iter().position(|l| l.id == st.merging) {
                let x = st.lists.remove(i);
                zip(&st.space, st.head(x.block.block), st.l1(), MAX_SEQ)?;
                st.l1_logs.extend(x.logs.iter().copied());
                self.held.lock().push(Box::new(x.block));
            }
            st.merging = 0;
        }
        self.recount(&st)?;
        self.held.lock().push(Box::new(st.space.clone()));
        let st = self.reshape(st, &[], &[]);
        let trigger = if self.zipper { 1 } else { (blocks as usize - 2).min(64) };
        *self.trigger.lock() = trigger;

        *self.shared.lock() = Some(shared);
        Ok(Some(Arc::new(st)))
    }

    fn flush(&self, eng: &Engine, imm: &Arc<Memtable>) -> Result<()> {
        let shared = self.shared()?;
        let cur = Self::state_of(&eng.version())?;
        let bad = |why: &str| Error::corruption(&*eng.region_path, 0, why.to_string());
        // The newest version of each key (and those snapshots need);
        // tombstones stay, older versions may be in older lists.
        let mut dropper = Dropper::new(eng.oldest_snapshot(), |_| true);
        let mut nodes = Vec::with_capacity(imm.len());
        let mut newest: Vec<(u64, u64)> = Vec::new();
        let mut it = imm.iter();
        it.seek_to_first()?;
        let mut last_key: Vec<u8> = Vec::new();
        while it.valid() {
            if dropper.keep(it.key()) {
                let loc = it.log_record()?.ok_or_else(|| bad("a memtable entry is not in the PM log"))?;
                let node = loc.node_off.ok_or_else(|| bad("a pm-only log entry has no skiplist node"))?;
                let p = ParsedKey::parse(it.key()).ok_or_else(|| bad("malformed key in the memtable"))?;
                if p.user_key != last_key.as_slice() {
                    newest.push((key_hash(p.user_key), node));
                    last_key.clear();
                    last_key.extend_from_slice(p.user_key);
                }
                nodes.push(node);
            }
            it.next()?;
        }
        drop(it);
        let imm_extents = imm.extents();
        let root = cur.space.extent_of(cur.root_off).cloned().ok_or_else(|| bad("root extent not leased"))?;
        let block = if nodes.is_empty() {
            None
        } else {
            let block = shared
                .take_block()
                .ok_or_else(|| Error::Pm("pm-only: no free list head block (too many L0 lists)".into()))?;
            let space = ListSpace::new(
                eng.region.clone(),
                eng.region_path.clone(),
                imm_extents.iter().cloned().chain([root.clone()]).collect(),
            );
            space.link_sorted(cur.head(block.block), &nodes)?;
            if eng.log.needs_msync() {
                for e in space.extents() {
                    eng.region.sync(e.offset(), e.len()).map_err(|e| Error::from_pm(&eng.region_path, e))?;
                }
            }
            if let Some(c) = &shared.cache {
                for &(hash, node) in &newest {
                    if let Some(e) = space.extent_of(node) {
                        c.insert(hash, node, e.head().number);
                    }
                }
            }
            self.count(&space, nodes.iter().copied(), true);
            Some((block, space))
        };
        let mut vs = eng.versions.lock();
        let mut next = Self::state_of(&vs.current())?;
        if let Some((block, _)) = &block {
            let block = block.clone();
            next.lists.insert(
                0,
                ListInfo { id: next.next_list_id, block, logs: imm_extents.iter().map(|e| e.head().number).collect() },
            );
            next.next_list_id += 1;
        }
        {
            let mut era = shared.era.lock();
            *era = era.follow(imm_extents.clone());
            next.era = era.clone();
        }
        let next = self.reshape(next, &imm_extents, &[]);
        let edit = VersionEdit {
            log_number: Some(imm.next_log()),
            last_sequence: Some(imm.last_seq().max(vs.last_sequence)),
            ..Default::default()
        };
        if let Err(e) = eng
            .commit(&mut vs, Commit { edit, l0: Some(Arc::new(next)), flushed: Some(imm.id()), ..Default::default() })
        {
            // The flush is retried with the same memtable, which counts
            // its nodes again.
            if let Some((_, space)) = &block {
                self.count(space, nodes.iter().copied(), false);
            }
            return Err(e);
        }
        self.held.lock().clear();
        eng.counters.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writers stop at `listdb_max_l0` lists. (PM pressure is met by the
    /// log writer, which leaves `cleaning_reserve` slots free for log cleaning.)
    fn stall_policy(&self) -> StallPolicy {
        let stop_at = self.stop_at();
        Box::new(move |v: &Version| {
            let lists = pm_only_in(v).map_or(0, |s| s.lists.len());
            Stall { stop: lists >= stop_at, slow: false }
        })
    }

    fn l1_target_bytes(&self) -> u64 {
        // No tables are ever written below.
        u64::MAX / 4
    }

    fn lanes(&self) -> &'static [&'static str] {
        &["zipper"]
    }

    fn next_job(&self, eng: &Engine, lane: Lane) -> Result<Option<Job<'_>>> {
        if lane != Lane::Own(0) {
            return Ok(None);
        }
        if eng.opts.disable_auto_compaction {
            return Ok(None);
        }
        let v = eng.version();
        let Some(st) = pm_only_in(&v) else { return Ok(None) };
        if !st.lists.is_empty() && st.lists.len() >= *self.trigger.lock() {
            return Ok(Some(Box::new(move |eng: &Engine| self.merge_oldest(eng).map(|_| ()))));
        }
        if self.victims(eng, st).is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(move |eng: &Engine| self.clean(eng).map(|_| ()))))
    }

    fn work_pending(&self, _eng: &Engine, v: &Version, auto: bool) -> bool {
        if self.merging.is_locked() {
            return true;
        }
        let lists = pm_only_in(v).map_or(0, |s| s.lists.len());
        auto && lists > 0 && lists >= *self.trigger.lock()
    }

    fn drain(&self, eng: &Engine) -> Result<usize> {
        while self.merge_oldest(eng)? {}
        Ok(1)
    }

    fn check(&self, eng: &Engine) -> Result<()> {
        let v = eng.version();
        let st = Self::state_of(&v)?;
        for list in st.all_lists() {
            st.space.walk(list, |n| st.space.value_of(n).map(|_| ()))?;
        }
        Ok(())
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn stats(&self, v: &Version, stats: &mut Stats) {
        stats.l0 = self.name();
        let Some(st) = pm_only_in(v) else { return };
        let live = self.live.lock();
        let log_bytes: u64 = st
            .space
            .extents()
            .iter()
            .filter(|e| e.head().kind == EXTENT_KIND_LOG || e.head().kind == EXTENT_KIND_RELOC)
            .map(|e| e.len())
            .sum();
        if let Some(l) = stats.levels.first_mut() {
            *l = LevelStats { level: 0, files: st.lists.len(), bytes: log_bytes };
        }
        stats.listdb_l0_lists = st.lists.len();
        stats.listdb_live_nodes = live.values().map(|c| c.nodes).sum();
        stats.listdb_live_bytes = live.values().map(|c| c.bytes).sum();
        stats.listdb_cleanings = self.cleanings.load(Ordering::Relaxed);
        stats.listdb_moved_nodes = self.moved_nodes.load(Ordering::Relaxed);
        stats.listdb_log_bytes = log_bytes;
        stats.listdb_merges = self.merges.load(Ordering::Relaxed);
        stats.listdb_merged_nodes = self.merged_nodes.load(Ordering::Relaxed);
        stats.listdb_dropped_nodes = self.dropped_nodes.load(Ordering::Relaxed);
        stats.listdb_regions = st.regions;
        if let Some(c) = &st.shared.cache {
            stats.listdb_cache_bytes = c.dram_bytes() as u64;
            stats.listdb_cache_hits = c.hits.load(Ordering::Relaxed);
        }
        stats.listdb_list_searches = st.shared.list_searches.load(Ordering::Relaxed);
    }
}
