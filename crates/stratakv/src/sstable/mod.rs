//! SSTables: immutable sorted files of internal keys (format in FORMAT.md).
//!
//! A table is data blocks (prefix-compressed, with restart points), a bloom
//! filter over user keys, an index block behind the `TableIndex`
//! interface (binary-searched separators, or a learned model whose blocks
//! were cut to match it), a properties block and a fixed footer; every
//! block carries a CRC32C.

mod block;
mod bloom;
mod builder;
mod cache;
mod format;
mod index;
mod keycode;
mod learned;
mod props;
mod reader;
mod train;

pub use block::{Block, BlockBuilder, BlockIter};
pub use builder::{TableBuilder, TableOptions};
pub use cache::BlockCache;
pub use format::{BlockHandle, Compression, IndexKind};
pub use reader::{BlockReads, Table, TableIter};

#[cfg(test)]
mod learned_tests;
#[cfg(test)]
mod tests;
