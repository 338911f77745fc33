//! Building a row: elements in internal-key order, hints by one merge walk
//! against the next-older row, written whole and persisted before anyone
//! can reach it (it is published later by a MANIFEST edit).

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

use strata_pmem::{Extent, Region};

use super::row::{body_crc, row_bytes, Elem, Row, RowHeader, HEADER_LEN};
use crate::error::{Error, Result};

/// Extent kind of row extents in the PM region's head words.
pub const EXTENT_KIND_ROW: u8 = 2;

/// One element to be, with its key hash.
#[derive(Clone, Copy, Debug)]
pub struct RowEntry {
    /// The element (its hint is filled in by the builder).
    pub elem: Elem,
    /// xxh3-64 of the user key.
    pub hash: u64,
}

fn user_key<'a>(region: &'a Region, path: &std::path::Path, e: &Elem) -> Result<&'a [u8]> {
    region.read(e.key_off, e.key_len as u64).map_err(|err| Error::from_pm(path, err))
}

/// Internal-key order of two elements (user key ascending, newest first).
pub fn compare_elems(region: &Region, path: &std::path::Path, a: &Elem, b: &Elem) -> Result<Ordering> {
    let by_user = match a.prefix.cmp(&b.prefix) {
        Ordering::Equal => user_key(region, path, a)?.cmp(user_key(region, path, b)?),
        o => o,
    };
    Ok(match by_user {
        Ordering::Equal => b.trailer.cmp(&a.trailer),
        o => o,
    })
}

/// What a new row is made of.
pub struct RowSpec<'a> {
    /// Row id (also the extent number).
    pub id: u64,
    /// Elements, sorted by internal key (their hints are filled in).
    pub entries: &'a mut [RowEntry],
    /// The newest existing row, which the hints point into.
    pub older: Option<&'a Row>,
    /// Log bytes the entries occupy.
    pub log_bytes: u64,
    /// Leases on the log extents the entries live in.
    pub logs: Vec<Extent>,
}

/// Writes a row to a fresh extent and persists it. The row is not yet
/// reachable: the caller publishes it in the MANIFEST.
pub fn build_row(region: &Region, path: &Arc<PathBuf>, spec: RowSpec<'_>) -> Result<Row> {
    let n = spec.entries.len() as u64;
    // Hints: the first element of the older row >= each new element.
    if let Some(older) = spec.older {
        let mut j = 0u32;
        let m = older.len();
        let mut cur = if m > 0 { Some(older.elem(0)?) } else { None };
        for e in spec.entries.iter_mut() {
            while let Some(o) = cur {
                if compare_elems(region, path, &o, &e.elem)? == Ordering::Less {
                    j += 1;
                    cur = if j < m { Some(older.elem(j)?) } else { None };
                } else {
                    break;
                }
            }
            e.elem.hint = j;
        }
    }
    let mut elems = Vec::with_capacity((n * super::row::ELEM_LEN) as usize);
    let mut hashes = Vec::with_capacity((n * 8) as usize);
    let (mut min_seq, mut max_seq) = (u64::MAX, 0u64);
    for e in spec.entries.iter() {
        e.elem.encode(&mut elems);
        hashes.extend_from_slice(&e.hash.to_le_bytes());
        min_seq = min_seq.min(e.elem.seq());
        max_seq = max_seq.max(e.elem.seq());
    }
    if n == 0 {
        min_seq = 0;
    }
    let header = RowHeader {
        id: spec.id,
        count: n,
        older_id: spec.older.map(|o| o.id()).unwrap_or(0),
        min_seq,
        max_seq,
        log_bytes: spec.log_bytes,
    };
    let total = row_bytes(n);
    let slots = total.div_ceil(region.slot_bytes()).max(1);
    let mut writer = region.allocate(EXTENT_KIND_ROW, slots, spec.id).map_err(|e| Error::from_pm(path, e))?;
    let mut slot = writer.reserve(total).ok_or_else(|| Error::Pm("row extent too small".into()))?;
    let pm = |e| Error::from_pm(path, e);
    slot.write(HEADER_LEN, &elems).map_err(pm)?;
    slot.write(HEADER_LEN + elems.len() as u64, &hashes).map_err(pm)?;
    slot.write(0, &header.encode(body_crc(&elems, &hashes))).map_err(pm)?;
    slot.persist(0, total).map_err(pm)?;
    // On an ordinary file persist only orders: msync the row before the
    // caller names it in the MANIFEST (a no-op on DAX, tmpfs and the
    // simulator). The row is only read from now on: dropping our writable
    // mappings first spares the msync a TLB shootdown per page.
    region.unmap_written(slot.offset(), total);
    region.sync(slot.offset(), total).map_err(pm)?;
    let extent = writer.extent().clone();
    drop(slot);
    drop(writer);
    Row::open(extent, spec.logs, path.clone())
}
