//! What level 0 keeps in a version besides table files.

use std::any::Any;
use std::fmt::Debug;

use std::sync::Arc;

use super::{FileMeta, TableCache};
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::{Lookup, SeqNo};

/// Level 0's state outside table files (the matrix's rows, say), held by a
/// [`super::Version`] beside its levels and runs so that one MANIFEST edit
/// installs both. Immutable and shared by every reader of the version: the
/// level-0 kind that made it (`l0/`) changes it by installing a new version
/// with a new state ([`super::VersionSet::log_and_apply_l0`]).
pub(crate) trait L0State: Send + Sync + Debug {
    /// The state's MANIFEST record (opaque to the version set; the kind
    /// decodes it when the database opens).
    fn record(&self) -> Vec<u8>;

    /// The newest version of `ukey` with sequence <= `seq` (`hash` is its
    /// key hash); `Missing` sends the lookup on to the tables. `tables` and
    /// `l0_files` (the version's level-0 tables) are for kinds that index
    /// tables themselves (single-level).
    fn get(
        &self,
        ukey: &[u8],
        seq: SeqNo,
        hash: u64,
        tables: &TableCache,
        l0_files: &[Arc<FileMeta>],
    ) -> Result<Lookup>;

    /// Asks for the cache lines a lookup of a key with hash `hash` reads first.
    fn prefetch(&self, hash: u64);

    /// Cursors over every entry, newest source first. With `prefix` (every
    /// key the caller reads begins with it) sources that hold no such key
    /// may be left out; returns how many were.
    fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>, prefix: Option<&[u8]>) -> usize;

    /// Cursors over the version's level-0 tables (`l0_files`, newest
    /// first), if this kind reads them itself (single-level watches which
    /// tables a scan touches); None: the version adds one per table.
    fn table_iterators(
        &self,
        _tables: &Arc<TableCache>,
        _l0_files: &[Arc<FileMeta>],
    ) -> Option<Result<Box<dyn InternalIterator>>> {
        None
    }

    /// The concrete state, for the level-0 kind that made it.
    fn as_any(&self) -> &dyn Any;
}
