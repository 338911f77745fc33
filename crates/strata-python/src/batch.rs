//! `stratakv.WriteBatch`: puts and deletes applied atomically.

use pyo3::prelude::*;
use pyo3::types::PyType;
use stratakv::WriteBatch;

use std::sync::Arc;

use stratakv::WriteOptions;

use crate::handle::Handle;
use crate::partition_type::PyPartition;
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
///
/// `put` and `delete` take an optional `partition` (a Partition of the
/// same database): the update goes to that partition, so one batch can
/// span partitions atomically. Such a batch is written with `db.write`,
/// `write()` or a `with` block, not with `partition.write`.
#[pyclass(module = "stratakv", name = "WriteBatch")]
pub(crate) struct PyWriteBatch {
    batch: WriteBatch,
    /// The database `write()` and the end of a `with` block write to.
    db: Option<Arc<Handle>>,
    sync: bool,
    /// The database of the partitions named by `partition=` updates.
    part_db: Option<Arc<Handle>>,
}

impl PyWriteBatch {
    /// A batch that `write()` and the end of a `with` block write to `db`.
    pub fn bound(db: Arc<Handle>, sync: bool) -> PyWriteBatch {
        PyWriteBatch { batch: WriteBatch::new(), db: Some(db), sync, part_db: None }
    }

    /// The engine's batch.
    pub fn inner(&self) -> &WriteBatch {
        &self.batch
    }

    /// The database whose partitions `partition=` updates named, if any.
    pub fn part_db(&self) -> Option<&Arc<Handle>> {
        self.part_db.as_ref()
    }

    /// Checks that partition `p` belongs to the batch's database and to
    /// that of the partitions named before, and remembers it.
    fn note_partition(&mut self, p: &PyPartition) -> PyResult<()> {
        let h = p.db_handle();
        let other = |d: &Option<Arc<Handle>>| d.as_ref().is_some_and(|d| !Arc::ptr_eq(d, h));
        if other(&self.db) || other(&self.part_db) {
            return Err(InvalidArgument::new_err(
                "invalid argument: the partition belongs to another database than this WriteBatch",
            ));
        }
        self.part_db = Some(h.clone());
        Ok(())
    }
}

#[pymethods]
impl PyWriteBatch {
    #[new]
    fn new() -> Self {
        PyWriteBatch { batch: WriteBatch::new(), db: None, sync: false, part_db: None }
    }

    /// Adds `key = value`, in `partition` if given (else in the DB's own
    /// keys). A key or value over the engine's limits makes the write of
    /// the whole batch raise InvalidArgument.
    #[pyo3(signature = (key, value, partition=None))]
    fn put(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        partition: Option<&Bound<'_, PyPartition>>,
    ) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        let v = bytes_arg(value, "value")?;
        match partition {
            None => {
                self.batch.put(&k, &v);
            }
            Some(p) => {
                let p = p.get();
                self.note_partition(p)?;
                let batch = &mut self.batch;
                p.with_part(py, |p| {
                    batch.put_in(p, &k, &v);
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    /// Adds a deletion of `key`, in `partition` if given.
    #[pyo3(signature = (key, partition=None))]
    fn delete(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        partition: Option<&Bound<'_, PyPartition>>,
    ) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        match partition {
            None => {
                self.batch.delete(&k);
            }
            Some(p) => {
                let p = p.get();
                self.note_partition(p)?;
                let batch = &mut self.batch;
                p.with_part(py, |p| {
                    batch.delete_in(p, &k);
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    /// Removes every update.
    fn clear(&mut self) {
        self.batch.clear();
        self.part_db = None;
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
        self.clear();
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
            self.clear();
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<stratakv.WriteBatch {} updates>", self.batch.len())
    }
}
