//! Level 0: what a sealed memtable becomes, and the work that moves it
//! further down. Each kind of level 0 implements [`Level0`]; `db/` drives
//! whichever the database was created with and never branches on the kind.
//!
//! | kind | file | a sealed memtable becomes |
//! | --- | --- | --- |
//! | `sstable` | [`tables`] | L0 tables on SSD, compacted into L1 (LevelDB/RocksDB) |
//! | `matrix` | [`matrix`] | a row in PM; column compactions move key ranges of the oldest rows into sorted runs or L1 (MatrixKV) |
//! | `single-level` | [`single`] | tables of the one level, every key indexed by a B+-tree in PM; selective compaction (SLM-DB) |
//! | `pm-only` | [`pmonly`] | a PM skiplist made of its own log entries; zipper compaction merges it into the L1 skiplist in place (ListDB) |
//!
//! What a kind keeps besides table files (the matrix's rows) is an
//! immutable [`L0State`] that each [`Version`] holds, so one MANIFEST edit
//! installs a level-0 change together with the table changes it makes, and
//! readers reach level 0 through the version they already hold
//! (`Version::get`, `Version::add_iterators`).
//!
//! # How the seed designs still to come fit this interface
//!
//! * **SLM-DB (`single-level`)**: `flush` writes the memtable as tables of
//!   its one level and inserts every key into a persistent B+-tree in PM
//!   before the MANIFEST edit that adds the tables; the tree's root and
//!   the compaction record are its [`L0State`] (its `get` answers every
//!   lookup that misses the memtables: found, or absent, never `Missing`
//!   for a key the tree lacks). Selective compaction is a [`Lane::Own`]
//!   lane; its candidates (live-key ratio, leaf scans, range-query
//!   sequentiality) feed its `stall_policy`, and `recover` opens the tree and finishes
//!   or rolls back the recorded compaction.
//! * **ListDB (`pm-only`)**: `flush` links the sealed memtable's log entries
//!   into an L0 PM skiplist (only link words are written) and publishes it
//!   in its [`L0State`]; zipper compaction into the L1 PM skiplist is a
//!   [`Lane::Own`] lane whose readers never block because every state a
//!   reader can hold is a sorted list; its `stall_policy` reports PM pressure, `drain`
//!   zips everything into L1, and `recover` resumes a zipper merge from its
//!   record. No table is ever written, so the leveled levels stay empty.

pub(crate) mod matrix;
pub(crate) mod pmonly;
pub(crate) mod single;
pub(crate) mod tables;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_pmem::{ExtentHead, Region};

use crate::engine::{Engine, StallPolicy};
use crate::error::Result;
use crate::memtable::Memtable;
use crate::options::{L0Kind, Options};
use crate::stats::Stats;
use crate::version::{L0State, Version};

pub(crate) use crate::engine::Stall;

/// Which threads a level-0 job is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// The kind's own thread number `i` (see [`Level0::lanes`]).
    Own(usize),
    /// The shared compaction threads, which take level-0 jobs before
    /// leveled compactions.
    Shared,
}

/// A unit of level-0 background work, picked with its inputs marked busy;
/// running it releases them, whatever the outcome.
pub(crate) type Job<'a> = Box<dyn FnOnce(&Engine) -> Result<()> + Send + 'a>;

/// What `recover` works from.
pub(crate) struct RecoverCx<'a> {
    /// The PM region.
    pub region: &'a Region,
    /// Its file's path, for errors.
    pub region_path: &'a Arc<PathBuf>,
    /// The MANIFEST, for errors in the record.
    pub manifest_path: &'a Path,
    /// Level 0's record as the MANIFEST holds it (None: none yet).
    pub record: Option<&'a [u8]>,
    /// Every extent head of the region.
    pub heads: &'a [ExtentHead],
}

/// A kind of level 0 (see the module doc).
pub(crate) trait Level0: Send + Sync {
    /// The kind's name (`Stats::l0`).
    fn name(&self) -> &'static str;

    /// Rebuilds level 0's state when the database opens: adopts the PM
    /// extents its record names, retires extents of its own kinds that no
    /// record names (built but never published), and takes out of
    /// `older_logs` (log extents older than the MANIFEST's log number) the
    /// ones its state still points into; the rest are retired after it.
    fn recover(&self, cx: &RecoverCx<'_>, older_logs: &mut Vec<ExtentHead>) -> Result<Option<Arc<dyn L0State>>>;

    /// Makes the oldest sealed memtable `imm` (every write in it is
    /// published) part of level 0, durably, and installs the change; then
    /// does whatever work belongs with a flush (the matrix merges rows).
    fn flush(&self, eng: &Engine, imm: &Arc<Memtable>) -> Result<()>;

    /// The rule for how writers must wait for level 0 in a version: the
    /// engine applies it once per installed version, with its `state` lock
    /// held (so it must not take locks), and writers read the result.
    fn stall_policy(&self) -> StallPolicy;

    /// Target bytes of L1 for the leveled compaction below level 0.
    fn l1_target_bytes(&self) -> u64;

    /// PM bytes a flush of a memtable of `records` records allocates in
    /// the region (a matrix row), which the log must leave free: the flush
    /// is what lets the memtable's log extents be freed, so if writers took
    /// the last slots first, neither could go on. Default: none.
    fn flush_pm_bytes(&self, _records: u64) -> u64 {
        0
    }

    /// Names of the threads the kind runs jobs on besides the flush thread
    /// and the shared compaction threads ([`Lane::Own`]).
    fn lanes(&self) -> &'static [&'static str];

    /// The next job for `lane`, if one is due.
    fn next_job(&self, eng: &Engine, lane: Lane) -> Result<Option<Job<'_>>>;

    /// Whether level-0 work is running, or due (`auto`: background
    /// compaction is on).
    fn work_pending(&self, eng: &Engine, v: &Version, auto: bool) -> bool;

    /// Moves everything level 0 holds now below it (`compact_range`);
    /// returns the level whose files `compact_range` pushes down next.
    fn drain(&self, eng: &Engine) -> Result<usize>;

    /// Verifies level 0's own structures beyond table checksums (`strata
    /// check`); the default has none.
    fn check(&self, _eng: &Engine) -> Result<()> {
        Ok(())
    }

    /// The first level whose tables only the version names, so that a
    /// MANIFEST edit may delete them and a compaction may rewrite them into
    /// the next level (range tombstones do both); None if the kind indexes
    /// its tables itself (the single level's tree) or has none. Default: 1.
    fn first_free_level(&self) -> Option<usize> {
        Some(1)
    }

    /// Fills level 0's part of `stats` for version `v`.
    fn stats(&self, v: &Version, stats: &mut Stats);

    /// The kind itself, for unit tests that drive its jobs directly.
    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Writes sealed memtable `imm` as tables (none if it is empty), dropping
/// a tombstone only where `may_exist_below` says no older version of its
/// key can be anywhere else.
pub(crate) fn write_memtable(
    eng: &Engine,
    imm: &Arc<Memtable>,
    may_exist_below: &dyn Fn(&[u8]) -> bool,
) -> Result<Vec<crate::version::FileMeta>> {
    if imm.is_empty() {
        return Ok(Vec::new());
    }
    let next = || eng.new_file_number();
    let merge = crate::compaction::Merge {
        inputs: vec![Box::new(imm.iter())],
        oldest_snapshot: eng.oldest_snapshot(),
        may_exist_below,
        grandparents: &[],
    };
    crate::compaction::execute(&eng.build_ctx(&next, u64::MAX), merge)
}

/// The level 0 a database was created with (`code` from its MANIFEST;
/// a new database's is `opts.l0`), with `opts.l0` set to match.
pub(crate) fn for_manifest(opts: &mut Options, code: Option<u8>) -> Box<dyn Level0> {
    opts.l0 = L0Kind::from_code(code);
    match opts.l0 {
        L0Kind::Sstable => Box::new(tables::TablesL0::new(opts)),
        L0Kind::Matrix => Box::new(matrix::MatrixL0::new(opts)),
        L0Kind::SingleLevel => {
            // The tree finds every key's block: no filters, and the
            // leveled picker never compacts the one level.
            opts.bloom_bits_per_key = 0;
            opts.l0_compaction_trigger = usize::MAX;
            Box::new(single::SingleLevelL0::new(opts))
        }
        L0Kind::PmOnly => {
            // Nothing goes below level 0: no tables, no filters.
            opts.bloom_bits_per_key = 0;
            opts.l0_compaction_trigger = usize::MAX;
            Box::new(pmonly::PmOnlyL0::new(opts))
        }
    }
}
