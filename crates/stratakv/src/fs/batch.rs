//! Batched reads: every read of a batch in flight at once, through
//! io_uring where the kernel allows it and the files have descriptors, or
//! else through a bounded pool of threads each making one positional read.
//! The multi-get path uses it for the data blocks of a batch of keys.

use std::io;
use std::sync::{Arc, OnceLock};

use crossbeam_channel::{bounded, unbounded, Sender};
use strata_pmem::{ReadAt, Uring};

use super::std_fs::aligned_span;
use super::RandomAccessFile;

/// Reads in flight at once through io_uring (and the ring's size).
const RING_DEPTH: u32 = 64;
/// Threads of the fallback pool.
const POOL_THREADS: usize = 8;

/// One read: `len` bytes of `file` at `offset`.
#[derive(Clone)]
pub struct ReadRequest {
    /// The file.
    pub file: Arc<dyn RandomAccessFile>,
    /// Byte offset.
    pub offset: u64,
    /// Bytes to read.
    pub len: usize,
}

type Job = Box<dyn FnOnce() + Send>;

/// Makes batches of reads, by io_uring or by a thread pool (chosen at creation).
pub struct BatchReader {
    ring: Option<Uring>,
    /// The pool's queue; its threads start at the first batch that needs them.
    pool: OnceLock<Sender<Job>>,
}

impl std::fmt::Debug for BatchReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReader").field("kind", &self.kind()).finish()
    }
}

impl BatchReader {
    /// A reader using io_uring if `try_uring` and the kernel allows it; the
    /// thread pool serves files without descriptors either way.
    pub fn new(try_uring: bool) -> BatchReader {
        let ring = if try_uring { Uring::new(RING_DEPTH).ok() } else { None };
        BatchReader { ring, pool: OnceLock::new() }
    }

    fn pool(&self) -> &Sender<Job> {
        self.pool.get_or_init(|| {
            let (tx, rx) = unbounded::<Job>();
            for i in 0..POOL_THREADS {
                let rx = rx.clone();
                // A thread that fails to start only makes the pool smaller;
                // with none at all, the caller runs the reads itself. The
                // threads end when the reader (the queue's sender) is dropped.
                let _ = std::thread::Builder::new().name(format!("strata-read-{i}")).spawn(move || {
                    for job in rx {
                        job();
                    }
                });
            }
            tx
        })
    }

    /// How batches are read: "io_uring" or "threads".
    pub fn kind(&self) -> &'static str {
        if self.ring.is_some() {
            "io_uring"
        } else {
            "threads"
        }
    }

    /// Makes every read; results in request order.
    pub fn read(&self, reqs: &[ReadRequest]) -> Vec<io::Result<Vec<u8>>> {
        if reqs.len() == 1 {
            return reqs.iter().map(read_one).collect();
        }
        match &self.ring {
            Some(ring) if reqs.iter().all(|r| r.file.raw_fd().is_some()) => read_uring(ring, reqs),
            _ => self.read_pool(reqs),
        }
    }

    fn read_pool(&self, reqs: &[ReadRequest]) -> Vec<io::Result<Vec<u8>>> {
        let (tx, rx) = bounded(reqs.len());
        let mut out: Vec<Option<io::Result<Vec<u8>>>> = (0..reqs.len()).map(|_| None).collect();
        for (i, r) in reqs.iter().enumerate() {
            let (r, tx) = (r.clone(), tx.clone());
            let job: Job = Box::new(move || {
                let _ = tx.send((i, read_one(&r)));
            });
            if let Err(job) = self.pool().send(job) {
                (job.0)(); // no pool: read here
            }
        }
        drop(tx);
        for (i, res) in rx {
            if let Some(o) = out.get_mut(i) {
                *o = Some(res);
            }
        }
        out.into_iter().map(|o| o.unwrap_or_else(|| Err(io::Error::other("read thread lost")))).collect()
    }
}

fn read_one(r: &ReadRequest) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; r.len];
    r.file.read_at(r.offset, &mut buf)?;
    Ok(buf)
}

/// Reads through the ring: whole aligned blocks (O_DIRECT needs them; for
/// other files they cost nothing extra), then the asked-for part. A read
/// the ring leaves short is made again by `read_at`.
fn read_uring(ring: &Uring, reqs: &[ReadRequest]) -> Vec<io::Result<Vec<u8>>> {
    let spans: Vec<(u64, usize)> = reqs.iter().map(|r| aligned_span(r.offset, r.len)).collect();
    let reads: Vec<ReadAt> = reqs
        .iter()
        .zip(&spans)
        .map(|(r, &(offset, len))| ReadAt { fd: r.file.raw_fd().unwrap_or(-1), offset, len })
        .collect();
    let got = ring.read_all(&reads);
    reqs.iter()
        .zip(spans)
        .zip(got)
        .map(|((r, (start, _)), res)| {
            let skip = (r.offset - start) as usize;
            match res {
                Ok((buf, n)) if n >= skip + r.len => Ok(buf.as_slice()[skip..skip + r.len].to_vec()),
                _ => read_one(r),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Fs, StdFs};

    #[test]
    fn both_kinds_read_what_read_at_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        for (uring, direct) in [(true, false), (true, true), (false, false), (false, true)] {
            let r = BatchReader::new(uring);
            let file = if direct { StdFs.open_direct(&path).unwrap() } else { StdFs.open(&path).unwrap() };
            let reqs: Vec<ReadRequest> = (0..40u64)
                .map(|i| ReadRequest {
                    file: file.clone(),
                    offset: i * 7001 % 290_000,
                    len: 100 + (i as usize * 331) % 9000,
                })
                .filter(|q| q.offset as usize + q.len <= data.len())
                .collect();
            for (q, got) in reqs.iter().zip(r.read(&reqs)) {
                assert_eq!(got.unwrap(), &data[q.offset as usize..q.offset as usize + q.len], "{}", r.kind());
            }
            let past = ReadRequest { file: file.clone(), offset: 299_990, len: 100 };
            assert!(r.read(&[past.clone(), past]).iter().all(|g| g.is_err()));
        }
    }
}
