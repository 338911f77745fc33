//! The command log of `--storage memory --appendfsync always|everysec|no`:
//! every write's effect is appended before it is applied, and replayed at
//! start-up. Format (all integers little-endian; see FORMAT.md):
//!
//! ```text
//! record  = len u32 | crc32c(payload) u32 | payload
//!         | 0xFFFFFFFF u32 | crc32c(payload) u32 | len u64 | payload
//!                                  (a payload of 4 GiB - 1 bytes or more)
//! payload = kind u8 (1 = batch, 2 = clear, then the ops) | count u32 | op*
//! op      = tag u8 (1 = put, 0 = delete) | klen u32 | key | (put: vlen u32 | value)
//! ```
//!
//! A record that is cut short or fails its checksum at the end of the file
//! is a torn tail: replay stops there and truncates the file. One that
//! fails in the middle, with records after it, is corruption: the server
//! refuses to start rather than silently drop everything after it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::group::GroupSync;
use super::{Op, StoreError, StoreResult};

/// When the command log is fsynced (Redis's `appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Before the reply, grouped across concurrent writers.
    Always,
    /// By a background thread once a second.
    EverySec,
    /// Never by us: the OS writes the page cache back when it likes.
    No,
}

impl FsyncPolicy {
    /// Parses `always`, `everysec` or `no`.
    pub fn parse(s: &str) -> Option<FsyncPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::EverySec),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }

    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySec => "everysec",
            FsyncPolicy::No => "no",
        }
    }
}

/// A decoded log record.
#[derive(Debug, PartialEq)]
pub enum Record {
    /// Updates applied together.
    Batch(Vec<Op>),
    /// Every key removed, then these updates applied, as one step (FLUSHALL
    /// in MULTI, and the keyspace version that survives every flush).
    Clear(Vec<Op>),
}

const KIND_BATCH: u8 = 1;
const KIND_CLEAR: u8 = 2;

/// The 32-bit length that says a 64-bit one follows the checksum.
const LONG_LEN: u32 = u32::MAX;

/// Encodes one record, header included. Fails (nothing written) only for
/// counts or lengths no u32 field can hold: more than 4 billion ops in one
/// record, or a key or value of 4 GiB (the server's limits are far lower).
pub fn encode(rec: &Record) -> StoreResult<Vec<u8>> {
    encode_with(rec, u64::from(LONG_LEN))
}

fn u32_field(n: usize, what: &str) -> StoreResult<[u8; 4]> {
    u32::try_from(n)
        .map(u32::to_le_bytes)
        .map_err(|_| StoreError(format!("command log record refused: {what} of {n} does not fit its 32-bit field")))
}

/// [`encode`], with payloads of `long_from` bytes or more given the 64-bit
/// length (a parameter so tests need not build 4 GiB records).
fn encode_with(rec: &Record, long_from: u64) -> StoreResult<Vec<u8>> {
    let mut p = Vec::new();
    let (kind, ops) = match rec {
        Record::Clear(ops) => (KIND_CLEAR, ops),
        Record::Batch(ops) => (KIND_BATCH, ops),
    };
    p.push(kind);
    p.extend_from_slice(&u32_field(ops.len(), "op count")?);
    for (k, v) in ops {
        p.push(u8::from(v.is_some()));
        p.extend_from_slice(&u32_field(k.len(), "key length")?);
        p.extend_from_slice(k);
        if let Some(v) = v {
            p.extend_from_slice(&u32_field(v.len(), "value length")?);
            p.extend_from_slice(v);
        }
    }
    let mut out = Vec::with_capacity(p.len() + 16);
    let len = p.len() as u64;
    let crc = crc32c::crc32c(&p).to_le_bytes();
    if len >= long_from.min(u64::from(LONG_LEN)) {
        out.extend_from_slice(&LONG_LEN.to_le_bytes());
        out.extend_from_slice(&crc);
        out.extend_from_slice(&len.to_le_bytes());
    } else {
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&crc);
    }
    out.extend_from_slice(&p);
    Ok(out)
}

/// Reads a record header: (payload length, crc, header bytes).
fn take_header(b: &mut &[u8]) -> Option<(u64, u32, usize)> {
    let len = take_u32(b)?;
    let crc = take_u32(b)?;
    if len != LONG_LEN {
        return Some((u64::from(len), crc, 8));
    }
    let s = take(b, 8)?;
    Some((u64::from_le_bytes(s.try_into().ok()?), crc, 16))
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if b.len() < n {
        return None;
    }
    let (head, tail) = b.split_at(n);
    *b = tail;
    Some(head)
}

fn take_u32(b: &mut &[u8]) -> Option<u32> {
    let s = take(b, 4)?;
    Some(u32::from_le_bytes([s.first().copied()?, s.get(1).copied()?, s.get(2).copied()?, s.get(3).copied()?]))
}

fn decode_payload(mut p: &[u8]) -> Option<Record> {
    let kind = *take(&mut p, 1)?.first()?;
    let count = take_u32(&mut p)?;
    if kind != KIND_CLEAR && kind != KIND_BATCH {
        return None;
    }
    let mut ops = Vec::with_capacity((count as usize).min(4096));
    for _ in 0..count {
        let tag = *take(&mut p, 1)?.first()?;
        let klen = take_u32(&mut p)? as usize;
        let k = take(&mut p, klen)?.to_vec();
        let v = match tag {
            1 => {
                let vlen = take_u32(&mut p)? as usize;
                Some(take(&mut p, vlen)?.to_vec())
            }
            0 => None,
            _ => return None,
        };
        ops.push((k, v));
    }
    if !p.is_empty() {
        return None;
    }
    // Logs written before clears carried ops hold `Clear` with count 0.
    Some(if kind == KIND_CLEAR { Record::Clear(ops) } else { Record::Batch(ops) })
}

/// Whether the bytes from `at` on are a torn tail: the record there runs
/// past the end of the file (a write cut short), so nothing valid can
/// follow it. Anything else that fails is corruption in the middle.
fn torn_tail(data: &[u8], at: usize) -> bool {
    let mut rest = data.get(at..).unwrap_or_default();
    match take_header(&mut rest) {
        None => true,
        Some((len, _, _)) => (rest.len() as u64) < len,
    }
}

/// Writes a new log holding `pairs` at `path` (through a temporary file,
/// fsynced and renamed), so a crash leaves either no log or the whole one.
pub fn write_new<'a>(path: &Path, pairs: impl Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>) -> StoreResult<()> {
    let tmp = path.with_extension("rewrite.tmp");
    write_pairs(&tmp, pairs)?;
    std::fs::rename(&tmp, path)?;
    sync_parent(path)
}

/// Writes `pairs` as batch records into a new file at `path`, fsynced.
fn write_pairs<'a>(path: &Path, pairs: impl Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>) -> StoreResult<()> {
    let mut w = std::io::BufWriter::new(File::create(path)?);
    let mut chunk: Vec<Op> = Vec::new();
    let mut chunk_bytes = 0usize;
    for (k, v) in pairs {
        chunk_bytes += k.len() + v.len();
        chunk.push((k.clone(), Some(v.clone())));
        if chunk_bytes > (4 << 20) {
            w.write_all(&encode(&Record::Batch(std::mem::take(&mut chunk)))?)?;
            chunk_bytes = 0;
        }
    }
    if !chunk.is_empty() {
        w.write_all(&encode(&Record::Batch(chunk))?)?;
    }
    let f = w.into_inner().map_err(|e| StoreError(format!("I/O error: {e}")))?;
    f.sync_all()?;
    Ok(())
}

fn sync_parent(path: &Path) -> StoreResult<()> {
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Decodes records from the front of `data`; returns them and the length
/// of the valid prefix.
pub fn decode_all(data: &[u8]) -> (Vec<Record>, usize) {
    let mut out = Vec::new();
    let mut rest = data;
    let mut valid = 0;
    loop {
        let mut cur = rest;
        let Some((len, crc, header)) = take_header(&mut cur) else { break };
        let Ok(len) = usize::try_from(len) else { break };
        let Some(payload) = take(&mut cur, len) else { break };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        let Some(rec) = decode_payload(payload) else { break };
        out.push(rec);
        valid += header + len;
        rest = cur;
    }
    (out, valid)
}

/// An open command log.
pub struct Aof {
    path: PathBuf,
    policy: FsyncPolicy,
    /// The file; held while appending.
    file: Mutex<Arc<File>>,
    group: GroupSync,
    /// An fsync failed: what reached the disk is unknown (fsyncgate), so
    /// appends are refused until restart.
    failed: AtomicBool,
    /// File size after the last rewrite (or at open).
    base_size: Mutex<u64>,
    /// fsyncs made (INFO `aof_fsyncs`).
    fsyncs: AtomicU64,
}

impl Aof {
    /// Reads the log at `path` (if any), truncates a torn tail, and opens
    /// it for appending. Returns the log and its records.
    pub fn open(path: &Path, policy: FsyncPolicy) -> StoreResult<(Aof, Vec<Record>)> {
        let mut data = Vec::new();
        if path.exists() {
            File::open(path)?.read_to_end(&mut data)?;
        }
        // A rewrite that a crash interrupted: its log was never renamed in.
        let _ = std::fs::remove_file(path.with_extension("rewrite.tmp"));
        let (records, valid) = decode_all(&data);
        if valid < data.len() && !torn_tail(&data, valid) {
            return Err(StoreError(format!(
                "command log {} is corrupt at offset {valid} of {} (a damaged record with more after it); \
                 refusing to start rather than drop the rest. Move the file aside, or truncate it to \
                 {valid} bytes to keep only the records before the damage",
                path.display(),
                data.len()
            )));
        }
        let file = OpenOptions::new().create(true).append(true).read(true).open(path)?;
        if valid < data.len() {
            eprintln!(
                "strata-server: command log {}: dropping a torn last record ({} bytes at offset {valid})",
                path.display(),
                data.len() - valid
            );
            file.set_len(valid as u64)?;
            file.sync_all()?;
        }
        let aof = Aof {
            path: path.to_path_buf(),
            policy,
            file: Mutex::new(Arc::new(file)),
            group: GroupSync::default(),
            failed: AtomicBool::new(false),
            base_size: Mutex::new(valid as u64),
            fsyncs: AtomicU64::new(0),
        };
        Ok((aof, records))
    }

    /// The fsync policy.
    pub fn policy(&self) -> FsyncPolicy {
        self.policy
    }

    /// Appends `rec` to the file (page cache). Returns its ticket for
    /// [`Aof::wait_durable`]. Call while holding the locks that order this
    /// write against conflicting ones.
    pub fn append(&self, rec: &Record) -> StoreResult<u64> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError(
                "refusing writes after a failed fsync of the command log (restart the server)".into(),
            ));
        }
        let bytes = encode(rec)?;
        let f = self.file.lock();
        if let Err(e) = (&**f).write_all(&bytes) {
            // A partial record may be in the file: later records would be cut off at replay.
            self.failed.store(true, Ordering::Release);
            return Err(e.into());
        }
        Ok(self.group.applied())
    }

    fn sync_file(&self) -> StoreResult<()> {
        // After a failed fsync the kernel may have dropped the dirty pages
        // and a retry would succeed without them (fsyncgate): never retry,
        // so nothing later is reported durable (or shown to readers).
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError("an earlier fsync of the command log failed (restart the server)".into()));
        }
        let file = self.file.lock().clone();
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        file.sync_data().map_err(|e| {
            self.failed.store(true, Ordering::Release);
            StoreError::from(e)
        })
    }

    /// With `always`, waits until record `ticket` is fsynced, one fsync
    /// serving every writer that is waiting (group commit).
    pub fn wait_durable(&self, ticket: u64) -> StoreResult<()> {
        if self.policy != FsyncPolicy::Always {
            return Ok(());
        }
        self.group.wait(ticket, || self.sync_file())
    }

    /// The ticket of the last record appended.
    pub fn last_ticket(&self) -> u64 {
        self.group.last_applied()
    }

    /// Whether records were appended since the last fsync.
    pub fn has_unsynced(&self) -> bool {
        self.group.last_applied() > self.group.last_synced()
    }

    /// fsyncs made since open.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// fsyncs everything appended so far (everysec thread, shutdown).
    pub fn sync_now(&self) -> StoreResult<()> {
        let target = self.group.last_applied();
        self.sync_file()?;
        self.group.mark_synced(target);
        Ok(())
    }

    /// Current file size in bytes.
    pub fn size(&self) -> u64 {
        self.file.lock().metadata().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether the log has grown enough to be rewritten (twice its size
    /// after the last rewrite, and at least 64 MiB).
    pub fn wants_rewrite(&self) -> bool {
        let size = self.size();
        size >= 64 << 20 && size >= 2 * *self.base_size.lock()
    }

    /// Replaces the log by one batch holding `pairs` (the whole dataset).
    /// The caller must keep writers out while this runs.
    pub fn rewrite<'a>(&self, pairs: impl Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>) -> StoreResult<()> {
        let tmp = self.path.with_extension("rewrite.tmp");
        write_pairs(&tmp, pairs)?;
        let mut f = self.file.lock();
        let target = self.group.last_applied();
        std::fs::rename(&tmp, &self.path)?;
        sync_parent(&self.path)?;
        let file = OpenOptions::new().append(true).read(true).open(&self.path)?;
        let size = file.metadata()?.len();
        *f = Arc::new(file);
        self.group.mark_synced(target);
        *self.base_size.lock() = size;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_tail() {
        let a = Record::Batch(vec![(b"k".to_vec(), Some(b"v".to_vec())), (b"d".to_vec(), None)]);
        let mut data = encode(&a).unwrap();
        data.extend(encode(&Record::Clear(Vec::new())).unwrap());
        let full = data.len();
        data.extend(&encode(&a).unwrap()[..5]);
        let (recs, valid) = decode_all(&data);
        assert_eq!(recs, vec![a, Record::Clear(Vec::new())]);
        assert_eq!(valid, full);
    }

    #[test]
    fn clear_records_carry_their_ops() {
        let c = Record::Clear(vec![(b"!version".to_vec(), Some(b"1".to_vec())), (b"k".to_vec(), None)]);
        let (recs, valid) = decode_all(&encode(&c).unwrap());
        assert_eq!(valid, encode(&c).unwrap().len());
        assert_eq!(recs, vec![c]);
    }

    /// A damaged record with more records after it is corruption: open
    /// refuses and leaves the file as it was. A damaged last record is a
    /// torn tail: it is cut off.
    #[test]
    fn corruption_in_the_middle_refuses_to_open_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let rec = |i: u8| encode(&Record::Batch(vec![(vec![i], Some(vec![i; 10]))])).unwrap();
        let mut data: Vec<u8> = (0..5).flat_map(rec).collect();
        let one = rec(0).len();
        data[one + 12] ^= 0xff; // a byte inside the second record's payload
        std::fs::write(&path, &data).unwrap();
        let err = Aof::open(&path, FsyncPolicy::Always).err().expect("a corrupt middle must not open");
        assert!(err.to_string().contains(&format!("offset {one}")), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), data, "the file must be left alone");

        let mut data: Vec<u8> = (0..5).flat_map(rec).collect();
        let full = data.len();
        data.extend_from_slice(&rec(9)[..7]);
        std::fs::write(&path, &data).unwrap();
        let (_, recs) = Aof::open(&path, FsyncPolicy::Always).unwrap();
        assert_eq!(recs.len(), 5);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), full as u64);
    }

    /// A payload too long for the 32-bit length gets the 64-bit one (the
    /// threshold lowered so the test needs no 4 GiB record): it reads back
    /// next to short records, and cut anywhere it is a torn tail, not a
    /// wrapped length that would misread what follows.
    #[test]
    fn long_records_get_a_64_bit_length() {
        let big = Record::Batch(vec![(b"big".to_vec(), Some(vec![7u8; 300]))]);
        let small = Record::Batch(vec![(b"s".to_vec(), None)]);
        let long = encode_with(&big, 100).unwrap();
        assert_eq!(long[..4], LONG_LEN.to_le_bytes());
        let mut data = encode(&small).unwrap();
        data.extend_from_slice(&long);
        data.extend_from_slice(&encode(&small).unwrap());
        let (recs, valid) = decode_all(&data);
        assert_eq!(valid, data.len());
        assert_eq!(recs, vec![Record::Batch(vec![(b"s".to_vec(), None)]), big, small]);
        let start = encode(&Record::Batch(vec![(b"s".to_vec(), None)])).unwrap().len();
        for cut in start + 1..start + long.len() {
            let (recs, valid) = decode_all(&data[..cut]);
            assert_eq!((recs.len(), valid), (1, start));
            assert!(torn_tail(&data[..cut], valid), "cut at {cut}");
        }
    }

    #[test]
    fn checksum_mismatch_stops_replay() {
        let mut data = encode(&Record::Clear(Vec::new())).unwrap();
        let last = data.len() - 1;
        data[last] ^= 1;
        assert_eq!(decode_all(&data).1, 0);
    }

    #[test]
    fn group_commit_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let (aof, recs) = Aof::open(&path, FsyncPolicy::Always).unwrap();
        assert!(recs.is_empty());
        let aof = Arc::new(aof);
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let aof = aof.clone();
                std::thread::spawn(move || {
                    for j in 0..20u32 {
                        let t =
                            aof.append(&Record::Batch(vec![(format!("{i}-{j}").into_bytes(), Some(vec![1]))])).unwrap();
                        aof.wait_durable(t).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(aof);
        let (_, recs) = Aof::open(&path, FsyncPolicy::No).unwrap();
        assert_eq!(recs.len(), 80);
    }
}
