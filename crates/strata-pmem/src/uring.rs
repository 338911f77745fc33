//! Batched positional reads through io_uring: one thread puts every read
//! of a batch in flight at once and waits for them all, so the device
//! works on them together (TridentKV's asynchronous reads). The engine
//! uses it for the data blocks of a multi-get; where the kernel refuses
//! io_uring, [`Uring::new`] fails and the engine uses a thread pool.
//!
//! The ring owns the buffers it reads into, so a ring that fails in the
//! middle of a batch can be abandoned with its buffers (leaked, never
//! freed under the kernel's feet) and the caller told so.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

use parking_lot::Mutex;

/// Buffer alignment: O_DIRECT reads need offsets, lengths and buffers aligned to the device's block.
pub const READ_ALIGN: usize = 4096;

/// Bytes read into a buffer aligned to [`READ_ALIGN`].
#[derive(Debug)]
pub struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes whose start is aligned.
    pub fn new(len: usize) -> AlignedBuf {
        let bytes = vec![0u8; len + READ_ALIGN];
        // align_offset on a u8 pointer to a power of two always succeeds.
        let start = bytes.as_ptr().align_offset(READ_ALIGN).min(READ_ALIGN);
        AlignedBuf { bytes, start, len }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.bytes.get(self.start..self.start + self.len).unwrap_or(&[])
    }

    /// The bytes, to read into.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.bytes.get_mut(self.start..self.start + self.len).unwrap_or(&mut [])
    }
}

/// One read to make: `len` bytes of the open file `fd` at `offset`.
#[derive(Clone, Copy, Debug)]
pub struct ReadAt {
    /// An open file descriptor the caller keeps open for the call.
    pub fd: RawFd,
    /// Byte offset.
    pub offset: u64,
    /// Bytes to read.
    pub len: usize,
}

/// An io_uring instance, used by one batch at a time.
pub struct Uring {
    ring: Mutex<Option<io_uring::IoUring>>,
    depth: usize,
}

impl std::fmt::Debug for Uring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uring").field("depth", &self.depth).finish()
    }
}

impl Uring {
    /// A ring with `depth` entries; fails where the kernel does not allow io_uring.
    pub fn new(depth: u32) -> io::Result<Uring> {
        let ring = io_uring::IoUring::new(depth.max(1))?;
        Ok(Uring { ring: Mutex::new(Some(ring)), depth: depth.max(1) as usize })
    }

    /// Makes every read, up to `depth` of them in flight at once. Each
    /// result is the buffer and how many bytes arrived (fewer at the end of
    /// a file), or the read's error.
    pub fn read_all(&self, reads: &[ReadAt]) -> Vec<io::Result<(AlignedBuf, usize)>> {
        let mut guard = self.ring.lock();
        let mut out: Vec<Option<io::Result<(AlignedBuf, usize)>>> = (0..reads.len()).map(|_| None).collect();
        let mut bufs: Vec<Option<AlignedBuf>> = reads.iter().map(|r| Some(AlignedBuf::new(r.len))).collect();
        for start in (0..reads.len()).step_by(self.depth) {
            let end = (start + self.depth).min(reads.len());
            let Some(ring) = guard.as_mut() else { break };
            if let Err(e) = run_chunk(ring, reads, &mut bufs, &mut out, start, end) {
                // The kernel may still hold some of this chunk's buffers:
                // abandon the ring and those buffers rather than free them.
                if let Some(ring) = guard.take() {
                    std::mem::forget(ring);
                }
                for b in bufs.iter_mut().take(end).skip(start) {
                    std::mem::forget(b.take());
                }
                for o in out.iter_mut().skip(start).filter(|o| o.is_none()) {
                    *o = Some(Err(io::Error::new(e.kind(), format!("io_uring failed: {e}"))));
                }
                break;
            }
        }
        out.into_iter().map(|o| o.unwrap_or_else(|| Err(io::Error::other("io_uring is no longer usable")))).collect()
    }
}

/// Submits reads `start..end` and waits for all of their completions.
fn run_chunk(
    ring: &mut io_uring::IoUring,
    reads: &[ReadAt],
    bufs: &mut [Option<AlignedBuf>],
    out: &mut [Option<io::Result<(AlignedBuf, usize)>>],
    start: usize,
    end: usize,
) -> io::Result<()> {
    for i in start..end {
        let (Some(r), Some(Some(buf))) = (reads.get(i), bufs.get_mut(i)) else { continue };
        let dst = buf.as_mut_slice();
        let len = u32::try_from(dst.len()).map_err(|_| io::Error::other("read over 4 GiB"))?;
        let entry = io_uring::opcode::Read::new(io_uring::types::Fd(r.fd), dst.as_mut_ptr(), len)
            .offset(r.offset)
            .build()
            .user_data(i as u64);
        // SAFETY: the entry points into `buf`, a heap buffer owned by this
        // call: it is not moved, read or freed until the entry's completion
        // arrives below, and if the ring fails first the caller leaks it
        // (`read_all`). The chunk holds at most `depth` entries, so the
        // queue has room; `fd` is kept open by the caller for the call.
        unsafe { ring.submission().push(&entry) }.map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    let mut pending = end - start;
    while pending > 0 {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            let Some(buf) = bufs.get_mut(i).and_then(Option::take) else { continue };
            pending -= 1;
            let res = cqe.result();
            if let Some(o) = out.get_mut(i) {
                *o = Some(if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok((buf, res as usize)) });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn reads_a_batch_or_is_refused_cleanly() {
        let Ok(ring) = Uring::new(4) else {
            eprintln!("io_uring not allowed here; the thread pool is used instead");
            return;
        };
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        let reads: Vec<ReadAt> =
            (0..10).map(|i| ReadAt { fd: f.as_raw_fd(), offset: i * 9000 + 7, len: 5000 }).collect();
        let got = ring.read_all(&reads);
        for (r, g) in reads.iter().zip(got) {
            let (buf, n) = g.unwrap();
            assert_eq!(n, r.len);
            assert_eq!(buf.as_slice(), &data[r.offset as usize..r.offset as usize + r.len]);
        }
        // Past the end: a short read, not an error.
        let (_, n) = ring.read_all(&[ReadAt { fd: f.as_raw_fd(), offset: 99_000, len: 4096 }]).remove(0).unwrap();
        assert_eq!(n, 1000);
        // A bad descriptor is an error for that read only.
        let got = ring.read_all(&[ReadAt { fd: -1, offset: 0, len: 10 }, reads[0]]);
        assert!(got[0].is_err() && got[1].is_ok());
    }
}
