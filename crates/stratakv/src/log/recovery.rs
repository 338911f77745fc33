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
    /// Region offset of the entry.
    pub offset: u64,
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
    /// sequence): the log ends here.
    Torn,
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
        let total = (word & 0xffff_ffff) as u64;
        let stored_crc = unmask_crc((word >> 32) as u32);
        if total < HEADER_LEN as u64 || pos + total > extent.len() {
            return Ok(ScanEnd::Torn);
        }
        let bytes = extent.read(pos + 8, total - 8).map_err(|e| Error::from_pm(region_path, e))?;
        let (hdr, body) = bytes.split_at(HEADER_LEN - 8);
        if crc2(hdr, body) != stored_crc {
            return Ok(ScanEnd::Torn);
        }
        let (Some(log_no), Some(seq), Some(count)) = (get_u64(hdr, 0), get_u64(hdr, 8), get_u32(hdr, 16)) else {
            return Ok(ScanEnd::Torn);
        };
        if log_no != number {
            return Ok(ScanEnd::Torn);
        }
        if let Some(want) = *next_seq {
            if seq != want {
                return Ok(ScanEnd::Torn);
            }
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
        f(RecoveredEntry { offset: entry_off, seq, len: padded, records })?;
        pos += padded;
    }
}
