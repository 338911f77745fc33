//! Reading a node: its 64 words, and the entries they hold under the
//! FAST rules (a pointer of 0 ends the node, `SKIP` and a pointer equal
//! to the one before it are entries in the middle of a shift).

use std::path::Path;

use strata_pmem::Region;

use super::layout::*;
use crate::error::{Error, Result};

/// One node's words, as loaded (by a reader, inside a seqlock window).
#[derive(Clone)]
pub(super) struct RawNode {
    /// Region offset of the node.
    pub off: u64,
    /// Its 64 words.
    pub words: [u64; (NODE_BYTES / 8) as usize],
}

/// A live entry: key prefix, pointer (record or child) and raw index.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    /// Key prefix (see `prefix_of`).
    pub prefix: u64,
    /// Leaves: region offset of the key record; internal nodes: of the child.
    pub ptr: u64,
    /// Index of the entry's raw slot in the node.
    pub raw: usize,
}

/// A decoded node.
#[derive(Clone, Debug)]
pub(super) struct Node {
    /// Region offset.
    pub off: u64,
    /// 0 for leaves.
    pub level: u16,
    /// Right sibling (0 = none).
    pub sibling: u64,
    /// Internal nodes: child for keys below the first entry.
    pub leftmost: u64,
    /// Low fence prefix.
    pub low_prefix: u64,
    /// Low fence key record (0 = minus infinity).
    pub low_rec: u64,
    /// Key bytes skipped before entry prefixes (`N_SKIP`).
    pub skip: usize,
    /// Live entries in key order.
    pub entries: Vec<Entry>,
    /// Raw slots before the terminator (live ones and ones mid-shift).
    pub raw_len: usize,
}

impl Node {
    /// Whether the raw slots are exactly the live entries (no shift in flight).
    pub fn is_clean(&self) -> bool {
        self.entries.len() == self.raw_len
    }
}

/// Loads the 64 words of the node at `off` (no validation: a reader may be
/// racing a writer, and validates after its seqlock check).
pub(super) fn load(region: &Region, path: &Path, off: u64) -> Result<RawNode> {
    let mut words = [0u64; (NODE_BYTES / 8) as usize];
    for (i, w) in words.iter_mut().enumerate() {
        *w = region.load_u64(off + 8 * i as u64).map_err(|e| Error::from_pm(path, e))?;
    }
    Ok(RawNode { off, words })
}

impl RawNode {
    fn word(&self, at: u64) -> u64 {
        self.words[(at / 8) as usize]
    }

    /// Decodes and validates the node.
    pub fn decode(&self, path: &Path) -> Result<Node> {
        let meta = self.word(N_META);
        if meta as u32 != NODE_MAGIC {
            return Err(Error::corruption(path, self.off, format!("tree node has bad magic {meta:#x}")));
        }
        let level = (meta >> 32) as u16;
        let leftmost = self.word(N_LEFTMOST);
        let sibling = self.word(N_SIBLING);
        let low_rec = self.word(N_LOW_REC);
        for (what, p) in [("sibling", sibling), ("leftmost child", leftmost), ("low fence", low_rec)] {
            if p % 8 != 0 {
                return Err(Error::corruption(path, self.off, format!("tree node {what} {p:#x} is not aligned")));
            }
        }
        if (level == 0) != (leftmost == 0) {
            return Err(Error::corruption(
                path,
                self.off,
                format!("tree node at level {level} has leftmost child {leftmost:#x}"),
            ));
        }
        let skip = self.word(N_SKIP);
        if skip > crate::key::MAX_KEY_LEN as u64 {
            return Err(Error::corruption(path, self.off, format!("tree node skips {skip} key bytes")));
        }
        let mut entries = Vec::with_capacity(CAP);
        let mut prev = 0u64;
        let mut raw_len = CAP;
        for i in 0..CAP {
            let ptr = self.word(entry_ptr(i));
            if ptr == 0 {
                raw_len = i;
                break;
            }
            // SKIP: the slot is being rewritten; equal to the previous
            // pointer: the slot is the second copy made by a shift.
            if ptr != SKIP && ptr != prev {
                if !ptr.is_multiple_of(8) {
                    return Err(Error::corruption(
                        path,
                        self.off + entry_ptr(i),
                        format!("tree entry pointer {ptr:#x} is not aligned"),
                    ));
                }
                entries.push(Entry { prefix: self.word(entry_key(i)), ptr, raw: i });
            }
            prev = ptr;
        }
        Ok(Node {
            off: self.off,
            level,
            sibling,
            leftmost,
            low_prefix: self.word(N_LOW_PREFIX),
            low_rec,
            skip: skip as usize,
            entries,
            raw_len,
        })
    }
}

/// The bytes of a fresh node (written whole before it is linked).
pub(super) struct NodeImage {
    /// The node's words.
    pub words: [u64; (NODE_BYTES / 8) as usize],
}

impl NodeImage {
    /// A node at `level` with the given fence, sibling, leftmost child and
    /// key bytes its entry prefixes skip.
    pub fn new(level: u16, low: (u64, u64), sibling: u64, leftmost: u64, skip: usize) -> NodeImage {
        let mut words = [0u64; (NODE_BYTES / 8) as usize];
        words[(N_META / 8) as usize] = NODE_MAGIC as u64 | (level as u64) << 32;
        words[(N_SIBLING / 8) as usize] = sibling;
        words[(N_LEFTMOST / 8) as usize] = leftmost;
        words[(N_LOW_PREFIX / 8) as usize] = low.0;
        words[(N_LOW_REC / 8) as usize] = low.1;
        words[(N_SKIP / 8) as usize] = skip as u64;
        NodeImage { words }
    }

    /// Sets entry `i`.
    pub fn set(&mut self, i: usize, prefix: u64, ptr: u64) {
        self.words[(entry_key(i) / 8) as usize] = prefix;
        self.words[(entry_ptr(i) / 8) as usize] = ptr;
    }

    /// Little-endian bytes, as stored.
    pub fn bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}
