//! The block cache: decoded blocks shared by all tables, with a byte budget.
//! Sharded (quick_cache), so concurrent readers rarely contend.

use std::sync::Arc;

use super::block::Block;

#[derive(Clone, Copy, Debug, Default)]
struct BlockWeight;

impl quick_cache::Weighter<(u64, u64), Arc<Block>> for BlockWeight {
    fn weight(&self, _key: &(u64, u64), val: &Arc<Block>) -> u64 {
        val.size() as u64 + 64
    }
}

/// Decoded blocks keyed by (table number, block offset).
pub struct BlockCache {
    inner: quick_cache::sync::Cache<(u64, u64), Arc<Block>, BlockWeight>,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache").field("bytes", &self.inner.weight()).finish()
    }
}

impl BlockCache {
    /// A cache holding at most about `bytes` of blocks.
    pub fn new(bytes: u64) -> BlockCache {
        let items = (bytes / 4096).clamp(16, 1 << 22) as usize;
        BlockCache { inner: quick_cache::sync::Cache::with_weighter(items, bytes.max(1), BlockWeight) }
    }

    /// A cached block.
    pub fn get(&self, table: u64, offset: u64) -> Option<Arc<Block>> {
        self.inner.get(&(table, offset))
    }

    /// Caches a block.
    pub fn insert(&self, table: u64, offset: u64, block: Arc<Block>) {
        self.inner.insert((table, offset), block);
    }

    /// Bytes currently cached.
    pub fn used_bytes(&self) -> u64 {
        self.inner.weight()
    }

    /// The budget.
    pub fn capacity_bytes(&self) -> u64 {
        self.inner.capacity()
    }
}
