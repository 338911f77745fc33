//! The option sets the model mode cycles through: every L0 kind, both table indexes, tiny and
//! small sizes (many levels, a tiny matrix), compression, filters, restart
//! intervals, cache or none, one or two compaction threads, PM in the data
//! directory or on /dev/shm.

use std::path::Path;

use rand::rngs::StdRng;
use rand::Rng;
use stratakv::{Compression, IndexKind, L0Kind, Options};

/// A random option set; `shm` is a directory on /dev/shm, if any.
pub fn random_options(rng: &mut StdRng, l0: L0Kind, shm: Option<&Path>) -> (Options, String) {
    let mut o = Options::for_tests();
    o.l0 = l0;
    let tiny = rng.gen_bool(0.5);
    if tiny {
        o.write_buffer_size = [4 << 10, 8 << 10, 16 << 10][rng.gen_range(0..3)];
        o.target_file_size = [4 << 10, 8 << 10, 16 << 10][rng.gen_range(0..3)];
        o.max_bytes_for_level_base = [16 << 10, 32 << 10, 64 << 10][rng.gen_range(0..3)];
        o.level_size_multiplier = rng.gen_range(2..5);
        o.matrix_bytes = [256 << 10, 512 << 10][rng.gen_range(0..2)];
        o.column_bytes = [16 << 10, 48 << 10][rng.gen_range(0..2)];
        o.rows_per_segment = rng.gen_range(1..4);
        o.max_receiver_rows = rng.gen_range(2..7);
        o.pm_slot_bytes = 16 << 10;
        o.pm_size = 8 << 20;
    } else {
        o.write_buffer_size = [32 << 10, 64 << 10][rng.gen_range(0..2)];
        o.target_file_size = [16 << 10, 64 << 10][rng.gen_range(0..2)];
        o.max_bytes_for_level_base = 64 << 10;
    }
    o.compression = [Compression::None, Compression::Lz4, Compression::Snappy][rng.gen_range(0..3)];
    o.bloom_bits_per_key = [0, 4, 10][rng.gen_range(0..3)];
    o.block_restart_interval = [1, 4, 16][rng.gen_range(0..3)];
    o.block_size = [128, 1024, 4096][rng.gen_range(0..3)];
    o.block_cache_bytes = if rng.gen_bool(0.3) { 0 } else { 1 << 20 };
    o.l0_compaction_trigger = rng.gen_range(2..5);
    o.l0_slowdown_writes_trigger = o.l0_compaction_trigger.max(8);
    o.l0_stop_writes_trigger = o.l0_slowdown_writes_trigger.max(12);
    o.background_compactions = rng.gen_range(1..3);
    o.max_runs = rng.gen_range(1..4);
    // Without background compaction nothing drains L0 or the matrix, and
    // writers would wait at the stop triggers for ever (by design): only
    // with the SSTable L0 and triggers out of reach; compact_range still runs.
    if l0 == L0Kind::Sstable && rng.gen_bool(0.15) {
        o.disable_auto_compaction = true;
        o.l0_slowdown_writes_trigger = 1_000_000;
        o.l0_stop_writes_trigger = 1_000_000;
    }
    if l0 == L0Kind::PmOnly {
        o.pm_regions = [1, 2, 4][rng.gen_range(0..3)];
        o.listdb_lookup_cache_bytes = [0, 4 << 10, 1 << 20][rng.gen_range(0..3)];
        o.listdb_zipper = rng.gen_bool(0.8);
        o.listdb_max_l0 = rng.gen_range(1..5);
    }
    let on_shm = shm.is_some() && rng.gen_bool(0.3);
    if on_shm {
        o.pm_dir = shm.map(|p| p.to_path_buf());
    }
    o.table_index = if rng.gen_bool(0.5) { IndexKind::Learned } else { IndexKind::Binary };
    // Range partitions split as the tables grow; tables are cut at the splits.
    o.partition_split_bytes = if rng.gen_bool(0.3) { o.target_file_size * 3 } else { 0 };
    let name = format!(
        "l0={} {} wbs={} tfs={} compression={:?} bloom={} restart={} block={} cache={} bg={} runs={} auto_compaction={} \
         pm={} index={:?} split={}",
        l0.name(),
        if tiny { "tiny" } else { "small" },
        o.write_buffer_size,
        o.target_file_size,
        o.compression,
        o.bloom_bits_per_key,
        o.block_restart_interval,
        o.block_size,
        o.block_cache_bytes,
        o.background_compactions,
        o.max_runs,
        !o.disable_auto_compaction,
        if on_shm { "shm" } else { "file" },
        o.table_index,
        o.partition_split_bytes
    );
    (o, name)
}
