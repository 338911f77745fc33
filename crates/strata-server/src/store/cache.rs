//! A DRAM read cache in front of the engine store (`--read-cache-size`):
//! whole member ranges (a hash's fields, a set's or sorted set's members, a
//! list), as HGETALL, SMEMBERS, ZRANGE and LRANGE read them. Redis serves
//! these from DRAM; the engine reads them through its memtables, PM matrix
//! rows and tables, a merge over every level for each HGETALL. Point reads
//! (meta entries) are not cached: the engine answers one from its memtable
//! or hash index about as fast as a cache lookup, and caching them cost
//! SET and GET 8-10 % under redis-benchmark -P 16.
//!
//! Consistency does not rest on the callers' key locks (SCAN, KEYS and the
//! expiry sweeper read without them): every write bumps a version stripe
//! of each Redis key it touches to odd before it reaches the store and to
//! even after, a seqlock. A read caches what it read only if the stripe was
//! even and unchanged across the read, and a cached entry is served only
//! while its stripe still has the version it was read at. A FLUSHDB or
//! FLUSHALL bumps the database's (or every database's) epoch the same way.
//! So a served entry was read with no write to that key begun since.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Backend, Op, Pending, ShutdownSave, StoreResult};

/// Version stripes (a power of two): keys sharing one invalidate each other.
const STRIPES: usize = 1 << 16;

/// A complete member range as a scan returned it.
type Members = Arc<Vec<(Vec<u8>, Vec<u8>)>>;

#[derive(Clone)]
struct Cached {
    entry: Members,
    /// The key's stripe version and the database's epoch when read.
    version: u64,
    epoch: u64,
}

#[derive(Clone)]
struct Weight;

impl quick_cache::Weighter<Vec<u8>, Cached> for Weight {
    fn weight(&self, key: &Vec<u8>, val: &Cached) -> u64 {
        let data: usize = val.entry.iter().map(|(k, v)| k.len() + v.len() + 48).sum();
        (key.len() + data + 64) as u64
    }
}

/// What every database's cache shares: the entries and the version stripes.
struct Core {
    cache: quick_cache::sync::Cache<Vec<u8>, Cached, Weight>,
    stripes: Vec<AtomicU64>,
    /// Each database's epoch (FLUSHALL bumps them all).
    epochs: Vec<Arc<AtomicU64>>,
}

/// A [`Backend`] that caches another's member scans.
pub struct CachedStore {
    inner: Arc<dyn Backend>,
    core: Arc<Core>,
    /// This store's database number (mixed into its stripes and cache keys).
    db: usize,
    epoch: Arc<AtomicU64>,
}

impl CachedStore {
    /// Caches reads of `inner` (database 0 of `databases`) in at most
    /// `bytes` of DRAM, shared with the other databases' caches.
    pub fn new(inner: Arc<dyn Backend>, bytes: u64, databases: usize) -> CachedStore {
        let items = (bytes / 1024).clamp(64, 1 << 22) as usize;
        let epochs: Vec<Arc<AtomicU64>> = (0..databases.max(1)).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let epoch = epochs.first().cloned().unwrap_or_default();
        let core = Core {
            cache: quick_cache::sync::Cache::with_weighter(items, bytes.max(1), Weight),
            stripes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            epochs,
        };
        CachedStore { inner, core: Arc::new(core), db: 0, epoch }
    }

    /// The version stripe of the Redis key `store_key` belongs to.
    fn stripe_index(&self, store_key: &[u8]) -> Option<usize> {
        let user = redis_key_of(store_key)?;
        let h = user.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
            as usize
            ^ self.db.wrapping_mul(0x9e37_79b9);
        Some(h & (STRIPES - 1))
    }

    fn stripe(&self, store_key: &[u8]) -> Option<&AtomicU64> {
        self.core.stripes.get(self.stripe_index(store_key)?)
    }

    /// The cache key of a member range starting at `key`. Database 0 uses
    /// the key itself, so a lookup needs no copy; database n puts `0xff`
    /// and n in front (no store key begins with 0xff).
    fn cache_key<'k>(&self, key: &'k [u8]) -> std::borrow::Cow<'k, [u8]> {
        if self.db == 0 {
            return std::borrow::Cow::Borrowed(key);
        }
        let mut k = Vec::with_capacity(5 + key.len());
        k.push(0xff);
        k.extend_from_slice(&(self.db as u32).to_be_bytes());
        k.extend_from_slice(key);
        std::borrow::Cow::Owned(k)
    }

    /// The versions a read starts at, if it may be cached (no write to the
    /// key or clear of the database is under way).
    fn begin_read(&self, stripe: &AtomicU64) -> Option<(u64, u64)> {
        let v = stripe.load(Ordering::Acquire);
        let e = self.epoch.load(Ordering::Acquire);
        (v.is_multiple_of(2) && e.is_multiple_of(2)).then_some((v, e))
    }

    /// Whether nothing changed since `begin_read` returned `at`.
    fn unchanged(&self, stripe: &AtomicU64, at: (u64, u64)) -> bool {
        stripe.load(Ordering::Acquire) == at.0 && self.epoch.load(Ordering::Acquire) == at.1
    }

    fn lookup(&self, ck: &[u8], stripe: &AtomicU64) -> Option<Members> {
        let c = self.core.cache.get(ck)?;
        self.unchanged(stripe, (c.version, c.epoch)).then_some(c.entry)
    }

    fn insert(&self, ck: Vec<u8>, stripe: &AtomicU64, at: (u64, u64), entry: Members) {
        if self.unchanged(stripe, at) {
            self.core.cache.insert(ck, Cached { entry, version: at.0, epoch: at.1 });
        }
    }

    /// The stripes of the Redis keys `ops` write, each once.
    fn stripes_of(&self, ops: &[Op]) -> Vec<usize> {
        let mut idx: Vec<usize> = Vec::with_capacity(2);
        for (k, _) in ops {
            if let Some(i) = self.stripe_index(k) {
                if !idx.contains(&i) {
                    idx.push(i);
                }
            }
        }
        idx
    }

    /// Runs `f` (a write to the store) with the stripes `idx` odd, then
    /// even again: readers neither cache nor serve the keys of those
    /// stripes meanwhile, nor afterwards what they read before.
    fn writing<T>(&self, idx: &[usize], f: impl FnOnce() -> T) -> T {
        let bump = || {
            for s in idx.iter().filter_map(|&i| self.core.stripes.get(i)) {
                s.fetch_add(1, Ordering::AcqRel);
            }
        };
        bump();
        let r = f();
        bump();
        r
    }

    /// Runs `f` (a clear) with this database's epoch (every database's,
    /// with `all`) odd, then even again.
    fn clearing<T>(&self, all: bool, f: impl FnOnce() -> T) -> T {
        let bump = || {
            if all {
                self.core.epochs.iter().for_each(|e| {
                    e.fetch_add(1, Ordering::AcqRel);
                });
            } else {
                self.epoch.fetch_add(1, Ordering::AcqRel);
            }
        };
        bump();
        let r = f();
        bump();
        r
    }
}

/// The Redis key a store key belongs to (FORMAT.md, "Server keyspace
/// encoding"), or `None` for keys of no Redis key (`!version`).
fn redis_key_of(k: &[u8]) -> Option<&[u8]> {
    match k.first()? {
        b'm' => k.get(5..),
        b'e' => k.get(9..),
        b'H' | b'S' | b'Z' | b'z' | b'L' => {
            let klen = u32::from_be_bytes(k.get(1..5)?.try_into().ok()?) as usize;
            k.get(5..5usize.checked_add(klen)?)
        }
        _ => None,
    }
}

/// Whether `[start, end)` is exactly one Redis key's member range (what
/// HGETALL, SMEMBERS, ZRANGE and LRANGE scan), the scans worth caching.
fn member_range(start: &[u8], end: Option<&[u8]>) -> bool {
    let Some(end) = end else { return false };
    matches!(start.first(), Some(b'H' | b'S' | b'Z' | b'z' | b'L'))
        && redis_key_of(start).is_some_and(|k| 5 + k.len() == start.len())
        && super::prefix_end(start).as_deref() == Some(end)
}

impl Backend for CachedStore {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.inner.get(key)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get(keys)
    }

    fn prefetch(&self, keys: &[Vec<u8>]) {
        self.inner.prefetch(keys)
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let stripe = match self.stripe(start) {
            Some(s) if member_range(start, end) => s,
            _ => return self.inner.scan(start, end, limit),
        };
        let ck = self.cache_key(start);
        if let Some(kvs) = self.lookup(&ck, stripe) {
            return Ok(kvs.iter().take(limit).cloned().collect());
        }
        let at = self.begin_read(stripe);
        let kvs = self.inner.scan(start, end, limit)?;
        // Only a complete range: a later scan may ask for more.
        if let Some(at) = at.filter(|_| kvs.len() < limit) {
            self.insert(ck.into_owned(), stripe, at, Arc::new(kvs.clone()));
        }
        Ok(kvs)
    }

    fn write(&self, ops: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        let stripes = self.stripes_of(&ops);
        self.writing(&stripes, || self.inner.write(ops, durable))
    }

    fn wait_durable(&self, pending: Pending) -> StoreResult<()> {
        self.inner.wait_durable(pending)
    }

    fn last_ticket(&self) -> Pending {
        self.inner.last_ticket()
    }

    fn clear(&self, keep: &[u8], then: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        self.clearing(false, || self.inner.clear(keep, then, durable))
    }

    fn clear_every_database(&self, keep: &[u8], then: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        self.clearing(true, || self.inner.clear_every_database(keep, then, durable))
    }

    fn databases(&self, n: usize) -> StoreResult<Vec<Arc<dyn Backend>>> {
        let inner = self.inner.databases(n)?;
        Ok(inner
            .into_iter()
            .enumerate()
            .map(|(i, store)| {
                let db = i + 1;
                let epoch = self.core.epochs.get(db).cloned().unwrap_or_default();
                Arc::new(CachedStore { inner: store, core: self.core.clone(), db, epoch }) as Arc<dyn Backend>
            })
            .collect())
    }

    fn save(&self) -> StoreResult<()> {
        self.inner.save()
    }

    fn save_notify(&self, started: &mut dyn FnMut()) -> StoreResult<()> {
        self.inner.save_notify(started)
    }

    fn info(&self) -> Vec<(String, String)> {
        let mut v = self.inner.info();
        v.push(("read_cache_bytes".into(), self.core.cache.weight().to_string()));
        v.push(("read_cache_entries".into(), self.core.cache.len().to_string()));
        v
    }

    fn used_memory(&self) -> u64 {
        self.inner.used_memory() + self.core.cache.weight()
    }

    fn shutdown(&self, save: ShutdownSave) -> StoreResult<()> {
        self.inner.shutdown(save)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::engine::EngineStore;

    /// The keyspace's encodings (FORMAT.md, "Server keyspace encoding").
    fn member_prefix(tag: u8, key: &[u8]) -> Vec<u8> {
        [&[tag][..], &(key.len() as u32).to_be_bytes(), key].concat()
    }

    fn meta_key(key: &[u8]) -> Vec<u8> {
        [&b"m"[..], &[0, 0, 0, 0], key].concat()
    }

    fn engine(dir: &std::path::Path) -> Arc<dyn Backend> {
        let o = stratakv::Options { pm_size: 64 << 20, write_buffer_size: 256 << 10, ..Default::default() };
        Arc::new(EngineStore::open(dir, o).unwrap())
    }

    fn field(key: &[u8], f: &str) -> Vec<u8> {
        [member_prefix(b'H', key), f.as_bytes().to_vec()].concat()
    }

    fn members(s: &dyn Backend, key: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let p = member_prefix(b'H', key);
        s.scan(&p, crate::store::prefix_end(&p).as_deref(), 1024).unwrap()
    }

    /// Cached member ranges are served again, a write to the key (or a
    /// clear) makes the next read go to the store, and other databases'
    /// caches are their own.
    #[test]
    fn writes_and_clears_invalidate_what_they_touch() {
        let dir = tempfile::tempdir().unwrap();
        let c = CachedStore::new(engine(dir.path()), 1 << 20, 4);
        let (m, f, g) = (meta_key(b"h"), field(b"h", "a"), field(b"h", "b"));
        let put = |k: &Vec<u8>, v: &str| (k.clone(), Some(v.as_bytes().to_vec()));
        let _ = c.write(vec![put(&m, "meta"), put(&f, "1")], false).unwrap();
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"1".to_vec())]);
        assert_eq!(c.core.cache.len(), 1, "the member scan is cached");
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"1".to_vec())]);
        let _ = c.write(vec![put(&f, "2")], false).unwrap();
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"2".to_vec())], "a changed member");
        let _ = c.write(vec![put(&g, "3")], false).unwrap();
        assert_eq!(members(&c, b"h").len(), 2, "a new member");
        let _ = c.write(vec![(m.clone(), Some(b"meta2".to_vec()))], false).unwrap();
        let _ = c.write(vec![(g.clone(), None)], false).unwrap();
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"2".to_vec())], "a removed member");
        let dbs = c.databases(4).unwrap();
        let _ = dbs[0].write(vec![put(&f, "db1")], false).unwrap();
        assert_eq!(members(&*dbs[0], b"h"), vec![(f.clone(), b"db1".to_vec())]);
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"2".to_vec())], "db 1's range is its own");
        let _ = c.clear(b"!version", Vec::new(), false).unwrap();
        assert_eq!(members(&c, b"h"), Vec::new());
        assert_eq!(members(&*dbs[0], b"h").len(), 1, "FLUSHDB of db 0 leaves db 1");
        let _ = c.clear_every_database(b"!version", Vec::new(), false).unwrap();
        assert_eq!(members(&*dbs[0], b"h"), Vec::new(), "FLUSHALL reaches every database's cache");
    }

    /// Writers bump a counter in a hash field (and its meta) while readers
    /// scan the hash: no read may return a value older than one whose write
    /// had returned before the read began (the cache never serves stale data).
    #[test]
    fn reads_never_go_back_under_concurrent_writes() {
        use std::sync::atomic::AtomicU64;
        let dir = tempfile::tempdir().unwrap();
        let c = Arc::new(CachedStore::new(engine(dir.path()), 1 << 20, 1));
        let keys: Vec<Vec<u8>> = (0..4).map(|i| format!("k{i}").into_bytes()).collect();
        let acked: Arc<Vec<AtomicU64>> = Arc::new(keys.iter().map(|_| AtomicU64::new(0)).collect());
        let writers: Vec<_> = (0..keys.len())
            .map(|w| {
                let (c, key, acked) = (c.clone(), keys[w].clone(), acked.clone());
                std::thread::spawn(move || {
                    for n in 1..=400u64 {
                        let v = n.to_be_bytes().to_vec();
                        let ops = vec![(meta_key(&key), Some(v.clone())), (field(&key, "f"), Some(v))];
                        let _ = c.write(ops, false).unwrap();
                        acked[w].store(n, Ordering::SeqCst);
                        // Quiet spells, in which readers cache what they read.
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (c, keys, acked) = (c.clone(), keys.clone(), acked.clone());
                std::thread::spawn(move || {
                    let num = |v: &[u8]| u64::from_be_bytes(v.try_into().unwrap());
                    let mut i = 0usize;
                    while acked.iter().any(|a| a.load(Ordering::SeqCst) < 400) {
                        i += 1;
                        let w = (i + r) % keys.len();
                        let floor = acked[w].load(Ordering::SeqCst);
                        let got = members(&*c, &keys[w]).first().map_or(0, |(_, v)| num(v));
                        assert!(got >= floor, "key {w}: read {got} after {floor} was acknowledged");
                    }
                })
            })
            .collect();
        for t in writers.into_iter().chain(readers) {
            t.join().unwrap();
        }
    }
}
