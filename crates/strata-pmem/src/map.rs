//! Thin wrappers over mmap, munmap, msync and fstatfs.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// A shared mapping of the first `len` bytes of a file, owned: made by
/// [`RawMap::new`], unmapped once when dropped.
struct RawMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; the pointer is only used to
// derive addresses inside [ptr, ptr+len), and all synchronisation of the
// bytes behind it is done by the region's users (see region.rs).
unsafe impl Send for RawMap {}
// SAFETY: as above; `RawMap` itself has no interior state besides the pointer.
unsafe impl Sync for RawMap {}

impl RawMap {
    /// Maps `len` bytes of `file` from its start with protection `prot` and
    /// `flags` (always a shared mapping).
    fn new(file: &File, len: usize, prot: libc::c_int, flags: libc::c_int) -> io::Result<RawMap> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot map an empty file"));
        }
        // SAFETY: a fresh mapping at a kernel-chosen address cannot alias any
        // Rust object; fd is a valid open descriptor for the call's duration.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, file.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned a null pointer"))?;
        Ok(RawMap { ptr, len })
    }

    /// The page-aligned start and the clamped end of `[off, off+len)`
    /// inside the mapping, or `None` when that is empty.
    fn pages(&self, off: usize, len: usize) -> Option<(usize, usize)> {
        if len == 0 || off >= self.len {
            return None;
        }
        let start = off - off % page_size();
        Some((start, off.saturating_add(len).min(self.len)))
    }

    /// msync (MS_SYNC) of the pages covering `[off, off+len)`, clamped to
    /// the mapping.
    fn msync(&self, off: usize, len: usize) -> io::Result<()> {
        let Some((start, end)) = self.pages(off, len) else { return Ok(()) };
        // SAFETY: [start, end) lies inside the mapping (start is rounded down
        // to a page boundary inside it, end is clamped to its length), and
        // msync does not touch Rust-visible memory.
        let rc = unsafe { libc::msync(self.ptr.as_ptr().add(start).cast(), end - start, libc::MS_SYNC) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for RawMap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned (RawMap::new), this
        // runs once, and the owner is being dropped, so no reference into
        // the mapping survives.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A shared, writable mapping of a whole file.
pub(crate) struct Mapping {
    map: RawMap,
    /// Whether the kernel accepted MAP_SYNC, i.e. the file is on a DAX
    /// filesystem and CPU cache flushes alone make stores durable.
    pub dax: bool,
}

/// A shared, read-only mapping of a whole file that is only ever msynced
/// (see `syncview.rs`): it hands out no pointer, so nothing can read or
/// write through it.
pub(crate) struct MsyncView(RawMap);

impl Mapping {
    /// Maps `len` bytes of `file` shared and writable, trying MAP_SYNC first.
    pub fn new(file: &File, len: usize) -> io::Result<Mapping> {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        // MAP_SHARED_VALIDATE makes the kernel reject MAP_SYNC instead of
        // silently ignoring it, which is how DAX support is detected.
        match RawMap::new(file, len, rw, libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC) {
            Ok(map) => Ok(Mapping { map, dax: true }),
            Err(_) => Ok(Mapping { map: RawMap::new(file, len, rw, libc::MAP_SHARED)?, dax: false }),
        }
    }

    /// Base address of the mapping.
    pub fn ptr(&self) -> NonNull<u8> {
        self.map.ptr
    }
}

impl MsyncView {
    /// Maps `len` bytes of `file` shared and read-only. `file` must be
    /// open for writing: the kernel makes a shared mapping of a read-only
    /// file private in all but name, and msync then skips it.
    pub fn new(file: &File, len: usize) -> io::Result<MsyncView> {
        Ok(MsyncView(RawMap::new(file, len, libc::PROT_READ, libc::MAP_SHARED)?))
    }

    /// Writes back the pages covering `[off, off+len)` and waits for the
    /// device, reporting write-back errors this view's open file has not
    /// reported yet.
    pub fn msync(&self, off: usize, len: usize) -> io::Result<()> {
        self.0.msync(off, len)
    }
}

impl Mapping {
    /// Faults in the pages covering `[off, off+len)` writable, as a first
    /// store would, without changing their bytes (MADV_POPULATE_WRITE,
    /// Linux 5.14+). Best effort: older kernels refuse it, and then the
    /// first stores take the faults as before.
    pub fn populate(&self, off: usize, len: usize) {
        let Some((start, end)) = self.map.pages(off, len) else { return };
        // SAFETY: [start, end) lies inside the mapping (as for msync), and
        // MADV_POPULATE_WRITE only allocates and maps pages: it leaves their
        // contents, and so every Rust-visible byte, unchanged.
        unsafe { libc::madvise(self.map.ptr.as_ptr().add(start).cast(), end - start, libc::MADV_POPULATE_WRITE) };
    }

    /// Turns off read-ahead on faults for the whole mapping (MADV_RANDOM).
    /// A region file is sparse, and a fault on a hole otherwise reads (and
    /// so zero-fills) a whole read-ahead window around it: with the 8 MiB
    /// window of this machine's disk, every first store to a fresh log page
    /// zeroed 8 MiB of page cache. Best effort.
    pub fn advise_random(&self) {
        // SAFETY: the range is exactly the mapping; MADV_RANDOM only
        // changes the kernel's read-ahead policy for it, no contents.
        unsafe { libc::madvise(self.map.ptr.as_ptr().cast(), self.map.len, libc::MADV_RANDOM) };
    }

    /// Starts reading `[off, off+len)` into the page cache in the
    /// background (MADV_WILLNEED), for a range about to be read in order
    /// (a log extent at recovery) now that faults read no further than
    /// the page they hit. Best effort.
    pub fn will_need(&self, off: usize, len: usize) {
        let Some((start, end)) = self.map.pages(off, len) else { return };
        // SAFETY: [start, end) lies inside the mapping (as for msync), and
        // MADV_WILLNEED only schedules reads into the page cache.
        unsafe { libc::madvise(self.map.ptr.as_ptr().add(start).cast(), end - start, libc::MADV_WILLNEED) };
    }

    /// Drops this process's page-table entries for the whole pages inside
    /// `[off, off+len)` (MADV_DONTNEED). Best effort.
    pub fn unmap_pages(&self, off: usize, len: usize) {
        let page = page_size();
        let start = off.div_ceil(page) * page;
        let end = off.saturating_add(len).min(self.map.len) / page * page;
        if start >= end {
            return;
        }
        // SAFETY: [start, end) lies inside the mapping, which is always
        // MAP_SHARED over a file (see `map`): MADV_DONTNEED then only drops
        // page-table entries. The pages, dirty ones included, stay in the
        // page cache (or on the device), the mapping stays in place, and the
        // next access maps the same bytes again, so every reference into the
        // mapping stays valid and reads what it read before.
        unsafe { libc::madvise(self.map.ptr.as_ptr().add(start).cast(), end - start, libc::MADV_DONTNEED) };
    }
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}

/// Allocates storage for bytes `[off, off+len)` of `file` without changing
/// its contents (fallocate(2), mode 0: unwritten extents). `Ok(false)` if
/// the file system cannot (the range then stays sparse). Unlike
/// posix_fallocate this never falls back to writing into the file, so it
/// is safe while other threads store into the mapping.
pub(crate) fn reserve_blocks(file: &File, off: u64, len: u64) -> io::Result<bool> {
    let too_large = |_| io::Error::other("region too large");
    let (off, len) = (libc::off_t::try_from(off).map_err(too_large)?, libc::off_t::try_from(len).map_err(too_large)?);
    loop {
        // SAFETY: fallocate takes a file descriptor and integers; it
        // touches no memory of ours.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, off, len) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// posix_fallocate over `[off, off+len)`: on file systems without
/// fallocate, glibc writes a zero byte into every block that reads as zero.
/// Only for a file no one else writes yet (a racing store could be
/// overwritten).
pub(crate) fn reserve_blocks_emulated(file: &File, off: u64, len: u64) -> io::Result<()> {
    let too_large = |_| io::Error::other("region too large");
    let (off, len) = (libc::off_t::try_from(off).map_err(too_large)?, libc::off_t::try_from(len).map_err(too_large)?);
    // SAFETY: posix_fallocate takes a file descriptor and two integers; it
    // touches no memory of ours.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), off, len) } {
        0 | libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Bytes of storage allocated to `file` (its blocks, as `du` counts them).
pub(crate) fn allocated_bytes(file: &File) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(file.metadata()?.blocks() * 512)
}

/// Whether `file` lives on tmpfs (e.g. /dev/shm).
pub(crate) fn is_tmpfs(file: &File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: st points to writable storage of the right type and size.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), st.as_mut_ptr()) };
    if rc != 0 {
        return false;
    }
    // SAFETY: fstatfs succeeded, so it initialised the struct.
    let st = unsafe { st.assume_init() };
    st.f_type == TMPFS_MAGIC
}

/// A heap buffer addressed through a raw pointer, used as the visible
/// memory of the simulated PM. Word-aligned so 8-byte atomics work on it.
pub(crate) struct HeapBuf {
    ptr: NonNull<u8>,
    len: usize,
    words: usize,
}

// SAFETY: like `Mapping`, a plain block of memory; access discipline is the
// region's (see region.rs).
unsafe impl Send for HeapBuf {}
// SAFETY: as above.
unsafe impl Sync for HeapBuf {}

impl HeapBuf {
    /// A buffer holding a copy of `bytes` (length rounded up to 8).
    pub fn from_bytes(bytes: &[u8]) -> HeapBuf {
        let words = bytes.len().div_ceil(8).max(1);
        let mut v: Vec<u64> = vec![0; words];
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            if let Some(slot) = v.get_mut(i) {
                *slot = u64::from_ne_bytes(w);
            }
        }
        let boxed = v.into_boxed_slice();
        let raw = Box::into_raw(boxed);
        // A Box pointer is never null.
        let ptr = NonNull::new(raw.cast::<u8>()).unwrap_or(NonNull::dangling());
        HeapBuf { ptr, len: bytes.len(), words }
    }

    /// Base address.
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Copies `data` to `off` (test helper; the region writes through `ptr`).
    #[cfg(test)]
    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: bounds checked above; tests are single-threaded here.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len()) }
    }
}

impl Drop for HeapBuf {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr().cast::<u64>(), self.words);
        // SAFETY: ptr/words came from Box::into_raw of a Box<[u64]> of that
        // length in from_bytes, and are released exactly once, here.
        drop(unsafe { Box::from_raw(slice) });
    }
}
