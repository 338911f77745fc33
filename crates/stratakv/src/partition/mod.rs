//! Partitions: named key spaces of one database that share its log and
//! write path, each dropped in O(1) (TridentKV's partitioned store;
//! RocksDB's column families). How their keys are laid out is in
//! `key/partition.rs`; dropping one is a MANIFEST edit that records a
//! range tombstone over its keys, and the tables under it are deleted in
//! the background ([`drop`]). [`split`] keeps range partitions.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub(crate) mod drop;
pub(crate) mod split;

use crate::batch::WriteBatch;
use crate::db::{Cursor, Db, DbInner, DbIter, Snapshot};
use crate::engine::Commit;
use crate::error::{Error, Result};
use crate::key::partition::{is_reserved, partition_prefix, partition_range, MAX_PARTITION_ID, PARTITION_MARK};
use crate::key::{KeyRange, MAX_KEY_LEN};
use crate::options::{ReadOptions, WriteOptions};
use crate::version::range_del::DROPPED;
use crate::version::{RangeTomb, VersionEdit};

/// The name of the partition that holds what the `Db` API reads and
/// writes (and every key of a database from before partitions).
pub const DEFAULT_PARTITION: &str = "default";

/// Longest partition name.
const MAX_NAME_LEN: usize = 255;

/// A handle on one partition: the `Db` API over its keys only. Cheap to
/// clone. Once the partition is dropped, every call fails with
/// `InvalidArgument` (writes already in flight are discarded).
#[derive(Clone)]
pub struct Partition {
    db: Db,
    id: u32,
    name: Arc<str>,
    /// Empty for the default partition.
    prefix: Vec<u8>,
    live: Arc<AtomicBool>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition").field("name", &self.name).field("id", &self.id).finish()
    }
}

impl Db {
    /// Creates partition `name` and returns a handle on it; fails if it
    /// exists. The first partition of a database reserves keys that begin
    /// with `0xff 0xff` (the default partition may not hold any then).
    pub fn create_partition(&self, name: &str) -> Result<Partition> {
        check_name(name)?;
        let inner = &self.inner;
        let _one = inner.partition_ops.lock();
        if name == DEFAULT_PARTITION || inner.eng.versions.lock().partitions.contains_key(name) {
            return Err(Error::InvalidArgument(format!("partition {name:?} exists")));
        }
        if !inner.partitioned.load(Ordering::Acquire) {
            inner.reserve_partition_keys()?;
        }
        let id = {
            let mut vs = inner.eng.versions.lock();
            let id = vs.next_partition;
            if id > MAX_PARTITION_ID {
                return Err(Error::InvalidArgument("no partition ids left".into()));
            }
            let edit = VersionEdit {
                partitions_added: vec![(name.to_string(), id)],
                next_partition: Some(id + 1),
                ..Default::default()
            };
            inner.eng.surface(inner.eng.commit(&mut vs, Commit { edit, ..Default::default() }))?;
            id
        };
        Ok(self.handle(name, id))
    }

    /// A handle on partition `name` (`"default"` is the `Db`'s own keys).
    pub fn partition(&self, name: &str) -> Result<Partition> {
        if name == DEFAULT_PARTITION {
            return Ok(self.handle(name, 0));
        }
        let id = self.inner.eng.versions.lock().partitions.get(name).copied();
        match id {
            Some(id) => Ok(self.handle(name, id)),
            None => Err(Error::InvalidArgument(format!("no partition {name:?}"))),
        }
    }

    /// Partition `name`, created if it does not exist.
    pub fn partition_or_create(&self, name: &str) -> Result<Partition> {
        match self.partition(name) {
            Ok(p) => Ok(p),
            Err(_) => match self.create_partition(name) {
                Ok(p) => Ok(p),
                // Created meanwhile by another thread.
                Err(_) => self.partition(name),
            },
        }
    }

    /// Drops partition `name` with every key in it. O(1) in its size: one
    /// MANIFEST edit, after which no reader sees its keys; its tables are
    /// deleted in the background and compactions drop the rest. Its id is
    /// never reused, so a partition created again under the name is empty.
    pub fn drop_partition(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        inner.eng.check_writable()?;
        let _one = inner.partition_ops.lock();
        // The drop is durable once its MANIFEST edit is: every write before
        // it must be too, or a power loss could keep the drop and lose an
        // acknowledged write that came before it (not a point in time).
        inner.eng.sync_log()?;
        let mut vs = inner.eng.versions.lock();
        let Some(id) = vs.partitions.get(name).copied() else {
            return Err(Error::InvalidArgument(format!("no partition {name:?}")));
        };
        let (start, end) = partition_range(id);
        let edit = VersionEdit {
            partitions_dropped: vec![id],
            range_dels_added: vec![RangeTomb { start, end, seq: DROPPED }],
            ..Default::default()
        };
        // A failed MANIFEST write leaves durable state unknown: poison.
        inner.eng.surface(inner.eng.commit(&mut vs, Commit { edit, ..Default::default() }))?;
        drop(vs);
        if let Some(flag) = inner.live_partitions.lock().remove(&id) {
            flag.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// The names of the partitions, `"default"` first.
    pub fn list_partitions(&self) -> Vec<String> {
        let vs = self.inner.eng.versions.lock();
        std::iter::once(DEFAULT_PARTITION.to_string()).chain(vs.partitions.keys().cloned()).collect()
    }

    /// Removes every key in `[start, end)` with one range tombstone: O(1)
    /// now, space reclaimed as compaction reaches the range (tables it
    /// covers entirely are deleted without being read).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.partition(DEFAULT_PARTITION)?.delete_range(start, end)
    }

    /// Removes every key of every partition, the default one included,
    /// with one range tombstone: O(1), and atomic across a crash (one
    /// MANIFEST edit). The partitions stay, empty; their tables are deleted
    /// whole in the background.
    pub fn clear_all_partitions(&self) -> Result<()> {
        // Above every engine key: partition keys are the mark, a 4-byte id
        // and a user key of at most MAX_KEY_LEN bytes.
        let end = vec![0xff; MAX_KEY_LEN + crate::key::partition::PARTITION_PREFIX_LEN + 1];
        self.inner.delete_range(Vec::new(), end)
    }

    fn handle(&self, name: &str, id: u32) -> Partition {
        let live =
            self.inner.live_partitions.lock().entry(id).or_insert_with(|| Arc::new(AtomicBool::new(true))).clone();
        let prefix = if id == 0 { Vec::new() } else { partition_prefix(id).to_vec() };
        Partition { db: self.clone(), id, name: name.into(), prefix, live }
    }
}

impl DbInner {
    /// An iterator over `range` of engine keys, at snapshot `at` (which
    /// the caller keeps alive) or now.
    pub(crate) fn iter_engine(self: &Arc<Self>, range: KeyRange, at: Option<crate::key::SeqNo>) -> Result<DbIter> {
        match at {
            Some(seq) => DbIter::new(self.clone(), range, seq, None),
            None => {
                // Until the iterator is dropped, a snapshot keeps compaction
                // from dropping what it reads.
                let pin = Snapshot::new(self.clone());
                DbIter::new(self.clone(), range, pin.sequence(), Some(pin))
            }
        }
    }

    /// `range` of the default partition's keys as a range of engine keys.
    pub(crate) fn default_range(&self, range: KeyRange) -> KeyRange {
        if !self.partitioned.load(Ordering::Acquire) {
            return range;
        }
        let mark = PARTITION_MARK.to_vec();
        let end = match range.end {
            Bound::Included(k) | Bound::Excluded(k) if k >= mark => Bound::Excluded(mark),
            Bound::Unbounded => Bound::Excluded(mark),
            other => other,
        };
        KeyRange { start: range.start, end }
    }

    /// Makes keys beginning with the partitions' mark partition keys: from
    /// now on the default partition refuses them, and there must be none
    /// in it already. Holding the write lock, every write that reserved
    /// before the flag was set is published before the scan, and every
    /// later one sees the flag (`DbInner::reserve`).
    fn reserve_partition_keys(self: &Arc<Self>) -> Result<()> {
        self.partitioned.store(true, Ordering::Release);
        let w = self.eng.log.lock();
        self.eng.pipeline.wait_visible(w.next_seq().saturating_sub(1));
        let range = KeyRange { start: Bound::Included(PARTITION_MARK.to_vec()), end: Bound::Unbounded };
        let first = self.iter_engine(range, None)?.try_next()?;
        drop(w);
        if let Some((k, _)) = first {
            self.partitioned.store(false, Ordering::Release);
            return Err(Error::InvalidArgument(format!(
                "the default partition holds key {k:02x?}, which begins with 0xff 0xff: partitions need those keys"
            )));
        }
        Ok(())
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(Error::InvalidArgument(format!("a partition name has 1 to {MAX_NAME_LEN} bytes")));
    }
    Ok(())
}

impl Partition {
    /// The partition's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is the default partition (the `Db`'s own keys).
    pub fn is_default(&self) -> bool {
        self.id == 0
    }

    /// The key the engine stores `key` of this partition under.
    pub(crate) fn engine_key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    fn check(&self) -> Result<()> {
        if !self.live.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!("partition {:?} was dropped", self.name)));
        }
        Ok(())
    }

    /// `key` as the engine stores it, checked.
    fn key_of(&self, key: &[u8]) -> Result<Vec<u8>> {
        self.check()?;
        if key.len() + self.prefix.len() > MAX_KEY_LEN {
            return Err(Error::InvalidArgument(format!("key of {} bytes exceeds the limit", key.len())));
        }
        if self.is_default() && is_reserved(key) && self.db.inner.partitioned.load(Ordering::Acquire) {
            return Err(reserved_error());
        }
        Ok(self.engine_key(key))
    }

    /// `range` of this partition's keys as a range of engine keys.
    pub(crate) fn range_of(&self, range: KeyRange) -> KeyRange {
        let map = |b: Bound<Vec<u8>>| match b {
            Bound::Included(k) => Bound::Included(self.engine_key(&k)),
            Bound::Excluded(k) => Bound::Excluded(self.engine_key(&k)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let (start, end) = (map(range.start), map(range.end));
        if self.is_default() {
            // The default partition ends where partitions begin.
            return self.db.inner.default_range(KeyRange { start, end });
        }
        let start = match start {
            Bound::Unbounded => Bound::Included(self.prefix.clone()),
            other => other,
        };
        let end = match end {
            Bound::Unbounded => Bound::Excluded(partition_range(self.id).1),
            other => other,
        };
        KeyRange { start, end }
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with write options.
    pub fn put_opt(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, wo: &WriteOptions) -> Result<()> {
        let k = self.key_of(key.as_ref())?;
        let mut b = WriteBatch::new();
        b.put_raw(&k, value.as_ref());
        self.db.inner.write(&b, wo.sync)
    }

    /// Removes `key`.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Removes `key` with write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, wo: &WriteOptions) -> Result<()> {
        let k = self.key_of(key.as_ref())?;
        let mut b = WriteBatch::new();
        b.delete_raw(&k);
        self.db.inner.write(&b, wo.sync)
    }

    /// Applies a batch whose keys are this partition's, atomically. (A
    /// batch built with `WriteBatch::put_in` spans partitions; write it
    /// with `Db::write`.)
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(&batch, &WriteOptions::default())
    }

    /// [`Partition::write`] with write options.
    pub fn write_opt(&self, batch: &WriteBatch, wo: &WriteOptions) -> Result<()> {
        self.check()?;
        if self.is_default() {
            return self.db.write_opt(batch, wo);
        }
        if let Some(why) = batch.invalid() {
            return Err(Error::InvalidArgument(why.to_string()));
        }
        let mut b = WriteBatch::new();
        for (kind, k, v) in batch.iter() {
            match kind {
                crate::key::Kind::Put => b.put_in(self, k, v),
                crate::key::Kind::Delete => b.delete_in(self, k),
            };
        }
        self.db.inner.write(&b, wo.sync)
    }

    /// The current value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// The value of `key` as of `ro.snapshot` (a `Db` snapshot) or now.
    pub fn get_opt(&self, key: impl AsRef<[u8]>, ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        let k = self.key_of(key.as_ref())?;
        self.db.get_opt(k, ro)
    }

    /// Values of several keys at one consistent point.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let ks = keys.iter().map(|k| self.key_of(k.as_ref())).collect::<Result<Vec<_>>>()?;
        self.db.multi_get(&ks)
    }

    /// Iterates this partition's keys in `range` (keys shown without the
    /// partition's prefix).
    pub fn iter(&self, range: impl Into<KeyRange>) -> Result<DbIter> {
        self.check()?;
        Ok(self.db.inner.iter_engine(self.range_of(range.into()), None)?.with_prefix(&self.prefix))
    }

    /// Iterates `range` as of a snapshot (`ro.snapshot`) or now.
    pub fn iter_opt(&self, range: impl Into<KeyRange>, ro: &ReadOptions) -> Result<DbIter> {
        self.check()?;
        Ok(self.db.inner.iter_engine(self.range_of(range.into()), ro.snapshot)?.with_prefix(&self.prefix))
    }

    /// A positionable cursor over `range` now.
    pub fn cursor(&self, range: impl Into<KeyRange>) -> Result<Cursor> {
        self.iter(range)?.cursor()
    }

    /// A snapshot of the whole database (partitions share sequence numbers).
    pub fn snapshot(&self) -> Snapshot {
        self.db.snapshot()
    }

    /// Seals the shared memtable and waits until it is in level 0.
    pub fn flush(&self) -> Result<()> {
        self.db.flush()
    }

    /// Compacts this partition's keys in `range` down to the bottom.
    pub fn compact_range(&self, range: impl Into<KeyRange>) -> Result<()> {
        self.check()?;
        self.db.compact_range(self.range_of(range.into()))
    }

    /// Removes every key of this partition in `[start, end)` (see
    /// [`Db::delete_range`]).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let s = self.key_of(start.as_ref())?;
        let mut e = self.engine_key(end.as_ref());
        if end.as_ref().len() > MAX_KEY_LEN {
            return Err(Error::InvalidArgument("range end exceeds the key limit".into()));
        }
        if self.is_default() && self.db.inner.partitioned.load(Ordering::Acquire) && e > PARTITION_MARK.to_vec() {
            e = PARTITION_MARK.to_vec();
        }
        self.db.inner.delete_range(s, e)
    }

    /// Removes every key of this partition (a range tombstone over all of
    /// it; use `Db::drop_partition` to remove the partition itself).
    pub fn clear(&self) -> Result<()> {
        self.check()?;
        let (s, e) = if self.is_default() { (Vec::new(), PARTITION_MARK.to_vec()) } else { partition_range(self.id) };
        if self.is_default() && !self.db.inner.partitioned.load(Ordering::Acquire) {
            // No partitions: the default partition is every key, the
            // reserved ones included.
            return self.db.inner.delete_range(s, vec![0xff; MAX_KEY_LEN + 1]);
        }
        self.db.inner.delete_range(s, e)
    }
}

impl WriteBatch {
    /// Adds `key = value` in partition `p` (the batch may span partitions).
    pub fn put_in(&mut self, p: &Partition, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        if p.is_default() && is_reserved(key.as_ref()) {
            self.mark_reserved();
        }
        let k = p.engine_key(key.as_ref());
        self.put_raw(&k, value.as_ref())
    }

    /// Adds a deletion of `key` in partition `p`.
    pub fn delete_in(&mut self, p: &Partition, key: impl AsRef<[u8]>) -> &mut Self {
        if p.is_default() && is_reserved(key.as_ref()) {
            self.mark_reserved();
        }
        let k = p.engine_key(key.as_ref());
        self.delete_raw(&k)
    }
}

fn reserved_error() -> Error {
    Error::InvalidArgument(
        "keys beginning with 0xff 0xff belong to partitions in a database that has them; \
         the default partition may not use them"
            .into(),
    )
}
