//! [`Fs`] over `std::fs`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

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

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
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
