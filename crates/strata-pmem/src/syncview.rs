//! msyncs of a region file, each through an open file of its own.
//!
//! Linux records a page's write-back error once per file and reports it
//! once to each *open file description* (errseq): the first fsync or msync
//! through that description sees it, later ones succeed. So two msyncs that
//! overlap in time through one description (the mapping stores go through)
//! may disagree: the one that returns first can consume the error of a
//! page in the other's range, and the other then reports success for a
//! page the device never got. The engine would acknowledge writes it lost.
//!
//! Here every msync borrows one of a few read-only mappings of the file,
//! each made over its own `open()` when the region opens, so each sees
//! every error recorded after that open; at most one msync uses a mapping
//! at a time (more wait for one). And once any msync failed, every later
//! one fails too: a view that reported an error once would not report it
//! again, and the bytes behind it may be gone.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Condvar, Mutex};

use crate::map::Mapping;

/// Views per region: more than the engine's threads that msync at once
/// (the log writer, the log prefault thread, the flush and compaction
/// threads), so none usually waits.
const VIEWS: usize = 4;

/// A read-only mapping of the region file over its own open file.
struct View {
    map: Mapping,
    _file: File,
}

/// The views of one region file, lent one per msync.
pub(crate) struct SyncViews {
    free: Mutex<Vec<View>>,
    returned: Condvar,
    /// An msync failed: every later one fails.
    failed: AtomicBool,
}

impl SyncViews {
    /// Opens the views of the `len`-byte file at `path`.
    pub(crate) fn open(path: &Path, len: usize) -> io::Result<SyncViews> {
        let mut views = Vec::with_capacity(VIEWS);
        for _ in 0..VIEWS {
            // Read-write: msync skips shared mappings of read-only files.
            let file = OpenOptions::new().read(true).write(true).open(path)?;
            views.push(View { map: Mapping::for_msync(&file, len)?, _file: file });
        }
        Ok(SyncViews { free: Mutex::new(views), returned: Condvar::new(), failed: AtomicBool::new(false) })
    }

    /// msyncs `[off, off+len)`; an error if it, or any msync before, failed.
    pub(crate) fn msync(&self, off: usize, len: usize) -> io::Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(earlier_failure());
        }
        let view = {
            let mut free = self.free.lock();
            loop {
                if let Some(v) = free.pop() {
                    break v;
                }
                self.returned.wait(&mut free);
            }
        };
        let result = view.map.msync(off, len);
        // Marked before the view goes back: whoever borrows it next (and
        // so cannot see this error through it) finds the mark below.
        if result.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        self.free.lock().push(view);
        self.returned.notify_one();
        result?;
        if self.failed.load(Ordering::Acquire) {
            return Err(earlier_failure());
        }
        Ok(())
    }

    /// How many views are lent out now.
    #[cfg(test)]
    fn lent(&self) -> usize {
        VIEWS - self.free.lock().len()
    }
}

fn earlier_failure() -> io::Error {
    io::Error::other("an earlier msync of this region file failed (Linux reports a write-back error only once)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom};
    use std::os::fd::AsRawFd;

    #[test]
    fn each_view_is_its_own_open_file_and_all_are_returned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        let f = File::create(&path).unwrap();
        f.set_len(1 << 20).unwrap();
        let views = SyncViews::open(&path, 1 << 20).unwrap();
        let fds: Vec<i32> = views.free.lock().iter().map(|v| v._file.as_raw_fd()).collect();
        let mut distinct = fds.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), VIEWS, "{fds:?}");
        // Open file descriptions, not only descriptors: each keeps its own
        // offset, which dup() would share.
        for (i, v) in views.free.lock().iter_mut().enumerate() {
            v._file.seek(SeekFrom::Start(i as u64 + 1)).unwrap();
        }
        let offsets: Vec<u64> = views.free.lock().iter_mut().map(|v| v._file.stream_position().unwrap()).collect();
        assert_eq!(offsets, (1..=VIEWS as u64).collect::<Vec<_>>());
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for i in 0..50 {
                        views.msync(i * 4096, 4096).unwrap();
                    }
                });
            }
        });
        assert_eq!(views.lent(), 0);
    }

    #[test]
    fn after_one_failure_every_msync_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        File::create(&path).unwrap().set_len(1 << 16).unwrap();
        let views = SyncViews::open(&path, 1 << 16).unwrap();
        views.msync(0, 4096).unwrap();
        views.failed.store(true, Ordering::Release);
        assert!(views.msync(0, 4096).is_err());
        assert!(views.msync(8192, 4096).is_err());
    }
}
