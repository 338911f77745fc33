//! Log cleaning (not in ListDB): once the PM region is half used, the L1
//! extents whose live entries fill less than half of them are emptied by
//! moving their live nodes into fresh relocation extents
//! ([`crate::pmlist::clean`]); the emptied extents then leave the state
//! and are freed once no reader of an older version is left. Without it,
//! random overwrites leave nearly every log extent holding a few live
//! nodes, and PM use grows with every pass.
//!
//! The fresh extents start an era, as a flush's log extents do (see
//! [`super::state::Era`]): a reader of an older version may walk onto the
//! copies, and a later cleaning may empty those extents in turn.
//!
//! Order: the relocation extents are allocated and recorded in the
//! MANIFEST before any link points into them; the moves persist each
//! store; a last edit drops the emptied extents. A crash in between
//! leaves each moved node either at its old place or its new one (both
//! extents recorded), and the counts are rebuilt at open.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use strata_pmem::Extent;

use super::{Live, PmOnlyL0, EXTENT_KIND_RELOC};
use crate::batch::WriteBatch;
use crate::engine::{Commit, Engine};
use crate::error::{Error, Result};
use crate::log::{entry_len, write_entry, Towers, EXTENT_KIND_LOG, HEADER_LEN};
use crate::pmlist::clean::relocate;
use crate::pmlist::node::Node;

use super::state::PmOnlyState;

/// Most extents one cleaning empties.
const CLEAN_BATCH: usize = 16;
/// An L1 extent whose live entries fill less than this share of it (in
/// percent) is worth emptying.
const CLEAN_LIVE_PERCENT: u64 = 50;

impl PmOnlyL0 {
    /// The L1 extents to empty now, emptiest first: none while the region
    /// is less than half used.
    pub(super) fn victims(&self, eng: &Engine, st: &PmOnlyState) -> Vec<(Extent, u64)> {
        if eng.region.free_slots() * 2 > eng.region.slot_count() {
            return Vec::new();
        }
        let in_lists: HashSet<u64> = st.lists.iter().flat_map(|l| l.logs.iter().copied()).collect();
        let live = self.live.lock();
        let mut v: Vec<(Extent, u64)> = st
            .space
            .extents()
            .iter()
            .filter(|e| {
                let (kind, n) = (e.head().kind, e.head().number);
                (kind == EXTENT_KIND_LOG && st.l1_logs.contains(&n) && !in_lists.contains(&n))
                    || (kind == EXTENT_KIND_RELOC && st.l1_relocs.contains(&n))
            })
            .filter_map(|e| {
                let c: Live = live.get(&e.offset()).copied().unwrap_or_default();
                (c.bytes * 100 < e.len() * CLEAN_LIVE_PERCENT).then(|| (e.clone(), c.bytes))
            })
            .collect();
        v.sort_by_key(|(e, b)| b * 1000 / e.len().max(1));
        v.truncate(CLEAN_BATCH);
        // As many as the free slots can take the live nodes of (one slot
        // spare for what does not pack).
        let budget = eng.region.free_slots().saturating_sub(1) * eng.region.slot_bytes() * 10 / 11;
        let mut need = 0;
        v.retain(|(_, b)| {
            need += b;
            need <= budget
        });
        v
    }

    /// Empties the extents [`PmOnlyL0::victims`] names; false if none is due
    /// (or no PM is left to move into).
    pub(super) fn clean(&self, eng: &Engine) -> Result<bool> {
        let _g = self.merging.lock();
        let cur = Self::state_of(&eng.version())?;
        let victims = self.victims(eng, &cur);
        if victims.is_empty() {
            return Ok(false);
        }
        let need: u64 = victims.iter().map(|(_, b)| b).sum();
        let slot = eng.region.slot_bytes().max(1);
        let mut writers = Vec::new();
        let mut next_reloc = cur.next_reloc;
        for _ in 0..(need * 11 / 10 / slot + 1) {
            match eng.region.allocate(EXTENT_KIND_RELOC, 1, next_reloc) {
                Ok(w) => {
                    writers.push(w);
                    next_reloc += 1;
                }
                Err(_) => break,
            }
        }
        if writers.is_empty() {
            return Ok(false);
        }
        let fresh: Vec<Extent> = writers.iter().map(|w| w.extent().clone()).collect();
        *self.filling.lock() = fresh.clone();
        let r = self.fill_relocs(eng, &cur, &victims, writers, &fresh, next_reloc);
        self.filling.lock().clear();
        r
    }

    /// Records the relocation extents, moves the victims' live nodes into
    /// them, and drops what emptied.
    fn fill_relocs(
        &self,
        eng: &Engine,
        cur: &PmOnlyState,
        victims: &[(Extent, u64)],
        mut writers: Vec<strata_pmem::ExtentWriter>,
        fresh: &[Extent],
        next_reloc: u64,
    ) -> Result<bool> {
        let pm = |e| Error::from_pm(&eng.region_path, e);
        let space = {
            let mut vs = eng.versions.lock();
            let mut next = Self::state_of(&vs.current())?;
            next.l1_relocs.extend(fresh.iter().map(|e| e.head().number));
            next.next_reloc = next_reloc;
            // The fresh extents start an era, as a flush's log extents do:
            // a reader of an older version (a cursor standing on a node
            // about to move) walks onto the copies, and a later cleaning
            // may empty these extents again; they must stay leased until
            // that reader is gone, not only while a version's state names
            // them. Followed under the versions lock, on the newest era.
            {
                let shared = self.shared()?;
                let mut era = shared.era.lock();
                *era = era.follow(fresh.to_vec());
                next.era = era.clone();
            }
            let next = self.reshape(next, &[], fresh);
            let space = next.space.clone();
            eng.commit(&mut vs, Commit { l0: Some(Arc::new(next)), ..Default::default() })?;
            self.held.lock().clear();
            space
        };
        let ranges: Vec<(u64, u64)> = victims.iter().map(|(e, _)| (e.offset(), e.offset() + e.len())).collect();
        let is_victim = |off: u64| ranges.iter().any(|&(a, b)| off >= a && off < b);
        let mut wi = 0;
        let mut copy = |n: &Node| -> Result<Option<u64>> {
            let key = space.key_of(n)?;
            let mut b = WriteBatch::new();
            if n.is_delete() {
                b.delete(key);
            } else {
                b.put(key, space.value_of(n)?);
            }
            let towers = Towers::one(n.height, n.region);
            let len = entry_len(towers.bytes() + b.rep().len());
            while let Some(w) = writers.get_mut(wi) {
                let number = w.extent().head().number;
                if let Some(mut s) = w.reserve(len) {
                    write_entry(&mut s, number, n.seq(), 1, b.rep(), Some(&towers)).map_err(pm)?;
                    return Ok(Some(s.offset() + HEADER_LEN as u64));
                }
                wi += 1;
            }
            Ok(None)
        };
        let moved = relocate(&space, cur.l1(), &is_victim, &mut copy)?;
        if eng.log.needs_msync() {
            for e in space.extents() {
                eng.region.sync(e.offset(), e.len()).map_err(pm)?;
            }
        }
        self.count(&space, moved.copies.iter().copied(), true);
        self.count(&space, moved.dead.iter().copied(), false);
        self.cleanings.fetch_add(1, Ordering::Relaxed);
        self.moved_nodes.fetch_add(moved.dead.len() as u64, Ordering::Relaxed);
        let mut vs = eng.versions.lock();
        self.filling.lock().clear();
        let next = self.reshape(Self::state_of(&vs.current())?, &[], &[]);
        eng.commit(&mut vs, Commit { l0: Some(Arc::new(next)), ..Default::default() })?;
        Ok(true)
    }
}
