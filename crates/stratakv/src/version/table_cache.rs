//! Open tables, shared by readers and compactions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use super::filename::table_path;
use crate::error::Result;
use crate::fs::{BatchReader, Fs};
use crate::sstable::{BlockCache, BlockReads, IndexKind, Table};

/// Keeps every live table open (index and filter in DRAM).
pub struct TableCache {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    blocks: Option<Arc<BlockCache>>,
    reads: Arc<BlockReads>,
    tables: RwLock<HashMap<u64, Arc<Table>>>,
    /// Open table files with O_DIRECT.
    direct: bool,
    /// Reads the blocks of a multi-get in one batch.
    batch: BatchReader,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache").field("open", &self.tables.read().len()).finish()
    }
}

impl TableCache {
    /// A cache for tables in `dir`.
    pub fn new(fs: Arc<dyn Fs>, dir: &Path, blocks: Option<Arc<BlockCache>>) -> TableCache {
        TableCache {
            fs,
            dir: dir.to_path_buf(),
            blocks,
            reads: Arc::default(),
            tables: RwLock::new(HashMap::new()),
            direct: false,
            batch: BatchReader::new(true),
        }
    }

    /// Opens table files with O_DIRECT (`Options::use_direct_reads`).
    pub fn with_direct_reads(mut self, direct: bool) -> TableCache {
        self.direct = direct;
        self
    }

    /// The batch reader of multi-gets.
    pub fn batch_reader(&self) -> &BatchReader {
        &self.batch
    }

    /// The open table `number`, opening it if needed.
    pub fn get(&self, number: u64) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.read().get(&number) {
            return Ok(t.clone());
        }
        let path = table_path(&self.dir, number);
        let t = Arc::new(
            Table::open_with(&*self.fs, &path, number, self.blocks.clone(), self.direct)?
                .with_read_counters(self.reads.clone()),
        );
        self.tables.write().entry(number).or_insert_with(|| t.clone());
        Ok(t)
    }

    /// Forgets a table (its file is about to be deleted).
    pub fn evict(&self, number: u64) {
        self.tables.write().remove(&number);
    }

    /// DRAM held by open tables' indexes and filters.
    pub fn memory_bytes(&self) -> usize {
        self.tables.read().values().map(|t| t.memory_bytes()).sum()
    }

    /// Index kinds and DRAM of the tables `numbers` (opening those not open
    /// yet; a table that fails to open is left out, its error shows on reads).
    pub fn census(&self, numbers: impl Iterator<Item = u64>) -> TableCensus {
        let mut c = TableCensus::default();
        for t in numbers.filter_map(|n| self.get(n).ok()) {
            match t.index_kind() {
                IndexKind::Learned => c.learned += 1,
                IndexKind::Binary => c.binary += 1,
            }
            c.index_bytes += t.index_memory_bytes() as u64;
            c.filter_bytes += (t.memory_bytes() - t.index_memory_bytes()) as u64;
        }
        c
    }

    /// Data blocks users read from these tables, and how many came from the files.
    pub fn block_reads(&self) -> &BlockReads {
        &self.reads
    }

    /// The shared block cache.
    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.blocks.as_ref()
    }
}

/// What [`TableCache::census`] counts.
#[derive(Clone, Copy, Debug, Default)]
pub struct TableCensus {
    /// Tables with a learned index.
    pub learned: u64,
    /// Tables with a binary index.
    pub binary: u64,
    /// DRAM of their indexes.
    pub index_bytes: u64,
    /// DRAM of their filters.
    pub filter_bytes: u64,
}
