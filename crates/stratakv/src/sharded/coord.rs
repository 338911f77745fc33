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
//! Recovery stops at the first frame that is short or fails its CRC (a torn
//! tail: its batch was never handed to a shard) and cuts the file there.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};

/// The coordinator log's file name in the sharded database's directory.
pub const COORD_FILE: &str = "COORD";

/// One recovered cross-shard batch.
pub(crate) struct CoordRecord {
    pub gsn: u64,
    /// (shard, that shard's part).
    pub parts: Vec<(usize, WriteBatch)>,
}

/// The open coordinator log.
pub(crate) struct CoordLog {
    path: PathBuf,
    file: File,
    /// Bytes of whole records.
    len: u64,
    buf: Vec<u8>,
}

impl CoordLog {
    /// Opens (creating) the log in `dir` and reads its whole records.
    pub(crate) fn open(dir: &Path, shards: usize) -> Result<(CoordLog, Vec<CoordRecord>)> {
        let path = dir.join(COORD_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, "open", e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| Error::io(&path, "read", e))?;
        let (records, good) = decode_all(&path, &bytes, shards)?;
        let mut log = CoordLog { path, file, len: good, buf: Vec::new() };
        if good < bytes.len() as u64 {
            // A torn tail: cut it, so later appends follow whole records.
            log.cut(good)?;
        }
        Ok((log, records))
    }

    /// Appends one record; durable (fdatasync) when `sync`. On failure the
    /// file is cut back, so no partial record precedes later ones.
    pub(crate) fn append(&mut self, gsn: u64, parts: &[(usize, &WriteBatch)], sync: bool) -> Result<()> {
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
        let r = self.file.write_all(&self.buf).map_err(|e| Error::io(&self.path, "write", e)).and_then(|()| {
            if sync {
                self.file.sync_data().map_err(|e| Error::io(&self.path, "fdatasync", e))
            } else {
                Ok(())
            }
        });
        match r {
            Ok(()) => {
                self.len += self.buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                let len = self.len;
                self.cut(len)?;
                Err(e)
            }
        }
    }

    /// Bytes of records.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Empties the log once every shard has its parts durable.
    pub(crate) fn truncate(&mut self) -> Result<()> {
        self.cut(0)?;
        self.file.sync_all().map_err(|e| Error::io(&self.path, "fsync", e))
    }

    fn cut(&mut self, len: u64) -> Result<()> {
        use std::io::Seek;
        self.file.set_len(len).map_err(|e| Error::io(&self.path, "truncate", e))?;
        self.file.seek(std::io::SeekFrom::Start(len)).map_err(|e| Error::io(&self.path, "seek", e))?;
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

    fn batch(k: &str) -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put(k, "v").delete("d");
        b
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut log, recs) = CoordLog::open(dir.path(), 4).unwrap();
            assert!(recs.is_empty());
            log.append(5, &[(0, &batch("a")), (3, &batch("b"))], true).unwrap();
            log.append(9, &[(1, &batch("c")), (2, &batch("d"))], false).unwrap();
        }
        let path = dir.path().join(COORD_FILE);
        let full = std::fs::metadata(&path).unwrap().len();
        // Tear the second record.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(full - 3).unwrap();
        let (log, recs) = CoordLog::open(dir.path(), 4).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].gsn, 5);
        assert_eq!(recs[0].parts[1].0, 3);
        assert_eq!(recs[0].parts[1].1, batch("b"));
        assert!(log.len() < full - 3);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), log.len());
    }

    #[test]
    fn a_record_naming_a_missing_shard_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut log, _) = CoordLog::open(dir.path(), 4).unwrap();
            log.append(1, &[(3, &batch("a"))], false).unwrap();
        }
        assert!(matches!(CoordLog::open(dir.path(), 2), Err(e) if e.is_corruption()));
    }
}
