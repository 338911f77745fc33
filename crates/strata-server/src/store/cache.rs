//! A DRAM read cache in front of the engine store (`--read-cache-size`):
//! whole member ranges (a set's members, a sorted set's members and score
//! index, a list, a hash stored field by field), kept in key order. Redis
//! serves these from DRAM; the engine reads them through its memtables, PM
//! matrix rows and tables, a merge over every level for each scan: a
//! ZRANGEBYSCORE ... LIMIT 0 50 on a big sorted set merged some twenty
//! matrix rows. A cached range answers any scan inside it (a score range,
//! the members of one key) and any point read of one of its keys (ZADD's
//! and SISMEMBER's member lookups). Meta entries (strings, packed hashes)
//! are not cached: the engine answers one from its memtable or hash index
//! about as fast as a cache lookup.
//!
//! Writes go through: a write to a cached range changes the cached copy
//! (rather than dropping it, which would cost a big sorted set a full
//! reload at every ZADD). The first scan of a range that is not cached
//! reads it whole once; a range heavier than an eighth of the cache is
//! never cached (remembered, so that it is not tried again), nor is one
//! read while a write to its key is under way.
//!
//! Writers of one Redis key are serialized by the callers' key locks (the
//! [`Backend`] contract), so a range's changes are applied in store order.
//! Readers' consistency does not rest on the locks (SCAN, KEYS and the
//! expiry sweeper read without them). Each Redis key has a stripe word:
//! writers in flight (low 32 bits) and writes begun (high 32 bits). A
//! writer raises both before it reaches the store and, once the store has
//! the write, applies it to the cached range under the range's shard lock,
//! then lowers its count. A read serves a cached range only while no
//! writer of its stripe is in flight (so a read never returns less than a
//! concurrent read of the store showed), and a range read from the store
//! is cached only if no write to its stripe began since the read began.
//! FLUSHDB and FLUSHALL raise the database's epoch (odd while clearing)
//! and drop its ranges; a range is served only at the epoch it was read at.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Backend, Op, Pending, ShutdownSave, StoreResult};
// The member range (`tag | klen | key`) and the Redis key of a store key:
// the keyspace's one parser of its layout.
use crate::layout::{member_range_prefix as range_prefix, user_key_of_entry as redis_key_of};

/// Version stripes (a power of two): keys sharing one hold each other's
/// ranges back while one of them is written.
const STRIPES: usize = 1 << 16;

/// Shards of the range map (a power of two), each with its own lock.
const SHARDS: usize = 256;

/// One writer in flight, in a stripe word.
const ACTIVE: u64 = 1;

/// One write begun, in a stripe word.
const BEGUN: u64 = 1 << 32;

/// Bytes a cached entry is charged beyond its key and value (map node,
/// vector headers).
const ENTRY_OVERHEAD: u64 = 64;

/// A range larger than `budget / TOO_BIG_SHARE` is not cached.
const TOO_BIG_SHARE: u64 = 8;

fn entry_weight(k: &[u8], v: &[u8]) -> u64 {
    (k.len() + v.len()) as u64 + ENTRY_OVERHEAD
}

/// One cached member range: every store entry whose key begins with its
/// prefix, or a note that the range is too big to cache.
struct Range {
    /// The entries (none: too big, served by the store).
    entries: Option<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Bytes charged to the cache.
    bytes: u64,
    /// The database's epoch when read.
    epoch: u64,
    /// Last use (the cache's clock), for eviction.
    used: u64,
}

#[derive(Default)]
struct Shard {
    ranges: HashMap<Vec<u8>, Range>,
}

/// What every database's cache shares.
struct Core {
    shards: Vec<Mutex<Shard>>,
    stripes: Vec<AtomicU64>,
    /// Each database's epoch (FLUSHALL raises them all).
    epochs: Vec<Arc<AtomicU64>>,
    /// Bytes the cache may hold, and holds.
    budget: u64,
    bytes: AtomicU64,
    ranges: AtomicU64,
    /// The clock that orders uses, for eviction.
    clock: AtomicU64,
}

/// A [`Backend`] that caches another's member ranges.
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
        let epochs: Vec<Arc<AtomicU64>> = (0..databases.max(1)).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let epoch = epochs.first().cloned().unwrap_or_default();
        let core = Core {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            stripes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            epochs,
            budget: bytes.max(1),
            bytes: AtomicU64::new(0),
            ranges: AtomicU64::new(0),
            clock: AtomicU64::new(0),
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

    /// The cache key of the range with `prefix`. Database 0 uses the
    /// prefix itself, so a lookup needs no copy; database n puts `0xff` and
    /// n in front (no store key begins with 0xff).
    fn cache_key<'k>(&self, prefix: &'k [u8]) -> std::borrow::Cow<'k, [u8]> {
        if self.db == 0 {
            return std::borrow::Cow::Borrowed(prefix);
        }
        let mut k = Vec::with_capacity(5 + prefix.len());
        k.push(0xff);
        k.extend_from_slice(&(self.db as u32).to_be_bytes());
        k.extend_from_slice(prefix);
        std::borrow::Cow::Owned(k)
    }

    fn shard(&self, ck: &[u8]) -> &Mutex<Shard> {
        let h = ck.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193)) as usize;
        &self.core.shards[h & (SHARDS - 1)]
    }

    fn tick(&self) -> u64 {
        self.core.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `serve` on the cached range of `prefix` if it may be served:
    /// cached (whole, at the current epoch) and no write to its stripe in
    /// flight. `None`: go to the store.
    fn with_cached<T>(
        &self,
        prefix: &[u8],
        stripe: &AtomicU64,
        serve: impl FnOnce(&BTreeMap<Vec<u8>, Vec<u8>>) -> T,
    ) -> Option<T> {
        let ck = self.cache_key(prefix);
        let mut shard = self.shard(&ck).lock();
        let range = shard.ranges.get_mut(ck.as_ref())?;
        // Checked under the shard lock, after the writer's change to the
        // range (made under it) and before the writer lowers its count.
        if stripe.load(Ordering::SeqCst) & (BEGUN - 1) != 0 || range.epoch != self.epoch.load(Ordering::SeqCst) {
            return None;
        }
        let entries = range.entries.as_ref()?;
        range.used = self.tick();
        Some(serve(entries))
    }

    /// Whether the range of `prefix` is known to be too big to cache.
    fn too_big(&self, prefix: &[u8]) -> bool {
        let ck = self.cache_key(prefix);
        let shard = self.shard(&ck).lock();
        shard.ranges.get(ck.as_ref()).is_some_and(|r| r.entries.is_none())
    }

    /// Reads the whole range of `prefix` from the store and caches it,
    /// unless a write to its stripe or a clear is under way.
    fn fill(&self, prefix: &[u8], stripe: &AtomicU64) -> StoreResult<Fill> {
        let begun = stripe.load(Ordering::SeqCst);
        let epoch = self.epoch.load(Ordering::SeqCst);
        if begun & (BEGUN - 1) != 0 || !epoch.is_multiple_of(2) {
            return Ok(Fill::NotNow);
        }
        let end = super::prefix_end(prefix);
        let max = self.core.budget / TOO_BIG_SHARE;
        let mut all = Vec::new();
        let mut bytes = 0u64;
        let mut from = prefix.to_vec();
        loop {
            let chunk = self.inner.scan(&from, end.as_deref(), 4096)?;
            let done = chunk.len() < 4096;
            if let Some((k, _)) = chunk.last() {
                from = k.clone();
                from.push(0);
            }
            bytes += chunk.iter().map(|(k, v)| entry_weight(k, v)).sum::<u64>();
            all.extend(chunk);
            if bytes > max {
                self.insert(prefix, stripe, begun, epoch, None, 0);
                return Ok(Fill::TooBig);
            }
            if done {
                break;
            }
        }
        let map: BTreeMap<Vec<u8>, Vec<u8>> = all.iter().cloned().collect();
        self.insert(prefix, stripe, begun, epoch, Some(map), bytes);
        Ok(Fill::Read(all))
    }

    /// Caches a range read while the stripe word was `begun` and the epoch
    /// `epoch`, unless a write or clear began since.
    fn insert(
        &self,
        prefix: &[u8],
        stripe: &AtomicU64,
        begun: u64,
        epoch: u64,
        entries: Option<BTreeMap<Vec<u8>, Vec<u8>>>,
        bytes: u64,
    ) {
        let ck = self.cache_key(prefix).into_owned();
        {
            let mut shard = self.shard(&ck).lock();
            if stripe.load(Ordering::SeqCst) != begun || self.epoch.load(Ordering::SeqCst) != epoch {
                return;
            }
            let range = Range { entries, bytes, epoch, used: self.tick() };
            if let Some(old) = shard.ranges.insert(ck, range) {
                self.core.bytes.fetch_sub(old.bytes, Ordering::Relaxed);
            } else {
                self.core.ranges.fetch_add(1, Ordering::Relaxed);
            }
            self.core.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        if self.core.bytes.load(Ordering::Relaxed) > self.core.budget {
            self.core.evict();
        }
    }

    /// The distinct stripes of the Redis keys the ops write.
    fn stripes_of(&self, ops: &[Op]) -> Vec<usize> {
        // Sorted and deduplicated: a pass-wide group writes hundreds of keys.
        let mut stripes: Vec<usize> = ops.iter().filter_map(|(k, _)| self.stripe_index(k)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes
    }

    /// The distinct prefixes of cached ranges the ops write. Called with
    /// the ops' stripes raised: a range not cached now cannot be cached
    /// before they are lowered (its fill would see them raised).
    fn cached_prefixes(&self, ops: &[Op]) -> Vec<Vec<u8>> {
        let mut found: Vec<&[u8]> = ops.iter().filter_map(|(k, _)| range_prefix(k)).collect();
        found.sort_unstable();
        found.dedup();
        let mut prefixes: Vec<Vec<u8>> = found.into_iter().map(<[u8]>::to_vec).collect();
        prefixes.retain(|p| {
            let ck = self.cache_key(p);
            self.shard(&ck).lock().ranges.get(ck.as_ref()).is_some_and(|r| r.entries.is_some())
        });
        prefixes
    }

    /// Changes the cached ranges of `prefixes` as `ops` changed the store
    /// (or drops them, when the write failed).
    fn apply(&self, prefixes: &[Vec<u8>], ops: &[Op], ok: bool) {
        for p in prefixes {
            let ck = self.cache_key(p);
            let mut shard = self.shard(&ck).lock();
            let Some(range) = shard.ranges.get_mut(ck.as_ref()) else { continue };
            if !ok {
                let bytes = range.bytes;
                shard.ranges.remove(ck.as_ref());
                self.core.bytes.fetch_sub(bytes, Ordering::Relaxed);
                self.core.ranges.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
            let Some(entries) = range.entries.as_mut() else { continue };
            let (mut added, mut removed) = (0u64, 0u64);
            for (k, v) in ops.iter().filter(|(k, _)| range_prefix(k) == Some(p.as_slice())) {
                let old = match v {
                    Some(v) => {
                        added += entry_weight(k, v);
                        entries.insert(k.clone(), v.clone())
                    }
                    None => entries.remove(k),
                };
                if let Some(old) = old {
                    removed += entry_weight(k, &old);
                }
            }
            let before = range.bytes;
            range.bytes = (range.bytes + added).saturating_sub(removed);
            if range.bytes > self.core.budget / TOO_BIG_SHARE {
                // Grown too big to keep: from now on served by the store.
                range.entries = None;
                range.bytes = 0;
            }
            self.core.bytes.fetch_add(range.bytes, Ordering::Relaxed);
            self.core.bytes.fetch_sub(before, Ordering::Relaxed);
        }
        if self.core.bytes.load(Ordering::Relaxed) > self.core.budget {
            self.core.evict();
        }
    }

    /// Runs `f` (a clear) with this database's epoch (every database's,
    /// with `all`) odd, drops the ranges it cleared, and makes the epoch
    /// even again.
    fn clearing<T>(&self, all: bool, f: impl FnOnce() -> T) -> T {
        let bump = || {
            if all {
                self.core.epochs.iter().for_each(|e| {
                    e.fetch_add(1, Ordering::SeqCst);
                });
            } else {
                self.epoch.fetch_add(1, Ordering::SeqCst);
            }
        };
        bump();
        let r = f();
        for shard in &self.core.shards {
            let mut shard = shard.lock();
            let before = shard.ranges.len();
            let mut freed = 0;
            shard.ranges.retain(|ck, r| {
                let db = if ck.first() == Some(&0xff) {
                    ck.get(1..5).and_then(|b| b.try_into().ok()).map_or(0, |b| u32::from_be_bytes(b) as usize)
                } else {
                    0
                };
                let keep = !all && db != self.db;
                if !keep {
                    freed += r.bytes;
                }
                keep
            });
            self.core.ranges.fetch_sub((before - shard.ranges.len()) as u64, Ordering::Relaxed);
            self.core.bytes.fetch_sub(freed, Ordering::Relaxed);
        }
        bump();
        r
    }
}

impl Core {
    /// Drops the least recently used ranges until the cache holds at most
    /// 90 % of its budget (a tenth freed at once, so that a full cache does
    /// not look for victims at every insert).
    fn evict(&self) {
        let target = self.budget / 10 * 9;
        let mut candidates: Vec<(u64, usize, Vec<u8>)> = Vec::new();
        for (i, shard) in self.shards.iter().enumerate() {
            candidates.extend(shard.lock().ranges.iter().map(|(k, r)| (r.used, i, k.clone())));
        }
        candidates.sort_unstable_by_key(|c| c.0);
        for (used, i, k) in candidates {
            if self.bytes.load(Ordering::Relaxed) <= target {
                break;
            }
            let Some(shard) = self.shards.get(i) else { continue };
            let mut shard = shard.lock();
            // Used again since the list was made: keep it.
            if shard.ranges.get(&k).is_some_and(|r| r.used == used) {
                if let Some(r) = shard.ranges.remove(&k) {
                    self.bytes.fetch_sub(r.bytes, Ordering::Relaxed);
                    self.ranges.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// What [`CachedStore::fill`] did.
enum Fill {
    /// Read the range whole (and cached it if nothing changed meanwhile).
    Read(Vec<(Vec<u8>, Vec<u8>)>),
    /// The range is too big to cache (noted).
    TooBig,
    /// A write or clear is under way: read from the store.
    NotNow,
}

/// The part of `entries` in `[start, end)`, at most `limit` of them.
fn serve_range(
    entries: &BTreeMap<Vec<u8>, Vec<u8>>,
    start: &[u8],
    end: &[u8],
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    if start >= end {
        // An empty range (ZRANGEBYSCORE with min above max); BTreeMap::range
        // would panic on it.
        return Vec::new();
    }
    entries
        .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
        .take(limit)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Backend for CachedStore {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        // Meta keys (most reads) skip the stripe's hash: no range holds them.
        if let Some(p) = range_prefix(key) {
            if let Some(stripe) = self.stripe_index(key).and_then(|i| self.core.stripes.get(i)) {
                if let Some(v) = self.with_cached(p, stripe, |m| m.get(key).cloned()) {
                    return Ok(v);
                }
            }
        }
        self.inner.get(key)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get(keys)
    }

    fn prefetch(&self, keys: &[Vec<u8>]) {
        self.inner.prefetch(keys)
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(prefix) = range_prefix(start) else { return self.inner.scan(start, end, limit) };
        let Some(pend) = super::prefix_end(prefix) else { return self.inner.scan(start, end, limit) };
        // Only a scan inside one range.
        let end = match end {
            Some(e) if e <= pend.as_slice() => e,
            _ => return self.inner.scan(start, end, limit),
        };
        let stripe = match self.stripe_index(start).and_then(|i| self.core.stripes.get(i)) {
            Some(s) => s,
            None => return self.inner.scan(start, Some(end), limit),
        };
        if let Some(kvs) = self.with_cached(prefix, stripe, |m| serve_range(m, start, end, limit)) {
            return Ok(kvs);
        }
        if self.too_big(prefix) {
            return self.inner.scan(start, Some(end), limit);
        }
        match self.fill(prefix, stripe)? {
            Fill::Read(all) => {
                let from = all.partition_point(|(k, _)| k.as_slice() < start);
                Ok(all.into_iter().skip(from).take_while(|(k, _)| k.as_slice() < end).take(limit).collect())
            }
            Fill::TooBig | Fill::NotNow => self.inner.scan(start, Some(end), limit),
        }
    }

    fn write(&self, ops: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        let stripes = self.stripes_of(&ops);
        for s in stripes.iter().filter_map(|&i| self.core.stripes.get(i)) {
            s.fetch_add(BEGUN + ACTIVE, Ordering::SeqCst);
        }
        let prefixes = self.cached_prefixes(&ops);
        let kept: Vec<Op> = if prefixes.is_empty() {
            Vec::new()
        } else {
            ops.iter()
                .filter(|(k, _)| {
                    range_prefix(k).is_some_and(|p| prefixes.binary_search_by(|q| q.as_slice().cmp(p)).is_ok())
                })
                .cloned()
                .collect()
        };
        let r = self.inner.write(ops, durable);
        self.apply(&prefixes, &kept, r.is_ok());
        for s in stripes.iter().filter_map(|&i| self.core.stripes.get(i)) {
            s.fetch_sub(ACTIVE, Ordering::SeqCst);
        }
        r
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
        v.push(("read_cache_bytes".into(), self.core.bytes.load(Ordering::Relaxed).to_string()));
        v.push(("read_cache_entries".into(), self.core.ranges.load(Ordering::Relaxed).to_string()));
        v
    }

    fn used_memory(&self) -> u64 {
        self.inner.used_memory() + self.core.bytes.load(Ordering::Relaxed)
    }

    fn shutdown(&self, save: ShutdownSave) -> StoreResult<()> {
        self.inner.shutdown(save)
    }

    // Views read the store under the cache, which every write reaches.
    fn snapshot(&self) -> StoreResult<Box<dyn super::SnapshotView>> {
        self.inner.snapshot()
    }

    fn snapshot_databases(&self, n: usize) -> StoreResult<Vec<Box<dyn super::SnapshotView>>> {
        self.inner.snapshot_databases(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::engine::EngineStore;

    use crate::keyspace::member_prefix;

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

    fn entries(c: &CachedStore) -> u64 {
        c.core.ranges.load(Ordering::Relaxed)
    }

    /// A scanned member range is cached and served again; writes to it
    /// change the cached copy (it stays cached); a sub-range scan and a
    /// point read are answered from it; other databases' ranges are their
    /// own; a clear drops what it cleared.
    #[test]
    fn writes_go_through_to_cached_ranges_and_clears_drop_them() {
        let dir = tempfile::tempdir().unwrap();
        let c = CachedStore::new(engine(dir.path()), 1 << 20, 4);
        let (m, f, g) = (meta_key(b"h"), field(b"h", "a"), field(b"h", "b"));
        let put = |k: &Vec<u8>, v: &str| (k.clone(), Some(v.as_bytes().to_vec()));
        let _ = c.write(vec![put(&m, "meta"), put(&f, "1")], false).unwrap();
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"1".to_vec())]);
        assert_eq!(entries(&c), 1, "the member scan is cached");
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"1".to_vec())]);
        let _ = c.write(vec![put(&f, "2")], false).unwrap();
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"2".to_vec())], "a changed member");
        let _ = c.write(vec![put(&g, "3")], false).unwrap();
        assert_eq!(members(&c, b"h").len(), 2, "a new member");
        assert_eq!(entries(&c), 1, "written through, not dropped");
        assert_eq!(c.get(&g).unwrap(), Some(b"3".to_vec()), "a point read of a cached range");
        assert_eq!(c.get(&field(b"h", "zz")).unwrap(), None);
        let from_b = c.scan(&g, crate::store::prefix_end(&member_prefix(b'H', b"h")).as_deref(), 10).unwrap();
        assert_eq!(from_b, vec![(g.clone(), b"3".to_vec())], "a scan inside the range");
        assert_eq!(c.scan(&g, Some(&f), 10).unwrap(), Vec::new(), "a range that ends before it starts");
        let _ = c.write(vec![(m.clone(), Some(b"meta2".to_vec()))], false).unwrap();
        let _ = c.write(vec![(g.clone(), None)], false).unwrap();
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"2".to_vec())], "a removed member");
        let dbs = c.databases(4).unwrap();
        let _ = dbs[0].write(vec![put(&f, "db1")], false).unwrap();
        assert_eq!(members(&*dbs[0], b"h"), vec![(f.clone(), b"db1".to_vec())]);
        assert_eq!(members(&c, b"h"), vec![(f.clone(), b"2".to_vec())], "db 1's range is its own");
        assert_eq!(entries(&c), 2);
        let _ = c.clear(b"!version", Vec::new(), false).unwrap();
        assert_eq!(entries(&c), 1, "FLUSHDB of db 0 drops db 0's ranges only");
        assert_eq!(members(&c, b"h"), Vec::new());
        assert_eq!(members(&*dbs[0], b"h").len(), 1, "FLUSHDB of db 0 leaves db 1");
        let _ = c.clear_every_database(b"!version", Vec::new(), false).unwrap();
        assert_eq!(members(&*dbs[0], b"h"), Vec::new(), "FLUSHALL reaches every database's cache");
    }

    /// Random writes (puts and deletes of members of a few keys, some
    /// heavier than the cache may hold) and random reads (scans from any
    /// point inside a range, with limits; point reads) give the same
    /// answers through a small cache as from the store itself, while the
    /// cache stays near its budget by evicting.
    #[test]
    fn a_small_cache_answers_as_the_store_does() {
        use rand::{Rng, SeedableRng};
        let dir = tempfile::tempdir().unwrap();
        let store = engine(dir.path());
        let budget = 64 << 10;
        let c = CachedStore::new(store.clone(), budget, 1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let keys: Vec<Vec<u8>> = (0..12).map(|i| format!("key{i}").into_bytes()).collect();
        let mut too_big_seen = false;
        for step in 0..6000 {
            let key = &keys[rng.gen_range(0..keys.len())];
            let tag = [b'S', b'z', b'H'][rng.gen_range(0..3)];
            let prefix = member_prefix(tag, key);
            let member = |rng: &mut rand::rngs::StdRng| {
                let mut k = prefix.clone();
                // key0 grows past what the cache may hold (an eighth of it).
                let n = if key == &keys[0] { 3000 } else { 60 };
                k.extend_from_slice(format!("m{:05}", rng.gen_range(0..n)).as_bytes());
                k
            };
            match rng.gen_range(0..10) {
                0..=3 => {
                    let ops: Vec<Op> = (0..rng.gen_range(1..8))
                        .map(|_| {
                            let k = member(&mut rng);
                            let v = if rng.gen_bool(0.8) { Some(vec![b'v'; rng.gen_range(0..40)]) } else { None };
                            (k, v)
                        })
                        .collect();
                    let _ = c.write(ops, false).unwrap();
                }
                4..=7 => {
                    let start = if rng.gen_bool(0.3) { prefix.clone() } else { member(&mut rng) };
                    // An end inside the range too, sometimes before the start.
                    let end =
                        if rng.gen_bool(0.3) { member(&mut rng) } else { crate::store::prefix_end(&prefix).unwrap() };
                    let limit = rng.gen_range(1..200);
                    assert_eq!(
                        c.scan(&start, Some(&end), limit).unwrap(),
                        store.scan(&start, Some(&end), limit).unwrap(),
                        "step {step}: scan"
                    );
                }
                _ => {
                    let k = member(&mut rng);
                    assert_eq!(c.get(&k).unwrap(), store.get(&k).unwrap(), "step {step}: get");
                }
            }
            assert!(c.core.bytes.load(Ordering::Relaxed) <= budget + budget / TOO_BIG_SHARE + 4096);
            too_big_seen |= c.too_big(&member_prefix(b'S', &keys[0]));
        }
        assert!(too_big_seen, "the big range was refused");
        assert!(entries(&c) > 1, "ranges were cached");
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
