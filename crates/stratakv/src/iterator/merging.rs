//! Merges several sorted sources into one, in both directions.
//!
//! Children are ordered newest source first; on equal keys (which a
//! consistent tree never has) the newer child wins.

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
    current: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// Merges `children` (newest source first).
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIterator {
        MergingIterator { children, current: None, direction: Direction::Forward }
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let bk = self.children.get(b).map(|x| x.key()).unwrap_or(&[]);
                    if compare_internal(c.key(), bk) == Ordering::Less {
                        Some(i)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let bk = self.children.get(b).map(|x| x.key()).unwrap_or(&[]);
                    if compare_internal(c.key(), bk) == Ordering::Greater {
                        Some(i)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        self.current = best;
    }

    fn cur(&mut self) -> Option<&mut Box<dyn InternalIterator>> {
        let i = self.current?;
        self.children.get_mut(i)
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.and_then(|i| self.children.get(i)).map(|c| c.valid()).unwrap_or(false)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_first()?;
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_last()?;
        }
        self.direction = Direction::Reverse;
        self.find_largest();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for c in &mut self.children {
            c.seek(target)?;
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let Some(cur) = self.current else { return Ok(()) };
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
        }
        if let Some(c) = self.cur() {
            c.next()?;
        }
        self.find_smallest();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let Some(cur) = self.current else { return Ok(()) };
        if self.direction != Direction::Reverse {
            // Every other child must be positioned before the current key.
            let key = self.key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key)?;
                if c.valid() {
                    c.prev()?;
                } else {
                    c.seek_to_last()?;
                }
            }
            self.direction = Direction::Reverse;
        }
        if let Some(c) = self.cur() {
            c.prev()?;
        }
        self.find_largest();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current.and_then(|i| self.children.get(i)).map(|c| c.key()).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.current.and_then(|i| self.children.get(i)).map(|c| c.value()).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iterator::VecIterator;
    use crate::key::{internal_key, Kind};

    fn src(keys: &[(&str, u64)]) -> Box<dyn InternalIterator> {
        let mut v: Vec<_> = keys
            .iter()
            .map(|(k, s)| (internal_key(k.as_bytes(), *s, Kind::Put), k.as_bytes().to_vec()))
            .collect();
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
        let mut m = MergingIterator::new(vec![
            src(&[("a", 5), ("c", 6), ("e", 7)]),
            src(&[("b", 1), ("c", 2), ("f", 3)]),
        ]);
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
    }
}
