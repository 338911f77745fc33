//! msyncs of a region file, each through an open file of its own.
//!
//! Linux records a write-back error per file, not per page or range, and
//! reports it once to each *open file description* (errseq): the first
//! fsync or msync through that description after the error sees it, later
//! ones succeed, whatever range they cover. So with one description (the
//! mapping stores go through) an msync can consume the error of a page in
//! another msync's range, and that other one, running at the same time or
//! later, reports success for a page the device never got. The engine would
//! acknowledge writes it lost.
//!
//! Here every msync borrows one of a few read-only mappings of the file,
//! each made over its own `open()` when the region opens, so each sees
//! every error recorded after that open; at most one msync uses a mapping
//! at a time (more wait for one), so overlapping msyncs each see it. And
//! once any msync failed, every later msync of this open region fails too
//! (a view that reported the error would not report it again, and the
//! bytes behind it may be gone). A reopen starts afresh: the engine has
//! poisoned itself by then, and its recovery reads what the file holds.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Condvar, Mutex};

use crate::map::MsyncView;

/// Views per region: more than the msyncs usually running at once (a log
/// writer or `Db::sync` caller, the periodic log msync, the log prefault
/// thread, the flush and compaction threads), so a log msync rarely waits
/// behind a large one. Each costs a file descriptor and address space.
const VIEWS: usize = 8;

/// A read-only mapping of the region file over its own open file.
struct View {
    map: MsyncView,
    _file: File,
}

/// The views of one region file, lent one per msync.
pub(crate) struct SyncViews {
    free: Mutex<Vec<View>>,
    returned: Condvar,
    /// An msync failed: every later one fails.
    failed: AtomicBool,
    /// Test hook: the next msync fails as a write-back error would.
    #[cfg(test)]
    fail_next: AtomicBool,
}

impl SyncViews {
    /// Opens the views of `file`, `len` bytes long, found at `path`.
    pub(crate) fn open(file: &File, path: &Path, len: usize) -> io::Result<SyncViews> {
        let want = file.metadata()?;
        let mut views = Vec::with_capacity(VIEWS);
        for _ in 0..VIEWS {
            // Read-write: msync skips shared mappings of read-only files.
            let view = OpenOptions::new().read(true).write(true).open(path)?;
            // Opened by name, so it could be another file if the path was
            // replaced meanwhile: then its msyncs would write back nothing
            // of the region, silently.
            let got = view.metadata()?;
            if (got.dev(), got.ino()) != (want.dev(), want.ino()) {
                return Err(io::Error::other(format!("{} was replaced while the region opened", path.display())));
            }
            views.push(View { map: MsyncView::new(&view, len)?, _file: view });
        }
        Ok(SyncViews {
            free: Mutex::new(views),
            returned: Condvar::new(),
            failed: AtomicBool::new(false),
            #[cfg(test)]
            fail_next: AtomicBool::new(false),
        })
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
        #[cfg(test)]
        let result = match self.fail_next.swap(false, Ordering::AcqRel) {
            true => Err(io::Error::from_raw_os_error(5)),
            false => result,
        };
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

    /// A file of `len` bytes in a fresh temp dir (kept alive by the caller).
    fn region_file(len: u64) -> (tempfile::TempDir, std::path::PathBuf, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        let f = File::create(&path).unwrap();
        f.set_len(len).unwrap();
        (dir, path, f)
    }

    #[test]
    fn each_view_is_its_own_open_file_and_all_are_returned() {
        let (_dir, path, f) = region_file(1 << 20);
        let views = SyncViews::open(&f, &path, 1 << 20).unwrap();
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
            // More threads than views: some wait for one.
            for _ in 0..2 * VIEWS {
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
    fn after_one_failure_every_msync_through_every_view_fails() {
        let (_dir, path, f) = region_file(1 << 16);
        let views = SyncViews::open(&f, &path, 1 << 16).unwrap();
        views.msync(0, 4096).unwrap();
        views.fail_next.store(true, Ordering::Release);
        assert!(views.msync(0, 4096).is_err());
        // Hold every view: each must refuse, whichever reported the error.
        let held: Vec<View> = std::mem::take(&mut *views.free.lock());
        assert_eq!(held.len(), VIEWS);
        for v in held {
            views.free.lock().push(v);
            assert!(views.msync(0, 4096).is_err());
            assert!(views.msync(8192, 4096).is_err());
            views.free.lock().clear();
        }
    }

    #[test]
    fn a_path_that_names_another_file_is_refused() {
        let (dir, path, f) = region_file(1 << 16);
        std::fs::rename(&path, dir.path().join("moved")).unwrap();
        File::create(&path).unwrap().set_len(1 << 16).unwrap();
        assert!(SyncViews::open(&f, &path, 1 << 16).is_err());
    }
}
