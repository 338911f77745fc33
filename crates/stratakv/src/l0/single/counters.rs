//! Read-path counters and the tables scans marked as compaction
//! candidates: shared by every single-level state of one database and by
//! its scans.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;

/// Read-path counters and candidate marks, shared by every state of one
/// database (DRAM: a restart forgets the marks, and later scans find
/// those tables again).
#[derive(Debug, Default)]
pub(crate) struct ReadCounters {
    /// Tables the leaf scans and range queries marked as candidates.
    pub marked: Mutex<HashSet<u64>>,
    /// Range-query sequentiality: entries in a scan's window.
    pub scan_window: usize,
    /// ... and the tables a window must exceed to mark them.
    pub scan_min_tables: usize,
    /// Scans that marked tables.
    pub scans_marked: AtomicU64,
    /// Lookups that reached the tree.
    pub gets: AtomicU64,
    /// Data blocks those lookups read (from the cache or the file).
    pub block_reads: AtomicU64,
    /// Lookups that had to search the tables (a snapshot older than the
    /// tree's version of the key).
    pub fallbacks: AtomicU64,
}

impl ReadCounters {
    /// Counters for windows of `scan_window` entries and marks past `scan_min_tables` tables.
    pub fn new(scan_window: usize, scan_min_tables: usize) -> ReadCounters {
        ReadCounters { scan_window: scan_window.max(1), scan_min_tables, ..ReadCounters::default() }
    }
}
