//! [`Fs`] over `std::fs`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use std::path::Path;
use std::sync::Arc;
use strata_pmem::{AlignedBuf, READ_ALIGN};

use super::{FileLock, Fs, RandomAccessFile, WritableFile};

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdFs;

struct StdWritable {
    w: BufWriter<File>,
    size: u64,
}

impl WritableFile for StdWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.w.write_all(data)?;
        self.size += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    fn sync(&mut self) -> io::Result<()> {
        self.w.flush()?;
        self.w.get_ref().sync_data()
    }

    fn size(&self) -> u64 {
        self.size
    }
}

struct StdRandom {
    f: File,
    size: u64,
}

impl RandomAccessFile for StdRandom {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.f.read_exact_at(buf, offset)
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn raw_fd(&self) -> Option<i32> {
        Some(self.f.as_raw_fd())
    }
}

/// A file opened with O_DIRECT: every read is widened to whole aligned
/// blocks, read into an aligned buffer, and the asked-for part copied out.
struct DirectRandom {
    f: File,
    size: u64,
}

impl RandomAccessFile for DirectRandom {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let (start, len) = aligned_span(offset, buf.len());
        let mut tmp = AlignedBuf::new(len);
        let dst = tmp.as_mut_slice();
        let mut got = 0usize;
        // O_DIRECT reads stop short at the end of the file.
        while got < dst.len() {
            let n = self.f.read_at(&mut dst[got..], start + got as u64)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        let skip = (offset - start) as usize;
        let src = tmp.as_slice().get(skip..skip + buf.len()).filter(|_| got >= skip + buf.len());
        let src = src.ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file"))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn raw_fd(&self) -> Option<i32> {
        Some(self.f.as_raw_fd())
    }

    fn is_direct(&self) -> bool {
        true
    }
}

/// The whole aligned blocks covering `len` bytes at `offset`: (start, length).
pub fn aligned_span(offset: u64, len: usize) -> (u64, usize) {
    let a = READ_ALIGN as u64;
    let start = offset / a * a;
    let end = (offset + len as u64).div_ceil(a) * a;
    (start, (end - start) as usize)
}

#[derive(Debug)]
struct StdLock {
    _f: File,
}

impl FileLock for StdLock {}

impl Fs for StdFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let f = File::create(path)?;
        Ok(Box::new(StdWritable { w: BufWriter::with_capacity(256 << 10, f), size: 0 }))
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let f = OpenOptions::new().create(true).append(true).open(path)?;
        let size = f.metadata()?.len();
        Ok(Box::new(StdWritable { w: BufWriter::with_capacity(64 << 10, f), size }))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let f = File::open(path)?;
        let size = f.metadata()?.len();
        Ok(Arc::new(StdRandom { f, size }))
    }

    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        match OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path) {
            Ok(f) => {
                let size = f.metadata()?.len();
                Ok(Arc::new(DirectRandom { f, size }))
            }
            // tmpfs and some others refuse O_DIRECT: read through the page cache.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.open(path),
            Err(e) => Err(e),
        }
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn truncate(&self, path: &Path, len: u64, sync: bool) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        if f.metadata()?.len() > len {
            f.set_len(len)?;
        }
        if sync {
            f.sync_all()?;
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir)? {
            out.push(e?.file_name().to_string_lossy().into_owned());
        }
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let f = OpenOptions::new().create(true).truncate(false).write(true).open(path)?;
        match f.try_lock() {
            Ok(()) => Ok(Box::new(StdLock { _f: f })),
            Err(std::fs::TryLockError::WouldBlock) => {
                Err(io::Error::new(io::ErrorKind::WouldBlock, "lock held by another process"))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}
