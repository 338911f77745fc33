//! `stratakv.Partition`: a named key space of a database, and the `DB`
//! methods that make, list and drop partitions and delete key ranges.

use std::borrow::Cow;
use std::sync::{Arc, Weak};

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use stratakv::{KeyRange, Partition, WriteOptions};

use crate::batch::PyWriteBatch;
use crate::handle::{Closable, Handle};
use crate::iter::{IterArgs, IterCell, IterState, PyIter};
pub(crate) use crate::partition_type::{open, PyPartition};
use crate::{bytes_arg, check_key, closed, err, opt_bytes_arg};

impl PyPartition {
    /// Runs `f` on the partition of the open database with the GIL released.
    pub(crate) fn with_part<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Partition) -> stratakv::Result<T> + Send,
    ) -> PyResult<T> {
        let (h, cell) = (&self.handle, &self.cell);
        py.detach(|| {
            // The database's read lock first, as close takes its write lock first.
            let g = h.db.read();
            if g.is_none() {
                return Err(closed());
            }
            let p = cell.read();
            match p.as_ref() {
                Some(p) => f(p).map_err(err),
                None => Err(closed()),
            }
        })
    }

    /// The database handle this partition belongs to.
    pub fn db_handle(&self) -> &Arc<Handle> {
        &self.handle
    }

    fn lookup(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let k = bytes_arg(key, "key")?;
        check_key(&k)?;
        self.with_part(py, |p| p.get(&k))
    }

    fn make_iter(&self, py: Python<'_>, args: IterArgs) -> PyResult<PyIter> {
        let range = args.range()?;
        let (h, cell) = (&self.handle, &self.cell);
        let it_cell = py.detach(|| {
            let g = h.db.read();
            if g.is_none() {
                return Err(closed());
            }
            let p = cell.read();
            let part = p.as_ref().ok_or_else(closed)?;
            let it = part.iter(range).map_err(err)?;
            let c: Arc<IterCell> = Arc::new(parking_lot::Mutex::new(Some(IterState::new(it).map_err(err)?)));
            let weak: Weak<dyn Closable> = Arc::downgrade(&(c.clone() as Arc<dyn Closable>));
            h.register(weak);
            Ok(c)
        })?;
        Ok(PyIter::new(it_cell, self.handle.closed.clone(), args))
    }
}

#[pymethods]
impl PyPartition {
    /// The partition's name ("default" for the DB's own keys).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is the default partition (the DB's own keys).
    #[getter]
    fn is_default(&self) -> bool {
        self.name == stratakv::DEFAULT_PARTITION
    }

    /// The value of `key` in this partition, or `default` if it is absent.
    #[pyo3(signature = (key, default=None))]
    fn get(&self, py: Python<'_>, key: &Bound<'_, PyAny>, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        match self.lookup(py, key)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Sets `key` to `value` in this partition (sync as in `DB.put`).
    #[pyo3(signature = (key, value, *, sync=false))]
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        let v = bytes_arg(value, "value")?;
        let wo = WriteOptions { sync };
        self.with_part(py, |p| p.put_opt(&k, &v, &wo))
    }

    /// Removes `key` from this partition; a no-op if it is absent.
    #[pyo3(signature = (key, *, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        let wo = WriteOptions { sync };
        self.with_part(py, |p| p.delete_opt(&k, &wo))
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match self.lookup(py, key)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value, false)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, false)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.lookup(py, key)?.is_some())
    }

    /// The values of `keys` in this partition (None for a missing one),
    /// read at one consistent point.
    fn multi_get(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
        let objs: Vec<Bound<'_, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
        let ks: Vec<Cow<'_, [u8]>> = objs.iter().map(|o| bytes_arg(o, "key")).collect::<PyResult<_>>()?;
        for k in &ks {
            check_key(k)?;
        }
        let vals = self.with_part(py, |p| p.multi_get(&ks))?;
        let out = PyList::empty(py);
        for v in vals {
            match v {
                Some(v) => out.append(PyBytes::new(py, &v))?,
                None => out.append(py.None())?,
            }
        }
        Ok(out.unbind())
    }

    /// Applies a WriteBatch atomically with its keys taken as this
    /// partition's. A batch with `partition=` updates raises
    /// InvalidArgument: write it with `db.write(batch)`.
    #[pyo3(signature = (batch, *, sync=false))]
    fn write(&self, py: Python<'_>, batch: &Bound<'_, PyWriteBatch>, sync: bool) -> PyResult<()> {
        let b = batch.borrow();
        if b.part_db().is_some() {
            return Err(crate::InvalidArgument::new_err(
                "invalid argument: a batch with partition= updates is written with db.write(batch)",
            ));
        }
        let (inner, wo) = (b.inner(), WriteOptions { sync });
        self.with_part(py, |p| p.write_opt(inner, &wo))
    }

    /// Like `DB.iterator`, over this partition's keys (yielded without
    /// any partition prefix).
    #[pyo3(signature = (*, start=None, stop=None, prefix=None, reverse=false, include_key=true, include_value=true, include_start=true, include_stop=false))]
    #[allow(clippy::too_many_arguments)]
    fn iterator(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        include_key: bool,
        include_value: bool,
        include_start: bool,
        include_stop: bool,
    ) -> PyResult<PyIter> {
        let args =
            IterArgs::parse(start, stop, prefix, reverse, include_key, include_value, include_start, include_stop)?;
        self.make_iter(py, args)
    }

    /// Iterates `(key, value)` pairs of this partition in key order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, true))
    }

    /// Iterates the keys of this partition in order.
    fn keys(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, false))
    }

    /// Iterates the values of this partition in key order.
    fn values(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(false, true))
    }

    /// Iterates `(key, value)` pairs of this partition in key order.
    fn items(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, true))
    }

    /// Removes every key of this partition from `start` (included) to
    /// `stop` (excluded) with one range tombstone.
    fn delete_range(&self, py: Python<'_>, start: &Bound<'_, PyAny>, stop: &Bound<'_, PyAny>) -> PyResult<()> {
        let s = bytes_arg(start, "start")?;
        let e = bytes_arg(stop, "stop")?;
        self.with_part(py, |p| p.delete_range(&s, &e))
    }

    /// Removes every key of this partition (the partition itself stays;
    /// `db.drop_partition(name)` removes it).
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.with_part(py, |p| p.clear())
    }

    /// Seals the (shared) memtable and waits until it is in tables.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with_part(py, |p| p.flush())
    }

    /// Compacts this partition's keys from `start` (included) to `stop`
    /// (excluded; None = unbounded) down to the bottom level.
    #[pyo3(signature = (start=None, stop=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        use std::ops::Bound as B;
        let s = opt_bytes_arg(start, "start")?.map(Cow::into_owned);
        let e = opt_bytes_arg(stop, "stop")?.map(Cow::into_owned);
        let range = KeyRange { start: s.map_or(B::Unbounded, B::Included), end: e.map_or(B::Unbounded, B::Excluded) };
        self.with_part(py, |p| p.compact_range(range))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let cell = &self.cell;
        let open = py.detach(|| cell.read().is_some());
        let state = if open { "open" } else { "closed" };
        format!("<stratakv.Partition name={:?} {state}>", self.name)
    }
}

/// `DB.range_partitions()`: `(start, end, bytes)` tuples, `end` None for
/// the last range.
pub(crate) fn range_partitions_list(py: Python<'_>, rps: Vec<stratakv::RangePartition>) -> PyResult<Py<PyList>> {
    let out = PyList::empty(py);
    for r in rps {
        let end = match &r.end {
            Some(e) => PyBytes::new(py, e).into_any(),
            None => py.None().into_bound(py),
        };
        let t = PyTuple::new(py, [PyBytes::new(py, &r.start).into_any(), end, r.bytes.into_pyobject(py)?.into_any()])?;
        out.append(t)?;
    }
    Ok(out.unbind())
}
