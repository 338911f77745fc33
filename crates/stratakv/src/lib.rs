//! StrataKV: a key-value storage engine for DRAM + persistent memory + SSD.
//!
//! Writes go once into a log in persistent memory (PM) and are indexed by a
//! DRAM skiplist; sealed memtables become tables on SSD, compacted level by
//! level. See DESIGN.md at the repository root for the map.
//!
//! ```no_run
//! # fn main() -> stratakv::Result<()> {
//! let db = stratakv::Db::open("data", stratakv::Options::default())?;
//! db.put(b"k", b"v")?;
//! assert_eq!(db.get(b"k")?.as_deref(), Some(&b"v"[..]));
//! let mut batch = stratakv::WriteBatch::new();
//! batch.put(b"a", b"1").delete(b"k");
//! db.write(batch)?;
//! for (k, v) in db.iter(..)? {
//!     println!("{:?} = {:?}", k, v);
//! }
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod batch;
mod coding;
mod compaction;
mod db;
mod engine;
mod error;
mod filter;
pub mod fs;
mod iterator;
mod key;
mod l0;
mod log;
mod matrix;
mod memtable;
mod options;
mod partition;
mod pmlist;
mod pmtree;
mod sharded;
mod sstable;
mod stats;
mod version;

pub mod tooling;

#[cfg(test)]
mod test_util;

pub use batch::WriteBatch;
#[cfg(test)]
pub(crate) use db::tests_support;
pub use db::{Cursor, Db, DbIter, Snapshot, REGION_FILE};
pub use error::{Error, Result};
pub use key::partition::PARTITION_PREFIX_LEN;
pub use key::{FixedPrefix, KeyRange, PrefixExtractor, MAX_KEY_LEN, MAX_VALUE_LEN};
pub use options::{L0Kind, Options, ReadOptions, WriteOptions};
pub use partition::split::RangePartition;
pub use partition::{Partition, DEFAULT_PARTITION};
pub use sharded::{
    recorded_shards, Completion, Sharded, ShardedIter, ShardedOptions, ShardedSnapshot, ShardedStats, COORD_FILE,
    META_PREFIX, SHARDS_FILE,
};
pub use sstable::{Compression, IndexKind};
pub use stats::{LevelStats, Stats};
