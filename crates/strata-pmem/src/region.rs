//! The region: a mapped file (or simulated PM) with persist primitives.
#![allow(unsafe_code)]
//!
//! # Why the raw accesses here are sound
//!
//! The region is one block of memory `[base, base+len)` that stays mapped
//! for as long as any `Region` clone, `Extent` or `Slot` exists (they all
//! hold the `Arc<Inner>` that owns the mapping). Every access is bounds
//! checked against `len` before a pointer is formed.
//!
//! Writes happen only through [`Inner::write_raw`] and [`Inner::store_u64`],
//! whose callers own the bytes they write: a `Slot` (alloc.rs: a range handed
//! out once by a bump allocator inside an extent that is itself handed out
//! once), the superblock during creation (before the region is shared), or
//! an aligned 8-byte word written with an atomic store.
//!
//! Reads ([`Region::read`]) hand out shared slices. The engine reads only
//! bytes that were published (their writer finished and released them
//! through an atomic store or a lock) and that are not rewritten while the
//! slice lives: an extent's slots are reused only after the last `Extent`
//! lease on them is dropped. That discipline is the engine's side of the
//! contract, and is what the engine's tests and the crash simulator check.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::PmError;
use crate::flush::{sfence, spin_ns, LineFlush};
use crate::layout::*;
use crate::map::{allocated_bytes, is_tmpfs, reserve_blocks, reserve_blocks_emulated, Mapping};
use crate::sim::SimPm;
use crate::slots::{ExtentHead, SlotMap};
use crate::syncview::SyncViews;

/// Where the region's bytes live.
#[derive(Clone, Debug)]
pub enum Backing {
    /// A file, memory-mapped shared. Placement is detected (DAX, tmpfs, ordinary).
    File(PathBuf),
    /// A simulated PM device (tests and crash exploration).
    Sim(Arc<SimPm>),
}

/// How durable a persisted store is, given where the region lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A DAX file on real PM: persist = cache-line write-back + fence.
    Dax,
    /// An ordinary file: persist orders stores; durability needs `sync` (msync).
    File,
    /// A file on tmpfs (/dev/shm): survives process crashes only.
    Shm,
    /// The crash simulator.
    Sim,
}

impl Placement {
    /// A short name for stats and logs.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Dax => "dax",
            Placement::File => "file",
            Placement::Shm => "shm",
            Placement::Sim => "sim",
        }
    }
}

/// How to open or create a region.
#[derive(Clone, Debug)]
pub struct RegionOptions {
    /// Size of a new region in bytes (an existing region keeps its size).
    pub len: u64,
    /// Slot size of a new region; a multiple of 4 KiB.
    pub slot_bytes: u64,
    /// Busy-wait after every persist, to emulate slower PM. 0 = off.
    pub write_latency_ns: u64,
    /// Create the region if it does not exist.
    pub create: bool,
    /// If set, an existing region must carry this id; a missing or blank
    /// region is then an error instead of being (re)created.
    pub expect_id: Option<u64>,
}

/// Whether `open` created a new region or found an existing one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenOutcome {
    /// A fresh, empty region was initialised.
    Created,
    /// An existing region was opened.
    Opened,
}

/// Counters of PM traffic.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegionStats {
    /// Bytes stored into the region.
    pub bytes_written: u64,
    /// Calls to persist (flush + fence).
    pub persists: u64,
    /// msync calls.
    pub syncs: u64,
    /// Extents written through ([`crate::Extent::write_through_once`]).
    pub write_throughs: u64,
}

enum Mem {
    /// `sparse`: blocks are allocated range by range (`Inner::reserve`);
    /// false where the file system cannot, and the whole file got them at open.
    Mapped {
        map: Mapping,
        /// What msyncs go through, never `map` (see `syncview.rs`); only
        /// where msync is how data becomes durable (`Placement::File`).
        views: Option<SyncViews>,
        _file: File,
        path: PathBuf,
        sparse: bool,
    },
    Sim(Arc<SimPm>),
}

pub(crate) struct Inner {
    base: NonNull<u8>,
    len: u64,
    mem: Mem,
    placement: Placement,
    flusher: LineFlush,
    latency_ns: u64,
    pub(crate) geo: Geometry,
    id: u64,
    pub(crate) slots: Mutex<SlotMap>,
    bytes_written: AtomicU64,
    persists: AtomicU64,
    syncs: AtomicU64,
    pub(crate) write_throughs: AtomicU64,
}

// SAFETY: `base` points into memory owned by `mem` (a mapping or a heap
// buffer), which lives as long as `Inner`; see the module docs for the
// access discipline that makes sharing across threads sound.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

/// A PM region. Cheap to clone; all clones share one mapping.
#[derive(Clone)]
pub struct Region {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("len", &self.inner.len)
            .field("placement", &self.inner.placement)
            .field("slot_bytes", &self.inner.geo.slot_bytes)
            .field("slot_count", &self.inner.geo.slot_count)
            .finish()
    }
}

impl Region {
    /// Opens the region behind `backing`, creating it if allowed and absent.
    pub fn open(backing: Backing, opts: &RegionOptions) -> Result<(Region, OpenOutcome), PmError> {
        match backing {
            Backing::File(path) => Self::open_file(&path, opts),
            Backing::Sim(sim) => {
                let base = sim.buf().ptr();
                let len = sim.len() as u64;
                // A simulated ordinary file behaves as the real one does.
                let placement = if sim.is_file_like() { Placement::File } else { Placement::Sim };
                Self::finish_open(Mem::Sim(sim), base, len, placement, opts)
            }
        }
    }

    fn open_file(path: &Path, opts: &RegionOptions) -> Result<(Region, OpenOutcome), PmError> {
        let io = |op: &'static str| {
            let path = path.to_path_buf();
            move |source| PmError::Io { path, op, source }
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(opts.create)
            .truncate(false)
            .open(path)
            .map_err(io("open"))?;
        let mut len = file.metadata().map_err(io("stat"))?.len();
        let created = len == 0;
        if created {
            if opts.expect_id.is_some() {
                return Err(PmError::Corruption {
                    offset: 0,
                    reason: format!("region file {} is empty but should hold data", path.display()),
                });
            }
            Geometry::plan(opts.len, opts.slot_bytes).ok_or_else(|| {
                PmError::InvalidOptions(format!(
                    "a region of {} bytes cannot hold slots of {} bytes",
                    opts.len, opts.slot_bytes
                ))
            })?;
            file.set_len(opts.len).map_err(io("set_len"))?;
            len = opts.len;
        }
        // A store into a hole of a full file system is a SIGBUS, not an
        // error. So that a region takes disk in proportion to its data and
        // still never faults for want of blocks, the file stays sparse and
        // every range gets its blocks (fallocate: unwritten extents, nothing
        // written) before anything is stored there: the superblock and head
        // table at creation, each extent when it is allocated or adopted
        // (`Inner::reserve`), and the next few free slots ahead of use in
        // the background (`Region::reserve_ahead`). A full disk is then a
        // clear error at open or at an allocation. File systems without
        // fallocate get the whole region's blocks now, as earlier builds
        // gave them on every file system (glibc writes a zero byte into each
        // block there, which is only safe before the region is shared).
        // The superblock page now (this also finds out whether the file
        // system can fallocate); `initialise` reserves the head table.
        let upfront = SUPERBLOCK_BYTES.min(len);
        let no_space = |source| PmError::Io {
            path: path.to_path_buf(),
            op: "allocate the region's blocks (is the disk full?)",
            source,
        };
        let sparse = match reserve_blocks(&file, 0, upfront) {
            Ok(true) => true,
            Ok(false) => match reserve_blocks_emulated(&file, 0, len) {
                Ok(()) => false,
                Err(e) => return Err(abandon(&file, created, no_space(e))),
            },
            Err(e) => return Err(abandon(&file, created, no_space(e))),
        };
        let len_usize =
            usize::try_from(len).map_err(|_| PmError::InvalidOptions("region larger than the address space".into()))?;
        let map = match Mapping::new(&file, len_usize) {
            Ok(map) => map,
            Err(e) => return Err(abandon(&file, created, io("mmap")(e))),
        };
        let placement = if map.dax {
            Placement::Dax
        } else if is_tmpfs(&file) {
            Placement::Shm
        } else {
            Placement::File
        };
        if placement == Placement::File {
            map.advise_random();
        }

        let views = match placement {
            Placement::File => match SyncViews::open(&file, path, len_usize) {
                Ok(v) => Some(v),
                Err(e) => return Err(abandon(&file, created, io("open and map the file again for msync")(e))),
            },
            _ => None,
        };
        let base = map.ptr();
        Self::finish_open(
            Mem::Mapped { map, views, _file: file, path: path.to_path_buf(), sparse },
            base,
            len,
            placement,
            opts,
        )
    }

    fn finish_open(
        mem: Mem,
        base: NonNull<u8>,
        len: u64,
        placement: Placement,
        opts: &RegionOptions,
    ) -> Result<(Region, OpenOutcome), PmError> {
        let flusher = match placement {
            Placement::Dax => LineFlush::detect(),
            _ => LineFlush::None,
        };
        let mut inner = Inner {
            base,
            len,
            mem,
            placement,
            flusher,
            latency_ns: opts.write_latency_ns,
            geo: Geometry { region_len: len, slot_bytes: 0, slot_count: 0, table_off: 0, data_off: 0 },
            id: 0,
            slots: Mutex::new(SlotMap::new(0)),
            bytes_written: AtomicU64::new(0),
            persists: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            write_throughs: AtomicU64::new(0),
        };
        if len < SUPERBLOCK_BYTES {
            return Err(PmError::Corruption {
                offset: 0,
                reason: format!("region of {len} bytes is smaller than its superblock"),
            });
        }
        let magic = inner.load_u64(OFF_MAGIC)?;
        let outcome = if magic == MAGIC {
            inner.validate_superblock(opts)?;
            OpenOutcome::Opened
        } else {
            // No magic: either a crash interrupted creation (the magic is
            // stored last), or the region is damaged. If the caller expects
            // a region (its MANIFEST names one), it is damage; otherwise no
            // data can have been committed to it and it is created afresh.
            if opts.expect_id.is_some() || !opts.create {
                let blank = inner.read(0, SUPERBLOCK_BYTES)?.iter().all(|b| *b == 0);
                return Err(PmError::Corruption {
                    offset: 0,
                    reason: if blank {
                        "region has no superblock (was it replaced or never created?)".into()
                    } else {
                        "bad region magic".into()
                    },
                });
            }
            inner.initialise(opts)?;
            OpenOutcome::Created
        };
        inner.slots = Mutex::new(SlotMap::new(inner.geo.slot_count));
        Ok((Region { inner: Arc::new(inner) }, outcome))
    }

    /// Where the region lives, which decides what `persist` buys.
    pub fn placement(&self) -> Placement {
        self.inner.placement
    }

    /// Total size in bytes.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// Whether the region has no bytes (never true for an opened region).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The random id written at creation; the engine records it.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Size of one slot.
    pub fn slot_bytes(&self) -> u64 {
        self.inner.geo.slot_bytes
    }

    /// Number of slots.
    pub fn slot_count(&self) -> u64 {
        self.inner.geo.slot_count
    }

    /// Slots not currently leased.
    pub fn free_slots(&self) -> u64 {
        self.inner.slots.lock().free()
    }

    /// Gives the next `slots` free slots (the ones the next allocations
    /// take, first fit) their blocks now, so that an allocation on a
    /// writer's path finds them there instead of calling fallocate (on
    /// tmpfs 2 ms per 8 MiB on first use). A no-op where the region is not
    /// sparse, and for slots reserved before. An error means the file
    /// system is full.
    pub fn reserve_ahead(&self, slots: u64) -> Result<(), PmError> {
        if !self.inner.is_sparse() {
            return Ok(());
        }
        let geo = self.inner.geo;
        let runs = self.inner.slots.lock().unreserved_ahead(slots as usize);
        for (start, n) in runs {
            // Racing with an allocation of the same slots only reserves
            // them twice: fallocate never changes contents.
            self.inner.reserve(geo.slot_off(start as u64), n as u64 * geo.slot_bytes)?;
            self.inner.slots.lock().mark_reserved(start, n);
        }
        Ok(())
    }

    /// Bytes of storage the region file takes now (its allocated blocks;
    /// at most `len` plus file system overhead). The whole length for a
    /// simulated region.
    pub fn allocated_bytes(&self) -> u64 {
        match &self.inner.mem {
            Mem::Mapped { _file, .. } => allocated_bytes(_file).unwrap_or(self.inner.len),
            Mem::Sim(_) => self.inner.len,
        }
    }

    /// Path of the region file, if file-backed.
    pub fn path(&self) -> Option<&Path> {
        match &self.inner.mem {
            Mem::Mapped { path, .. } => Some(path),
            Mem::Sim(_) => None,
        }
    }

    /// The simulator behind this region, if simulated.
    pub fn sim(&self) -> Option<&Arc<SimPm>> {
        match &self.inner.mem {
            Mem::Sim(s) => Some(s),
            Mem::Mapped { .. } => None,
        }
    }

    /// Traffic counters.
    pub fn stats(&self) -> RegionStats {
        RegionStats {
            bytes_written: self.inner.bytes_written.load(Ordering::Relaxed),
            persists: self.inner.persists.load(Ordering::Relaxed),
            syncs: self.inner.syncs.load(Ordering::Relaxed),
            write_throughs: self.inner.write_throughs.load(Ordering::Relaxed),
        }
    }

    /// The bytes `[off, off+len)`. The caller must only read published
    /// bytes it holds a lease on (see the module docs).
    pub fn read(&self, off: u64, len: u64) -> Result<&[u8], PmError> {
        self.inner.read(off, len)
    }

    /// Hints the CPU to start loading the cache line at `off` (no effect on
    /// contents; out-of-range offsets are ignored). Scans over the matrix use
    /// it to overlap the random reads of keys in the log.
    pub fn prefetch(&self, off: u64) {
        if off >= self.inner.len {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let p = self.inner.base.as_ptr().wrapping_add(off as usize);
            // SAFETY: `p` lies inside the live mapping (checked above), and a
            // prefetch neither reads nor writes program-visible memory.
            #[allow(unused_unsafe)]
            unsafe {
                std::arch::x86_64::_mm_prefetch(p.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
            }
        }
    }

    /// Maps in the pages of `[off, off+len)` ahead of use, so the first
    /// stores into a fresh extent do not each take a page fault (the kernel
    /// zeroing new file pages). Contents are unchanged; a no-op on simulated
    /// PM or kernels without MADV_POPULATE_WRITE. Meant for a background
    /// thread: it takes as long as the faults it saves.
    pub fn prefault(&self, off: u64, len: u64) {
        if let Mem::Mapped { map, .. } = &self.inner.mem {
            map.populate(off as usize, len as usize);
        }
    }

    /// Starts reading `[off, off+len)` of a file-backed region into memory
    /// in the background, ahead of reading it in order (faults on the
    /// mapping read no further than their page: see `Mapping::advise_random`).
    pub fn will_need(&self, off: u64, len: u64) {
        if let Mem::Mapped { map, .. } = &self.inner.mem {
            if self.inner.placement == Placement::File {
                map.will_need(off as usize, len as usize);
            }
        }
    }

    /// On an ordinary file, drops this process's mappings of the whole
    /// pages in `[off, off+len)`, leaving the data in the page cache. Call
    /// it on ranges that are written and will only be read: writing back a
    /// page that no one maps writable needs no TLB shootdown (an
    /// inter-processor interrupt per 4 KiB page otherwise, which an msync
    /// of log data spends most of its time on). A no-op elsewhere.
    pub fn unmap_written(&self, off: u64, len: u64) {
        if let Mem::Mapped { map, .. } = &self.inner.mem {
            if self.inner.placement == Placement::File {
                map.unmap_pages(off as usize, len as usize);
            }
        }
    }

    /// Atomically loads the aligned 8-byte word at `off`.
    pub fn load_u64(&self, off: u64) -> Result<u64, PmError> {
        self.inner.load_u64(off)
    }

    /// Root word `i` of the superblock (0 if never published).
    pub fn root(&self, i: usize) -> Result<u64, PmError> {
        self.inner.load_u64(root_off(i)?)
    }

    /// Publishes root word `i` with one 8-byte store, then persists it.
    /// Whatever the word points at must already be persisted.
    pub fn publish_root(&self, i: usize, value: u64) -> Result<(), PmError> {
        let off = root_off(i)?;
        self.inner.store_u64(off, value)?;
        self.inner.persist(off, 8);
        Ok(())
    }

    /// Writes back and fences `[off, off+len)` (see the placement table).
    pub fn persist(&self, off: u64, len: u64) {
        self.inner.persist(off, len);
    }

    /// Writes back `[off, off+len)` without a fence; pair with [`Region::fence`].
    pub fn flush(&self, off: u64, len: u64) {
        self.inner.flush(off, len);
    }

    /// A store fence that completes earlier flushes.
    pub fn fence(&self) {
        self.inner.fence();
    }

    /// Makes `[off, off+len)` durable against power loss on an ordinary file
    /// (msync); a no-op where persist already does that or nothing can.
    pub fn sync(&self, off: u64, len: u64) -> Result<(), PmError> {
        self.inner.sync(off, len)
    }

    /// `sync` over the whole region.
    pub fn sync_all(&self) -> Result<(), PmError> {
        self.inner.sync(0, self.inner.len)
    }

    /// Every non-empty head word, for recovery to choose live extents from.
    /// Heads of freed extents remain until their slots are reused, so the
    /// list may contain stale and overlapping entries.
    pub fn heads(&self) -> Result<Vec<ExtentHead>, PmError> {
        let mut out = Vec::new();
        for i in 0..self.inner.geo.slot_count {
            let w = self.inner.load_u64(self.inner.geo.head_off(i))?;
            if let Some(h) = ExtentHead::decode(i, w) {
                if i + h.slots > self.inner.geo.slot_count {
                    return Err(PmError::Corruption {
                        offset: self.inner.geo.head_off(i),
                        reason: format!(
                            "extent at slot {i} claims {} slots, past the end ({})",
                            h.slots, self.inner.geo.slot_count
                        ),
                    });
                }
                out.push(h);
            }
        }
        Ok(out)
    }
}

/// Leaves no half-made region behind after a failed creation (the next
/// open starts afresh), and passes the error on.
fn abandon(file: &File, created: bool, e: PmError) -> PmError {
    if created {
        let _ = file.set_len(0);
    }
    e
}

fn root_off(i: usize) -> Result<u64, PmError> {
    if i >= ROOT_WORDS {
        return Err(PmError::OutOfRange { offset: OFF_ROOTS + 8 * i as u64, len: 8 });
    }
    Ok(OFF_ROOTS + 8 * i as u64)
}

impl Inner {
    /// Whether the region's file gets its blocks range by range.
    pub(crate) fn is_sparse(&self) -> bool {
        matches!(self.mem, Mem::Mapped { sparse: true, .. })
    }

    /// Gives `[off, off+len)` its blocks where the region is sparse, so
    /// that a store there cannot fault for want of space: a full file
    /// system (or tmpfs) is an error here (ENOSPC) instead of a SIGBUS
    /// later.
    pub(crate) fn reserve(&self, off: u64, len: u64) -> Result<(), PmError> {
        match &self.mem {
            Mem::Mapped { _file, path, sparse: true, .. } => {
                reserve_blocks(_file, off, len).map(|_| ()).map_err(|source| PmError::Io {
                    path: path.clone(),
                    op: if self.placement == Placement::Shm {
                        "allocate PM memory (is the tmpfs full?)"
                    } else {
                        "allocate the region's blocks (is the disk full?)"
                    },
                    source,
                })
            }
            _ => Ok(()),
        }
    }

    fn check(&self, off: u64, len: u64) -> Result<(), PmError> {
        match off.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(PmError::OutOfRange { offset: off, len }),
        }
    }

    pub(crate) fn read(&self, off: u64, len: u64) -> Result<&[u8], PmError> {
        self.check(off, len)?;
        // SAFETY: bounds checked; the memory lives as long as `self`; see the
        // module docs for why no write overlaps a published, leased range.
        Ok(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off as usize), len as usize) })
    }

    pub(crate) fn load_u64(&self, off: u64) -> Result<u64, PmError> {
        self.check(off, 8)?;
        if !off.is_multiple_of(8) {
            return Err(PmError::OutOfRange { offset: off, len: 8 });
        }
        // SAFETY: in bounds and 8-aligned (the base is page- or word-aligned),
        // and every write to such a word that can race with this load is an
        // atomic store (store_u64).
        let a = unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off as usize).cast::<u64>()) };
        Ok(u64::from_le(a.load(Ordering::Acquire)))
    }

    /// Stores `data` at `off`.
    ///
    /// # Safety
    /// The caller must own `[off, off+len)`: no other thread reads or
    /// writes those bytes until the caller publishes them.
    pub(crate) unsafe fn write_raw(&self, off: u64, data: &[u8]) -> Result<(), PmError> {
        self.check(off, data.len() as u64)?;
        let dst = self.base.as_ptr().wrapping_add(off as usize);
        let copy = || {
            // SAFETY: in bounds (checked above), and the caller guarantees
            // exclusive ownership of the destination range.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) }
        };
        match &self.mem {
            Mem::Sim(sim) => sim.store(off, data, copy),
            Mem::Mapped { .. } => copy(),
        }
        self.bytes_written.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Atomically stores the aligned 8-byte word at `off` (no persist).
    pub(crate) fn store_u64(&self, off: u64, value: u64) -> Result<(), PmError> {
        self.check(off, 8)?;
        if !off.is_multiple_of(8) {
            return Err(PmError::OutOfRange { offset: off, len: 8 });
        }
        let p = self.base.as_ptr().wrapping_add(off as usize).cast::<u64>();
        let store = || {
            // SAFETY: in bounds and aligned; all racing accesses to this word
            // are atomic (load_u64/store_u64).
            let a = unsafe { AtomicU64::from_ptr(p) };
            a.store(value.to_le(), Ordering::Release);
        };
        match &self.mem {
            Mem::Sim(sim) => sim.store(off, &value.to_le_bytes(), store),
            Mem::Mapped { .. } => store(),
        }
        self.bytes_written.fetch_add(8, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn flush(&self, off: u64, len: u64) {
        if len == 0 || self.check(off, len).is_err() {
            return;
        }
        match &self.mem {
            Mem::Sim(sim) => sim.flush(off, len),
            Mem::Mapped { .. } => {
                let p = self.base.as_ptr().wrapping_add(off as usize);
                self.flusher.flush_range(p, len as usize);
            }
        }
    }

    pub(crate) fn fence(&self) {
        match &self.mem {
            Mem::Sim(sim) => sim.fence(),
            Mem::Mapped { .. } => sfence(),
        }
        self.persists.fetch_add(1, Ordering::Relaxed);
        spin_ns(self.latency_ns);
    }

    pub(crate) fn persist(&self, off: u64, len: u64) {
        self.flush(off, len);
        self.fence();
    }

    pub(crate) fn sync(&self, off: u64, len: u64) -> Result<(), PmError> {
        match &self.mem {
            Mem::Mapped { views, path, .. } if self.placement == Placement::File => {
                self.syncs.fetch_add(1, Ordering::Relaxed);
                // Views are made for every File region at open; never skip
                // an msync silently if that ever changed.
                let r = match views {
                    Some(v) => v.msync(off as usize, len as usize),
                    None => Err(std::io::Error::other("no msync view of the region file")),
                };
                r.map_err(|source| PmError::Io { path: path.clone(), op: "msync", source })
            }
            Mem::Sim(sim) if sim.is_file_like() => {
                self.syncs.fetch_add(1, Ordering::Relaxed);
                sim.sync(off, len).map_err(|source| PmError::Io {
                    path: PathBuf::from("<simulated file>"),
                    op: "msync",
                    source,
                })
            }
            _ => Ok(()),
        }
    }

    fn validate_superblock(&mut self, opts: &RegionOptions) -> Result<(), PmError> {
        let version = self.load_u64(OFF_VERSION)? as u32;
        if version != FORMAT_VERSION {
            return Err(PmError::Corruption {
                offset: OFF_VERSION,
                reason: format!("unsupported region format version {version}"),
            });
        }
        let region_len = self.load_u64(OFF_REGION_LEN)?;
        let slot_bytes = self.load_u64(OFF_SLOT_BYTES)?;
        let geo = Geometry::plan(region_len, slot_bytes).ok_or_else(|| PmError::Corruption {
            offset: OFF_SLOT_BYTES,
            reason: format!("impossible geometry: {region_len} bytes in slots of {slot_bytes}"),
        })?;
        let recorded = Geometry {
            region_len,
            slot_bytes,
            slot_count: self.load_u64(OFF_SLOT_COUNT)?,
            table_off: self.load_u64(OFF_TABLE)?,
            data_off: self.load_u64(OFF_DATA)?,
        };
        if recorded != geo || region_len > self.len {
            return Err(PmError::Corruption {
                offset: OFF_REGION_LEN,
                reason: format!("superblock geometry {recorded:?} does not match the file ({} bytes)", self.len),
            });
        }
        self.geo = geo;
        self.id = self.load_u64(OFF_ID)?;
        if let Some(want) = opts.expect_id {
            if want != self.id {
                return Err(PmError::Corruption {
                    offset: OFF_ID,
                    reason: format!("region id {:#x} is not the expected {want:#x}", self.id),
                });
            }
        }
        Ok(())
    }

    /// Writes a fresh superblock: fields, persist, then the magic word.
    fn initialise(&mut self, opts: &RegionOptions) -> Result<(), PmError> {
        let geo = Geometry::plan(self.len, opts.slot_bytes).ok_or_else(|| {
            PmError::InvalidOptions(format!(
                "a region of {} bytes cannot hold slots of {} bytes",
                self.len, opts.slot_bytes
            ))
        })?;
        let id = loop {
            let id: u64 = rand::random();
            if id != 0 {
                break id;
            }
        };
        // Open reserved only the superblock page; the head table and the
        // zeroing below reach `data_off`, aligned to the slot size.
        self.reserve(0, geo.data_off)?;
        // The region is not shared yet, so every byte is ours to write.
        let zero_table = vec![0u8; (geo.data_off - geo.table_off) as usize];
        // SAFETY: `self` is not shared with any other thread yet.
        unsafe { self.write_raw(geo.table_off, &zero_table)? };
        for (off, v) in [
            (OFF_VERSION, FORMAT_VERSION as u64),
            (OFF_REGION_LEN, geo.region_len),
            (OFF_SLOT_BYTES, geo.slot_bytes),
            (OFF_SLOT_COUNT, geo.slot_count),
            (OFF_TABLE, geo.table_off),
            (OFF_DATA, geo.data_off),
            (OFF_ID, id),
        ] {
            self.store_u64(off, v)?;
        }
        self.persist(0, geo.data_off);
        // On an ordinary file persist only orders: msync the superblock and
        // the cleared head table before the magic, and the magic before the
        // caller records this region's id anywhere (its MANIFEST).
        self.sync(0, geo.data_off)?;
        self.store_u64(OFF_MAGIC, MAGIC)?;
        self.persist(OFF_MAGIC, 8);
        self.sync(OFF_MAGIC, 8)?;
        self.geo = geo;
        self.id = id;
        Ok(())
    }
}
