//! POSIX-style errors of the namespace service, carried over the wire.

use serde::{Deserialize, Serialize};

/// An error of a namespace operation: a POSIX errno, a stale-cache refusal,
/// or a transport/storage failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum FsError {
    /// No such file or directory (ENOENT).
    #[error("no such file or directory")]
    NotFound,
    /// The name already exists (EEXIST).
    #[error("file exists")]
    Exists,
    /// A path component that must be a directory is not one (ENOTDIR).
    #[error("not a directory")]
    NotDir,
    /// A directory was given where a file is needed (EISDIR).
    #[error("is a directory")]
    IsDir,
    /// The directory is not empty (ENOTEMPTY).
    #[error("directory not empty")]
    NotEmpty,
    /// The caller lacks permission (EACCES).
    #[error("permission denied")]
    Access,
    /// The operation is not permitted for this caller (EPERM).
    #[error("operation not permitted")]
    Perm,
    /// Invalid argument, e.g. moving a directory under itself (EINVAL).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The request was resolved through cached directories that have since
    /// been renamed, removed or re-permissioned; the ids name them.
    #[error("stale cache entries: {0:?}")]
    Stale(Vec<u64>),
    /// The server could not be reached or the connection broke (EIO); the
    /// operation may or may not have taken effect.
    #[error("transport: {0}")]
    Transport(String),
    /// The storage engine or a record on disk failed (EIO).
    #[error("storage: {0}")]
    Storage(String),
}

impl FsError {
    /// The errno this error maps to (for FUSE and the CLI's exit status).
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => libc::ENOENT,
            FsError::Exists => libc::EEXIST,
            FsError::NotDir => libc::ENOTDIR,
            FsError::IsDir => libc::EISDIR,
            FsError::NotEmpty => libc::ENOTEMPTY,
            FsError::Access => libc::EACCES,
            FsError::Perm => libc::EPERM,
            FsError::Invalid(_) => libc::EINVAL,
            FsError::Stale(_) => libc::ESTALE,
            FsError::Transport(_) | FsError::Storage(_) => libc::EIO,
        }
    }
}

impl From<stratakv::Error> for FsError {
    fn from(e: stratakv::Error) -> Self {
        FsError::Storage(e.to_string())
    }
}

impl From<bincode::Error> for FsError {
    fn from(e: bincode::Error) -> Self {
        FsError::Storage(format!("decode: {e}"))
    }
}

/// Result of a namespace operation.
pub type FsResult<T> = Result<T, FsError>;
