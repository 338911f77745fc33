//! What `Db::stats` and `strata stats` report: counters and the shape of
//! the tree.

use std::fmt;

/// One level of the tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Level number.
    pub level: usize,
    /// Table files.
    pub files: usize,
    /// Bytes in those files.
    pub bytes: u64,
}

/// A snapshot of the engine's counters.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// What L0 is made of (`sstable` or `matrix`).
    pub l0: &'static str,
    /// Every level, L0 first.
    pub levels: Vec<LevelStats>,
    /// Sorted runs between the matrix and L1 (`Options::max_runs`), newest first.
    pub runs: Vec<LevelStats>,
    /// Levels holding at least one file (the runs count as one level).
    pub nonempty_levels: usize,
    /// Bytes attributed to the mutable memtable (DRAM index + PM entries).
    pub memtable_bytes: u64,
    /// Entries in the mutable memtable.
    pub memtable_entries: u64,
    /// Sealed memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Rows in the matrix (l0 = matrix).
    pub matrix_rows: usize,
    /// Log bytes of matrix data not yet compacted into L1.
    pub matrix_data_bytes: u64,
    /// PM bytes the matrix holds (rows and the log they point into).
    pub matrix_pm_bytes: u64,
    /// The matrix's PM budget.
    pub matrix_limit_bytes: u64,
    /// Keys in the single-level B+-tree.
    pub slm_tree_entries: u64,
    /// PM bytes the single-level B+-tree holds (nodes and keys).
    pub slm_tree_pm_bytes: u64,
    /// Tables that are selective-compaction candidates now.
    pub slm_candidates: usize,
    /// Selective compactions since open.
    pub slm_compactions: u64,
    /// Lookups that reached the tree since open.
    pub slm_gets: u64,
    /// Data blocks those lookups read (one per lookup is the design).
    pub slm_block_reads: u64,
    /// Lookups that searched the tables (snapshots older than the tree's version).
    pub slm_fallbacks: u64,
    /// Scans whose keys were spread over enough tables to mark them as
    /// candidates (range-query sequentiality) since open.
    pub slm_scans_marked: u64,
    /// L0 PM skiplists waiting for zipper compaction (l0 = pm-only).
    pub listdb_l0_lists: usize,
    /// Nodes in the PM skiplists (L0 and L1), counted at open and kept since.
    pub listdb_live_nodes: u64,
    /// Log bytes of the extents the skiplists' nodes are in.
    pub listdb_log_bytes: u64,
    /// Bytes of the live nodes' entries in those extents.
    pub listdb_live_bytes: u64,
    /// Log cleanings (live nodes moved out of mostly dead extents) since open.
    pub listdb_cleanings: u64,
    /// Nodes log cleaning moved since open.
    pub listdb_moved_nodes: u64,
    /// Zipper compactions since open.
    pub listdb_merges: u64,
    /// Nodes zipper compactions linked into L1 since open.
    pub listdb_merged_nodes: u64,
    /// Nodes unlinked or never linked (older versions, tombstones) since open.
    pub listdb_dropped_nodes: u64,
    /// DRAM of the lookup cache.
    pub listdb_cache_bytes: u64,
    /// Lookups the cache answered since open.
    pub listdb_cache_hits: u64,
    /// Lookups that searched the lists since open.
    pub listdb_list_searches: u64,
    /// PM regions the lists are braided over.
    pub listdb_regions: usize,
    /// Column compactions since open.
    pub columns: u64,
    /// Merges of runs into L1 since open.
    pub run_merges: u64,
    /// Where the PM region lives (`dax`, `file`, `shm`, `sim`).
    pub pm_placement: &'static str,
    /// PM region size: the configured ceiling.
    pub pm_region_bytes: u64,
    /// Storage the PM region file takes now (its allocated blocks): the
    /// region grows toward `pm_region_bytes` with its data.
    pub pm_allocated_bytes: u64,
    /// PM slot size.
    pub pm_slot_bytes: u64,
    /// PM slots in total.
    pub pm_slots: u64,
    /// PM slots leased (log extents, rows).
    pub pm_slots_used: u64,
    /// Bytes stored into PM since open.
    pub pm_bytes_written: u64,
    /// PM persist (flush + fence) operations since open.
    pub pm_persists: u64,
    /// msync calls since open.
    pub pm_syncs: u64,
    /// Log extents written through ahead of the writer's msyncs since open
    /// (only while writers wait for msyncs: see DURABILITY.md).
    pub pm_write_throughs: u64,
    /// Highest published sequence number.
    pub last_sequence: u64,
    /// Updates written since open.
    pub writes: u64,
    /// Key and value bytes the user wrote since open (encoded batches).
    pub user_bytes_written: u64,
    /// Table bytes written by flushes and compactions since open.
    pub table_bytes_written: u64,
    /// MANIFEST bytes written since open.
    pub manifest_bytes_written: u64,
    /// Bytes written to the SSD since open (tables + MANIFEST).
    pub device_bytes_written: u64,
    /// SSD bytes written per user byte (device / user).
    pub write_amplification: f64,
    /// Memtable flushes since open.
    pub flushes: u64,
    /// Compactions since open.
    pub compactions: u64,
    /// Bytes read by compactions since open.
    pub compaction_bytes_read: u64,
    /// Time writers spent stopped by back-pressure, in microseconds.
    pub stall_micros: u64,
    /// Writes delayed by the L0 slowdown trigger.
    pub slowdowns: u64,
    /// Time writers spent throttled while the matrix was filling, in microseconds.
    pub throttled_micros: u64,
    /// Matrix rows that range iterators left out because the rows' prefix
    /// filters ruled out the range's prefix (with a prefix extractor).
    pub prefix_skipped_rows: u64,
    /// Point lookups since open (each key of a multi-get counts).
    pub gets: u64,
    /// Data blocks users read from tables since open (cache hits included;
    /// compactions' reads not).
    pub data_blocks_read: u64,
    /// Of those, read from the table files (block cache misses).
    pub data_blocks_from_file: u64,
    /// Bytes in the block cache.
    pub block_cache_bytes: u64,
    /// DRAM held by table indexes and filters.
    pub table_index_bytes: u64,
    /// Live tables with a learned index.
    pub learned_tables: u64,
    /// Live tables with a binary-searched index.
    pub binary_tables: u64,
    /// DRAM held by the live tables' indexes alone.
    pub table_index_only_bytes: u64,
    /// DRAM held by the live tables' bloom filters.
    pub table_filter_bytes: u64,
    /// How a multi-get reads its tables' blocks together: "io_uring" or "threads".
    pub read_batching: &'static str,
    /// Partition names, `"default"` first.
    pub partitions: Vec<String>,
    /// Range tombstones the current version holds (`delete_range` calls
    /// and dropped partitions).
    pub range_tombstones: u64,
    /// `delete_range` calls since the open.
    pub range_deletes: u64,
    /// Tables deleted whole since the open because a range tombstone covered them.
    pub range_dropped_files: u64,
    /// `delete_range` tombstones removed since the open: they hid nothing any more.
    pub range_tombstones_retired: u64,
    /// Range partitions (split points + 1; `Options::partition_split_bytes`).
    pub range_partitions: u64,
    /// DRAM held by the matrix's row hash indexes, filters and fences.
    pub matrix_dram_bytes: u64,
    /// How long the last open took, recovery included, in microseconds.
    pub recovery_micros: u64,
    /// Why the database refuses writes, if it does.
    pub poisoned: Option<String>,
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "l0 layout:            {}", self.l0)?;
        writeln!(f, "levels in use:        {}", self.nonempty_levels)?;
        writeln!(f, "level  files        MiB   (L0 = matrix rows in PM when l0 = matrix)")?;
        for l in &self.levels {
            writeln!(f, "  L{}  {:>6}  {:>10.2}", l.level, l.files, mib(l.bytes))?;
            if l.level == 0 && !self.runs.is_empty() {
                let files: usize = self.runs.iter().map(|r| r.files).sum();
                let bytes: u64 = self.runs.iter().map(|r| r.bytes).sum();
                writeln!(f, "  runs{:>5}  {:>10.2}   ({} sorted runs before L1)", files, mib(bytes), self.runs.len())?;
            }
        }
        writeln!(
            f,
            "memtable:             {:.2} MiB, {} entries; {} sealed waiting",
            mib(self.memtable_bytes),
            self.memtable_entries,
            self.immutable_memtables
        )?;
        if self.l0 == "matrix" {
            writeln!(
                f,
                "matrix:               {} rows, {:.2} MiB data, {:.2} of {:.0} MiB PM, {} columns compacted, {} run merges",
                self.matrix_rows,
                mib(self.matrix_data_bytes),
                mib(self.matrix_pm_bytes),
                mib(self.matrix_limit_bytes),
                self.columns,
                self.run_merges
            )?;
        }
        if self.l0 == "single-level" {
            writeln!(
                f,
                "single level:         {} keys in the B+-tree ({:.2} MiB PM), {} candidates, {} selective compactions; {} gets read {} blocks ({:.3} per get), {} searched the tables; {} scans marked tables",
                self.slm_tree_entries,
                mib(self.slm_tree_pm_bytes),
                self.slm_candidates,
                self.slm_compactions,
                self.slm_gets,
                self.slm_block_reads,
                if self.slm_gets == 0 { 0.0 } else { self.slm_block_reads as f64 / self.slm_gets as f64 },
                self.slm_fallbacks,
                self.slm_scans_marked
            )?;
        }
        if self.l0 == "pm-only" {
            writeln!(
                f,
                "pm-only:              {} L0 lists, {} nodes ({:.2} MiB) in {:.2} MiB of log, {} cleanings moved {} nodes, {} zipper merges ({} nodes merged, {} dropped), {} regions; lookup cache {:.1} MiB: {} hits, {} list searches",
                self.listdb_l0_lists,
                self.listdb_live_nodes,
                mib(self.listdb_live_bytes),
                mib(self.listdb_log_bytes),
                self.listdb_cleanings,
                self.listdb_moved_nodes,
                self.listdb_merges,
                self.listdb_merged_nodes,
                self.listdb_dropped_nodes,
                self.listdb_regions,
                mib(self.listdb_cache_bytes),
                self.listdb_cache_hits,
                self.listdb_list_searches
            )?;
        }
        writeln!(
            f,
            "PM region:            {} ({:.1} MiB allocated of {:.0} MiB, {} slots of {} KiB, {} used)",
            self.pm_placement,
            mib(self.pm_allocated_bytes),
            mib(self.pm_region_bytes),
            self.pm_slots,
            self.pm_slot_bytes / 1024,
            self.pm_slots_used
        )?;
        writeln!(
            f,
            "PM traffic:           {:.2} MiB written, {} persists, {} msyncs ({} log extents written through)",
            mib(self.pm_bytes_written),
            self.pm_persists,
            self.pm_syncs,
            self.pm_write_throughs
        )?;
        writeln!(f, "last sequence:        {}", self.last_sequence)?;
        writeln!(
            f,
            "since open:           {} writes, {:.2} MiB user data, {:.2} MiB to SSD (write amp {:.2})",
            self.writes,
            mib(self.user_bytes_written),
            mib(self.device_bytes_written),
            self.write_amplification
        )?;
        writeln!(
            f,
            "background:           {} flushes, {} compactions ({:.2} MiB read)",
            self.flushes,
            self.compactions,
            mib(self.compaction_bytes_read)
        )?;
        writeln!(
            f,
            "write stalls:         {} ms stopped, {} slowed writes, {} ms throttled",
            self.stall_micros / 1000,
            self.slowdowns,
            self.throttled_micros / 1000
        )?;
        writeln!(
            f,
            "reads:                {} gets, {} data blocks read ({} from files)",
            self.gets, self.data_blocks_read, self.data_blocks_from_file
        )?;
        writeln!(
            f,
            "DRAM:                 {:.2} MiB block cache, {:.2} MiB table indexes/filters, {:.2} MiB matrix indexes",
            mib(self.block_cache_bytes),
            mib(self.table_index_bytes),
            mib(self.matrix_dram_bytes)
        )?;
        writeln!(
            f,
            "table indexes:        {} learned, {} binary; {:.2} MiB index, {:.2} MiB filters; multi-get reads by {}",
            self.learned_tables,
            self.binary_tables,
            mib(self.table_index_only_bytes),
            mib(self.table_filter_bytes),
            self.read_batching
        )?;
        writeln!(f, "prefix filters:       {} matrix rows skipped by range scans", self.prefix_skipped_rows)?;
        writeln!(
            f,
            "partitions:           {}; {} range partitions; {} range tombstones ({} retired), {} delete_range calls, {} tables dropped whole",
            self.partitions.join(", "),
            self.range_partitions,
            self.range_tombstones,
            self.range_tombstones_retired,
            self.range_deletes,
            self.range_dropped_files
        )?;
        writeln!(f, "open took:            {:.1} ms", self.recovery_micros as f64 / 1000.0)?;
        if let Some(p) = &self.poisoned {
            writeln!(f, "REFUSING WRITES:      {p}")?;
        }
        Ok(())
    }
}
