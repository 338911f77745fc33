//! `stratakv.Iterator`: entries of a key range, fetched in batches.
//!
//! Each step into Rust releases the GIL and fetches a batch of entries
//! (8 at first, doubling up to 1024 per call, so that a loop that stops
//! after a few keys reads few more), then `__next__` hands them out from a
//! buffer without leaving Python's thread. The entries of a batch were read
//! at the iterator's creation point like every other, so buffering changes
//! nothing a caller can see.

use std::collections::VecDeque;
use std::ops::Bound as B;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use stratakv::KeyRange;

use crate::handle::IterCell;
use crate::{closed, to_py, InvalidArgument};

const FIRST_BATCH: usize = 8;
const MAX_BATCH: usize = 1024;
/// A batch also ends once it holds this many key and value bytes.
const MAX_BATCH_BYTES: usize = 4 << 20;

/// What an iterator covers and yields.
pub(crate) struct IterArgs {
    pub start: Option<Vec<u8>>,
    pub stop: Option<Vec<u8>>,
    pub prefix: Option<Vec<u8>>,
    pub include_start: bool,
    pub include_stop: bool,
    pub reverse: bool,
    pub include_key: bool,
    pub include_value: bool,
}

impl IterArgs {
    /// Every key, forward.
    pub fn all(include_key: bool, include_value: bool) -> IterArgs {
        IterArgs {
            start: None,
            stop: None,
            prefix: None,
            include_start: true,
            include_stop: false,
            reverse: false,
            include_key,
            include_value,
        }
    }

    /// The key range these arguments name.
    pub fn range(&self) -> PyResult<KeyRange> {
        if !self.include_key && !self.include_value {
            return Err(InvalidArgument::new_err(
                "invalid argument: include_key and include_value cannot both be False",
            ));
        }
        if let Some(p) = &self.prefix {
            if self.start.is_some() || self.stop.is_some() {
                return Err(InvalidArgument::new_err(
                    "invalid argument: prefix cannot be combined with start or stop",
                ));
            }
            return Ok(KeyRange::prefix(p));
        }
        let start = match &self.start {
            None => B::Unbounded,
            Some(s) if self.include_start => B::Included(s.clone()),
            Some(s) => B::Excluded(s.clone()),
        };
        let end = match &self.stop {
            None => B::Unbounded,
            Some(e) if self.include_stop => B::Included(e.clone()),
            Some(e) => B::Excluded(e.clone()),
        };
        Ok(KeyRange { start, end })
    }
}

/// Iterates a key range of a database or snapshot, as of the moment it was
/// made. Yields `(key, value)` tuples, or keys or values alone, as the
/// `iterator(...)` call asked. Raises ClosedError once its database is
/// closed; `close()` releases it early.
#[pyclass(module = "stratakv", name = "Iterator")]
pub(crate) struct PyIter {
    cell: Arc<IterCell>,
    buf: VecDeque<(Vec<u8>, Vec<u8>)>,
    batch: usize,
    /// The engine iterator is exhausted; `buf` holds the rest.
    done: bool,
    reverse: bool,
    include_key: bool,
    include_value: bool,
}

impl PyIter {
    pub fn new(cell: Arc<IterCell>, args: IterArgs) -> PyIter {
        PyIter {
            cell,
            buf: VecDeque::new(),
            batch: FIRST_BATCH,
            done: false,
            reverse: args.reverse,
            include_key: args.include_key,
            include_value: args.include_value,
        }
    }

    /// Refills the buffer with the next batch, GIL released.
    fn fill(&mut self, py: Python<'_>) -> PyResult<()> {
        let cell = &self.cell;
        let want = self.batch;
        let reverse = self.reverse;
        let buf = &mut self.buf;
        let done = py.detach(move || {
            let mut g = cell.lock();
            let it = g.as_mut().ok_or_else(closed)?;
            let mut bytes = 0;
            for _ in 0..want {
                let next = if reverse { it.next_back() } else { it.next() };
                match next {
                    Some(kv) => {
                        bytes += kv.0.len() + kv.1.len();
                        buf.push_back(kv);
                        if bytes >= MAX_BATCH_BYTES {
                            return Ok(false);
                        }
                    }
                    None => {
                        it.status().map_err(to_py)?;
                        return Ok(true);
                    }
                }
            }
            Ok::<_, PyErr>(false)
        })?;
        self.done = done;
        self.batch = (self.batch * 2).min(MAX_BATCH);
        Ok(())
    }
}

#[pymethods]
impl PyIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        if self.buf.is_empty() {
            if self.done {
                return Ok(None);
            }
            self.fill(py)?;
        }
        let Some((k, v)) = self.buf.pop_front() else { return Ok(None) };
        let item = match (self.include_key, self.include_value) {
            (true, true) => {
                PyTuple::new(py, [PyBytes::new(py, &k), PyBytes::new(py, &v)])?.into_any().unbind()
            }
            (true, false) => PyBytes::new(py, &k).into_any().unbind(),
            _ => PyBytes::new(py, &v).into_any().unbind(),
        };
        Ok(Some(item))
    }

    /// Releases the iterator's hold on the database early (it also goes
    /// when the iterator is garbage collected); further steps raise
    /// ClosedError.
    fn close(&mut self, py: Python<'_>) {
        let cell = &self.cell;
        let it = py.detach(|| cell.lock().take());
        drop(it);
        self.buf.clear();
        self.done = false;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }
}
