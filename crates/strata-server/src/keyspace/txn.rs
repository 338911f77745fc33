//! A command's (or a MULTI block's) view of the keyspace: reads see the
//! store plus this transaction's own pending writes, and all writes are
//! committed as one atomic engine batch.

use std::collections::BTreeMap;

use ahash::AHashMap;

use super::{expire_index_key, meta_key, prefix_end, KeyType, Meta};
use crate::store::directory::{KeyDirectory, Known};
use crate::store::{Backend, Op, Pending, StoreError, StoreResult};

/// Changes a commit made to the key and expiry counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountDelta {
    /// Top-level keys added minus removed.
    pub keys: i64,
    /// Keys with an expiry added minus removed.
    pub expires: i64,
}

/// Pending writes over a store. Not thread-safe: one per command; the
/// caller holds the key locks of every key it touches.
pub struct Txn<'a> {
    store: &'a dyn Backend,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// What the store held under meta keys read for writing, as first
    /// read (for the count deltas): present, and with an expiry.
    base: AHashMap<Vec<u8>, Base>,
    /// FLUSHDB/FLUSHALL ran: the store counts as empty below `writes`.
    cleared: bool,
    /// How the flush reaches the store (with `cleared`).
    scope: ClearScope,
    /// The time every expiry check of this transaction uses.
    pub now_ms: u64,
    /// Keys past their expiry still count as present, and an expiry set
    /// in the past is kept rather than deleting the key: the replica's
    /// master client, as in Redis, where a replica never expires keys of
    /// its own and waits for its primary's DEL (expiring them by its own
    /// clock would make a later write of the primary, a PERSIST or an
    /// INCR, apply to a missing key and the copies differ).
    pub keep_expired: bool,
    /// Keys this transaction removed because they had expired.
    pub expired: u64,
    /// Keys found expired, removed ([`Txn::meta_for_write`]) or passed over
    /// by a read ([`Txn::meta`], [`Txn::metas`]), not yet sent to replicas:
    /// a write command sends them a DEL before itself, as Redis does when a
    /// lookup finds a key expired, because a replica does not expire keys
    /// of its own (it would read the old value: a ZUNIONSTORE's source).
    pub expired_keys: Vec<Vec<u8>>,
    /// Writes staged so far (a command that staged none changed nothing).
    pub ops: u64,
    /// With keyspace notifications on: events the writes imply (`new`,
    /// `expired`, `del`; class 0) and those a command publishes itself
    /// (with their class), with their keys, in order.
    pub notes: Option<Vec<(u32, &'static str, Vec<u8>)>>,
}

/// What a transaction's flush removes from the store at commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClearScope {
    /// Its own database (FLUSHDB).
    Database,
    /// Every database, in one step (FLUSHALL, on database 0's transaction).
    Everything,
    /// Nothing more: another transaction's `Everything` empties this
    /// database (FLUSHALL, on the other databases' transactions).
    Covered,
}

/// A meta key's store value as first read: (present, has an expiry), and
/// what the key directory said of it when it answered the read.
type Base = (bool, bool, Known);

fn base_of(v: Option<&[u8]>) -> Base {
    (v.is_some(), v.and_then(Meta::decode_expiry).is_some_and(|ms| ms != 0), Known::Unsure)
}

fn corrupt(key: &[u8]) -> StoreError {
    StoreError(format!("corrupt meta entry for key '{}'", String::from_utf8_lossy(key)))
}

impl<'a> Txn<'a> {
    /// A transaction over `store` at time `now_ms`.
    pub fn new(store: &'a dyn Backend, now_ms: u64) -> Txn<'a> {
        Txn {
            store,
            writes: BTreeMap::new(),
            base: AHashMap::new(),
            cleared: false,
            scope: ClearScope::Database,
            now_ms,
            keep_expired: false,
            expired: 0,
            expired_keys: Vec::new(),
            ops: 0,
            notes: None,
        }
    }

    /// Whether `m` counts as expired in this transaction.
    pub fn is_expired(&self, m: &Meta) -> bool {
        !self.keep_expired && m.expired(self.now_ms)
    }

    /// Whether an expiry at `at` (ms, 0: none) deletes the key at once
    /// instead of being set (see `keep_expired`).
    pub fn is_past(&self, at: u64) -> bool {
        !self.keep_expired && at != 0 && at <= self.now_ms
    }

    /// A transaction over `store` with this one's clock and expiry rule.
    pub fn sibling(&self, store: &'a dyn Backend) -> Txn<'a> {
        let mut t = Txn::new(store, self.now_ms);
        t.keep_expired = self.keep_expired;
        t
    }

    /// The store under this transaction.
    pub fn store(&self) -> &'a dyn Backend {
        self.store
    }

    /// Records an event for `key` if notifications are tracked.
    pub fn note(&mut self, event: &'static str, key: &[u8]) {
        self.note_class(0, event, key);
    }

    /// Records event `event` of `class` for `key` if notifications are
    /// tracked (class 0: the class the event's name implies).
    pub fn note_class(&mut self, class: u32, event: &'static str, key: &[u8]) {
        if let Some(n) = self.notes.as_mut() {
            n.push((class, event, key.to_vec()));
        }
    }

    /// Reads `k` (own writes first).
    pub fn get(&mut self, k: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.get_recording(k, false)
    }

    /// Reads `k`; with `record`, remembers what the store held under a
    /// meta key so that the commit need not read it again.
    fn get_recording(&mut self, k: &[u8], record: bool) -> StoreResult<Option<Vec<u8>>> {
        if let Some(v) = self.writes.get(k) {
            return Ok(v.clone());
        }
        if self.cleared {
            return Ok(None);
        }
        if record && k.first() == Some(&super::tag::META) && !self.base.contains_key(k) {
            let (v, known) = self.store.get_meta(k)?;
            let (present, expires, _) = base_of(v.as_deref());
            self.base.insert(k.to_vec(), (present, expires, known));
            return Ok(v);
        }
        self.store.get(k)
    }

    /// Whether this transaction has staged a value (not a delete) for `k`.
    pub fn staged(&self, k: &[u8]) -> bool {
        matches!(self.writes.get(k), Some(Some(_)))
    }

    /// Stages `k = v`.
    pub fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.ops += 1;
        self.writes.insert(k, Some(v));
    }

    /// Stages the deletion of `k`.
    pub fn delete(&mut self, k: Vec<u8>) {
        self.ops += 1;
        self.writes.insert(k, None);
    }

    /// Up to `limit` live pairs with `start <= key < end`, merging the
    /// store with this transaction's writes.
    pub fn scan(&mut self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut cursor = start.to_vec();
        let chunk_size = limit.clamp(16, 4096);
        loop {
            let chunk = if self.cleared { Vec::new() } else { self.store.scan(&cursor, end, chunk_size)? };
            let exhausted = chunk.len() < chunk_size;
            // The store chunk covers [cursor, hi); hi = just after its last key.
            let hi: Option<Vec<u8>> = match (exhausted, chunk.last()) {
                (false, Some((k, _))) => {
                    let mut h = k.clone();
                    h.push(0);
                    Some(h)
                }
                _ => end.map(<[u8]>::to_vec),
            };
            let over = self.writes.range::<[u8], _>((
                std::ops::Bound::Included(cursor.as_slice()),
                match &hi {
                    Some(h) => std::ops::Bound::Excluded(h.as_slice()),
                    None => std::ops::Bound::Unbounded,
                },
            ));
            let mut a = chunk.into_iter().peekable();
            let mut b = over.peekable();
            loop {
                let take_store = match (a.peek(), b.peek()) {
                    (None, None) => break,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (Some((ka, _)), Some((kb, _))) => ka.as_slice() < kb.as_slice(),
                };
                if take_store {
                    if let Some(kv) = a.next() {
                        out.push(kv);
                    }
                } else if let Some((k, v)) = b.next() {
                    if a.peek().is_some_and(|(ka, _)| ka == k) {
                        a.next();
                    }
                    if let Some(v) = v {
                        out.push((k.clone(), v.clone()));
                    }
                }
                if out.len() >= limit {
                    return Ok(out);
                }
            }
            match hi {
                Some(h) if !exhausted => cursor = h,
                _ => return Ok(out),
            }
        }
    }

    /// Every live pair whose key starts with `prefix`.
    pub fn scan_prefix(&mut self, prefix: &[u8]) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let end = prefix_end(prefix);
        let mut out = Vec::new();
        let mut cursor = prefix.to_vec();
        loop {
            let chunk = self.scan(&cursor, end.as_deref(), 1024)?;
            let done = chunk.len() < 1024;
            if let Some((k, _)) = chunk.last() {
                cursor = k.clone();
                cursor.push(0);
            }
            out.extend(chunk);
            if done {
                return Ok(out);
            }
        }
    }

    /// The meta entry of `key` as stored, expired or not, read to be
    /// changed (the commit's count deltas reuse this read).
    pub fn raw_meta(&mut self, key: &[u8]) -> StoreResult<Option<Meta>> {
        self.load_meta(key, true)
    }

    fn load_meta(&mut self, key: &[u8], for_write: bool) -> StoreResult<Option<Meta>> {
        match self.get_recording(&meta_key(key), for_write)? {
            None => Ok(None),
            Some(b) => Meta::decode_owned(b).map(Some).ok_or_else(|| corrupt(key)),
        }
    }

    /// The meta entries of several keys (reads), those the transaction has
    /// not staged read from the store in one batch.
    pub fn metas<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> StoreResult<Vec<Option<Meta>>> {
        let mkeys: Vec<Vec<u8>> = keys.iter().map(|k| meta_key(k.as_ref())).collect();
        let from_store: Vec<Vec<u8>> = if self.cleared {
            Vec::new()
        } else {
            mkeys.iter().filter(|k| !self.writes.contains_key(*k)).cloned().collect()
        };
        let mut fetched = self.store.multi_get(&from_store)?.into_iter();
        let mut out = Vec::with_capacity(keys.len());
        for (key, mk) in keys.iter().zip(&mkeys) {
            let raw = match self.writes.get(mk) {
                Some(v) => v.clone(),
                None if self.cleared => None,
                None => fetched.next().flatten(),
            };
            let meta = match raw {
                None => None,
                Some(b) => Some(Meta::decode_owned(b).ok_or_else(|| corrupt(key.as_ref()))?),
            };
            match meta {
                Some(m) if self.is_expired(&m) => {
                    self.expired_keys.push(key.as_ref().to_vec());
                    out.push(None);
                }
                other => out.push(other),
            }
        }
        Ok(out)
    }

    /// The meta entry of `key`, or `None` if absent or expired (reads).
    pub fn meta(&mut self, key: &[u8]) -> StoreResult<Option<Meta>> {
        match self.load_meta(key, false)? {
            Some(m) if self.is_expired(&m) => {
                self.expired_keys.push(key.to_vec());
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// Like [`Txn::meta`], but removes an expired key for good, so that
    /// the caller may create the key afresh.
    pub fn meta_for_write(&mut self, key: &[u8]) -> StoreResult<Option<Meta>> {
        match self.raw_meta(key)? {
            Some(m) if self.is_expired(&m) => {
                self.delete_key(key, &m)?;
                self.expired += 1;
                self.expired_keys.push(key.to_vec());
                self.note("expired", key);
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// Like [`Txn::meta_for_write`], for a write that replaces the key's
    /// value whole and reads only its type and expiry (SET without GET):
    /// where the key directory knows the key as a live string, the store
    /// is not read and the returned meta's body is empty.
    pub fn meta_for_overwrite(&mut self, key: &[u8]) -> StoreResult<Option<Meta>> {
        let mk = meta_key(key);
        if !self.cleared && !self.writes.contains_key(&mk) {
            if let Known::Entry { type_byte, expire_ms } = self.store.known_meta(&mk) {
                let shell = Meta::string(Vec::new(), expire_ms);
                if type_byte == KeyType::String as u8 && !self.is_expired(&shell) {
                    self.base.entry(mk).or_insert((true, expire_ms != 0, Known::Entry { type_byte, expire_ms }));
                    return Ok(Some(shell));
                }
            }
        }
        self.meta_for_write(key)
    }

    /// Writes the meta of `key`, keeping the expiry index in step with
    /// `old` (what [`Txn::meta_for_write`] returned).
    pub fn put_meta(&mut self, key: &[u8], old: Option<&Meta>, new: &Meta) {
        let old_exp = old.map(|m| m.expire_ms).unwrap_or(0);
        if old_exp != new.expire_ms {
            if old_exp != 0 {
                self.delete(expire_index_key(old_exp, key));
            }
            if new.expire_ms != 0 {
                self.put(expire_index_key(new.expire_ms, key), Vec::new());
            }
        }
        if old.is_none() {
            self.note("new", key);
        }
        self.put(meta_key(key), new.encode());
    }

    /// Removes `key` whole: meta, expiry index entry and every member.
    pub fn delete_key(&mut self, key: &[u8], meta: &Meta) -> StoreResult<()> {
        for &tag in meta.member_tags() {
            let prefix = super::member_prefix(tag, key);
            for (k, _) in self.scan_prefix(&prefix)? {
                self.delete(k);
            }
        }
        if meta.expire_ms != 0 {
            self.delete(expire_index_key(meta.expire_ms, key));
        }
        self.delete(meta_key(key));
        Ok(())
    }

    /// Removes the meta entry (and expiry index entry) of a key whose
    /// members the caller has already deleted.
    pub fn drop_meta(&mut self, key: &[u8], meta: &Meta) {
        // A collection emptied by a command is deleted: a `del` event.
        self.note("del", key);
        if meta.expire_ms != 0 {
            self.delete(expire_index_key(meta.expire_ms, key));
        }
        self.delete(meta_key(key));
    }

    /// Stores `meta` for `key` with `count` members, or drops the key when
    /// the count reaches zero. `old` is the meta as loaded.
    pub fn put_count(&mut self, key: &[u8], old: Option<&Meta>, mut meta: Meta, count: u64) {
        if count == 0 {
            if let Some(o) = old {
                self.drop_meta(key, o);
            }
        } else {
            meta.set_count(count);
            self.put_meta(key, old, &meta);
        }
    }

    /// Removes every key (FLUSHDB); applied first at commit.
    pub fn clear_all(&mut self) {
        self.clear(ClearScope::Database);
    }

    /// Removes every key, with the flush reaching the store as `scope`
    /// says (FLUSHALL); applied first at commit.
    pub fn clear(&mut self, scope: ClearScope) {
        // A database flushed alone and then by FLUSHALL in the same MULTI
        // is covered by the FLUSHALL; database 0's `Everything` stays.
        if !(self.cleared && self.scope == ClearScope::Everything) {
            self.scope = scope;
        }
        self.ops += 1;
        self.cleared = true;
        self.writes.clear();
        self.base.clear();
    }

    /// Whether anything is staged.
    pub fn is_dirty(&self) -> bool {
        self.cleared || !self.writes.is_empty()
    }

    /// Writes everything staged as one atomic batch and reports how the
    /// key counts changed. With `durable`, wait on the returned ticket
    /// (after releasing the key locks) before acknowledging.
    pub fn commit(mut self, durable: bool) -> StoreResult<(CountDelta, Pending)> {
        let mut delta = CountDelta::default();
        if !self.is_dirty() {
            return Ok((delta, Pending::default()));
        }
        let writes = std::mem::take(&mut self.writes);
        // A flush reaches the key directory through the store's clear; any
        // other write is noted here, before the store has it (see
        // `store::directory` for the order).
        let dir = if self.cleared && self.scope != ClearScope::Covered { None } else { self.store.key_directory() };
        for (k, after) in writes.iter().filter(|(k, _)| k.first() == Some(&super::tag::META)) {
            let before = match (self.cleared, self.base.remove(k)) {
                (true, _) => (false, false, Known::Unsure),
                (false, Some(b)) => b,
                (false, None) => base_of(self.store.get(k)?.as_deref()),
            };
            if let Some(d) = dir {
                match after {
                    // An entry the directory holds as it will be (a SET
                    // over a string, neither with an expiry) stays.
                    Some(v) if before.2 != Known::Unsure && before.2 == KeyDirectory::known_for(v) => {}
                    Some(v) => d.will_put(k, v),
                    None => d.will_delete(k),
                }
            }
            let after = base_of(after.as_deref());
            delta.keys += i64::from(after.0) - i64::from(before.0);
            delta.expires += i64::from(after.1) - i64::from(before.1);
        }
        let mut ops: Vec<Op> = writes.into_iter().collect();
        // The meta keys deleted, to drop from the directory once stored.
        let deletes: Vec<Vec<u8>> = match dir {
            Some(_) => ops
                .iter()
                .filter(|(k, v)| v.is_none() && k.first() == Some(&super::tag::META))
                .map(|(k, _)| k.clone())
                .collect(),
            None => Vec::new(),
        };
        let pending = if self.cleared {
            match self.scope {
                // The keyspace version survives every flush, in the same step.
                ClearScope::Database => {
                    ops.push((super::VERSION_KEY.to_vec(), Some(super::VERSION.to_vec())));
                    self.store.clear(super::VERSION_KEY, ops, durable)
                }
                ClearScope::Everything => {
                    ops.push((super::VERSION_KEY.to_vec(), Some(super::VERSION.to_vec())));
                    self.store.clear_every_database(super::VERSION_KEY, ops, durable)
                }
                ClearScope::Covered if ops.is_empty() => Ok(Pending::default()),
                ClearScope::Covered => self.store.write(ops, durable),
            }
        } else if !ops.is_empty() {
            self.store.write(ops, durable)
        } else {
            Ok(Pending::default())
        };
        if let Some(d) = dir {
            match &pending {
                Ok(_) => deletes.iter().for_each(|k| d.deleted(k)),
                Err(_) => d.turn_off(),
            }
        }
        Ok((delta, pending?))
    }

    /// Whether this transaction's flush empties every database (it must
    /// commit before the other databases' transactions).
    pub fn clears_everything(&self) -> bool {
        self.cleared && self.scope == ClearScope::Everything
    }

    /// Whether FLUSHDB/FLUSHALL ran in this transaction.
    pub fn was_cleared(&self) -> bool {
        self.cleared
    }

    /// The user keys the staged writes change (meta, member and expiry
    /// entries all name theirs), for WATCH: `None` if a write's key names
    /// none, and then the caller counts every key of the command as
    /// changed. A flush is not among them (see the databases' flush counts).
    pub fn written_user_keys(&self) -> Option<Vec<&[u8]>> {
        let mut out: Vec<&[u8]> = Vec::with_capacity(self.writes.len());
        for k in self.writes.keys() {
            let user = super::user_key_of_entry(k)?;
            if out.last() != Some(&user) {
                out.push(user);
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::{MemoryPersistence, MemoryStore};

    #[test]
    fn scan_merges_own_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = MemoryStore::open(dir.path(), MemoryPersistence::default()).unwrap();
        let ops: Vec<Op> = (0..100u32).map(|i| (format!("k{i:03}").into_bytes(), Some(vec![1]))).collect();
        let _ = store.write(ops, false).unwrap();
        let mut t = Txn::new(&store, 0);
        t.delete(b"k005".to_vec());
        t.put(b"k005x".to_vec(), vec![2]);
        t.put(b"k200".to_vec(), vec![3]);
        let all = t.scan_prefix(b"k").unwrap();
        assert_eq!(all.len(), 101);
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(!all.iter().any(|(k, _)| k == b"k005"));
        let some = t.scan(b"k", None, 7).unwrap();
        assert_eq!(some.len(), 7);
        let (d, _) = t.commit(false).unwrap();
        assert_eq!(d, CountDelta::default());
        assert_eq!(store.get(b"k200").unwrap(), Some(vec![3]));
    }

    /// A replica's master client keeps keys past their expiry (its
    /// primary's DEL removes them); anyone else sees them gone.
    #[test]
    fn kept_expired_keys_stay_for_the_master_client() {
        let dir = tempfile::tempdir().unwrap();
        let store = MemoryStore::open(dir.path(), MemoryPersistence::default()).unwrap();
        let mut t = Txn::new(&store, 1_000);
        t.put_meta(b"k", None, &Meta::string(b"v".to_vec(), 2_000));
        let _ = t.commit(false).unwrap();
        let mut later = Txn::new(&store, 3_000);
        assert!(later.meta(b"k").unwrap().is_none());
        assert!(later.is_past(2_500));
        let mut master = Txn::new(&store, 3_000);
        master.keep_expired = true;
        assert_eq!(master.meta_for_write(b"k").unwrap().map(|m| m.expire_ms), Some(2_000));
        assert!(!master.is_past(2_500));
        assert!(master.sibling(&store).keep_expired);
    }
}
