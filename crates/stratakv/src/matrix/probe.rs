//! How point lookups find a key in a row or a segment of rows: a bloom
//! filter, or a segment's hash index.

use std::sync::Arc;

use super::hash_index::HashIndex;
use super::row::Row;
use crate::error::Result;
use crate::filter::BlockedBloom;

/// Bloom bits per key for row and segment filters.
pub(super) const FILTER_BITS: u32 = 10;

/// How point lookups find a key in one row.
#[derive(Clone, Debug)]
pub enum RowProbe {
    /// Through the hash index of the row's segment (if the segment has
    /// none, by a search inside the fence window).
    Segment,
    /// A bloom filter; the row is then searched inside the fence and hint window.
    Bloom(Arc<BlockedBloom>),
}

impl RowProbe {
    /// DRAM bytes used.
    pub fn bytes(&self) -> usize {
        match self {
            RowProbe::Segment => 0,
            RowProbe::Bloom(f) => f.bytes(),
        }
    }
}

/// How point lookups skip or search one segment.
#[derive(Clone, Debug)]
pub(super) enum SegProbe {
    /// A bloom filter of the segment's keys (rows are then probed one by one).
    Bloom(Arc<BlockedBloom>),
    /// A hash index naming the key's elements in every row of the segment.
    Index(Arc<HashIndex>),
}

impl SegProbe {
    pub(super) fn bytes(&self) -> usize {
        match self {
            SegProbe::Bloom(f) => f.bytes(),
            SegProbe::Index(ix) => ix.bytes(),
        }
    }
}

/// The probe of a row that will form a segment of its own (a merged row),
/// built before taking the matrix lock: a big row's index takes a while.
pub struct SoloProbe(pub(super) SegProbe);

impl SoloProbe {
    /// The probe `row` needs as a segment of its own: a hash index with
    /// `hash_index`, else none (a segment short of full has no filter).
    pub fn of(row: &Row, hash_index: bool) -> Result<Option<SoloProbe>> {
        if !hash_index {
            return Ok(None);
        }
        let rows = row_hashes(std::iter::once(row))?;
        Ok(Some(SoloProbe(probe_of(&rows, 0, true))))
    }
}

/// The probe of a segment that is still taking rows: sized for a full
/// segment of rows like its first, and copied on every new row (readers
/// hold the old copy).
#[derive(Clone, Debug)]
pub(super) struct Growing {
    pub seg: u64,
    pub probe: SegProbe,
    /// Keys the bloom filter was sized for (the hash index checks its own room).
    pub capacity: usize,
    pub keys: usize,
}

/// Reads the stored key hashes of `rows`, oldest first, with their ids.
pub(super) fn row_hashes<'a>(rows: impl Iterator<Item = &'a Row>) -> Result<Vec<(u64, Vec<u64>)>> {
    rows.map(|r| Ok((r.id(), r.hashes()?))).collect()
}

/// The probe of a segment made of `rows` (oldest first), with room for at
/// least `room` keys: a hash index with `hash_index`, else a bloom filter.
pub(super) fn probe_of(rows: &[(u64, Vec<u64>)], room: usize, hash_index: bool) -> SegProbe {
    if hash_index {
        return SegProbe::Index(Arc::new(HashIndex::build(rows, room)));
    }
    let keys: usize = rows.iter().map(|(_, h)| h.len()).sum();
    let mut f = BlockedBloom::with_capacity(keys.max(room), FILTER_BITS);
    rows.iter().for_each(|(_, hs)| hs.iter().for_each(|h| f.insert_mut(*h)));
    SegProbe::Bloom(Arc::new(f))
}
