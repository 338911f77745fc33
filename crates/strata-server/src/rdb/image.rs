//! An RDB image of the server's keyspace: every database's point-in-time
//! view ([`SnapshotView`], from `Backend::snapshot_databases`) walked in
//! bounded batches and written as an RDB file ([`RdbWriter`]).
//!
//! Memory does not grow with the data set: the walk holds one batch of
//! meta entries ([`ImageOptions::batch`]: so many entries or so many
//! bytes, whichever comes first, and at least one entry, so one string
//! value however large) and one batch of the current collection's members;
//! a collection's RDB header carries its count from its meta, and its
//! members are streamed batch by batch behind it. Each database is read
//! twice: once to count its keys (RDB's `RESIZEDB` comes before them, and
//! an empty database gets no `SELECTDB`), once to write them.
//!
//! Keys expired at [`ImageOptions::now_ms`] are skipped; other expiries
//! are written as `EXPIRETIME_MS`.

use std::fmt;
use std::io::{self, Write};

use super::write::{Collection, Header, RdbWriter};
use super::Value;
use crate::keyspace::{member_prefix, packed, prefix_end, user_key_of_meta, KeyType, Meta};
use crate::store::{Batch, SnapshotView, StoreError};

/// Meta entries: `'m' | hash | key` (FORMAT.md, "Server keyspace encoding").
const META_START: &[u8] = b"m";
/// The first key after every meta entry.
const META_END: &[u8] = b"n";

/// How an image is taken.
#[derive(Clone, Copy, Debug)]
pub struct ImageOptions {
    /// What one read of a view may return (meta entries, or members of a
    /// collection).
    pub batch: Batch,
    /// Keys whose expiry is at or before this (Unix ms) are left out.
    pub now_ms: u64,
    /// A pause after each key written, in microseconds; negative `-n`:
    /// one microsecond once in `n` keys on average (Redis's
    /// `rdb-key-save-delay`, which tests use to slow a transfer down).
    pub key_delay_us: i64,
}

impl Default for ImageOptions {
    /// Batches of 256 entries or 1 MiB; expiry checked against now.
    fn default() -> Self {
        ImageOptions { batch: Batch::new(256, 1 << 20), now_ms: crate::keyspace::now_ms(), key_delay_us: 0 }
    }
}

/// Where a walk of the keyspace puts each key: an RDB file's writer, or a
/// digest (`DEBUG DIGEST`). A key comes as one `key` call (a string) or as
/// `begin`, its members, then `end`.
pub trait KeySink {
    /// A string key.
    fn key(&mut self, key: &[u8], value: &Value, expire_ms: u64) -> io::Result<()>;
    /// A collection of `count` members follows.
    fn begin(&mut self, kind: Collection, key: &[u8], count: u64, expire_ms: u64) -> io::Result<()>;
    /// A list's element or a set's member.
    fn item(&mut self, item: &[u8]) -> io::Result<()>;
    /// A hash's field and value.
    fn pair(&mut self, field: &[u8], value: &[u8]) -> io::Result<()>;
    /// A sorted set's member and score.
    fn scored(&mut self, member: &[u8], score: f64) -> io::Result<()>;
    /// The collection begun last is complete.
    fn end(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write> KeySink for RdbWriter<W> {
    fn key(&mut self, key: &[u8], value: &Value, expire_ms: u64) -> io::Result<()> {
        RdbWriter::key(self, key, value, expire_ms)
    }
    fn begin(&mut self, kind: Collection, key: &[u8], count: u64, expire_ms: u64) -> io::Result<()> {
        RdbWriter::begin(self, kind, key, count, expire_ms)
    }
    fn item(&mut self, item: &[u8]) -> io::Result<()> {
        RdbWriter::item(self, item)
    }
    fn pair(&mut self, field: &[u8], value: &[u8]) -> io::Result<()> {
        RdbWriter::pair(self, field, value)
    }
    fn scored(&mut self, member: &[u8], score: f64) -> io::Result<()> {
        RdbWriter::scored(self, member, score)
    }
}

/// What an image holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageStats {
    /// Keys written.
    pub keys: u64,
    /// Keys written with an expiry.
    pub expires: u64,
    /// Keys left out as expired.
    pub expired: u64,
    /// Databases that got a `SELECTDB` (those with keys).
    pub databases: u64,
}

/// Why an image could not be written.
#[derive(Debug)]
pub enum ImageError {
    /// Writing to the sink failed.
    Io(io::Error),
    /// Reading a view failed (for instance its database was dropped by
    /// FLUSHDB meanwhile: take new views and start again).
    Store(StoreError),
    /// The view holds something the keyspace encoding does not allow (a
    /// malformed meta, a member count that disagrees with the members).
    Corrupt(String),
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::Io(e) => write!(f, "writing the RDB image: {e}"),
            ImageError::Store(e) => write!(f, "reading the keyspace for the RDB image: {e}"),
            ImageError::Corrupt(e) => write!(f, "keyspace not writable as RDB: {e}"),
        }
    }
}

impl std::error::Error for ImageError {}

impl From<io::Error> for ImageError {
    fn from(e: io::Error) -> Self {
        ImageError::Io(e)
    }
}

impl From<StoreError> for ImageError {
    fn from(e: StoreError) -> Self {
        ImageError::Store(e)
    }
}

/// Writes an RDB file of `views` (element i is database i) into `out`:
/// the header's AUX fields, each non-empty database, `EOF` and the
/// checksum. Gives `out` back (flushed) with what was written.
pub fn write_image<W: Write>(
    out: W,
    header: &Header,
    views: &[Box<dyn SnapshotView>],
    opts: &ImageOptions,
) -> Result<(W, ImageStats), ImageError> {
    let mut w = RdbWriter::start(out, header)?;
    let mut stats = ImageStats::default();
    for (db, view) in views.iter().enumerate() {
        let (keys, expires) = count_keys(view.as_ref(), opts)?;
        if keys == 0 {
            continue;
        }
        w.select_db(db as u64, keys, expires)?;
        stats.databases += 1;
        write_database(&mut w, view.as_ref(), opts, &mut stats)?;
    }
    Ok((w.finish()?, stats))
}

/// Whether a batch of `pairs` read with `batch` ended its range (a view
/// returns a batch that is not full only at the end).
fn ended(pairs: &[(Vec<u8>, Vec<u8>)], batch: Batch) -> bool {
    let bytes = pairs.iter().fold(0usize, |b, (k, v)| b.saturating_add(k.len() + v.len()));
    !batch.full(pairs.len(), bytes)
}

/// The key right after `k`: where the next batch starts.
fn after(mut k: Vec<u8>) -> Vec<u8> {
    k.push(0);
    k
}

/// Calls `f` on every entry in `[start, end)` of `view`, a batch at a time.
fn walk(
    view: &dyn SnapshotView,
    start: &[u8],
    end: Option<&[u8]>,
    batch: Batch,
    mut f: impl FnMut(Vec<u8>, Vec<u8>) -> Result<(), ImageError>,
) -> Result<(), ImageError> {
    let mut from = start.to_vec();
    loop {
        let pairs = view.scan(&from, end, batch)?;
        let done = ended(&pairs, batch);
        for (k, v) in pairs {
            from.clone_from(&k);
            f(k, v)?;
        }
        if done {
            return Ok(());
        }
        from = after(from);
    }
}

/// A key's decoded meta, or why it is refused.
fn meta_of(k: &[u8], v: Vec<u8>) -> Result<(Vec<u8>, Meta), ImageError> {
    let key = user_key_of_meta(k).ok_or_else(|| ImageError::Corrupt(format!("meta key {k:02x?}")))?;
    let meta = Meta::decode_owned(v).ok_or_else(|| ImageError::Corrupt(format!("meta of key {key:02x?}")))?;
    Ok((key.to_vec(), meta))
}

/// How many elements a key's meta says it has (1 for a string).
fn element_count(meta: &Meta) -> u64 {
    match meta.kind {
        KeyType::String => 1,
        KeyType::List => {
            let (head, tail) = meta.list_bounds();
            tail.saturating_sub(head)
        }
        _ => meta.count(),
    }
}

/// Whether a key goes into the image: not expired, not an empty
/// collection (Redis skips those when it loads them).
fn written(meta: &Meta, opts: &ImageOptions) -> bool {
    !meta.expired(opts.now_ms) && element_count(meta) > 0
}

/// Keys of `view` that go into the image, and how many of them expire.
fn count_keys(view: &dyn SnapshotView, opts: &ImageOptions) -> Result<(u64, u64), ImageError> {
    let (mut keys, mut expires) = (0, 0);
    walk(view, META_START, Some(META_END), opts.batch, |k, v| {
        let (_, meta) = meta_of(&k, v)?;
        if written(&meta, opts) {
            keys += 1;
            expires += u64::from(meta.expire_ms != 0);
        }
        Ok(())
    })?;
    Ok((keys, expires))
}

/// Puts every key of `view` that an image holds into `sink` (with
/// `opts.now_ms` 0, keys already expired too, as Redis's digest counts
/// them); returns how many.
pub fn visit_database<S: KeySink>(
    sink: &mut S,
    view: &dyn SnapshotView,
    opts: &ImageOptions,
) -> Result<u64, ImageError> {
    let mut stats = ImageStats::default();
    write_database(sink, view, opts, &mut stats)?;
    Ok(stats.keys)
}

/// Puts `key` of `view` into `sink`, expired or not; false if the view
/// has no such key (or it is an empty collection).
pub fn visit_key<S: KeySink>(
    sink: &mut S,
    view: &dyn SnapshotView,
    key: &[u8],
    batch: Batch,
) -> Result<bool, ImageError> {
    let meta_key = crate::keyspace::meta_key(key);
    let Some(v) = view.get(&meta_key)? else { return Ok(false) };
    let (_, meta) = meta_of(&meta_key, v)?;
    if element_count(&meta) == 0 {
        return Ok(false);
    }
    write_key(sink, view, key, meta, batch)?;
    Ok(true)
}

/// Writes every key of `view`.
fn write_database<S: KeySink>(
    w: &mut S,
    view: &dyn SnapshotView,
    opts: &ImageOptions,
    stats: &mut ImageStats,
) -> Result<(), ImageError> {
    walk(view, META_START, Some(META_END), opts.batch, |k, v| {
        let (key, meta) = meta_of(&k, v)?;
        if !written(&meta, opts) {
            stats.expired += u64::from(meta.expired(opts.now_ms));
            return Ok(());
        }
        stats.keys += 1;
        stats.expires += u64::from(meta.expire_ms != 0);
        write_key(w, view, &key, meta, opts.batch)?;
        key_delay(opts.key_delay_us);
        Ok(())
    })
}

/// The pause of [`ImageOptions::key_delay_us`].
fn key_delay(us: i64) {
    let us = match us {
        0 => return,
        n if n < 0 => u64::from(rand::random::<u64>() % n.unsigned_abs() == 0),
        n => n.unsigned_abs(),
    };
    if us > 0 {
        std::thread::sleep(std::time::Duration::from_micros(us));
    }
}

/// Writes one key: a string or packed hash from its meta, a collection
/// from its members, streamed.
fn write_key<S: KeySink>(
    w: &mut S,
    view: &dyn SnapshotView,
    key: &[u8],
    meta: Meta,
    batch: Batch,
) -> Result<(), ImageError> {
    let count = element_count(&meta);
    let exp = meta.expire_ms;
    let (kind, tag) = match meta.kind {
        KeyType::String => return Ok(w.key(key, &Value::String(meta.body), exp)?),
        KeyType::Hash if meta.packed => {
            let pairs =
                packed::decode(&meta.body).ok_or_else(|| ImageError::Corrupt(format!("packed hash {key:02x?}")))?;
            w.begin(Collection::Hash, key, pairs.len() as u64, exp)?;
            for (f, v) in pairs {
                w.pair(f, v)?;
            }
            return Ok(w.end()?);
        }
        KeyType::Hash => (Collection::Hash, b'H'),
        KeyType::Set => (Collection::Set, b'S'),
        KeyType::ZSet => (Collection::ZSet, b'Z'),
        KeyType::List => (Collection::List, b'L'),
    };
    let prefix = member_prefix(tag, key);
    let end = prefix_end(&prefix);
    w.begin(kind, key, count, exp)?;
    let mut seen = 0u64;
    let short =
        |seen: u64| ImageError::Corrupt(format!("key {key:02x?}: its meta counts {count} members, found {seen}"));
    walk(view, &prefix, end.as_deref(), batch, |k, v| {
        seen += 1;
        if seen > count {
            return Err(short(seen));
        }
        let member = k.get(prefix.len()..).unwrap_or_default();
        match kind {
            Collection::Hash => w.pair(member, &v)?,
            Collection::Set => w.item(member)?,
            Collection::List => w.item(&v)?,
            Collection::ZSet => {
                let bits: [u8; 8] =
                    v.as_slice().try_into().map_err(|_| ImageError::Corrupt(format!("score in {key:02x?}")))?;
                w.scored(member, f64::from_bits(u64::from_le_bytes(bits)))?;
            }
        }
        Ok(())
    })?;
    if seen != count {
        return Err(short(seen));
    }
    Ok(w.end()?)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;
    use crate::keyspace::{expire_index_key, list_key, member_key, meta_key, zindex_key, LIST_MID};
    use crate::rdb::read::{read_rdb, Entry, Item, ReadOptions};
    use crate::store::view::MapView;
    use crate::store::Backend;

    /// The store entries of `key` holding `value`, as the keyspace lays
    /// them out (FORMAT.md): small hashes packed in their meta.
    fn entries(key: &[u8], value: &Value, exp: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let meta = match value {
            Value::String(s) => Meta::string(s.clone(), exp),
            Value::Hash(pairs) => {
                let sorted: BTreeMap<_, _> = pairs.iter().cloned().collect();
                let sorted: Vec<_> = sorted.into_iter().collect();
                if packed::fits(&sorted) {
                    Meta::packed_hash(&sorted, exp)
                } else {
                    for (f, v) in &sorted {
                        out.push((member_key(b'H', key, f), v.clone()));
                    }
                    Meta::collection(KeyType::Hash, sorted.len() as u64, exp)
                }
            }
            Value::Set(items) => {
                for m in items {
                    out.push((member_key(b'S', key, m), Vec::new()));
                }
                Meta::collection(KeyType::Set, items.len() as u64, exp)
            }
            Value::ZSet(members) => {
                for (m, s) in members {
                    out.push((member_key(b'Z', key, m), s.to_bits().to_le_bytes().to_vec()));
                    out.push((zindex_key(key, *s, m), Vec::new()));
                }
                Meta::collection(KeyType::ZSet, members.len() as u64, exp)
            }
            Value::List(items) => {
                for (i, e) in items.iter().enumerate() {
                    out.push((list_key(key, LIST_MID - 3 + i as u64), e.clone()));
                }
                Meta::list(LIST_MID - 3, LIST_MID - 3 + items.len() as u64, exp)
            }
        };
        out.push((meta_key(key), meta.encode()));
        if exp != 0 {
            out.push((expire_index_key(exp, key), Vec::new()));
        }
        out
    }

    /// `value` with its members in one order (sets, hashes, sorted sets
    /// sorted), so two readings compare equal.
    fn canonical(value: Value) -> Value {
        match value {
            Value::Set(mut v) => {
                v.sort();
                Value::Set(v)
            }
            Value::Hash(mut v) => {
                v.sort();
                Value::Hash(v)
            }
            Value::ZSet(mut v) => {
                v.sort_by(|a, b| a.0.cmp(&b.0));
                Value::ZSet(v)
            }
            v => v,
        }
    }

    type Model = BTreeMap<(u64, Vec<u8>), (Value, u64)>;

    /// The keys of an RDB file, canonical.
    fn read_back(file: &[u8]) -> Model {
        let mut got = Model::new();
        read_rdb(file, &ReadOptions::default(), &mut |i| {
            if let Item::Key(Entry { db, key, value, expire_ms }) = i {
                let old = got.insert((db, key), (canonical(value), expire_ms.unwrap_or(0)));
                assert!(old.is_none(), "a key twice");
            }
            Ok(())
        })
        .unwrap();
        got
    }

    fn image(views: &[Box<dyn SnapshotView>], batch: Batch, now_ms: u64) -> (Vec<u8>, ImageStats) {
        let opts = ImageOptions { batch, now_ms, key_delay_us: 0 };
        write_image(Vec::new(), &Header::now("7.0.15", 0), views, &opts).unwrap()
    }

    fn views_of(model: &Model, dbs: u64) -> Vec<Box<dyn SnapshotView>> {
        (0..dbs)
            .map(|db| {
                let mut map = BTreeMap::new();
                map.insert(b"!version".to_vec(), b"2".to_vec());
                for ((d, k), (v, exp)) in model {
                    if *d == db {
                        map.extend(entries(k, v, *exp));
                    }
                }
                Box::new(MapView::new(map)) as Box<dyn SnapshotView>
            })
            .collect()
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..12),
            (-1000i64..1000).prop_map(|n| n.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..3000),
        ]
    }

    fn score() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0),
            -1e10f64..1e10,
            any::<i32>().prop_map(f64::from)
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        let members = || proptest::collection::btree_set(bytes(), 1..40);
        prop_oneof![
            bytes().prop_map(Value::String),
            proptest::collection::vec(bytes(), 1..40).prop_map(Value::List),
            members().prop_map(|s| Value::Set(s.into_iter().collect())),
            proptest::collection::btree_map(bytes(), bytes(), 1..200)
                .prop_map(|m| Value::Hash(m.into_iter().collect())),
            proptest::collection::btree_map(bytes(), score(), 1..40).prop_map(|m| Value::ZSet(m.into_iter().collect())),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Every key of every database, through the image writer (small
        /// batches, so members span many reads) and back through the reader:
        /// what was stored, less the expired keys.
        #[test]
        fn keyspace_round_trips_through_an_image(
            keys in proptest::collection::btree_map(
                (0u64..3, bytes()),
                (value(), prop_oneof![Just(0u64), Just(500u64), 2000u64..u64::from(u32::MAX)]),
                0..12,
            ),
            entries_per_batch in 1usize..8,
        ) {
            let now = 1000;
            let model: Model = keys.into_iter().map(|(k, (v, e))| (k, (canonical(v), e))).collect();
            let (file, stats) = image(&views_of(&model, 3), Batch::new(entries_per_batch, 4096), now);
            let want: Model = model.into_iter().filter(|(_, (_, e))| *e == 0 || *e > now).collect();
            prop_assert_eq!(stats.keys, want.len() as u64);
            prop_assert_eq!(read_back(&file), want);
        }

        /// Whole values written by the writer and read by the reader.
        #[test]
        fn values_round_trip_through_a_file(values in proptest::collection::vec((value(), any::<u32>()), 0..10)) {
            let mut w = crate::rdb::write::RdbWriter::start(Vec::new(), &Header::now("7.0.15", 0)).unwrap();
            w.select_db(0, values.len() as u64, 0).unwrap();
            let mut want = Model::new();
            for (i, (v, exp)) in values.into_iter().enumerate() {
                let key = format!("k{i}").into_bytes();
                w.key(&key, &v, u64::from(exp)).unwrap();
                want.insert((0, key), (canonical(v), u64::from(exp)));
            }
            prop_assert_eq!(read_back(&w.finish().unwrap()), want);
        }
    }

    /// A collection whose meta counts more members than it has is an
    /// error, not a file Redis would misread.
    #[test]
    fn a_count_that_disagrees_is_refused() {
        let mut map: BTreeMap<Vec<u8>, Vec<u8>> =
            entries(b"s", &Value::Set(vec![b"a".to_vec()]), 0).into_iter().collect();
        map.insert(meta_key(b"s"), Meta::collection(KeyType::Set, 2, 0).encode());
        let views: Vec<Box<dyn SnapshotView>> = vec![Box::new(MapView::new(map))];
        let e = write_image(Vec::new(), &Header::now("7.0.15", 0), &views, &ImageOptions::default()).unwrap_err();
        assert!(e.to_string().contains("counts 2 members, found 1"), "{e}");
    }

    /// An engine's views are taken at one cut across databases and do
    /// not see writes made after it; a database created after it is
    /// empty in it.
    #[test]
    fn engine_views_are_a_point_in_time() {
        use crate::store::engine::EngineStore;
        let dir = tempfile::tempdir().unwrap();
        let opts = stratakv::Options { pm_size: 128 << 20, ..Default::default() };
        let store = EngineStore::open(dir.path(), opts).unwrap();
        let dbs = store.databases(4).unwrap();
        let put = |s: &dyn Backend, key: &[u8], v: &Value| {
            let ops = entries(key, v, 0).into_iter().map(|(k, v)| (k, Some(v))).collect();
            let _ = s.write(ops, false).unwrap();
        };
        let big: Vec<Vec<u8>> = (0..500).map(|i| format!("m{i}").into_bytes()).collect();
        put(&store, b"a", &Value::String(b"1".to_vec()));
        put(dbs[0].as_ref(), b"set", &Value::Set(big.clone()));
        let views = store.snapshot_databases(4).unwrap();
        assert_eq!(views.len(), 4);
        put(&store, b"a", &Value::String(b"2".to_vec()));
        put(&store, b"late", &Value::String(b"x".to_vec()));
        // One more member, as SADD writes it: the member and the count.
        let meta = Meta::collection(KeyType::Set, 501, 0).encode();
        let ops = vec![(member_key(b'S', b"set", b"other"), Some(Vec::new())), (meta_key(b"set"), Some(meta))];
        let _ = dbs[0].write(ops, false).unwrap();
        put(dbs[2].as_ref(), b"new", &Value::String(b"x".to_vec()));
        let (file, stats) = image(&views, Batch::new(64, 1 << 20), 1);
        assert_eq!(stats.databases, 2);
        let got = read_back(&file);
        let mut want = Model::new();
        want.insert((0, b"a".to_vec()), (Value::String(b"1".to_vec()), 0));
        want.insert((1, b"set".to_vec()), (canonical(Value::Set(big)), 0));
        assert_eq!(got, want);
        // A view taken now sees the writes.
        let (file, _) = image(&store.snapshot_databases(4).unwrap(), Batch::new(64, 1 << 20), 1);
        let got = read_back(&file);
        assert_eq!(got.len(), 4);
        assert!(matches!(&got[&(1, b"set".to_vec())].0, Value::Set(m) if m.len() == 501));
    }

    /// The sharded store's view is one cut across its shards: a
    /// collection whose meta and members live on different shards is
    /// whole in it, and later writes are not.
    #[test]
    fn sharded_views_are_one_cut() {
        use crate::store::sharded::ShardedStore;
        let dir = tempfile::tempdir().unwrap();
        let o = stratakv::Options { pm_size: 128 << 20, write_buffer_size: 256 << 10, ..Default::default() };
        let store = ShardedStore::open(dir.path(), stratakv::ShardedOptions::new(3, o)).unwrap();
        let hash: Vec<_> = (0..300).map(|i| (format!("f{i}").into_bytes(), vec![b'v'; i])).collect();
        let ops = entries(b"h", &Value::Hash(hash.clone()), 0).into_iter().map(|(k, v)| (k, Some(v))).collect();
        let _ = store.write(ops, false).unwrap();
        let views = store.snapshot_databases(16).unwrap();
        assert_eq!(views.len(), 1);
        let _ = store.write(vec![(meta_key(b"h"), None)], false).unwrap();
        let (file, _) = image(&views, Batch::new(7, 1 << 20), 1);
        let mut want = Model::new();
        want.insert((0, b"h".to_vec()), (canonical(Value::Hash(hash)), 0));
        assert_eq!(read_back(&file), want);
    }

    /// The memory store's view is a copy: later writes are not in it.
    #[test]
    fn memory_views_are_a_point_in_time() {
        use crate::store::memory::{MemoryPersistence, MemoryStore};
        let dir = tempfile::tempdir().unwrap();
        let store = MemoryStore::open(dir.path(), MemoryPersistence::default()).unwrap();
        let ops =
            entries(b"k", &Value::List(vec![b"x".to_vec(); 3]), 0).into_iter().map(|(k, v)| (k, Some(v))).collect();
        let _ = store.write(ops, false).unwrap();
        let views = store.snapshot_databases(16).unwrap();
        assert_eq!(views.len(), 1, "the memory store has db 0 only");
        let _ = store.write(vec![(meta_key(b"k"), None)], false).unwrap();
        let (file, _) = image(&views, Batch::new(2, 1 << 20), 1);
        let keys: BTreeSet<_> = read_back(&file).into_keys().collect();
        assert_eq!(keys, BTreeSet::from([(0, b"k".to_vec())]));
    }
}
