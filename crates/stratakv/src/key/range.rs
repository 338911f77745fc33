//! Ranges of user keys, as every range API of the engine takes them.

use std::ops::{Bound, RangeBounds};

/// A range of user keys. Built from any Rust range of byte strings:
/// `..`, `b"a"..b"k"`, `"a".."k"`, `(Bound::Excluded(k), Bound::Unbounded)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// Lower bound.
    pub start: Bound<Vec<u8>>,
    /// Upper bound.
    pub end: Bound<Vec<u8>>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> KeyRange {
        KeyRange { start: Bound::Unbounded, end: Bound::Unbounded }
    }

    /// Keys starting with `prefix`.
    pub fn prefix(prefix: impl AsRef<[u8]>) -> KeyRange {
        let p = prefix.as_ref().to_vec();
        let mut end = p.clone();
        // The smallest key greater than every key with this prefix.
        while let Some(last) = end.pop() {
            if last < 0xff {
                end.push(last + 1);
                return KeyRange { start: Bound::Included(p), end: Bound::Excluded(end) };
            }
        }
        KeyRange { start: Bound::Included(p), end: Bound::Unbounded }
    }

    /// Whether `k` is at or after the start.
    pub fn after_start(&self, k: &[u8]) -> bool {
        match &self.start {
            Bound::Included(s) => k >= s.as_slice(),
            Bound::Excluded(s) => k > s.as_slice(),
            Bound::Unbounded => true,
        }
    }

    /// Whether `k` is at or before the end.
    pub fn before_end(&self, k: &[u8]) -> bool {
        match &self.end {
            Bound::Included(e) => k <= e.as_slice(),
            Bound::Excluded(e) => k < e.as_slice(),
            Bound::Unbounded => true,
        }
    }

    /// Whether `k` is in the range.
    pub fn contains(&self, k: &[u8]) -> bool {
        self.after_start(k) && self.before_end(k)
    }

    /// Inclusive user-key bounds covering the range (for picking files).
    pub(crate) fn user_bounds(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let lo = match &self.start {
            Bound::Included(s) | Bound::Excluded(s) => Some(s.clone()),
            Bound::Unbounded => None,
        };
        let hi = match &self.end {
            Bound::Included(e) | Bound::Excluded(e) => Some(e.clone()),
            Bound::Unbounded => None,
        };
        (lo, hi)
    }
}

fn conv<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

macro_rules! range_from {
    ($($t:ty),*) => {$(
        impl<K: AsRef<[u8]>> From<$t> for KeyRange {
            fn from(r: $t) -> KeyRange {
                KeyRange { start: conv(r.start_bound()), end: conv(r.end_bound()) }
            }
        }
    )*};
}
range_from!(
    std::ops::Range<K>,
    std::ops::RangeInclusive<K>,
    std::ops::RangeFrom<K>,
    std::ops::RangeTo<K>,
    std::ops::RangeToInclusive<K>,
    (Bound<K>, Bound<K>)
);

impl From<std::ops::RangeFull> for KeyRange {
    fn from(_: std::ops::RangeFull) -> KeyRange {
        KeyRange::all()
    }
}
