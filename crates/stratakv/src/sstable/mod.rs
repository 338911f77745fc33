//! SSTables: immutable sorted files of internal keys (format in FORMAT.md).
//!
//! A table is data blocks (prefix-compressed, with restart points), a bloom
//! filter over user keys, an index block behind the `TableIndex`
//! interface, a properties block and a fixed footer; every block carries a
//! CRC32C.

mod block;
mod bloom;
mod builder;
mod cache;
mod format;
mod index;
mod props;
mod reader;

pub use block::{Block, BlockBuilder, BlockIter};
pub use builder::{TableBuilder, TableOptions};
pub use cache::BlockCache;
pub use format::{BlockHandle, Compression};
pub use reader::{BlockReads, Table, TableIter};

#[cfg(test)]
mod tests;
