//! The matrix's record in the MANIFEST: which rows are live, how far each
//! was compacted, which form the compactor group (FORMAT.md, "Matrix
//! record").

use crate::coding::{put_varint, Reader};

/// What the MANIFEST records about one live row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowMeta {
    /// Row id (= its extent's number).
    pub id: u64,
    /// First slot of its extent.
    pub slot: u64,
    /// Slots of its extent.
    pub slots: u64,
    /// Elements before this index are compacted into L1.
    pub start: u32,
    /// Smallest log number its elements point into.
    pub first_log: u64,
    /// Largest log number its elements point into.
    pub last_log: u64,
    /// Whether it belongs to the compactor group.
    pub compactor: bool,
}

/// Decoded matrix record of the MANIFEST.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatrixRecord {
    /// Next row id to hand out.
    pub next_row_id: u64,
    /// Live rows, newest first.
    pub rows: Vec<RowMeta>,
}

impl MatrixRecord {
    /// Encodes: `version (1) | next_row_id | n | n * (id, slot, slots, start, first_log, last_log, flags)`, all varints.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, 1);
        put_varint(&mut b, self.next_row_id);
        put_varint(&mut b, self.rows.len() as u64);
        for r in &self.rows {
            for v in [r.id, r.slot, r.slots, r.start as u64, r.first_log, r.last_log, r.compactor as u64] {
                put_varint(&mut b, v);
            }
        }
        b
    }

    /// Decodes; `Err(reason)` if malformed.
    pub fn decode(b: &[u8]) -> std::result::Result<MatrixRecord, String> {
        let mut r = Reader::new(b);
        let bad = || "malformed matrix record".to_string();
        if r.varint().ok_or_else(bad)? != 1 {
            return Err("unknown matrix record version".into());
        }
        let next_row_id = r.varint().ok_or_else(bad)?;
        let n = r.varint().ok_or_else(bad)?;
        let mut rows = Vec::new();
        for _ in 0..n {
            let mut f = [0u64; 7];
            for v in f.iter_mut() {
                *v = r.varint().ok_or_else(bad)?;
            }
            rows.push(RowMeta {
                id: f[0],
                slot: f[1],
                slots: f[2],
                start: u32::try_from(f[3]).map_err(|_| bad())?,
                first_log: f[4],
                last_log: f[5],
                compactor: f[6] != 0,
            });
        }
        if !r.is_empty() {
            return Err(bad());
        }
        Ok(MatrixRecord { next_row_id, rows })
    }
}
