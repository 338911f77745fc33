//! A fault-injecting [`Fs`] wrapper (LevelDB's `FaultInjectionTestEnv`,
//! RocksDB's `FaultInjectionTestFS`, pebble's `errorfs`).
//!
//! [`FaultFs::inject`] arms a [`FaultPlan`]: the Nth operation of a kind
//! (counted from the moment the plan is armed) fails with EIO or ENOSPC,
//! once or from then on ("sticky", a disk that stays full). A failed append
//! may first write part of its bytes (a torn write). When the wrapped file
//! system is a [`MemFs`], a failed sync also marks the file's unsynced bytes
//! lost-but-clean, as Linux may after an fsync error ("fsyncgate"): a later
//! sync of the same file then succeeds without them.
//!
//! [`FaultFs::power_cut`] makes every later operation fail (the machine is
//! off); take the crash image from the `MemFs` underneath.
//!
//! The wrapper also watches the engine: [`FaultStats::syncs_after_failed_sync`]
//! counts syncs of a file handle whose earlier sync failed (an engine that
//! retries and carries on), and [`FaultStats::appends_after_failed_sync`]
//! appends to one.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, Fs, MemFs, RandomAccessFile, WritableFile};

/// A kind of file-system operation that can be made to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// Creating (or truncating) a file, or opening one for append.
    Create,
    /// Appending to a file (a write).
    Append,
    /// Syncing a file (fsync/fdatasync).
    Sync,
    /// Renaming a file.
    Rename,
    /// Removing a file.
    Remove,
    /// Syncing a directory.
    SyncDir,
    /// Opening a file for reading, or reading a whole file.
    Read,
}

impl FaultOp {
    /// Every operation kind.
    pub const ALL: [FaultOp; 7] = [
        FaultOp::Create,
        FaultOp::Append,
        FaultOp::Sync,
        FaultOp::Rename,
        FaultOp::Remove,
        FaultOp::SyncDir,
        FaultOp::Read,
    ];

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultOp::Create => "create",
            FaultOp::Append => "append",
            FaultOp::Sync => "sync",
            FaultOp::Rename => "rename",
            FaultOp::Remove => "remove",
            FaultOp::SyncDir => "sync_dir",
            FaultOp::Read => "read",
        }
    }

    fn index(self) -> usize {
        match self {
            FaultOp::Create => 0,
            FaultOp::Append => 1,
            FaultOp::Sync => 2,
            FaultOp::Rename => 3,
            FaultOp::Remove => 4,
            FaultOp::SyncDir => 5,
            FaultOp::Read => 6,
        }
    }
}

/// The error an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// EIO: the device failed.
    Eio,
    /// ENOSPC: the device is full.
    Enospc,
}

impl FaultError {
    /// The `io::Error` for this fault.
    pub fn to_io(self) -> io::Error {
        match self {
            FaultError::Eio => io::Error::from_raw_os_error(5),
            FaultError::Enospc => io::Error::from_raw_os_error(28),
        }
    }

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultError::Eio => "EIO",
            FaultError::Enospc => "ENOSPC",
        }
    }
}

/// Which operation fails, and how.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultPlan {
    /// The kind of operation.
    pub op: FaultOp,
    /// Fail the Nth such operation after the plan is armed (1 = the next one).
    pub nth: u64,
    /// The error returned.
    pub error: FaultError,
    /// Keep failing every such operation after the first failure, until cleared.
    pub sticky: bool,
    /// A failed append first writes this fraction (0..=1) of its bytes.
    pub tear: Option<f64>,
    /// Count only operations on paths containing this (e.g. `"MANIFEST"`).
    pub path_contains: Option<&'static str>,
}

impl FaultPlan {
    /// The `nth` operation `op` fails once with `error`.
    pub fn nth(op: FaultOp, nth: u64, error: FaultError) -> FaultPlan {
        FaultPlan { op, nth, error, sticky: false, tear: None, path_contains: None }
    }
}

/// One fault that fired.
#[derive(Clone, Debug, PartialEq)]
pub struct FiredFault {
    /// The operation that failed.
    pub op: FaultOp,
    /// The error it returned.
    pub error: FaultError,
    /// The file or directory.
    pub path: PathBuf,
}

/// Counters of a [`FaultFs`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultStats {
    /// Operations seen, per [`FaultOp::ALL`] order.
    pub ops: [u64; 7],
    /// Faults injected.
    pub fired: Vec<FiredFault>,
    /// Syncs of a handle whose earlier sync failed (should stay 0).
    pub syncs_after_failed_sync: u64,
    /// Appends to a handle whose earlier sync failed (should stay 0).
    pub appends_after_failed_sync: u64,
}

#[derive(Debug, Default)]
struct State {
    plan: Option<FaultPlan>,
    /// Matching operations seen since the plan was armed.
    seen: u64,
    /// The sticky plan has fired.
    stuck: bool,
    powered_off: bool,
    stats: FaultStats,
}

/// Wraps a file system and fails chosen operations. Cheap to clone.
#[derive(Clone, Debug)]
pub struct FaultFs {
    inner: Arc<dyn Fs>,
    mem: Option<MemFs>,
    st: Arc<Mutex<State>>,
}

impl FaultFs {
    /// Wraps any file system.
    pub fn new(inner: Arc<dyn Fs>) -> FaultFs {
        FaultFs { inner, mem: None, st: Arc::new(Mutex::new(State::default())) }
    }

    /// Wraps a [`MemFs`], so failed syncs lose data as on Linux.
    pub fn over_mem(mem: MemFs) -> FaultFs {
        FaultFs { inner: Arc::new(mem.clone()), mem: Some(mem), st: Arc::new(Mutex::new(State::default())) }
    }

    /// Arms `plan`, replacing any earlier one.
    pub fn inject(&self, plan: FaultPlan) {
        let mut st = self.st.lock();
        st.plan = Some(plan);
        st.seen = 0;
        st.stuck = false;
    }

    /// Disarms the plan (the disk has room again, the device recovered).
    pub fn clear(&self) {
        let mut st = self.st.lock();
        st.plan = None;
        st.stuck = false;
    }

    /// From now on every operation fails with EIO, as if power were lost.
    pub fn power_cut(&self) {
        self.st.lock().powered_off = true;
    }

    /// Counters and the faults that fired.
    pub fn stats(&self) -> FaultStats {
        self.st.lock().stats.clone()
    }

    /// Whether any fault has fired.
    pub fn fired(&self) -> bool {
        !self.st.lock().stats.fired.is_empty()
    }

    /// Counts the operation and decides whether it fails.
    fn check(&self, op: FaultOp, path: &Path) -> Option<(FaultError, Option<f64>)> {
        let mut st = self.st.lock();
        if let Some(c) = st.stats.ops.get_mut(op.index()) {
            *c += 1;
        }
        if st.powered_off {
            return Some((FaultError::Eio, None));
        }
        let plan = st.plan?;
        if plan.op != op {
            return None;
        }
        if let Some(part) = plan.path_contains {
            if !path.to_string_lossy().contains(part) {
                return None;
            }
        }
        st.seen += 1;
        let fire = st.stuck || st.seen == plan.nth;
        if !fire {
            return None;
        }
        if plan.sticky {
            st.stuck = true;
        }
        st.stats.fired.push(FiredFault { op, error: plan.error, path: path.to_path_buf() });
        Some((plan.error, plan.tear))
    }

    fn gate(&self, op: FaultOp, path: &Path) -> io::Result<()> {
        match self.check(op, path) {
            Some((e, _)) => Err(e.to_io()),
            None => Ok(()),
        }
    }

    fn wrap(&self, inner: Box<dyn WritableFile>, path: &Path) -> Box<dyn WritableFile> {
        Box::new(FaultWritable { inner, fs: self.clone(), path: path.to_path_buf(), sync_failed: false })
    }
}

struct FaultWritable {
    inner: Box<dyn WritableFile>,
    fs: FaultFs,
    path: PathBuf,
    sync_failed: bool,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if self.sync_failed {
            self.fs.st.lock().stats.appends_after_failed_sync += 1;
        }
        match self.fs.check(FaultOp::Append, &self.path) {
            None => self.inner.append(data),
            Some((e, tear)) => {
                if let Some(frac) = tear {
                    let n = ((data.len() as f64) * frac.clamp(0.0, 1.0)) as usize;
                    if let Some(part) = data.get(..n.min(data.len().saturating_sub(1))) {
                        if !part.is_empty() {
                            self.inner.append(part)?;
                        }
                    }
                }
                Err(e.to_io())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn sync(&mut self) -> io::Result<()> {
        if self.sync_failed {
            self.fs.st.lock().stats.syncs_after_failed_sync += 1;
        }
        match self.fs.check(FaultOp::Sync, &self.path) {
            None => self.inner.sync(),
            Some((e, _)) => {
                self.sync_failed = true;
                if e == FaultError::Eio {
                    if let Some(mem) = &self.fs.mem {
                        mem.lose_unsynced(&self.path);
                    }
                }
                Err(e.to_io())
            }
        }
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }
}

impl Fs for FaultFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.gate(FaultOp::Create, dir)?;
        self.inner.create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.gate(FaultOp::Create, path)?;
        Ok(self.wrap(self.inner.create(path)?, path))
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.gate(FaultOp::Create, path)?;
        Ok(self.wrap(self.inner.append(path)?, path))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.gate(FaultOp::Read, path)?;
        let inner = self.inner.open(path)?;
        Ok(Arc::new(FaultRandom { inner, fs: self.clone(), path: path.to_path_buf() }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.gate(FaultOp::Read, path)?;
        self.inner.read(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.gate(FaultOp::Rename, to)?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.gate(FaultOp::Remove, path)?;
        self.inner.remove(path)
    }

    /// Counted as an append (a write), and with `sync` also as a sync; a
    /// failed sync still cuts the file underneath.
    fn truncate(&self, path: &Path, len: u64, sync: bool) -> io::Result<()> {
        self.gate(FaultOp::Append, path)?;
        if sync {
            if let Err(e) = self.gate(FaultOp::Sync, path) {
                self.inner.truncate(path, len, false)?;
                return Err(e);
            }
        }
        self.inner.truncate(path, len, sync)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.gate(FaultOp::Read, dir)?;
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.gate(FaultOp::SyncDir, dir)?;
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

struct FaultRandom {
    inner: Arc<dyn RandomAccessFile>,
    fs: FaultFs,
    path: PathBuf,
}

impl RandomAccessFile for FaultRandom {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.fs.gate(FaultOp::Read, &self.path)?;
        self.inner.read_at(offset, buf)
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::FsCrashMode;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn setup() -> (MemFs, FaultFs, PathBuf) {
        let mem = MemFs::new();
        let fs = FaultFs::over_mem(mem.clone());
        let d = PathBuf::from("/db");
        fs.create_dir_all(&d).unwrap();
        (mem, fs, d)
    }

    #[test]
    fn nth_operation_fails_once_or_sticky() {
        let (_, fs, d) = setup();
        fs.inject(FaultPlan::nth(FaultOp::Append, 2, FaultError::Enospc));
        let mut f = fs.create(&d.join("a")).unwrap();
        f.append(b"1").unwrap();
        assert_eq!(f.append(b"2").unwrap_err().raw_os_error(), Some(28));
        f.append(b"3").unwrap();
        fs.inject(FaultPlan { sticky: true, ..FaultPlan::nth(FaultOp::Append, 1, FaultError::Eio) });
        assert!(f.append(b"4").is_err());
        assert!(f.append(b"5").is_err());
        fs.clear();
        f.append(b"6").unwrap();
        assert_eq!(fs.read(&d.join("a")).unwrap(), b"136");
        assert_eq!(fs.stats().fired.len(), 3);
    }

    #[test]
    fn torn_append_writes_a_prefix() {
        let (_, fs, d) = setup();
        fs.inject(FaultPlan { tear: Some(0.5), ..FaultPlan::nth(FaultOp::Append, 1, FaultError::Eio) });
        let mut f = fs.create(&d.join("a")).unwrap();
        assert!(f.append(b"abcdefgh").is_err());
        assert_eq!(fs.read(&d.join("a")).unwrap(), b"abcd");
    }

    #[test]
    fn failed_sync_loses_data_and_is_counted_if_retried() {
        let (mem, fs, d) = setup();
        let p = d.join("m");
        let mut f = fs.create(&p).unwrap();
        f.append(b"aa").unwrap();
        f.sync().unwrap();
        fs.sync_dir(&d).unwrap();
        f.append(b"bb").unwrap();
        fs.inject(FaultPlan { path_contains: Some("m"), ..FaultPlan::nth(FaultOp::Sync, 1, FaultError::Eio) });
        assert!(f.sync().is_err());
        // A retry "succeeds", but the bytes never reach the disk.
        f.sync().unwrap();
        assert_eq!(fs.stats().syncs_after_failed_sync, 1);
        let cut = mem.snapshot().restore(FsCrashMode::DropUnsynced, &mut StdRng::seed_from_u64(0));
        assert_eq!(cut.read(&p).unwrap(), b"aa\0\0");
    }

    #[test]
    fn power_cut_fails_everything() {
        let (_, fs, d) = setup();
        fs.power_cut();
        assert!(fs.create(&d.join("x")).is_err());
        assert!(fs.sync_dir(&d).is_err());
    }
}
