//! The `stratakv.Partition` class's data, apart from its methods
//! (`partition.rs`), so that `WriteBatch` can take partitions without the
//! two modules importing each other.

use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use pyo3::prelude::*;
use stratakv::{Db, Partition};

use crate::handle::{Closable, Handle};
use crate::{closed, err};

/// The cell a partition handle lives in: a `stratakv::Partition` keeps the
/// engine alive like a snapshot does, so closing the database empties it.
pub(crate) type PartCell = RwLock<Option<Partition>>;

impl Closable for PartCell {
    fn close(&self) {
        let p = self.write().take();
        drop(p);
    }
}

/// A handle on partition `name` made by `f`, registered with the handle
/// so that closing the database empties it. Runs without the GIL.
pub(crate) fn open(
    py: Python<'_>,
    handle: &Arc<Handle>,
    name: &str,
    f: impl FnOnce(&Db, &str) -> stratakv::Result<Partition> + Send,
) -> PyResult<PyPartition> {
    let cell = py.detach(|| {
        let g = handle.db.read();
        let db = g.as_ref().ok_or_else(closed)?;
        let p = f(db, name).map_err(err)?;
        let cell: Arc<PartCell> = Arc::new(RwLock::new(Some(p)));
        let weak: Weak<dyn Closable> = Arc::downgrade(&(cell.clone() as Arc<dyn Closable>));
        handle.register(weak);
        Ok::<_, PyErr>(cell)
    })?;
    Ok(PyPartition { handle: handle.clone(), cell, name: name.to_string() })
}

/// One partition of a database: a key space of its own with the `DB`
/// key/value API (get, put, delete, `[]`, `in`, `del`, multi_get,
/// write, iterator, keys, values, items, delete_range, clear, flush,
/// compact_range). Keys are the partition's own: the same key in two
/// partitions is two entries, and iterators yield keys without any prefix.
///
/// Made by `db.create_partition(name)`, `db.partition(name)` or
/// `db.partition_or_create(name)`; `db.partition("default")` is the DB's
/// own keys. After `db.drop_partition(name)` every call on a handle of it
/// raises InvalidArgument (a partition created again under the name is a
/// new, empty one). Raises ClosedError once its database is closed.
#[pyclass(module = "stratakv", name = "Partition", frozen)]
pub(crate) struct PyPartition {
    pub(crate) handle: Arc<Handle>,
    pub(crate) cell: Arc<PartCell>,
    pub(crate) name: String,
}
