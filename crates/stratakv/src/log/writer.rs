//! The log writer: which log extent and memtable writes go to, their
//! sequence numbers, the extent heads still on their way to the media, and
//! the extents an msync must cover.
//!
//! A writer reserves log space and sequence numbers under the write lock
//! ([`LogWriter::lock`], a short critical section), then copies its entry
//! into PM and indexes it ([`Reserved::fill`]) in parallel with other
//! writers; [`super::Pipeline`] publishes the writes in sequence order.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use strata_pmem::{ExtentWriter, HeadSync, Placement, PmError, Region, Slot};

use super::prefault::{prefault_bytes, Prefaulter};
use super::{clear_commit_word, write_entry, Towers, EXTENT_KIND_LOG, HEADER_LEN};
use crate::batch::Records;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::memtable::Memtable;

/// How many of the newest log extents' heads may still be on their way to
/// the media. Before a log extent is allocated, the head of the one this
/// many extents older must be durable, so at a power cut only the heads of
/// the newest this many extents can be missing: the next open never hands
/// out their numbers again (see [`super::recovery::next_log_number`]), and
/// a missing one leaves a hole in the log, where recovery stops (sequence
/// numbers must continue). An msync of a head is a device flush and can
/// take tens of milliseconds while tables are being written back, longer
/// than a writer takes to fill an extent. Measured over a 4.2M x 1 KiB
/// data-dir fill, the writer waited for a head more than 0.2 ms: about 80
/// times (up to 60 ms, the fill's max put latency) with 1 in flight, 13-16
/// with 2, 1-3 (up to 10 ms) with 3.
pub(crate) const LOG_HEADS_IN_FLIGHT: usize = 3;

/// Most records indexed in the memtable as one side-by-side batch.
const INDEX_CHUNK: usize = 64;

/// Who writes where, with which sequence numbers (behind the write lock).
pub(crate) struct WriteState {
    /// The mutable memtable: new writes are indexed here.
    pub mem: Arc<Memtable>,
    writer: Option<ExtentWriter>,
    /// Heads of the newest log extents allocated, oldest first (at most
    /// [`LOG_HEADS_IN_FLIGHT`]): the prefault thread may still be msyncing them.
    pending_heads: VecDeque<HeadSync>,
    /// Bytes reserved so far in the current log extent (shared with its
    /// [`UnsyncedLog`]).
    log_tail: Arc<AtomicU64>,
    /// Number of the current log extent.
    log_number: u64,
    next_log_number: u64,
    next_seq: SeqNo,
    next_mem_id: u64,
    /// A writer waited `pm_full_timeout_ms` for a new log extent and got
    /// `PmFull`, and no extent has started since: writers that find the
    /// region still full get `PmFull` at once rather than each waiting the
    /// whole timeout again.
    pub pm_gave_up: bool,
}

impl WriteState {
    /// The sequence the next reservation gets.
    pub fn next_seq(&self) -> SeqNo {
        self.next_seq
    }

    /// Id the next memtable will get: every memtable sealed so far has a
    /// smaller one.
    pub fn next_mem_id(&self) -> u64 {
        self.next_mem_id
    }

    /// Number of the log extent writes go to now (0 before the first).
    #[cfg(test)]
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The number the next log extent gets.
    #[cfg(test)]
    pub fn next_log_number(&self) -> u64 {
        self.next_log_number
    }

    /// Log extent heads that may not be durable yet.
    #[cfg(test)]
    pub fn heads_in_flight(&self) -> usize {
        self.pending_heads.len()
    }
}

/// Free slots pm-only writers leave to log cleaning, of `slots` in all
/// (an eighth, at least 3): cleaning needs room to move live nodes into
/// before it can free anything.
pub fn cleaning_reserve(slots: u64) -> u64 {
    (slots / 8).max(3)
}

/// Space and sequence numbers handed to one writer.
pub(crate) struct Reserved {
    slot: Slot,
    /// The first sequence number of the write.
    pub seq: SeqNo,
    mem: Arc<Memtable>,
    log_number: u64,
}

impl Reserved {
    /// Copies the entry into PM (payload, persist, commit word, persist)
    /// and indexes its records in the memtable.
    pub fn fill(
        &mut self,
        region_path: &std::path::Path,
        body: &[u8],
        count: u32,
        towers: Option<&Towers>,
    ) -> Result<()> {
        write_entry(&mut self.slot, self.log_number, self.seq, count, body, towers)
            .map_err(|e| Error::from_pm(region_path, e))?;
        let links_len = towers.map_or(0, Towers::bytes);
        let base = self.slot.offset() + (HEADER_LEN + links_len) as u64;
        let mut nodes = towers.map(|t| t.offsets(self.slot.offset() + HEADER_LEN as u64));
        // Index in chunks: a chunk's skiplist searches overlap their cache
        // misses, and a bounded chunk keeps the splice state small.
        let mut chunk = Vec::with_capacity((count as usize).min(INDEX_CHUNK));
        let mut seq = self.seq;
        for rec in Records::new(body, base) {
            let rec = rec.map_err(|at| Error::corruption(region_path, at, "batch does not decode"))?;
            let back = nodes.as_mut().and_then(|n| n.next()).map_or(0, |node| (rec.value_off - node) as u32);
            chunk.push((rec.kind, rec.key, rec.value_off, rec.value.len() as u32, back));
            if chunk.len() == INDEX_CHUNK {
                self.mem.add_batch(seq, &chunk)?;
                seq += chunk.len() as u64;
                chunk.clear();
            }
        }
        if !chunk.is_empty() {
            self.mem.add_batch(seq, &chunk)?;
        }
        Ok(())
    }
}

/// A log extent that may hold data not yet msynced (file placement only).
/// Holds no lease: the extent's slots are freed as usual meanwhile, and
/// msyncing a range that was freed is harmless.
#[derive(Clone, Debug)]
struct UnsyncedLog {
    off: u64,
    len: u64,
    /// Bytes reserved in the extent so far: a sync covers only those. The
    /// rest was prefaulted, so its pages are dirty zeros that writing back
    /// now would only have to write again once filled.
    reserved: Arc<AtomicU64>,
    /// Syncs the extent's head word.
    head: HeadSync,
    /// The first sequence number reserved in it: every write reserved in
    /// the extent before it is lower.
    first_seq: u64,
}

impl PartialEq for UnsyncedLog {
    fn eq(&self, other: &Self) -> bool {
        (self.off, self.len, self.first_seq) == (other.off, other.len, other.first_seq)
    }
}

/// What starting a new log extent came to.
pub(crate) enum NewExtent {
    /// Writes go to the new extent now.
    Started,
    /// The region has no room: flushes must free some first.
    Full {
        /// Slots asked for.
        wanted: u64,
        /// Slots free.
        free: u64,
    },
}

/// Why a new log extent could not be started.
pub(crate) enum ExtentFailure {
    /// An older extent's head could not be made durable: every write after
    /// it may be lost at a power cut, so the database must refuse writes.
    HeadSync(Error),
    /// The allocation failed (a full tmpfs under the region, say); nothing
    /// was written and a later attempt may succeed.
    Alloc(Error),
}

/// The writer of the PM log (see the module doc).
pub(crate) struct LogWriter {
    region: Region,
    region_path: PathBuf,
    write: Mutex<WriteState>,
    /// Log extents that may hold data not yet msynced, oldest first.
    unsynced: Mutex<Vec<UnsyncedLog>>,
    /// Maps log pages in, syncs heads and readies memtable buffers off the
    /// write path.
    pub prefault: Prefaulter,
    buffer_size: usize,
    /// Free slots new log extents must leave (pm-only: room for log
    /// cleaning to move live nodes into, so it can always free PM).
    keep_free: std::sync::atomic::AtomicU64,
    /// Log msyncs a writer or a `Db::sync` caller waited for since the last
    /// extent started: the next extent is written through if any.
    waited_syncs: std::sync::atomic::AtomicU64,
}

impl LogWriter {
    /// A writer whose next memtable after `mem` gets id `next_mem_id`, whose
    /// next log extent gets `next_log_number`, and whose next write gets
    /// sequence `next_seq`.
    pub fn new(
        region: Region,
        region_path: PathBuf,
        mem: Arc<Memtable>,
        next_log_number: u64,
        next_seq: SeqNo,
        buffer_size: usize,
    ) -> LogWriter {
        let write = WriteState {
            mem,
            writer: None,
            pending_heads: VecDeque::new(),
            log_tail: Arc::new(AtomicU64::new(0)),
            log_number: 0,
            next_log_number,
            next_seq,
            next_mem_id: 2,
            pm_gave_up: false,
        };
        LogWriter {
            region,
            region_path,
            write: Mutex::new(write),
            unsynced: Mutex::new(Vec::new()),
            prefault: Prefaulter::new(buffer_size),
            buffer_size,
            keep_free: std::sync::atomic::AtomicU64::new(0),
            waited_syncs: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Makes new log extents leave `slots` slots free: writers wait (and
    /// get `PmFull` after `pm_full_timeout_ms`) rather than take them.
    pub fn keep_free(&self, slots: u64) {
        self.keep_free.store(slots, Ordering::Relaxed);
    }

    /// The write lock: hold it only to reserve, switch memtables or start
    /// an extent (lock order: before the engine's `state`).
    pub fn lock(&self) -> MutexGuard<'_, WriteState> {
        self.write.lock()
    }

    /// Whether a write is durable against power loss only after an msync
    /// (an ordinary-file region).
    pub fn needs_msync(&self) -> bool {
        self.region.placement() == Placement::File
    }

    /// Reserves `len` bytes of the current log extent and `count` sequence
    /// numbers, if the extent has room.
    #[inline]
    pub fn try_reserve(&self, w: &mut WriteState, len: u64, count: u32) -> Result<Option<Reserved>> {
        let Some(writer) = w.writer.as_mut() else { return Ok(None) };
        let Some(mut slot) = writer.reserve(len) else { return Ok(None) };
        w.log_tail.store(writer.tail(), Ordering::Release);
        clear_commit_word(&mut slot).map_err(|e| Error::from_pm(&self.region_path, e))?;
        let seq = w.next_seq;
        w.next_seq += count as u64;
        w.mem.note_seq(w.next_seq - 1);
        w.mem.charge(len as usize);
        w.mem.charge_records(count as usize);
        Ok(Some(Reserved { slot, seq, mem: w.mem.clone(), log_number: w.log_number }))
    }

    /// Starts a new log extent with room for an entry of `len` bytes,
    /// leaving `flush_slots` free slots besides `keep_free` (what level 0
    /// needs to take in the memtables not yet flushed, see
    /// `DbInner::flush_room`).
    pub fn start_extent(
        &self,
        w: &mut WriteState,
        len: u64,
        flush_slots: u64,
    ) -> std::result::Result<NewExtent, ExtentFailure> {
        let slots = len.div_ceil(self.region.slot_bytes()).max(1);
        // Only the newest LOG_HEADS_IN_FLIGHT log heads may be missing at a
        // power cut (the next open skips their numbers): the oldest pending
        // one is made durable first. The prefault thread, which msyncs
        // heads in allocation order, has usually done it already.
        let oldest = w.pending_heads.front().filter(|_| w.pending_heads.len() >= LOG_HEADS_IN_FLIGHT);
        if let Some(Err(e)) = oldest.map(|h| h.sync()) {
            return Err(ExtentFailure::HeadSync(Error::from_pm(&self.region_path, e)));
        }
        // The new head's msync (a device flush) is left to the prefault
        // thread, off the write path.
        let free = self.region.free_slots();
        if free < slots + self.keep_free.load(Ordering::Relaxed) + flush_slots {
            return Ok(NewExtent::Full { wanted: slots, free });
        }
        let writer = match self.region.allocate_deferred(EXTENT_KIND_LOG, slots, w.next_log_number) {
            Ok(writer) => writer,
            Err(PmError::Full { wanted, free }) => return Ok(NewExtent::Full { wanted, free }),
            Err(e) => return Err(ExtentFailure::Alloc(Error::from_pm(&self.region_path, e))),
        };
        w.log_number = w.next_log_number;
        w.next_log_number += 1;
        w.pm_gave_up = false;
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
        let map = prefault_bytes(ext.len(), w.mem.approximate_bytes(), self.buffer_size, len);
        let write_through = self.waited_syncs.swap(0, Ordering::Relaxed) > 0;
        self.prefault.extent(ext, map, write_through);
        // After the extent, so the writer's next pages are mapped before
        // the prefault thread builds buffers.
        self.prefault.prepare_spare();
        w.writer = Some(writer);
        Ok(NewExtent::Started)
    }

    /// Seals the mutable memtable and starts a new one, whose writes go to
    /// a new log extent. Returns the sealed memtable.
    pub fn new_memtable(&self, w: &mut WriteState) -> Arc<Memtable> {
        let id = w.next_mem_id;
        w.next_mem_id += 1;
        let new = Arc::new(Memtable::with_buffers(
            id,
            self.region.clone(),
            self.region_path.clone(),
            w.next_log_number,
            self.prefault.take_buffers(),
        ));
        let old = std::mem::replace(&mut w.mem, new);
        old.seal(w.next_log_number);
        w.writer = None;
        old
    }

    /// [`LogWriter::sync_upto`] for a caller that waits for it (a sync
    /// write or `Db::sync`, not the periodic or flush msyncs): the next log
    /// extent started is written through ahead of the writer.
    pub fn waited_sync_upto(&self, filled: u64) -> Result<()> {
        self.waited_syncs.fetch_add(1, Ordering::Relaxed);
        self.sync_upto(filled)
    }

    /// msyncs every log extent that may hold unsynced data; every write up
    /// to sequence `filled` must already be in PM. An extent leaves the list
    /// only when a newer one exists and all writes reserved in it are
    /// `<= filled`: a writer that reserved space in an older extent may
    /// still be copying into it after a newer extent was allocated, and a
    /// later sync must cover its bytes.
    ///
    /// The caller must poison the database on failure before it lets any
    /// write be acknowledged: the kernel may have dropped the dirty pages,
    /// so a later sync that succeeds would not mean the data is durable
    /// (fsyncgate).
    pub fn sync_upto(&self, filled: u64) -> Result<()> {
        let list: Vec<UnsyncedLog> = self.unsynced.lock().clone();
        for e in &list {
            // The head first: without it recovery does not find the data.
            let reserved = e.reserved.load(Ordering::Acquire).min(e.len);
            e.head
                .sync()
                .and_then(|_| e.head.sync_data(e.off, reserved))
                .map_err(|err| Error::from_pm(&self.region_path, err))?;
        }
        let done: Vec<UnsyncedLog> =
            list.windows(2).filter(|w| w[1].first_seq <= filled.saturating_add(1)).map(|w| w[0].clone()).collect();
        if !done.is_empty() {
            self.unsynced.lock().retain(|e| !done.contains(e));
        }
        Ok(())
    }

    /// Log extents that may hold unsynced data.
    #[cfg(test)]
    pub fn unsynced_extents(&self) -> usize {
        self.unsynced.lock().len()
    }
}
