//! Key prefixes: an optional function that names the group a key belongs
//! to (RocksDB's `prefix_extractor`), so a range scan inside one group can
//! skip every matrix row that holds no key of that group.
//!
//! The server stores a hash's fields as `H | klen | key | field`; an
//! `HGETALL` scans the keys that begin with `H | klen | key`. Without a
//! prefix filter that scan positions a cursor in every matrix row; with it,
//! only in the rows that hold a field of that hash.

use std::fmt::Debug;
use std::ops::Bound;

use super::KeyRange;

/// Names the prefix group of a key.
///
/// Contract: the prefix is a leading part of the key, and every key that
/// begins with a prefix this function returned has that same prefix.
/// (A fixed length meets it; so does "tag, length, name" as long as the
/// length field is inside the prefix.) Changing the function between opens
/// is safe: filters are rebuilt in DRAM when the database opens.
pub trait PrefixExtractor: Send + Sync + Debug {
    /// The prefix of `key`, or None if the key belongs to no group (such
    /// keys are never skipped by a filter).
    fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]>;
}

/// The first `n` bytes of each key; shorter keys have no prefix.
#[derive(Clone, Copy, Debug)]
pub struct FixedPrefix(pub usize);

impl PrefixExtractor for FixedPrefix {
    fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        key.get(..self.0)
    }
}

/// The prefix that every key of `range` begins with, when the extractor
/// names one: the range starts at a key with prefix `p` and ends no later
/// than the last key beginning with `p`. Then a source that holds no key
/// with prefix `p` holds no key of the range.
pub fn range_prefix(extractor: &dyn PrefixExtractor, range: &KeyRange) -> Option<Vec<u8>> {
    let start = match &range.start {
        Bound::Included(s) | Bound::Excluded(s) => s,
        Bound::Unbounded => return None,
    };
    let p = extractor.prefix(start)?;
    let inside = match &range.end {
        // Keys <= e all begin with p when e does.
        Bound::Included(e) => e.starts_with(p),
        // Keys < e all begin with p when e <= the first key after all of p's.
        Bound::Excluded(e) => match KeyRange::prefix(p).end {
            Bound::Excluded(after) => e.as_slice() <= after.as_slice(),
            _ => e.starts_with(p),
        },
        Bound::Unbounded => false,
    };
    inside.then(|| p.to_vec())
}

/// Hash of a prefix in the filters.
pub(crate) fn prefix_hash(prefix: &[u8]) -> u64 {
    // Seeded apart from the full-key hash so a key that equals its own
    // prefix does not share filter bits between the two uses.
    xxhash_rust::xxh3::xxh3_64_with_seed(prefix, 0x5052_4546)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_prefix_only_for_ranges_inside_one_prefix() {
        let f = FixedPrefix(3);
        let r = |s: &[u8], e: Bound<Vec<u8>>| KeyRange { start: Bound::Included(s.to_vec()), end: e };
        assert_eq!(range_prefix(&f, &KeyRange::prefix(b"abc")), Some(b"abc".to_vec()));
        assert_eq!(range_prefix(&f, &KeyRange::prefix(b"abcde")), Some(b"abc".to_vec()));
        assert_eq!(range_prefix(&f, &r(b"abc1", Bound::Excluded(b"abc9".to_vec()))), Some(b"abc".to_vec()));
        assert_eq!(range_prefix(&f, &r(b"abc1", Bound::Excluded(b"abd".to_vec()))), Some(b"abc".to_vec()));
        assert_eq!(range_prefix(&f, &r(b"abc1", Bound::Included(b"abcz".to_vec()))), Some(b"abc".to_vec()));
        // Ranges that reach past the prefix's keys, or have no prefix.
        assert_eq!(range_prefix(&f, &r(b"abc1", Bound::Excluded(b"abd0".to_vec()))), None);
        assert_eq!(range_prefix(&f, &r(b"abc1", Bound::Included(b"abd".to_vec()))), None);
        assert_eq!(range_prefix(&f, &r(b"abc1", Bound::Unbounded)), None);
        assert_eq!(range_prefix(&f, &KeyRange::prefix(b"ab")), None);
        assert_eq!(range_prefix(&f, &KeyRange::all()), None);
        // A prefix of 0xff bytes has no successor: only ends that begin with it.
        let ff = [0xffu8; 3];
        assert_eq!(range_prefix(&f, &r(&ff, Bound::Excluded(vec![0xff, 0xff, 0xff, 7]))), Some(ff.to_vec()));
        assert_eq!(range_prefix(&f, &r(&ff, Bound::Excluded(vec![0xff, 0xff, 0xff, 0xff, 0]))), Some(ff.to_vec()));
    }
}
