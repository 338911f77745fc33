//! `stratakv.Iterator`: entries of a key range, fetched in batches.
//!
//! Each step into Rust releases the GIL and fetches a batch of entries
//! (8 at first, doubling up to 1024 per call, so that a loop that stops
//! after a few keys reads few more), then `__next__` hands them out from a
//! buffer without leaving Python's thread. The entries of a batch were read
//! at the iterator's creation point like every other, so buffering changes
//! nothing a caller can see.

use std::borrow::Cow;
use std::ops::Bound as B;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use stratakv::{Cursor, DbIter, KeyRange};

use crate::handle::Closable;
use crate::{closed, opt_bytes_arg, to_py, InvalidArgument};

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
    /// The arguments of `DB.iterator` and `Snapshot.iterator`, checked.
    #[allow(clippy::too_many_arguments)]
    pub fn parse(
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        include_key: bool,
        include_value: bool,
        include_start: bool,
        include_stop: bool,
    ) -> PyResult<IterArgs> {
        Ok(IterArgs {
            start: opt_bytes_arg(start, "start")?.map(Cow::into_owned),
            stop: opt_bytes_arg(stop, "stop")?.map(Cow::into_owned),
            prefix: opt_bytes_arg(prefix, "prefix")?.map(Cow::into_owned),
            include_start,
            include_stop,
            reverse,
            include_key,
            include_value,
        })
    }

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
                return Err(InvalidArgument::new_err("invalid argument: prefix cannot be combined with start or stop"));
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

/// An engine iterator: a cursor stepped by `fill`, and the `DbIter` it was
/// made from, kept for the snapshot it pins (so that compaction keeps what
/// the cursor reads). Stepping a cursor copies each entry once into the
/// batch buffer; `DbIter`'s own items would cost four allocations each.
pub(crate) struct IterState {
    _pin: DbIter,
    cursor: Cursor,
    started: bool,
}

impl IterState {
    /// A state over what `it` covers, at its sequence.
    pub fn new(it: DbIter) -> stratakv::Result<IterState> {
        let cursor = it.cursor()?;
        Ok(IterState { _pin: it, cursor, started: false })
    }

    /// Moves to the next entry (the first one on the first call).
    fn step(&mut self, reverse: bool) -> stratakv::Result<()> {
        match (self.started, reverse) {
            (false, false) => self.cursor.seek_to_first()?,
            (false, true) => self.cursor.seek_to_last()?,
            (true, false) => self.cursor.next()?,
            (true, true) => self.cursor.prev()?,
        }
        self.started = true;
        Ok(())
    }
}

/// The cell an iterator's engine state lives in (a Mutex: it is `Send`
/// but not `Sync`, and only one thread steps it at a time).
pub(crate) type IterCell = parking_lot::Mutex<Option<IterState>>;

impl Closable for IterCell {
    fn close(&self) {
        let it = self.lock().take();
        drop(it);
    }
}

/// Iterates a key range of a database or snapshot, as of the moment it was
/// made. Yields `(key, value)` tuples, or keys or values alone, as the
/// `iterator(...)` call asked. Raises ClosedError once its database is
/// closed; `close()` releases it early.
#[pyclass(module = "stratakv", name = "Iterator")]
pub(crate) struct PyIter {
    cell: Arc<IterCell>,
    /// The database's closed flag.
    closed: Arc<AtomicBool>,
    /// The keys and values of the current batch, back to back.
    data: Vec<u8>,
    /// Each entry of the batch: (offset in `data`, key length, value length).
    ents: Vec<(usize, usize, usize)>,
    /// The next entry of `ents` to hand out.
    pos: usize,
    batch: usize,
    /// The engine iterator is exhausted; `buf` holds the rest.
    done: bool,
    reverse: bool,
    include_key: bool,
    include_value: bool,
}

impl PyIter {
    pub fn new(cell: Arc<IterCell>, closed: Arc<AtomicBool>, args: IterArgs) -> PyIter {
        PyIter {
            cell,
            closed,
            data: Vec::new(),
            ents: Vec::new(),
            pos: 0,
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
        let (data, ents) = (&mut self.data, &mut self.ents);
        data.clear();
        ents.clear();
        self.pos = 0;
        let done = py.detach(move || {
            let mut g = cell.lock();
            let st = g.as_mut().ok_or_else(closed)?;
            for _ in 0..want {
                st.step(reverse).map_err(|e| to_py(&e))?;
                if !st.cursor.valid() {
                    return Ok(true);
                }
                let (k, v) = (st.cursor.key(), st.cursor.value());
                ents.push((data.len(), k.len(), v.len()));
                data.extend_from_slice(k);
                data.extend_from_slice(v);
                if data.len() >= MAX_BATCH_BYTES {
                    break;
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
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        if self.pos == self.ents.len() {
            if self.done {
                return Ok(None);
            }
            self.fill(py)?;
        }
        let Some(&(off, klen, vlen)) = self.ents.get(self.pos) else { return Ok(None) };
        self.pos += 1;
        let k = self.data.get(off..off + klen).unwrap_or_default();
        let v = self.data.get(off + klen..off + klen + vlen).unwrap_or_default();
        let item = match (self.include_key, self.include_value) {
            (true, true) => PyTuple::new(py, [PyBytes::new(py, k), PyBytes::new(py, v)])?.into_any().unbind(),
            (true, false) => PyBytes::new(py, k).into_any().unbind(),
            _ => PyBytes::new(py, v).into_any().unbind(),
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
        self.data.clear();
        self.ents.clear();
        self.pos = 0;
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
