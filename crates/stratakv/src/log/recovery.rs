//! The log at open: which log numbers may have been used, which extents
//! are live, and the memtable rebuilt from the live ones.

use std::path::Path;
use std::sync::Arc;

use strata_pmem::{Extent, ExtentHead, Region};

use super::writer::LOG_HEADS_IN_FLIGHT;
use super::{EXTENT_KIND_LOG, HEADER_LEN};
use crate::batch::{Record, Records};
use crate::coding::{crc2, get_u32, get_u64, unmask_crc};
use crate::error::{Error, Result};
use crate::key::{key_prefix, trailer, Kind, SeqNo};
use crate::memtable::{MemBuffers, Memtable};

/// One accepted entry.
#[derive(Debug)]
pub struct RecoveredEntry<'a> {
    /// First sequence number.
    pub seq: u64,
    /// Bytes the entry occupies, padding included.
    pub len: u64,
    /// Its records, with value offsets in region coordinates.
    pub records: Vec<Record<'a>>,
    /// Region offsets of the records' PM skiplist nodes (pm-only entries;
    /// empty for others).
    pub nodes: Vec<u64>,
}

/// The header (bytes 8..32) and the records of the entry at `pos` of
/// `extent` whose commit word says it is `total` bytes, skipping the
/// nodes between them (their links change after the entry is published,
/// so they are never read as bytes). None if the sizes do not fit.
fn entry_parts(extent: &Extent, pos: u64, total: u64) -> Option<(&[u8], &[u8], u64)> {
    let hdr = extent.read(pos + 8, HEADER_LEN as u64 - 8).ok()?;
    let links = get_u32(hdr, 20)? as u64;
    let body_at = HEADER_LEN as u64 + links;
    let body = extent.read(pos + body_at, total.checked_sub(body_at)?).ok()?;
    Some((hdr, body, links))
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
                if let Some((hdr, body, _)) = entry_parts(extent, p, total) {
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
    // Read in order: ask for the whole extent up front (faults alone read
    // one page at a time on a region file).
    region.will_need(base, extent.len());
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
        let Some((hdr, body, links)) = entry_parts(extent, pos, total) else {
            return Ok(torn(extent, number, pos, *next_seq));
        };
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
        let body_off = entry_off + HEADER_LEN as u64 + links;
        let records: Vec<Record<'a>> = Records::new(body, body_off)
            .collect::<std::result::Result<_, u64>>()
            .map_err(|at| Error::corruption(region_path, at, "log entry passes its checksum but does not decode"))?;
        // An entry of no records takes one sequence number and holds
        // nothing else: a range tombstone's, whose tombstone is in the
        // MANIFEST (`DbInner::delete_range`).
        let placeholder = count == 0 && body.is_empty() && links == 0;
        if records.len() != count as usize || (count == 0 && !placeholder) {
            return Err(Error::corruption(
                region_path,
                entry_off,
                format!("log entry says {count} records but holds {}", records.len()),
            ));
        }
        let nodes =
            if links == 0 { Vec::new() } else { entry_nodes(region, region_path, entry_off, links, seq, &records)? };
        let padded = (total + 7) & !7;
        *next_seq = Some(seq + (count as u64).max(1));
        f(RecoveredEntry { seq, len: padded, records, nodes })?;
        pos += padded;
    }
}

/// The nodes of a pm-only entry at `entry_off` (its `links` bytes of nodes
/// start after the header), checked against its records: the nodes' fixed
/// words are written with the entry but are not under its checksum.
fn entry_nodes(
    region: &Region,
    region_path: &Path,
    entry_off: u64,
    links: u64,
    seq: u64,
    records: &[Record<'_>],
) -> Result<Vec<u64>> {
    let end = entry_off + HEADER_LEN as u64 + links;
    let mut at = entry_off + HEADER_LEN as u64;
    let mut nodes = Vec::with_capacity(records.len());
    for (i, rec) in records.iter().enumerate() {
        let bad = |why: String| Error::corruption(region_path, at, why);
        let node = super::node::Node::read(region, at).map_err(|e| Error::from_pm(region_path, e))?;
        let fits = at + node.size() <= end;
        if !fits
            || node.key_off != rec.key_off
            || node.key_len != rec.key.len()
            || node.trailer != trailer(seq + i as u64, rec.kind)
        {
            return Err(bad(format!("skiplist node {i} of the log entry at {entry_off} does not match its record")));
        }
        nodes.push(at);
        at += node.size();
    }
    if at != end {
        return Err(Error::corruption(region_path, entry_off, "log entry's skiplist nodes do not fill their space"));
    }
    Ok(nodes)
}

/// The number the next log extent gets: past every log number that may
/// have been handed out before.
///
/// Recovery may erase log heads (extents with no entry that continues the
/// log); their numbers must never be handed out again, or their stale
/// entries would look like a valid continuation of a later log. The last
/// process may also have allocated up to [`LOG_HEADS_IN_FLIGHT`] more log
/// extents whose heads never became durable (a head's msync comes after
/// the writer starts filling its extent): numbers right after the newest
/// durable head (`heads`), or after the MANIFEST's log number (if the
/// extents before it were flushed), or after the number it started at
/// (the MANIFEST's `next_log_number`). Those numbers are skipped too.
pub(crate) fn next_log_number(heads: &[ExtentHead], manifest_log_number: u64, manifest_next: u64) -> u64 {
    let newest = heads.iter().filter(|h| h.kind == EXTENT_KIND_LOG).map(|h| h.number).max().unwrap_or(0);
    let in_flight = LOG_HEADS_IN_FLIGHT as u64;
    (newest + 1 + in_flight).max(manifest_log_number + in_flight).max(manifest_next + in_flight)
}

/// The log extents of a region at open, by number: those at or after the
/// MANIFEST's log number hold writes not yet in level 0 (`live`); older
/// ones hold nothing a table needs, but level 0 may still point into them
/// (matrix rows do) and claims them before the rest are retired.
pub(crate) fn split_logs(heads: &[ExtentHead], log_number: u64) -> (Vec<ExtentHead>, Vec<ExtentHead>) {
    let mut logs: Vec<ExtentHead> = heads.iter().filter(|h| h.kind == EXTENT_KIND_LOG).copied().collect();
    logs.sort_by_key(|h| h.number);
    logs.into_iter().partition(|h| h.number >= log_number)
}

/// What replaying the live log extents gave.
pub(crate) struct Replayed {
    /// A memtable holding every accepted record.
    pub mem: Arc<Memtable>,
    /// The highest sequence number in the log, or the MANIFEST's.
    pub last_seq: SeqNo,
    /// Damage recovery stepped over: (region offset, what).
    pub anomalies: Vec<(u64, String)>,
}

/// A record found in the log during recovery, located in PM.
struct Found {
    prefix: u64,
    key_off: u64,
    key_len: u32,
    trailer: u64,
    value_off: u64,
    value_len: u32,
    /// Distance back from the value to the record's skiplist node (0: none).
    node_back: u32,
}

/// Rebuilds the memtable from the `live` log extents, in log order, into
/// `buffers` (memtable id 1, first log `first_log`); the MANIFEST says every
/// write up to `last_sequence` is elsewhere. An extent whose entries do not
/// continue the log is retired.
pub(crate) fn replay(
    region: &Region,
    region_path: &Path,
    live: Vec<ExtentHead>,
    last_sequence: SeqNo,
    first_log: u64,
    buffers: MemBuffers,
) -> Result<Replayed> {
    let pm = |e| Error::from_pm(region_path, e);
    let mem = Arc::new(Memtable::with_buffers(1, region.clone(), region_path.to_path_buf(), first_log, buffers));
    let mut next_seq = Some(last_sequence + 1);
    let mut anomalies: Vec<(u64, String)> = Vec::new();
    // The records are collected first and inserted in key order: sorted
    // inserts walk a cache-hot path of the skiplist (several times faster
    // for a big log).
    let mut found: Vec<Found> = Vec::new();
    for h in live {
        let ext = region.adopt(h).map_err(pm)?;
        let mut accepted = 0u64;
        let end = scan_extent(&ext, h.number, &mut next_seq, region_path, |entry| {
            for (i, rec) in entry.records.iter().enumerate() {
                let node = entry.nodes.get(i).copied();
                found.push(Found {
                    node_back: node.map_or(0, |n| (rec.value_off - n) as u32),
                    prefix: key_prefix(rec.key),
                    key_off: rec.key_off,
                    key_len: rec.key.len() as u32,
                    trailer: (entry.seq + i as u64) << 8 | rec.kind as u64,
                    value_off: rec.value_off,
                    value_len: rec.value.len() as u32,
                });
            }
            mem.charge(entry.len as usize);
            accepted += 1;
            Ok(())
        })?;
        if let ScanEnd::Torn { offset, valid_after: true } = end {
            anomalies.push((
                offset,
                format!(
                    "log extent {} has a damaged entry followed by valid ones; \
                     recovery kept the log up to it (point-in-time)",
                    h.number
                ),
            ));
        }
        if accepted > 0 {
            // Read back from the page cache after a process crash, neither
            // its entries nor its head may ever have been msynced, and no
            // log sync of this process covers the extent: make both durable
            // now, before a sync write after it (or a row pointing into it)
            // can be acknowledged.
            region.sync(ext.offset(), ext.len()).map_err(pm)?;
            ext.sync_head().map_err(pm)?;
            mem.hold_extent(ext);
        } else {
            // Nothing here continues the log: never written, or written after
            // a gap (never acknowledged, or past a damaged entry). Erase its
            // head so it cannot be taken for part of a later memtable's log.
            drop(ext);
            region.retire(h).map_err(pm)?;
        }
    }
    let key_of = |r: &Found| region.read(r.key_off, r.key_len as u64).unwrap_or(&[]);
    found.sort_unstable_by(|a, b| {
        a.prefix.cmp(&b.prefix).then_with(|| key_of(a).cmp(key_of(b))).then_with(|| b.trailer.cmp(&a.trailer))
    });
    for r in &found {
        let key = region.read(r.key_off, r.key_len as u64).map_err(pm)?;
        let kind = Kind::from_u8(r.trailer as u8)
            .ok_or_else(|| Error::corruption(region_path, r.key_off, "bad record kind"))?;
        mem.add(r.trailer >> 8, kind, key, r.value_off, r.value_len, r.node_back)?;
    }
    drop(found);
    let last_seq = next_seq.map(|s| s - 1).unwrap_or(last_sequence).max(last_sequence);
    mem.note_seq(last_seq);
    Ok(Replayed { mem, last_seq, anomalies })
}
