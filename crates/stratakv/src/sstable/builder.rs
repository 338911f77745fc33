//! Writes a table file from entries given in internal-key order.

use std::path::{Path, PathBuf};

use super::block::BlockBuilder;
use super::bloom;
use super::format::{block_trailer, compress_block, BlockHandle, Compression, Footer, IndexKind};
use super::index::BinaryIndex;
use super::props::TableProps;
use super::{learned, train};
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
    /// The index tables get (learned tables that fail to train get the binary one).
    pub index: IndexKind,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            index: IndexKind::Binary,
        }
    }
}

/// Entries held back until `finish`, for a learned index: keys and values
/// back to back in one buffer.
#[derive(Default)]
struct Buffered {
    bytes: Vec<u8>,
    /// (start in `bytes`, key length, value length) per entry.
    spans: Vec<(usize, usize, usize)>,
}

impl Buffered {
    fn push(&mut self, k: &[u8], v: &[u8]) {
        self.spans.push((self.bytes.len(), k.len(), v.len()));
        self.bytes.extend_from_slice(k);
        self.bytes.extend_from_slice(v);
    }

    fn entry(&self, i: usize) -> (&[u8], &[u8]) {
        let (at, kl, vl) = self.spans[i];
        (&self.bytes[at..at + kl], &self.bytes[at + kl..at + kl + vl])
    }

    fn len(&self) -> usize {
        self.spans.len()
    }
}

/// What an entry adds to a data block, about: key, value, and their lengths' varints.
fn entry_bytes(k: usize, v: usize) -> u64 {
    (k + v + 3) as u64
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
    /// The last key added.
    last_key: Vec<u8>,
    /// The last key written to a data block.
    block_last: Vec<u8>,
    /// With a learned index, every entry until `finish`.
    buffered: Option<Buffered>,
    /// Slot and handle of each data block written by the learned cut.
    learned_blocks: Vec<(u32, BlockHandle)>,
    /// The learned block's contents, once the cut is written.
    learned_model: Option<Vec<u8>>,
    props: TableProps,
    offset: u64,
}

impl TableBuilder {
    /// A builder writing to `file` (at `path`, for error messages).
    pub fn new(file: Box<dyn WritableFile>, path: &Path, opts: TableOptions) -> TableBuilder {
        let restart = opts.restart_interval;
        let buffered = (opts.index == IndexKind::Learned).then(Buffered::default);
        TableBuilder {
            file,
            path: path.to_path_buf(),
            opts,
            block: BlockBuilder::new(restart),
            index: Vec::new(),
            pending: None,
            hashes: Vec::new(),
            last_key: Vec::new(),
            block_last: Vec::new(),
            buffered,
            learned_blocks: Vec::new(),
            learned_model: None,
            props: TableProps::default(),
            offset: 0,
        }
    }

    /// Bytes written so far plus the open block.
    pub fn estimated_size(&self) -> u64 {
        let held = self.buffered.as_ref().map_or(0, |b| b.bytes.len() + 3 * b.len());
        self.offset + self.block.size_estimate() as u64 + held as u64
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
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        match &mut self.buffered {
            Some(b) => {
                b.push(ikey, value);
                Ok(())
            }
            None => self.append_entry(ikey, value),
        }
    }

    /// Adds an entry to the open data block, cutting blocks by size.
    fn append_entry(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if let Some((last, h)) = self.pending.take() {
            let sep = separator(&last, ikey);
            self.index.push((sep, h));
        }
        self.block.add(ikey, value);
        self.block_last.clear();
        self.block_last.extend_from_slice(ikey);
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
        self.pending = Some((self.block_last.clone(), h));
        Ok(())
    }

    /// Writes the buffered entries: cut where a trained model says (true),
    /// or by size for the binary index if the model does not train (false).
    fn write_buffered(&mut self, buf: &Buffered) -> Result<bool> {
        let plan = if buf.bytes.len() as u64 + 16 * buf.len() as u64 >= u32::MAX as u64 {
            None // learned tables address their blocks with 32 bits
        } else {
            let (keys, ys) = distinct_keys(buf);
            let block_size = u32::try_from(self.opts.block_size).unwrap_or(u32::MAX);
            train::train(&keys, &ys, block_size).ok()
        };
        let Some(plan) = plan else {
            for i in 0..buf.len() {
                let (k, v) = buf.entry(i);
                self.append_entry(k, v)?;
            }
            return Ok(false);
        };
        let mut key_index = 0usize;
        let mut slot = None;
        for i in 0..buf.len() {
            let (k, v) = buf.entry(i);
            if i > 0 && user_key(k) != user_key(buf.entry(i - 1).0) {
                key_index += 1;
            }
            let s = plan.slots.get(key_index).copied();
            if slot.is_some() && s != slot {
                self.flush_learned_block(slot)?;
            }
            slot = s;
            self.block.add(k, v);
        }
        self.flush_learned_block(slot)?;
        self.learned_model = Some(learned::encode(&plan.model, &self.learned_blocks));
        Ok(true)
    }

    fn flush_learned_block(&mut self, slot: Option<u32>) -> Result<()> {
        let (Some(slot), false) = (slot, self.block.is_empty()) else { return Ok(()) };
        let raw = self.block.finish();
        let h = self.write_block(&raw, self.opts.compression)?;
        self.props.data_blocks += 1;
        self.learned_blocks.push((slot, h));
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
        let learned = match self.buffered.take() {
            Some(buf) => self.write_buffered(&buf)?,
            None => false,
        };
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
        let (index_block, index_kind) = match self.learned_model.take() {
            Some(b) if learned => (b, IndexKind::Learned),
            _ => (BinaryIndex::encode(&self.index), IndexKind::Binary),
        };
        let index = self.write_block(&index_block, Compression::None)?;
        let props_block = self.props.encode();
        let props = self.write_block(&props_block, Compression::None)?;
        let footer = Footer { filter, index, props, index_kind };
        self.append(&footer.encode())?;
        self.file.sync().map_err(|e| Error::io(&self.path, "fsync", e))?;
        Ok((self.offset, self.props))
    }
}

/// The distinct user keys of `buf` and where each one's entries start
/// (about, in data-block bytes), with the end of the data last.
fn distinct_keys(buf: &Buffered) -> (Vec<&[u8]>, Vec<u64>) {
    let (mut keys, mut ys): (Vec<&[u8]>, Vec<u64>) = (Vec::new(), Vec::new());
    let mut y = 0u64;
    for i in 0..buf.len() {
        let (k, v) = buf.entry(i);
        let uk = user_key(k);
        if keys.last() != Some(&uk) {
            keys.push(uk);
            ys.push(y);
        }
        y += entry_bytes(k.len(), v.len());
    }
    ys.push(y);
    (keys, ys)
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
