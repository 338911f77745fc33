//! Table indexes: given a key, which data block to read.
//!
//! All index kinds sit behind [`TableIndex`], so a table reader does not
//! care whether the block number came from a binary search over separator
//! keys or from a learned model.

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

use super::block::{Block, BlockBuilder, BlockIter};
use super::format::{BlockHandle, IndexKind};
use crate::coding::Reader;
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key::compare_internal;

/// Maps keys to data blocks.
pub trait TableIndex: Send + Sync + std::fmt::Debug {
    /// Which kind of index this is.
    fn kind(&self) -> IndexKind;
    /// Number of data blocks.
    fn num_blocks(&self) -> usize;
    /// Handle of block `i`.
    fn block(&self, i: usize) -> Option<BlockHandle>;
    /// The first block that can hold an entry >= `ikey`, or `None` if every
    /// entry of the table is < `ikey`.
    fn find_block(&self, ikey: &[u8]) -> Option<usize>;
    /// DRAM used by the index.
    fn memory_bytes(&self) -> usize;
}

/// Separator keys, one per data block, binary searched.
///
/// Separator `i` is >= every key in block `i` and < every key in block `i+1`.
#[derive(Debug)]
pub struct BinaryIndex {
    keys: Vec<u8>,
    ends: Vec<u32>,
    handles: Vec<BlockHandle>,
}

impl BinaryIndex {
    /// Encodes index entries `(separator, handle)` as an index block.
    pub fn encode(entries: &[(Vec<u8>, BlockHandle)]) -> Vec<u8> {
        let mut b = BlockBuilder::new(1);
        let mut v = Vec::new();
        for (k, h) in entries {
            v.clear();
            h.encode_to(&mut v);
            b.add(k, &v);
        }
        b.finish()
    }

    /// Decodes an index block read from `file` at `offset`.
    pub fn decode(data: Vec<u8>, file: Arc<PathBuf>, offset: u64) -> Result<BinaryIndex> {
        let block = Arc::new(Block::new(data, file.clone(), offset)?);
        let mut it = BlockIter::new(block);
        let mut idx = BinaryIndex { keys: Vec::new(), ends: Vec::new(), handles: Vec::new() };
        it.seek_to_first()?;
        let mut prev: Option<Vec<u8>> = None;
        while it.valid() {
            let h = BlockHandle::decode(&mut Reader::new(it.value()))
                .ok_or_else(|| Error::corruption(&*file, offset, "index entry has a bad block handle"))?;
            if let Some(p) = &prev {
                if compare_internal(p, it.key()) != Ordering::Less {
                    return Err(Error::corruption(&*file, offset, "index keys out of order"));
                }
            }
            prev = Some(it.key().to_vec());
            idx.keys.extend_from_slice(it.key());
            idx.ends.push(idx.keys.len() as u32);
            idx.handles.push(h);
            it.next()?;
        }
        Ok(idx)
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends.get(i - 1).copied().unwrap_or(0) as usize };
        let end = self.ends.get(i).copied().unwrap_or(0) as usize;
        self.keys.get(start..end).unwrap_or(&[])
    }
}

impl TableIndex for BinaryIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Binary
    }

    fn num_blocks(&self) -> usize {
        self.handles.len()
    }

    fn block(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    fn find_block(&self, ikey: &[u8]) -> Option<usize> {
        // First separator >= ikey.
        let (mut lo, mut hi) = (0usize, self.handles.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if compare_internal(self.key(mid), ikey) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.handles.len()).then_some(lo)
    }

    fn memory_bytes(&self) -> usize {
        self.keys.len() + self.ends.len() * 4 + self.handles.len() * 16
    }
}
