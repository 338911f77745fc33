//! The index-unified log in PM (ListDB's IUL, SLM-DB's persistent memtable).
//!
//! A write (or write batch) is stored once, as a self-describing entry in a
//! log extent. There is no separate WAL file and no copy at flush: the
//! memtable indexes offsets into these entries.
//!
//! The entry's byte layout is in FORMAT.md, "Log entry". This module
//! writes entries ([`write_entry`]); [`writer`] hands out log space,
//! sequence numbers and extents; [`recovery`] reads the log back at open.
//!
//! # Persist order
//!
//! Bytes 8..len are written and persisted first; then the commit word is
//! published with one 8-byte store and persisted. Recovery accepts an entry
//! only if its commit word is non-zero, its checksum matches, its log
//! number is the extent's (so stale bytes from an earlier use of the slots
//! never count) and its first sequence continues the previous entry's.
//! The first entry that fails any check ends the log: everything after it
//! was never acknowledged (a write is acknowledged only when it and every
//! earlier entry are durable).
//!
//! Log extents are recycled without being erased, so a slot may hold stale
//! bytes, even a stale non-zero commit word, until its writer publishes.
//! The writer therefore clears the commit word while it still holds the
//! reservation lock ([`clear_commit_word`]): a writer killed before it
//! publishes then leaves a zero word, which ends the log cleanly, and the
//! entries other writers reserved after it are never mistaken for valid
//! entries following a damaged one (which would point at corruption).

pub(crate) mod node;
mod pipeline;
mod prefault;
mod recovery;
mod towers;
mod writer;

pub(crate) use pipeline::Pipeline;
pub(crate) use recovery::{next_log_number, replay, split_logs};
#[cfg(test)]
pub(crate) use recovery::{scan_extent, ScanEnd};
pub(crate) use towers::{thread_region, Towers};
#[cfg(test)]
pub(crate) use writer::LOG_HEADS_IN_FLIGHT;
pub(crate) use writer::{cleaning_reserve, ExtentFailure, LogWriter, NewExtent, Reserved, WriteState};

use strata_pmem::{PmError, Slot};

use crate::coding::{crc2, mask_crc};

/// Extent kind of log extents in the PM region's head words.
pub const EXTENT_KIND_LOG: u8 = 1;
/// Bytes of an entry header.
pub const HEADER_LEN: usize = 32;

/// Total bytes an entry with a body of `body_len` occupies (with padding).
pub fn entry_len(body_len: usize) -> u64 {
    ((HEADER_LEN + body_len) as u64 + 7) & !7
}

/// Stores a zero commit word at the start of a freshly reserved `slot`.
/// Call it before the next slot can be handed out (under the reservation
/// lock); no persist is needed, since it matters for process crashes, where
/// every completed store survives.
pub fn clear_commit_word(slot: &mut Slot) -> Result<(), PmError> {
    slot.write(0, &[0u8; 8])
}

/// Writes one entry into `slot` and makes it durable in the required order.
/// With `towers` (pm-only), a PM skiplist node for each record goes between
/// the header and the records, its links zero (FORMAT.md, "Log entry").
pub fn write_entry(
    slot: &mut Slot,
    log_number: u64,
    seq: u64,
    count: u32,
    body: &[u8],
    towers: Option<&Towers>,
) -> Result<(), PmError> {
    let links_len = towers.map_or(0, Towers::bytes);
    let total = HEADER_LEN + links_len + body.len();
    let mut hdr = [0u8; HEADER_LEN - 8];
    hdr[0..8].copy_from_slice(&log_number.to_le_bytes());
    hdr[8..16].copy_from_slice(&seq.to_le_bytes());
    hdr[16..20].copy_from_slice(&count.to_le_bytes());
    hdr[20..24].copy_from_slice(&(links_len as u32).to_le_bytes());
    slot.write(8, &hdr)?;
    if let Some(t) = towers {
        let body_at = slot.offset() + (HEADER_LEN + links_len) as u64;
        slot.write(HEADER_LEN as u64, &t.encode(slot.offset() + HEADER_LEN as u64, body, body_at, seq))?;
    }
    slot.write((HEADER_LEN + links_len) as u64, body)?;
    slot.persist(8, (total - 8) as u64)?;
    let crc = mask_crc(crc2(&hdr, body));
    slot.publish_u64(0, ((crc as u64) << 32) | total as u64)
}

#[cfg(test)]
mod tests;
