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
pub(super) fn for_each_newest(t: &Table, mut f: impl FnMut(&[u8], Kind, BlockHandle) -> Result<()>) -> Result<()> {
    let mut last: Option<Vec<u8>> = None;
    for h in t.block_handles() {
        let mut it = BlockIter::new(t.read_block_with(h, false)?);
        it.seek_to_first()?;
        while it.valid() {
            let p = ParsedKey::parse(it.key()).ok_or_else(|| Error::corruption(t.path(), h.offset, "malformed key"))?;
            if last.as_deref() != Some(p.user_key) {
                f(p.user_key, p.kind, h)?;
                last = Some(p.user_key.to_vec());
            }
            it.next()?;
        }
    }
    Ok(())
}

/// Indexes table `t` (number `number`) into `tree`.
pub(super) fn index_table(tree: &PmTree, t: &Table, number: u64, mode: Mode<'_>) -> Result<Indexed> {
    let mut out = Indexed::default();
    for_each_newest(t, |uk, kind, h| {
        let v = TreeValue {
            file: number,
            block_offset: h.offset,
            block_len: h.size as u32,
            tombstone: kind == Kind::Delete,
        };
        match &mode {
            Mode::Flush => {
                // The old value's table loses a live key. (A compaction
                // re-pointing the key in between only skews the counts,
                // which steer compaction and nothing else.)
                if let Some(old) = tree.get(uk)? {
                    if old.file != number {
                        *out.dead.entry(old.file).or_default() += 1;
                    }
                }
                tree.upsert(uk, v)?;
                out.alive += 1;
            }
            Mode::Repoint(inputs) => {
                if let Some(old) = tree.get(uk)? {
                    if inputs.contains(&old.file) && tree.replace_if(uk, old.file, v)? {
                        out.alive += 1;
                    }
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
    for_each_newest(t, |uk, _, _| {
        tree.remove_if(uk, number)?;
        Ok(())
    })
}
