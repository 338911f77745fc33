//! The PM a new log extent must leave free for flushes.
//!
//! A flush into a level 0 kept in PM builds its output there before the log
//! extents of its memtable can ever be freed (a round of column compaction
//! frees them once the row is in the MANIFEST). If writers took the last
//! free slots first, the flush thread would wait for PM that only its own
//! row could lead to, writers would wait for extents that only the flush
//! frees, and compaction would have no row to work on: a wedge (seen with
//! a 16 MiB region and 8 MiB memtables). So the log leaves free what level
//! 0 needs for every memtable not yet flushed.

use super::DbInner;
use crate::log::WriteState;

impl DbInner {
    /// Free slots a new log extent for an entry of `len` bytes holding
    /// `count` records must leave: what level 0 allocates to take in the
    /// sealed memtables and the mutable one, the latter with as many more
    /// records as the new extent holds at its average record size so far
    /// (`w` is the write lock, under which the mutable memtable grows).
    pub(crate) fn flush_room(&self, w: &WriteState, len: u64, count: u32) -> u64 {
        let eng = &self.eng;
        if self.l0.flush_pm_bytes(1) == 0 {
            return 0;
        }
        let slot = eng.region.slot_bytes();
        let slots_for = |records: u64| self.l0.flush_pm_bytes(records).div_ceil(slot);
        let sealed: u64 = eng.state.lock().imms.iter().map(|m| slots_for(m.records())).sum();
        let (records, bytes) = (w.mem.records(), w.mem.log_bytes());
        let per_record = bytes.checked_div(records).unwrap_or(len / u64::from(count.max(1))).max(1);
        let extent = len.div_ceil(slot).max(1) * slot;
        sealed + slots_for(records + extent.div_ceil(per_record))
    }
}
