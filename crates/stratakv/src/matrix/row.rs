//! A row of the matrix: a sorted array of fixed-size elements in PM, each
//! naming one log entry record, plus a cross-row hint into the next-older row.
//!
//! The byte layout is in FORMAT.md, "Matrix rows". The value of a put follows its key in the log record: `value_len varint |
//! value`. A row is written whole, persisted, and only then published by a
//! MANIFEST edit, so a row never changes once readers can see it.

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

use strata_pmem::{Extent, Region};

use crate::coding::{crc, crc2, get_u32, get_u64, mask_crc, put_u32, put_u64, unmask_crc};
use crate::error::{Error, Result};
use crate::key::{key_prefix, Kind, ParsedKey, SeqNo};

/// Bytes of a row header.
pub const HEADER_LEN: u64 = 64;
/// Bytes of one element.
pub const ELEM_LEN: u64 = 40;
/// Bytes of one key hash.
pub const HASH_LEN: u64 = 8;
const MAGIC: u64 = u64::from_le_bytes(*b"STRATROW");

/// One element, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elem {
    /// First 8 bytes of the user key as a big-endian number (zero padded).
    pub prefix: u64,
    /// Sequence << 8 | kind.
    pub trailer: u64,
    /// Region offset of the user key.
    pub key_off: u64,
    /// User key length.
    pub key_len: u32,
    /// Value length (0 for deletes).
    pub value_len: u32,
    /// Index in the older row of the first element >= this one.
    pub hint: u32,
}

impl Elem {
    /// Sequence number.
    pub fn seq(&self) -> SeqNo {
        self.trailer >> 8
    }

    /// Put or delete (None if the byte is not a kind).
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_u8(self.trailer as u8)
    }

    /// Region offset of the value (valid for puts).
    pub fn value_off(&self) -> u64 {
        crate::batch::value_offset(self.key_off, self.key_len, self.value_len)
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.prefix);
        put_u64(out, self.trailer);
        put_u64(out, self.key_off);
        put_u32(out, self.key_len);
        put_u32(out, self.value_len);
        put_u32(out, self.hint);
        put_u32(out, 0);
    }

    fn decode(b: &[u8]) -> Option<Elem> {
        Some(Elem {
            prefix: get_u64(b, 0)?,
            trailer: get_u64(b, 8)?,
            key_off: get_u64(b, 16)?,
            key_len: get_u32(b, 24)?,
            value_len: get_u32(b, 28)?,
            hint: get_u32(b, 32)?,
        })
    }
}

/// What a row header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowHeader {
    /// Row id.
    pub id: u64,
    /// Elements.
    pub count: u64,
    /// Row the hints point into (0 = none).
    pub older_id: u64,
    /// Smallest sequence.
    pub min_seq: SeqNo,
    /// Largest sequence.
    pub max_seq: SeqNo,
    /// Log bytes of the entries.
    pub log_bytes: u64,
}

impl RowHeader {
    /// Encodes a header given the checksum of the body.
    pub(crate) fn encode(&self, body_crc: u32) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_LEN as usize);
        put_u64(&mut b, MAGIC);
        for v in [self.id, self.count, self.older_id, self.min_seq, self.max_seq, self.log_bytes] {
            put_u64(&mut b, v);
        }
        put_u32(&mut b, mask_crc(body_crc));
        let c = mask_crc(crc(&b));
        put_u32(&mut b, c);
        b
    }
}

/// Total bytes of a row with `count` elements.
pub fn row_bytes(count: u64) -> u64 {
    // Saturating: `count` may come from a damaged header, and an overflow
    // must fail the size check in `Row::open`, not panic or wrap.
    HEADER_LEN.saturating_add(count.saturating_mul(ELEM_LEN + HASH_LEN))
}

/// A published row, readable through its extent lease. Holds leases on
/// the log extents its elements point into.
pub struct Row {
    header: RowHeader,
    extent: Extent,
    logs: Vec<Extent>,
    region: Region,
    region_path: Arc<PathBuf>,
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Row").field("header", &self.header).field("logs", &self.logs.len()).finish()
    }
}

impl Row {
    /// Opens the row in `extent`, checking header and checksums.
    pub fn open(extent: Extent, logs: Vec<Extent>, region_path: Arc<PathBuf>) -> Result<Row> {
        let region = extent.region().clone();
        let bad = |at: u64, why: String| Error::corruption(&*region_path, extent.offset() + at, why);
        let h = extent.read(0, HEADER_LEN).map_err(|e| Error::from_pm(&region_path, e))?;
        if get_u64(h, 0) != Some(MAGIC) {
            return Err(bad(0, "matrix row: bad magic".into()));
        }
        if get_u32(h, 60).map(unmask_crc) != h.get(..60).map(crc) {
            return Err(bad(60, "matrix row: header checksum mismatch".into()));
        }
        let field = |i: usize| get_u64(h, 8 * i).unwrap_or(0);
        let header = RowHeader {
            id: field(1),
            count: field(2),
            older_id: field(3),
            min_seq: field(4),
            max_seq: field(5),
            log_bytes: field(6),
        };
        let body_len = row_bytes(header.count).checked_sub(HEADER_LEN).filter(|l| HEADER_LEN + l <= extent.len());
        let Some(body_len) = body_len else {
            return Err(bad(16, format!("matrix row: {} elements do not fit the extent", header.count)));
        };
        let body = extent.read(HEADER_LEN, body_len).map_err(|e| Error::from_pm(&region_path, e))?;
        if get_u32(h, 56).map(unmask_crc) != Some(crc(body)) {
            return Err(bad(HEADER_LEN, "matrix row: element checksum mismatch".into()));
        }
        if header.count > u32::MAX as u64 {
            return Err(bad(16, "matrix row: too many elements".into()));
        }
        Ok(Row { header, extent, logs, region, region_path })
    }

    /// The header.
    pub fn header(&self) -> &RowHeader {
        &self.header
    }

    /// Row id.
    pub fn id(&self) -> u64 {
        self.header.id
    }

    /// Number of elements.
    pub fn len(&self) -> u32 {
        self.header.count as u32
    }

    /// The row's extent.
    pub fn extent(&self) -> &Extent {
        &self.extent
    }

    /// Log extents the row refers to.
    pub fn logs(&self) -> &[Extent] {
        &self.logs
    }

    fn corrupt(&self, at: u64, why: &str) -> Error {
        Error::corruption(&*self.region_path, at, format!("matrix row {}: {why}", self.header.id))
    }

    /// Element `i`.
    pub fn elem(&self, i: u32) -> Result<Elem> {
        let at = HEADER_LEN + i as u64 * ELEM_LEN;
        let b = self.extent.read(at, ELEM_LEN).map_err(|e| Error::from_pm(&self.region_path, e))?;
        Elem::decode(b).ok_or_else(|| self.corrupt(self.extent.offset() + at, "short element"))
    }

    /// Key hash of element `i`.
    pub fn hash(&self, i: u32) -> Result<u64> {
        let at = HEADER_LEN + self.header.count * ELEM_LEN + i as u64 * HASH_LEN;
        let b = self.extent.read(at, HASH_LEN).map_err(|e| Error::from_pm(&self.region_path, e))?;
        get_u64(b, 0).ok_or_else(|| self.corrupt(self.extent.offset() + at, "short hash"))
    }

    /// Every key hash (for building filters).
    pub fn hashes(&self) -> Result<Vec<u64>> {
        let at = HEADER_LEN + self.header.count * ELEM_LEN;
        let b = self.extent.read(at, self.header.count * HASH_LEN).map_err(|e| Error::from_pm(&self.region_path, e))?;
        // Sized up front: `filter_map` hides the length, and growing a
        // vector of a big row's hashes by doubling faulted in fresh pages
        // at every step (a tenth of the flush thread's time).
        let mut out = Vec::with_capacity(self.header.count as usize);
        out.extend(b.chunks_exact(8).filter_map(|c| c.try_into().ok()).map(u64::from_le_bytes));
        Ok(out)
    }

    /// The user key of `e` (read from its log entry).
    pub fn user_key(&self, e: &Elem) -> Result<&[u8]> {
        self.region.read(e.key_off, e.key_len as u64).map_err(|err| Error::from_pm(&self.region_path, err))
    }

    /// The value of `e` (empty for deletes).
    pub fn value(&self, e: &Elem) -> Result<&[u8]> {
        if e.kind() != Some(Kind::Put) {
            return Ok(&[]);
        }
        self.region.read(e.value_off(), e.value_len as u64).map_err(|err| Error::from_pm(&self.region_path, err))
    }

    /// Starts loading the key of element `i` into the cache (for scans).
    pub(crate) fn prefetch_key(&self, i: u32) {
        if i < self.len() {
            if let Ok(e) = self.elem(i) {
                self.region.prefetch(e.key_off);
            }
        }
    }

    /// Bytes `[off, off+len)` of the region (a value located by an element).
    pub(crate) fn region_read(&self, off: u64, len: u32) -> Result<&[u8]> {
        self.region.read(off, len as u64).map_err(|err| Error::from_pm(&self.region_path, err))
    }

    /// Compares element `e` with a probe internal key (whose user-key prefix is `probe_prefix`).
    pub fn compare(&self, e: &Elem, probe: &[u8], probe_prefix: u64) -> Result<Ordering> {
        let p = ParsedKey::parse(probe).ok_or_else(|| self.corrupt(0, "malformed probe"))?;
        let by_user = match e.prefix.cmp(&probe_prefix) {
            Ordering::Equal => self.user_key(e)?.cmp(p.user_key),
            o => o,
        };
        Ok(match by_user {
            // Newer (larger trailer) first.
            Ordering::Equal => (p.seq << 8 | p.kind as u64).cmp(&e.trailer),
            o => o,
        })
    }

    /// The first element in `[lo, hi)` with user key `ukey` and sequence
    /// <= `seq`, found by scanning the stored key hashes: they are
    /// contiguous, so a short window costs a cache line or two, where a
    /// binary search would read an element and a logged key per step.
    /// `None` if no such element lies in the window.
    pub fn find_in_window(&self, ukey: &[u8], hash: u64, seq: SeqNo, lo: u32, hi: u32) -> Result<Option<Elem>> {
        let hi = hi.min(self.len());
        if lo >= hi {
            return Ok(None);
        }
        let at = HEADER_LEN + self.header.count * ELEM_LEN + lo as u64 * HASH_LEN;
        let hashes =
            self.extent.read(at, (hi - lo) as u64 * HASH_LEN).map_err(|e| Error::from_pm(&self.region_path, e))?;
        for (j, h) in hashes.chunks_exact(HASH_LEN as usize).enumerate() {
            if h != hash.to_le_bytes() {
                continue;
            }
            let e = self.elem(lo + j as u32)?;
            // Versions of a key are newest first: the first visible one wins.
            if e.seq() <= seq && self.user_key(&e)? == ukey {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// The newest version of `ukey` with sequence <= `seq` in the run of
    /// elements with key hash `hash` that begins at `from` (a hash index
    /// candidate). Such a run holds one key's versions, newest first, or,
    /// on a hash collision, neighbouring keys' versions: all are checked.
    pub fn find_in_run(&self, ukey: &[u8], hash: u64, seq: SeqNo, from: u32) -> Result<Option<Elem>> {
        let prefix = key_prefix(ukey);
        let mut i = from;
        while i < self.len() {
            // A fingerprint match of another key fails here on the prefix,
            // without reading the key from the log.
            let e = self.elem(i)?;
            if e.seq() <= seq && e.prefix == prefix && self.user_key(&e)? == ukey {
                return Ok(Some(e));
            }
            i += 1;
            if i >= self.len() || self.hash(i)? != hash {
                break;
            }
        }
        Ok(None)
    }

    /// First index in `[lo, hi)` whose element is >= `probe`; `hi` if none.
    pub fn lower_bound(&self, probe: &[u8], probe_prefix: u64, mut lo: u32, mut hi: u32) -> Result<u32> {
        hi = hi.min(self.len());
        lo = lo.min(hi);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.compare(&self.elem(mid)?, probe, probe_prefix)? == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// First index in `[lo, len)` whose user key is > `user_key`.
    pub fn upper_bound_user(&self, user_key: &[u8], mut lo: u32) -> Result<u32> {
        let prefix = key_prefix(user_key);
        let mut hi = self.len();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let e = self.elem(mid)?;
            let le = match e.prefix.cmp(&prefix) {
                Ordering::Equal => self.user_key(&e)? <= user_key,
                o => o == Ordering::Less,
            };
            if le {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

/// CRC of a row body (elements then hashes), as stored in the header.
pub(crate) fn body_crc(elems: &[u8], hashes: &[u8]) -> u32 {
    crc2(elems, hashes)
}
