//! `Db::stats`: the engine's counters and the shape of the tree.

use std::sync::atomic::Ordering;

use super::DbInner;
use crate::stats::{LevelStats, Stats};

impl DbInner {
    pub(crate) fn stats(&self) -> Stats {
        let eng = &self.eng;
        let (version, mem, imms, poisoned) = {
            let st = eng.state.lock();
            (st.version.clone(), st.mem.clone(), st.imms.len(), st.poisoned.clone())
        };
        let levels: Vec<LevelStats> = version
            .levels
            .iter()
            .enumerate()
            .map(|(level, files)| LevelStats { level, files: files.len(), bytes: files.iter().map(|f| f.size).sum() })
            .collect();
        // A run's `level` field holds its id.
        let runs: Vec<LevelStats> = version
            .runs
            .iter()
            .map(|r| LevelStats { level: r.id as usize, files: r.files.len(), bytes: r.bytes() })
            .collect();
        let (manifest, partitions): (u64, Vec<String>) = {
            let vs = eng.versions.lock();
            (vs.manifest_bytes_written, vs.partitions.keys().cloned().collect())
        };
        let c = &eng.counters;
        let user = c.user_bytes.load(Ordering::Relaxed);
        let tables = c.table_bytes_written.load(Ordering::Relaxed);
        let device = tables + manifest;
        let pm = eng.region.stats();
        let census = eng.tables.census(version.all_files().map(|f| f.number));
        let mut s = Stats {
            levels,
            runs,
            memtable_bytes: mem.approximate_bytes() as u64,
            memtable_entries: mem.len() as u64,
            immutable_memtables: imms,
            columns: c.columns.load(Ordering::Relaxed),
            run_merges: c.run_merges.load(Ordering::Relaxed),
            pm_placement: eng.region.placement().name(),
            pm_region_bytes: eng.region.len(),
            pm_allocated_bytes: eng.region.allocated_bytes(),
            pm_slot_bytes: eng.region.slot_bytes(),
            pm_slots: eng.region.slot_count(),
            pm_slots_used: eng.region.slot_count() - eng.region.free_slots(),
            pm_bytes_written: pm.bytes_written,
            pm_persists: pm.persists,
            pm_syncs: pm.syncs,
            pm_write_throughs: pm.write_throughs,
            last_sequence: eng.pipeline.visible(),
            writes: c.writes.load(Ordering::Relaxed),
            user_bytes_written: user,
            table_bytes_written: tables,
            manifest_bytes_written: manifest,
            device_bytes_written: device,
            write_amplification: if user == 0 { 0.0 } else { device as f64 / user as f64 },
            flushes: c.flushes.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
            compaction_bytes_read: c.compaction_bytes_read.load(Ordering::Relaxed),
            stall_micros: c.stall_micros.load(Ordering::Relaxed),
            slowdowns: c.slowdowns.load(Ordering::Relaxed),
            throttled_micros: c.throttled_micros.load(Ordering::Relaxed),
            prefix_skipped_rows: c.prefix_skipped_rows.load(Ordering::Relaxed),
            gets: c.gets.load(Ordering::Relaxed),
            data_blocks_read: eng.tables.block_reads().fetched.load(Ordering::Relaxed),
            data_blocks_from_file: eng.tables.block_reads().from_file.load(Ordering::Relaxed),
            block_cache_bytes: eng.tables.block_cache().map(|b| b.used_bytes()).unwrap_or(0),
            table_index_bytes: eng.tables.memory_bytes() as u64,
            learned_tables: census.learned,
            binary_tables: census.binary,
            table_index_only_bytes: census.index_bytes,
            table_filter_bytes: census.filter_bytes,
            read_batching: eng.tables.batch_reader().kind(),
            partitions: std::iter::once(crate::DEFAULT_PARTITION.to_string()).chain(partitions).collect(),
            range_tombstones: version.range_dels.tombs().len() as u64,
            range_partitions: version.splits.len() as u64 + 1,
            range_deletes: c.range_deletes.load(Ordering::Relaxed),
            range_dropped_files: c.range_dropped_files.load(Ordering::Relaxed),
            range_tombstones_retired: c.range_tombstones_retired.load(Ordering::Relaxed),
            recovery_micros: self.recovery_micros,
            poisoned,
            ..Stats::default()
        };
        // Level 0's own part (its level-0 entry, for one).
        self.l0.stats(&version, &mut s);
        s.nonempty_levels = s.levels.iter().filter(|l| l.files > 0).count() + usize::from(!s.runs.is_empty());
        s
    }
}
