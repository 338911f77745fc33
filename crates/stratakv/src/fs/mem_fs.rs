//! An in-memory [`Fs`] that remembers what a power cut would keep.
//!
//! Like LevelDB's `FaultInjectionTestEnv` and pebble's `CrashableMem`, it
//! tracks, besides what readers see, what is *durable*:
//!
//! * file contents up to the length at the file's last successful `sync`
//!   (files are append-only, so that prefix never changes afterwards);
//! * directory entries (creates, renames, removes) as of the directory's
//!   last `sync_dir`. Directories themselves are durable at once.
//!
//! [`MemFs::snapshot`] captures both views in O(number of files) (contents
//! are shared, never copied), and [`FsSnapshot::restore`] builds the file
//! system a crash would leave behind, under a [`FsCrashMode`].
//!
//! [`MemFs::set_hook`] installs a callback run after every mutating
//! operation, with the file-system lock held, so a crash point taken there is
//! consistent: no other operation is half done.
//!
//! [`Fs::truncate`] is the one operation that is not an append: it gives
//! the file a new inode holding the kept prefix, under its visible name and
//! under every durable name of the old inode (the cut itself is modelled as
//! reaching the disk at once; with `sync`, so is the kept prefix), so
//! snapshots taken before it keep the old bytes.
//!
//! Sync failures with "fsyncgate" semantics: [`MemFs::lose_unsynced`] marks a
//! file's unsynced bytes as lost *and* clean (what Linux may do after a
//! failed fsync), so a later `sync` reports success without them.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock};
use rand::Rng;

use super::{FileLock, Fs, RandomAccessFile, WritableFile};

/// One file's bytes and durability state. Append-only.
#[derive(Debug, Default)]
struct InodeData {
    bytes: Vec<u8>,
    /// Length as of the last successful sync.
    synced: u64,
    /// Ranges a failed sync dropped (read back as zeros after a crash).
    lost: Vec<Range<u64>>,
}

#[derive(Debug, Default)]
struct Inode {
    data: RwLock<InodeData>,
}

/// Which mutating operation a hook sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemFsOp {
    /// A file was created (or truncated by re-creation).
    Create,
    /// Bytes were appended.
    Append,
    /// A file was synced.
    Sync,
    /// A file was renamed.
    Rename,
    /// A file was removed.
    Remove,
    /// A directory was synced.
    SyncDir,
    /// A file was cut shorter.
    Truncate,
}

/// Called after each mutating operation with its number, kind and a view
/// from which a consistent snapshot can be taken.
pub type MemFsHook = Box<dyn FnMut(u64, MemFsOp, &MemFsView<'_>) + Send>;

#[derive(Default)]
struct State {
    /// What readers see: path -> inode.
    files: BTreeMap<PathBuf, Arc<Inode>>,
    /// Directory entries as of each directory's last sync.
    durable: BTreeMap<PathBuf, Arc<Inode>>,
    dirs: BTreeSet<PathBuf>,
    locks: BTreeSet<PathBuf>,
    ops: u64,
    hook: Option<MemFsHook>,
}

struct Shared {
    state: Mutex<State>,
    syncs: AtomicU64,
}

/// An in-memory file system with crash images. Cheap to clone; clones
/// share one file system.
#[derive(Clone)]
pub struct MemFs {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MemFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("MemFs").field("files", &st.files.len()).field("ops", &st.ops).finish()
    }
}

impl Default for MemFs {
    fn default() -> Self {
        MemFs::new()
    }
}

/// A read-only view of the file system handed to a [`MemFsHook`].
pub struct MemFsView<'a> {
    state: &'a State,
}

impl MemFsView<'_> {
    /// The durable and visible state at this instant.
    pub fn snapshot(&self) -> FsSnapshot {
        snapshot_of(self.state)
    }
}

/// How a simulated crash treats what was not made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsCrashMode {
    /// Power cut: unsynced file data and unsynced directory entries are
    /// lost (LevelDB's `DropUnsyncedFileData` + `DeleteFilesCreatedAfterLastDirSync`).
    DropUnsynced,
    /// Power cut in which directory operations all reached the journal but
    /// unsynced file data did not.
    KeepNamesDropData,
    /// Power cut that tears files: each keeps a random part of its unsynced
    /// tail, sometimes with a zero-filled stretch (size updated, data not).
    TornTail,
    /// Process crash: everything written survives.
    KeepAll,
}

impl FsCrashMode {
    /// Every mode, for enumeration.
    pub const ALL: [FsCrashMode; 4] =
        [FsCrashMode::DropUnsynced, FsCrashMode::KeepNamesDropData, FsCrashMode::TornTail, FsCrashMode::KeepAll];

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            FsCrashMode::DropUnsynced => "drop-unsynced",
            FsCrashMode::KeepNamesDropData => "keep-names-drop-data",
            FsCrashMode::TornTail => "torn-tail",
            FsCrashMode::KeepAll => "keep-all",
        }
    }
}

#[derive(Clone, Debug)]
struct SnapFile {
    ino: Arc<Inode>,
    synced: u64,
    len: u64,
    lost: Vec<Range<u64>>,
}

/// Both views of a [`MemFs`] at one instant. File contents are shared with
/// the live file system (they are append-only), so taking one is cheap.
#[derive(Clone, Debug, Default)]
pub struct FsSnapshot {
    visible: BTreeMap<PathBuf, SnapFile>,
    durable: BTreeMap<PathBuf, SnapFile>,
    dirs: BTreeSet<PathBuf>,
}

fn snap_file(ino: &Arc<Inode>) -> SnapFile {
    let d = ino.data.read();
    SnapFile { ino: ino.clone(), synced: d.synced, len: d.bytes.len() as u64, lost: d.lost.clone() }
}

fn snapshot_of(st: &State) -> FsSnapshot {
    FsSnapshot {
        visible: st.files.iter().map(|(p, i)| (p.clone(), snap_file(i))).collect(),
        durable: st.durable.iter().map(|(p, i)| (p.clone(), snap_file(i))).collect(),
        dirs: st.dirs.clone(),
    }
}

impl FsSnapshot {
    /// Number of files a crash could keep (durable entries).
    pub fn durable_files(&self) -> usize {
        self.durable.len()
    }

    /// Bytes written but not yet synced, over all visible files.
    pub fn unsynced_bytes(&self) -> u64 {
        self.visible.values().map(|f| f.len.saturating_sub(f.synced)).sum()
    }

    /// Builds the file system a crash of kind `mode` would leave. `rng`
    /// decides torn lengths (only [`FsCrashMode::TornTail`] uses it).
    pub fn restore(&self, mode: FsCrashMode, rng: &mut impl Rng) -> MemFs {
        let fs = MemFs::new();
        {
            let mut st = fs.shared.state.lock();
            st.dirs = self.dirs.clone();
            let names = match mode {
                FsCrashMode::DropUnsynced | FsCrashMode::TornTail => &self.durable,
                FsCrashMode::KeepNamesDropData | FsCrashMode::KeepAll => &self.visible,
            };
            // One inode may be reachable under two names (a rename that is
            // durable while the old name is too); keep them one file.
            let mut made: Vec<(*const Inode, Arc<Inode>)> = Vec::new();
            for (path, f) in names {
                let key = Arc::as_ptr(&f.ino);
                let ino = match made.iter().find(|(k, _)| *k == key) {
                    Some((_, i)) => i.clone(),
                    None => {
                        let i = Arc::new(Inode { data: RwLock::new(crash_content(f, mode, rng)) });
                        made.push((key, i.clone()));
                        i
                    }
                };
                st.files.insert(path.clone(), ino.clone());
                st.durable.insert(path.clone(), ino);
            }
        }
        fs
    }
}

/// What one file holds after a crash.
fn crash_content(f: &SnapFile, mode: FsCrashMode, rng: &mut impl Rng) -> InodeData {
    let d = f.ino.data.read();
    let len = f.len.min(d.bytes.len() as u64);
    let synced = f.synced.min(len);
    let keep = match mode {
        FsCrashMode::KeepAll => len,
        FsCrashMode::DropUnsynced | FsCrashMode::KeepNamesDropData => synced,
        FsCrashMode::TornTail => {
            if len > synced {
                rng.gen_range(synced..=len)
            } else {
                synced
            }
        }
    };
    let mut bytes = d.bytes.get(..keep as usize).unwrap_or(&[]).to_vec();
    if mode != FsCrashMode::KeepAll {
        for r in &f.lost {
            let (s, e) = (r.start.min(keep) as usize, r.end.min(keep) as usize);
            if let Some(b) = bytes.get_mut(s..e) {
                b.fill(0);
            }
        }
    }
    if mode == FsCrashMode::TornTail && keep > synced && rng.gen_bool(0.3) {
        // The size reached the disk but part of the data did not. Data
        // reaches the disk in sectors, so what is missing starts at the old
        // end of the file (its sector was written with zeros after it) or
        // at a sector boundary.
        const SECTOR: u64 = 512;
        let s = rng.gen_range(synced..keep).div_ceil(SECTOR) * SECTOR;
        let s = if s >= keep { synced } else { s } as usize;
        if let Some(b) = bytes.get_mut(s..) {
            b.fill(0);
        }
    }
    let n = bytes.len() as u64;
    InodeData { bytes, synced: n, lost: Vec::new() }
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{}: no such file", p.display()))
}

impl MemFs {
    /// An empty file system (the root directory `/` exists).
    pub fn new() -> MemFs {
        let mut st = State::default();
        st.dirs.insert(PathBuf::from("/"));
        MemFs { shared: Arc::new(Shared { state: Mutex::new(st), syncs: AtomicU64::new(0) }) }
    }

    /// Installs (or removes) the per-operation hook. The hook runs with the
    /// file-system lock held: it must not call back into this file system.
    pub fn set_hook(&self, hook: Option<MemFsHook>) {
        self.shared.state.lock().hook = hook;
    }

    /// Both views now.
    pub fn snapshot(&self) -> FsSnapshot {
        snapshot_of(&self.shared.state.lock())
    }

    /// Both views now, together with the result of `f`, which runs while no
    /// file-system operation can (so a PM crash state taken in `f` belongs
    /// to the same instant). `f` must not call into this file system.
    pub fn snapshot_with<T>(&self, f: impl FnOnce() -> T) -> (FsSnapshot, T) {
        let st = self.shared.state.lock();
        let t = f();
        (snapshot_of(&st), t)
    }

    /// Both views now, unless another operation holds the lock.
    pub fn try_snapshot(&self) -> Option<FsSnapshot> {
        self.shared.state.try_lock().map(|st| snapshot_of(&st))
    }

    /// Mutating operations so far.
    pub fn ops(&self) -> u64 {
        self.shared.state.lock().ops
    }

    /// Successful file syncs so far.
    pub fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }

    /// What a failed fsync may do on Linux: the unsynced bytes of `path`
    /// are marked clean without reaching the disk, so they are lost at a
    /// crash even if a later sync succeeds.
    pub fn lose_unsynced(&self, path: &Path) {
        let st = self.shared.state.lock();
        if let Some(ino) = st.files.get(path) {
            let mut d = ino.data.write();
            let len = d.bytes.len() as u64;
            if len > d.synced {
                let r = d.synced..len;
                d.lost.push(r);
                d.synced = len;
            }
        }
    }

    /// Total bytes of every visible file.
    pub fn total_bytes(&self) -> u64 {
        self.shared.state.lock().files.values().map(|i| i.data.read().bytes.len() as u64).sum()
    }

    /// Names of every visible file (full paths).
    pub fn paths(&self) -> Vec<PathBuf> {
        self.shared.state.lock().files.keys().cloned().collect()
    }

    /// Overwrites the visible content of `path` (tests that corrupt files).
    pub fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.shared.state.lock();
        let ino = Arc::new(Inode {
            data: RwLock::new(InodeData { bytes: bytes.to_vec(), synced: bytes.len() as u64, lost: Vec::new() }),
        });
        if let Some(parent) = path.parent() {
            st.dirs.insert(parent.to_path_buf());
        }
        st.files.insert(path.to_path_buf(), ino.clone());
        st.durable.insert(path.to_path_buf(), ino);
        Ok(())
    }

    fn mutate<T>(&self, op: MemFsOp, f: impl FnOnce(&mut State) -> io::Result<T>) -> io::Result<T> {
        let mut st = self.shared.state.lock();
        let out = f(&mut st)?;
        fire(&mut st, op);
        Ok(out)
    }

    fn check_parent(st: &State, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() && !st.dirs.contains(p) => Err(not_found(p)),
            _ => Ok(()),
        }
    }
}

fn fire(st: &mut MutexGuard<'_, State>, op: MemFsOp) {
    st.ops += 1;
    if let Some(mut hook) = st.hook.take() {
        let n = st.ops;
        hook(n, op, &MemFsView { state: st });
        st.hook = Some(hook);
    }
}

struct MemWritable {
    fs: MemFs,
    ino: Arc<Inode>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let ino = self.ino.clone();
        self.fs.mutate(MemFsOp::Append, |_| {
            ino.data.write().bytes.extend_from_slice(data);
            Ok(())
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let ino = self.ino.clone();
        self.fs.mutate(MemFsOp::Sync, |_| {
            let mut d = ino.data.write();
            d.synced = d.bytes.len() as u64;
            Ok(())
        })?;
        self.fs.shared.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.ino.data.read().bytes.len() as u64
    }
}

struct MemRandom {
    ino: Arc<Inode>,
}

impl RandomAccessFile for MemRandom {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let d = self.ino.data.read();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|s| s.checked_add(buf.len()).map(|e| (s, e)))
            .and_then(|(s, e)| d.bytes.get(s..e))
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file"))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.ino.data.read().bytes.len() as u64
    }
}

#[derive(Debug)]
struct MemLock {
    fs: MemFs,
    path: PathBuf,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.fs.shared.state.lock().locks.remove(&self.path);
    }
}

impl Fs for MemFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.shared.state.lock();
        for a in dir.ancestors() {
            if !a.as_os_str().is_empty() {
                st.dirs.insert(a.to_path_buf());
            }
        }
        Ok(())
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let ino = Arc::new(Inode::default());
        let i = ino.clone();
        self.mutate(MemFsOp::Create, |st| {
            Self::check_parent(st, path)?;
            st.files.insert(path.to_path_buf(), i);
            Ok(())
        })?;
        Ok(Box::new(MemWritable { fs: self.clone(), ino }))
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let existing = self.shared.state.lock().files.get(path).cloned();
        match existing {
            Some(ino) => Ok(Box::new(MemWritable { fs: self.clone(), ino })),
            None => self.create(path),
        }
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let ino = self.shared.state.lock().files.get(path).cloned().ok_or_else(|| not_found(path))?;
        Ok(Arc::new(MemRandom { ino }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let ino = self.shared.state.lock().files.get(path).cloned().ok_or_else(|| not_found(path))?;
        let bytes = ino.data.read().bytes.clone();
        Ok(bytes)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.mutate(MemFsOp::Rename, |st| {
            Self::check_parent(st, to)?;
            let ino = st.files.remove(from).ok_or_else(|| not_found(from))?;
            st.files.insert(to.to_path_buf(), ino);
            Ok(())
        })
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.mutate(MemFsOp::Remove, |st| st.files.remove(path).map(|_| ()).ok_or_else(|| not_found(path)))
    }

    fn truncate(&self, path: &Path, len: u64, sync: bool) -> io::Result<()> {
        self.mutate(MemFsOp::Truncate, |st| {
            let old = st.files.get(path).cloned().ok_or_else(|| not_found(path))?;
            let d = old.data.read();
            let keep = len.min(d.bytes.len() as u64);
            let cut = InodeData {
                bytes: d.bytes.get(..keep as usize).unwrap_or(&[]).to_vec(),
                synced: if sync { keep } else { d.synced.min(keep) },
                lost: d.lost.iter().filter(|r| r.start < keep).map(|r| r.start..r.end.min(keep)).collect(),
            };
            drop(d);
            let ino = Arc::new(Inode { data: RwLock::new(cut) });
            for i in st.durable.values_mut() {
                if Arc::ptr_eq(i, &old) {
                    *i = ino.clone();
                }
            }
            st.files.insert(path.to_path_buf(), ino);
            Ok(())
        })?;
        if sync {
            self.shared.syncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.shared.state.lock();
        if !st.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let mut out: Vec<String> = st
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        out.extend(
            st.dirs
                .iter()
                .filter(|p| p.parent() == Some(dir))
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
        );
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.shared.state.lock();
        st.files.contains_key(path) || st.dirs.contains(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.mutate(MemFsOp::SyncDir, |st| {
            if !st.dirs.contains(dir) {
                return Err(not_found(dir));
            }
            st.durable.retain(|p, _| p.parent() != Some(dir));
            let now: Vec<(PathBuf, Arc<Inode>)> =
                st.files.iter().filter(|(p, _)| p.parent() == Some(dir)).map(|(p, i)| (p.clone(), i.clone())).collect();
            st.durable.extend(now);
            Ok(())
        })
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let mut st = self.shared.state.lock();
        Self::check_parent(&st, path)?;
        if !st.locks.insert(path.to_path_buf()) {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "lock held"));
        }
        if !st.files.contains_key(path) {
            st.files.insert(path.to_path_buf(), Arc::new(Inode::default()));
        }
        Ok(Box::new(MemLock { fs: self.clone(), path: path.to_path_buf() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn rng() -> StdRng {
        StdRng::seed_from_u64(1)
    }

    #[test]
    fn unsynced_data_and_names_are_lost_at_a_power_cut() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let mut f = fs.create(&d.join("a")).unwrap();
        f.append(b"hello").unwrap();
        f.sync().unwrap();
        f.append(b" world").unwrap();
        // Not yet in the durable directory.
        let snap = fs.snapshot();
        assert!(!snap.restore(FsCrashMode::DropUnsynced, &mut rng()).exists(&d.join("a")));
        let kept = snap.restore(FsCrashMode::KeepNamesDropData, &mut rng());
        assert_eq!(kept.read(&d.join("a")).unwrap(), b"hello");
        fs.sync_dir(d).unwrap();
        let snap = fs.snapshot();
        let cut = snap.restore(FsCrashMode::DropUnsynced, &mut rng());
        assert_eq!(cut.read(&d.join("a")).unwrap(), b"hello");
        let all = snap.restore(FsCrashMode::KeepAll, &mut rng());
        assert_eq!(all.read(&d.join("a")).unwrap(), b"hello world");
        for seed in 0..20 {
            let torn = snap.restore(FsCrashMode::TornTail, &mut StdRng::seed_from_u64(seed));
            let got = torn.read(&d.join("a")).unwrap();
            assert!(got.starts_with(b"hello") && got.len() <= 11);
        }
    }

    #[test]
    fn rename_is_durable_only_after_sync_dir() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let mut f = fs.create(&d.join("tmp")).unwrap();
        f.append(b"x").unwrap();
        f.sync().unwrap();
        fs.sync_dir(d).unwrap();
        fs.rename(&d.join("tmp"), &d.join("CURRENT")).unwrap();
        let cut = fs.snapshot().restore(FsCrashMode::DropUnsynced, &mut rng());
        assert!(cut.exists(&d.join("tmp")) && !cut.exists(&d.join("CURRENT")));
        fs.sync_dir(d).unwrap();
        let cut = fs.snapshot().restore(FsCrashMode::DropUnsynced, &mut rng());
        assert!(!cut.exists(&d.join("tmp")) && cut.exists(&d.join("CURRENT")));
    }

    #[test]
    fn removed_files_come_back_until_the_directory_is_synced() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let mut f = fs.create(&d.join("old")).unwrap();
        f.append(b"x").unwrap();
        f.sync().unwrap();
        fs.sync_dir(d).unwrap();
        fs.remove(&d.join("old")).unwrap();
        assert!(!fs.exists(&d.join("old")));
        let cut = fs.snapshot().restore(FsCrashMode::DropUnsynced, &mut rng());
        assert!(cut.exists(&d.join("old")));
    }

    #[test]
    fn lost_unsynced_data_stays_lost_after_a_later_sync() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let p = d.join("m");
        let mut f = fs.create(&p).unwrap();
        f.append(b"aaaa").unwrap();
        f.sync().unwrap();
        fs.sync_dir(d).unwrap();
        f.append(b"bbbb").unwrap();
        fs.lose_unsynced(&p);
        f.append(b"cccc").unwrap();
        f.sync().unwrap();
        assert_eq!(fs.read(&p).unwrap(), b"aaaabbbbcccc");
        let cut = fs.snapshot().restore(FsCrashMode::DropUnsynced, &mut rng());
        assert_eq!(cut.read(&p).unwrap(), b"aaaa\0\0\0\0cccc");
    }

    #[test]
    fn snapshots_do_not_change_when_files_grow() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let mut f = fs.create(&d.join("a")).unwrap();
        f.append(b"12").unwrap();
        let snap = fs.snapshot();
        f.append(b"34").unwrap();
        f.sync().unwrap();
        let all = snap.restore(FsCrashMode::KeepAll, &mut rng());
        assert_eq!(all.read(&d.join("a")).unwrap(), b"12");
    }

    #[test]
    fn truncate_keeps_old_snapshots_and_is_durable_under_the_old_name() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let p = d.join("log");
        let mut f = fs.create(&p).unwrap();
        f.append(b"abcdef").unwrap();
        f.sync().unwrap();
        fs.sync_dir(d).unwrap();
        let before = fs.snapshot();
        fs.truncate(&p, 2, true).unwrap();
        let mut f = fs.append(&p).unwrap();
        f.append(b"XY").unwrap();
        assert_eq!(fs.read(&p).unwrap(), b"abXY");
        assert_eq!(before.restore(FsCrashMode::DropUnsynced, &mut rng()).read(&p).unwrap(), b"abcdef");
        let cut = fs.snapshot().restore(FsCrashMode::DropUnsynced, &mut rng());
        assert_eq!(cut.read(&p).unwrap(), b"ab");
        f.sync().unwrap();
        let cut = fs.snapshot().restore(FsCrashMode::DropUnsynced, &mut rng());
        assert_eq!(cut.read(&p).unwrap(), b"abXY");
    }

    #[test]
    fn hook_sees_every_mutation_and_locks_exclude() {
        let fs = MemFs::new();
        let n = Arc::new(AtomicU64::new(0));
        let c = n.clone();
        fs.set_hook(Some(Box::new(move |_, _, v| {
            let _ = v.snapshot();
            c.fetch_add(1, Ordering::Relaxed);
        })));
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let mut f = fs.create(&d.join("a")).unwrap();
        f.append(b"1").unwrap();
        f.sync().unwrap();
        fs.sync_dir(d).unwrap();
        assert_eq!(n.load(Ordering::Relaxed), 4);
        let l = fs.lock(&d.join("LOCK")).unwrap();
        assert_eq!(fs.lock(&d.join("LOCK")).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        drop(l);
        assert!(fs.lock(&d.join("LOCK")).is_ok());
    }
}
