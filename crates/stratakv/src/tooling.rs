//! The engine's insides that the project's own tools reach: the `strata`
//! command (`dump`, `check`), strata-stress (fuzz targets, corpora) and the
//! fuzz crate. Not an interface for applications: it follows the on-disk
//! and on-PM formats (FORMAT.md) and changes with them.

pub use crate::iterator::InternalIterator;
pub use crate::key::{internal_key, key_hash, Kind, ParsedKey, KIND_FOR_SEEK};
pub use crate::log::EXTENT_KIND_LOG;
pub use crate::matrix::build::EXTENT_KIND_ROW;
pub use crate::matrix::MatrixRecord;
pub use crate::pmtree::EXTENT_KIND_TREE;
pub use crate::sstable::{Block, BlockBuilder, BlockIter, Table};
pub use crate::version::manifest::decode_records as decode_manifest_records;
pub use crate::version::{VersionEdit, VersionSet};
