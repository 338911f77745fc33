//! The engine's one error type.

use std::io;
use std::path::{Path, PathBuf};

use strata_pmem::PmError;

/// Result with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file-system call failed.
    #[error("I/O error: {op} {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operation (open, write, fsync, rename, ...).
        op: &'static str,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// Stored bytes fail a check (checksum, magic, bounds, ordering).
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        /// The file (SSTable, MANIFEST, PM region) holding the bad bytes.
        file: PathBuf,
        /// Byte offset of the bad record or block in that file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The caller passed something the engine cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The PM region has no room and none was freed in time.
    #[error("PM region full: {0}")]
    PmFull(String),
    /// The SSD has no room (ENOSPC).
    #[error("disk full: {op} {}", path.display())]
    DiskFull {
        /// The file being written.
        path: PathBuf,
        /// The operation.
        op: &'static str,
    },
    /// Another process (or another `Db` in this one) has the directory open.
    #[error("database {} is locked by another process", path.display())]
    Locked {
        /// The data directory.
        path: PathBuf,
    },
    /// An earlier write failure left durable state unknown; the database
    /// refuses writes until it is reopened (see DURABILITY.md).
    #[error("database refuses writes after an earlier failure (reopen to recover): {0}")]
    Poisoned(String),
    /// The database is shutting down or closed.
    #[error("database is closed")]
    Closed,
    /// A sharded database was opened with a shard count other than the one
    /// it was created with (keys would hash to other shards).
    #[error("sharded database {} has {stored} shards, opened with {requested}", path.display())]
    ShardCount {
        /// The sharded database's directory.
        path: PathBuf,
        /// The count recorded at creation.
        stored: usize,
        /// The count the caller asked for.
        requested: usize,
    },
    /// A PM-region problem that is not corruption.
    #[error("PM region: {0}")]
    Pm(String),
}

impl Error {
    /// Whether this is corruption of stored data.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// Whether the store ran out of space (PM or disk).
    pub fn is_full(&self) -> bool {
        matches!(self, Error::PmFull(_) | Error::DiskFull { .. })
    }

    pub(crate) fn io(path: impl AsRef<Path>, op: &'static str, source: io::Error) -> Error {
        let path = path.as_ref().to_path_buf();
        if source.kind() == io::ErrorKind::StorageFull || source.raw_os_error() == Some(28) {
            Error::DiskFull { path, op }
        } else {
            Error::Io { path, op, source }
        }
    }

    pub(crate) fn corruption(file: impl AsRef<Path>, offset: u64, reason: impl Into<String>) -> Error {
        Error::Corruption { file: file.as_ref().to_path_buf(), offset, reason: reason.into() }
    }

    pub(crate) fn from_pm(path: &Path, e: PmError) -> Error {
        match e {
            PmError::Corruption { offset, reason } => Error::corruption(path, offset, reason),
            PmError::Full { wanted, free } => Error::PmFull(format!("need {wanted} contiguous slots, {free} free")),
            PmError::Io { path, op, source } => Error::io(path, op, source),
            PmError::OutOfRange { offset, len } => {
                Error::corruption(path, offset, format!("reference of {len} bytes points outside the PM region"))
            }
            other => Error::Pm(other.to_string()),
        }
    }
}
