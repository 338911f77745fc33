//! `stratakv.WriteBatch`: puts and deletes applied atomically.

use pyo3::prelude::*;
use pyo3::types::PyType;
use stratakv::WriteBatch;

use std::sync::Arc;

use stratakv::WriteOptions;

use crate::handle::Handle;
use crate::{bytes_arg, InvalidArgument};

/// An ordered list of puts and deletes that a database applies all or
/// nothing, also across a crash.
///
/// Made by `db.write_batch()`; as a context manager it is written when the
/// `with` block ends normally and discarded when the block raises:
///
///     with db.write_batch() as wb:
///         wb.put(b"a", b"1")
///         wb.delete(b"b")
///
/// `WriteBatch()` makes an unbound batch, written with `db.write(batch)`.
#[pyclass(module = "stratakv", name = "WriteBatch")]
pub(crate) struct PyWriteBatch {
    batch: WriteBatch,
    /// The database `write()` and the end of a `with` block write to.
    db: Option<Arc<Handle>>,
    sync: bool,
}

impl PyWriteBatch {
    /// A batch that `write()` and the end of a `with` block write to `db`.
    pub fn bound(db: Arc<Handle>, sync: bool) -> PyWriteBatch {
        PyWriteBatch { batch: WriteBatch::new(), db: Some(db), sync }
    }

    /// The engine's batch.
    pub fn inner(&self) -> &WriteBatch {
        &self.batch
    }
}

#[pymethods]
impl PyWriteBatch {
    #[new]
    fn new() -> Self {
        PyWriteBatch { batch: WriteBatch::new(), db: None, sync: false }
    }

    /// Adds `key = value`. A key or value over the engine's limits makes
    /// the write of the whole batch raise InvalidArgument.
    fn put(&mut self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        let v = bytes_arg(value, "value")?;
        self.batch.put(&k, &v);
        Ok(())
    }

    /// Adds a deletion of `key`.
    fn delete(&mut self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        self.batch.delete(&k);
        Ok(())
    }

    /// Removes every update.
    fn clear(&mut self) {
        self.batch.clear();
    }

    /// Bytes of the encoded updates.
    fn approximate_size(&self) -> usize {
        self.batch.approximate_size()
    }

    /// Number of updates.
    fn __len__(&self) -> usize {
        self.batch.len()
    }

    /// Writes the batch to the database that made it and empties it.
    fn write(&mut self, py: Python<'_>) -> PyResult<()> {
        let db = match &self.db {
            Some(db) => db,
            None => {
                return Err(InvalidArgument::new_err(
                    "invalid argument: this WriteBatch was not made by db.write_batch(); use db.write(batch)",
                ))
            }
        };
        let (batch, wo) = (&self.batch, WriteOptions { sync: self.sync });
        db.with_db(py, |db| db.write_opt(batch, &wo))?;
        self.batch.clear();
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_none() {
            self.write(py)?;
        } else {
            self.batch.clear();
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<stratakv.WriteBatch {} updates>", self.batch.len())
    }
}
