//! The version set: the current version plus the MANIFEST that records it.
//!
//! Installing a change means: append the edit to the MANIFEST, fsync, and
//! only then make the new version current. A new MANIFEST (written when
//! the database opens, and when the old one grows large) becomes the
//! manifest of record by an atomic rename of a temporary file to CURRENT.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::edit::VersionEdit;
use super::filename::{current_path, manifest_path, table_path, temp_path};
use super::manifest::{decode_records, encode_record};
use super::{FileMeta, L0State, Run, Version, NUM_LEVELS};
use crate::error::{Error, Result};
use crate::fs::{Fs, WritableFile};
use crate::key::compare_internal;

/// Roll to a new MANIFEST once the current one passes this size.
const MANIFEST_ROLL_BYTES: u64 = 64 << 20;

/// Current version and the counters persisted with it.
pub struct VersionSet {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    current: Arc<Version>,
    /// Next file number to hand out.
    pub next_file_number: u64,
    /// Smallest log number that may hold data not in tables.
    pub log_number: u64,
    /// Highest sequence number persisted in tables (or the matrix).
    pub last_sequence: u64,
    /// Log numbers below this may have been used (see [`VersionEdit::next_log_number`]).
    pub next_log_number: u64,
    /// Id of the PM region in use.
    pub pm_region_id: Option<u64>,
    /// L0 kind the database was created with.
    pub l0_kind: Option<u8>,
    /// Level 0's record as the MANIFEST replay found it, until level 0
    /// has rebuilt its state from it ([`VersionSet::install_l0`]); from
    /// then on the current version's state is the record.
    l0_record: Option<Vec<u8>>,
    /// Per level, where the next compaction starts.
    pub compact_pointers: Vec<Vec<u8>>,
    /// Live partitions: name -> id (the default partition is not listed).
    pub partitions: std::collections::BTreeMap<String, u32>,
    /// The id the next partition gets (ids are never reused).
    pub next_partition: u32,
    manifest: Option<Box<dyn WritableFile>>,
    manifest_number: u64,
    /// An append or fsync of the MANIFEST failed: its tail is unknown, so
    /// the next change starts a new MANIFEST instead of appending to it.
    manifest_damaged: bool,
    /// Bytes written to MANIFEST files (for write amplification).
    pub manifest_bytes_written: u64,
    /// Level-0 states (and so the leases on the PM structures they name)
    /// of edits whose append or fsync failed, kept until a new MANIFEST
    /// replaces the damaged one (see [`VersionSet::log_and_apply_l0`]).
    pinned: Vec<Arc<dyn L0State>>,
    /// Tables added by edits that failed to be recorded: no version names
    /// them, but a failed record may sit in the MANIFEST that CURRENT
    /// names, so they are removed only once a new MANIFEST replaces it.
    /// A retry on a disk that stays full writes its tables anew, and these
    /// would hold the space it needs until a reopen.
    unrecorded_tables: Vec<u64>,
    /// A MANIFEST larger than this is rewritten as a fresh snapshot.
    roll_bytes: u64,
}

impl std::fmt::Debug for VersionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSet")
            .field("next_file_number", &self.next_file_number)
            .field("log_number", &self.log_number)
            .field("last_sequence", &self.last_sequence)
            .finish()
    }
}

impl VersionSet {
    fn blank(fs: Arc<dyn Fs>, dir: &Path) -> VersionSet {
        VersionSet {
            fs,
            dir: dir.to_path_buf(),
            current: Arc::new(Version::empty()),
            next_file_number: 2,
            log_number: 0,
            last_sequence: 0,
            next_log_number: 0,
            pm_region_id: None,
            l0_kind: None,
            l0_record: None,
            compact_pointers: vec![Vec::new(); NUM_LEVELS],
            partitions: Default::default(),
            next_partition: 1,
            manifest: None,
            manifest_number: 0,
            manifest_damaged: false,
            manifest_bytes_written: 0,
            pinned: Vec::new(),
            unrecorded_tables: Vec::new(),
            roll_bytes: MANIFEST_ROLL_BYTES,
        }
    }

    /// Whether `dir` holds a database (has a CURRENT file).
    pub fn exists(fs: &dyn Fs, dir: &Path) -> bool {
        fs.exists(&current_path(dir))
    }

    /// Creates the MANIFEST of a new, empty database.
    pub fn create(fs: Arc<dyn Fs>, dir: &Path, l0_kind: u8) -> Result<VersionSet> {
        let mut vs = Self::blank(fs, dir);
        vs.l0_kind = Some(l0_kind);
        vs.roll_manifest()?;
        Ok(vs)
    }

    /// Reads CURRENT and replays its MANIFEST, then starts a fresh MANIFEST.
    pub fn recover(fs: Arc<dyn Fs>, dir: &Path) -> Result<VersionSet> {
        let cur_path = current_path(dir);
        let cur = fs.read(&cur_path).map_err(|e| Error::io(&cur_path, "read", e))?;
        let name = std::str::from_utf8(&cur)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| s.starts_with("MANIFEST-") && !s.contains('/'))
            .ok_or_else(|| Error::corruption(&cur_path, 0, "CURRENT does not name a MANIFEST"))?;
        let mpath = dir.join(name);
        let data = fs.read(&mpath).map_err(|e| Error::io(&mpath, "read", e))?;
        let (records, _torn) = decode_records(&data, &mpath)?;
        let mut vs = Self::blank(fs, dir);
        let mut version = Version::empty();
        if records.is_empty() {
            return Err(Error::corruption(&mpath, 0, "MANIFEST holds no records"));
        }
        for (off, rec) in records {
            let edit = VersionEdit::decode(rec).map_err(|why| Error::corruption(&mpath, off, why))?;
            version = apply(&version, &edit).map_err(|why| Error::corruption(&mpath, off, why))?;
            vs.absorb(&edit);
            if let Some(r) = &edit.l0_record {
                vs.l0_record = Some(r.clone());
            }
        }
        vs.current = Arc::new(version);
        // Always start a new MANIFEST, never append to the one just read:
        // its bytes came from the page cache, and if an earlier fsync of it
        // failed, Linux may have marked them clean without writing them
        // (fsyncgate). Appending and syncing would then leave a hole in
        // the middle of the file at the next power cut, and the database
        // would not open (found by strata-stress fs-fault; regression test
        // tests/crash_fs.rs). The new file holds the whole state, fsynced.
        vs.roll_manifest()?;
        Ok(vs)
    }

    fn absorb(&mut self, e: &VersionEdit) {
        if let Some(v) = e.log_number {
            self.log_number = v;
        }
        if let Some(v) = e.next_file_number {
            self.next_file_number = self.next_file_number.max(v);
        }
        if let Some(v) = e.last_sequence {
            self.last_sequence = v;
        }
        if let Some(v) = e.next_log_number {
            self.next_log_number = self.next_log_number.max(v);
        }
        if let Some(v) = e.pm_region_id {
            self.pm_region_id = Some(v);
        }
        if let Some(v) = e.l0_kind {
            self.l0_kind = Some(v);
        }
        for (level, key) in &e.compact_pointers {
            if let Some(p) = self.compact_pointers.get_mut(*level as usize) {
                *p = key.clone();
            }
        }
        for (name, id) in &e.partitions_added {
            self.partitions.insert(name.clone(), *id);
            self.next_partition = self.next_partition.max(id.saturating_add(1));
        }
        for id in &e.partitions_dropped {
            self.partitions.retain(|_, v| v != id);
        }
        if let Some(v) = e.next_partition {
            self.next_partition = self.next_partition.max(v);
        }
        for (_, f) in &e.added {
            self.next_file_number = self.next_file_number.max(f.number + 1);
        }
        // Run ids come from the file numbers too.
        for (run, f) in &e.run_added {
            self.next_file_number = self.next_file_number.max(f.number.max(*run) + 1);
        }
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// Hands out a new file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Every table number referenced by the current version.
    pub fn live_files(&self) -> HashSet<u64> {
        self.current.all_files().map(|f| f.number).collect()
    }

    /// Path of the MANIFEST in use.
    pub fn manifest_path(&self) -> PathBuf {
        manifest_path(&self.dir, self.manifest_number)
    }

    /// Number of the MANIFEST in use.
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Records `edit` durably, then makes the resulting version current.
    pub fn log_and_apply(&mut self, edit: VersionEdit) -> Result<()> {
        self.log_and_apply_l0(edit, None)
    }

    /// [`VersionSet::log_and_apply`] for an edit that also replaces level
    /// 0's state with `l0` (recorded with the edit). If the edit's append
    /// or fsync fails, its record may still be in the MANIFEST that CURRENT
    /// names (in the page cache, perhaps on disk), where a reopen or a crash
    /// will read it: `l0`, with the leases on the PM structures it names, is
    /// then kept until a new MANIFEST replaces that one, so the PM the
    /// record names is not reused meanwhile.
    pub(crate) fn log_and_apply_l0(&mut self, mut edit: VersionEdit, l0: Option<Arc<dyn L0State>>) -> Result<()> {
        let mpath = manifest_path(&self.dir, self.manifest_number);
        let mut version = apply(&self.current, &edit)
            .map_err(|why| Error::corruption(&mpath, 0, format!("edit does not apply: {why}")))?;
        if let Some(state) = &l0 {
            edit.l0_record = Some(state.record());
            version.l0 = Some(state.clone());
        }
        if self.manifest_damaged {
            // Never trust a file whose write or fsync failed: rewrite the
            // whole state into a new MANIFEST first.
            if let Err(e) = self.roll_manifest() {
                self.note_unrecorded(&edit);
                return Err(e);
            }
            self.manifest_damaged = false;
        }
        let mpath = manifest_path(&self.dir, self.manifest_number);
        edit.next_file_number = Some(self.next_file_number);
        let rec = encode_record(&edit.encode());
        let m = self.manifest.as_mut().ok_or(Error::Closed)?;
        let written = m
            .append(&rec)
            .map_err(|e| Error::io(&mpath, "write", e))
            .and_then(|_| m.sync().map_err(|e| Error::io(&mpath, "fsync", e)));
        if let Err(e) = written {
            self.manifest_damaged = true;
            self.pinned.extend(l0);
            self.note_unrecorded(&edit);
            return Err(e);
        }
        self.manifest_bytes_written += rec.len() as u64;
        self.absorb(&edit);
        self.current = Arc::new(version);
        if self.manifest.as_ref().map(|m| m.size()).unwrap_or(0) > self.roll_bytes && self.roll_manifest().is_err() {
            // The edit is durable and applied: report success, or the caller
            // would undo in memory what the MANIFEST already holds (drop a
            // row it names, reuse its PM). A failure after the rename may
            // leave CURRENT naming either file, so the next change starts a
            // new MANIFEST first, as after a failed append.
            self.manifest_damaged = true;
        }
        Ok(())
    }

    /// Level 0's record as the MANIFEST replay found it (None once level 0
    /// has installed its state).
    pub(crate) fn l0_record(&self) -> Option<&[u8]> {
        self.l0_record.as_deref()
    }

    /// Makes `l0` level 0's state in the current version without a
    /// MANIFEST record: the state level 0 rebuilt from the record at open,
    /// or a change that needs no record of its own (the next edit's record
    /// holds it, and losing it at a crash is harmless).
    pub(crate) fn install_l0(&mut self, l0: Arc<dyn L0State>) {
        let mut v = (*self.current).clone();
        v.l0 = Some(l0);
        self.current = Arc::new(v);
        self.l0_record = None;
    }

    /// Remembers the tables `edit` (which failed to be recorded) created;
    /// files it only moves are named by the current version and stay.
    fn note_unrecorded(&mut self, edit: &VersionEdit) {
        let live = self.live_files();
        let added = edit.added.iter().map(|a| a.1.number).chain(edit.run_added.iter().map(|a| a.1.number));
        self.unrecorded_tables.extend(added.filter(|n| !live.contains(n)));
    }

    fn snapshot_edit(&self) -> VersionEdit {
        let mut e = VersionEdit {
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            next_log_number: (self.next_log_number > 0).then_some(self.next_log_number),
            pm_region_id: self.pm_region_id,
            l0_kind: self.l0_kind,
            l0_record: self.current.l0.as_ref().map(|s| s.record()).or_else(|| self.l0_record.clone()),
            range_dels_added: self.current.range_dels.tombs().to_vec(),
            partitions_added: self.partitions.iter().map(|(n, id)| (n.clone(), *id)).collect(),
            next_partition: (self.next_partition > 1).then_some(self.next_partition),
            split_points: self.current.splits.to_vec(),
            ..Default::default()
        };
        for (level, p) in self.compact_pointers.iter().enumerate() {
            if !p.is_empty() {
                e.compact_pointers.push((level as u32, p.clone()));
            }
        }
        for (level, files) in self.current.levels.iter().enumerate() {
            for f in files {
                e.added.push((level as u32, (**f).clone()));
            }
        }
        for run in &self.current.runs {
            for f in &run.files {
                e.run_added.push((run.id, (**f).clone()));
            }
        }
        e
    }

    /// Writes a new MANIFEST holding the whole current state, points CURRENT
    /// at it, and removes the old one.
    fn roll_manifest(&mut self) -> Result<()> {
        let number = self.new_file_number();
        let mpath = manifest_path(&self.dir, number);
        let tmp = temp_path(&self.dir, number);
        let mut snap = self.snapshot_edit();
        snap.next_file_number = Some(self.next_file_number);
        let rec = encode_record(&snap.encode());
        let written = write_synced(&*self.fs, &mpath, &rec)
            .and_then(|f| write_synced(&*self.fs, &tmp, format!("MANIFEST-{number:06}\n").as_bytes()).map(|_| f));
        let f = match written {
            Ok(f) => f,
            Err(e) => {
                // Nothing names these files yet (CURRENT is renamed last):
                // remove them, or a disk that stays full collects a partial
                // MANIFEST per retry of the failed change. Best effort:
                // leftovers are removed at the next open.
                let _ = self.fs.remove(&tmp);
                let _ = self.fs.remove(&mpath);
                return Err(e);
            }
        };
        self.manifest_bytes_written += rec.len() as u64;
        // Atomically point CURRENT at the new MANIFEST.
        let cur = current_path(&self.dir);
        self.fs.rename(&tmp, &cur).map_err(|e| Error::io(&cur, "rename", e))?;
        self.fs.sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, "fsync dir", e))?;
        // CURRENT no longer names a MANIFEST with a failed edit in it.
        self.pinned.clear();
        for number in std::mem::take(&mut self.unrecorded_tables) {
            // Best effort: a leftover is an orphan that the next open removes.
            let _ = self.fs.remove(&table_path(&self.dir, number));
        }
        let old = std::mem::replace(&mut self.manifest_number, number);
        self.manifest = Some(f);
        if old != 0 {
            // Best effort: a leftover old MANIFEST is harmless and removed at next open.
            let _ = self.fs.remove(&manifest_path(&self.dir, old));
        }
        Ok(())
    }
}

/// Creates `path` holding `data`, fsynced; returns the open file.
fn write_synced(fs: &dyn Fs, path: &Path, data: &[u8]) -> Result<Box<dyn WritableFile>> {
    let mut f = fs.create(path).map_err(|e| Error::io(path, "create", e))?;
    f.append(data).map_err(|e| Error::io(path, "write", e))?;
    f.sync().map_err(|e| Error::io(path, "fsync", e))?;
    Ok(f)
}

/// Applies an edit to a version, checking that it makes sense.
pub(crate) fn apply(base: &Version, edit: &VersionEdit) -> Result<Version, String> {
    // A file an edit deletes and adds back unchanged (a trivial move, of a
    // level's file or a run's) keeps its `Arc`: obsolete files are deleted
    // when their `Arc` is the last one, and a fresh `Arc` for a moved file
    // would let a later compaction delete it while a version held by an
    // iterator still names it through the old one.
    let removed: HashSet<u64> = edit.deleted.iter().map(|d| d.1).chain(edit.run_deleted.iter().map(|d| d.1)).collect();
    // Only the levels and runs the edit deletes from are scanned.
    let touched_levels: HashSet<u32> = edit.deleted.iter().map(|d| d.0).collect();
    let touched_runs: HashSet<u64> = edit.run_deleted.iter().map(|d| d.0).collect();
    let moved: HashMap<u64, &Arc<FileMeta>> = touched_levels
        .iter()
        .flat_map(|l| base.files(*l as usize).iter())
        .chain(base.runs.iter().filter(|r| touched_runs.contains(&r.id)).flat_map(|r| r.files.iter()))
        .filter(|f| removed.contains(&f.number))
        .map(|f| (f.number, f))
        .collect();
    let arc_of = |f: &FileMeta| match moved.get(&f.number) {
        Some(a) if ***a == *f => Arc::clone(a),
        _ => Arc::new(f.clone()),
    };
    let mut levels = base.levels.clone();
    levels.resize(NUM_LEVELS, Vec::new());
    // One pass per touched level, not one per deleted file: replaying a
    // MANIFEST of a large database applies many edits to many files.
    let mut changed = [false; NUM_LEVELS];
    let mut deleted: HashMap<u32, HashSet<u64>> = HashMap::new();
    for (level, number) in &edit.deleted {
        if !deleted.entry(*level).or_default().insert(*number) {
            return Err(format!("deletes file {number} twice from level {level}"));
        }
    }
    for (level, numbers) in &deleted {
        let files = levels.get_mut(*level as usize).ok_or_else(|| format!("bad level {level}"))?;
        let before = files.len();
        files.retain(|f| !numbers.contains(&f.number));
        if before - files.len() != numbers.len() {
            let missing = numbers.iter().find(|n| !base.files(*level as usize).iter().any(|f| f.number == **n));
            return Err(format!("deletes file {} which is not in level {level}", missing.copied().unwrap_or(0)));
        }
        if let Some(c) = changed.get_mut(*level as usize) {
            *c = true;
        }
    }
    for (level, f) in &edit.added {
        let files = levels.get_mut(*level as usize).ok_or_else(|| format!("bad level {level}"))?;
        files.push(arc_of(f));
        if let Some(c) = changed.get_mut(*level as usize) {
            *c = true;
        }
    }
    for (level, files) in levels.iter_mut().enumerate() {
        if !changed.get(level).copied().unwrap_or(true) {
            continue;
        }
        if level == 0 {
            files.sort_by_key(|f| std::cmp::Reverse(f.number));
        } else {
            sort_disjoint(files).map_err(|(a, b)| format!("files {a} and {b} overlap in level {level}"))?;
        }
    }
    let mut runs = base.runs.clone();
    for (id, number) in &edit.run_deleted {
        let run = runs
            .iter_mut()
            .find(|r| r.id == *id)
            .ok_or_else(|| format!("deletes from run {id} which does not exist"))?;
        let before = run.files.len();
        run.files.retain(|f| f.number != *number);
        if run.files.len() == before {
            return Err(format!("deletes file {number} which is not in run {id}"));
        }
    }
    for (id, f) in &edit.run_added {
        match runs.iter_mut().find(|r| r.id == *id) {
            Some(run) => run.files.push(arc_of(f)),
            None => runs.push(Run { id: *id, files: vec![arc_of(f)] }),
        }
    }
    runs.retain(|r| !r.files.is_empty());
    runs.sort_by_key(|r| std::cmp::Reverse(r.id));
    for run in &mut runs {
        sort_disjoint(&mut run.files).map_err(|(a, b)| format!("files {a} and {b} overlap in run {}", run.id))?;
    }
    let (range_dels, range_epoch) = if edit.range_dels_added.is_empty() && edit.range_dels_removed.is_empty() {
        (base.range_dels.clone(), base.range_epoch)
    } else {
        (
            Arc::new(base.range_dels.edited(&edit.range_dels_added, &edit.range_dels_removed)),
            base.range_epoch + edit.range_dels_added.len() as u64,
        )
    };
    let splits = if edit.split_points.is_empty() {
        base.splits.clone()
    } else {
        let mut s: Vec<Vec<u8>> = base.splits.iter().chain(edit.split_points.iter()).cloned().collect();
        s.sort();
        s.dedup();
        Arc::new(s)
    };
    Ok(Version { levels, runs, l0: base.l0.clone(), range_dels, range_epoch, splits })
}

/// Sorts `files` by key; `Err` names two that overlap.
fn sort_disjoint(files: &mut [Arc<FileMeta>]) -> Result<(), (u64, u64)> {
    files.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
    for w in files.windows(2) {
        if let [a, b] = w {
            if a.largest_user() >= b.smallest_user() {
                return Err((a.number, b.number));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FaultError, FaultFs, FaultOp, FaultPlan, Fs, MemFs};

    /// Regression (review of stop 18): a MANIFEST roll that fails after the
    /// edit was appended and fsynced must not report the edit as failed
    /// (the caller would undo in memory what the MANIFEST holds).
    #[test]
    fn a_failed_roll_does_not_fail_a_durable_edit() {
        // Operations only a roll makes (an edit's own append and fsync are
        // covered by the pinning tests in tests/crash_fs.rs).
        for op in [FaultOp::Create, FaultOp::Rename, FaultOp::SyncDir] {
            let fault = FaultFs::over_mem(MemFs::new());
            let dir = Path::new("/db");
            fault.create_dir_all(dir).unwrap();
            let mut vs = VersionSet::create(Arc::new(fault.clone()), dir, 0).unwrap();
            let first = vs.manifest_number();
            vs.roll_bytes = 64;
            fault.inject(FaultPlan::nth(op, 1, FaultError::Enospc));
            for seq in 1..=20u64 {
                let r = vs.log_and_apply(VersionEdit { last_sequence: Some(seq), ..Default::default() });
                assert!(r.is_ok(), "{op:?}: edit {seq} failed: {r:?}");
            }
            assert_ne!(vs.manifest_number(), first, "{op:?}: the roll was retried");
            let again = VersionSet::recover(Arc::new(fault.clone()), dir).unwrap();
            assert_eq!(again.last_sequence, 20, "{op:?}");
        }
    }
    fn meta(number: u64, lo: &[u8], hi: &[u8]) -> FileMeta {
        FileMeta {
            number,
            size: 1,
            smallest: crate::key::internal_key(lo, 2, crate::key::Kind::Put),
            largest: crate::key::internal_key(hi, 1, crate::key::Kind::Put),
            entries: 1,
            deletions: 0,
            smallest_seq: 1,
            largest_seq: 2,
        }
    }

    /// `apply` removes exactly the deleted files, keeps levels sorted, and
    /// refuses an edit that deletes a file twice or one that is not there.
    #[test]
    fn apply_checks_deletions() {
        let mut base = Version::empty();
        let add = VersionEdit {
            added: vec![
                (1, meta(3, b"m", b"n")),
                (1, meta(1, b"a", b"b")),
                (1, meta(2, b"c", b"d")),
                (2, meta(4, b"a", b"z")),
            ],
            ..Default::default()
        };
        base = apply(&base, &add).unwrap();
        let numbers = |v: &Version, l: usize| v.files(l).iter().map(|f| f.number).collect::<Vec<_>>();
        assert_eq!(numbers(&base, 1), vec![1, 2, 3]);
        let del =
            VersionEdit { deleted: vec![(1, 1), (1, 3)], added: vec![(1, meta(5, b"x", b"y"))], ..Default::default() };
        let next = apply(&base, &del).unwrap();
        assert_eq!(numbers(&next, 1), vec![2, 5]);
        assert_eq!(numbers(&next, 2), vec![4]);
        let twice = VersionEdit { deleted: vec![(1, 2), (1, 2)], ..Default::default() };
        assert!(apply(&base, &twice).unwrap_err().contains("twice"));
        let missing = VersionEdit { deleted: vec![(1, 2), (1, 9)], ..Default::default() };
        assert!(apply(&base, &missing).unwrap_err().contains("file 9 which is not in level 1"));
        let wrong_level = VersionEdit { deleted: vec![(2, 1)], ..Default::default() };
        assert!(apply(&base, &wrong_level).is_err());
        let overlapping = VersionEdit { added: vec![(1, meta(6, b"b", b"c"))], ..Default::default() };
        assert!(apply(&base, &overlapping).is_err());
    }
    /// A file deleted and added back unchanged (a trivial move, from a level
    /// or a run) keeps its `Arc`, which file deletion counts on; a file
    /// added anew gets a new one.
    #[test]
    fn a_trivial_move_keeps_the_files_arc() {
        let base =
            apply(&Version::empty(), &VersionEdit { added: vec![(1, meta(1, b"a", b"b"))], ..Default::default() })
                .unwrap();
        let base =
            apply(&base, &VersionEdit { run_added: vec![(9, meta(2, b"c", b"d"))], ..Default::default() }).unwrap();
        let before_l1 = base.files(1)[0].clone();
        let before_run = base.runs[0].files[0].clone();
        let mv = VersionEdit {
            deleted: vec![(1, 1)],
            run_deleted: vec![(9, 2)],
            added: vec![(2, meta(1, b"a", b"b")), (1, meta(2, b"c", b"d"))],
            ..Default::default()
        };
        let next = apply(&base, &mv).unwrap();
        assert!(Arc::ptr_eq(&next.files(2)[0], &before_l1), "a level's file moved down got a new Arc");
        assert!(Arc::ptr_eq(&next.files(1)[0], &before_run), "a run's file moved into L1 got a new Arc");
        let rewritten =
            VersionEdit { deleted: vec![(1, 2)], added: vec![(1, meta(2, b"c", b"e"))], ..Default::default() };
        let next = apply(&next, &rewritten).unwrap();
        assert!(!Arc::ptr_eq(&next.files(1)[0], &before_run), "a changed file kept the old Arc");
    }
}
