//! Errors of the PM layer.

use std::io;
use std::path::PathBuf;

/// An error from the PM region.
#[derive(Debug)]
#[non_exhaustive]
pub enum PmError {
    /// A system call on the region file failed.
    Io {
        /// The region file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// The region's bytes do not make sense (bad superblock, overlapping extents, ...).
    Corruption {
        /// Byte offset in the region where the problem was found.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// No run of free slots is long enough for the requested extent.
    Full {
        /// Slots that were requested.
        wanted: u64,
        /// Slots free in total (possibly fragmented).
        free: u64,
    },
    /// An access fell outside the region or outside the caller's extent.
    OutOfRange {
        /// Start of the access.
        offset: u64,
        /// Length of the access.
        len: u64,
    },
    /// The options cannot describe a region (size too small, slot size not a multiple of 4 KiB, ...).
    InvalidOptions(String),
}

impl std::fmt::Display for PmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PmError::Io { path, op, source } => {
                write!(f, "PM region {}: {op} failed: {source}", path.display())
            }
            PmError::Corruption { offset, reason } => {
                write!(f, "PM region corrupted at offset {offset}: {reason}")
            }
            PmError::Full { wanted, free } => {
                write!(f, "PM region full: need {wanted} contiguous slots, {free} free")
            }
            PmError::OutOfRange { offset, len } => {
                write!(f, "PM access out of range: offset {offset}, length {len}")
            }
            PmError::InvalidOptions(why) => write!(f, "invalid PM region options: {why}"),
        }
    }
}

impl std::error::Error for PmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PmError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
