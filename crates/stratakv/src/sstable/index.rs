//! Table indexes: given a key, which data block to read.
//!
//! All index kinds sit behind [`TableIndex`], so a table reader does not
//! care whether the block number came from a binary search over separator
//! keys or from a learned model.

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

use super::block::{Block, BlockBuilder, BlockIter};
use super::format::BlockHandle;
use crate::coding::Reader;
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key::{compare_internal, key_prefix, user_key};

/// Maps keys to data blocks.
pub trait TableIndex: Send + Sync + std::fmt::Debug {
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
///
/// A search first narrows the range on `prefixes`, one `u64` per separator,
/// and compares whole keys only among separators with the target's prefix:
/// the dense array costs one cache miss per step where the keys cost three.
#[derive(Debug)]
pub struct BinaryIndex {
    keys: Vec<u8>,
    ends: Vec<u32>,
    handles: Vec<BlockHandle>,
    /// The user-key prefix every separator shares.
    common: Vec<u8>,
    /// Per separator, the 8 user-key bytes after `common` (zero-padded), big-endian.
    prefixes: Vec<u64>,
    /// Every `SAMPLE`th entry of `prefixes`: small enough to stay in the CPU
    /// cache, it cuts the search of `prefixes` to one window of `SAMPLE`.
    sampled: Vec<u64>,
}

/// Distance between the entries of `BinaryIndex::sampled`.
const SAMPLE: usize = 64;

/// The 8 bytes of `ukey` after its first `skip`, zero-padded, as a number
/// that orders like the bytes: if `a < b` then `prefix8(a) <= prefix8(b)`.
fn prefix8(ukey: &[u8], skip: usize) -> u64 {
    key_prefix(ukey.get(skip..).unwrap_or(&[]))
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
        let mut idx = BinaryIndex {
            keys: Vec::new(),
            ends: Vec::new(),
            handles: Vec::new(),
            common: Vec::new(),
            prefixes: Vec::new(),
            sampled: Vec::new(),
        };
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
        idx.build_prefixes();
        Ok(idx)
    }

    fn build_prefixes(&mut self) {
        let n = self.handles.len();
        let (first, last) = (user_key(self.key(0)).to_vec(), user_key(self.key(n.saturating_sub(1))).to_vec());
        // Separators are sorted, so what the first and last share, all share.
        let common = first.iter().zip(&last).take_while(|(a, b)| a == b).count();
        self.common = first.get(..common).unwrap_or(&[]).to_vec();
        self.prefixes = (0..n).map(|i| prefix8(user_key(self.key(i)), common)).collect();
        self.sampled = self.prefixes.iter().step_by(SAMPLE).copied().collect();
    }

    /// The first entry of `prefixes` for which `below` is false (`below`
    /// must be true for a prefix of the array, then false).
    fn prefix_bound(&self, below: impl Fn(u64) -> bool) -> usize {
        // Sampled entry j is prefixes[j * SAMPLE]: the answer lies after the
        // last sampled entry that is below and at or before the first that is not.
        let j = self.sampled.partition_point(|&x| below(x));
        let lo = if j == 0 { 0 } else { (j - 1) * SAMPLE + 1 };
        let hi = (j * SAMPLE).min(self.prefixes.len());
        lo + self.prefixes.get(lo..hi).unwrap_or(&[]).partition_point(|&x| below(x))
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends.get(i - 1).copied().unwrap_or(0) as usize };
        let end = self.ends.get(i).copied().unwrap_or(0) as usize;
        self.keys.get(start..end).unwrap_or(&[])
    }
}

impl TableIndex for BinaryIndex {
    fn num_blocks(&self) -> usize {
        self.handles.len()
    }

    fn block(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    fn find_block(&self, ikey: &[u8]) -> Option<usize> {
        // First separator >= ikey.
        let n = self.handles.len();
        let ukey = user_key(ikey);
        let (mut lo, mut hi) = match ukey.get(..self.common.len()) {
            Some(head) if head == self.common.as_slice() => {
                // Separators whose prefix is below the key's are below the
                // key, those whose prefix is above it are above it.
                let p = prefix8(ukey, self.common.len());
                (self.prefix_bound(|x| x < p), self.prefix_bound(|x| x <= p))
            }
            // The key does not start with the common prefix: it is below
            // every separator or above every one.
            _ if ukey < self.common.as_slice() => (0, 0),
            _ => (n, n),
        };
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
        self.keys.len() + self.ends.len() * 4 + self.handles.len() * 16 + (self.prefixes.len() + self.sampled.len()) * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};
    use proptest::prelude::*;

    fn index_of(mut ukeys: Vec<Vec<u8>>) -> (BinaryIndex, Vec<Vec<u8>>) {
        ukeys.sort();
        ukeys.dedup();
        let seps: Vec<Vec<u8>> = ukeys.iter().map(|k| internal_key(k, 5, Kind::Put)).collect();
        let entries: Vec<(Vec<u8>, BlockHandle)> = seps
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), BlockHandle { offset: i as u64 * 10, size: 10 }))
            .collect();
        let idx = BinaryIndex::decode(BinaryIndex::encode(&entries), Arc::new(PathBuf::from("t")), 0).unwrap();
        (idx, seps)
    }

    proptest! {
        /// The prefix-narrowed search lands where a plain binary search over
        /// the separators does, for keys inside, around and outside the
        /// common prefix, with any sequence number.
        #[test]
        fn prefix_search_matches_a_plain_search(
            head in prop::sample::select(vec![b"".to_vec(), b"user".to_vec(), b"0000000000".to_vec()]),
            tails in prop::collection::vec(prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', b'b', 0xff]), 0..12), 1..400),
            probes in prop::collection::vec((prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', b'b', b'u', b'0', 0xff]), 0..16), 0u64..10), 1..40),
        ) {
            let ukeys: Vec<Vec<u8>> = tails.iter().map(|t| [head.as_slice(), t].concat()).collect();
            let (idx, seps) = index_of(ukeys);
            for (tail, seq) in probes {
                for uk in [[head.as_slice(), &tail].concat(), tail.clone()] {
                    let ikey = internal_key(&uk, seq, Kind::Put);
                    let want = seps.iter().position(|s| compare_internal(s, &ikey) != Ordering::Less);
                    prop_assert_eq!(idx.find_block(&ikey), want, "key {:?} seq {}", uk, seq);
                }
            }
        }
    }
}
