//! The write path: back-pressure, reservation, copy into PM, publication.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_pmem::{Placement, PmError, Slot};

use super::{DbInner, UnsyncedLog, WriteState, LOG_HEADS_IN_FLIGHT};
use crate::batch::{Records, WriteBatch};
use crate::error::{Error, Result};
use crate::log::{clear_commit_word, entry_len, write_entry, EXTENT_KIND_LOG, HEADER_LEN};
use crate::memtable::Memtable;
use crate::options::L0Kind;

/// Most records indexed in the memtable as one side-by-side batch.
const INDEX_CHUNK: usize = 64;

/// Space and sequence numbers handed to one writer.
struct Reserved {
    slot: Slot,
    seq: u64,
    mem: Arc<Memtable>,
    log_number: u64,
}

impl DbInner {
    /// Whether `sync` writes need an msync (an ordinary-file region).
    pub(crate) fn needs_msync(&self) -> bool {
        self.region.placement() == Placement::File
    }

    pub(crate) fn write(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        if let Some(why) = batch.invalid() {
            return Err(Error::InvalidArgument(why.to_string()));
        }
        self.check_writable()?;
        if batch.is_empty() {
            return Ok(());
        }
        let body = batch.rep();
        if HEADER_LEN + body.len() > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!("batch of {} bytes is too large", body.len())));
        }
        let len = entry_len(body.len());
        let data_bytes = self.region.slot_count().saturating_sub(2) * self.region.slot_bytes();
        if len > data_bytes / 2 {
            return Err(Error::InvalidArgument(format!(
                "batch of {len} bytes does not fit the PM region ({} bytes); enlarge pm_size",
                self.region.len()
            )));
        }
        let count = batch.count();
        self.make_room()?;
        self.throttle(len);
        let mut r = self.reserve(len, count)?;
        let first = r.seq;
        let last = first + count as u64 - 1;
        let filled = self.fill(&mut r, body, count);
        if let Err(e) = &filled {
            // The log now has a hole at our entry: nothing after it may be
            // acknowledged, so stop accepting writes.
            self.poison(e);
        }
        drop(r);
        // A failed msync poisons inside sync_log_upto, before the group
        // turns visible: its other members must not acknowledge their writes.
        let syncer = |end: u64| self.sync_log_upto(end);
        let published = self.pipeline.publish(first, last, sync && self.needs_msync(), &syncer);
        filled?;
        published?;
        if self.poisoned_flag.load(Ordering::Acquire) {
            // An earlier write in the log failed; ours would not survive recovery.
            self.check_writable()?;
        }
        self.counters.user_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        self.counters.writes.fetch_add(count as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Copies the entry into PM (payload, persist, commit word, persist) and
    /// indexes its records in the memtable.
    fn fill(&self, r: &mut Reserved, body: &[u8], count: u32) -> Result<()> {
        write_entry(&mut r.slot, r.log_number, r.seq, count, body).map_err(|e| Error::from_pm(&self.region_path, e))?;
        let base = r.slot.offset() + HEADER_LEN as u64;
        // Index in chunks: a chunk's skiplist searches overlap their cache
        // misses, and a bounded chunk keeps the splice state small.
        let mut chunk = Vec::with_capacity((count as usize).min(INDEX_CHUNK));
        let mut seq = r.seq;
        for rec in Records::new(body, base) {
            let rec = rec.map_err(|at| Error::corruption(&self.region_path, at, "batch does not decode"))?;
            chunk.push((rec.kind, rec.key, rec.value_off, rec.value.len() as u32));
            if chunk.len() == INDEX_CHUNK {
                r.mem.add_batch(seq, &chunk)?;
                seq += chunk.len() as u64;
                chunk.clear();
            }
        }
        if !chunk.is_empty() {
            r.mem.add_batch(seq, &chunk)?;
        }
        Ok(())
    }

    /// Spreads writes out at the throttle rate, if one is set (token bucket
    /// shared by all writers). Each write waits its own share, so delays are
    /// small and even (good tail latency) rather than rare long sleeps;
    /// waits under a millisecond spin, since a sleep cannot be that short.
    ///
    /// They must not `yield` instead: under Linux's EEVDF scheduler every
    /// `sched_yield` pushes the caller's deadline back by a whole slice, so
    /// a writer yielding through a few microseconds while column compaction
    /// and a memtable seal keep both cores busy fell behind them by tens of
    /// milliseconds at a time (fills dropped to ~100 puts per 50 ms when a
    /// round began, and the lowest second of a fill to 0.2 of the median).
    fn throttle(&self, bytes: u64) {
        let rate = self.throttle_rate.load(Ordering::Relaxed);
        if rate == 0 {
            return;
        }
        let wait = {
            let mut next = self.throttle_next.lock();
            let now = Instant::now();
            if *next < now {
                *next = now;
            }
            *next += Duration::from_secs_f64(bytes as f64 / rate as f64);
            next.saturating_duration_since(now)
        };
        if wait.is_zero() {
            return;
        }
        self.counters.throttled_micros.fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
        if wait >= Duration::from_millis(1) {
            std::thread::sleep(wait);
        } else {
            let until = Instant::now() + wait;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }

    /// The error for a writer stalled since `since` while a flush has been
    /// waiting for PM, once both have lasted `pm_full_timeout_ms`.
    fn pm_full_error(&self, st: &super::State, since: Instant) -> Option<Error> {
        let timeout = Duration::from_millis(self.opts.pm_full_timeout_ms);
        let waiting = st.pm_wait_since?;
        if since.elapsed() < timeout || waiting.elapsed() < timeout {
            return None;
        }
        Some(Error::PmFull(format!(
            "writes waited {:?} for sealed memtables whose flush has waited {:?} for free PM slots ({} free); \
             nothing is freeing PM (long-lived iterators or snapshots pin flushed memtables?)",
            since.elapsed(),
            waiting.elapsed(),
            self.region.free_slots()
        )))
    }

    /// Waits while the tree is too far behind (LevelDB-style slowdown, then stop).
    fn make_room(&self) -> Result<()> {
        let mut slowed = false;
        let mut stalled: Option<Instant> = None;
        // The retry asked of a failing background (the disk is full).
        let mut asked: Option<u64> = None;
        let mut st = self.state.lock();
        let result = loop {
            if let Some(p) = &st.poisoned {
                break Err(Error::Poisoned(p.clone()));
            }
            if self.shutting_down.load(Ordering::Acquire) {
                break Err(Error::Closed);
            }
            let l0 = if self.opts.l0 == L0Kind::Sstable { st.version.files(0).len() } else { 0 };
            let mem_full = st.mem.approximate_bytes() >= self.opts.write_buffer_size;
            let mems_full = mem_full && st.imms.len() + 1 >= self.opts.max_write_buffer_number;
            // The matrix is full: wait for column compaction to free PM.
            let matrix_full = self.opts.l0 == L0Kind::Matrix && st.matrix_pm_bytes >= self.opts.matrix_limit();
            if l0 >= self.opts.l0_stop_writes_trigger || mems_full || matrix_full {
                let since = *stalled.get_or_insert_with(Instant::now);
                // Back-pressure first; if background work cannot make room
                // (the disk is full), have it retry now (space may have
                // been freed), and give up with its error after a while.
                if st.bg_error.is_some() {
                    let retry = *asked.get_or_insert_with(|| self.request_retry(&mut st));
                    if let Some(e) = self.disk_full_error(&st, since, retry) {
                        break Err(e);
                    }
                }
                // The memtables cannot drain: their flush waits for PM that
                // nothing frees (the same timeout as a log extent's).
                if let Some(e) = self.pm_full_error(&st, since) {
                    break Err(e);
                }
                self.state_cv.notify_all();
                self.state_cv.wait_for(&mut st, Duration::from_millis(100));
                continue;
            }
            if !slowed && l0 >= self.opts.l0_slowdown_writes_trigger {
                drop(st);
                self.counters.slowdowns.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
                slowed = true;
                st = self.state.lock();
                continue;
            }
            break Ok(());
        };
        if let Some(t) = stalled {
            self.counters.stall_micros.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        result
    }

    /// Reserves `len` bytes of log and `count` sequence numbers.
    fn reserve(&self, len: u64, count: u32) -> Result<Reserved> {
        let start = Instant::now();
        let mut w = self.write.lock();
        loop {
            if w.mem.approximate_bytes() >= self.opts.write_buffer_size && !w.mem.is_empty() {
                let imms = self.state.lock().imms.len();
                if imms + 1 < self.opts.max_write_buffer_number {
                    self.switch_memtable(&mut w);
                }
            }
            if let Some(writer) = w.writer.as_mut() {
                if let Some(mut slot) = writer.reserve(len) {
                    let tail = writer.tail();
                    w.log_tail.store(tail, Ordering::Release);
                    clear_commit_word(&mut slot).map_err(|e| Error::from_pm(&self.region_path, e))?;
                    let seq = w.next_seq;
                    w.next_seq += count as u64;
                    w.mem.note_seq(w.next_seq - 1);
                    w.mem.charge(len as usize);
                    return Ok(Reserved { slot, seq, mem: w.mem.clone(), log_number: w.log_number });
                }
            }
            let slots = len.div_ceil(self.region.slot_bytes()).max(1);
            // Only the newest LOG_HEADS_IN_FLIGHT log heads may be missing
            // at a power cut (the next open skips their numbers): the oldest
            // pending one is made durable first. The helper thread, which
            // msyncs heads in allocation order, has usually done it already.
            let oldest = w.pending_heads.front().filter(|_| w.pending_heads.len() >= LOG_HEADS_IN_FLIGHT);
            if let Some(Err(e)) = oldest.map(|h| h.sync()) {
                let e = Error::from_pm(&self.region_path, e);
                self.poison(&e);
                return Err(e);
            }
            // The new head's msync (a device flush) is left to the helper
            // thread, off the write path.
            match self.region.allocate_deferred(EXTENT_KIND_LOG, slots, w.next_log_number) {
                Ok(writer) => {
                    w.log_number = w.next_log_number;
                    w.next_log_number += 1;
                    let ext = writer.extent().clone();
                    w.mem.hold_extent(ext.clone());
                    if w.pending_heads.len() >= LOG_HEADS_IN_FLIGHT {
                        w.pending_heads.pop_front();
                    }
                    w.pending_heads.push_back(ext.head_sync());
                    w.log_tail = Arc::new(AtomicU64::new(0));
                    if self.needs_msync() {
                        let (off, len) = (ext.offset(), ext.len());
                        let mut u = self.unsynced.lock();
                        u.retain(|x| (x.off, x.len) != (off, len));
                        // The reservation after this allocation is the extent's first.
                        u.push(UnsyncedLog {
                            off,
                            len,
                            reserved: w.log_tail.clone(),
                            head: ext.head_sync(),
                            first_seq: w.next_seq,
                        });
                    }
                    let map = prefault_bytes(ext.len(), w.mem.approximate_bytes(), self.opts.write_buffer_size, len);
                    self.prefault(ext, map);
                    // After the extent, so the writer's next pages are
                    // mapped before the prefault thread builds buffers.
                    if self.spare_mem.lock().is_none() {
                        self.prepare_spare_memtable();
                    }
                    w.writer = Some(writer);
                }
                Err(PmError::Full { wanted, free }) => {
                    // Seal what we have so a flush can free its extents.
                    if !w.mem.is_empty() && self.state.lock().imms.len() + 1 < self.opts.max_write_buffer_number {
                        self.switch_memtable(&mut w);
                    }
                    if start.elapsed() > Duration::from_millis(self.opts.pm_full_timeout_ms) {
                        return Err(Error::PmFull(format!(
                            "waited {:?} for {wanted} free slots ({free} free); flushes are not freeing PM \
                             (long-lived iterators or snapshots pin memtables?)",
                            start.elapsed()
                        )));
                    }
                    drop(w);
                    {
                        let mut st = self.state.lock();
                        self.state_cv.notify_all();
                        if let Some(p) = &st.poisoned {
                            return Err(Error::Poisoned(p.clone()));
                        }
                        self.state_cv.wait_for(&mut st, Duration::from_millis(10));
                    }
                    w = self.write.lock();
                }
                Err(e) => return Err(Error::from_pm(&self.region_path, e)),
            }
        }
    }

    /// Seals the mutable memtable and starts a new one in a new log extent.
    pub(crate) fn switch_memtable(&self, w: &mut WriteState) {
        let id = w.next_mem_id;
        w.next_mem_id += 1;
        let new = Arc::new(Memtable::with_buffers(
            id,
            self.region.clone(),
            self.region_path.clone(),
            w.next_log_number,
            self.memtable_buffers(),
        ));
        let old = std::mem::replace(&mut w.mem, new.clone());
        old.seal(w.next_log_number);
        w.writer = None;
        let mut st = self.state.lock();
        st.imms.push_back(old);
        st.mem = new;
        self.install_sv(&st);
        self.state_cv.notify_all();
    }
}

/// How much of a fresh log extent of `ext_len` bytes to map in ahead of
/// the writer: what the memtable can still take before it is sealed (its
/// size counts every log byte), plus `len`, the reservation that may cross
/// that size. A memtable switch abandons the rest of its extent, and on an
/// ordinary file every page mapped in for writing is a dirty page that is
/// written back: mapping whole extents wrote back about 4 MiB of zeros per
/// memtable. A memtable already past its size (no switch while sealed ones
/// wait) keeps writing, so it gets the whole extent.
fn prefault_bytes(ext_len: u64, mem_bytes: usize, buffer_size: usize, len: u64) -> u64 {
    if mem_bytes >= buffer_size {
        return ext_len;
    }
    let room = ((buffer_size - mem_bytes) as u64).saturating_add(len);
    room.div_ceil(4096).saturating_mul(4096).min(ext_len)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use strata_pmem::SimPm;

    use super::*;
    use crate::fs::{FsCrashMode, MemFs};
    use crate::{Db, Options};

    /// A writer stalled behind memtables whose flush cannot get PM fails
    /// once both have waited `pm_full_timeout_ms`, instead of waiting for
    /// ever (seen as a hang of `limits::full_pm_region_*_matrix_l0` when the
    /// memtables filled up before a log extent ran out).
    #[test]
    fn a_writer_stalled_behind_a_flush_waiting_for_pm_gets_pm_full() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Options::for_tests();
        o.pm_full_timeout_ms = 50;
        let db = Db::open(dir.path(), o).unwrap();
        let long_ago = Instant::now() - Duration::from_secs(1);
        let mut st = db.inner.state.lock();
        assert!(db.inner.pm_full_error(&st, long_ago).is_none(), "no flush is waiting for PM");
        st.pm_wait_since = Some(Instant::now());
        assert!(db.inner.pm_full_error(&st, long_ago).is_none(), "the flush has not waited long enough");
        st.pm_wait_since = Some(long_ago);
        assert!(db.inner.pm_full_error(&st, Instant::now()).is_none(), "the writer has not waited long enough");
        assert!(matches!(db.inner.pm_full_error(&st, long_ago), Some(Error::PmFull(_))));
    }

    /// The throttle holds writers to its rate also when each write's share
    /// is far below a millisecond (the spinning path), and when it is above
    /// (the sleeping path).
    #[test]
    fn throttled_writes_never_go_faster_than_the_rate() {
        let dir = tempfile::tempdir().unwrap();
        // SSTable L0: no matrix publishes that would set the rate back.
        let o = Options { l0: L0Kind::Sstable, ..Options::for_tests() };
        let db = Db::open(dir.path(), o).unwrap();
        for (rate, bytes, n) in [(100u64 << 20, 1000u64, 10_000u64), (1 << 20, 2 << 10, 20)] {
            db.inner.throttle_rate.store(rate, Ordering::Relaxed);
            let start = Instant::now();
            for _ in 0..n {
                db.inner.throttle(bytes);
            }
            let least = Duration::from_secs_f64((n * bytes) as f64 / rate as f64);
            assert!(start.elapsed() >= least.mul_f64(0.95), "{n} x {bytes} B at {rate} B/s took {:?}", start.elapsed());
        }
        db.inner.throttle_rate.store(0, Ordering::Relaxed);
    }

    #[test]
    fn a_log_extent_is_mapped_in_only_as_far_as_the_memtable_can_fill_it() {
        let mib = 1u64 << 20;
        // Room for 3 MiB more, and this reservation: 3 MiB and a page.
        assert_eq!(prefault_bytes(8 * mib, 61 << 20, 64 << 20, 1040), 3 * mib + 4096);
        // Room for more than the extent: all of it.
        assert_eq!(prefault_bytes(8 * mib, 1 << 20, 64 << 20, 1040), 8 * mib);
        // At or past its size the memtable keeps writing (no switch while
        // sealed ones wait): all of it.
        assert_eq!(prefault_bytes(8 * mib, 64 << 20, 64 << 20, 1040), 8 * mib);
        assert_eq!(prefault_bytes(8 * mib, 70 << 20, 64 << 20, 1040), 8 * mib);
        // A reservation larger than the room still gets its pages.
        assert_eq!(prefault_bytes(16 * mib, (64 << 20) - 10, 64 << 20, 9 * mib), 9 * mib + 4096);
    }

    /// Options for a 4 MiB simulated ordinary-file region of 64 KiB slots
    /// on an in-memory disk, with no background log sync, and both devices.
    fn small_file_region() -> (Options, Arc<SimPm>, MemFs) {
        let mut o = Options::for_tests();
        o.pm_size = 4 << 20;
        o.pm_slot_bytes = 64 << 10;
        o.write_buffer_size = 2 << 20;
        o.pm_sync_interval_ms = 0;
        let sim = Arc::new(SimPm::new_file(4 << 20));
        let mem = MemFs::new();
        o.pm_sim = Some(sim.clone());
        o.fs = Arc::new(mem.clone());
        (o, sim, mem)
    }

    /// The disk and the ordinary-file region a power cut leaves: only
    /// fsynced files, only msynced pages.
    fn power_cut(mem: &MemFs, sim: &SimPm, seed: u64) -> (MemFs, Arc<SimPm>) {
        let (snap, cs) = mem.snapshot_with(|| sim.crash_state());
        let fs = snap.restore(FsCrashMode::DropUnsynced, &mut StdRng::seed_from_u64(seed));
        (fs, Arc::new(SimPm::file_from_image(cs.minimal_image())))
    }

    /// Makes every write to `db` durable and cuts the power: what is left.
    fn sync_and_cut(db: Db, fs: &MemFs, sim: &SimPm, seed: u64) -> (MemFs, Arc<SimPm>) {
        db.sync().unwrap();
        let left = power_cut(fs, sim, seed);
        std::mem::forget(db);
        left
    }

    /// [`sync_and_cut`], then opens what is left with `o`.
    fn sync_cut_and_reopen(db: Db, mut o: Options, fs: &MemFs, sim: &SimPm, seed: u64) -> Db {
        let (fs, sim) = sync_and_cut(db, fs, sim, seed);
        o.fs = Arc::new(fs);
        o.pm_sim = Some(sim);
        Db::open("/db", o).unwrap()
    }

    /// Log extent heads are msynced off the write path (by the prefault
    /// thread), but before a log extent is allocated, every head older than
    /// the newest `LOG_HEADS_IN_FLIGHT` is durable: at a power cut, the
    /// durable heads name the log up to at most that many extents from its
    /// end. The prefault thread is cut off here, so only the writer syncs.
    #[test]
    fn log_heads_older_than_the_ones_in_flight_are_durable_before_a_newer_extent_is_allocated() {
        let sim = Arc::new(SimPm::new_file(4 << 20));
        let mut o = Options::for_tests();
        o.pm_size = 4 << 20;
        o.pm_slot_bytes = 64 << 10;
        o.write_buffer_size = 2 << 20;
        o.pm_sim = Some(sim.clone());
        o.fs = Arc::new(MemFs::new());
        let db = Db::open("/db", o).unwrap();
        let (tx, _held) = std::sync::mpsc::channel();
        *db.inner.prefault.lock() = Some(tx);
        let start = db.inner.write.lock().next_log_number;
        let value = vec![b'v'; 1000];
        for i in 0..600u32 {
            db.put(format!("k{i:04}"), &value).unwrap();
        }
        let newest = db.inner.write.lock().log_number;
        let cs = sim.crash_state();
        let image = Arc::new(SimPm::file_from_image(cs.minimal_image()));
        let ro = strata_pmem::RegionOptions {
            len: 4 << 20,
            slot_bytes: 64 << 10,
            write_latency_ns: 0,
            create: false,
            expect_id: None,
        };
        let (region, _) = strata_pmem::Region::open(strata_pmem::Backing::Sim(image), &ro).unwrap();
        let mut durable: Vec<u64> =
            region.heads().unwrap().into_iter().filter(|h| h.kind == EXTENT_KIND_LOG).map(|h| h.number).collect();
        durable.sort_unstable();
        assert!(newest >= 8, "the writes spanned only {newest} log extents");
        // Every extent but the newest ones, whose heads may still be pending.
        let settled = newest + 1 - LOG_HEADS_IN_FLIGHT as u64;
        let older: Vec<u64> = durable.iter().copied().filter(|n| *n < settled).collect();
        let first = older.first().copied().unwrap_or(settled);
        assert!(first <= start, "durable log heads {durable:?}, first log number {start}");
        assert_eq!(older, (first..settled).collect::<Vec<u64>>(), "durable log heads {durable:?}");
    }

    /// With two log heads in flight, a power cut can keep the newer one and
    /// lose the older (a torn write of the head table). Recovery then keeps
    /// the log up to the hole: the newer extent's entries do not continue
    /// the sequence, so they are dropped with the older extent's, and the
    /// writes that survive are a prefix of the history. Neither number is
    /// handed out again, so the dropped entries never come back.
    #[test]
    fn a_newer_log_head_kept_without_an_older_one_recovers_the_log_up_to_the_hole() {
        let (mut o, sim, mem) = small_file_region();
        let slot = o.pm_slot_bytes;
        let key = |i: u32| format!("k{i:04}");
        let val = |tag: u8| vec![tag; 1000];
        let db = Db::open("/db", o.clone()).unwrap();
        let mut log_of = Vec::new();
        for i in 0..400u32 {
            db.put(key(i), val(b'1')).unwrap();
            log_of.push(db.inner.write.lock().log_number);
        }
        let newest = db.inner.write.lock().log_number;
        assert!(newest >= log_of[0] + 4, "the writes spanned too few log extents: {log_of:?}");
        // Entries and heads all reach the media ...
        let (fs, sim) = sync_and_cut(db, &mem, &sim, 1);
        // ... except the head of the second-newest extent.
        let hole = newest - 1;
        {
            let ro = strata_pmem::RegionOptions {
                len: 4 << 20,
                slot_bytes: slot,
                write_latency_ns: 0,
                create: false,
                expect_id: None,
            };
            let (region, _) = strata_pmem::Region::open(strata_pmem::Backing::Sim(sim.clone()), &ro).unwrap();
            let h = region.heads().unwrap().into_iter().find(|h| h.kind == EXTENT_KIND_LOG && h.number == hole);
            region.retire(h.expect("the hole's head was durable")).unwrap();
        }
        o.pm_sim = Some(sim.clone());
        o.fs = Arc::new(fs.clone());
        let db = Db::open("/db", o.clone()).unwrap();
        for (i, log) in log_of.iter().enumerate() {
            let got = db.get(key(i as u32)).unwrap();
            if *log < hole {
                assert_eq!(got, Some(val(b'1')), "write {i} (log {log}) before the hole lost");
            } else {
                assert_eq!(got, None, "write {i} (log {log}) at or after the hole kept");
            }
        }
        // New writes, made durable, then another power cut: they are kept,
        // and no entry dropped at the first one comes back.
        for i in 0..20 {
            db.put(key(i), val(b'2')).unwrap();
        }
        // The newest durable head was `newest`, and the cut process may have
        // had LOG_HEADS_IN_FLIGHT more extents whose heads never became
        // durable: none of those numbers is handed out again (their entries
        // may be on the media, and a reused number would revive them).
        let first_new = db.inner.write.lock().log_number;
        let skipped = newest + LOG_HEADS_IN_FLIGHT as u64;
        assert!(first_new > skipped, "log number {first_new} reused; numbers up to {skipped} must be skipped");
        let db = sync_cut_and_reopen(db, o, &fs, &sim, 2);
        for (i, log) in log_of.iter().enumerate() {
            let got = db.get(key(i as u32)).unwrap();
            let want = if i < 20 {
                Some(val(b'2'))
            } else if *log < hole {
                Some(val(b'1'))
            } else {
                None
            };
            assert_eq!(got, want, "write {i} (log {log}) after the second power cut");
        }
    }

    /// Regression (review of stop 18): writer X reserves space in log
    /// extent A and is preempted before copying; writer Y allocates extent
    /// B; a sync runs. That sync must not forget A, or X's bytes (written
    /// after it) are never msynced and a power cut loses X and every write
    /// after it, although `Db::sync` returned.
    #[test]
    fn a_sync_keeps_an_older_extent_that_a_writer_is_still_filling() {
        let sim = Arc::new(SimPm::new_file(4 << 20));
        let mem = MemFs::new();
        let mut o = Options::for_tests();
        o.pm_size = 4 << 20;
        o.pm_slot_bytes = 64 << 10;
        o.write_buffer_size = 1 << 20;
        o.pm_sim = Some(sim.clone());
        o.fs = Arc::new(mem.clone());
        let db = Db::open("/db", o.clone()).unwrap();
        let inner = db.inner.clone();

        let mut bx = WriteBatch::new();
        bx.put(b"x", b"value of x");
        let mut x = inner.reserve(entry_len(bx.rep().len()), bx.count()).unwrap();
        assert_eq!(inner.unsynced.lock().len(), 1, "X's reservation allocated extent A");

        // Y does not fit in the rest of A: it allocates B, then waits for X to publish.
        let y = {
            let db = db.clone();
            std::thread::spawn(move || db.put(b"y", vec![b'y'; 100 << 10]))
        };
        let start = std::time::Instant::now();
        while inner.unsynced.lock().len() < 2 {
            assert!(start.elapsed() < Duration::from_secs(20), "Y never allocated extent B");
            std::thread::yield_now();
        }
        inner.sync_log().unwrap();

        inner.fill(&mut x, bx.rep(), bx.count()).unwrap();
        let seq = x.seq;
        drop(x);
        inner.pipeline.publish(seq, seq, false, &|_| Ok(())).unwrap();
        y.join().unwrap().unwrap();
        db.sync().unwrap();

        let (fs, sim) = power_cut(&mem, &sim, 1);
        drop(db);
        o.pm_sim = Some(sim);
        o.fs = Arc::new(fs);
        let db = Db::open("/db", o).unwrap();
        assert_eq!(db.get(b"x").unwrap().as_deref(), Some(&b"value of x"[..]), "X lost after Db::sync");
        assert_eq!(db.get(b"y").unwrap().map(|v| v.len()), Some(100 << 10), "Y lost after Db::sync");
    }
    /// A memtable switch takes the buffers the prefault thread made ready
    /// (their pages already mapped), and the next spare is made once the
    /// new memtable has its first log extent.
    #[test]
    fn a_memtable_switch_takes_the_spare_buffers_and_a_new_spare_follows() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::for_tests()).unwrap();
        let inner = db.inner.clone();
        let wait_for_spare = || {
            let start = std::time::Instant::now();
            while inner.spare_mem.lock().is_none() {
                assert!(start.elapsed() < Duration::from_secs(20), "no spare memtable was made");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        for round in 0..3 {
            db.put(format!("k{round}"), b"v").unwrap();
            wait_for_spare();
            let before = inner.write.lock().mem.id();
            {
                let mut w = inner.write.lock();
                inner.switch_memtable(&mut w);
            }
            assert_ne!(inner.write.lock().mem.id(), before, "round {round}: no switch");
            assert!(inner.spare_mem.lock().is_none(), "round {round}: the switch left the spare unused");
        }
        // The memtables built on spare buffers hold what was written.
        db.put(b"last", b"v").unwrap();
        for k in ["k0", "k1", "k2", "last"] {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(&b"v"[..]), "{k}");
        }
        wait_for_spare();
    }
    /// A log extent's head is msynced after the writer starts filling it,
    /// so a power cut can keep some of its entries (written back by the
    /// kernel) without its head. The next open must not hand out that log
    /// number again: a new extent with the same number on the same slots,
    /// holding fewer entries of the same sizes, would be followed on the
    /// media by the stale entries, whose log number and sequence numbers
    /// continue it, and a later recovery would bring back writes that the
    /// first power cut had lost, over newer ones.
    #[test]
    fn a_log_number_whose_head_may_not_be_durable_is_not_reused() {
        let (mut o, sim, mem) = small_file_region();
        let key = |i: u32| format!("k{i:04}");
        let val = |tag: u8| vec![tag; 100];
        let db = Db::open("/db", o.clone()).unwrap();
        // The prefault thread never makes the new extents' heads durable.
        let (tx, _held) = std::sync::mpsc::channel();
        *db.inner.prefault.lock() = Some(tx);
        // Enough for the writer to have as many extents as heads can be in
        // flight, so none of their heads was synced by the writer either.
        let mut n = 0;
        while db.inner.write.lock().pending_heads.len() < LOG_HEADS_IN_FLIGHT {
            db.put(key(n), val(b'1')).unwrap();
            n += 1;
        }
        for _ in 0..10 {
            db.put(key(n), val(b'1')).unwrap();
            n += 1;
        }
        assert!(n < 1000 && db.inner.write.lock().pending_heads.len() == LOG_HEADS_IN_FLIGHT);
        // The kernel wrote the extents' entries back, not their heads.
        for ext in db.inner.write.lock().mem.extents() {
            db.inner.region.sync(ext.offset(), ext.len()).unwrap();
        }
        let (fs, sim) = power_cut(&mem, &sim, 1);
        std::mem::forget(db);
        o.pm_sim = Some(sim.clone());
        o.fs = Arc::new(fs.clone());
        let db = Db::open("/db", o.clone()).unwrap();
        for i in 0..n {
            assert_eq!(db.get(key(i)).unwrap(), None, "unsynced write {i} with no durable head survived");
        }
        // Fewer writes of the same sizes, made durable.
        for i in 0..10 {
            db.put(key(i), val(b'2')).unwrap();
        }
        let db = sync_cut_and_reopen(db, o, &fs, &sim, 2);
        for i in 0..10 {
            assert_eq!(db.get(key(i)).unwrap(), Some(val(b'2')), "synced write {i} lost or overwritten");
        }
        for i in 10..n {
            assert_eq!(db.get(key(i)).unwrap(), None, "write {i}, lost at the first power cut, came back");
        }
    }
}
