//! A PM skiplist node: the node words a pm-only log entry carries for
//! each of its records (FORMAT.md, "Log entry"), which `crate::pmlist`
//! links into lists, and list heads.
//!
//! ```text
//! word 0   key offset from the node start (bits 0..32) | key length (32..56)
//!          | height (56..60) | region (60..64)
//! word 1   trailer = sequence << 8 | kind (the record's internal-key trailer)
//! word 2.. next[level], level < height: region offset of the next node, 0 = end
//! ```
//!
//! The key and value stay where the record put them, in the same entry.
//! A head is just links: `MAX_HEIGHT` words per PM region.

use std::cmp::Ordering;

use strata_pmem::{PmError, Region};

use crate::coding::Reader;
use crate::key::{Kind, SeqNo};

/// Most levels a node has.
pub const MAX_HEIGHT: usize = 12;
/// Bytes before a node's links.
const FIXED: u64 = 16;

/// Node word 0 for a key `key_fwd` bytes after the node start.
pub fn meta_word(key_fwd: u64, key_len: usize, height: u8, region: u8) -> u64 {
    (key_fwd & 0xffff_ffff)
        | ((key_len as u64) & 0xff_ffff) << 32
        | ((height as u64) & 0xf) << 56
        | ((region as u64) & 0xf) << 60
}

/// A node's fixed words, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// Region offset of the node.
    pub off: u64,
    /// Region offset of the user key.
    pub key_off: u64,
    /// User key length.
    pub key_len: usize,
    /// Levels the node is in.
    pub height: usize,
    /// PM region (NUMA node) whose upper lists the node joins.
    pub region: usize,
    /// Sequence << 8 | kind.
    pub trailer: u64,
}

impl Node {
    /// Reads the node at `off`; an impossible height or key position is
    /// corruption.
    pub fn read(region: &Region, off: u64) -> Result<Node, PmError> {
        let meta = region.load_u64(off)?;
        let height = (meta >> 56 & 0xf) as usize;
        let key_fwd = meta & 0xffff_ffff;
        let bad = |reason: &str| PmError::Corruption { offset: off, reason: reason.to_string() };
        if height == 0 || height > MAX_HEIGHT {
            return Err(bad("skiplist node has an impossible height"));
        }
        if key_fwd < FIXED + 8 * height as u64 {
            return Err(bad("skiplist node's key overlaps its links"));
        }
        Ok(Node {
            off,
            key_off: off + key_fwd,
            key_len: (meta >> 32 & 0xff_ffff) as usize,
            height,
            region: (meta >> 60) as usize,
            trailer: region.load_u64(off + 8)?,
        })
    }

    /// Bytes the node takes.
    pub fn size(&self) -> u64 {
        FIXED + 8 * self.height as u64
    }

    /// Region offset of the node's `next[0]`; `next[i]` follows at `+ 8 i`.
    pub fn links(&self) -> u64 {
        self.off + FIXED
    }

    /// The sequence number.
    pub fn seq(&self) -> SeqNo {
        self.trailer >> 8
    }

    /// Whether the record is a tombstone.
    pub fn is_delete(&self) -> bool {
        self.trailer & 0xff == Kind::Delete as u64
    }

    /// The user key.
    pub fn key<'r>(&self, region: &'r Region) -> Result<&'r [u8], PmError> {
        region.read(self.key_off, self.key_len as u64)
    }

    /// The value (empty for a tombstone): after the key, its length as a
    /// varint, then its bytes.
    pub fn value<'r>(&self, region: &'r Region) -> Result<&'r [u8], PmError> {
        if self.is_delete() {
            return Ok(&[]);
        }
        let at = self.key_off + self.key_len as u64;
        let head = region.read(at, 5.min(region.len().saturating_sub(at)))?;
        let mut r = Reader::new(head);
        let len = r.varint32().ok_or(PmError::Corruption { offset: at, reason: "bad value length".into() })?;
        region.read(at + r.pos() as u64, len as u64)
    }

    /// Orders this node against internal key (`ukey`, `trailer`): user key
    /// ascending, then trailer descending.
    pub fn cmp_to(&self, region: &Region, ukey: &[u8], trailer: u64) -> Result<Ordering, PmError> {
        Ok(self.key(region)?.cmp(ukey).then_with(|| trailer.cmp(&self.trailer)))
    }
}
