//! Batched positional reads through io_uring: one thread puts every read
//! of a batch in flight at once and waits for them all, so the device
//! works on them together (TridentKV's asynchronous reads). The engine
//! uses it for the data blocks of a multi-get; where the kernel refuses
//! io_uring, [`Uring::new`] fails and the engine uses a thread pool.
//!
//! The ring owns the buffers it reads into, so a ring that fails in the
//! middle of a batch can be abandoned with its buffers (leaked, never
//! freed under the kernel's feet) and the caller told so.
//!
//! [`SendRing`] does the same for socket sends: strata-server's event loop
//! hands it the replies of a whole pass, one send per connection, in one
//! system call.
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

/// One send to make: `buf` on the socket `fd`.
#[derive(Clone, Copy, Debug)]
pub struct SendTo<'a> {
    /// A connected socket the caller keeps open for the call.
    pub fd: RawFd,
    /// The bytes to send (possibly only a prefix is taken).
    pub buf: &'a [u8],
}

/// An io_uring instance for sends on many sockets at once. Why: a send on
/// loopback wakes the receiver, which on a busy core preempts the sender
/// when its system call returns; one `io_uring_enter` for all the sends
/// of a pass returns (and is preempted) once instead of once per socket.
pub struct SendRing {
    ring: Option<io_uring::IoUring>,
    depth: usize,
}

impl std::fmt::Debug for SendRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendRing").field("depth", &self.depth).field("usable", &self.ring.is_some()).finish()
    }
}

impl SendRing {
    /// A ring with `depth` entries; fails where the kernel does not allow io_uring.
    pub fn new(depth: u32) -> io::Result<SendRing> {
        let ring = io_uring::IoUring::new(depth.max(1))?;
        Ok(SendRing { ring: Some(ring), depth: depth.max(1) as usize })
    }

    /// Whether the ring still works (it is given up after a failure).
    pub fn usable(&self) -> bool {
        self.ring.is_some()
    }

    /// Sends each buffer on its socket without waiting for room
    /// (`MSG_DONTWAIT`: a full socket answers `WouldBlock`) or raising
    /// SIGPIPE, up to `depth` at a time. Each result is the bytes taken
    /// (possibly fewer than offered) or the send's error. Every send is
    /// finished when this returns: the kernel reads no buffer afterwards.
    pub fn send_all(&mut self, sends: &[SendTo<'_>]) -> Vec<io::Result<usize>> {
        let mut out: Vec<Option<io::Result<usize>>> = (0..sends.len()).map(|_| None).collect();
        for start in (0..sends.len()).step_by(self.depth) {
            let end = (start + self.depth).min(sends.len());
            let Some(ring) = self.ring.as_mut() else { break };
            if let Err(e) = send_chunk(ring, sends, &mut out, start, end) {
                // Sends only read their buffers, so a send the kernel might
                // still run cannot break this process's memory; the ring is
                // leaked (its sends are never resubmitted) and not used again.
                if let Some(ring) = self.ring.take() {
                    std::mem::forget(ring);
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

/// Submits sends `start..end` and waits for all of their completions.
fn send_chunk(
    ring: &mut io_uring::IoUring,
    sends: &[SendTo<'_>],
    out: &mut [Option<io::Result<usize>>],
    start: usize,
    end: usize,
) -> io::Result<()> {
    let mut pushed = 0;
    for i in start..end {
        let Some(s) = sends.get(i) else { continue };
        // A send takes at most 2 GiB - 1 at once (as send(2) does on Linux).
        let len = u32::try_from(s.buf.len().min(0x7fff_f000)).unwrap_or(0x7fff_f000);
        let entry = io_uring::opcode::Send::new(io_uring::types::Fd(s.fd), s.buf.as_ptr(), len)
            .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
            .build()
            .user_data(i as u64);
        // SAFETY: the entry points into `s.buf`, borrowed for this whole
        // call, and the kernel only reads it; this function waits for the
        // completion of every entry it pushed before it returns (on a
        // failure the ring is abandoned, never resubmitted). The chunk holds
        // at most `depth` entries, so the queue has room; `fd` is kept open
        // by the caller for the call.
        unsafe { ring.submission().push(&entry) }.map_err(|_| io::Error::other("io_uring submission queue full"))?;
        pushed += 1;
    }
    let mut pending = pushed;
    while pending > 0 {
        match ring.submit_and_wait(pending) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            let Some(o) = out.get_mut(i).filter(|o| o.is_none()) else { continue };
            pending -= 1;
            let res = cqe.result();
            *o = Some(if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(res as usize) });
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

    #[test]
    fn sends_a_batch_to_several_sockets_without_blocking() {
        use std::io::Read;
        use std::os::unix::net::UnixStream;
        let Ok(mut ring) = SendRing::new(2) else {
            eprintln!("io_uring not allowed here; plain sends are used instead");
            return;
        };
        let pairs: Vec<(UnixStream, UnixStream)> = (0..5).map(|_| UnixStream::pair().unwrap()).collect();
        for (a, _) in &pairs {
            a.set_nonblocking(true).unwrap();
        }
        let bufs: Vec<Vec<u8>> = (0..5).map(|i| vec![b'a' + i as u8; 100 + i]).collect();
        let sends: Vec<SendTo<'_>> =
            pairs.iter().zip(&bufs).map(|((a, _), b)| SendTo { fd: a.as_raw_fd(), buf: b }).collect();
        // More sends than entries: they go in chunks.
        for (r, b) in ring.send_all(&sends).into_iter().zip(&bufs) {
            assert_eq!(r.unwrap(), b.len());
        }
        for ((_, mut peer), b) in pairs.into_iter().zip(&bufs) {
            let mut got = vec![0u8; b.len()];
            peer.read_exact(&mut got).unwrap();
            assert_eq!(&got, b);
        }
        // A full socket answers WouldBlock instead of waiting; a closed
        // peer is an error for that send only, with no SIGPIPE.
        let (full, _keep) = UnixStream::pair().unwrap();
        full.set_nonblocking(true).unwrap();
        let big = vec![0u8; 1 << 20];
        let mut blocked = false;
        for _ in 0..64 {
            match ring.send_all(&[SendTo { fd: full.as_raw_fd(), buf: &big }]).remove(0) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                r => assert!(r.is_ok(), "{r:?}"),
            }
        }
        assert!(blocked, "a full socket would block");
        let (gone, peer) = UnixStream::pair().unwrap();
        drop(peer);
        let ok = UnixStream::pair().unwrap();
        let got =
            ring.send_all(&[SendTo { fd: gone.as_raw_fd(), buf: b"x" }, SendTo { fd: ok.0.as_raw_fd(), buf: b"y" }]);
        assert!(got[0].is_err() && matches!(got[1], Ok(1)));
        assert!(ring.usable());
    }
}
