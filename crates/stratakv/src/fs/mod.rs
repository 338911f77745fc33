//! The file-system layer for the SSD side (tables, MANIFEST, CURRENT, LOCK).
//!
//! The engine never calls `std::fs` directly: it goes through [`Fs`], so
//! tests can inject faults (fail the Nth fsync, drop unsynced data at a
//! simulated power cut) without touching engine code.

mod batch;
mod fault_fs;
mod mem_fs;
mod std_fs;

pub use batch::{BatchReader, ReadRequest};
pub use fault_fs::{FaultError, FaultFs, FaultOp, FaultPlan, FaultStats, FiredFault};
pub use mem_fs::{FsCrashMode, FsSnapshot, MemFs, MemFsHook, MemFsOp, MemFsView};
pub use std_fs::StdFs;

use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A file being written sequentially.
pub trait WritableFile: Send {
    /// Appends bytes (may buffer).
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Hands buffered bytes to the file system (the page cache) without
    /// making them durable: after it, a process crash keeps them.
    fn flush(&mut self) -> io::Result<()>;
    /// Flushes buffers and makes everything appended durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Bytes appended so far.
    fn size(&self) -> u64;
}

/// A file read at arbitrary offsets.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset` (error if the file is shorter).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// File size.
    fn size(&self) -> u64;
    /// The OS file descriptor, for reads issued outside this trait
    /// (io_uring); None where there is none (in-memory, fault-injecting).
    fn raw_fd(&self) -> Option<i32> {
        None
    }
    /// Whether reads must be aligned to the device block (O_DIRECT).
    fn is_direct(&self) -> bool {
        false
    }
}

/// A held lock on a file; released on drop.
pub trait FileLock: Send + Sync + Debug {}

/// File-system operations the engine needs.
pub trait Fs: Send + Sync + Debug {
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Creates (or truncates) a file for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens a file for appending (creating it if needed).
    fn append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens a file for reading.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>>;
    /// Opens a file for reading around the page cache (O_DIRECT) where the
    /// file system supports it; elsewhere as [`Fs::open`].
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.open(path)
    }
    /// Reads a whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Atomically renames.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Cuts the file at `path` to `len` bytes (never longer); with `sync`,
    /// the new length is durable on return (ftruncate + fsync). Writers
    /// opened on the file before must not be used afterwards: reopen it
    /// with [`Fs::append`].
    fn truncate(&self, path: &Path, len: u64, sync: bool) -> io::Result<()>;
    /// Names of the entries of a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Whether a path exists.
    fn exists(&self, path: &Path) -> bool;
    /// fsyncs a directory so creates/renames/removes in it are durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path`; `ErrorKind::WouldBlock` if someone holds it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;
}

/// The default file system.
pub fn default_fs() -> Arc<dyn Fs> {
    Arc::new(StdFs)
}
