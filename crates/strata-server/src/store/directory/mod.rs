//! The key directory (`--key-directory`): every key's type and expiry in
//! DRAM, in front of the engine store. A write reads its key's meta entry
//! first (the type check, the key and expiry counts, the old expiry); for
//! a key the engine holds only in its PM matrix or tables that read is a
//! hash-index probe, a row search and a copy of the old value, the largest
//! cost of a SET. The directory answers it from DRAM: a key it does not
//! hold is absent (no store read at all), and a key it holds as a string
//! with a known expiry can be overwritten without reading the old value.
//!
//! Keys are held whole (a key of up to 22 bytes inline in its 32-byte
//! table slot, a longer one adds its length; [`table`]): a fingerprint
//! would be smaller, but two keys sharing one would make a positive answer
//! wrong, and the positive answer is what lets an overwrite skip its read.
//!
//! One invariant makes the negative answer exact: every meta entry the
//! store holds has an entry here. Writers keep it by adding a key before
//! the store write that creates it and removing it only after the store
//! write that deletes it ([`crate::keyspace::Txn::commit`]); a flush empties
//! the directory after the store. So the directory may briefly hold a key
//! the store lacks (a reader then asks the store, as without a directory),
//! never the reverse. What an entry says is exact for the writer holding
//! the key's lock (writers of one key are serialized by the callers' key
//! locks). A store write that fails leaves the directory unsure, and it
//! turns itself off (every lookup goes to the store) rather than guess.
//!
//! It is built at open from the scan that counts the keys
//! ([`KeyDirectory::insert_loaded`], then [`KeyDirectory::set_ready`]);
//! until then it answers nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Backend, Op, Pending, ShutdownSave, SnapshotView, StoreResult};
use crate::layout::{meta_header, tag, MEMBER_HEADER};

/// Shards (a power of two), each with its own lock; a key's shard comes
/// from the hash its meta key already carries.
const SHARDS: usize = 64;

/// An entry whose type or expiry is not known now: a delete under way, or
/// an expiry too far out to pack (the store decides).
const UNKNOWN: u64 = u64::MAX;

/// Expiries at or above this do not fit beside the type byte; such keys
/// are held as [`UNKNOWN`] (an expiry in the year 2^56 ms is no real one).
const EXPIRY_LIMIT: u64 = 1 << 56;

mod table;

use table::Table;

/// What the directory knows of a key's meta entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// The store holds no meta entry for the key.
    Absent,
    /// The stored type byte (as in the meta entry) and expiry (0: none).
    Entry {
        /// The meta entry's first byte.
        type_byte: u8,
        /// Unix ms, 0 for none.
        expire_ms: u64,
    },
    /// Ask the store (the directory is off, not built, or unsure).
    Unsure,
}

/// The directory of one database.
pub struct KeyDirectory {
    shards: Box<[Mutex<Table>]>,
    /// Built and trusted; false before the open scan and after a failed write.
    ready: AtomicBool,
}

impl Default for KeyDirectory {
    fn default() -> Self {
        KeyDirectory {
            shards: (0..SHARDS).map(|_| Mutex::new(Table::default())).collect(),
            ready: AtomicBool::new(false),
        }
    }
}

/// The packed entry for stored meta bytes.
fn pack(value: &[u8]) -> u64 {
    match meta_header(value) {
        // 0 marks a free slot of the table: no real meta entry packs to it.
        Some((t, exp)) if exp < EXPIRY_LIMIT && (t, exp) != (0, 0) => (u64::from(t) << 56) | exp,
        _ => UNKNOWN,
    }
}

/// What a packed entry (not [`UNKNOWN`]) says.
fn unpack(p: u64) -> Known {
    Known::Entry { type_byte: (p >> 56) as u8, expire_ms: p & (EXPIRY_LIMIT - 1) }
}

impl KeyDirectory {
    /// The user key of a meta key and its shard; `None` for other keys.
    fn locate(meta_key: &[u8]) -> Option<(&[u8], usize)> {
        if meta_key.first() != Some(&tag::META) || meta_key.len() < MEMBER_HEADER {
            return None;
        }
        let h = u32::from_be_bytes([meta_key[1], meta_key[2], meta_key[3], meta_key[4]]);
        Some((&meta_key[MEMBER_HEADER..], h as usize & (SHARDS - 1)))
    }

    /// What the directory knows of the meta key `meta_key`.
    pub fn lookup(&self, meta_key: &[u8]) -> Known {
        if !self.ready.load(Ordering::Acquire) {
            return Known::Unsure;
        }
        let Some((key, shard)) = Self::locate(meta_key) else { return Known::Unsure };
        match self.shards[shard].lock().get(key) {
            None => Known::Absent,
            Some(UNKNOWN) => Known::Unsure,
            Some(p) => unpack(p),
        }
    }

    /// Whether lookups are answered.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Adds a meta entry found by the open scan.
    pub fn insert_loaded(&self, meta_key: &[u8], value: &[u8]) {
        self.set(meta_key, pack(value));
    }

    fn set(&self, meta_key: &[u8], packed: u64) {
        let Some((key, shard)) = Self::locate(meta_key) else { return };
        self.shards[shard].lock().insert(key, packed);
    }

    /// Asks the CPU for the table slot a lookup of `meta_key` reads, so
    /// that the lookups of a pipeline's keys overlap their cache misses.
    pub fn prefetch(&self, meta_key: &[u8]) {
        if let Some((key, shard)) = Self::locate(meta_key) {
            self.shards[shard].lock().prefetch(key);
        }
    }

    /// Starts answering (after the open scan saw every key).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Stops answering until the server restarts: a store write failed
    /// and what it changed is unknown.
    pub fn turn_off(&self) {
        self.ready.store(false, Ordering::Release);
    }

    /// What the directory holds for a meta entry stored as `value`.
    pub fn known_for(value: &[u8]) -> Known {
        match pack(value) {
            UNKNOWN => Known::Unsure,
            p => unpack(p),
        }
    }

    /// Before a store write that puts `value` under `meta_key`.
    pub fn will_put(&self, meta_key: &[u8], value: &[u8]) {
        self.set(meta_key, pack(value));
    }

    /// Before a store write that deletes `meta_key`: unsure until
    /// [`KeyDirectory::deleted`].
    pub fn will_delete(&self, meta_key: &[u8]) {
        if let Some((key, shard)) = Self::locate(meta_key) {
            self.shards[shard].lock().update(key, UNKNOWN);
        }
    }

    /// After the store write that deleted `meta_key`.
    pub fn deleted(&self, meta_key: &[u8]) {
        if let Some((key, shard)) = Self::locate(meta_key) {
            self.shards[shard].lock().remove_if(key, UNKNOWN);
        }
    }

    /// Empties the directory (after the store was flushed).
    fn clear(&self) {
        self.shards.iter().for_each(|s| s.lock().clear());
    }

    /// Entries held.
    pub fn entries(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().len() as u64).sum()
    }

    /// Bytes its tables take (slots allocated, used or not) and the long
    /// keys they point to.
    pub fn bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().bytes() as u64).sum()
    }
}

/// A store with a key directory per database in front of it.
pub struct DirectoryStore {
    inner: Arc<dyn Backend>,
    /// Every database's directory (index = database number).
    dirs: Arc<Vec<KeyDirectory>>,
    db: usize,
}

impl DirectoryStore {
    /// `inner` (database 0 of a store with `databases` databases) behind
    /// key directories, empty until the open scan fills them.
    pub fn new(inner: Arc<dyn Backend>, databases: usize) -> DirectoryStore {
        let dirs = Arc::new((0..databases.max(1)).map(|_| KeyDirectory::default()).collect());
        DirectoryStore { inner, dirs, db: 0 }
    }

    fn dir(&self) -> &KeyDirectory {
        &self.dirs[self.db]
    }

    /// The meta puts among `ops`, to put in the directory emptied by a
    /// flush (a flush's own writes land with it).
    fn meta_puts(ops: &[Op]) -> Vec<(Vec<u8>, Vec<u8>)> {
        ops.iter()
            .filter(|(k, _)| k.first() == Some(&tag::META))
            .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())))
            .collect()
    }

    /// Puts a flush's own writes in the (emptied) directory.
    fn put_after_flush(&self, puts: &[(Vec<u8>, Vec<u8>)]) {
        puts.iter().for_each(|(k, v)| self.dir().will_put(k, v));
    }
}

impl Backend for DirectoryStore {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        if self.dir().lookup(key) == Known::Absent {
            return Ok(None);
        }
        self.inner.get(key)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        let dir = self.dir();
        let asked: Vec<bool> = keys.iter().map(|k| dir.lookup(k) != Known::Absent).collect();
        if asked.iter().all(|a| *a) {
            return self.inner.multi_get(keys);
        }
        let wanted: Vec<Vec<u8>> = keys.iter().zip(&asked).filter(|(_, a)| **a).map(|(k, _)| k.clone()).collect();
        let mut got = self.inner.multi_get(&wanted)?.into_iter();
        Ok(asked.iter().map(|a| if *a { got.next().flatten() } else { None }).collect())
    }

    fn prefetch(&self, keys: &[Vec<u8>]) {
        let dir = self.dir();
        if dir.is_ready() {
            keys.iter().for_each(|k| dir.prefetch(k));
        }
        self.inner.prefetch(keys)
    }

    fn get_meta(&self, meta_key: &[u8]) -> StoreResult<(Option<Vec<u8>>, Known)> {
        match self.dir().lookup(meta_key) {
            Known::Absent => Ok((None, Known::Absent)),
            known => Ok((self.inner.get(meta_key)?, known)),
        }
    }

    fn known_meta(&self, meta_key: &[u8]) -> Known {
        self.dir().lookup(meta_key)
    }

    fn key_directory(&self) -> Option<&KeyDirectory> {
        Some(self.dir())
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan(start, end, limit)
    }

    // The writer (a keyspace transaction) keeps the directory: only it
    // knows whether a key it puts existed before.
    fn write(&self, ops: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        self.inner.write(ops, durable)
    }

    fn wait_durable(&self, pending: Pending) -> StoreResult<()> {
        self.inner.wait_durable(pending)
    }

    fn last_ticket(&self) -> Pending {
        self.inner.last_ticket()
    }

    fn clear(&self, keep: &[u8], then: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        let puts = Self::meta_puts(&then);
        // Present before the store has them, as for any write.
        puts.iter().for_each(|(k, v)| self.dir().will_put(k, v));
        let r = self.inner.clear(keep, then, durable);
        match &r {
            Ok(_) => {
                self.dir().clear();
                self.put_after_flush(&puts);
            }
            Err(_) => self.dir().turn_off(),
        }
        r
    }

    fn clear_every_database(&self, keep: &[u8], then: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        let puts = Self::meta_puts(&then);
        puts.iter().for_each(|(k, v)| self.dir().will_put(k, v));
        let r = self.inner.clear_every_database(keep, then, durable);
        match &r {
            Ok(_) => {
                self.dirs.iter().for_each(KeyDirectory::clear);
                self.put_after_flush(&puts);
            }
            Err(_) => self.dirs.iter().for_each(KeyDirectory::turn_off),
        }
        r
    }

    fn databases(&self, n: usize) -> StoreResult<Vec<Arc<dyn Backend>>> {
        if n > self.dirs.len() {
            return Err(super::StoreError(format!("{n} databases asked of a key directory for {}", self.dirs.len())));
        }
        let inner = self.inner.databases(n)?;
        Ok(inner
            .into_iter()
            .enumerate()
            .map(|(i, store)| {
                Arc::new(DirectoryStore { inner: store, dirs: self.dirs.clone(), db: i + 1 }) as Arc<dyn Backend>
            })
            .collect())
    }

    fn snapshot(&self) -> StoreResult<Box<dyn SnapshotView>> {
        self.inner.snapshot()
    }

    fn snapshot_databases(&self, n: usize) -> StoreResult<Vec<Box<dyn SnapshotView>>> {
        self.inner.snapshot_databases(n)
    }

    fn save(&self) -> StoreResult<()> {
        self.inner.save()
    }

    fn save_notify(&self, started: &mut dyn FnMut()) -> StoreResult<()> {
        self.inner.save_notify(started)
    }

    fn info(&self) -> Vec<(String, String)> {
        let mut v = self.inner.info();
        let (n, b) = self.dirs.iter().fold((0, 0), |(n, b), d| (n + d.entries(), b + d.bytes()));
        v.push(("key_directory_entries".into(), n.to_string()));
        v.push(("key_directory_bytes".into(), b.to_string()));
        v.push(("key_directory_on".into(), u8::from(self.dirs.iter().all(KeyDirectory::is_ready)).to_string()));
        v
    }

    fn used_memory(&self) -> u64 {
        self.inner.used_memory() + self.dirs.iter().map(KeyDirectory::bytes).sum::<u64>()
    }

    fn shutdown(&self, save: ShutdownSave) -> StoreResult<()> {
        self.inner.shutdown(save)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::keyspace::Meta;
    use crate::layout::meta_key;

    /// Random puts and deletes, as a writer makes them, keys short and
    /// long: the directory never says a stored key is absent, nor anything
    /// but the stored type and expiry.
    #[test]
    fn answers_agree_with_the_store() {
        let dir = KeyDirectory::default();
        let mut store: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let name = |i: u32| {
            if i.is_multiple_of(3) {
                format!("a-key-longer-than-the-inline-bytes-{i}")
            } else {
                format!("k{i}")
            }
        };
        for i in 0..300 {
            let k = meta_key(name(i).as_bytes());
            if rng.gen_bool(0.5) {
                let v = Meta::string(vec![1], 0).encode();
                dir.insert_loaded(&k, &v);
                store.insert(k, v);
            }
        }
        dir.set_ready();
        for step in 0..20_000 {
            let k = meta_key(name(rng.gen_range(0..300)).as_bytes());
            if rng.gen_bool(0.6) {
                let exp = if rng.gen_bool(0.3) { rng.gen_range(1..1 << 40) } else { 0 };
                let v = if rng.gen_bool(0.5) {
                    Meta::string(vec![2], exp)
                } else {
                    Meta::collection(crate::keyspace::KeyType::Set, 3, exp)
                }
                .encode();
                dir.will_put(&k, &v);
                store.insert(k, v);
            } else if store.contains_key(&k) {
                dir.will_delete(&k);
                store.remove(&k);
                dir.deleted(&k);
            }
            let probe = meta_key(name(rng.gen_range(0..300)).as_bytes());
            match (dir.lookup(&probe), store.get(&probe)) {
                (Known::Absent, None) => {}
                (Known::Entry { type_byte, expire_ms }, Some(v)) => {
                    assert_eq!((type_byte, expire_ms), (v[0], Meta::decode_expiry(v).unwrap_or(0)), "step {step}");
                }
                (got, stored) => panic!("step {step}: {got:?} for {stored:?}"),
            }
        }
        assert_eq!(dir.entries(), store.len() as u64);
        dir.clear();
        assert_eq!((dir.entries(), dir.bytes()), (0, 0));
    }

    #[test]
    fn off_until_ready_and_after_a_failed_write() {
        let dir = KeyDirectory::default();
        let k = meta_key(b"a");
        assert_eq!(dir.lookup(&k), Known::Unsure);
        dir.set_ready();
        assert_eq!(dir.lookup(&k), Known::Absent);
        dir.will_put(&k, &Meta::string(vec![], 7).encode());
        assert_eq!(dir.lookup(&k), Known::Entry { type_byte: crate::keyspace::KeyType::String as u8, expire_ms: 7 });
        dir.turn_off();
        assert_eq!(dir.lookup(&k), Known::Unsure);
        assert_eq!(dir.lookup(b"x-not-a-meta-key"), Known::Unsure);
    }
}
