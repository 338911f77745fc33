//! StrataKV: a key-value storage engine for DRAM + persistent memory + SSD.
#![forbid(unsafe_code)]

pub mod coding;
pub mod error;
pub mod fs;
pub mod iterator;
pub mod key;
pub mod memtable;
pub mod sstable;

pub use error::{Error, Result};
