//! Level 0 as SSTables (LevelDB, RocksDB): each sealed memtable becomes
//! tables of level 0, whose key ranges overlap; the leveled compaction
//! picker merges them into L1 once there are `l0_compaction_trigger` of
//! them, and writers slow down and then stop as they pile up.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use strata_pmem::ExtentHead;

use super::{Job, Lane, Level0, RecoverCx, Stall};
use crate::compaction::picker::key_may_exist_below;
use crate::engine::{Commit, Engine, StallPolicy};
use crate::error::Result;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::stats::Stats;
use crate::version::{L0State, Version, VersionEdit};

/// SSTable level 0.
pub(crate) struct TablesL0 {
    slowdown_at: usize,
    stop_at: usize,
    l1_bytes: u64,
}

impl TablesL0 {
    /// The level 0 of `opts`.
    pub fn new(opts: &Options) -> TablesL0 {
        TablesL0 {
            // With automatic compaction off nothing would clear a stall:
            // none, as RocksDB does (`disable_auto_compactions`).
            slowdown_at: if opts.disable_auto_compaction { usize::MAX } else { opts.l0_slowdown_writes_trigger },
            stop_at: if opts.disable_auto_compaction { usize::MAX } else { opts.l0_stop_writes_trigger },
            l1_bytes: opts.max_bytes_for_level_base,
        }
    }
}

/// Whether `uk` lies in the key range of an L0 table of `v`.
fn in_l0(v: &Version, uk: &[u8]) -> bool {
    v.files(0).iter().any(|f| f.smallest_user() <= uk && uk <= f.largest_user())
}

impl Level0 for TablesL0 {
    fn first_free_level(&self) -> Option<usize> {
        Some(0)
    }

    fn name(&self) -> &'static str {
        "sstable"
    }

    fn recover(&self, _cx: &RecoverCx<'_>, _older_logs: &mut Vec<ExtentHead>) -> Result<Option<Arc<dyn L0State>>> {
        // Everything is in tables, which the MANIFEST names.
        Ok(None)
    }

    /// Writes the memtable to L0 tables and retires its log.
    fn flush(&self, eng: &Engine, imm: &Arc<Memtable>) -> Result<()> {
        let version = eng.tables_version();
        let below = |uk: &[u8]| key_may_exist_below(&version, 0, uk) || in_l0(&version, uk);
        let outputs = super::write_memtable(eng, imm, &below)?;
        let bytes: u64 = outputs.iter().map(|f| f.size).sum();
        let mut vs = eng.versions.lock();
        let edit = VersionEdit {
            log_number: Some(imm.next_log()),
            last_sequence: Some(imm.last_seq().max(vs.last_sequence)),
            added: outputs.into_iter().map(|f| (0, f)).collect(),
            ..Default::default()
        };
        eng.commit(&mut vs, Commit { edit, flushed: Some(imm.id()), ..Default::default() })?;
        eng.counters.table_bytes_written.fetch_add(bytes, Ordering::Relaxed);
        eng.counters.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn stall_policy(&self) -> StallPolicy {
        let (slowdown_at, stop_at) = (self.slowdown_at, self.stop_at);
        Box::new(move |v: &Version| {
            let files = v.files(0).len();
            Stall { stop: files >= stop_at, slow: files >= slowdown_at }
        })
    }

    fn l1_target_bytes(&self) -> u64 {
        self.l1_bytes
    }

    fn lanes(&self) -> &'static [&'static str] {
        &[]
    }

    fn next_job(&self, _eng: &Engine, _lane: Lane) -> Result<Option<Job<'_>>> {
        // The leveled picker compacts L0 tables like any level.
        Ok(None)
    }

    fn work_pending(&self, _eng: &Engine, _v: &Version, _auto: bool) -> bool {
        false
    }

    fn drain(&self, _eng: &Engine) -> Result<usize> {
        // compact_range pushes L0's tables down like any level's.
        Ok(0)
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn stats(&self, _v: &Version, stats: &mut Stats) {
        stats.l0 = self.name();
    }
}
