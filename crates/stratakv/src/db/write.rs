//! The write path: back-pressure, reservation, copy into PM, publication.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::DbInner;
use crate::batch::WriteBatch;
use crate::engine::Commit;
use crate::error::{Error, Result};
use crate::log::{entry_len, ExtentFailure, NewExtent, Reserved, Towers, HEADER_LEN};
use crate::version::{RangeTomb, VersionEdit};

impl DbInner {
    pub(crate) fn write(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        self.write_then(batch, sync, None)
    }

    /// Removes every key in `[start, end)`: a range tombstone at sequence
    /// S in the MANIFEST. S is a log entry of its own with no records (a
    /// placeholder), so sequences stay contiguous for recovery and a crash
    /// before the MANIFEST edit deletes nothing. Before S is published,
    /// every earlier write is published, the log is durable through S (a
    /// MANIFEST naming S never outlives a log that lacks it, so no write
    /// after a recovery gets a sequence the tombstone would hide), and the
    /// tombstone is installed for readers; so no reader at S or later
    /// misses it, and none before S sees it.
    pub(crate) fn delete_range(&self, start: Vec<u8>, end: Vec<u8>) -> Result<()> {
        self.eng.check_writable()?;
        if start >= end {
            return Ok(());
        }
        let b = WriteBatch::new();
        let install = |seq: u64| {
            let mut vs = self.eng.versions.lock();
            let edit = VersionEdit {
                range_dels_added: vec![RangeTomb { start: start.clone(), end: end.clone(), seq }],
                ..Default::default()
            };
            // A failed MANIFEST write leaves durable state unknown (the
            // record may be there): poison, as background work does.
            self.eng.surface(self.eng.commit(&mut vs, Commit { edit, ..Default::default() }))
        };
        self.write_then(&b, false, Some(&install))?;
        self.eng.counters.range_deletes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes `batch`; with `before_publish`, runs it with the batch's last
    /// sequence once every earlier write is published and the log is
    /// durable through the batch, and publishes the batch after it.
    fn write_then(
        &self,
        batch: &WriteBatch,
        sync: bool,
        before_publish: Option<&dyn Fn(u64) -> Result<()>>,
    ) -> Result<()> {
        let eng = &self.eng;
        if let Some(why) = batch.invalid() {
            return Err(Error::InvalidArgument(why.to_string()));
        }
        eng.check_writable()?;
        // An empty batch with work before its publication is a placeholder
        // entry: no records, one sequence number.
        let placeholder = batch.is_empty() && before_publish.is_some();
        if batch.is_empty() && !placeholder {
            return Ok(());
        }
        let body = batch.rep();
        if HEADER_LEN + body.len() > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!("batch of {} bytes is too large", body.len())));
        }
        // pm-only: the entry carries a PM skiplist node per record.
        let towers =
            (eng.opts.entry_towers() && !placeholder).then(|| Towers::choose(batch.count(), eng.opts.pm_regions));
        let len = entry_len(towers.as_ref().map_or(0, Towers::bytes) + body.len());
        let data_bytes = eng.region.slot_count().saturating_sub(2) * eng.region.slot_bytes();
        if len > data_bytes / 2 {
            return Err(Error::InvalidArgument(format!(
                "batch of {len} bytes does not fit the PM region ({} bytes); enlarge pm_size",
                eng.region.len()
            )));
        }
        let count = batch.count();
        let seqs = count.max(1);
        self.make_room()?;
        let waited = eng.throttle.wait(len);
        if !waited.is_zero() {
            eng.counters.throttled_micros.fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
        }
        let mut r = self.reserve(len, seqs, batch.has_reserved_keys())?;
        let first = r.seq;
        let last = first + seqs as u64 - 1;
        let filled = r.fill(&eng.region_path, body, count, towers.as_ref());
        if let Err(e) = &filled {
            // The log now has a hole at our entry: nothing after it may be
            // acknowledged, so stop accepting writes.
            eng.poison(e);
        }
        drop(r);
        let mut hooked = Ok(());
        if let (Some(hook), true) = (before_publish, filled.is_ok()) {
            eng.pipeline.wait_visible(first - 1);
            hooked = eng.sync_log_waited(last).and_then(|_| hook(last));
        }
        // A failed msync poisons inside sync_log_waited, before the group
        // turns visible: its other members must not acknowledge their writes.
        let syncer = |end: u64| eng.sync_log_waited(end);
        let published = eng.pipeline.publish(first, last, sync && eng.log.needs_msync(), &syncer);
        filled?;
        hooked?;
        published?;
        if eng.poisoned_flag.load(Ordering::Acquire) {
            // An earlier write in the log failed; ours would not survive recovery.
            eng.check_writable()?;
        }
        eng.counters.user_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        eng.counters.writes.fetch_add(count as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Waits while the tree is too far behind (LevelDB-style slowdown, then stop).
    fn make_room(&self) -> Result<()> {
        let eng = &self.eng;
        let mut slowed = false;
        let mut stalled: Option<Instant> = None;
        // The retry asked of a failing background (the disk is full).
        let mut asked: Option<u64> = None;
        let mut st = eng.state.lock();
        let result = loop {
            if let Err(e) = st.check(eng.closing()) {
                break Err(e);
            }
            let stall = st.stall;
            let mem_full = st.mem.approximate_bytes() >= eng.opts.write_buffer_size;
            let mems_full = mem_full && st.imms.len() + 1 >= eng.opts.max_write_buffer_number;
            if stall.stop || mems_full {
                let since = *stalled.get_or_insert_with(Instant::now);
                // Back-pressure first; if background work cannot make room
                // (the disk is full), have it retry now (space may have
                // been freed), and give up with its error after a while.
                if st.bg_error.is_some() {
                    let retry = *asked.get_or_insert_with(|| eng.request_retry(&mut st));
                    if let Some(e) = eng.disk_full_error(&st, since, retry) {
                        break Err(e);
                    }
                }
                // The memtables cannot drain: their flush waits for PM that
                // nothing frees (the same timeout as a log extent's).
                if let Some(e) = eng.pm_full_error(&mut st, since) {
                    break Err(e);
                }
                eng.notify(&mut st);
                eng.cv.wait_for(&mut st, Duration::from_millis(100));
                continue;
            }
            if !slowed && stall.slow {
                drop(st);
                eng.counters.slowdowns.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
                slowed = true;
                st = eng.state.lock();
                continue;
            }
            break Ok(());
        };
        if let Some(t) = stalled {
            eng.counters.stall_micros.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        result
    }

    /// Reserves `len` bytes of log and `count` sequence numbers, switching
    /// memtables and starting log extents as they fill.
    /// `reserved_keys`: the batch has default-partition keys that begin
    /// with the partitions' mark, refused (under the write lock, see
    /// `DbInner::reserve_partition_keys`) once the database has partitions.
    pub(crate) fn reserve(&self, len: u64, count: u32, reserved_keys: bool) -> Result<Reserved> {
        let eng = &self.eng;
        let start = Instant::now();
        let mut w = eng.log.lock();
        if reserved_keys && self.partitioned.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(
                "keys beginning with 0xff 0xff belong to partitions in a database that has them".into(),
            ));
        }
        loop {
            if w.mem.approximate_bytes() >= eng.opts.write_buffer_size && !w.mem.is_empty() {
                let imms = eng.state.lock().imms.len();
                if imms + 1 < eng.opts.max_write_buffer_number {
                    eng.switch_memtable(&mut w);
                }
            }
            if let Some(r) = eng.log.try_reserve(&mut w, len, count)? {
                return Ok(r);
            }
            let room = self.flush_room(&w, len, count);
            match eng.log.start_extent(&mut w, len, room) {
                Ok(NewExtent::Started) => {}
                Ok(NewExtent::Full { wanted, free }) => {
                    // Seal what we have so a flush can free its extents.
                    if !w.mem.is_empty() && eng.state.lock().imms.len() + 1 < eng.opts.max_write_buffer_number {
                        eng.switch_memtable(&mut w);
                    }
                    // Once a writer has waited the whole timeout in vain,
                    // the ones after it fail at once while no extent can
                    // start: a server pipelining hundreds of writes would
                    // otherwise answer nothing for hours.
                    let timeout = Duration::from_millis(eng.opts.pm_full_timeout_ms);
                    if w.pm_gave_up || start.elapsed() > timeout {
                        let why = if eng.opts.entry_towers() {
                            "the pm-only profile keeps every live key in PM: enlarge pm_size, or delete or \
                             overwrite keys"
                        } else {
                            "flushes are not freeing PM (long-lived iterators or snapshots pin memtables?)"
                        };
                        let waited = if w.pm_gave_up {
                            format!("an earlier writer waited {timeout:?} in vain")
                        } else {
                            format!("waited {:?}", start.elapsed())
                        };
                        w.pm_gave_up = true;
                        drop(w);
                        // Have the background retry at once for the writers to come.
                        eng.notify(&mut eng.state.lock());
                        return Err(Error::PmFull(format!(
                            "{waited} for {wanted} free slots ({free} free, {room} kept for flushes); {why}"
                        )));
                    }
                    drop(w);
                    {
                        let mut st = eng.state.lock();
                        eng.notify(&mut st);
                        if let Some(p) = &st.poisoned {
                            return Err(Error::Poisoned(p.clone()));
                        }
                        eng.cv.wait_for(&mut st, Duration::from_millis(10));
                    }
                    w = eng.log.lock();
                }
                Err(ExtentFailure::HeadSync(e)) => {
                    eng.poison(&e);
                    return Err(e);
                }
                Err(ExtentFailure::Alloc(e)) => return Err(e),
            }
        }
    }
}

mod room;
#[cfg(test)]
mod tests;
