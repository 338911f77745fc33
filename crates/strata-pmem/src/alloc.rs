//! Extents: runs of contiguous slots, leased to the engine.
#![allow(unsafe_code)]
//!
//! Each extent starts with a head word (its codec is in `slots`) naming its
//! kind, length and number.
//!
//! Exclusive write access is handed out in two steps: `Region::allocate`
//! returns the only [`ExtentWriter`] for a fresh extent, and the writer's
//! bump pointer hands out disjoint [`Slot`]s. A slot is the only way to
//! write an extent's bytes, which is what makes `Slot::write` sound.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::PmError;
use crate::region::Region;
use crate::slots::{ExtentHead, MAX_EXTENT_NUMBER, MAX_EXTENT_SLOTS};

struct ExtentInner {
    region: Region,
    head: ExtentHead,
    off: u64,
    len: u64,
    /// Makes the head word (and the stale heads cleared inside the
    /// extent) durable.
    head_sync: HeadSync,
}

/// The head is durable (or needs no msync).
const HEAD_DURABLE: u8 = 0;
/// Allocated with [`Region::allocate_deferred`]; not yet msynced.
const HEAD_PENDING: u8 = 1;
/// An msync of the head failed: it may never reach the media, and a later
/// msync that succeeds would not prove otherwise (the kernel may have
/// dropped the dirty page), so every later [`Extent::sync_head`] fails.
const HEAD_FAILED: u8 = 2;

impl Drop for ExtentInner {
    fn drop(&mut self) {
        // Only DRAM bookkeeping: whether the extent is live after a restart
        // is decided by the engine's roots, not by its head word.
        self.region.inner.slots.lock().mark(self.head.slot as usize, self.head.slots as usize, false);
    }
}

/// A lease on an extent. Its slots are not reused while any clone lives.
#[derive(Clone)]
pub struct Extent {
    inner: Arc<ExtentInner>,
}

impl std::fmt::Debug for Extent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extent").field("head", &self.inner.head).field("off", &self.inner.off).finish()
    }
}

impl Extent {
    /// The head word's contents.
    pub fn head(&self) -> ExtentHead {
        self.inner.head
    }

    /// Region offset of the first byte.
    pub fn offset(&self) -> u64 {
        self.inner.off
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// Whether the extent has no bytes (never true).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The region it belongs to.
    pub fn region(&self) -> &Region {
        &self.inner.region
    }

    /// Makes the head word durable if [`Region::allocate_deferred`] left it
    /// pending (msync on an ordinary file; a no-op otherwise or if done).
    /// Call it before relying on anything in the extent surviving a power
    /// loss, and before allocating an extent whose survival depends on this
    /// one's. Once an msync of it failed, it fails for good.
    pub fn sync_head(&self) -> Result<(), PmError> {
        self.inner.head_sync.sync()
    }

    /// On an ordinary-file region, msyncs the extent's first `len` bytes if
    /// some slot of the extent was not written through before in this
    /// process, and says whether it did. Fresh blocks of the region file
    /// are unwritten extents (fallocate), and the first write-back into one
    /// also converts it, a file-system metadata update: done here, by a
    /// background thread, the writer's own msyncs of the log later write
    /// data only (durable SET at 200 clients went 3-4% faster). What is in
    /// the pages does not matter (zeros, or records a writer has already
    /// put there: they are synced again by the writer's own msync). A
    /// failure is recorded as a failed head sync, so the writer's next
    /// sync reports it and the engine poisons (a later msync could succeed
    /// with the failed pages dropped).
    pub fn write_through_once(&self, len: u64) -> bool {
        let region = &self.inner.region;
        let file_like = match region.sim() {
            Some(sim) => sim.is_file_like(),
            None => region.placement() == crate::Placement::File,
        };
        if !file_like {
            return false;
        }
        let head = self.inner.head;
        if !region.inner.slots.lock().mark_written(head.slot as usize, head.slots as usize) {
            return false;
        }
        let head_sync = &self.inner.head_sync;
        // One at a time with the writer's msyncs of the extent (which go
        // through `HeadSync::sync_data`): a failure here is recorded in the
        // head's state before the writer's next sync of it reads that.
        let _syncing = head_sync.syncing.lock();
        region.inner.write_throughs.fetch_add(1, Ordering::Relaxed);
        if region.sync(self.inner.off, len.min(self.inner.len)).is_err() {
            head_sync.state.store(HEAD_FAILED, Ordering::Release);
        }
        true
    }

    /// A handle that syncs this extent's head without holding the lease
    /// (the slots are freed as usual when the last `Extent` clone goes).
    pub fn head_sync(&self) -> HeadSync {
        self.inner.head_sync.clone()
    }

    /// Whether region offset `off` lies inside this extent.
    pub fn contains(&self, off: u64) -> bool {
        off >= self.inner.off && off < self.inner.off + self.inner.len
    }

    /// Atomically stores the aligned link word at region offset `off`
    /// (inside this extent) without persisting it; pair with
    /// [`Region::persist`].
    ///
    /// For words that lock-free readers follow after the bytes around them
    /// were published (the `next` links of a persistent skiplist whose
    /// nodes are log entries): such a word is only ever accessed with this
    /// and [`Region::load_u64`], never through [`Extent::read`] or a
    /// [`Slot`] still alive, so a racing load sees the old or the new word.
    pub fn store_link(&self, off: u64, value: u64) -> Result<(), PmError> {
        if !self.contains(off) || !self.contains(off + 7) {
            return Err(PmError::OutOfRange { offset: off, len: 8 });
        }
        self.inner.region.inner.store_u64(off, value)
    }

    /// Bytes `[at, at+len)` relative to the extent start (published bytes only).
    pub fn read(&self, at: u64, len: u64) -> Result<&[u8], PmError> {
        match at.checked_add(len) {
            Some(end) if end <= self.inner.len => self.inner.region.read(self.inner.off + at, len),
            _ => Err(PmError::OutOfRange { offset: self.inner.off + at, len }),
        }
    }
}

/// Makes one extent's head word durable: see [`Extent::sync_head`]. Once
/// the extent is freed and its slots reused, a sync only repeats an msync.
#[derive(Clone)]
pub struct HeadSync {
    region: Region,
    /// The extent's head words: its own and the stale ones it cleared.
    off: u64,
    len: u64,
    /// `HEAD_DURABLE`, `HEAD_PENDING` or `HEAD_FAILED`.
    state: Arc<AtomicU8>,
    /// Held across an msync and the state it leads to, so the extent's
    /// msyncs run one at a time and a later success never overwrites a
    /// recorded failure (after a write-back error a later msync may succeed
    /// with the page gone).
    syncing: Arc<Mutex<()>>,
}

impl std::fmt::Debug for HeadSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeadSync").field("off", &self.off).field("state", &self.state).finish()
    }
}

impl HeadSync {
    fn new(region: &Region, head: ExtentHead) -> HeadSync {
        let geo = region.inner.geo;
        let off = geo.head_off(head.slot);
        let len = geo.head_off(head.slot + head.slots - 1) + 8 - off;
        HeadSync {
            region: region.clone(),
            off,
            len,
            state: Arc::new(AtomicU8::new(HEAD_PENDING)),
            syncing: Arc::new(Mutex::new(())),
        }
    }

    /// See [`Extent::sync_head`].
    pub fn sync(&self) -> Result<(), PmError> {
        if let Some(done) = self.settled() {
            return done;
        }
        let _syncing = self.syncing.lock();
        // Another caller may have settled it while we waited.
        if let Some(done) = self.settled() {
            return done;
        }
        match self.region.inner.sync(self.off, self.len) {
            Ok(()) => {
                self.state.store(HEAD_DURABLE, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                self.state.store(HEAD_FAILED, Ordering::Release);
                Err(e)
            }
        }
    }

    /// msyncs `[off, off+len)` of the extent's data, one at a time with the
    /// extent's other msyncs (its head's and [`Extent::write_through_once`]'s).
    pub fn sync_data(&self, off: u64, len: u64) -> Result<(), PmError> {
        let _syncing = self.syncing.lock();
        self.region.inner.sync(off, len)
    }

    /// The answer of an earlier sync, once it is final (durable or failed).
    fn settled(&self) -> Option<Result<(), PmError>> {
        match self.state.load(Ordering::Acquire) {
            HEAD_DURABLE => Some(Ok(())),
            HEAD_FAILED => Some(Err(PmError::Io {
                path: self.region.path().map(|p| p.to_path_buf()).unwrap_or_default(),
                op: "msync",
                source: std::io::Error::other("an earlier msync of this extent (its head word or its pages) failed"),
            })),
            _ => None,
        }
    }
}

/// The one writer of a freshly allocated extent; hands out disjoint slots.
pub struct ExtentWriter {
    extent: Extent,
    tail: u64,
}

impl std::fmt::Debug for ExtentWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtentWriter").field("extent", &self.extent).field("tail", &self.tail).finish()
    }
}

impl ExtentWriter {
    /// The extent being written.
    pub fn extent(&self) -> &Extent {
        &self.extent
    }

    /// Bytes handed out so far (relative to the extent start).
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Bytes still available.
    pub fn remaining(&self) -> u64 {
        self.extent.len() - self.tail
    }

    /// Hands out the next `len` bytes (rounded up to 8), or `None` if they do not fit.
    pub fn reserve(&mut self, len: u64) -> Option<Slot> {
        let len = len.checked_add(7)? & !7;
        if len > self.remaining() {
            return None;
        }
        let off = self.extent.offset() + self.tail;
        self.tail += len;
        Some(Slot { extent: self.extent.clone(), off, len })
    }
}

/// Exclusive write access to a range of an extent.
pub struct Slot {
    extent: Extent,
    off: u64,
    len: u64,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("off", &self.off).field("len", &self.len).finish()
    }
}

impl Slot {
    /// Region offset of the first byte.
    pub fn offset(&self) -> u64 {
        self.off
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the slot has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The extent the slot is in.
    pub fn extent(&self) -> &Extent {
        &self.extent
    }

    fn check(&self, at: u64, len: u64) -> Result<u64, PmError> {
        match at.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.off + at),
            _ => Err(PmError::OutOfRange { offset: self.off + at, len }),
        }
    }

    /// Stores `data` at `at` (relative to the slot). Not yet persistent.
    pub fn write(&mut self, at: u64, data: &[u8]) -> Result<(), PmError> {
        let off = self.check(at, data.len() as u64)?;
        // SAFETY: [off, off+len) lies inside this slot (checked), and this
        // slot is the only handle that may write those bytes: the extent was
        // handed out once by `Region::allocate`, and its writer's bump
        // pointer hands out every byte in at most one slot.
        unsafe { self.extent.region().inner.write_raw(off, data) }
    }

    /// Writes back `[at, at+len)` without a fence.
    pub fn flush(&self, at: u64, len: u64) -> Result<(), PmError> {
        let off = self.check(at, len)?;
        self.extent.region().inner.flush(off, len);
        Ok(())
    }

    /// Writes back and fences `[at, at+len)`.
    pub fn persist(&self, at: u64, len: u64) -> Result<(), PmError> {
        let off = self.check(at, len)?;
        self.extent.region().inner.persist(off, len);
        Ok(())
    }

    /// Atomically stores the aligned 8-byte word at `at` (relative to the
    /// slot) without persisting it; pair with [`Slot::flush`]/[`Slot::persist`].
    ///
    /// For structures updated in place while lock-free readers load the same
    /// words with [`Region::load_u64`] (a persistent B+-tree's node shifts):
    /// sound for the same reason `publish_u64` is, the store is atomic and
    /// stays inside this slot, so a racing load sees the old or the new word.
    pub fn store_u64(&mut self, at: u64, value: u64) -> Result<(), PmError> {
        let off = self.check(at, 8)?;
        self.extent.region().inner.store_u64(off, value)
    }

    /// Publishes the aligned word at `at` with one 8-byte store, then persists it.
    pub fn publish_u64(&mut self, at: u64, value: u64) -> Result<(), PmError> {
        let off = self.check(at, 8)?;
        self.extent.region().inner.store_u64(off, value)?;
        self.extent.region().inner.persist(off, 8);
        Ok(())
    }
}

impl Region {
    /// Leases `slots` contiguous free slots as a new extent of `kind` and
    /// `number`, publishing its head word (after clearing any stale heads
    /// inside it), durable before this returns. Returns its only writer.
    pub fn allocate(&self, kind: u8, slots: u64, number: u64) -> Result<ExtentWriter, PmError> {
        let w = self.allocate_deferred(kind, slots, number)?;
        w.extent().sync_head()?;
        Ok(w)
    }

    /// [`Region::allocate`], except that on an ordinary file the head word
    /// is made durable only by [`Extent::sync_head`] (an msync, and with it
    /// a device flush, that the caller can move off its hot path). Until
    /// then a power cut may forget the extent, or leave a stale head inside
    /// it (persisted, so a process crash is unaffected).
    pub fn allocate_deferred(&self, kind: u8, slots: u64, number: u64) -> Result<ExtentWriter, PmError> {
        if kind == 0 || slots == 0 || slots > MAX_EXTENT_SLOTS || number > MAX_EXTENT_NUMBER {
            return Err(PmError::InvalidOptions(format!(
                "bad extent request: kind {kind}, {slots} slots, number {number}"
            )));
        }
        let geo = self.inner.geo;
        let (start, reserved) = {
            let mut map = self.inner.slots.lock();
            let Some(start) = map.find_run(slots as usize) else {
                return Err(PmError::Full { wanted: slots, free: map.free() });
            };
            map.mark(start, slots as usize, true);
            (start as u64, map.is_reserved(start, slots as usize))
        };
        let head = ExtentHead { slot: start, kind, slots, number };
        // From here on the slots are ours; if a PM store fails the extent is
        // dropped and the slots return to the free map.
        let extent = Extent {
            inner: Arc::new(ExtentInner {
                region: self.clone(),
                head,
                off: geo.slot_off(start),
                len: slots * geo.slot_bytes,
                head_sync: HeadSync::new(self, head),
            }),
        };
        // The blocks behind the extent, in a sparse region file (a full
        // file system or tmpfs is then an error here, not a SIGBUS at the
        // first store), unless an earlier lease or `reserve_ahead` got them
        // already: even then the fallocate is on the writer's path (on
        // tmpfs it walks every page, 1 ms per 8 MiB).
        if !reserved {
            self.inner.reserve(extent.offset(), extent.len())?;
            self.inner.slots.lock().mark_reserved(start as usize, slots as usize);
        }
        // Stale heads inside the run would otherwise claim our slots after a
        // crash; clear them before the new head is published.
        let mut cleared = false;
        for i in start + 1..start + slots {
            let off = geo.head_off(i);
            if self.inner.load_u64(off)? != 0 {
                self.inner.store_u64(off, 0)?;
                self.inner.flush(off, 8);
                cleared = true;
            }
        }
        if cleared {
            self.inner.fence();
        }
        let head_off = geo.head_off(start);
        self.inner.store_u64(head_off, head.encode())?;
        self.inner.persist(head_off, 8);
        // On an ordinary file the head (and the cleared words) become
        // durable with `sync_head`: data written into the extent is lost at
        // a power cut without it, and a stale head left in the file could
        // claim these slots.
        Ok(ExtentWriter { extent, tail: 0 })
    }

    /// Erases the head word of a dead extent found by [`Region::heads`]
    /// (one 8-byte store, persisted), so later recoveries do not see it.
    /// Fails if any of its slots is leased.
    pub fn retire(&self, head: ExtentHead) -> Result<(), PmError> {
        let geo = self.inner.geo;
        let off = geo.head_off(head.slot);
        let current = ExtentHead::decode(head.slot, self.inner.load_u64(off)?);
        if current != Some(head) {
            return Ok(());
        }
        // Hold the map lock so no allocation can take these slots meanwhile.
        let map = self.inner.slots.lock();
        if !map.is_free(head.slot as usize, 1) {
            return Err(PmError::InvalidOptions(format!("cannot retire leased extent {head:?}")));
        }
        self.inner.store_u64(off, 0)?;
        self.inner.persist(off, 8);
        // Durable before the slots are leased again (see allocate).
        self.inner.sync(off, 8)?;
        drop(map);
        Ok(())
    }

    /// [`Region::adopt`], returning the extent's only writer (its bump
    /// pointer at 0), for structures that keep updating an extent after a
    /// restart (the persistent B+-tree's node extents). Sound like
    /// `allocate`: `adopt` fails unless every slot of the extent is free, so
    /// this writer is the only one.
    pub fn adopt_writer(&self, head: ExtentHead) -> Result<ExtentWriter, PmError> {
        let extent = self.adopt(head)?;
        Ok(ExtentWriter { extent, tail: 0 })
    }

    /// Takes a lease on an existing extent found by [`Region::heads`] during
    /// recovery. Fails if its slots are already leased (overlapping extents).
    pub fn adopt(&self, head: ExtentHead) -> Result<Extent, PmError> {
        let geo = self.inner.geo;
        let current = ExtentHead::decode(head.slot, self.inner.load_u64(geo.head_off(head.slot))?);
        if current != Some(head) {
            return Err(PmError::Corruption {
                offset: geo.head_off(head.slot),
                reason: format!("no extent {head:?} at slot {}", head.slot),
            });
        }
        {
            let mut map = self.inner.slots.lock();
            if !map.is_free(head.slot as usize, head.slots as usize) {
                return Err(PmError::Corruption {
                    offset: geo.head_off(head.slot),
                    reason: format!("extent {head:?} overlaps another live extent"),
                });
            }
            map.mark(head.slot as usize, head.slots as usize, true);
        }
        let (off, len) = (geo.slot_off(head.slot), head.slots * geo.slot_bytes);
        // In a sparse region file, an extent's blocks were reserved when it
        // was allocated, but that fallocate need not have reached the disk
        // before a power cut: reserve again (cheap where the blocks exist)
        // so a later store into the extent cannot fault. On tmpfs nothing
        // outlives the machine, and a process crash keeps the pages.
        if self.placement() != crate::Placement::Shm {
            if let Err(e) = self.inner.reserve(off, len) {
                self.inner.slots.lock().mark(head.slot as usize, head.slots as usize, false);
                return Err(e);
            }
        }
        self.inner.slots.lock().mark_reserved(head.slot as usize, head.slots as usize);
        Ok(Extent {
            inner: Arc::new(ExtentInner {
                region: self.clone(),
                head,
                off,
                len,
                // Read back from the page cache after a process crash, the
                // head may never have been msynced.
                head_sync: HeadSync::new(self, head),
            }),
        })
    }
}
