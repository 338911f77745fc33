//! A cursor over one PM skiplist, as an [`InternalIterator`]. It walks
//! level 0 forward; a step back is a search for the last node before the
//! current one (the nodes have no back links). Its [`ListSpace`] holds the
//! leases on the extents it reads, so a merge that unlinks nodes under it
//! never frees them while it lives; an unlinked node still points forward
//! into the list.

use std::sync::Arc;

use super::node::Node;
use super::{ListHead, ListSpace};
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::ParsedKey;

/// A cursor over one list.
pub(crate) struct ListIter {
    /// What keeps the list's head block and every extent it can reach
    /// from being reused while the cursor lives (the pm-only state: its
    /// head-block leases and eras).
    _keep: Arc<dyn std::any::Any + Send + Sync>,
    space: Arc<ListSpace>,
    list: ListHead,
    cur: Option<Node>,
    /// The current internal key.
    key: Vec<u8>,
}

impl ListIter {
    /// A cursor over `list` (not positioned), holding `keep` alive.
    pub fn new(keep: Arc<dyn std::any::Any + Send + Sync>, space: Arc<ListSpace>, list: ListHead) -> ListIter {
        ListIter { _keep: keep, space, list, cur: None, key: Vec::new() }
    }

    fn land(&mut self, n: Option<Node>) -> Result<()> {
        self.cur = None;
        if let Some(n) = n {
            let key = self.space.key_of(&n)?;
            self.key.clear();
            self.key.extend_from_slice(key);
            self.key.extend_from_slice(&n.trailer.to_le_bytes());
            // Checked once here so that value() can hand out the slice.
            self.space.value_of(&n)?;
            self.cur = Some(n);
        }
        Ok(())
    }

    /// Lands on the last node before the target that `before` accepts.
    fn land_before(&mut self, before: &mut dyn FnMut(&Node) -> Result<bool>) -> Result<()> {
        let p = self.space.preds_by(self.list, 0, before)?;
        self.land(p[0].node)
    }
}

/// An internal key as (user key, trailer); a bare user key sorts first.
fn split(target: &[u8]) -> (Vec<u8>, u64) {
    match ParsedKey::parse(target) {
        Some(p) => (p.user_key.to_vec(), crate::key::trailer(p.seq, p.kind)),
        None => (target.to_vec(), u64::MAX),
    }
}

impl InternalIterator for ListIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let n = self.space.next_node(self.list.links(0))?;
        self.land(n)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.land_before(&mut |_| Ok(true))
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let (ukey, trailer) = split(target);
        let n = self.space.seek(self.list, 0, &ukey, trailer)?;
        self.land(n)
    }

    /// One search for the last node <= `target`, not the default seek and
    /// step back: merges and log cleaning change the list between two
    /// searches, and the step back could then land past `target`.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let (ukey, trailer) = split(target);
        let space = self.space.clone();
        self.land_before(&mut |m| Ok(space.cmp(m, &ukey, trailer)? != std::cmp::Ordering::Greater))
    }

    fn next(&mut self) -> Result<()> {
        match self.cur {
            Some(n) => {
                let nx = self.space.next_node(n.links())?;
                self.land(nx)
            }
            None => Ok(()),
        }
    }

    fn prev(&mut self) -> Result<()> {
        let Some(n) = self.cur else { return Ok(()) };
        let ukey = self.space.key_of(&n)?.to_vec();
        let space = self.space.clone();
        self.land_before(&mut |m| Ok(space.cmp(m, &ukey, n.trailer)? == std::cmp::Ordering::Less))
    }

    fn key(&self) -> &[u8] {
        if self.cur.is_some() {
            &self.key
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        match self.cur {
            Some(n) => self.space.value_of(&n).unwrap_or(&[]),
            None => &[],
        }
    }
}
