//! Options: plain fields with defaults that need no tuning.

use std::path::PathBuf;
use std::sync::Arc;

use strata_pmem::SimPm;

use crate::fs::{default_fs, Fs};
use crate::key::PrefixExtractor;
use crate::sstable::{Compression, IndexKind};

/// What level 0 is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L0Kind {
    /// Level 0 is SSTables on SSD (RocksDB/LevelDB layout), the baseline.
    Sstable,
    /// Level 0 is the matrix container in PM (MatrixKV).
    Matrix,
    /// One level of SSTables indexed by a persistent B+-tree in PM, with
    /// selective compaction (SLM-DB).
    SingleLevel,
    /// All data in PM: sealed memtables become PM skiplists made of their
    /// log entries, merged into one L1 skiplist by zipper compaction
    /// (ListDB). Nothing but the MANIFEST goes to SSD.
    PmOnly,
}

impl L0Kind {
    /// The MANIFEST encoding.
    pub(crate) fn code(self) -> u8 {
        match self {
            L0Kind::Sstable => 0,
            L0Kind::Matrix => 1,
            L0Kind::SingleLevel => 2,
            L0Kind::PmOnly => 3,
        }
    }

    /// The kind a MANIFEST records (`None`: written before kinds were
    /// recorded, which had SSTable L0s).
    pub(crate) fn from_code(code: Option<u8>) -> L0Kind {
        match code {
            Some(1) => L0Kind::Matrix,
            Some(2) => L0Kind::SingleLevel,
            Some(3) => L0Kind::PmOnly,
            _ => L0Kind::Sstable,
        }
    }

    /// Parses `sstable`, `matrix`, `single-level` or `pm-only`.
    pub fn parse(s: &str) -> Option<L0Kind> {
        match s {
            "sstable" => Some(L0Kind::Sstable),
            "matrix" => Some(L0Kind::Matrix),
            "single-level" | "single_level" | "slm" => Some(L0Kind::SingleLevel),
            "pm-only" | "pm_only" | "listdb" => Some(L0Kind::PmOnly),
            _ => None,
        }
    }

    /// Name as accepted by [`L0Kind::parse`].
    pub fn name(self) -> &'static str {
        match self {
            L0Kind::Sstable => "sstable",
            L0Kind::Matrix => "matrix",
            L0Kind::SingleLevel => "single-level",
            L0Kind::PmOnly => "pm-only",
        }
    }
}

/// How to open a database. Every field has a default; see [`Options::default`].
#[derive(Clone, Debug)]
pub struct Options {
    // --- usual ---
    /// Create the database if the directory holds none. Default: true.
    pub create_if_missing: bool,
    /// Fail if a database already exists. Default: false.
    pub error_if_exists: bool,
    /// What level 0 is made of, for a new database (an existing one keeps
    /// its own). Default: [`L0Kind::Matrix`].
    pub l0: L0Kind,
    /// Directory of the PM region file. Default: `<data dir>/pm`. Put it on
    /// a DAX mount for real PM, or on /dev/shm to emulate PM with DRAM.
    pub pm_dir: Option<PathBuf>,
    /// Size of a new PM region in bytes: a ceiling, not a cost. The file
    /// is sparse and each extent gets its blocks (fallocate) when it is
    /// allocated, a few ahead of use, so a full disk or tmpfs is an error
    /// there, not a crash on a later store. Default: 4 GiB.
    pub pm_size: u64,
    /// Busy-wait after each PM persist, to emulate slower PM. Default: 0.
    pub pm_write_latency_ns: u64,
    /// Bytes of writes collected in a memtable before it is sealed. Default: 64 MiB.
    pub write_buffer_size: usize,
    /// Memtables (mutable + sealed) before writers wait for a flush. Default: 4.
    pub max_write_buffer_number: usize,
    /// Block cache budget in bytes. Default: 256 MiB.
    pub block_cache_bytes: u64,
    /// Bloom filter bits per key; 0 disables filters. Default: 10.
    pub bloom_bits_per_key: u32,
    /// Data-block compression. Default: none.
    pub compression: Compression,
    /// The index new tables get: binary-searched separators, or a learned
    /// model with blocks cut to match it (TridentKV); a table whose model
    /// does not train gets the binary index. Each table records its own,
    /// so both kinds mix in one database. Default: binary.
    pub table_index: IndexKind,
    /// Read tables with O_DIRECT, bypassing the page cache (blocks then
    /// come from the block cache or the device). Default: false.
    pub use_direct_reads: bool,
    /// Split the key space into range partitions (TridentKV): a range
    /// holding more than this many bytes of tables splits at a key, the
    /// split points are kept in the MANIFEST, and tables never span one,
    /// so `Db::drop_range_partition` deletes whole tables. 0 (default): off.
    pub partition_split_bytes: u64,

    // --- fine tuning ---
    /// Size of a PM slot (the unit of log extents) for a new region; a
    /// multiple of 4 KiB. Default: 0 = derived from `write_buffer_size`
    /// (an eighth of it, between 64 KiB and 8 MiB).
    pub pm_slot_bytes: u64,
    /// Target uncompressed data-block size. Default: 4096.
    pub block_size: usize,
    /// Entries between restart points in a block. Default: 16.
    pub block_restart_interval: usize,
    /// Target size of a table file. Default: 64 MiB.
    pub target_file_size: u64,
    /// L0 tables that trigger an L0→L1 compaction. Default: 4.
    pub l0_compaction_trigger: usize,
    /// L0 tables at which each write is delayed by 1 ms. Default: 20.
    pub l0_slowdown_writes_trigger: usize,
    /// L0 tables at which writes wait for compaction. Default: 36.
    pub l0_stop_writes_trigger: usize,
    /// Target size of L1. Default: 256 MiB.
    pub max_bytes_for_level_base: u64,
    /// Growth factor between levels. Default: 10.
    pub level_size_multiplier: u64,
    /// Background compaction threads (a flush thread runs besides). Default: 1.
    pub background_compactions: usize,
    /// Nice value (0-19) of the engine's background threads on Linux, like
    /// RocksDB's lowered thread-pool CPU priority: above 0, flushes and
    /// compactions give way to the threads serving requests when cores are
    /// short (shorter request tails, background work done in the gaps; the
    /// write throttle slows writers if that leaves the matrix filling).
    /// The thread that maps log pages in ahead of writers keeps their
    /// priority. 0 = the process's own priority. Best effort; other
    /// systems ignore it. Default: 10.
    pub background_nice: i32,
    /// How often unsynced PM log data is msynced on an ordinary-file region,
    /// in milliseconds; 0 = only on sync writes and close. Default: 1000.
    pub pm_sync_interval_ms: u64,
    /// How long a writer waits for PM space to be freed before failing. Default: 30 s.
    pub pm_full_timeout_ms: u64,
    /// Disables background compaction (tests). Default: false.
    pub disable_auto_compaction: bool,

    // --- matrix L0 (l0 = Matrix) ---
    /// PM bytes the matrix container may hold (rows and the log they point
    /// into). Column compaction starts at 40% of it, writers are paced above
    /// 40% and wait at all of it. L1's target size is it times `max_runs`.
    /// Default: 0 = the smaller of 1 GiB and a quarter of `pm_size`.
    pub matrix_bytes: u64,
    /// Target data size of one column compaction. Default: 0 = `matrix_bytes / 16`
    /// (at least `target_file_size`).
    pub column_bytes: u64,
    /// Rows per segment (one bloom filter per segment). Default: 8.
    pub rows_per_segment: usize,
    /// Sorted runs gathered between the matrix and L1 before they are
    /// merged into L1 together. Each column-compaction round writes its
    /// columns as one new run instead of merging them with the L1 tables
    /// they overlap, so L1 is rewritten once per `max_runs` rounds rather
    /// than once per round (less write amplification; a point lookup checks
    /// up to `max_runs` more tables, each behind a bloom filter). 0 or 1 =
    /// no runs: columns merge straight into L1 (MatrixKV's column compaction).
    /// Default: 6 (rounds start at 40% of `matrix_bytes`, so 6 rounds hold
    /// about as much as 4 did at 60%).
    pub max_runs: usize,
    /// Threads that merge one column compaction in parallel (each takes a
    /// key range of it). Default: 2.
    pub column_threads: usize,
    /// Receiver rows that trigger merging the oldest segment of them into one
    /// row. Default: 0 = 4 × `rows_per_segment`.
    pub max_receiver_rows: usize,
    /// Point lookups find a key's elements in all rows of a segment through
    /// one DRAM hash index (about 5.3 bytes per key and row) instead of the
    /// thesis' segment and row bloom filters and hint-guided binary search
    /// (2.5 bytes per key, a filter probe per row, several PM reads). Default: true.
    pub matrix_hash_index: bool,

    // --- single-level (SLM-DB) ---
    /// A table whose live keys are at most this percentage of the keys it
    /// was written with becomes a compaction candidate. Default: 70 (SLM-DB).
    pub slm_live_percent: u32,
    /// Selective compaction runs once there are more candidates than this.
    /// Default: 4 (SLM-DB).
    pub slm_compaction_trigger: usize,
    /// Writers slow down at this many candidates. Default: 15 (SLM-DB).
    pub slm_slowdown_candidates: usize,
    /// Writers stop at this many candidates. Default: 35 (SLM-DB).
    pub slm_stop_candidates: usize,
    /// Keys one round-robin scan of the tree's leaves looks at after a
    /// flush. Default: 128,000 (SLM-DB).
    pub slm_leaf_scan_keys: usize,
    /// The tables of a scanned key window become candidates when the keys
    /// are spread over at least this many tables. Default: 10 (SLM-DB).
    pub slm_leaf_scan_min_tables: usize,
    /// Range-query sequentiality: a scan watches a sliding window of this
    /// many consecutive entries (a tree leaf's worth). Default: 30 (SLM-DB's fanout).
    pub slm_scan_window_keys: usize,
    /// The tables of the widest window a scan saw become candidates when
    /// there are more than this many. Default: 8 (SLM-DB).
    pub slm_scan_min_tables: usize,
    /// Most tables one selective compaction merges. Default: 15 (SLM-DB).
    pub slm_max_compaction_tables: usize,

    // --- pm-only (ListDB) ---
    /// PM regions (NUMA nodes) the skiplists' upper levels are braided
    /// over: level 0 is one list, each level above is one list per region,
    /// and a writer's nodes go to its thread's region. Fixed when the
    /// database is created. Default: 1 (this machine has one NUMA node).
    pub pm_regions: usize,
    /// Zipper compaction merges each L0 list into L1 as soon as it is made;
    /// false leaves L0 lists in place until `listdb_max_l0` of them pile up
    /// (ListDB's "index-unified log alone", for the factor analysis).
    /// Default: true.
    pub listdb_zipper: bool,
    /// DRAM of the lookup cache: a direct-mapped table from key hash to the
    /// key's newest flushed node, consulted before the lists. 0 turns it
    /// off. Default: 64 MiB.
    pub listdb_lookup_cache_bytes: usize,
    /// Writers stop while this many L0 lists wait for zipper compaction
    /// (ListDB: 4 memtables per shard). Default: 4.
    pub listdb_max_l0: usize,
    /// Names each key's prefix group (see [`PrefixExtractor`]). When set,
    /// every matrix row keeps a bloom filter of its keys' prefixes, and an
    /// iterator over a range inside one prefix skips rows without it.
    /// Default: None.
    pub prefix_extractor: Option<Arc<dyn PrefixExtractor>>,

    // --- injection (tests, stress) ---
    /// File system for the SSD side. Default: the real one.
    pub fs: Arc<dyn Fs>,
    /// A simulated PM device to use instead of a region file (crash tests).
    pub pm_sim: Option<Arc<SimPm>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            l0: L0Kind::Matrix,
            pm_dir: None,
            pm_size: 4 << 30,
            pm_write_latency_ns: 0,
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 4,
            block_cache_bytes: 256 << 20,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            table_index: IndexKind::Binary,
            use_direct_reads: false,
            partition_split_bytes: 0,
            pm_slot_bytes: 0,
            block_size: 4096,
            block_restart_interval: 16,
            target_file_size: 64 << 20,
            l0_compaction_trigger: 4,
            l0_slowdown_writes_trigger: 20,
            l0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            level_size_multiplier: 10,
            background_compactions: 1,
            background_nice: 10,
            pm_sync_interval_ms: 1000,
            pm_full_timeout_ms: 30_000,
            disable_auto_compaction: false,
            matrix_bytes: 0,
            column_bytes: 0,
            rows_per_segment: 8,
            max_runs: 6,
            column_threads: 2,
            max_receiver_rows: 0,
            matrix_hash_index: true,
            slm_live_percent: 70,
            slm_compaction_trigger: 4,
            slm_slowdown_candidates: 15,
            slm_stop_candidates: 35,
            slm_leaf_scan_keys: 128_000,
            slm_leaf_scan_min_tables: 10,
            slm_scan_window_keys: 30,
            slm_scan_min_tables: 8,
            slm_max_compaction_tables: 15,
            pm_regions: 1,
            listdb_zipper: true,
            listdb_lookup_cache_bytes: 64 << 20,
            listdb_max_l0: 4,
            prefix_extractor: None,
            fs: default_fs(),
            pm_sim: None,
        }
    }
}

impl Options {
    /// Small sizes so that tests see flushes, compactions and many levels.
    pub fn for_tests() -> Options {
        Options {
            pm_size: 64 << 20,
            write_buffer_size: 64 << 10,
            pm_slot_bytes: 64 << 10,
            block_cache_bytes: 1 << 20,
            block_size: 1024,
            target_file_size: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            level_size_multiplier: 4,
            pm_sync_interval_ms: 0,
            pm_full_timeout_ms: 10_000,
            matrix_bytes: 2 << 20,
            column_bytes: 96 << 10,
            rows_per_segment: 3,
            max_receiver_rows: 6,
            slm_leaf_scan_keys: 4000,
            ..Options::default()
        }
    }

    /// Slot size for a new region.
    /// Whether log entries carry PM skiplist nodes (pm-only).
    pub(crate) fn entry_towers(&self) -> bool {
        self.l0 == L0Kind::PmOnly
    }

    pub(crate) fn slot_bytes(&self) -> u64 {
        if self.pm_slot_bytes != 0 {
            return self.pm_slot_bytes;
        }
        let s = (self.write_buffer_size as u64 / 8).clamp(64 << 10, 8 << 20);
        s.next_power_of_two().min(8 << 20)
    }

    /// PM bytes the matrix may hold.
    pub(crate) fn matrix_limit(&self) -> u64 {
        if self.matrix_bytes != 0 {
            self.matrix_bytes
        } else {
            (1u64 << 30).min(self.pm_size / 4)
        }
    }

    /// Target bytes of one column.
    pub(crate) fn column_target(&self) -> u64 {
        if self.column_bytes != 0 {
            self.column_bytes
        } else {
            (self.matrix_limit() / 16).max(self.target_file_size)
        }
    }

    /// Whether column compaction writes sorted runs (see [`Options::max_runs`]).
    pub(crate) fn tiered(&self) -> bool {
        self.l0 == L0Kind::Matrix && self.max_runs > 1
    }

    /// Receiver rows that trigger a row merge.
    pub(crate) fn merge_trigger(&self) -> usize {
        if self.max_receiver_rows != 0 {
            self.max_receiver_rows
        } else {
            4 * self.rows_per_segment.max(1)
        }
    }

    /// Every problem with these options, or Ok.
    pub fn validate(&self) -> Result<(), String> {
        let mut bad = Vec::new();
        if self.write_buffer_size < 4096 {
            bad.push("write_buffer_size must be at least 4096".to_string());
        }
        if !(0..=19).contains(&self.background_nice) {
            bad.push("background_nice must be between 0 and 19".to_string());
        }
        if self.max_write_buffer_number < 2 {
            bad.push("max_write_buffer_number must be at least 2".into());
        }
        if !self.pm_slot_bytes.is_multiple_of(4096) {
            bad.push("pm_slot_bytes must be a multiple of 4096".into());
        }
        if self.pm_size < 16 * self.slot_bytes() {
            bad.push(format!("pm_size must hold at least 16 slots of {} bytes", self.slot_bytes()));
        }
        if self.block_size < 64 {
            bad.push("block_size must be at least 64".into());
        }
        if self.block_restart_interval == 0 {
            bad.push("block_restart_interval must be positive".into());
        }
        if self.target_file_size < 4096 {
            bad.push("target_file_size must be at least 4096".into());
        }
        if self.l0_compaction_trigger == 0
            || self.l0_slowdown_writes_trigger < self.l0_compaction_trigger
            || self.l0_stop_writes_trigger < self.l0_slowdown_writes_trigger
        {
            bad.push("need 0 < l0_compaction_trigger <= l0_slowdown_writes_trigger <= l0_stop_writes_trigger".into());
        }
        if self.level_size_multiplier < 2 {
            bad.push("level_size_multiplier must be at least 2".into());
        }
        if self.rows_per_segment == 0 {
            bad.push("rows_per_segment must be at least 1".into());
        }
        if self.l0 == L0Kind::Matrix && self.matrix_limit() >= self.pm_size {
            bad.push("matrix_bytes must be smaller than pm_size".into());
        }
        if self.background_compactions == 0 {
            bad.push("background_compactions must be at least 1".into());
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("; "))
        }
    }
}

/// Options of one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Make the write durable against power loss before returning (msync on
    /// an ordinary-file PM region; already so on DAX). Without it a write
    /// survives a process crash as soon as it returns.
    pub sync: bool,
}

/// Options of one read.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot sequence instead of the latest.
    pub snapshot: Option<u64>,
}
