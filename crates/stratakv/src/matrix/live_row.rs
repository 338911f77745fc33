//! A row as the matrix holds it: the row, how much of it was compacted,
//! its group, and its DRAM lookup structures.

use std::sync::Arc;

use super::fences::Fences;
use super::probe::{RowProbe, FILTER_BITS};
use super::record::RowMeta;
use super::row::Row;
use crate::error::Result;
use crate::filter::BlockedBloom;
use crate::key::{prefix_hash, PrefixExtractor};

/// A row as the matrix holds it: the row, its consumed prefix, its lookup structures.
#[derive(Clone, Debug)]
pub struct LiveRow {
    /// The row.
    pub row: Arc<Row>,
    /// Elements before this index are in L1.
    pub start: u32,
    /// Member of the compactor group.
    pub compactor: bool,
    /// Log number range its elements point into.
    pub first_log: u64,
    /// See `first_log`.
    pub last_log: u64,
    /// Segment the row belongs to.
    pub seg: u64,
    /// How a point lookup finds keys in the row.
    pub probe: RowProbe,
    /// Fences: a lookup narrows its binary search with these, in DRAM,
    /// before touching PM.
    pub(super) fences: Arc<Fences>,
    /// Bloom filter of the row's key prefixes (with a prefix extractor):
    /// a scan inside one prefix skips the row when the prefix is absent.
    pub(super) prefixes: Option<Arc<BlockedBloom>>,
}

impl LiveRow {
    /// A live row for `row`, found through its segment's hash index (with
    /// `hash_index`) or else through a bloom filter built from the stored hashes.
    pub fn new(
        row: Row,
        start: u32,
        compactor: bool,
        first_log: u64,
        last_log: u64,
        hash_index: bool,
        prefix_extractor: Option<&dyn PrefixExtractor>,
    ) -> Result<LiveRow> {
        let probe = if hash_index {
            RowProbe::Segment
        } else {
            let hashes = row.hashes()?;
            RowProbe::Bloom(Arc::new(BlockedBloom::from_hashes(&hashes, hashes.len(), FILTER_BITS)))
        };
        let fences = Fences::of(&row)?;
        let prefixes = match prefix_extractor {
            Some(x) => Some(Arc::new(prefix_filter(&row, x)?)),
            None => None,
        };
        Ok(LiveRow {
            row: Arc::new(row),
            start,
            compactor,
            first_log,
            last_log,
            seg: 0,
            probe,
            fences: Arc::new(fences),
            prefixes,
        })
    }

    /// Whether the row may hold a key whose prefix hashes to `prefix_hash`
    /// (true when the row has no prefix filter).
    pub(super) fn may_hold_prefix(&self, prefix_hash: u64) -> bool {
        self.prefixes.as_ref().is_none_or(|f| f.may_contain(prefix_hash))
    }

    /// The range `[lo, hi)` that holds the row's first element with user
    /// key >= `ukey` (or `hi == len` if there is none).
    pub(super) fn window(&self, ukey: &[u8]) -> (u32, u32) {
        self.fences.window(ukey, self.row.len())
    }

    /// Elements not yet compacted.
    pub fn remaining(&self) -> u32 {
        self.row.len().saturating_sub(self.start)
    }

    /// Log bytes of the elements not yet compacted (estimated pro rata).
    pub fn remaining_data_bytes(&self) -> u64 {
        let n = self.row.len().max(1) as u64;
        self.row.header().log_bytes * self.remaining() as u64 / n
    }

    pub(super) fn meta(&self) -> RowMeta {
        let h = self.row.extent().head();
        RowMeta {
            id: self.row.id(),
            slot: h.slot,
            slots: h.slots,
            start: self.start,
            first_log: self.first_log,
            last_log: self.last_log,
            compactor: self.compactor,
        }
    }
}

/// A bloom filter of the distinct key prefixes in `row` (every key is read
/// once from PM; keys are sorted, so equal prefixes are adjacent).
fn prefix_filter(row: &Row, extractor: &dyn PrefixExtractor) -> Result<BlockedBloom> {
    let mut hashes = Vec::new();
    let mut last: Option<&[u8]> = None;
    for i in 0..row.len() {
        let key = row.user_key(&row.elem(i)?)?;
        if let Some(p) = extractor.prefix(key) {
            if last != Some(p) {
                hashes.push(prefix_hash(p));
                last = Some(p);
            }
        }
    }
    Ok(BlockedBloom::from_hashes(&hashes, hashes.len(), FILTER_BITS))
}
