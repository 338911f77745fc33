//! SSTable byte format: block handles, block trailers, the footer.
//! Documented in FORMAT.md; numbers here are frozen.

use std::path::Path;

use crate::coding::{crc2, get_u32, get_u64, mask_crc, put_u32, put_u64, put_varint, unmask_crc, Reader};
use crate::error::{Error, Result};

/// Magic number at the very end of every table file ("STRATSST").
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"STRATSST");
/// Table format version written by this code.
pub const TABLE_VERSION: u32 = 1;
/// Footer size in bytes.
pub const FOOTER_LEN: usize = 72;
/// Bytes after every block: compression kind (1) + masked CRC32C (4).
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Where a block sits in the file (size excludes the trailer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHandle {
    /// Byte offset of the block.
    pub offset: u64,
    /// Length of the block contents, without trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the varint encoding.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint(dst, self.offset);
        put_varint(dst, self.size);
    }

    /// Decodes from a reader.
    pub fn decode(r: &mut Reader<'_>) -> Option<BlockHandle> {
        Some(BlockHandle { offset: r.varint()?, size: r.varint()? })
    }
}

/// How a block's contents are compressed. Written to disk; frozen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Compression {
    /// Stored as is.
    #[default]
    None = 0,
    /// Snappy (raw format).
    Snappy = 1,
    /// LZ4 block format, prefixed with the uncompressed size.
    Lz4 = 2,
}

impl Compression {
    /// Decodes the trailer byte.
    pub fn from_u8(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Snappy),
            2 => Some(Compression::Lz4),
            _ => None,
        }
    }

    /// Parses a db_bench-style name (`none`, `snappy`, `lz4`).
    pub fn parse(name: &str) -> Option<Compression> {
        match name.to_ascii_lowercase().as_str() {
            "none" | "no" | "" => Some(Compression::None),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            _ => None,
        }
    }
}

/// Which index structure a table carries. Written to disk; frozen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IndexKind {
    /// Separator keys of data blocks, binary searched.
    #[default]
    Binary = 0,
    /// A learned model mapping keys to blocks (TridentKV).
    Learned = 1,
}

impl IndexKind {
    /// Decodes the footer byte.
    pub fn from_u8(b: u8) -> Option<IndexKind> {
        match b {
            0 => Some(IndexKind::Binary),
            1 => Some(IndexKind::Learned),
            _ => None,
        }
    }
}

/// The fixed-size footer at the end of a table.
///
/// The byte layout is in FORMAT.md, "SSTable (footer)".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// The bloom filter block (size 0 = none).
    pub filter: BlockHandle,
    /// The index block.
    pub index: BlockHandle,
    /// The properties block.
    pub props: BlockHandle,
    /// Kind of index block.
    pub index_kind: IndexKind,
}

impl Footer {
    /// Encodes to exactly [`FOOTER_LEN`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(FOOTER_LEN);
        for h in [self.filter, self.index, self.props] {
            put_u64(&mut b, h.offset);
            put_u64(&mut b, h.size);
        }
        b.extend_from_slice(&[self.index_kind as u8, 0, 0, 0]);
        put_u32(&mut b, TABLE_VERSION);
        let c = mask_crc(crate::coding::crc(&b));
        put_u32(&mut b, c);
        put_u32(&mut b, 0);
        put_u64(&mut b, TABLE_MAGIC);
        b
    }

    /// Decodes and checks a footer read from `file` at `offset`.
    pub fn decode(b: &[u8], file: &Path, offset: u64) -> Result<Footer> {
        let bad = |why: &str| Error::corruption(file, offset, format!("table footer: {why}"));
        if b.len() != FOOTER_LEN {
            return Err(bad("short"));
        }
        if get_u64(b, 64) != Some(TABLE_MAGIC) {
            return Err(bad("bad magic (not a table file, or truncated)"));
        }
        let stored = get_u32(b, 56).map(unmask_crc);
        if stored != b.get(..56).map(crate::coding::crc) {
            return Err(bad("checksum mismatch"));
        }
        let version = get_u32(b, 52).ok_or_else(|| bad("short"))?;
        if version != TABLE_VERSION {
            return Err(bad(&format!("unsupported version {version}")));
        }
        let h = |at: usize| -> Result<BlockHandle> {
            Ok(BlockHandle {
                offset: get_u64(b, at).ok_or_else(|| bad("short"))?,
                size: get_u64(b, at + 8).ok_or_else(|| bad("short"))?,
            })
        };
        let kind = b.get(48).copied().and_then(IndexKind::from_u8).ok_or_else(|| bad("unknown index kind"))?;
        Ok(Footer { filter: h(0)?, index: h(16)?, props: h(32)?, index_kind: kind })
    }
}

/// Builds the trailer for `contents` stored with `compression`.
pub fn block_trailer(contents: &[u8], compression: Compression) -> [u8; BLOCK_TRAILER_LEN] {
    let kind = [compression as u8];
    let c = mask_crc(crc2(contents, &kind));
    let cb = c.to_le_bytes();
    [kind[0], cb[0], cb[1], cb[2], cb[3]]
}

/// Checks a block read with its trailer and returns its uncompressed contents.
pub fn unwrap_block(raw: &[u8], file: &Path, offset: u64) -> Result<Vec<u8>> {
    let bad = |why: String| Error::corruption(file, offset, why);
    let n = raw.len().checked_sub(BLOCK_TRAILER_LEN).ok_or_else(|| bad("block shorter than its trailer".into()))?;
    let (contents, trailer) = raw.split_at(n);
    let kind_byte = trailer.first().copied().unwrap_or(0xff);
    let stored = get_u32(trailer, 1).map(unmask_crc);
    if stored != Some(crc2(contents, &[kind_byte])) {
        return Err(bad("block checksum mismatch".into()));
    }
    match Compression::from_u8(kind_byte) {
        Some(Compression::None) => Ok(contents.to_vec()),
        Some(Compression::Snappy) => snap::raw::Decoder::new()
            .decompress_vec(contents)
            .map_err(|e| bad(format!("snappy block does not decompress: {e}"))),
        Some(Compression::Lz4) => lz4_flex::block::decompress_size_prepended(contents)
            .map_err(|e| bad(format!("lz4 block does not decompress: {e}"))),
        None => Err(bad(format!("unknown compression {kind_byte}"))),
    }
}

/// Compresses `raw` if that saves at least 1/8; returns the bytes to store and how.
pub fn compress_block(raw: &[u8], want: Compression) -> (Vec<u8>, Compression) {
    let out = match want {
        Compression::None => None,
        Compression::Snappy => snap::raw::Encoder::new().compress_vec(raw).ok(),
        Compression::Lz4 => Some(lz4_flex::block::compress_prepend_size(raw)),
    };
    match out {
        Some(c) if c.len() < raw.len() - raw.len() / 8 => (c, want),
        _ => (raw.to_vec(), Compression::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trips_and_detects_damage() {
        let f = Footer {
            filter: BlockHandle { offset: 1, size: 2 },
            index: BlockHandle { offset: 3, size: 4 },
            props: BlockHandle { offset: 5, size: 6 },
            index_kind: IndexKind::Binary,
        };
        let b = f.encode();
        assert_eq!(b.len(), FOOTER_LEN);
        assert_eq!(Footer::decode(&b, Path::new("t"), 0).unwrap(), f);
        for i in 0..FOOTER_LEN {
            let mut d = b.clone();
            d[i] ^= 0x40;
            if (60..64).contains(&i) {
                continue; // reserved bytes are not checked
            }
            assert!(Footer::decode(&d, Path::new("t"), 0).is_err(), "flip at {i} undetected");
        }
    }

    #[test]
    fn compressed_blocks_round_trip() {
        let raw: Vec<u8> = (0..4000u32).map(|i| (i % 7) as u8).collect();
        for c in [Compression::None, Compression::Snappy, Compression::Lz4] {
            let (stored, used) = compress_block(&raw, c);
            let mut file = stored.clone();
            file.extend_from_slice(&block_trailer(&stored, used));
            assert_eq!(unwrap_block(&file, Path::new("t"), 0).unwrap(), raw);
            file[3] ^= 1;
            assert!(unwrap_block(&file, Path::new("t"), 0).is_err());
        }
    }
}
