//! Where the server keeps its ordered keyspace: the StrataKV engine, or a
//! DRAM map with optional command log or snapshots (the architectures of
//! the NVM in-memory KV study, selectable side by side).

pub mod aof;
pub mod cache;
pub mod directory;
pub mod engine;
pub mod group;
pub mod memory;
pub mod sharded;
pub mod snapshot;
pub mod view;

use std::fmt;

pub use view::{Batch, SnapshotView};

/// One update of a write: `Some(value)` puts, `None` deletes.
pub type Op = (Vec<u8>, Option<Vec<u8>>);

/// A storage failure, reported to the client as `-ERR <text>`.
#[derive(Debug)]
pub struct StoreError(pub String);

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

impl From<stratakv::Error> for StoreError {
    fn from(e: stratakv::Error) -> Self {
        StoreError(e.to_string())
    }
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError(format!("I/O error: {e}"))
    }
}

/// What SHUTDOWN asked about saving (Redis's `SHUTDOWN [NOSAVE|SAVE]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShutdownSave {
    /// Save if snapshots are configured (`--snapshot-seconds`), as Redis
    /// saves if save points are; also SIGTERM and SIGINT.
    #[default]
    Default,
    /// Write no snapshot, even if snapshots are configured.
    NoSave,
    /// Write a snapshot, even if none are configured.
    Save,
}

/// Result of a storage call.
pub type StoreResult<T> = Result<T, StoreError>;

/// Up to `limit` pairs from an engine iterator's `next`.
fn take_pairs(
    limit: usize,
    mut next: impl FnMut() -> stratakv::Result<Option<(Vec<u8>, Vec<u8>)>>,
) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::with_capacity(limit.min(1024));
    while out.len() < limit {
        match next()? {
            Some(kv) => out.push(kv),
            None => break,
        }
    }
    Ok(out)
}

/// The first key after every key that starts with `prefix` (none if it is
/// all 0xff bytes): the end of a prefix range.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A write that is applied (visible) and, if it asked for durability, has
/// a ticket to wait on with [`Backend::wait_durable`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct Pending(pub Option<u64>);

/// An ordered byte keyspace with atomic batch writes.
///
/// Thread safety: every method may be called from many threads at once.
/// Callers serialize conflicting writes themselves (the key locks).
pub trait Backend: Send + Sync {
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>>;

    /// The values of several keys at one point; the engine reads their
    /// table blocks in one batch. By default, one get after another.
    fn multi_get(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Hints that `keys` are about to be read, so a store can start
    /// fetching them; does nothing unless a store overrides it.
    fn prefetch(&self, keys: &[Vec<u8>]) {
        let _ = keys;
    }

    /// What a key directory knows of the meta entry under `meta_key`
    /// without reading the store ([`directory`]); `Unsure` by default.
    fn known_meta(&self, meta_key: &[u8]) -> directory::Known {
        let _ = meta_key;
        directory::Known::Unsure
    }
    /// The value of the meta key `meta_key` and what a key directory knew
    /// of it (one directory lookup for both); `Unsure` by default.
    fn get_meta(&self, meta_key: &[u8]) -> StoreResult<(Option<Vec<u8>>, directory::Known)> {
        Ok((self.get(meta_key)?, directory::Known::Unsure))
    }
    /// The key directory in front of this store, if any (filled by the
    /// open scan of the keys).
    fn key_directory(&self) -> Option<&directory::KeyDirectory> {
        None
    }
    /// Up to `limit` pairs with `start <= key < end` (no end: to the last
    /// key), in key order.
    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>>;

    /// Applies `ops` atomically (all or none, also across a crash) and
    /// makes them visible. With `durable`, the returned ticket must be
    /// passed to [`Backend::wait_durable`] (or one from
    /// [`Backend::last_ticket`] taken later) before the write is acknowledged.
    fn write(&self, ops: Vec<Op>, durable: bool) -> StoreResult<Pending>;

    /// Waits until a write is durable (group commit across waiters).
    fn wait_durable(&self, pending: Pending) -> StoreResult<()>;

    /// A ticket covering every write that asked for durability and may be
    /// visible to a reader now (applied, or being applied). Waiting on it
    /// makes everything a reply could reveal durable.
    fn last_ticket(&self) -> Pending;

    /// Removes every key but `keep`, then applies `then` (which may write
    /// `keep` too). Atomic where the store can make it so (the memory
    /// store); the default deletes in chunks through `write`, so a crash
    /// may leave part of the old keys, but never removes `keep` (the
    /// keyspace version, without which the data would not load).
    fn clear(&self, keep: &[u8], then: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        let mut last = Pending::default();
        let mut from = Vec::new();
        loop {
            let chunk = self.scan(&from, None, 1024)?;
            let Some((k, _)) = chunk.last() else { break };
            from = k.clone();
            from.push(0);
            let dels: Vec<Op> = chunk.into_iter().filter(|(k, _)| k != keep).map(|(k, _)| (k, None)).collect();
            if !dels.is_empty() {
                last = self.write(dels, durable)?;
            }
        }
        if !then.is_empty() {
            last = self.write(then, durable)?;
        }
        Ok(last)
    }

    /// FLUSHALL: removes every key of every database (this store's and
    /// those [`Backend::databases`] gave) but `keep`, then applies `then` to
    /// this store. The engine does it with one range tombstone, so a crash
    /// leaves all the databases flushed or none; by default (a store with
    /// one database) it is [`Backend::clear`].
    fn clear_every_database(&self, keep: &[u8], then: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        self.clear(keep, then, durable)
    }

    /// Stores for databases 1..`n` (SELECT), each a keyspace of its own
    /// that shares this store's durability, saving and shutdown; this
    /// store is database 0. By default none: the store has db 0 only.
    fn databases(&self, n: usize) -> StoreResult<Vec<std::sync::Arc<dyn Backend>>> {
        let _ = n;
        Ok(Vec::new())
    }

    /// A point-in-time read view of this store (this database), taken
    /// without stopping writers and without copying the data set where
    /// the store can (the engine: a snapshot sequence). By default an
    /// error: a store that can give no view says so here.
    fn snapshot(&self) -> StoreResult<Box<dyn SnapshotView>> {
        Err(StoreError("this store has no point-in-time view".into()))
    }

    /// Views of database 0 (this store) and databases 1..`n` (those
    /// [`Backend::databases`] gives), element i being database i, taken at
    /// one cut where the store can (the engine: one sequence number for
    /// every database). By default this store's [`Backend::snapshot`] then
    /// each other database's, one after another (a store with one
    /// database gives one view).
    fn snapshot_databases(&self, n: usize) -> StoreResult<Vec<Box<dyn SnapshotView>>> {
        let mut views = vec![self.snapshot()?];
        for db in self.databases(n)? {
            views.push(db.snapshot()?);
        }
        Ok(views)
    }

    /// Writes a point-in-time copy now (SAVE/BGSAVE); engine: flushes.
    fn save(&self) -> StoreResult<()>;

    /// [`Backend::save`], calling `started` once the point in time is fixed
    /// (BGSAVE replies then, so the copy holds every write acknowledged
    /// before the reply and none after it).
    fn save_notify(&self, started: &mut dyn FnMut()) -> StoreResult<()> {
        started();
        self.save()
    }

    /// `name:value` lines for INFO's persistence section.
    fn info(&self) -> Vec<(String, String)>;

    /// Approximate bytes of memory the store uses.
    fn used_memory(&self) -> u64;

    /// Makes every acknowledged write durable (engine sync, command log
    /// fsync: whatever `save` says, as Redis always fsyncs its AOF) and
    /// stops background work; writes a final snapshot as `save` says.
    fn shutdown(&self, save: ShutdownSave) -> StoreResult<()>;
}
