//! `stratakv.DB`: an open database.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use stratakv::{Db, KeyRange, WriteOptions};

use crate::batch::PyWriteBatch;
use crate::handle::{Closable, Handle, SnapCell};
use crate::iter::{IterArgs, IterCell, IterState, PyIter};
use crate::partition::{self, PyPartition};
use crate::snapshot::PySnapshot;
use crate::{bytes_arg, check_key, closed, err, opt_bytes_arg, options};

/// A StrataKV database.
///
/// Opens (creating it if allowed) the database in the directory `path`,
/// recovering whatever a crash left in the persistent-memory log.
///
/// `profile` names what level 0 is made of for a new database: "matrix"
/// (the default: a matrix container in persistent memory), "sstable"
/// (tables on SSD, the LevelDB/RocksDB layout), "single-level" (SLM-DB)
/// or "pm-only" (ListDB: everything in PM skiplists). `pm_dir` is the directory of
/// the PM region file (default: `<path>/pm`; a DAX mount for real PM, or
/// /dev/shm to emulate it with DRAM). Further keywords set engine options,
/// for example pm_size (bytes of the PM region, default 4 GiB),
/// write_buffer_size, block_cache_bytes, bloom_bits_per_key, compression
/// ("none", "snappy", "lz4"), create_if_missing, error_if_exists and
/// pm_sync_interval_ms. An unknown profile or option raises InvalidArgument.
///
/// Keys and values are bytes (bytearray and memoryview are accepted too; a
/// str raises TypeError). `db[key]`, `key in db`, `del db[key]` and
/// `for key, value in db` work as on a dict, in key order. The database is
/// closed by `close()`, at the end of a `with` block, or when it is garbage
/// collected; snapshots and iterators raise ClosedError after that.
#[pyclass(module = "stratakv", name = "DB", frozen)]
pub(crate) struct PyDb {
    handle: Arc<Handle>,
    path: String,
}

impl PyDb {
    /// Runs `f` on the open database with the GIL released.
    fn with_db<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&Db) -> stratakv::Result<T> + Send) -> PyResult<T> {
        self.handle.with_db(py, f)
    }

    fn write_options(sync: bool) -> WriteOptions {
        WriteOptions { sync }
    }

    /// A new iterator over the live database.
    fn make_iter(&self, py: Python<'_>, args: IterArgs) -> PyResult<PyIter> {
        let range = args.range()?;
        let h = &self.handle;
        let cell = py.detach(|| {
            let g = h.db.read();
            let db = g.as_ref().ok_or_else(closed)?;
            let it = db.iter(range).map_err(err)?;
            let cell: Arc<IterCell> = Arc::new(parking_lot::Mutex::new(Some(IterState::new(it).map_err(err)?)));
            let weak: Weak<dyn Closable> = Arc::downgrade(&(cell.clone() as Arc<dyn Closable>));
            h.register(weak);
            Ok::<_, PyErr>(cell)
        })?;
        Ok(PyIter::new(cell, self.handle.closed.clone(), args))
    }
}

#[pymethods]
impl PyDb {
    #[new]
    #[pyo3(signature = (path, *, profile=None, pm_dir=None, **options))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        profile: Option<&str>,
        pm_dir: Option<PathBuf>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let opts = options::build(profile, pm_dir, options)?;
        let p = path.clone();
        let db = py.detach(move || Db::open(&p, opts)).map_err(err)?;
        Ok(PyDb { handle: Handle::new(db), path: path.display().to_string() })
    }

    /// The data directory.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.handle.db.read().is_none())
    }

    /// The value of `key`, or `default` if it is absent.
    #[pyo3(signature = (key, default=None))]
    fn get(&self, py: Python<'_>, key: &Bound<'_, PyAny>, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        let k = bytes_arg(key, "key")?;
        check_key(&k)?;
        match self.with_db(py, |db| db.get(&k))? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Sets `key` to `value`. With sync=True the write is durable against
    /// power loss before put returns; without it, it survives a crash of
    /// the process as soon as put returns.
    #[pyo3(signature = (key, value, *, sync=false))]
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        let v = bytes_arg(value, "value")?;
        let wo = Self::write_options(sync);
        self.with_db(py, |db| db.put_opt(&k, &v, &wo))
    }

    /// Removes `key`; a no-op if it is absent.
    #[pyo3(signature = (key, *, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        let wo = Self::write_options(sync);
        self.with_db(py, |db| db.delete_opt(&k, &wo))
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let k = bytes_arg(key, "key")?;
        check_key(&k)?;
        match self.with_db(py, |db| db.get(&k))? {
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
        let k = bytes_arg(key, "key")?;
        check_key(&k)?;
        Ok(self.with_db(py, |db| db.get(&k))?.is_some())
    }

    /// The values of `keys` (None for a missing one), read at one
    /// consistent point.
    fn multi_get(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
        let objs: Vec<Bound<'_, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
        let ks: Vec<Cow<'_, [u8]>> = objs.iter().map(|o| bytes_arg(o, "key")).collect::<PyResult<_>>()?;
        for k in &ks {
            check_key(k)?;
        }
        let vals = self.with_db(py, |db| db.multi_get(&ks))?;
        let out = PyList::empty(py);
        for v in vals {
            match v {
                Some(v) => out.append(PyBytes::new(py, &v))?,
                None => out.append(py.None())?,
            }
        }
        Ok(out.unbind())
    }

    /// A batch of puts and deletes bound to this database. Used as a
    /// context manager it is written atomically when the `with` block ends
    /// normally and discarded if the block raises.
    #[pyo3(signature = (*, sync=false))]
    fn write_batch(&self, sync: bool) -> PyWriteBatch {
        PyWriteBatch::bound(self.handle.clone(), sync)
    }

    /// Applies a WriteBatch atomically: all of it or none, also after a crash.
    #[pyo3(signature = (batch, *, sync=false))]
    fn write(&self, py: Python<'_>, batch: &Bound<'_, PyWriteBatch>, sync: bool) -> PyResult<()> {
        let b = batch.borrow();
        if b.part_db().is_some_and(|d| !Arc::ptr_eq(d, &self.handle)) {
            return Err(crate::InvalidArgument::new_err(
                "invalid argument: the batch names partitions of another database",
            ));
        }
        let (inner, wo) = (b.inner(), Self::write_options(sync));
        self.with_db(py, |db| db.write_opt(inner, &wo))
    }

    /// Iterates keys in order (descending with reverse=True) from `start`
    /// up to `stop` (excluded, like plyvel; set include_start and
    /// include_stop to change either bound), or over the keys beginning
    /// with `prefix` (not combined with start or stop). Yields
    /// `(key, value)` tuples, or only keys or only values when
    /// include_value or include_key is False. The iterator reads at the
    /// moment it was created: later writes do not show.
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

    /// Iterates `(key, value)` pairs in key order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, true))
    }

    /// Iterates the keys in order.
    fn keys(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, false))
    }

    /// Iterates the values in key order.
    fn values(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(false, true))
    }

    /// Iterates `(key, value)` pairs in key order.
    fn items(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.make_iter(py, IterArgs::all(true, true))
    }

    /// A consistent read-only view of the database as of now, with get,
    /// `[]`, `in`, multi_get and iterator. Versions it can see are kept
    /// until it is closed (`close()`, the end of a `with` block, or garbage
    /// collection).
    fn snapshot(&self, py: Python<'_>) -> PyResult<PySnapshot> {
        let h = &self.handle;
        let cell = py.detach(|| {
            let g = h.db.read();
            let db = g.as_ref().ok_or_else(closed)?;
            let cell: Arc<SnapCell> = Arc::new(parking_lot::RwLock::new(Some(db.snapshot())));
            let weak: Weak<dyn Closable> = Arc::downgrade(&(cell.clone() as Arc<dyn Closable>));
            h.register(weak);
            Ok::<_, PyErr>(cell)
        })?;
        Ok(PySnapshot::new(self.handle.clone(), cell))
    }

    /// Creates partition `name` (1 to 255 bytes of UTF-8) and returns a
    /// handle on it; raises InvalidArgument if it exists. Once a database
    /// has a partition, keys of its own that begin with 0xff 0xff are
    /// refused (they belong to partitions).
    fn create_partition(&self, py: Python<'_>, name: &str) -> PyResult<PyPartition> {
        partition::open(py, &self.handle, name, |db, n| db.create_partition(n))
    }

    /// A handle on partition `name` ("default" is the DB's own keys);
    /// raises InvalidArgument if there is no such partition.
    fn partition(&self, py: Python<'_>, name: &str) -> PyResult<PyPartition> {
        partition::open(py, &self.handle, name, |db, n| db.partition(n))
    }

    /// Partition `name`, created if it does not exist.
    fn partition_or_create(&self, py: Python<'_>, name: &str) -> PyResult<PyPartition> {
        partition::open(py, &self.handle, name, |db, n| db.partition_or_create(n))
    }

    /// Drops partition `name` with every key in it, at once (its tables
    /// are deleted in the background). Handles on it raise InvalidArgument
    /// afterwards; a partition created again under the name is empty.
    fn drop_partition(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.with_db(py, |db| db.drop_partition(name))
    }

    /// Removes every key of every partition, the DB's own included, with
    /// one range tombstone: O(1), atomic across a crash. The partitions
    /// stay, empty; snapshots taken before still see the old keys.
    fn clear_all_partitions(&self, py: Python<'_>) -> PyResult<()> {
        self.with_db(py, |db| db.clear_all_partitions())
    }

    /// The names of the partitions, "default" first.
    fn list_partitions(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with_db(py, |db| Ok(db.list_partitions()))
    }

    /// Removes every key of the DB's own (default partition) from `start`
    /// (included) to `stop` (excluded) with one range tombstone: O(1) now,
    /// the space reclaimed as compaction reaches the range.
    fn delete_range(&self, py: Python<'_>, start: &Bound<'_, PyAny>, stop: &Bound<'_, PyAny>) -> PyResult<()> {
        let s = bytes_arg(start, "start")?;
        let e = bytes_arg(stop, "stop")?;
        self.with_db(py, |db| db.delete_range(&s, &e))
    }

    /// The range partitions of the key space (split where a range holds
    /// more than the partition_split_bytes option), in key order: a list
    /// of `(start, end, bytes)` tuples; `start` is b"" for the first,
    /// `end` (excluded) None for the last, `bytes` the bytes of the tables
    /// that begin in the range.
    fn range_partitions(&self, py: Python<'_>) -> PyResult<Py<PyList>> {
        let rps = self.with_db(py, |db| Ok(db.range_partitions()))?;
        partition::range_partitions_list(py, rps)
    }

    /// Removes every key of the DB's own in the range partition that holds
    /// `key`, with one range tombstone (its tables are deleted whole).
    fn drop_range_partition(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        self.with_db(py, |db| db.drop_range_partition(&k))
    }

    /// Seals the memtable and waits until everything written so far is in tables.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with_db(py, |db| db.flush())
    }

    /// Makes every write so far durable against power loss.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.with_db(py, |db| db.sync())
    }

    /// Compacts the keys from `start` (included) to `stop` (excluded; None
    /// = unbounded) down to the bottom level, dropping overwritten versions
    /// and deletions no snapshot needs.
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
        self.with_db(py, |db| db.compact_range(range))
    }

    /// Blocks until no flush or compaction is running or due.
    fn wait_for_compactions(&self, py: Python<'_>) -> PyResult<()> {
        self.with_db(py, |db| db.wait_for_compactions())
    }

    /// Reads every table block and checks every checksum and the key
    /// order; returns the number of table entries verified.
    fn verify_checksums(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_db(py, |db| db.verify_checksums())
    }

    /// The engine's counters and the shape of the tree, as a dict (the same
    /// figures `strata stats` prints).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with_db(py, |db| Ok(db.stats()))?;
        crate::snapshot::stats_dict(py, &s)
    }

    /// Stops background work, syncs the log and releases the directory.
    /// Snapshots and iterators of this database raise ClosedError
    /// afterwards. Closing twice is harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let h = &self.handle;
        py.detach(|| h.close()).map_err(err)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { "closed" } else { "open" };
        format!("<stratakv.DB path={:?} {state}>", self.path)
    }
}
