//! Key records in the key heap: the full key of a leaf entry (and of node
//! low fences), and the entry's value in two slots. A value update writes
//! the unused slot, persists it, then flips the selector word with one
//! 8-byte store: the record never moves, so the leaf is not touched.

use super::layout::*;
use super::value::TreeValue;
use super::Inner;
use crate::error::{Error, Result};
use crate::key::MAX_KEY_LEN;

impl Inner {
    /// The full key of the record at `rec`.
    pub(super) fn record_key(&self, rec: u64) -> Result<&[u8]> {
        let meta = self.region.load_u64(rec + R_META).map_err(|e| self.pm_err(e))?;
        if (meta >> 32) as u32 != RECORD_MAGIC || !rec.is_multiple_of(8) {
            return Err(Error::corruption(&*self.path, rec, format!("tree key record has bad magic {meta:#x}")));
        }
        let len = meta as u32 as usize;
        if len > MAX_KEY_LEN {
            return Err(Error::corruption(&*self.path, rec, format!("tree key record of {len} bytes")));
        }
        self.region.read(rec + R_HEADER, len as u64).map_err(|e| self.pm_err(e))
    }

    /// The value in the record at `rec`: the selected slot, read between
    /// two equal reads of the selector (the writer writes only the other
    /// slot, and flips the selector, with its version, after).
    pub(super) fn record_value(&self, rec: u64) -> Result<TreeValue> {
        let word = |at: u64| self.region.load_u64(rec + at).map_err(|e| self.pm_err(e));
        loop {
            let sel = word(R_SELECT)?;
            let at = R_SLOTS + 16 * (sel & 1);
            let v = [word(at)?, word(at + 8)?];
            if word(R_SELECT)? == sel {
                return Ok(TreeValue::decode(v));
            }
        }
    }
}

/// The bytes of a new record for `key` holding `v` in slot 0.
pub(super) fn record_image(key: &[u8], v: [u64; 2]) -> Vec<u8> {
    let mut b = Vec::with_capacity(record_bytes(key.len()) as usize);
    b.extend_from_slice(&(key.len() as u64 | (RECORD_MAGIC as u64) << 32).to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    for w in [v[0], v[1], 0, 0] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.extend_from_slice(key);
    b.resize(record_bytes(key.len()) as usize, 0);
    b
}
