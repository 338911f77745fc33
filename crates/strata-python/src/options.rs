//! The keyword arguments of `stratakv.DB(...)`, as `stratakv::Options`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use stratakv::{Compression, FixedPrefix, IndexKind, L0Kind, Options};

use crate::InvalidArgument;

/// Names of the keyword options `DB(...)` accepts besides `profile` and
/// `pm_dir` (listed in the error for an unknown one).
pub(crate) const OPTION_NAMES: &[&str] = &[
    "create_if_missing",
    "error_if_exists",
    "pm_size",
    "pm_write_latency_ns",
    "write_buffer_size",
    "max_write_buffer_number",
    "block_cache_bytes",
    "bloom_bits_per_key",
    "compression",
    "table_index",
    "use_direct_reads",
    "pm_slot_bytes",
    "block_size",
    "block_restart_interval",
    "target_file_size",
    "l0_compaction_trigger",
    "l0_slowdown_writes_trigger",
    "l0_stop_writes_trigger",
    "max_bytes_for_level_base",
    "level_size_multiplier",
    "background_compactions",
    "background_nice",
    "pm_sync_interval_ms",
    "pm_full_timeout_ms",
    "disable_auto_compaction",
    "matrix_bytes",
    "column_bytes",
    "rows_per_segment",
    "max_runs",
    "column_threads",
    "max_receiver_rows",
    "matrix_hash_index",
    "pm_regions",
    "listdb_zipper",
    "listdb_lookup_cache_bytes",
    "listdb_max_l0",
    "prefix_length",
    "partition_split_bytes",
];

fn bad(msg: String) -> PyErr {
    InvalidArgument::new_err(format!("invalid argument: {msg}"))
}

/// A non-negative integer option (a bool is refused: `pm_size=True` is a slip).
fn int<T: for<'a, 'py> FromPyObject<'a, 'py>>(name: &str, v: &Bound<'_, PyAny>) -> PyResult<T> {
    if v.is_instance_of::<pyo3::types::PyBool>() || !v.is_instance_of::<pyo3::types::PyInt>() {
        let ty = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        return Err(bad(format!("{name} must be an int, not {ty}")));
    }
    v.extract::<T>().map_err(|_| bad(format!("{name} is out of range: {v}")))
}

/// A bool option.
fn flag(name: &str, v: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !v.is_instance_of::<pyo3::types::PyBool>() {
        let ty = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        return Err(bad(format!("{name} must be a bool, not {ty}")));
    }
    v.extract::<bool>()
}

/// Options for `profile` (None = the default, matrix) with `options` applied.
pub(crate) fn build(
    profile: Option<&str>,
    pm_dir: Option<std::path::PathBuf>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Options> {
    let mut o = Options::default();
    if let Some(p) = profile {
        o.l0 = L0Kind::parse(p).ok_or_else(|| {
            bad(format!("unknown profile {p:?} (known: \"matrix\", \"sstable\", \"single-level\", \"pm-only\")"))
        })?;
    }
    o.pm_dir = pm_dir;
    let Some(options) = options else { return Ok(o) };
    for (k, v) in options.iter() {
        let name: String = k.extract()?;
        let n = name.as_str();
        match n {
            "create_if_missing" => o.create_if_missing = flag(n, &v)?,
            "error_if_exists" => o.error_if_exists = flag(n, &v)?,
            "pm_size" => o.pm_size = int(n, &v)?,
            "pm_write_latency_ns" => o.pm_write_latency_ns = int(n, &v)?,
            "write_buffer_size" => o.write_buffer_size = int(n, &v)?,
            "max_write_buffer_number" => o.max_write_buffer_number = int(n, &v)?,
            "block_cache_bytes" => o.block_cache_bytes = int(n, &v)?,
            "bloom_bits_per_key" => o.bloom_bits_per_key = int(n, &v)?,
            "compression" => {
                o.compression = if v.is_none() {
                    Compression::None
                } else {
                    let s: String = v.extract().map_err(|_| bad("compression must be a str or None".into()))?;
                    Compression::parse(&s)
                        .ok_or_else(|| bad(format!("unknown compression {s:?} (known: none, snappy, lz4)")))?
                }
            }
            "table_index" => {
                let s: String = v.extract().map_err(|_| bad("table_index must be a str".into()))?;
                o.table_index = match s.as_str() {
                    "binary" => IndexKind::Binary,
                    "learned" => IndexKind::Learned,
                    _ => return Err(bad(format!("unknown table_index {s:?} (known: binary, learned)"))),
                };
            }
            "use_direct_reads" => o.use_direct_reads = flag(n, &v)?,
            "pm_slot_bytes" => o.pm_slot_bytes = int(n, &v)?,
            "block_size" => o.block_size = int(n, &v)?,
            "block_restart_interval" => o.block_restart_interval = int(n, &v)?,
            "target_file_size" => o.target_file_size = int(n, &v)?,
            "l0_compaction_trigger" => o.l0_compaction_trigger = int(n, &v)?,
            "l0_slowdown_writes_trigger" => o.l0_slowdown_writes_trigger = int(n, &v)?,
            "l0_stop_writes_trigger" => o.l0_stop_writes_trigger = int(n, &v)?,
            "max_bytes_for_level_base" => o.max_bytes_for_level_base = int(n, &v)?,
            "level_size_multiplier" => o.level_size_multiplier = int(n, &v)?,
            "background_compactions" => o.background_compactions = int(n, &v)?,
            "background_nice" => o.background_nice = int(n, &v)?,
            "pm_sync_interval_ms" => o.pm_sync_interval_ms = int(n, &v)?,
            "pm_full_timeout_ms" => o.pm_full_timeout_ms = int(n, &v)?,
            "disable_auto_compaction" => o.disable_auto_compaction = flag(n, &v)?,
            "matrix_bytes" => o.matrix_bytes = int(n, &v)?,
            "column_bytes" => o.column_bytes = int(n, &v)?,
            "rows_per_segment" => o.rows_per_segment = int(n, &v)?,
            "max_runs" => o.max_runs = int(n, &v)?,
            "column_threads" => o.column_threads = int(n, &v)?,
            "max_receiver_rows" => o.max_receiver_rows = int(n, &v)?,
            "matrix_hash_index" => o.matrix_hash_index = flag(n, &v)?,
            "pm_regions" => o.pm_regions = int(n, &v)?,
            "listdb_zipper" => o.listdb_zipper = flag(n, &v)?,
            "listdb_lookup_cache_bytes" => o.listdb_lookup_cache_bytes = int(n, &v)?,
            "listdb_max_l0" => o.listdb_max_l0 = int(n, &v)?,
            "partition_split_bytes" => o.partition_split_bytes = int(n, &v)?,
            "prefix_length" => {
                let len: usize = int(n, &v)?;
                o.prefix_extractor = if len == 0 { None } else { Some(Arc::new(FixedPrefix(len))) };
            }
            _ => {
                return Err(bad(format!("unknown option {n:?} (known: profile, pm_dir, {})", OPTION_NAMES.join(", "))));
            }
        }
    }
    Ok(o)
}
