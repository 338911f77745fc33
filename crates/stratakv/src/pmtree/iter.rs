//! Range iteration: forward along leaf siblings, backward by one descent
//! per leaf. Each leaf is copied consistently; entries a concurrent (or
//! crash-interrupted) split left in both halves are filtered by the right
//! sibling's fence and by the last key returned.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use super::search::Target;
use super::value::TreeValue;
use super::Inner;
use crate::error::Result;

/// One item of a range.
type Item = (Vec<u8>, TreeValue);

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether `k` is at or after the lower bound `b`.
fn after_start(k: &[u8], b: &Bound<Vec<u8>>) -> bool {
    match b {
        Bound::Included(s) => k >= s.as_slice(),
        Bound::Excluded(s) => k > s.as_slice(),
        Bound::Unbounded => true,
    }
}

/// Whether `k` is at or before the upper bound `b`.
fn before_end(k: &[u8], b: &Bound<Vec<u8>>) -> bool {
    match b {
        Bound::Included(e) => k <= e.as_slice(),
        Bound::Excluded(e) => k < e.as_slice(),
        Bound::Unbounded => true,
    }
}

impl Inner {
    /// The entries of leaf copy `leaf` below its right sibling's fence, in
    /// order, with their keys and values.
    fn leaf_items(&self, leaf: &super::node::Node) -> Result<Vec<Item>> {
        let fence = if leaf.sibling != 0 { Some(self.fence_of(leaf.sibling)?) } else { None };
        let mut out = Vec::with_capacity(leaf.entries.len());
        for e in &leaf.entries {
            let key = self.record_key(e.ptr)?;
            if let Some((p, r)) = fence {
                if self.cmp_key(key, super::layout::prefix_of(key), p, r)? != std::cmp::Ordering::Less {
                    break;
                }
            }
            out.push((key.to_vec(), self.record_value(e.ptr)?));
        }
        Ok(out)
    }
}

/// An iterator that reads a leaf at a time into a buffer.
trait LeafBuffered {
    /// The buffer and whether the range is exhausted.
    fn parts(&mut self) -> (&mut VecDeque<Item>, &mut bool);
    /// Reads the next leaf into the buffer (or marks the end).
    fn fill(&mut self) -> Result<()>;
}

/// The next item of `it`, reading leaves as the buffer empties; after an
/// error, the end.
fn next_buffered(it: &mut impl LeafBuffered) -> Option<Result<Item>> {
    loop {
        let (buf, done) = it.parts();
        if let Some(x) = buf.pop_front() {
            return Some(Ok(x));
        }
        if *done {
            return None;
        }
        if let Err(e) = it.fill() {
            *it.parts().1 = true;
            return Some(Err(e));
        }
    }
}

/// Ascending iterator over a key range (see [`super::PmTree::range`]).
pub(crate) struct RangeIter {
    tree: Arc<Inner>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// Next leaf to read (0 = none); `None` before the first descent.
    next: Option<u64>,
    buf: VecDeque<Item>,
    last: Option<Vec<u8>>,
    done: bool,
}

impl RangeIter {
    pub(super) fn new(tree: Arc<Inner>, start: Bound<&[u8]>, end: Bound<&[u8]>) -> RangeIter {
        RangeIter {
            tree,
            start: owned(start),
            end: owned(end),
            next: None,
            buf: VecDeque::new(),
            last: None,
            done: false,
        }
    }
}

impl LeafBuffered for RangeIter {
    fn parts(&mut self) -> (&mut VecDeque<Item>, &mut bool) {
        (&mut self.buf, &mut self.done)
    }

    fn fill(&mut self) -> Result<()> {
        let leaf = match self.next {
            None => {
                let k: &[u8] = match &self.start {
                    Bound::Included(k) | Bound::Excluded(k) => k,
                    Bound::Unbounded => b"",
                };
                self.tree.descend(Target::AtLeast(k), 0, |t, off| t.snapshot(off))?.leaf
            }
            Some(0) => {
                self.done = true;
                return Ok(());
            }
            Some(off) => self.tree.snapshot(off)?,
        };
        self.next = Some(leaf.sibling);
        for (k, v) in self.tree.leaf_items(&leaf)? {
            if !after_start(&k, &self.start) || self.last.as_ref().is_some_and(|l| k <= *l) {
                continue;
            }
            if !before_end(&k, &self.end) {
                self.done = true;
                break;
            }
            self.last = Some(k.clone());
            self.buf.push_back((k, v));
        }
        Ok(())
    }
}

impl Iterator for RangeIter {
    type Item = Result<Item>;

    fn next(&mut self) -> Option<Self::Item> {
        next_buffered(self)
    }
}

/// Descending iterator over a key range (see [`super::PmTree::range_rev`]).
#[allow(dead_code)] // see PmTree::range_rev
pub(crate) struct RevRangeIter {
    tree: Arc<Inner>,
    start: Bound<Vec<u8>>,
    /// Upper bound of what is still to come.
    upper: Bound<Vec<u8>>,
    buf: VecDeque<Item>,
    done: bool,
}

#[allow(dead_code)] // see PmTree::range_rev
impl RevRangeIter {
    pub(super) fn new(tree: Arc<Inner>, start: Bound<&[u8]>, end: Bound<&[u8]>) -> RevRangeIter {
        RevRangeIter { tree, start: owned(start), upper: owned(end), buf: VecDeque::new(), done: false }
    }
}

impl LeafBuffered for RevRangeIter {
    fn parts(&mut self) -> (&mut VecDeque<Item>, &mut bool) {
        (&mut self.buf, &mut self.done)
    }

    fn fill(&mut self) -> Result<()> {
        let t = match &self.upper {
            Bound::Included(k) => Target::AtLeast(k),
            Bound::Excluded(k) => Target::Below(k),
            Bound::Unbounded => Target::Max,
        };
        let leaf = self.tree.descend(t, 0, |t, off| t.snapshot(off))?.leaf;
        let items = self.tree.leaf_items(&leaf)?;
        for (k, v) in items.into_iter().rev() {
            if !before_end(&k, &self.upper) {
                continue;
            }
            if !after_start(&k, &self.start) {
                self.done = true;
                break;
            }
            self.buf.push_back((k, v));
        }
        // Everything at or above the leaf's fence is done; continue below it.
        if leaf.low_rec == 0 {
            self.done = true;
        } else if !self.done {
            self.upper = Bound::Excluded(self.tree.record_key(leaf.low_rec)?.to_vec());
        }
        Ok(())
    }
}

impl Iterator for RevRangeIter {
    type Item = Result<Item>;

    fn next(&mut self) -> Option<Self::Item> {
        next_buffered(self)
    }
}
