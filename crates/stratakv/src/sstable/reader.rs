//! Opening and reading a table file.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use super::block::{Block, BlockIter};
use super::bloom;
use super::cache::BlockCache;
use super::format::{unwrap_block, BlockHandle, Footer, IndexKind, BLOCK_TRAILER_LEN, FOOTER_LEN};
use super::index::{BinaryIndex, TableIndex};
use super::learned::LearnedIndex;
use super::props::TableProps;
use crate::error::{Error, Result};
use crate::fs::{Fs, RandomAccessFile, ReadRequest};
use crate::iterator::InternalIterator;
use crate::key::{compare_internal, user_key};

/// Data blocks read for users (gets, scans), shared by the tables of one
/// database; compactions' reads are not counted.
#[derive(Debug, Default)]
pub struct BlockReads {
    /// Data blocks fetched, from the block cache or the file.
    pub fetched: AtomicU64,
    /// Of those, read from the file (the block cache missed or is off).
    pub from_file: AtomicU64,
}

/// An open table: index, filter and properties in DRAM, data blocks read on demand.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<PathBuf>,
    number: u64,
    size: u64,
    index: Box<dyn TableIndex>,
    index_kind: IndexKind,
    filter: Option<Vec<u8>>,
    props: TableProps,
    cache: Option<Arc<BlockCache>>,
    reads: Option<Arc<BlockReads>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("path", &self.path).field("size", &self.size).finish()
    }
}

impl Table {
    /// Opens table `number` at `path`, checking footer, index, filter and properties.
    pub fn open(fs: &dyn Fs, path: &Path, number: u64, cache: Option<Arc<BlockCache>>) -> Result<Table> {
        Table::open_with(fs, path, number, cache, false)
    }

    /// [`Table::open`], reading around the page cache (O_DIRECT) if `direct`.
    pub fn open_with(
        fs: &dyn Fs,
        path: &Path,
        number: u64,
        cache: Option<Arc<BlockCache>>,
        direct: bool,
    ) -> Result<Table> {
        let file = if direct { fs.open_direct(path) } else { fs.open(path) };
        let file = file.map_err(|e| Error::io(path, "open", e))?;
        let size = file.size();
        let path = Arc::new(path.to_path_buf());
        if size < FOOTER_LEN as u64 {
            return Err(Error::corruption(&*path, 0, format!("table of {size} bytes is shorter than a footer")));
        }
        let foff = size - FOOTER_LEN as u64;
        let mut fb = vec![0u8; FOOTER_LEN];
        file.read_at(foff, &mut fb).map_err(|e| Error::io(&*path, "read", e))?;
        let footer = Footer::decode(&fb, &path, foff)?;
        let read_meta = |h: BlockHandle| -> Result<Vec<u8>> { read_raw(&*file, &path, h, foff) };
        let index: Box<dyn TableIndex> = match footer.index_kind {
            IndexKind::Binary => {
                Box::new(BinaryIndex::decode(read_meta(footer.index)?, path.clone(), footer.index.offset)?)
            }
            IndexKind::Learned => {
                // Data blocks end where the first metadata block begins.
                let data_end = [footer.filter, footer.index, footer.props]
                    .iter()
                    .filter(|h| h.size > 0)
                    .map(|h| h.offset)
                    .min()
                    .unwrap_or(foff);
                Box::new(LearnedIndex::decode(&read_meta(footer.index)?, &path, footer.index.offset, data_end)?)
            }
        };
        let filter = if footer.filter.size > 0 { Some(read_meta(footer.filter)?) } else { None };
        let props = TableProps::decode(&read_meta(footer.props)?)
            .ok_or_else(|| Error::corruption(&*path, footer.props.offset, "malformed properties block"))?;
        for i in 0..index.num_blocks() {
            let h = index.block(i).unwrap_or_default();
            if h.offset.saturating_add(h.size).saturating_add(BLOCK_TRAILER_LEN as u64) > foff {
                return Err(Error::corruption(&*path, footer.index.offset, "index points past the data"));
            }
        }
        let index_kind = footer.index_kind;
        Ok(Table { file, path, number, size, index, index_kind, filter, props, cache, reads: None })
    }

    /// Which index the table carries.
    pub fn index_kind(&self) -> IndexKind {
        self.index_kind
    }

    /// DRAM held by the index alone.
    pub fn index_memory_bytes(&self) -> usize {
        self.index.memory_bytes()
    }

    /// Counts the data blocks users read from this table into `reads`.
    pub fn with_read_counters(mut self, reads: Arc<BlockReads>) -> Table {
        self.reads = Some(reads);
        self
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// File size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Table properties.
    pub fn props(&self) -> &TableProps {
        &self.props
    }

    /// DRAM held by index and filter.
    pub fn memory_bytes(&self) -> usize {
        self.index.memory_bytes() + self.filter.as_ref().map(|f| f.len()).unwrap_or(0)
    }

    /// Whether the filter admits a user key with hash `h` (true if no filter).
    pub fn may_contain(&self, h: u64) -> bool {
        match &self.filter {
            Some(f) => bloom::may_contain(f, h),
            None => true,
        }
    }

    /// Reads (through the cache) the data block with handle `h`.
    pub fn read_block(&self, h: BlockHandle) -> Result<Arc<Block>> {
        self.read_block_with(h, true)
    }

    /// Reads a data block; with `fill_cache` false a miss is not cached
    /// (compactions read whole tables once and should not evict hot blocks).
    pub fn read_block_with(&self, h: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        let counted = if fill_cache { self.reads.as_deref() } else { None };
        if let Some(r) = counted {
            r.fetched.fetch_add(1, AtomicOrdering::Relaxed);
        }
        if let Some(c) = &self.cache {
            if let Some(b) = c.get(self.number, h.offset) {
                return Ok(b);
            }
        }
        if let Some(r) = counted {
            r.from_file.fetch_add(1, AtomicOrdering::Relaxed);
        }
        let data = read_raw(&*self.file, &self.path, h, self.size)?;
        let block = Arc::new(Block::new(data, self.path.clone(), h.offset)?);
        if fill_cache {
            if let Some(c) = &self.cache {
                c.insert(self.number, h.offset, block.clone());
            }
        }
        Ok(block)
    }

    /// The cached data block with handle `h`, counted as a user read.
    pub fn cached_block(&self, h: BlockHandle) -> Option<Arc<Block>> {
        let b = self.cache.as_ref()?.get(self.number, h.offset)?;
        if let Some(r) = &self.reads {
            r.fetched.fetch_add(1, AtomicOrdering::Relaxed);
        }
        Some(b)
    }

    /// What to read from the file for data block `h` (block and trailer).
    pub fn block_request(&self, h: BlockHandle) -> ReadRequest {
        ReadRequest { file: self.file.clone(), offset: h.offset, len: (h.size as usize) + BLOCK_TRAILER_LEN }
    }

    /// The data block `h` from bytes read for [`Table::block_request`]:
    /// checked, counted as a user read from the file, and cached.
    pub fn block_from_read(&self, h: BlockHandle, raw: std::io::Result<Vec<u8>>) -> Result<Arc<Block>> {
        if let Some(r) = &self.reads {
            r.fetched.fetch_add(1, AtomicOrdering::Relaxed);
            r.from_file.fetch_add(1, AtomicOrdering::Relaxed);
        }
        let raw = raw.map_err(|e| Error::io(&*self.path, "read", e))?;
        let data = unwrap_block(&raw, &self.path, h.offset)?;
        let block = Arc::new(Block::new(data, self.path.clone(), h.offset)?);
        if let Some(c) = &self.cache {
            c.insert(self.number, h.offset, block.clone());
        }
        Ok(block)
    }

    /// The index's block for `seek_key` (after the filter admitted it), if any.
    pub fn find_block(&self, seek_key: &[u8]) -> Option<(usize, BlockHandle)> {
        let i = self.index.find_block(seek_key)?;
        Some((i, self.index.block(i)?))
    }

    /// Handle of data block `i`.
    pub fn block_handle(&self, i: usize) -> Option<BlockHandle> {
        self.index.block(i)
    }

    /// The table's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The first entry >= `seek_key` if its user key is `ukey`: (internal key, value).
    pub fn get(&self, seek_key: &[u8], ukey: &[u8], hash: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if !self.may_contain(hash) {
            return Ok(None);
        }
        let Some(mut i) = self.index.find_block(seek_key) else { return Ok(None) };
        // A shortened separator can sit past the block's last key; then the
        // answer is the first entry of the next block.
        for _ in 0..2 {
            let Some(h) = self.index.block(i) else { return Ok(None) };
            let mut it = BlockIter::new(self.read_block(h)?);
            it.seek(seek_key)?;
            if it.valid() {
                if user_key(it.key()) == ukey {
                    return Ok(Some((it.key().to_vec(), it.value().to_vec())));
                }
                return Ok(None);
            }
            i += 1;
        }
        Ok(None)
    }

    /// Handles of every data block, in key order.
    pub fn block_handles(&self) -> Vec<BlockHandle> {
        (0..self.index.num_blocks()).filter_map(|i| self.index.block(i)).collect()
    }

    /// In data block `h` only (no filter, no index search: the block a
    /// single-level tree entry names), the first entry >= `seek_key` if its
    /// user key is `ukey`: (internal key, value).
    pub fn get_in_block(&self, h: BlockHandle, seek_key: &[u8], ukey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut it = BlockIter::new(self.read_block(h)?);
        it.seek(seek_key)?;
        if it.valid() && user_key(it.key()) == ukey {
            return Ok(Some((it.key().to_vec(), it.value().to_vec())));
        }
        Ok(None)
    }

    /// A cursor over the table.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        TableIter { table: self.clone(), block_idx: 0, data: None, fill_cache: true }
    }

    /// A cursor for compactions: blocks it reads are not added to the cache.
    pub fn compaction_iter(self: &Arc<Self>) -> TableIter {
        TableIter { table: self.clone(), block_idx: 0, data: None, fill_cache: false }
    }

    /// Reads every block, checking checksums and key order. Returns entries seen.
    pub fn verify(self: &Arc<Self>) -> Result<u64> {
        let mut it = self.iter();
        let mut n = 0u64;
        let mut prev: Option<Vec<u8>> = None;
        it.seek_to_first()?;
        while it.valid() {
            // A learned index must send every key to the block that holds it.
            if self.index_kind == IndexKind::Learned && self.index.find_block(it.key()) != Some(it.block_idx) {
                return Err(Error::corruption(
                    &*self.path,
                    self.index.block(it.block_idx).map_or(0, |h| h.offset),
                    "the learned index sends a key to another block",
                ));
            }
            if let Some(p) = &prev {
                if compare_internal(p, it.key()) != Ordering::Less {
                    return Err(Error::corruption(&*self.path, 0, "keys out of order"));
                }
            }
            prev = Some(it.key().to_vec());
            n += 1;
            it.next()?;
        }
        if n != self.props.entries {
            return Err(Error::corruption(
                &*self.path,
                0,
                format!("properties say {} entries, found {n}", self.props.entries),
            ));
        }
        Ok(n)
    }
}

fn read_raw(file: &dyn RandomAccessFile, path: &Path, h: BlockHandle, limit: u64) -> Result<Vec<u8>> {
    let len = h.size.checked_add(BLOCK_TRAILER_LEN as u64).filter(|l| h.offset.saturating_add(*l) <= limit);
    let Some(len) = len else {
        return Err(Error::corruption(path, h.offset, format!("block of {} bytes runs past the file", h.size)));
    };
    let mut raw = vec![0u8; len as usize];
    file.read_at(h.offset, &mut raw).map_err(|e| Error::io(path, "read", e))?;
    unwrap_block(&raw, path, h.offset)
}

/// A cursor over a whole table (index → data blocks).
pub struct TableIter {
    table: Arc<Table>,
    block_idx: usize,
    data: Option<BlockIter>,
    fill_cache: bool,
}

impl TableIter {
    fn load(&mut self, i: usize) -> Result<bool> {
        self.block_idx = i;
        match self.table.index.block(i) {
            Some(h) => {
                self.data = Some(BlockIter::new(self.table.read_block_with(h, self.fill_cache)?));
                Ok(true)
            }
            None => {
                self.data = None;
                Ok(false)
            }
        }
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().map(|d| d.valid()).unwrap_or(false)
    }

    fn skip_forward(&mut self) -> Result<()> {
        while !self.data_valid() {
            let next = self.block_idx + 1;
            if self.data.is_none() || !self.load(next)? {
                self.data = None;
                return Ok(());
            }
            if let Some(d) = &mut self.data {
                d.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while !self.data_valid() {
            if self.data.is_none() || self.block_idx == 0 {
                self.data = None;
                return Ok(());
            }
            let prev = self.block_idx - 1;
            self.load(prev)?;
            if let Some(d) = &mut self.data {
                d.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.data_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if !self.load(0)? {
            return Ok(());
        }
        if let Some(d) = &mut self.data {
            d.seek_to_first()?;
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let n = self.table.index.num_blocks();
        if n == 0 || !self.load(n - 1)? {
            self.data = None;
            return Ok(());
        }
        if let Some(d) = &mut self.data {
            d.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let Some(i) = self.table.index.find_block(target) else {
            self.data = None;
            return Ok(());
        };
        if !self.load(i)? {
            return Ok(());
        }
        if let Some(d) = &mut self.data {
            d.seek(target)?;
        }
        self.skip_forward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(d) = &mut self.data {
            d.next()?;
        }
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(d) = &mut self.data {
            d.prev()?;
        }
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map(|d| d.key()).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map(|d| d.value()).unwrap_or(&[])
    }
}
