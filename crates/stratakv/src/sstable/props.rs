//! The properties block: counts and key range of a table.
//!
//! The byte layout is in FORMAT.md, "SSTable (props block)".

use crate::coding::{put_bytes, put_varint, Reader};

/// What a table holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableProps {
    /// Entries (all versions, tombstones included).
    pub entries: u64,
    /// Tombstones.
    pub deletions: u64,
    /// Sum of internal-key lengths.
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// Number of data blocks.
    pub data_blocks: u64,
    /// Smallest sequence number.
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
}

impl TableProps {
    /// Encodes the block contents.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, 1);
        for v in [
            self.entries,
            self.deletions,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.data_blocks,
            self.smallest_seq,
            self.largest_seq,
        ] {
            put_varint(&mut b, v);
        }
        put_bytes(&mut b, &self.smallest);
        put_bytes(&mut b, &self.largest);
        b
    }

    /// Decodes block contents; `None` if malformed.
    pub fn decode(b: &[u8]) -> Option<TableProps> {
        let mut r = Reader::new(b);
        if r.varint()? != 1 {
            return None;
        }
        Some(TableProps {
            entries: r.varint()?,
            deletions: r.varint()?,
            raw_key_bytes: r.varint()?,
            raw_value_bytes: r.varint()?,
            data_blocks: r.varint()?,
            smallest_seq: r.varint()?,
            largest_seq: r.varint()?,
            smallest: r.len_bytes()?.to_vec(),
            largest: r.len_bytes()?.to_vec(),
        })
    }
}
