//! The coordinator log: a redo record for every batch that spans shards.
//!
//! A cross-shard batch is appended here, as durable as the batch's own
//! writes (fdatasync when it is a `sync` write; else the page cache, which
//! survives a process crash like the engine's PM log), before any shard is
//! handed a part of it. Each shard stores the largest GSN it applied in
//! its meta key, in the same engine batch as the data, and applies its
//! parts in GSN order. So after a crash, a shard whose applied GSN is below
//! a record's lacks exactly that record's part, and recovery re-applies it:
//! the batch ends up in every shard it names, or (if its record never
//! became whole) in none, since no shard gets a part before the record is
//! written. DURABILITY.md, "Sharded", has the whole argument.
//!
//! Frame: `len u32 | crc32c(payload) u32 | payload`, little-endian;
//! payload: `gsn u64 | parts u32 | (shard u32 | bytes u32 | batch records)*`.
//! Recovery stops at the first frame that is short, fails its CRC or has a
//! zero length (a torn tail: its batch was never handed to a shard) and
//! cuts the file there.
//!
//! The log goes through the database's [`Fs`] (so an in-memory file
//! system's crash image holds it). A failed sync, or a failed cut after a
//! failed append, leaves the file's durable state unknown: the log then
//! refuses every later append (fsyncgate), and the front end poisons itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::fs::{Fs, WritableFile};

/// The coordinator log's file name in the sharded database's directory.
pub const COORD_FILE: &str = "COORD";

/// The file a trim writes the records it keeps into, renamed over
/// [`COORD_FILE`] once durable (a leftover is removed at open).
pub const COORD_TMP_FILE: &str = "COORD.tmp";

/// One recovered cross-shard batch.
pub(crate) struct CoordRecord {
    pub gsn: u64,
    /// (shard, that shard's part).
    pub parts: Vec<(usize, WriteBatch)>,
}

/// The open coordinator log.
pub(crate) struct CoordLog {
    fs: Arc<dyn Fs>,
    path: PathBuf,
    /// Appends at the end; `None` after a cut until the next append.
    file: Option<Box<dyn WritableFile>>,
    /// Bytes of whole records.
    len: u64,
    buf: Vec<u8>,
    /// A sync or cut failed: the durable contents are unknown.
    failed: bool,
}

impl CoordLog {
    /// Opens (creating) the log in `dir` and reads its whole records.
    pub(crate) fn open(fs: Arc<dyn Fs>, dir: &Path, shards: usize) -> Result<(CoordLog, Vec<CoordRecord>)> {
        let path = dir.join(COORD_FILE);
        let bytes = match fs.read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Created with its directory entry durable, so a record
                // fdatasynced later is found after a power loss.
                fs.create(&path).map_err(|e| Error::io(&path, "create", e))?;
                fs.sync_dir(dir).map_err(|e| Error::io(dir, "fsync", e))?;
                Vec::new()
            }
            Err(e) => return Err(Error::io(&path, "read", e)),
        };
        // A trim that stopped before its rename: the log is still whole.
        let tmp = dir.join(COORD_TMP_FILE);
        if fs.exists(&tmp) {
            let _ = fs.remove(&tmp);
        }
        let (records, good) = decode_all(&path, &bytes, shards)?;
        let mut log = CoordLog { fs, path, file: None, len: good, buf: Vec::new(), failed: false };
        if good < bytes.len() as u64 {
            // A torn tail: cut it, so later appends follow whole records.
            log.cut(good, false)?;
        }
        Ok((log, records))
    }

    /// Appends one record; durable (fdatasync) when `sync`. On failure the
    /// file is cut back, so no partial record precedes later ones.
    pub(crate) fn append(&mut self, gsn: u64, parts: &[(usize, &WriteBatch)], sync: bool) -> Result<()> {
        if self.failed {
            return Err(Error::Poisoned("an earlier sync of the coordinator log failed".into()));
        }
        self.buf.clear();
        self.buf.extend_from_slice(&[0; 8]);
        self.buf.extend_from_slice(&gsn.to_le_bytes());
        self.buf.extend_from_slice(&(parts.len() as u32).to_le_bytes());
        for (shard, b) in parts {
            self.buf.extend_from_slice(&(*shard as u32).to_le_bytes());
            self.buf.extend_from_slice(&(b.rep().len() as u32).to_le_bytes());
            self.buf.extend_from_slice(b.rep());
        }
        let payload_len = self.buf.len() - 8;
        let payload_len32 = u32::try_from(payload_len)
            .map_err(|_| Error::InvalidArgument(format!("cross-shard batch of {payload_len} bytes is too large")))?;
        let crc = crc32c::crc32c(&self.buf[8..]);
        self.buf[..4].copy_from_slice(&payload_len32.to_le_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        let r = self.write_buf(sync);
        match r {
            Ok(()) => {
                self.len += self.buf.len() as u64;
                Ok(())
            }
            Err((e, synced)) => {
                if synced {
                    self.failed = true;
                    self.file = None;
                    return Err(e);
                }
                let len = self.len;
                if let Err(c) = self.cut(len, false) {
                    self.failed = true;
                    return Err(c);
                }
                Err(e)
            }
        }
    }

    /// Writes `buf` to the page cache and, with `sync`, to the disk. The
    /// flag says whether the sync (not the write) failed.
    fn write_buf(&mut self, sync: bool) -> std::result::Result<(), (Error, bool)> {
        let path = &self.path;
        if self.file.is_none() {
            self.file = Some(self.fs.append(path).map_err(|e| (Error::io(path, "open", e), false))?);
        }
        let Some(f) = self.file.as_mut() else { return Err((Error::Closed, false)) };
        f.append(&self.buf).and_then(|()| f.flush()).map_err(|e| (Error::io(path, "write", e), false))?;
        if sync {
            f.sync().map_err(|e| (Error::io(path, "fdatasync", e), true))?;
        }
        Ok(())
    }

    /// Whether a failed sync or cut made the log refuse appends.
    pub(crate) fn failed(&self) -> bool {
        self.failed
    }

    /// Bytes of records.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Empties the log once every shard has its parts durable.
    pub(crate) fn truncate(&mut self) -> Result<()> {
        let r = self.cut(0, true);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    /// Drops the records in the first `upto` bytes (every shard has their
    /// parts durable). With nothing after them the log is emptied;
    /// otherwise the records after them are written into a new file, synced,
    /// renamed over the log and the directory synced, so a crash at any
    /// point leaves either the whole old log or the new one (and redoing a
    /// dropped record is harmless: shards skip parts they have).
    pub(crate) fn drop_prefix(&mut self, upto: u64) -> Result<()> {
        if self.failed {
            return Err(Error::Poisoned("an earlier sync of the coordinator log failed".into()));
        }
        if upto >= self.len {
            return self.truncate();
        }
        if upto == 0 {
            return Ok(());
        }
        // Dropped first: a buffering writer flushes what it holds on drop.
        self.file = None;
        let path = self.path.clone();
        let mut tail = vec![0u8; (self.len - upto) as usize];
        self.fs.open(&path).and_then(|f| f.read_at(upto, &mut tail)).map_err(|e| Error::io(&path, "read", e))?;
        let tmp = path.with_file_name(COORD_TMP_FILE);
        let written = self.fs.create(&tmp).and_then(|mut f| f.append(&tail).and_then(|()| f.sync()));
        if let Err(e) = written {
            let _ = self.fs.remove(&tmp);
            return Err(Error::io(&tmp, "write", e));
        }
        if let Err(e) = self.fs.rename(&tmp, &path) {
            let _ = self.fs.remove(&tmp);
            return Err(Error::io(&path, "rename", e));
        }
        // Later appends go to the new file: were its name not durable, a
        // power loss would bring back the old file without them.
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Err(e) = self.fs.sync_dir(dir) {
            self.failed = true;
            return Err(Error::io(dir, "fsync", e));
        }
        self.len = tail.len() as u64;
        Ok(())
    }

    /// Cuts the file to `len` bytes (durably with `sync`); the next append
    /// reopens it.
    fn cut(&mut self, len: u64, sync: bool) -> Result<()> {
        // Dropped first: a buffering writer flushes what it holds on drop.
        self.file = None;
        self.fs.truncate(&self.path, len, sync).map_err(|e| Error::io(&self.path, "truncate", e))?;
        self.len = len;
        Ok(())
    }
}

/// The whole records of `bytes` and where they end.
fn decode_all(path: &Path, bytes: &[u8], shards: usize) -> Result<(Vec<CoordRecord>, u64)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(head) = bytes.get(pos..pos + 8) {
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        // A written frame is never empty, and an empty payload's CRC is 0:
        // an all-zero header is a tail whose size reached the disk and
        // whose data did not, not a record.
        if len == 0 {
            break;
        }
        let Some(payload) = bytes.get(pos + 8..pos + 8 + len) else { break };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        // A frame whose CRC matches but whose contents do not decode was
        // written wrong, not torn: that is corruption, not a tail to drop.
        let rec = decode(payload, shards)
            .ok_or_else(|| Error::corruption(path, pos as u64, "malformed coordinator record"))?;
        if out.last().is_some_and(|r: &CoordRecord| r.gsn >= rec.gsn) {
            return Err(Error::corruption(path, pos as u64, "coordinator records out of GSN order"));
        }
        out.push(rec);
        pos += 8 + len;
    }
    Ok((out, pos as u64))
}

fn decode(p: &[u8], shards: usize) -> Option<CoordRecord> {
    let u32_at = |at: usize| -> Option<u32> { Some(u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?)) };
    let gsn = u64::from_le_bytes(p.get(0..8)?.try_into().ok()?);
    let n = u32_at(8)? as usize;
    let mut at = 12;
    let mut parts = Vec::new();
    for _ in 0..n {
        let shard = u32_at(at)? as usize;
        let len = u32_at(at + 4)? as usize;
        let rep = p.get(at + 8..at + 8 + len)?;
        if shard >= shards {
            return None;
        }
        parts.push((shard, WriteBatch::from_rep(rep)?));
        at += 8 + len;
    }
    (at == p.len()).then_some(CoordRecord { gsn, parts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FsCrashMode, MemFs, StdFs};
    use rand::SeedableRng;

    fn batch(k: &str) -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put(k, "v").delete("d");
        b
    }

    fn std_fs() -> Arc<dyn Fs> {
        Arc::new(StdFs)
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut log, recs) = CoordLog::open(std_fs(), dir.path(), 4).unwrap();
            assert!(recs.is_empty());
            log.append(5, &[(0, &batch("a")), (3, &batch("b"))], true).unwrap();
            log.append(9, &[(1, &batch("c")), (2, &batch("d"))], false).unwrap();
        }
        let path = dir.path().join(COORD_FILE);
        let full = std::fs::metadata(&path).unwrap().len();
        // Tear the second record.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(full - 3).unwrap();
        let (mut log, recs) = CoordLog::open(std_fs(), dir.path(), 4).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].gsn, 5);
        assert_eq!(recs[0].parts[1].0, 3);
        assert_eq!(recs[0].parts[1].1, batch("b"));
        assert!(log.len() < full - 3);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), log.len());
        // Appends follow the cut.
        log.append(12, &[(0, &batch("e")), (1, &batch("f"))], false).unwrap();
        drop(log);
        let (_, recs) = CoordLog::open(std_fs(), dir.path(), 4).unwrap();
        assert_eq!(recs.iter().map(|r| r.gsn).collect::<Vec<_>>(), vec![5, 12]);
    }

    #[test]
    fn a_zero_filled_tail_is_torn_not_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut log, _) = CoordLog::open(std_fs(), dir.path(), 2).unwrap();
            log.append(4, &[(0, &batch("a")), (1, &batch("b"))], true).unwrap();
        }
        let path = dir.path().join(COORD_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let good = bytes.len() as u64;
        bytes.extend_from_slice(&[0; 40]);
        std::fs::write(&path, &bytes).unwrap();
        let (log, recs) = CoordLog::open(std_fs(), dir.path(), 2).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(log.len(), good);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
    }

    #[test]
    fn dropping_a_prefix_keeps_the_later_records_across_a_power_cut() {
        let mem = MemFs::new();
        let fs: Arc<dyn Fs> = Arc::new(mem.clone());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let cut = |mem: &MemFs, mode| {
            let fs: Arc<dyn Fs> = Arc::new(mem.snapshot().restore(mode, &mut rand::rngs::StdRng::seed_from_u64(1)));
            CoordLog::open(fs, dir, 2).unwrap().1.iter().map(|r| r.gsn).collect::<Vec<_>>()
        };
        let (mut log, _) = CoordLog::open(fs.clone(), dir, 2).unwrap();
        log.append(1, &[(0, &batch("a")), (1, &batch("b"))], true).unwrap();
        log.append(2, &[(0, &batch("c")), (1, &batch("d"))], true).unwrap();
        let upto = log.len();
        log.append(3, &[(0, &batch("e")), (1, &batch("f"))], false).unwrap();
        log.drop_prefix(upto).unwrap();
        // The kept record is synced with the new file, not only written.
        assert_eq!(cut(&mem, FsCrashMode::DropUnsynced), vec![3]);
        log.append(4, &[(0, &batch("g")), (1, &batch("h"))], true).unwrap();
        for mode in [FsCrashMode::DropUnsynced, FsCrashMode::KeepAll] {
            assert_eq!(cut(&mem, mode), vec![3, 4]);
        }
        assert!(!fs.exists(&dir.join(COORD_TMP_FILE)));
        // Dropping everything empties the log.
        let all = log.len();
        log.drop_prefix(all).unwrap();
        assert!(cut(&mem, FsCrashMode::DropUnsynced).is_empty());
    }

    #[test]
    fn a_record_naming_a_missing_shard_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut log, _) = CoordLog::open(std_fs(), dir.path(), 4).unwrap();
            log.append(1, &[(3, &batch("a"))], false).unwrap();
        }
        assert!(matches!(CoordLog::open(std_fs(), dir.path(), 2), Err(e) if e.is_corruption()));
    }

    #[test]
    fn a_power_cut_keeps_synced_records_and_the_truncation() {
        let mem = MemFs::new();
        let fs: Arc<dyn Fs> = Arc::new(mem.clone());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let cut = |mem: &MemFs| {
            let fs: Arc<dyn Fs> =
                Arc::new(mem.snapshot().restore(FsCrashMode::DropUnsynced, &mut rand::rngs::StdRng::seed_from_u64(1)));
            CoordLog::open(fs, dir, 2).unwrap().1.iter().map(|r| r.gsn).collect::<Vec<_>>()
        };
        let (mut log, _) = CoordLog::open(fs.clone(), dir, 2).unwrap();
        log.append(1, &[(0, &batch("a")), (1, &batch("b"))], true).unwrap();
        log.append(2, &[(0, &batch("a")), (1, &batch("b"))], false).unwrap();
        assert_eq!(cut(&mem), vec![1]);
        log.truncate().unwrap();
        assert!(cut(&mem).is_empty());
        log.append(3, &[(0, &batch("a")), (1, &batch("b"))], true).unwrap();
        assert_eq!(cut(&mem), vec![3]);
    }
}
