//! What the tree maps a key to, and its two-word encoding in a record's
//! value slot.

use crate::error::{Error, Result};

/// Where the newest version of a key lives: a table, and the data block
/// in it; or a tombstone (the key was deleted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct TreeValue {
    /// Table (file) number; below 2^63.
    pub file: u64,
    /// Byte offset of the data block in the table; below 2^40.
    pub block_offset: u64,
    /// Length of the data block; below 2^24.
    pub block_len: u32,
    /// The newest version is a delete.
    pub tombstone: bool,
}

const TOMBSTONE_BIT: u64 = 1 << 63;
const OFFSET_BITS: u32 = 40;
const LEN_LIMIT: u32 = 1 << 24;

impl TreeValue {
    /// The two words stored in a value slot; fails if a field is out of range.
    pub fn encode(&self) -> Result<[u64; 2]> {
        if self.file >= TOMBSTONE_BIT || self.block_offset >> OFFSET_BITS != 0 || self.block_len >= LEN_LIMIT {
            return Err(Error::InvalidArgument(format!("tree value out of range: {self:?}")));
        }
        Ok([
            self.file | if self.tombstone { TOMBSTONE_BIT } else { 0 },
            self.block_offset | (self.block_len as u64) << OFFSET_BITS,
        ])
    }

    /// Decodes the two words of a value slot (every bit pattern decodes).
    pub fn decode(w: [u64; 2]) -> TreeValue {
        TreeValue {
            file: w[0] & !TOMBSTONE_BIT,
            tombstone: w[0] & TOMBSTONE_BIT != 0,
            block_offset: w[1] & ((1 << OFFSET_BITS) - 1),
            block_len: (w[1] >> OFFSET_BITS) as u32,
        }
    }
}
