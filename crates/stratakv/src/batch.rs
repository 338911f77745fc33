//! Write batches: several puts and deletes applied atomically.
//!
//! The batch's byte representation is exactly the records of a PM log
//! entry (FORMAT.md, "Log entry"), so committing a batch is one copy into
//! PM. This module is the one place that knows the record layout: it
//! encodes records, decodes them ([`Records`]) and locates their parts
//! ([`key_offset`], [`value_offset`]).

use crate::coding::{put_varint, varint_len, Reader};
use crate::key::partition::is_reserved;
use crate::key::{Kind, MAX_KEY_LEN, MAX_VALUE_LEN};

/// An ordered list of updates applied all-or-nothing, also across a crash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    invalid: Option<String>,
    /// A key of the default partition begins with the partitions' mark
    /// (refused once the database has partitions).
    reserved: bool,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds `key = value`. Over-limit keys or values make the whole batch
    /// fail with `InvalidArgument` when written.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.reserved |= is_reserved(key.as_ref());
        self.put_raw(key.as_ref(), value.as_ref())
    }

    pub(crate) fn put_raw(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.check(key, Some(value));
        self.rep.push(Kind::Put as u8);
        put_varint(&mut self.rep, key.len() as u64);
        self.rep.extend_from_slice(key);
        put_varint(&mut self.rep, value.len() as u64);
        self.rep.extend_from_slice(value);
        self.count += 1;
        self
    }

    /// Adds a deletion of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.reserved |= is_reserved(key.as_ref());
        self.delete_raw(key.as_ref())
    }

    pub(crate) fn delete_raw(&mut self, key: &[u8]) -> &mut Self {
        self.check(key, None);
        self.rep.push(Kind::Delete as u8);
        put_varint(&mut self.rep, key.len() as u64);
        self.rep.extend_from_slice(key);
        self.count += 1;
        self
    }

    fn check(&mut self, key: &[u8], value: Option<&[u8]>) {
        if self.invalid.is_some() {
            return;
        }
        if key.len() > MAX_KEY_LEN {
            self.invalid = Some(format!("key of {} bytes exceeds the {MAX_KEY_LEN}-byte limit", key.len()));
        } else if let Some(v) = value.filter(|v| v.len() > MAX_VALUE_LEN) {
            self.invalid = Some(format!("value of {} bytes exceeds the {MAX_VALUE_LEN}-byte limit", v.len()));
        } else if self.count == u32::MAX {
            self.invalid = Some("batch has too many records".into());
        }
    }

    /// Number of updates.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch has no updates.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes every update.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.count = 0;
        self.invalid = None;
        self.reserved = false;
    }

    /// Bytes of the encoded updates.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Appends `other`'s updates after this batch's (the sharded front end
    /// folds queued batches into one; both were checked when queued).
    pub(crate) fn append(&mut self, other: &WriteBatch) {
        if self.invalid.is_none() {
            self.invalid = other.invalid.clone();
        }
        self.rep.extend_from_slice(&other.rep);
        self.count = self.count.saturating_add(other.count);
        self.reserved |= other.reserved;
    }

    /// Rebuilds a batch from the bytes [`WriteBatch::rep`] gave; `None` if
    /// they do not decode (a damaged coordinator record).
    pub(crate) fn from_rep(rep: &[u8]) -> Option<WriteBatch> {
        let mut b = WriteBatch::new();
        for r in Records::new(rep, 0) {
            let r = r.ok()?;
            match r.kind {
                Kind::Put => b.put(r.key, r.value),
                Kind::Delete => b.delete(r.key),
            };
        }
        Some(b)
    }

    pub(crate) fn rep(&self) -> &[u8] {
        &self.rep
    }

    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    pub(crate) fn invalid(&self) -> Option<&str> {
        self.invalid.as_deref()
    }

    /// Notes a key of the default partition that begins with the partitions' mark.
    pub(crate) fn mark_reserved(&mut self) {
        self.reserved = true;
    }

    /// Whether a key of the default partition begins with the partitions' mark.
    pub(crate) fn has_reserved_keys(&self) -> bool {
        self.reserved
    }

    /// The updates, in order: (kind, key, value).
    pub fn iter(&self) -> impl Iterator<Item = (Kind, &[u8], &[u8])> + '_ {
        Records::new(&self.rep, 0).map_while(|r| r.ok()).map(|r| (r.kind, r.key, r.value))
    }
}

/// One decoded record, with where its value starts relative to the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Put or delete.
    pub kind: Kind,
    /// The key.
    pub key: &'a [u8],
    /// The value (empty for deletes).
    pub value: &'a [u8],
    /// Offset of the value, relative to the body start plus `base`.
    pub value_off: u64,
    /// Offset of the key, likewise.
    pub key_off: u64,
}

/// Where a record of the PM log lies: what a source that indexes log
/// records (a memtable, a matrix row) knows of its current entry, so that
/// level 0 can index the record again without copying it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLoc {
    /// Region offset of the user key.
    pub key_off: u64,
    /// User key length.
    pub key_len: u32,
    /// Value length (0 for tombstones).
    pub value_len: u32,
    /// The key's hash, if the source stores it.
    pub hash: Option<u64>,
    /// Region offset of the record's PM skiplist node, if its entry has
    /// them (pm-only; FORMAT.md, "Log entry").
    pub node_off: Option<u64>,
}

/// Where a record's key starts, given where its value starts: a put's
/// value length varint sits between its key and its value; a tombstone's
/// `value_off` (as [`Records`] reports it) is where its key ends. This and
/// [`value_offset`] are the only places that do arithmetic on the layout.
pub(crate) fn key_offset(kind: Kind, value_off: u64, value_len: u32, key_len: u32) -> u64 {
    match kind {
        Kind::Put => value_off - varint_len(value_len as u64) as u64 - key_len as u64,
        Kind::Delete => value_off - key_len as u64,
    }
}

/// Where a put's value starts, given where its key starts.
pub(crate) fn value_offset(key_off: u64, key_len: u32, value_len: u32) -> u64 {
    key_off + key_len as u64 + varint_len(value_len as u64) as u64
}

/// Decodes the records of a batch body; yields `Err(offset)` at a malformed record.
pub struct Records<'a> {
    r: Reader<'a>,
    base: u64,
    failed: bool,
}

impl<'a> Records<'a> {
    /// Records of `body`, with value offsets reported as `base + offset in body`.
    pub fn new(body: &'a [u8], base: u64) -> Records<'a> {
        Records { r: Reader::new(body), base, failed: false }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, u64>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let start = self.r.pos() as u64;
        let rec = (|| {
            let kind = Kind::from_u8(self.r.u8()?)?;
            let key = self.r.len_bytes()?;
            if key.len() > MAX_KEY_LEN {
                return None;
            }
            let key_off = self.base + (self.r.pos() - key.len()) as u64;
            let (value, value_off) = match kind {
                Kind::Put => {
                    let n = usize::try_from(self.r.varint()?).ok()?;
                    let off = self.r.pos() as u64;
                    (self.r.bytes(n)?, off)
                }
                Kind::Delete => (&[][..], self.r.pos() as u64),
            };
            Some(Record { kind, key, value, value_off: self.base + value_off, key_off })
        })();
        match rec {
            Some(r) => Some(Ok(r)),
            None => {
                self.failed = true;
                Some(Err(self.base + start))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_round_trips_with_offsets() {
        let mut b = WriteBatch::new();
        b.put("a", "1").delete("b").put("ccc", vec![7u8; 300]);
        assert_eq!(b.len(), 3);
        let recs: Vec<_> = Records::new(b.rep(), 1000).collect::<Result<_, _>>().unwrap();
        assert_eq!(recs[0].key, b"a");
        assert_eq!(recs[1].kind, Kind::Delete);
        assert_eq!(recs[2].value.len(), 300);
        for r in &recs {
            assert_eq!(key_offset(r.kind, r.value_off, r.value.len() as u32, r.key.len() as u32), r.key_off);
            if r.kind == Kind::Put {
                assert_eq!(value_offset(r.key_off, r.key.len() as u32, r.value.len() as u32), r.value_off);
            }
        }
        let off = (recs[2].value_off - 1000) as usize;
        let koff = (recs[2].key_off - 1000) as usize;
        assert_eq!(&b.rep()[koff..koff + 3], b"ccc");
        assert_eq!(&b.rep()[off..off + 300], &[7u8; 300][..]);
        assert_eq!(b.iter().count(), 3);
    }

    #[test]
    fn oversize_key_marks_batch_invalid() {
        let mut b = WriteBatch::new();
        b.put(vec![0u8; MAX_KEY_LEN + 1], "v");
        assert!(b.invalid().is_some());
        b.clear();
        assert!(b.invalid().is_none());
    }

    #[test]
    fn truncated_body_yields_error_offset() {
        let mut b = WriteBatch::new();
        b.put("key", "value");
        let rep = b.rep();
        let r: Vec<_> = Records::new(&rep[..rep.len() - 1], 0).collect();
        assert_eq!(r, vec![Err(0)]);
    }
}
