//! What each extent holds of the lists: live nodes and their bytes, kept
//! by flushes, merges and cleanings and rebuilt at open by walking the
//! lists; and the state's extents reshaped to match (an extent with no live
//! node leaves it).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use strata_pmem::Extent;

use super::state::PmOnlyState;
use super::{PmOnlyL0, EXTENT_KIND_RELOC};
use crate::error::{Error, Result};
use crate::key::key_hash;
use crate::log::EXTENT_KIND_LOG;
use crate::pmlist::zipper::{all_shadowed, drop_shadowed, reap};
use crate::pmlist::{ListHead, ListSpace};

/// What an extent holds of the lists.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Live {
    pub nodes: u64,
    /// Bytes of those nodes' entries (approximate for batches: what
    /// cleaning would copy).
    pub bytes: u64,
}

/// Bytes a node's entry takes for the live-bytes ratios: header, node, key, value.
pub(super) fn node_bytes(space: &ListSpace, n: &crate::pmlist::node::Node) -> u64 {
    let value = space.value_of(n).map_or(0, |v| v.len() as u64);
    crate::log::HEADER_LEN as u64 + n.size() + n.key_len as u64 + value + 4
}

impl PmOnlyL0 {
    /// Adds (or takes away) each node in `nodes` to (from) the live
    /// nodes and bytes of the extent holding it.
    pub(super) fn count(&self, space: &ListSpace, nodes: impl Iterator<Item = u64>, add: bool) {
        let mut live = self.live.lock();
        for off in nodes {
            let (Some(e), Ok(n)) = (space.extent_of(off), space.node(off)) else { continue };
            let bytes = node_bytes(space, &n);
            let c = live.entry(e.offset()).or_default();
            if add {
                c.nodes += 1;
                c.bytes += bytes;
            } else {
                c.nodes = c.nodes.saturating_sub(1);
                c.bytes = c.bytes.saturating_sub(bytes);
            }
        }
    }

    /// Counts every node of `st`'s lists (at open), after unlinking the
    /// hidden versions and reaping the L1 tombstones that hide nothing (no
    /// reader is open yet).
    pub(super) fn recount(&self, st: &PmOnlyState) -> Result<()> {
        let shadowed = all_shadowed(&st.space, st.l1())?;
        let dropped = drop_shadowed(&st.space, st.l1(), &shadowed)?;
        self.dropped_nodes.fetch_add(dropped.len() as u64, Ordering::Relaxed);
        let mut tombstones = Vec::new();
        let mut prev: Option<(u64, Vec<u8>)> = None;
        st.space.walk(st.l1(), |n| {
            let key = st.space.key_of(n)?;
            if let Some((t, k)) = prev.take() {
                if k != key {
                    tombstones.push(t);
                }
            }
            if n.is_delete() {
                prev = Some((n.off, key.to_vec()));
            }
            Ok(())
        })?;
        tombstones.extend(prev.map(|(t, _)| t));
        let reaped = reap(&st.space, st.l1(), &tombstones)?;
        self.dropped_nodes.fetch_add(reaped.len() as u64, Ordering::Relaxed);
        let mut live: HashMap<u64, Live> = HashMap::new();
        // Oldest list first, so the lookup cache ends up with each key's
        // newest version, as flushes would have left it.
        let lists: Vec<ListHead> = st.all_lists().collect();
        for list in lists.into_iter().rev() {
            let mut last: Vec<u8> = Vec::new();
            st.space.walk(list, |n| {
                let e = st.space.extent_of(n.off).ok_or_else(|| {
                    Error::corruption(&*st.space.path, n.off, "skiplist node outside the lists' extents")
                })?;
                let c = live.entry(e.offset()).or_default();
                c.nodes += 1;
                c.bytes += node_bytes(&st.space, n);
                let key = st.space.key_of(n)?;
                if let Some(cache) = st.shared.cache.as_ref().filter(|_| key != last.as_slice()) {
                    cache.insert(key_hash(key), n.off, e.head().number);
                    last.clear();
                    last.extend_from_slice(key);
                }
                Ok(())
            })?;
        }
        *self.live.lock() = live;
        Ok(())
    }

    /// `st` with its space rebuilt over the root, the lists' extents, the
    /// L1 extents that still hold a live node (the rest leave the state,
    /// `l1_logs` and `l1_relocs`) and `fresh` (relocation extents about to
    /// be filled).
    pub(super) fn reshape(&self, mut st: PmOnlyState, extra: &[Extent], fresh: &[Extent]) -> PmOnlyState {
        let filling = self.filling.lock().clone();
        let fresh: Vec<Extent> = fresh.iter().chain(&filling).cloned().collect();
        let fresh = &fresh[..];
        let mut by_number: HashMap<(u8, u64), Extent> = HashMap::new();
        let mut root = None;
        for e in st.space.extents().iter().chain(extra).chain(fresh) {
            if e.head().kind == EXTENT_KIND_LOG || e.head().kind == EXTENT_KIND_RELOC {
                by_number.insert((e.head().kind, e.head().number), e.clone());
            } else if e.offset() == st.root_off {
                root = Some(e.clone());
            }
        }
        let mut live = self.live.lock();
        let fresh: HashSet<u64> = fresh.iter().map(|e| e.offset()).collect();
        let holds = |kind: u8, n: &u64| {
            by_number
                .get(&(kind, *n))
                .is_some_and(|e| fresh.contains(&e.offset()) || live.get(&e.offset()).is_some_and(|c| c.nodes > 0))
        };
        st.l1_logs.retain(|n| holds(EXTENT_KIND_LOG, n));
        st.l1_relocs.retain(|n| holds(EXTENT_KIND_RELOC, n));
        let keep: HashSet<(u8, u64)> = st
            .lists
            .iter()
            .flat_map(|l| l.logs.iter().copied())
            .chain(st.l1_logs.iter().copied())
            .map(|n| (EXTENT_KIND_LOG, n))
            .chain(st.l1_relocs.iter().map(|n| (EXTENT_KIND_RELOC, *n)))
            .collect();
        by_number.retain(|n, e| {
            let k = keep.contains(n);
            if !k {
                live.remove(&e.offset());
            }
            k
        });
        let extents: Vec<Extent> = root.into_iter().chain(by_number.into_values()).collect();
        st.space = Arc::new(ListSpace::new(st.space.region.clone(), st.space.path.clone(), extents));
        st
    }
}
