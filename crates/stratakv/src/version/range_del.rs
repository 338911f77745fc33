//! Range tombstones: `delete_range` and dropped partitions.
//!
//! A range tombstone `[start, end) @ seq` hides every entry of a key in
//! the range whose sequence is below `seq`, from every reader whose read
//! point is at or above `seq`. They live in the version (and so in the
//! MANIFEST), not in the log or the tables: a version holds few of them,
//! every layer below it obeys them without knowing, and a dropped
//! partition is one of them with `seq` = [`DROPPED`] (everything, for
//! everyone). Compactions drop what they hide, and a table they hide
//! entirely is deleted without being read (`db/range_drop.rs`).

use std::sync::Arc;

use crate::key::{SeqNo, MAX_SEQ};

/// The sequence of a dropped partition's tombstone: it hides every entry
/// of the range from every reader.
pub const DROPPED: SeqNo = MAX_SEQ;

/// One range tombstone: keys in `[start, end)` older than `seq` are gone.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RangeTomb {
    /// First key of the range.
    pub start: Vec<u8>,
    /// First key after the range.
    pub end: Vec<u8>,
    /// Entries with a smaller sequence are hidden (readers at >= `seq`).
    pub seq: SeqNo,
}

impl RangeTomb {
    /// Whether `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }
}

/// A piece of the key space where the same tombstones apply.
#[derive(Clone, Debug)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    /// Sequences of the tombstones covering the piece, largest first.
    seqs: Vec<SeqNo>,
}

/// The range tombstones of a version, split into disjoint fragments so a
/// lookup is one binary search.
#[derive(Clone, Debug, Default)]
pub struct RangeDels {
    tombs: Vec<RangeTomb>,
    frags: Vec<Fragment>,
}

impl RangeDels {
    /// The set holding `tombs` (any order; duplicates kept once).
    pub fn new(mut tombs: Vec<RangeTomb>) -> RangeDels {
        tombs.retain(|t| t.start < t.end);
        tombs.sort();
        tombs.dedup();
        let mut points: Vec<&[u8]> = tombs.iter().flat_map(|t| [t.start.as_slice(), t.end.as_slice()]).collect();
        points.sort_unstable();
        points.dedup();
        let mut frags = Vec::new();
        for w in points.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            // Tombstones are sorted by start: those starting after `lo`
            // cannot cover the piece.
            let upto = tombs.partition_point(|t| t.start.as_slice() <= lo);
            let mut seqs: Vec<SeqNo> = tombs[..upto].iter().filter(|t| t.end.as_slice() >= hi).map(|t| t.seq).collect();
            if seqs.is_empty() {
                continue;
            }
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            frags.push(Fragment { start: lo.to_vec(), end: hi.to_vec(), seqs });
        }
        RangeDels { tombs, frags }
    }

    /// No tombstones at all (the common case, checked first on every read).
    pub fn is_empty(&self) -> bool {
        self.tombs.is_empty()
    }

    /// The tombstones, sorted.
    pub fn tombs(&self) -> &[RangeTomb] {
        &self.tombs
    }

    /// A set with `add` added and `remove` removed.
    pub fn edited(&self, add: &[RangeTomb], remove: &[RangeTomb]) -> RangeDels {
        let mut t: Vec<RangeTomb> = self.tombs.iter().filter(|t| !remove.contains(t)).cloned().collect();
        t.extend(add.iter().cloned());
        RangeDels::new(t)
    }

    /// The largest sequence of a tombstone covering `key` that a reader at
    /// `read_seq` sees; 0 if none. An entry of `key` with a smaller
    /// sequence is deleted for that reader.
    pub fn covering_seq(&self, key: &[u8], read_seq: SeqNo) -> SeqNo {
        if self.frags.is_empty() {
            return 0;
        }
        let i = self.frags.partition_point(|f| f.start.as_slice() <= key);
        let Some(f) = i.checked_sub(1).and_then(|i| self.frags.get(i)) else { return 0 };
        if key >= f.end.as_slice() {
            return 0;
        }
        f.seqs.iter().copied().find(|s| visible(*s, read_seq)).unwrap_or(0)
    }

    /// Whether a reader at `read_seq` sees the entry (`key`, `seq`) deleted
    /// by a range tombstone.
    pub fn hides(&self, key: &[u8], seq: SeqNo, read_seq: SeqNo) -> bool {
        seq < self.covering_seq(key, read_seq)
    }

    /// Whether one tombstone visible at `read_seq` covers every key of
    /// `[lo, hi]` and is newer than `largest_seq`: a table with those bounds
    /// holds nothing any reader at `read_seq` or later can see.
    pub fn covers_file(&self, lo: &[u8], hi: &[u8], largest_seq: SeqNo, read_seq: SeqNo) -> bool {
        self.tombs.iter().any(|t| {
            visible(t.seq, read_seq) && t.seq > largest_seq && t.start.as_slice() <= lo && hi < t.end.as_slice()
        })
    }
}

/// Whether a reader at `read_seq` sees a tombstone at `seq`: a dropped
/// partition's, always.
fn visible(seq: SeqNo, read_seq: SeqNo) -> bool {
    seq <= read_seq || seq == DROPPED
}

/// An empty set, shared.
pub fn no_range_dels() -> Arc<RangeDels> {
    Arc::new(RangeDels::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, e: &str, seq: SeqNo) -> RangeTomb {
        RangeTomb { start: s.into(), end: e.into(), seq }
    }

    #[test]
    fn fragments_answer_like_a_scan_of_every_tombstone() {
        let tombs = vec![t("b", "f", 10), t("d", "k", 20), t("a", "c", 5), t("x", "y", DROPPED), t("e", "e", 9)];
        let set = RangeDels::new(tombs.clone());
        assert_eq!(set.tombs().len(), 4, "the empty range is dropped");
        for key in ["", "a", "b", "bb", "c", "d", "e", "f", "j", "k", "x", "xa", "y", "z"] {
            for read in [0, 4, 5, 9, 10, 15, 20, 30, DROPPED] {
                let want = tombs
                    .iter()
                    .filter(|t| t.contains(key.as_bytes()) && (t.seq <= read || t.seq == DROPPED))
                    .map(|t| t.seq)
                    .max()
                    .unwrap_or(0);
                assert_eq!(set.covering_seq(key.as_bytes(), read), want, "{key} @ {read}");
            }
        }
        assert!(set.hides(b"e", 15, 25));
        assert!(!set.hides(b"e", 25, 25));
        assert!(!set.hides(b"e", 15, 19) || set.covering_seq(b"e", 19) > 15);
    }

    #[test]
    fn a_file_is_covered_only_by_one_newer_visible_tombstone() {
        let set = RangeDels::new(vec![t("b", "f", 10), t("f", "k", 20)]);
        assert!(set.covers_file(b"b", b"ez", 9, 10));
        assert!(!set.covers_file(b"b", b"ez", 10, 10), "the file has an entry as new as the tombstone");
        assert!(!set.covers_file(b"b", b"ez", 9, 9), "no reader sees the tombstone yet");
        assert!(!set.covers_file(b"c", b"g", 1, 30), "two tombstones are not merged");
        assert!(!set.covers_file(b"f", b"k", 1, 30), "the end is exclusive");
        let edited = set.edited(&[t("a", "z", 40)], &[t("b", "f", 10)]);
        assert_eq!(edited.tombs().len(), 2);
        assert!(edited.covers_file(b"c", b"g", 1, 40));
    }
}
