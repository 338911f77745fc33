//! Open tables, shared by readers and compactions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use super::filename::table_path;
use crate::error::Result;
use crate::fs::Fs;
use crate::sstable::{BlockCache, BlockReads, Table};

/// Keeps every live table open (index and filter in DRAM).
pub struct TableCache {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    blocks: Option<Arc<BlockCache>>,
    reads: Arc<BlockReads>,
    tables: RwLock<HashMap<u64, Arc<Table>>>,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache").field("open", &self.tables.read().len()).finish()
    }
}

impl TableCache {
    /// A cache for tables in `dir`.
    pub fn new(fs: Arc<dyn Fs>, dir: &Path, blocks: Option<Arc<BlockCache>>) -> TableCache {
        TableCache { fs, dir: dir.to_path_buf(), blocks, reads: Arc::default(), tables: RwLock::new(HashMap::new()) }
    }

    /// The open table `number`, opening it if needed.
    pub fn get(&self, number: u64) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.read().get(&number) {
            return Ok(t.clone());
        }
        let path = table_path(&self.dir, number);
        let t = Arc::new(
            Table::open(&*self.fs, &path, number, self.blocks.clone())?.with_read_counters(self.reads.clone()),
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

    /// Data blocks users read from these tables, and how many came from the files.
    pub fn block_reads(&self) -> &BlockReads {
        &self.reads
    }

    /// The shared block cache.
    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.blocks.as_ref()
    }
}
