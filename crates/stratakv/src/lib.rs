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

pub mod batch;
pub mod coding;
pub mod compaction;
pub mod db;
pub mod error;
pub mod fs;
pub mod iterator;
pub mod key;
pub mod log;
pub mod matrix;
pub mod memtable;
pub mod options;
pub mod prefix;
pub mod sstable;
pub mod version;

#[cfg(test)]
mod test_util;

pub use batch::WriteBatch;
pub use db::{Cursor, Db, DbIter, KeyRange, LevelStats, Snapshot, Stats, REGION_FILE};
pub use error::{Error, Result};
pub use options::{L0Kind, Options, ReadOptions, WriteOptions};
pub use prefix::{FixedPrefix, PrefixExtractor};
pub use sstable::Compression;
