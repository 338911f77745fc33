//! Scanning a log extent after a restart.

use std::path::Path;

use strata_pmem::Extent;

use super::HEADER_LEN;
use crate::batch::{Record, Records};
use crate::coding::{crc2, get_u32, get_u64, unmask_crc};
use crate::error::{Error, Result};

/// One accepted entry.
#[derive(Debug)]
pub struct RecoveredEntry<'a> {
    /// First sequence number.
    pub seq: u64,
    /// Bytes the entry occupies, padding included.
    pub len: u64,
    /// Its records, with value offsets in region coordinates.
    pub records: Vec<Record<'a>>,
}

/// Why a scan stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanEnd {
    /// A zero commit word or the end of the extent: nothing more was written.
    Clean,
    /// An entry failed its checks (torn write, stale bytes, or a gap in the
    /// sequence): the log ends here, at region offset `offset`.
    Torn {
        /// Region offset of the entry that failed.
        offset: u64,
        /// Whether a valid entry that continues the sequence appears later in
        /// the extent: after a process crash that cannot happen, so it
        /// points at corruption (or a power loss on an unsynced file region).
        valid_after: bool,
    },
}

/// Looks past a failed entry for a later valid one that continues the sequence.
fn torn(extent: &Extent, number: u64, pos: u64, next_seq: Option<u64>) -> ScanEnd {
    let base = extent.offset();
    let region = extent.region();
    let mut p = pos + 8;
    while p + HEADER_LEN as u64 <= extent.len() {
        if let Ok(word) = region.load_u64(base + p) {
            let total = word & 0xffff_ffff;
            if word != 0 && total >= HEADER_LEN as u64 && p + total <= extent.len() {
                if let Ok(bytes) = extent.read(p + 8, total - 8) {
                    let (hdr, body) = bytes.split_at(HEADER_LEN - 8);
                    let ok = crc2(hdr, body) == unmask_crc((word >> 32) as u32)
                        && get_u64(hdr, 0) == Some(number)
                        && get_u64(hdr, 8).zip(next_seq).map(|(s, n)| s > n).unwrap_or(true);
                    if ok {
                        return ScanEnd::Torn { offset: base + pos, valid_after: true };
                    }
                }
            }
        }
        p += 8;
    }
    ScanEnd::Torn { offset: base + pos, valid_after: false }
}

/// Scans `extent` (log number `number`), calling `f` for each accepted
/// entry. `next_seq` is the sequence the next entry must start with (None:
/// accept whatever the first entry has); it is advanced past each entry.
///
/// An entry that passes its checksum but whose records do not decode is
/// corruption (such bytes were written whole by a broken writer), reported
/// as an error naming the region file and offset.
pub fn scan_extent<'a>(
    extent: &'a Extent,
    number: u64,
    next_seq: &mut Option<u64>,
    region_path: &Path,
    mut f: impl FnMut(RecoveredEntry<'a>) -> Result<()>,
) -> Result<ScanEnd> {
    let base = extent.offset();
    let mut pos = 0u64;
    let region = extent.region();
    loop {
        if pos + HEADER_LEN as u64 > extent.len() {
            return Ok(ScanEnd::Clean);
        }
        let word = region.load_u64(base + pos).map_err(|e| Error::from_pm(region_path, e))?;
        if word == 0 {
            return Ok(ScanEnd::Clean);
        }
        let total = word & 0xffff_ffff;
        let stored_crc = unmask_crc((word >> 32) as u32);
        if total < HEADER_LEN as u64 || pos + total > extent.len() {
            return Ok(torn(extent, number, pos, *next_seq));
        }
        let bytes = extent.read(pos + 8, total - 8).map_err(|e| Error::from_pm(region_path, e))?;
        let (hdr, body) = bytes.split_at(HEADER_LEN - 8);
        if crc2(hdr, body) != stored_crc {
            return Ok(torn(extent, number, pos, *next_seq));
        }
        let (Some(log_no), Some(seq), Some(count)) = (get_u64(hdr, 0), get_u64(hdr, 8), get_u32(hdr, 16)) else {
            return Ok(torn(extent, number, pos, *next_seq));
        };
        // Stale bytes from an earlier use of the slots, or entries written
        // after a gap (never acknowledged): the log ends, and that is normal.
        let end = ScanEnd::Torn { offset: base + pos, valid_after: false };
        if log_no != number || next_seq.map(|want| seq != want).unwrap_or(false) {
            return Ok(end);
        }
        let entry_off = base + pos;
        let body_off = entry_off + HEADER_LEN as u64;
        let records: Vec<Record<'a>> = Records::new(body, body_off)
            .collect::<std::result::Result<_, u64>>()
            .map_err(|at| Error::corruption(region_path, at, "log entry passes its checksum but does not decode"))?;
        if records.len() != count as usize || count == 0 {
            return Err(Error::corruption(
                region_path,
                entry_off,
                format!("log entry says {count} records but holds {}", records.len()),
            ));
        }
        let padded = (total + 7) & !7;
        *next_seq = Some(seq + count as u64);
        f(RecoveredEntry { seq, len: padded, records })?;
        pos += padded;
    }
}
