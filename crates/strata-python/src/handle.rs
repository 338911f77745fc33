//! What an open database shares with the snapshots and iterators made from
//! it, and closing.
//!
//! A `stratakv::DbIter` or `stratakv::Snapshot` keeps the engine's insides
//! alive (and with them the directory lock and the PM mapping) until it is
//! dropped. Python code may keep an iterator long after `db.close()`, so
//! closing drops the Rust object inside every snapshot and iterator made
//! from the database: each lives in a [`Child`] cell the handle keeps a weak
//! reference to. A closed cell is empty, and using it raises ClosedError.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use stratakv::{Db, Snapshot};

use crate::{closed, err};

/// Something that closing the database must empty.
pub(crate) trait Closable: Send + Sync {
    /// Drops the Rust object held, if any.
    fn close(&self);
}

/// The cell a snapshot lives in (readers share it).
pub(crate) type SnapCell = RwLock<Option<Snapshot>>;

impl Closable for SnapCell {
    fn close(&self) {
        let s = self.write().take();
        drop(s);
    }
}

/// An open database as the Python objects share it.
pub(crate) struct Handle {
    /// The database; None once closed.
    pub db: RwLock<Option<Db>>,
    /// Snapshots and iterators to empty at close.
    children: Mutex<Vec<Weak<dyn Closable>>>,
    /// Set by `close`; iterators check it before handing out an entry
    /// they buffered, so that nothing is read after close.
    pub closed: Arc<AtomicBool>,
}

impl Handle {
    /// A handle on an open database.
    pub fn new(db: Db) -> Arc<Handle> {
        Arc::new(Handle {
            db: RwLock::new(Some(db)),
            children: Mutex::new(Vec::new()),
            closed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Runs `f` on the open database with the GIL released; ClosedError
    /// once closed.
    pub fn with_db<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&Db) -> stratakv::Result<T> + Send) -> PyResult<T> {
        py.detach(|| {
            let g = self.db.read();
            match g.as_ref() {
                Some(db) => f(db).map_err(err),
                None => Err(closed()),
            }
        })
    }

    /// Registers a snapshot or iterator cell. Call it while holding a read
    /// lock of `db` that found the database open, so that `close` (which
    /// takes the write lock first) sees every cell registered before it.
    pub fn register(&self, child: Weak<dyn Closable>) {
        let mut c = self.children.lock();
        // Forget cells already dropped once they outnumber the live ones,
        // so a long-lived database that makes many iterators stays small.
        if c.len() >= 64 && c.len().is_power_of_two() {
            c.retain(|w| w.strong_count() > 0);
        }
        c.push(child);
    }

    /// Closes the database: empties every snapshot and iterator made from
    /// it, then stops background work, syncs the log and releases the
    /// directory. Closing twice is a no-op. Runs without the GIL.
    pub fn close(&self) -> stratakv::Result<()> {
        self.closed.store(true, Ordering::Release);
        let db = self.db.write().take();
        let children = std::mem::take(&mut *self.children.lock());
        for c in children {
            if let Some(c) = c.upgrade() {
                c.close();
            }
        }
        match db {
            Some(db) => db.close(),
            None => Ok(()),
        }
    }
}
