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
}

impl Default for ImageOptions {
    /// Batches of 256 entries or 1 MiB; expiry checked against now.
    fn default() -> Self {
        ImageOptions { batch: Batch::new(256, 1 << 20), now_ms: crate::keyspace::now_ms() }
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

/// Writes every key of `view`.
fn write_database<W: Write>(
    w: &mut RdbWriter<W>,
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
        write_key(w, view, &key, meta, opts.batch)
    })
}

/// Writes one key: a string or packed hash from its meta, a collection
/// from its members, streamed.
fn write_key<W: Write>(
    w: &mut RdbWriter<W>,
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
            return Ok(());
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
    Ok(())
}
