//! `stratakv.Snapshot`: a consistent read-only view; also `stats()`'s dict.

use std::borrow::Cow;
use std::sync::{Arc, Weak};

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use stratakv::{Snapshot, Stats};

use crate::handle::{Closable, Handle, SnapCell};
use crate::iter::{IterArgs, IterCell, IterState, PyIter};
use crate::{bytes_arg, check_key, closed, err};

/// A consistent read-only view of a database at the moment
/// `db.snapshot()` was called: get, `[]`, `in`, multi_get and iterator
/// read as of then, whatever is written later. Versions it can see are
/// kept until it is closed (`close()`, the end of a `with` block, or
/// garbage collection). Raises ClosedError once its database is closed.
#[pyclass(module = "stratakv", name = "Snapshot", frozen)]
pub(crate) struct PySnapshot {
    handle: Arc<Handle>,
    cell: Arc<SnapCell>,
}

impl PySnapshot {
    pub fn new(handle: Arc<Handle>, cell: Arc<SnapCell>) -> PySnapshot {
        PySnapshot { handle, cell }
    }

    /// Runs `f` on the open snapshot with the GIL released.
    fn with_snap<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Snapshot) -> stratakv::Result<T> + Send,
    ) -> PyResult<T> {
        let cell = &self.cell;
        py.detach(|| {
            let g = cell.read();
            match g.as_ref() {
                Some(s) => f(s).map_err(err),
                None => Err(closed()),
            }
        })
    }

    fn lookup(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let k = bytes_arg(key, "key")?;
        check_key(&k)?;
        self.with_snap(py, |s| s.get(&k))
    }

    fn make_iter(&self, py: Python<'_>, args: IterArgs) -> PyResult<PyIter> {
        let range = args.range()?;
        let (h, cell) = (&self.handle, &self.cell);
        let it_cell = py.detach(|| {
            // The database's read lock first (as close takes its write lock
            // first), so that close sees this iterator registered.
            let g = h.db.read();
            if g.is_none() {
                return Err(closed());
            }
            let s = cell.read();
            let snap = s.as_ref().ok_or_else(closed)?;
            let it = snap.iter(range).map_err(err)?;
            let c: Arc<IterCell> = Arc::new(parking_lot::Mutex::new(Some(IterState::new(it).map_err(err)?)));
            let weak: Weak<dyn Closable> = Arc::downgrade(&(c.clone() as Arc<dyn Closable>));
            h.register(weak);
            Ok(c)
        })?;
        Ok(PyIter::new(it_cell, self.handle.closed.clone(), args))
    }
}

#[pymethods]
impl PySnapshot {
    /// The value of `key` as of the snapshot, or `default` if it was absent.
    #[pyo3(signature = (key, default=None))]
    fn get(&self, py: Python<'_>, key: &Bound<'_, PyAny>, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        match self.lookup(py, key)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match self.lookup(py, key)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.lookup(py, key)?.is_some())
    }

    /// The values of `keys` as of the snapshot (None for a missing one).
    fn multi_get(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
        let objs: Vec<Bound<'_, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
        let ks: Vec<Cow<'_, [u8]>> = objs.iter().map(|o| bytes_arg(o, "key")).collect::<PyResult<_>>()?;
        for k in &ks {
            check_key(k)?;
        }
        let vals = self.with_snap(py, |s| ks.iter().map(|k| s.get(k)).collect::<stratakv::Result<Vec<_>>>())?;
        let out = PyList::empty(py);
        for v in vals {
            match v {
                Some(v) => out.append(PyBytes::new(py, &v))?,
                None => out.append(py.None())?,
            }
        }
        Ok(out.unbind())
    }

    /// Like `DB.iterator`, as of the snapshot.
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

    /// Iterates `(key, value)` pairs in key order, as of the snapshot.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, true))
    }

    /// Iterates the keys in order, as of the snapshot.
    fn keys(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, false))
    }

    /// Iterates the values in key order, as of the snapshot.
    fn values(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(false, true))
    }

    /// Iterates `(key, value)` pairs in key order, as of the snapshot.
    fn items(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, true))
    }

    /// The sequence number the snapshot reads at.
    #[getter]
    fn sequence(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_snap(py, |s| Ok(s.sequence()))
    }

    /// Releases the snapshot: the versions only it could see may be
    /// compacted away. Further reads raise ClosedError; iterators already
    /// made from it keep working.
    fn close(&self, py: Python<'_>) {
        let cell = &self.cell;
        let s = py.detach(|| cell.write().take());
        drop(s);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }
}

/// `Stats` as a dict: every counter under its field name; `levels` and
/// `runs` as lists of dicts with `level`, `files` and `bytes`.
pub(crate) fn stats_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let levels = |ls: &[stratakv::LevelStats]| -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for l in ls {
            let e = PyDict::new(py);
            e.set_item("level", l.level)?;
            e.set_item("files", l.files)?;
            e.set_item("bytes", l.bytes)?;
            out.append(e)?;
        }
        Ok(out)
    };
    d.set_item("l0", s.l0)?;
    d.set_item("levels", levels(&s.levels)?)?;
    d.set_item("runs", levels(&s.runs)?)?;
    d.set_item("nonempty_levels", s.nonempty_levels)?;
    d.set_item("memtable_bytes", s.memtable_bytes)?;
    d.set_item("memtable_entries", s.memtable_entries)?;
    d.set_item("immutable_memtables", s.immutable_memtables)?;
    d.set_item("matrix_rows", s.matrix_rows)?;
    d.set_item("matrix_data_bytes", s.matrix_data_bytes)?;
    d.set_item("matrix_pm_bytes", s.matrix_pm_bytes)?;
    d.set_item("matrix_limit_bytes", s.matrix_limit_bytes)?;
    d.set_item("columns", s.columns)?;
    d.set_item("listdb_l0_lists", s.listdb_l0_lists)?;
    d.set_item("listdb_live_nodes", s.listdb_live_nodes)?;
    d.set_item("listdb_live_bytes", s.listdb_live_bytes)?;
    d.set_item("listdb_log_bytes", s.listdb_log_bytes)?;
    d.set_item("listdb_merges", s.listdb_merges)?;
    d.set_item("listdb_dropped_nodes", s.listdb_dropped_nodes)?;
    d.set_item("listdb_cleanings", s.listdb_cleanings)?;
    d.set_item("listdb_cache_bytes", s.listdb_cache_bytes)?;
    d.set_item("listdb_cache_hits", s.listdb_cache_hits)?;
    d.set_item("listdb_regions", s.listdb_regions)?;
    d.set_item("run_merges", s.run_merges)?;
    d.set_item("pm_placement", s.pm_placement)?;
    d.set_item("pm_region_bytes", s.pm_region_bytes)?;
    d.set_item("pm_allocated_bytes", s.pm_allocated_bytes)?;
    d.set_item("pm_slot_bytes", s.pm_slot_bytes)?;
    d.set_item("pm_slots", s.pm_slots)?;
    d.set_item("pm_slots_used", s.pm_slots_used)?;
    d.set_item("pm_bytes_written", s.pm_bytes_written)?;
    d.set_item("pm_persists", s.pm_persists)?;
    d.set_item("pm_syncs", s.pm_syncs)?;
    d.set_item("pm_write_throughs", s.pm_write_throughs)?;
    d.set_item("last_sequence", s.last_sequence)?;
    d.set_item("writes", s.writes)?;
    d.set_item("user_bytes_written", s.user_bytes_written)?;
    d.set_item("table_bytes_written", s.table_bytes_written)?;
    d.set_item("manifest_bytes_written", s.manifest_bytes_written)?;
    d.set_item("device_bytes_written", s.device_bytes_written)?;
    d.set_item("write_amplification", s.write_amplification)?;
    d.set_item("flushes", s.flushes)?;
    d.set_item("compactions", s.compactions)?;
    d.set_item("compaction_bytes_read", s.compaction_bytes_read)?;
    d.set_item("stall_micros", s.stall_micros)?;
    d.set_item("slowdowns", s.slowdowns)?;
    d.set_item("throttled_micros", s.throttled_micros)?;
    d.set_item("prefix_skipped_rows", s.prefix_skipped_rows)?;
    d.set_item("block_cache_bytes", s.block_cache_bytes)?;
    d.set_item("table_index_bytes", s.table_index_bytes)?;
    d.set_item("learned_tables", s.learned_tables)?;
    d.set_item("binary_tables", s.binary_tables)?;
    d.set_item("table_index_only_bytes", s.table_index_only_bytes)?;
    d.set_item("table_filter_bytes", s.table_filter_bytes)?;
    d.set_item("read_batching", s.read_batching)?;
    d.set_item("matrix_dram_bytes", s.matrix_dram_bytes)?;
    d.set_item("recovery_micros", s.recovery_micros)?;
    d.set_item("partitions", &s.partitions)?;
    d.set_item("range_tombstones", s.range_tombstones)?;
    d.set_item("range_deletes", s.range_deletes)?;
    d.set_item("range_dropped_files", s.range_dropped_files)?;
    d.set_item("range_partitions", s.range_partitions)?;
    d.set_item("poisoned", s.poisoned.as_deref())?;
    Ok(d)
}
