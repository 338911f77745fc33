//! Writes a table file from entries given in internal-key order.

use std::path::{Path, PathBuf};

use super::block::BlockBuilder;
use super::bloom;
use super::format::{block_trailer, compress_block, BlockHandle, Compression, Footer, IndexKind};
use super::index::BinaryIndex;
use super::props::TableProps;
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{shortest_separator, trailer, user_key, Kind, ParsedKey, MAX_SEQ};

/// Knobs of the table format.
#[derive(Clone, Debug)]
pub struct TableOptions {
    /// Target uncompressed size of a data block.
    pub block_size: usize,
    /// Entries between restart points.
    pub restart_interval: usize,
    /// Bloom bits per key; 0 = no filter.
    pub bloom_bits_per_key: u32,
    /// Data-block compression.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions { block_size: 4096, restart_interval: 16, bloom_bits_per_key: 10, compression: Compression::None }
    }
}

/// Builds one table.
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    opts: TableOptions,
    block: BlockBuilder,
    index: Vec<(Vec<u8>, BlockHandle)>,
    /// Last key of the block just written, waiting for the next key to pick a separator.
    pending: Option<(Vec<u8>, BlockHandle)>,
    hashes: Vec<u64>,
    last_key: Vec<u8>,
    props: TableProps,
    offset: u64,
}

impl TableBuilder {
    /// A builder writing to `file` (at `path`, for error messages).
    pub fn new(file: Box<dyn WritableFile>, path: &Path, opts: TableOptions) -> TableBuilder {
        let restart = opts.restart_interval;
        TableBuilder {
            file,
            path: path.to_path_buf(),
            opts,
            block: BlockBuilder::new(restart),
            index: Vec::new(),
            pending: None,
            hashes: Vec::new(),
            last_key: Vec::new(),
            props: TableProps::default(),
            offset: 0,
        }
    }

    /// Bytes written so far plus the open block.
    pub fn estimated_size(&self) -> u64 {
        self.offset + self.block.size_estimate() as u64
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Adds an entry; keys must be strictly increasing internal keys.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let Some(p) = ParsedKey::parse(ikey) else {
            return Err(Error::InvalidArgument("table entry with a malformed internal key".into()));
        };
        if let Some((last, h)) = self.pending.take() {
            let sep = separator(&last, ikey);
            self.index.push((sep, h));
        }
        if self.props.entries == 0 {
            self.props.smallest = ikey.to_vec();
            self.props.smallest_seq = p.seq;
            self.props.largest_seq = p.seq;
        }
        let uk = p.user_key;
        if self.props.entries == 0 || user_key(&self.last_key) != uk {
            self.hashes.push(crate::key::key_hash(uk));
        }
        self.props.entries += 1;
        if p.kind == Kind::Delete {
            self.props.deletions += 1;
        }
        self.props.smallest_seq = self.props.smallest_seq.min(p.seq);
        self.props.largest_seq = self.props.largest_seq.max(p.seq);
        self.props.raw_key_bytes += ikey.len() as u64;
        self.props.raw_value_bytes += value.len() as u64;
        self.block.add(ikey, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        if self.block.size_estimate() >= self.opts.block_size {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let raw = self.block.finish();
        let h = self.write_block(&raw, self.opts.compression)?;
        self.props.data_blocks += 1;
        self.pending = Some((self.last_key.clone(), h));
        Ok(())
    }

    fn write_block(&mut self, raw: &[u8], compression: Compression) -> Result<BlockHandle> {
        let (stored, used) = compress_block(raw, compression);
        let h = BlockHandle { offset: self.offset, size: stored.len() as u64 };
        let t = block_trailer(&stored, used);
        self.append(&stored)?;
        self.append(&t)?;
        Ok(h)
    }

    fn append(&mut self, b: &[u8]) -> Result<()> {
        self.file.append(b).map_err(|e| Error::io(&self.path, "write", e))?;
        self.offset += b.len() as u64;
        Ok(())
    }

    /// Writes filter, index, properties and footer, then fsyncs.
    /// Returns the file size and the table's properties.
    pub fn finish(mut self) -> Result<(u64, TableProps)> {
        self.flush_block()?;
        if let Some((last, h)) = self.pending.take() {
            self.index.push((last, h));
        }
        self.props.largest = self.last_key.clone();
        let filter = if self.opts.bloom_bits_per_key > 0 && !self.hashes.is_empty() {
            let f = bloom::build(&self.hashes, self.opts.bloom_bits_per_key);
            self.write_block(&f, Compression::None)?
        } else {
            BlockHandle::default()
        };
        let index_block = BinaryIndex::encode(&self.index);
        let index = self.write_block(&index_block, Compression::None)?;
        let props_block = self.props.encode();
        let props = self.write_block(&props_block, Compression::None)?;
        let footer = Footer { filter, index, props, index_kind: IndexKind::Binary };
        self.append(&footer.encode())?;
        self.file.sync().map_err(|e| Error::io(&self.path, "fsync", e))?;
        Ok((self.offset, self.props))
    }
}

/// A short internal key k with `last <= k < next` (both internal keys).
fn separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let (a, b) = (user_key(last), user_key(next));
    if a < b {
        let s = shortest_separator(a, b);
        if s.as_slice() > a && s.as_slice() < b {
            let mut k = s;
            k.extend_from_slice(&trailer(MAX_SEQ, Kind::Put).to_le_bytes());
            return k;
        }
    }
    last.to_vec()
}
