//! A concurrent skiplist of internal keys, without unsafe code.
//!
//! Nodes live in an append-only concurrent vector (`boxcar`) and link to
//! each other by index, so an iterator is just `(Arc<list>, index)`.
//! Inserts are lock-free (CAS on the predecessor's link, bottom level
//! first); reads never block. Nodes are never removed: a memtable is
//! dropped whole once flushed.
//!
//! Ordering: a node is fully built before it is pushed, and its index is
//! published by a `Release` CAS; readers load links with `Acquire`, so a
//! reader that reaches a node sees its key and value.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::key::compare_internal;

const MAX_HEIGHT: usize = 12;
/// Index of the head sentinel; also "null" in links (nothing links to the head).
const HEAD: u32 = 0;
const NIL: u32 = 0;

/// One entry: an internal key and where its value lives in PM.
pub(crate) struct Node {
    pub key: Box<[u8]>,
    pub value_off: u64,
    pub value_len: u32,
    next: Box<[AtomicU32]>,
}

impl Node {
    fn next(&self, level: usize) -> u32 {
        self.next.get(level).map(|a| a.load(Ordering::Acquire)).unwrap_or(NIL)
    }
}

/// The skiplist.
pub(crate) struct SkipList {
    nodes: boxcar::Vec<Node>,
    height: AtomicUsize,
}

impl SkipList {
    pub fn new() -> SkipList {
        let nodes = boxcar::Vec::new();
        let head = Node {
            key: Box::new([]),
            value_off: 0,
            value_len: 0,
            next: (0..MAX_HEIGHT).map(|_| AtomicU32::new(NIL)).collect(),
        };
        nodes.push(head);
        SkipList { nodes, height: AtomicUsize::new(1) }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.nodes.count().saturating_sub(1)
    }

    pub fn node(&self, i: u32) -> Option<&Node> {
        if i == HEAD {
            return None;
        }
        self.nodes.get(i as usize)
    }

    fn head(&self) -> Option<&Node> {
        self.nodes.get(HEAD as usize)
    }

    fn link(&self, i: u32, level: usize) -> u32 {
        self.nodes.get(i as usize).map(|n| n.next(level)).unwrap_or(NIL)
    }

    fn key_of(&self, i: u32) -> &[u8] {
        self.node(i).map(|n| &*n.key).unwrap_or(&[])
    }

    fn random_height() -> usize {
        // Branching factor 4, as LevelDB.
        let r: u32 = rand::random();
        let mut h = 1;
        let mut bits = r;
        while h < MAX_HEIGHT && bits & 3 == 0 {
            h += 1;
            bits >>= 2;
        }
        h
    }

    /// Inserts a key that is not already present (internal keys are unique).
    pub fn insert(&self, key: Box<[u8]>, value_off: u64, value_len: u32) {
        let height = Self::random_height();
        let node = Node {
            key,
            value_off,
            value_len,
            next: (0..height).map(|_| AtomicU32::new(NIL)).collect(),
        };
        let idx = self.nodes.push(node) as u32;
        let mut cur = self.height.load(Ordering::Relaxed);
        while height > cur {
            match self.height.compare_exchange_weak(cur, height, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(h) => cur = h,
            }
        }
        let Some(new) = self.nodes.get(idx as usize) else { return };
        let key = &*new.key;
        // Find predecessors at every level, top-down, once.
        let mut prev = [HEAD; MAX_HEIGHT];
        let mut next = [NIL; MAX_HEIGHT];
        let top = self.height.load(Ordering::Relaxed).max(height);
        let mut x = HEAD;
        for level in (0..top).rev() {
            let (p, n) = self.find_splice_at(key, x, level);
            prev[level] = p;
            next[level] = n;
            x = p;
        }
        for level in 0..height {
            loop {
                if let Some(slot) = new.next.get(level) {
                    slot.store(next[level], Ordering::Relaxed);
                }
                let Some(p) = self.nodes.get(prev[level] as usize) else { break };
                let Some(link) = p.next.get(level) else { break };
                match link.compare_exchange(next[level], idx, Ordering::Release, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(_) => {
                        // Someone inserted here; walk forward from our predecessor.
                        let (p2, n2) = self.find_splice_at(key, prev[level], level);
                        prev[level] = p2;
                        next[level] = n2;
                    }
                }
            }
        }
    }

    /// From `start` (whose key is < `key`, or the head), the last node at
    /// `level` with key < `key` and its successor.
    fn find_splice_at(&self, key: &[u8], start: u32, level: usize) -> (u32, u32) {
        let mut x = start;
        loop {
            let n = self.link(x, level);
            if n != NIL && compare_internal(self.key_of(n), key) == CmpOrdering::Less {
                x = n;
            } else {
                return (x, n);
            }
        }
    }

    /// First node with key >= `key`, or NIL.
    pub fn seek(&self, key: &[u8]) -> u32 {
        let mut x = HEAD;
        let top = self.height.load(Ordering::Relaxed);
        let mut found = NIL;
        for level in (0..top).rev() {
            // Keep the successor seen by the search itself: re-reading the
            // link afterwards could return a node inserted meanwhile that
            // sorts before `key`.
            (x, found) = self.find_splice_at(key, x, level);
        }
        found
    }

    /// Last node with key < `key`, or NIL.
    pub fn seek_before(&self, key: &[u8]) -> u32 {
        let mut x = HEAD;
        let top = self.height.load(Ordering::Relaxed);
        for level in (0..top).rev() {
            x = self.find_splice_at(key, x, level).0;
        }
        x
    }

    /// First node, or NIL.
    pub fn first(&self) -> u32 {
        self.head().map(|h| h.next(0)).unwrap_or(NIL)
    }

    /// Last node, or NIL.
    pub fn last(&self) -> u32 {
        let mut x = HEAD;
        let top = self.height.load(Ordering::Relaxed);
        for level in (0..top).rev() {
            loop {
                let n = self.link(x, level);
                if n == NIL {
                    break;
                }
                x = n;
            }
        }
        x
    }

    /// Successor of node `i` at the bottom level.
    pub fn next_of(&self, i: u32) -> u32 {
        self.link(i, 0)
    }

    /// Predecessor of node `i` (by search), or NIL.
    pub fn prev_of(&self, i: u32) -> u32 {
        match self.node(i) {
            Some(n) => self.seek_before(&n.key),
            None => NIL,
        }
    }

    /// Whether `i` is a real node.
    pub fn is_node(i: u32) -> bool {
        i != NIL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};
    use std::sync::Arc;

    fn keys_in_order(l: &SkipList) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut x = l.first();
        while SkipList::is_node(x) {
            out.push(l.node(x).unwrap().key.to_vec());
            x = l.next_of(x);
        }
        out
    }

    #[test]
    fn sorted_seek_and_reverse() {
        let l = SkipList::new();
        let mut want = Vec::new();
        for i in (0..500u32).rev() {
            let k = internal_key(format!("k{:05}", i * 7 % 500).as_bytes(), i as u64, Kind::Put);
            want.push(k.clone());
            l.insert(k.into_boxed_slice(), i as u64, 0);
        }
        want.sort_by(|a, b| compare_internal(a, b));
        assert_eq!(keys_in_order(&l), want);
        assert_eq!(l.len(), 500);
        let probe = internal_key(b"k00100", u64::MAX >> 8, Kind::Put);
        let x = l.seek(&probe);
        assert_eq!(crate::key::user_key(&l.node(x).unwrap().key), b"k00100");
        // Walk backwards from the end.
        let mut back = Vec::new();
        let mut x = l.last();
        while SkipList::is_node(x) {
            back.push(l.node(x).unwrap().key.to_vec());
            x = l.prev_of(x);
        }
        back.reverse();
        assert_eq!(back, want);
    }

    #[test]
    fn seek_during_inserts_never_returns_a_smaller_key() {
        // Newer versions of one key sort first; a reader seeking (k, s) must
        // never get a version newer than s while a writer keeps inserting.
        let l = Arc::new(SkipList::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let w = {
            let l = l.clone();
            std::thread::spawn(move || {
                for s in 1..20_000u64 {
                    l.insert(internal_key(b"k", s, Kind::Put).into_boxed_slice(), s, 0);
                }
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (l, stop) = (l.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let s = 1 + n % 19_000;
                        let x = l.seek(&internal_key(b"k", s, Kind::Put));
                        if let Some(node) = l.node(x) {
                            assert!(node.value_off <= s, "seek({s}) returned version {}", node.value_off);
                        }
                        n += 7;
                    }
                })
            })
            .collect();
        w.join().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
    }

    #[test]
    fn concurrent_inserts_are_all_present_and_ordered() {
        let l = Arc::new(SkipList::new());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let k = internal_key(format!("{:08}", i * 4 + t).as_bytes(), i, Kind::Put);
                        l.insert(k.into_boxed_slice(), i, 0);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let got = keys_in_order(&l);
        assert_eq!(got.len(), 8000);
        assert!(got.windows(2).all(|w| compare_internal(&w[0], &w[1]) == CmpOrdering::Less));
    }
}
