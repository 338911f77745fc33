//! The one compaction executor: merges sorted sources into new tables,
//! dropping what no reader can see. A memtable flush, a leveled
//! compaction, a run merge and a column of the matrix are all one
//! [`Merge`]; they differ only in their inputs and where the output goes.

use std::sync::Arc;

use super::{build_tables, BuildCtx, Dropper};
use crate::error::Result;
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::SeqNo;
use crate::version::{FileMeta, LevelIter, TableCache};

/// A merge of sorted sources into tables.
pub(crate) struct Merge<'a> {
    /// The sources, newest first (on equal keys the newer wins).
    pub inputs: Vec<Box<dyn InternalIterator>>,
    /// The oldest sequence any reader may read at: an older version that
    /// a version at or below it hides is dropped.
    pub oldest_snapshot: SeqNo,
    /// Whether a user key may have versions below the output: a tombstone
    /// visible to every reader is dropped only if not.
    pub may_exist_below: &'a dyn Fn(&[u8]) -> bool,
    /// Tables of the level below the output, to cut outputs early.
    pub grandparents: &'a [Arc<FileMeta>],
}

/// Runs `m`, writing tables as `ctx` says; on failure no new table is left.
pub(crate) fn execute(ctx: &BuildCtx<'_>, m: Merge<'_>) -> Result<Vec<FileMeta>> {
    let mut dropper = Dropper::new(m.oldest_snapshot, m.may_exist_below);
    let mut inputs = m.inputs;
    if inputs.len() == 1 {
        if let Some(mut only) = inputs.pop() {
            return build_tables(ctx, &mut *only, &mut dropper, m.grandparents);
        }
    }
    let mut it = MergingIterator::new(inputs);
    build_tables(ctx, &mut it, &mut dropper, m.grandparents)
}

/// A source over one table (an L0 table, whose keys overlap its neighbours').
pub(crate) fn table_input(tables: &TableCache, f: &FileMeta) -> Result<Box<dyn InternalIterator>> {
    Ok(Box::new(tables.get(f.number)?.compaction_iter()))
}

/// A source over sorted, disjoint tables (a level below L0, or a run).
pub(crate) fn sorted_input(tables: &Arc<TableCache>, files: Vec<Arc<FileMeta>>) -> Box<dyn InternalIterator> {
    Box::new(LevelIter::for_compaction(tables.clone(), files))
}
