//! The prefault thread: takes page faults and device flushes off the write
//! path. It maps in the pages of a log extent the writer has just started,
//! makes the extent's head durable, reserves the blocks of the next
//! extents, and makes the DRAM buffers of the next memtable ready.

use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_pmem::{Extent, Region};

use crate::memtable::MemBuffers;

/// Free PM slots the prefault thread keeps reserved ahead of the next log
/// extents and rows in a sparse region file (see `Region::reserve_ahead`): a log extent
/// fills in about 25 ms at full speed, and each new one asks for more.
const RESERVE_AHEAD_SLOTS: u64 = 4;

/// Work for the prefault thread.
pub(crate) enum PrefaultJob {
    /// Map in the first `map_bytes` of a log extent the writer has just
    /// started, and make its head durable; `write_through`: see
    /// [`Prefaulter::extent`].
    Extent { ext: Extent, map_bytes: u64, write_through: bool },
    /// Make buffers of this capacity ready for the next memtable.
    Memtable(usize),
}

/// The next memtable's buffers, and whether the thread was asked for them.
#[derive(Default)]
struct Spare {
    buffers: Option<MemBuffers>,
    /// A request is queued or being served: a second one would build a
    /// second set of buffers after a switch took the first (wasted work,
    /// and a spare that appears when none was asked for).
    asked: bool,
}

/// The writer's side of the prefault thread: hands it work, and takes the
/// memtable buffers it made ready.
pub(crate) struct Prefaulter {
    /// Hands work to the thread (None without one, or once shut down).
    tx: Mutex<Option<Sender<PrefaultJob>>>,
    /// Memtable buffers the thread made ready for the next memtable switch.
    spare: Arc<Mutex<Spare>>,
    /// The capacity of every memtable's buffers.
    capacity: usize,
}

impl Prefaulter {
    /// A prefaulter with no thread yet (see [`Prefaulter::start`]).
    pub fn new(capacity: usize) -> Prefaulter {
        Prefaulter { tx: Mutex::new(None), spare: Arc::new(Mutex::new(Spare::default())), capacity }
    }

    /// The body of the prefault thread, and its sender: the caller spawns
    /// the body (at the writers' own priority: they wait for what it does).
    /// The thread holds only the region, not the database: it ends when
    /// [`Prefaulter::stop`] drops the sender.
    pub fn start(&self, region: Region) -> impl FnOnce() + Send + 'static {
        let (tx, rx) = std::sync::mpsc::channel::<PrefaultJob>();
        *self.tx.lock() = Some(tx);
        let spare = self.spare.clone();
        move || run(rx, region, spare)
    }

    /// Stops the thread once it has done the work already handed to it.
    pub fn stop(&self) {
        self.tx.lock().take();
    }

    /// Asks the thread to map in the first `map_bytes` of a fresh log
    /// extent, so the writer filling it does not take a page fault (and the
    /// kernel's zeroing of a new file page) every 4 KiB, and to make its
    /// head durable. Without the thread, the head is synced here. With
    /// `write_through` (writers are waiting for log msyncs), its fresh
    /// blocks are also written through once
    /// ([`Extent::write_through_once`]).
    pub fn extent(&self, ext: Extent, map_bytes: u64, write_through: bool) {
        let job = PrefaultJob::Extent { ext, map_bytes, write_through };
        let sent = match self.tx.lock().as_ref() {
            Some(tx) => tx.send(job).map_err(|e| e.0),
            None => Err(job),
        };
        if let Err(PrefaultJob::Extent { ext, .. }) = sent {
            // A failure is remembered by the extent: the writer or the next
            // log sync reports it and poisons.
            let _ = ext.sync_head();
        }
    }

    /// Asks the thread to get buffers ready for the next memtable (see
    /// [`MemBuffers::prefault`]) unless some are ready; without the thread,
    /// the next switch allocates them itself.
    pub fn prepare_spare(&self) {
        let mut spare = self.spare.lock();
        if spare.buffers.is_some() || spare.asked {
            return;
        }
        if let Some(tx) = self.tx.lock().as_ref() {
            spare.asked = tx.send(PrefaultJob::Memtable(self.capacity)).is_ok();
        }
    }

    /// Buffers for a new memtable: the spare if one is ready, otherwise
    /// fresh ones. The next spare is asked for once the new memtable's
    /// first log extent is handed to the thread.
    pub fn take_buffers(&self) -> MemBuffers {
        let spare = self.spare.lock().buffers.take().filter(|b| b.capacity() == self.capacity);
        spare.unwrap_or_else(|| MemBuffers::new(self.capacity))
    }

    /// Whether buffers for the next memtable are ready.
    #[cfg(test)]
    pub fn has_spare(&self) -> bool {
        self.spare.lock().buffers.is_some()
    }

    /// Test hook: work handed to the thread from now on is queued and never
    /// done (log heads are then made durable only by the writer).
    #[cfg(test)]
    pub fn hold_jobs(&self) -> Receiver<PrefaultJob> {
        let (tx, rx) = std::sync::mpsc::channel();
        *self.tx.lock() = Some(tx);
        rx
    }
}

fn run(rx: Receiver<PrefaultJob>, region: Region, spare: Arc<Mutex<Spare>>) {
    let mut previous: Option<(u64, u64)> = None;
    while let Ok(job) = rx.recv() {
        let (ext, map_bytes, write_through) = match job {
            PrefaultJob::Extent { ext, map_bytes, write_through } => (ext, map_bytes, write_through),
            PrefaultJob::Memtable(capacity) => {
                // Built outside the lock: a switch must not wait for it.
                let buffers = MemBuffers::new(capacity);
                buffers.prefault();
                let mut spare = spare.lock();
                spare.buffers.get_or_insert(buffers);
                spare.asked = false;
                continue;
            }
        };
        if region.sim().is_none() {
            region.prefault(ext.offset(), map_bytes.min(ext.len()));
            // Fresh file blocks are converted by one write-back here rather
            // than by the writer's first msync of each page; that msync
            // left the pages read-only, so map them writable again. Only
            // while writers wait for msyncs: otherwise the periodic msync
            // converts them off the write path anyway, and this would be a
            // second write-back and a second mapping of every page.
            if write_through && ext.write_through_once(map_bytes) {
                region.prefault(ext.offset(), map_bytes.min(ext.len()));
            }
            // A full file system or tmpfs shows up where it matters: at
            // the allocation that needs the blocks.
            let _ = region.reserve_ahead(RESERVE_AHEAD_SLOTS);
        }
        // A failure is remembered by the extent: the writer or the next log
        // sync reports it and poisons.
        let _ = ext.sync_head();
        // The writer has moved on from the previous extent (a late copy into
        // a slot reserved there faults the page back in): unmapping it
        // spares its write-back a TLB shootdown per page.
        if let Some((off, len)) = previous.replace((ext.offset(), ext.len())) {
            region.unmap_written(off, len);
        }
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
pub(crate) fn prefault_bytes(ext_len: u64, mem_bytes: usize, buffer_size: usize, len: u64) -> u64 {
    if mem_bytes >= buffer_size {
        return ext_len;
    }
    let room = ((buffer_size - mem_bytes) as u64).saturating_add(len);
    room.div_ceil(4096).saturating_mul(4096).min(ext_len)
}

#[cfg(test)]
mod tests {
    use super::prefault_bytes;

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
}
