//! The `stratakv` Python package: StrataKV from Python, in the style of
//! plyvel (LevelDB) and rocksdict (RocksDB).
//!
//! | file | what |
//! | --- | --- |
//! | `lib.rs` | the module, the exception hierarchy, argument conversion |
//! | `db.rs` | `DB`: open, reads, writes, maintenance, close |
//! | `options.rs` | keyword arguments of `DB(...)` to `stratakv::Options` |
//! | `batch.rs` | `WriteBatch` |
//! | `snapshot.rs` | `Snapshot` |
//! | `partition.rs` | `Partition`'s methods, and what `DB`'s partition methods share |
//! | `partition_type.rs` | the `Partition` class's data (`WriteBatch` takes partitions) |
//! | `iter.rs` | `Iterator`, which fetches entries in batches |
//! | `handle.rs` | what an open database shares with its iterators and snapshots, and closing |
//!
//! Every call that may touch the disk or PM runs with the GIL released
//! (`Python::detach`). Locks of this crate are only ever taken while the
//! GIL is released, so a thread that waits for one never holds the GIL
//! that the lock's holder needs to finish.

#![forbid(unsafe_code)]

mod batch;
mod db;
mod handle;
mod iter;
mod options;
mod partition;
mod partition_type;
mod snapshot;

use std::borrow::Cow;

use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView};

pyo3::create_exception!(
    stratakv,
    Error,
    PyException,
    "Base class of every error StrataKV raises; the message is the engine's."
);
pyo3::create_exception!(stratakv, IoError, Error, "A file-system call failed.");
pyo3::create_exception!(
    stratakv,
    CorruptionError,
    Error,
    "Stored bytes failed a check (checksum, magic, bounds or ordering)."
);
pyo3::create_exception!(
    stratakv,
    InvalidArgument,
    Error,
    "An argument the engine cannot accept: an unknown option or profile, a bad option value, a key or value over the limits."
);
pyo3::create_exception!(
    stratakv,
    PmFull,
    Error,
    "The persistent-memory region has no room and none was freed in time."
);
pyo3::create_exception!(stratakv, DiskFull, Error, "The SSD has no room (ENOSPC).");
pyo3::create_exception!(
    stratakv,
    LockedError,
    Error,
    "Another process (or another open DB in this one) holds the database directory."
);
pyo3::create_exception!(
    stratakv,
    PoisonedError,
    Error,
    "An earlier write failure left durable state unknown; the database refuses writes until it is reopened."
);
pyo3::create_exception!(stratakv, ClosedError, Error, "The database, or the snapshot or iterator used, is closed.");
pyo3::create_exception!(stratakv, PmError, Error, "A persistent-memory region problem that is not corruption.");

/// The Python exception for an engine error, carrying the engine's message.
pub(crate) fn to_py(e: &stratakv::Error) -> PyErr {
    use stratakv::Error as E;
    let msg = e.to_string();
    match e {
        E::Io { .. } => IoError::new_err(msg),
        E::Corruption { .. } => CorruptionError::new_err(msg),
        E::InvalidArgument(_) => InvalidArgument::new_err(msg),
        E::PmFull(_) => PmFull::new_err(msg),
        E::DiskFull { .. } => DiskFull::new_err(msg),
        E::Locked { .. } => LockedError::new_err(msg),
        E::Poisoned(_) => PoisonedError::new_err(msg),
        E::Closed => ClosedError::new_err(msg),
        E::Pm(_) => PmError::new_err(msg),
        // `stratakv::Error` is non_exhaustive: a variant added later is
        // still a stratakv.Error with its message.
        _ => Error::new_err(msg),
    }
}

/// `to_py` for an owned error (for `map_err`).
pub(crate) fn err(e: stratakv::Error) -> PyErr {
    to_py(&e)
}

/// The error raised by anything used after `close()`.
pub(crate) fn closed() -> PyErr {
    ClosedError::new_err("database is closed")
}

/// The bytes of a key or value argument: `bytes` (borrowed, no copy),
/// `bytearray` or `memoryview` (copied, as they may change while the GIL
/// is released). Anything else, `str` included, is a TypeError: there is
/// no silent encoding.
pub(crate) fn bytes_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Cow::Owned(b.to_vec()));
    }
    if obj.is_instance_of::<PyMemoryView>() {
        let b = obj.call_method0("tobytes")?;
        let b = b.cast::<PyBytes>()?;
        return Ok(Cow::Owned(b.as_bytes().to_vec()));
    }
    let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    let hint = if ty == "str" { " (encode it first, e.g. s.encode())" } else { "" };
    Err(PyTypeError::new_err(format!("{what} must be bytes, bytearray or memoryview, not {ty}{hint}")))
}

/// Like [`bytes_arg`] for an optional argument (None = absent).
pub(crate) fn opt_bytes_arg<'a>(obj: Option<&'a Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Cow<'a, [u8]>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => bytes_arg(o, what).map(Some),
    }
}

/// Rejects a key over the engine's limit before a read looks it up (writes
/// get the same check from the engine's batch).
pub(crate) fn check_key(key: &[u8]) -> PyResult<()> {
    if key.len() > stratakv::MAX_KEY_LEN {
        return Err(InvalidArgument::new_err(format!(
            "invalid argument: key of {} bytes exceeds the {}-byte limit",
            key.len(),
            stratakv::MAX_KEY_LEN
        )));
    }
    Ok(())
}

/// StrataKV: a key-value storage engine for DRAM + persistent memory + SSD.
///
/// Open a database with `stratakv.DB(path, ...)`; keys and values are bytes.
#[pymodule(name = "stratakv")]
fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<db::PyDb>()?;
    m.add_class::<batch::PyWriteBatch>()?;
    m.add_class::<snapshot::PySnapshot>()?;
    m.add_class::<iter::PyIter>()?;
    m.add_class::<partition::PyPartition>()?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("PmFull", py.get_type::<PmFull>())?;
    m.add("DiskFull", py.get_type::<DiskFull>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("PoisonedError", py.get_type::<PoisonedError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("PmError", py.get_type::<PmError>())?;
    m.add("MAX_KEY_LEN", stratakv::MAX_KEY_LEN)?;
    m.add("MAX_VALUE_LEN", stratakv::MAX_VALUE_LEN)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
