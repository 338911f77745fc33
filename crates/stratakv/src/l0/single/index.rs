//! Putting a table's keys into the tree: after a flush (every key is the
//! newest) and after a selective compaction (re-pointing only the keys the
//! tree still finds in one of its inputs).

use std::collections::{BTreeMap, HashSet};

use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key::{Kind, ParsedKey};
use crate::pmtree::{PmTree, TreeValue};
use crate::sstable::{BlockHandle, BlockIter, Table};

/// Which tree entries indexing may change.
pub(super) enum Mode<'a> {
    /// A flushed table: its keys are newer than anything the tree has.
    Flush,
    /// A compaction output: only entries pointing at one of these inputs.
    Repoint(&'a HashSet<u64>),
}

/// What indexing one table did.
#[derive(Default, Debug)]
pub(super) struct Indexed {
    /// Tree entries now pointing at the table.
    pub alive: u64,
    /// Per other table, entries that stopped pointing at it.
    pub dead: BTreeMap<u64, u64>,
}

/// Calls `f(user key, newest kind, block)` for the first (newest) entry of
/// every user key of table `t`, in key order.
pub(super) fn for_each_newest(
    t: &Table,
    mut f: impl FnMut(&[u8], Kind, crate::key::SeqNo, BlockHandle) -> Result<()>,
) -> Result<()> {
    let mut last: Option<Vec<u8>> = None;
    for h in t.block_handles() {
        let mut it = BlockIter::new(t.read_block_with(h, false)?);
        it.seek_to_first()?;
        while it.valid() {
            let p = ParsedKey::parse(it.key()).ok_or_else(|| Error::corruption(t.path(), h.offset, "malformed key"))?;
            if last.as_deref() != Some(p.user_key) {
                f(p.user_key, p.kind, p.seq, h)?;
                last = Some(p.user_key.to_vec());
            }
            it.next()?;
        }
    }
    Ok(())
}

/// Keys indexed under one hold of the tree's writer lock: long enough to
/// keep the finger on a leaf, short enough not to hold up the other writer
/// (a flush and a compaction index at the same time) for long.
const BATCH_KEYS: usize = 1024;

/// Indexes table `t` (number `number`) into `tree`, one update per key:
/// the old value is read and replaced in the same step, in key order.
pub(super) fn index_table(tree: &PmTree, t: &Table, number: u64, mode: Mode<'_>) -> Result<Indexed> {
    let mut out = Indexed::default();
    let mut batch = tree.batch();
    let mut n = 0usize;
    for_each_newest(t, |uk, kind, _, h| {
        n += 1;
        if n.is_multiple_of(BATCH_KEYS) {
            batch.pause();
        }
        let v = TreeValue {
            file: number,
            block_offset: h.offset,
            block_len: h.size as u32,
            tombstone: kind == Kind::Delete,
        };
        match &mode {
            Mode::Flush => {
                let old = batch.update(uk, |_| Some(v))?;
                // The old value's table loses a live key. (A compaction
                // re-pointing the key in between only skews the counts,
                // which steer compaction and nothing else.)
                if let Some(old) = old.filter(|o| o.file != number) {
                    *out.dead.entry(old.file).or_default() += 1;
                }
                out.alive += 1;
            }
            Mode::Repoint(inputs) => {
                let old = batch.update(uk, |old| old.filter(|o| inputs.contains(&o.file)).map(|_| v))?;
                if old.is_some_and(|o| inputs.contains(&o.file)) {
                    out.alive += 1;
                }
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// Drops the tree entries that still point at table `t` (a compaction
/// input) once its outputs are indexed: tombstones the merge dropped.
pub(super) fn unindex_table(tree: &PmTree, t: &Table, number: u64) -> Result<()> {
    let mut batch = tree.batch();
    let mut n = 0usize;
    for_each_newest(t, |uk, _, _, _| {
        n += 1;
        if n.is_multiple_of(BATCH_KEYS) {
            batch.pause();
        }
        batch.remove_if(uk, number)?;
        Ok(())
    })
}
