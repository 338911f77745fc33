//! Merges several sorted sources into one, in both directions.
//!
//! Children are ordered newest source first; on equal keys (which a
//! consistent tree never has) the newer child wins. A binary heap of the
//! valid children (smallest key on top going forward, largest going
//! backward) makes each step O(log n) comparisons, which matters with the
//! matrix's many rows.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key::compare_internal;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// The merge of several internal iterators.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Indices of valid children, heap-ordered for `direction`.
    heap: Vec<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// Merges `children` (newest source first).
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIterator {
        MergingIterator { children, heap: Vec::new(), direction: Direction::Forward }
    }

    /// Whether child `a` should be above child `b` in the heap.
    fn before(&self, a: usize, b: usize) -> bool {
        let (ka, kb) = match (self.children.get(a), self.children.get(b)) {
            (Some(x), Some(y)) => (x.key(), y.key()),
            _ => return a < b,
        };
        match (compare_internal(ka, kb), self.direction) {
            (Ordering::Less, Direction::Forward) | (Ordering::Greater, Direction::Reverse) => true,
            (Ordering::Equal, _) => a < b,
            _ => false,
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                return;
            }
            let r = l + 1;
            let mut best = l;
            if r < n && self.before(self.heap[r], self.heap[l]) {
                best = r;
            }
            if self.before(self.heap[best], self.heap[i]) {
                self.heap.swap(best, i);
                i = best;
            } else {
                return;
            }
        }
    }

    fn rebuild(&mut self) {
        self.heap = (0..self.children.len()).filter(|&i| self.children[i].valid()).collect();
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    /// After the top child moved: restore the heap.
    fn fix_top(&mut self) {
        let Some(&top) = self.heap.first() else { return };
        if self.children.get(top).map(|c| c.valid()).unwrap_or(false) {
            self.sift_down(0);
        } else {
            let last = self.heap.len() - 1;
            self.heap.swap(0, last);
            self.heap.pop();
            self.sift_down(0);
        }
    }

    /// Index (in the order given to `new`) of the child the cursor is on.
    pub fn current(&self) -> Option<usize> {
        self.heap.first().copied()
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current().and_then(|i| self.children.get(i)).map(|c| c.valid()).unwrap_or(false)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_first()?;
        }
        self.direction = Direction::Forward;
        self.rebuild();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_last()?;
        }
        self.direction = Direction::Reverse;
        self.rebuild();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for c in &mut self.children {
            c.seek(target)?;
        }
        self.direction = Direction::Forward;
        self.rebuild();
        Ok(())
    }

    /// Each child's own `seek_for_prev` (a PM list's is one search).
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        for c in &mut self.children {
            c.seek_for_prev(target)?;
        }
        self.direction = Direction::Reverse;
        self.rebuild();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let Some(cur) = self.current() else { return Ok(()) };
        if self.direction != Direction::Forward {
            // Every other child must be positioned after the current key.
            let key = self.key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key)?;
                if c.valid() && compare_internal(c.key(), &key) == Ordering::Equal {
                    c.next()?;
                }
            }
            self.direction = Direction::Forward;
            if let Some(c) = self.children.get_mut(cur) {
                c.next()?;
            }
            self.rebuild();
            return Ok(());
        }
        if let Some(c) = self.children.get_mut(cur) {
            c.next()?;
        }
        self.fix_top();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let Some(cur) = self.current() else { return Ok(()) };
        if self.direction != Direction::Reverse {
            // Every other child must be positioned before the current key:
            // at the last entry <= it, and one step back if that is the
            // key itself. Each move lands before where it aims even if the
            // child changes in between (a PM list a merge links nodes
            // into), where a seek and a step back from the entry it found
            // could land past the key.
            let key = self.key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek_for_prev(&key)?;
                if c.valid() && compare_internal(c.key(), &key) == Ordering::Equal {
                    c.prev()?;
                }
            }
            self.direction = Direction::Reverse;
            if let Some(c) = self.children.get_mut(cur) {
                c.prev()?;
            }
            self.rebuild();
            return Ok(());
        }
        if let Some(c) = self.children.get_mut(cur) {
            c.prev()?;
        }
        self.fix_top();
        Ok(())
    }

    fn log_record(&self) -> Result<Option<crate::batch::RecordLoc>> {
        match self.current().and_then(|i| self.children.get(i)) {
            Some(c) => c.log_record(),
            None => Ok(None),
        }
    }

    fn key(&self) -> &[u8] {
        self.current().and_then(|i| self.children.get(i)).map(|c| c.key()).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.current().and_then(|i| self.children.get(i)).map(|c| c.value()).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iterator::VecIterator;
    use crate::key::{internal_key, Kind};
    use rand::{Rng, SeedableRng};

    fn src(keys: &[(&str, u64)]) -> Box<dyn InternalIterator> {
        let mut v: Vec<_> =
            keys.iter().map(|(k, s)| (internal_key(k.as_bytes(), *s, Kind::Put), k.as_bytes().to_vec())).collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        Box::new(VecIterator::new(v))
    }

    fn all_forward(m: &mut MergingIterator) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        m.seek_to_first().unwrap();
        while m.valid() {
            out.push(m.key().to_vec());
            m.next().unwrap();
        }
        out
    }

    #[test]
    fn merges_and_switches_direction() {
        let mut m =
            MergingIterator::new(vec![src(&[("a", 5), ("c", 6), ("e", 7)]), src(&[("b", 1), ("c", 2), ("f", 3)])]);
        let fwd = all_forward(&mut m);
        assert_eq!(fwd.len(), 6);
        assert!(fwd.windows(2).all(|w| compare_internal(&w[0], &w[1]) == Ordering::Less));
        // Reverse from the end.
        let mut back = Vec::new();
        m.seek_to_last().unwrap();
        while m.valid() {
            back.push(m.key().to_vec());
            m.prev().unwrap();
        }
        back.reverse();
        assert_eq!(back, fwd);
        // Zig-zag: seek to c@6, prev -> b, next -> c@6, next -> c@2.
        m.seek(&internal_key(b"c", 6, Kind::Put)).unwrap();
        assert_eq!(m.key(), internal_key(b"c", 6, Kind::Put));
        m.prev().unwrap();
        assert_eq!(m.key(), internal_key(b"b", 1, Kind::Put));
        m.next().unwrap();
        assert_eq!(m.key(), internal_key(b"c", 6, Kind::Put));
        m.next().unwrap();
        assert_eq!(m.key(), internal_key(b"c", 2, Kind::Put));
        m.prev().unwrap();
        assert_eq!(m.key(), internal_key(b"c", 6, Kind::Put));
        // The last entry at or before a target, and none before the first.
        m.seek_for_prev(&internal_key(b"c", 4, Kind::Put)).unwrap();
        assert_eq!(m.key(), internal_key(b"c", 6, Kind::Put));
        m.seek_for_prev(&internal_key(b"c", 2, Kind::Put)).unwrap();
        assert_eq!(m.key(), internal_key(b"c", 2, Kind::Put));
        m.prev().unwrap();
        assert_eq!(m.key(), internal_key(b"c", 6, Kind::Put));
        m.seek_for_prev(&internal_key(b"z", 0, Kind::Delete)).unwrap();
        assert_eq!(m.key(), internal_key(b"f", 3, Kind::Put));
        m.seek_for_prev(&internal_key(b"a", 6, Kind::Put)).unwrap();
        assert!(!m.valid());
        m.seek_for_prev(&internal_key(b"a", 5, Kind::Put)).unwrap();
        assert_eq!(m.key(), internal_key(b"a", 5, Kind::Put));
        m.next().unwrap();
        assert_eq!(m.key(), internal_key(b"b", 1, Kind::Put));
    }

    #[test]
    fn many_children_random_walk_matches_sorted_union() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let mut all = Vec::new();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for c in 0..25u64 {
            let mut v = Vec::new();
            for _ in 0..rng.gen_range(0..40) {
                let k = internal_key(
                    format!("{:04}", rng.gen_range(0..500)).as_bytes(),
                    c * 1000 + v.len() as u64,
                    Kind::Put,
                );
                v.push((k.clone(), vec![]));
                all.push(k);
            }
            v.sort_by(|a, b| compare_internal(&a.0, &b.0));
            children.push(Box::new(VecIterator::new(v)));
        }
        all.sort_by(|a, b| compare_internal(a, b));
        let mut m = MergingIterator::new(children);
        assert_eq!(all_forward(&mut m), all);
        // Random zig-zag against positions in the sorted union.
        m.seek_to_first().unwrap();
        let mut pos = 0usize;
        for _ in 0..2000 {
            if rng.gen_bool(0.5) && pos + 1 < all.len() {
                m.next().unwrap();
                pos += 1;
            } else if pos > 0 {
                m.prev().unwrap();
                pos -= 1;
            }
            assert_eq!(m.key(), &all[pos][..], "at {pos}");
        }
        // seek_for_prev to random targets, then a step each way.
        for _ in 0..500 {
            let t =
                internal_key(format!("{:04}", rng.gen_range(0..510)).as_bytes(), rng.gen_range(0..26_000), Kind::Put);
            m.seek_for_prev(&t).unwrap();
            let Some(at) = all.iter().rposition(|k| compare_internal(k, &t) != Ordering::Greater) else {
                assert!(!m.valid());
                continue;
            };
            assert_eq!(m.key(), &all[at][..]);
            if rng.gen_bool(0.5) {
                m.next().unwrap();
                assert_eq!(m.key(), all.get(at + 1).map_or(&[][..], |k| &k[..]));
            } else {
                m.prev().unwrap();
                assert_eq!(m.key(), at.checked_sub(1).map_or(&[][..], |i| &all[i][..]));
            }
        }
    }
}
