//! Selective compaction: merge the picked tables, keep only what the tree
//! still finds in them (and what snapshots can read), re-point the tree at
//! the outputs, then delete the inputs.
//!
//! Two MANIFEST edits bracket the re-pointing. The first adds the outputs
//! and records the compaction as pending; the second deletes the inputs
//! and clears it. A crash between them leaves both sets live and every
//! tree entry pointing at one of them, so reads stay right, and recovery
//! finishes the re-pointing (`finish_pending`).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::index::{index_table, unindex_table, Mode};
use super::record::{KeyCounts, Pending};
use super::state::{numbers, single_in, SingleState};
use super::SingleLevelL0;
use crate::compaction::{build_tables, Dropper};
use crate::engine::{Commit, Engine};
use crate::error::{Error, Result};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::user_key;
use crate::pmtree::SortedGets;
use crate::version::{FileMeta, VersionEdit};

/// Skips entries whose key the tree finds in a table that is not an
/// input: a newer version lives there (SLM-DB's liveness test). Only
/// used when no snapshot was open when the compaction began, and only for
/// newer versions in tables that existed then: a snapshot taken since
/// reads at or above their sequence numbers, so they hide the skipped
/// entry from it too, while a table flushed since may hold a version newer
/// than that snapshot (found by `strata-stress --mode model`: an iterator
/// opened during a compaction missed a key).
struct LiveOnly<'a> {
    inner: MergingIterator,
    /// The merge is in key order: lookups reuse the last leaf.
    tree: SortedGets<'a>,
    inputs: &'a HashSet<u64>,
    /// Tables in the version when the compaction began.
    existing: &'a HashSet<u64>,
}

impl LiveOnly<'_> {
    fn skip_dead(&mut self, forward: bool) -> Result<()> {
        while self.inner.valid() {
            let live = match self.tree.get(user_key(self.inner.key()))? {
                Some(v) => self.inputs.contains(&v.file) || !self.existing.contains(&v.file),
                None => false,
            };
            if live {
                return Ok(());
            }
            if forward {
                self.inner.next()?;
            } else {
                self.inner.prev()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LiveOnly<'_> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.skip_dead(true)
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()?;
        self.skip_dead(false)
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)?;
        self.skip_dead(true)
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.skip_dead(true)
    }
    fn prev(&mut self) -> Result<()> {
        self.inner.prev()?;
        self.skip_dead(false)
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

impl SingleLevelL0 {
    /// The current state (the engine's version always has one once open).
    pub(super) fn current(&self, eng: &Engine) -> Result<Arc<SingleState>> {
        let v = eng.version();
        let s = single_in(&v)
            .ok_or_else(|| Error::corruption(&eng.dir, 0, "single-level database without its tree state"))?;
        Ok(Arc::new(SingleState {
            tree: s.tree.clone(),
            rec: s.rec.clone(),
            marked: s.marked.clone(),
            reads: s.reads.clone(),
        }))
    }

    /// Finishes the compaction the current state records as pending (one a
    /// crash or an error interrupted), if any.
    pub(super) fn finish_pending(&self, eng: &Engine) -> Result<()> {
        let _one = self.compacting.lock();
        let Some(p) = single_in(&eng.version()).and_then(|s| s.rec.pending.clone()) else { return Ok(()) };
        let inputs: HashSet<u64> = p.inputs.into_iter().collect();
        self.finish(eng, &inputs, &p.outputs)
    }

    /// Merges `inputs` (picked and marked busy) and re-points the tree.
    pub(super) fn compact(&self, eng: &Engine, inputs: &[Arc<FileMeta>]) -> Result<()> {
        let _one = self.compacting.lock();
        // A compaction an error interrupted goes first (the next job):
        // its outputs may hold these inputs' keys.
        if single_in(&eng.version()).is_some_and(|s| s.rec.pending.is_some()) {
            return Ok(());
        }
        let tree = self.tree()?;
        let input_set = numbers(inputs);
        let version = eng.tables_version();
        let others: Vec<Arc<FileMeta>> =
            version.files(0).iter().filter(|f| !input_set.contains(&f.number)).cloned().collect();
        let oldest = eng.oldest_snapshot();
        let snapshots_open = !eng.snapshots.lock().is_empty();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for f in inputs {
            children.push(Box::new(eng.tables.get(f.number)?.compaction_iter()));
        }
        let merged = MergingIterator::new(children);
        // A tombstone may go once no other table can hold an older version.
        let below = |uk: &[u8]| others.iter().any(|f| f.smallest_user() <= uk && uk <= f.largest_user());
        let mut dropper = Dropper::new(oldest, below);
        let next = || eng.new_file_number();
        let ctx = eng.build_ctx(&next, eng.opts.target_file_size);
        let outputs = if snapshots_open {
            let mut it = merged;
            build_tables(&ctx, &mut it, &mut dropper, &[])?
        } else {
            let existing = numbers(version.files(0));
            let mut it = LiveOnly { inner: merged, tree: tree.sorted_gets(), inputs: &input_set, existing: &existing };
            build_tables(&ctx, &mut it, &mut dropper, &[])?
        };
        let out_numbers: Vec<u64> = outputs.iter().map(|f| f.number).collect();
        let bytes: u64 = outputs.iter().map(|f| f.size).sum();
        // Edit 1: outputs live, compaction pending.
        {
            let mut vs = eng.versions.lock();
            let mut st = self.current(eng)?.as_ref().clone_state();
            st.rec.pending =
                Some(Pending { inputs: input_set.iter().copied().collect(), outputs: out_numbers.clone() });
            for n in &out_numbers {
                st.rec.counts.insert(*n, KeyCounts::default());
            }
            let edit = VersionEdit { added: outputs.iter().cloned().map(|f| (0, f)).collect(), ..Default::default() };
            eng.commit(&mut vs, Commit { edit, l0: Some(Arc::new(st)), ..Default::default() })?;
        }
        eng.counters.table_bytes_written.fetch_add(bytes, Ordering::Relaxed);
        self.finish(eng, &input_set, &out_numbers)?;
        self.compactions.fetch_add(1, Ordering::Relaxed);
        eng.counters.compactions.fetch_add(1, Ordering::Relaxed);
        eng.counters.compaction_bytes_read.fetch_add(inputs.iter().map(|f| f.size).sum(), Ordering::Relaxed);
        Ok(())
    }

    /// Re-points the tree from `inputs` to `outputs`, drops entries left
    /// pointing at inputs, then deletes the inputs (edit 2). Also what
    /// recovery runs for a pending compaction.
    pub(super) fn finish(&self, eng: &Engine, inputs: &HashSet<u64>, outputs: &[u64]) -> Result<()> {
        let tree = self.tree()?;
        let mut counts = Vec::new();
        for n in outputs {
            let t = eng.tables.get(*n)?;
            let done = index_table(&tree, &t, *n, Mode::Repoint(inputs))?;
            counts.push((*n, KeyCounts { total: done.alive, alive: done.alive }));
        }
        for n in inputs {
            // An input the MANIFEST no longer names was finished before.
            if let Ok(t) = eng.tables.get(*n) {
                unindex_table(&tree, &t, *n)?;
            }
        }
        // The re-pointed entries must be durable before the inputs they
        // no longer name are deleted (msync on an ordinary file).
        tree.sync()?;
        let mut vs = eng.versions.lock();
        let v = vs.current();
        let obsolete: Vec<Arc<FileMeta>> = v.files(0).iter().filter(|f| inputs.contains(&f.number)).cloned().collect();
        let mut st = self.current(eng)?.as_ref().clone_state();
        st.rec.pending = None;
        for n in inputs {
            st.rec.counts.remove(n);
        }
        for (n, c) in counts {
            st.rec.counts.insert(n, c);
        }
        st.marked = self.unmark(inputs);
        let edit = VersionEdit { deleted: obsolete.iter().map(|f| (0, f.number)).collect(), ..Default::default() };
        eng.commit(&mut vs, Commit { edit, l0: Some(Arc::new(st)), obsolete, ..Default::default() })?;
        Ok(())
    }
}

impl SingleState {
    /// A copy to change and install as the next state.
    pub(super) fn clone_state(&self) -> SingleState {
        SingleState {
            tree: self.tree.clone(),
            rec: self.rec.clone(),
            marked: self.marked.clone(),
            reads: self.reads.clone(),
        }
    }
}
