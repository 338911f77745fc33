//! A concurrent skiplist of internal keys over a word arena, without unsafe code.
//!
//! Nodes are runs of `AtomicU64` words in an append-only arena of chunks and
//! link to each other by word index, so an iterator is just `(Arc<list>,
//! index)` and a search touches one small, contiguous node per step (the
//! difference between one cache miss per step and three). Atomic loads of
//! words compile to plain loads on x86, so the arena costs nothing over raw
//! memory.
//!
//! ```text
//! word 0      key length (bits 0..32) | height (bits 32..40)
//! word 1      value offset in PM
//! word 2      value length (bits 0..32) | distance back from the value to
//!             the record's PM skiplist node, 0 for none (bits 32..64)
//! word 3..    links, one word per level: index of the next node (bits 0..32,
//!             0 = none) | distinction tag of the next node (bits 32..64)
//! then        the internal key, 8 bytes per word, little-endian
//! ```
//!
//! A link's tag says where the next node's user key parts from this node's
//! ([`order`]), so most search steps are decided without loading the next
//! node, and keys that share long prefixes (the members of one set, numeric
//! keys) are never compared from their first byte.
//!
//! Inserts are lock-free (CAS on the predecessor's link, bottom level
//! first); reads never block. Nodes are never removed: a memtable is
//! dropped whole once flushed.
//!
//! Ordering: a node's words are written before its index is published by a
//! `Release` CAS; readers load links with `Acquire`, so a reader that
//! reaches a node sees all of it.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::key::{key_trailer, user_key};
use order::{Pos, Step};

mod batch;
mod order;

const MAX_HEIGHT: usize = 12;
/// Index of the head node; also "null" in links (nothing links to the head).
const HEAD: u32 = 0;
const NIL: u32 = 0;
const HEADER_WORDS: usize = 3;
/// Most words per arena chunk (8 MiB), and fewest (128 KiB, more than the
/// largest node: a 64 KiB key at full height).
const MAX_CHUNK_WORDS: usize = 1 << 20;
const MIN_CHUNK_WORDS: usize = 1 << 14;
/// Most chunks an arena can have.
const MAX_CHUNKS: usize = 4096;

/// Append-only storage of words, addressed by a global word index.
struct Arena {
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
    chunk_words: usize,
    /// log2 of `chunk_words`: word lookups split an index with a shift and
    /// a mask (a division here, a few per search step, showed in profiles).
    chunk_shift: u32,
    /// (chunk, next free word in it), advanced under the lock.
    cursor: Mutex<(usize, usize)>,
}

impl Arena {
    /// An arena of chunks of `chunk_words` words, rounded up to a power of two.
    fn new(chunk_words: usize) -> Arena {
        let chunk_words = chunk_words.next_power_of_two();
        Arena {
            chunks: (0..MAX_CHUNKS).map(|_| OnceLock::new()).collect(),
            chunk_words,
            chunk_shift: chunk_words.trailing_zeros(),
            cursor: Mutex::new((0, 0)),
        }
    }

    fn chunk(&self, c: usize) -> Option<&[AtomicU64]> {
        self.chunks.get(c).and_then(|l| l.get()).map(|b| &b[..])
    }

    /// Reserves `n` contiguous words; returns the index of the first.
    fn alloc(&self, n: usize) -> Option<u32> {
        if n > self.chunk_words {
            return None;
        }
        let mut cur = self.cursor.lock();
        let (mut c, mut used) = *cur;
        if self.chunk(c).map(|ch| used + n > ch.len()).unwrap_or(true) {
            if self.chunk(c).is_some() {
                c += 1;
            }
            used = 0;
            let slot = self.chunks.get(c)?;
            let _ = slot.set((0..self.chunk_words).map(|_| AtomicU64::new(0)).collect());
        }
        let start = c * self.chunk_words + used;
        *cur = (c, used + n);
        u32::try_from(start).ok()
    }

    fn word(&self, i: u32) -> Option<&AtomicU64> {
        let i = i as usize;
        self.chunk(i >> self.chunk_shift).and_then(|ch| ch.get(i & (self.chunk_words - 1)))
    }

    fn load(&self, i: u32) -> u64 {
        self.word(i).map(|w| w.load(Ordering::Relaxed)).unwrap_or(0)
    }

    fn store(&self, i: u32, v: u64) {
        if let Some(w) = self.word(i) {
            w.store(v, Ordering::Relaxed);
        }
    }

    fn words(&self, start: u32, n: usize) -> &[AtomicU64] {
        let s = start as usize;
        let off = s & (self.chunk_words - 1);
        self.chunk(s >> self.chunk_shift).and_then(|ch| ch.get(off..off + n)).unwrap_or(&[])
    }
}

/// A copy of one node's key and value location (for tests).
#[cfg(test)]
pub(crate) struct Node {
    key: Vec<u8>,
    value_off: u64,
    value_len: u32,
}

#[cfg(test)]
impl Node {
    /// The internal key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// PM offset of the value.
    pub fn value_off(&self) -> u64 {
        self.value_off
    }

    /// Value length.
    pub fn value_len(&self) -> u32 {
        self.value_len
    }
}

/// The skiplist.
pub(crate) struct SkipList {
    arena: Arena,
    height: AtomicUsize,
    len: AtomicUsize,
}

impl SkipList {
    /// A skiplist whose arena grows in chunks sized for about `expected_bytes` of nodes.
    pub fn new(expected_bytes: usize) -> SkipList {
        let words = (expected_bytes / 8).next_power_of_two().clamp(MIN_CHUNK_WORDS, MAX_CHUNK_WORDS);
        let list = SkipList { arena: Arena::new(words), height: AtomicUsize::new(1), len: AtomicUsize::new(0) };
        // The head: no key, every level. It is node 0 by construction.
        if let Some(h) = list.arena.alloc(HEADER_WORDS + MAX_HEIGHT) {
            list.arena.store(h, (MAX_HEIGHT as u64) << 32);
        }
        list
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn height_of(&self, n: u32) -> usize {
        ((self.arena.load(n) >> 32) & 0xff) as usize
    }

    fn key_len(&self, n: u32) -> usize {
        (self.arena.load(n) & 0xffff_ffff) as usize
    }

    /// A copy of node `i` (None for the head or an invalid index).
    #[cfg(test)]
    pub fn node(&self, i: u32) -> Option<Node> {
        self.with_node(i, |k, value_off, value_len| Node { key: k.to_vec(), value_off, value_len })
    }

    /// The distance back from node `i`'s value to its record's PM skiplist
    /// node (high half of word 2; 0: none).
    pub fn node_back(&self, i: u32) -> u32 {
        self.arena.word(i + 2).map_or(0, |w| (w.load(Ordering::Relaxed) >> 32) as u32)
    }

    /// Calls `f` with node `i`'s internal key, value offset and value length
    /// (None for the head or an invalid index). Short keys are copied to the
    /// stack: point lookups and index updates make one such call per write,
    /// and a heap allocation there showed in profiles.
    pub fn with_node<R>(&self, i: u32, f: impl FnOnce(&[u8], u64, u32) -> R) -> Option<R> {
        if i == HEAD {
            return None;
        }
        let h = self.height_of(i);
        let len = self.key_len(i);
        let nwords = len.div_ceil(8);
        let words = self.arena.words(i, HEADER_WORDS + h + nwords);
        let (value_off, value_len) = match (words.get(1), words.get(2)) {
            (Some(o), Some(l)) => (o.load(Ordering::Relaxed), l.load(Ordering::Relaxed) as u32),
            _ => return None,
        };
        let key_words = words.get(HEADER_WORDS + h..)?;
        let mut stack = [0u8; 64];
        let mut heap = Vec::new();
        let buf: &mut [u8] = if nwords * 8 <= stack.len() {
            &mut stack[..nwords * 8]
        } else {
            heap.resize(nwords * 8, 0);
            &mut heap
        };
        for (dst, w) in buf.chunks_exact_mut(8).zip(key_words) {
            dst.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        Some(f(buf.get(..len)?, value_off, value_len))
    }

    fn link(&self, i: u32, level: usize) -> u32 {
        self.link_word(i, level) as u32
    }

    /// The arena word holding node `i`'s link at `level`.
    fn link_slot(&self, i: u32, level: usize) -> Option<&AtomicU64> {
        self.arena.word(i + (HEADER_WORDS + level) as u32)
    }

    /// The whole link word (next index and the top half of its prefix).
    fn link_word(&self, i: u32, level: usize) -> u64 {
        match self.link_slot(i, level) {
            Some(w) => w.load(Ordering::Acquire),
            None => NIL as u64,
        }
    }

    /// Full internal-key comparison of node `n` with `probe`, read straight
    /// from the arena words, and the common prefix of their user keys. The
    /// first `from` bytes of the user keys are known to agree and are
    /// skipped (the members of one big hash share a long prefix).
    fn cmp_key(&self, n: u32, probe: &[u8], from: u32) -> (CmpOrdering, u32) {
        let len = self.key_len(n);
        let kstart = n + (HEADER_WORDS + self.height_of(n)) as u32;
        let words = self.arena.words(kstart, len.div_ceil(8));
        let byte_words = |i: usize| words.get(i).map(|w| w.load(Ordering::Relaxed)).unwrap_or(0).to_le_bytes();
        let (node_user, probe_user) = (len.saturating_sub(8), probe.len().saturating_sub(8));
        let common = node_user.min(probe_user);
        // Eight bytes at a time as big-endian numbers, the last step masked
        // to the bytes both user keys have. Both keys have 8 bytes from any
        // `i < common` (the trailer follows the user key).
        let mut i = (from as usize).min(common) / 8 * 8;
        while i < common {
            let keep = u64::MAX << ((8 - (common - i).min(8)) * 8);
            let a = u64::from_be_bytes(byte_words(i / 8)) & keep;
            let b = probe.get(i..i + 8).and_then(|s| s.try_into().ok()).map_or(0, u64::from_be_bytes) & keep;
            if a != b {
                return (a.cmp(&b), (i + ((a ^ b).leading_zeros() / 8) as usize) as u32);
            }
            i += 8;
        }
        let lcp = common as u32;
        if node_user != probe_user {
            return (node_user.cmp(&probe_user), lcp);
        }
        // Same user key: the larger trailer (newer) sorts first.
        let mut t = [0u8; 8];
        for (j, b) in t.iter_mut().enumerate() {
            let k = node_user + j;
            *b = byte_words(k / 8)[k % 8];
        }
        (key_trailer(probe).cmp(&u64::from_le_bytes(t)), lcp)
    }

    /// The common prefix of node `n`'s user key with `up` (0 for the head).
    fn common_prefix_with(&self, n: u32, up: &[u8]) -> u32 {
        self.with_node(n, |k, _, _| order::common_prefix(user_key(k), up) as u32).unwrap_or(0)
    }

    /// `at` (a position found for probe `a`) as a position for probe `b`
    /// (user key `ub`), given the common prefix `f` of the two user keys.
    fn rebase(&self, at: Pos, f: u32, ub: &[u8]) -> Pos {
        let lcp = order::rebased(at.lcp, f).unwrap_or_else(|| self.common_prefix_with(at.node, ub));
        Pos { node: at.node, lcp }
    }

    fn random_height() -> usize {
        // Branching factor 4, as LevelDB (2 measured no faster on random keys).
        let mut bits: u32 = rand::random();
        let mut h = 1;
        while h < MAX_HEIGHT && bits & 3 == 0 {
            h += 1;
            bits >>= 2;
        }
        h
    }

    /// Inserts a key that is not already present (internal keys are unique)
    /// and returns its node. Returns None if the arena has no room (the
    /// memtable is far over budget).
    pub fn insert(&self, key: &[u8], value_off: u64, len_word: u64) -> Option<u32> {
        let (idx, height) = self.new_node(key, value_off, len_word)?;
        self.link_in(idx, key, height, &self.search(key));
        Some(idx)
    }

    /// Predecessors of a probe at every level, searched from the top.
    fn search(&self, key: &[u8]) -> [Pos; MAX_HEIGHT] {
        let mut prev = [Pos::HEAD; MAX_HEIGHT];
        let mut x = Pos::HEAD;
        for level in (0..self.height.load(Ordering::Relaxed)).rev() {
            x = self.find_splice_at(key, x, level).0;
            if let Some(p) = prev.get_mut(level) {
                *p = x;
            }
        }
        prev
    }

    /// Allocates and fills a node for `key` with a random height, raising
    /// the list's height to it; returns (node, height). The node is
    /// unreachable until [`SkipList::link_in`].
    fn new_node(&self, key: &[u8], value_off: u64, len_word: u64) -> Option<(u32, usize)> {
        let height = Self::random_height();
        let words = HEADER_WORDS + height + key.len().div_ceil(8);
        let idx = self.arena.alloc(words)?;
        self.arena.store(idx, key.len() as u64 | (height as u64) << 32);
        self.arena.store(idx + 1, value_off);
        self.arena.store(idx + 2, len_word);
        let kstart = idx + (HEADER_WORDS + height) as u32;
        for (i, chunk) in key.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.arena.store(kstart + i as u32, u64::from_le_bytes(w));
        }
        let mut cur = self.height.load(Ordering::Relaxed);
        while height > cur {
            match self.height.compare_exchange_weak(cur, height, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(h) => cur = h,
            }
        }
        Some((idx, height))
    }

    /// Links node `idx` (key `key`) into levels `0..height`, bottom first.
    /// `prev[level]` is a node with a smaller key (or the head) at each
    /// level; the search walks forward from it, so nodes inserted since it
    /// was found are passed correctly.
    fn link_in(&self, idx: u32, key: &[u8], height: usize, prev: &[Pos; MAX_HEIGHT]) {
        let up = user_key(key);
        for (level, &start) in prev.iter().enumerate().take(height) {
            let mut from = start;
            loop {
                let (p, n) = self.find_splice_at(key, from, level);
                let (Some(own), Some(link)) = (self.link_slot(idx, level), self.link_slot(p.node, level)) else {
                    break;
                };
                own.store(self.link_from_probe(up, p.lcp, n), Ordering::Relaxed);
                let to_self = u64::from(order::tag(p.lcp as usize, up)) << 32 | u64::from(idx);
                // Release: the node's words, written above and in new_node,
                // are visible to whoever follows this link.
                if link.compare_exchange(n, to_self, Ordering::Release, Ordering::Acquire).is_ok() {
                    break;
                }
                // Someone inserted here; walk forward from our predecessor.
                from = p;
            }
        }
        self.len.fetch_add(1, Ordering::Relaxed);
    }

    /// The link word for a new node (user key `up`) in front of the target
    /// of link word `w`, which the search left from a node at common prefix
    /// `e` with `up`. The tag is reused when it says the same of `up`;
    /// otherwise the target's key is read.
    fn link_from_probe(&self, up: &[u8], e: u32, w: u64) -> u64 {
        let n = w as u32;
        if n == NIL {
            return NIL as u64;
        }
        let t = (w >> 32) as u32;
        if order::tag_carries_over(t, e, up) {
            return w;
        }
        let tag = self
            .with_node(n, |k, _, _| {
                let uk = user_key(k);
                order::tag(order::common_prefix(up, uk), uk)
            })
            .unwrap_or(0);
        u64::from(tag) << 32 | u64::from(n)
    }

    /// The successor of `x` at `level`, as a position, if its key is < the
    /// probe.
    fn step(&self, probe: &[u8], x: Pos, level: usize) -> Option<Pos> {
        let w = self.link_word(x.node, level);
        self.below(w, probe, x.lcp)
    }

    /// Where link word `w`, followed from a node at common prefix `e` with
    /// the probe, leads if the node there is < the probe (decided from the
    /// link's tag when it can be).
    fn below(&self, w: u64, probe: &[u8], e: u32) -> Option<Pos> {
        let n = w as u32;
        if n == NIL {
            return None;
        }
        match order::decide((w >> 32) as u32, e, user_key(probe)) {
            Step::Below(lcp) => Some(Pos { node: n, lcp }),
            Step::Above => None,
            Step::Compare(from) => match self.cmp_key(n, probe, from) {
                (CmpOrdering::Less, lcp) => Some(Pos { node: n, lcp }),
                _ => None,
            },
        }
    }

    /// From `start` (whose key is < the probe, or the head), the last node at
    /// `level` with key < probe, and its link word at `level` (the successor).
    fn find_splice_at(&self, probe: &[u8], start: Pos, level: usize) -> (Pos, u64) {
        let mut x = start;
        loop {
            let w = self.link_word(x.node, level);
            match self.below(w, probe, x.lcp) {
                Some(next) => x = next,
                None => return (x, w),
            }
        }
    }

    /// First node with key >= `key`, or NIL.
    pub fn seek(&self, key: &[u8]) -> u32 {
        let mut x = Pos::HEAD;
        let top = self.height.load(Ordering::Relaxed);
        let mut found = NIL;
        for level in (0..top).rev() {
            // Keep the successor seen by the search itself: re-reading the
            // link afterwards could return a node inserted meanwhile that
            // sorts before `key`.
            let w;
            (x, w) = self.find_splice_at(key, x, level);
            found = w as u32;
        }
        found
    }

    /// Last node with key < `key`, or NIL.
    pub fn seek_before(&self, key: &[u8]) -> u32 {
        let mut x = Pos::HEAD;
        let top = self.height.load(Ordering::Relaxed);
        for level in (0..top).rev() {
            x = self.find_splice_at(key, x, level).0;
        }
        x.node
    }

    /// First node, or NIL.
    pub fn first(&self) -> u32 {
        self.link(HEAD, 0)
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
        self.with_node(i, |k, _, _| self.seek_before(k)).unwrap_or(NIL)
    }

    /// Whether `i` is a real node.
    pub fn is_node(i: u32) -> bool {
        i != NIL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::compare_internal;
    use crate::key::{internal_key, Kind};
    use std::sync::Arc;

    /// Runs `f(list, t)` on `n` threads at once; their results in thread order.
    fn on_threads<R: Send + 'static>(l: &Arc<SkipList>, n: u64, f: fn(&SkipList, u64) -> R) -> Vec<R> {
        let threads: Vec<_> = (0..n)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || f(&l, t))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    fn keys_in_order(l: &SkipList) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut x = l.first();
        while SkipList::is_node(x) {
            out.push(l.node(x).unwrap().key().to_vec());
            x = l.next_of(x);
        }
        out
    }

    #[test]
    fn with_node_sees_what_was_inserted() {
        let l = SkipList::new(1 << 16);
        let mut nodes = Vec::new();
        // Keys from 9 bytes (a 1-byte user key) to far over the 64-byte stack buffer.
        for (i, n) in [1usize, 7, 8, 9, 55, 56, 57, 64, 100, 300].into_iter().enumerate() {
            let uk: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
            let ik = internal_key(&uk, i as u64 + 1, Kind::Put);
            let (off, len) = (1000 + i as u64, 10 * i as u32);
            nodes.push((l.insert(&ik, off, len as u64).unwrap(), (ik, off, len)));
        }
        for (x, want) in &nodes {
            let seen = l.with_node(*x, |k, off, len| (k.to_vec(), off, len)).unwrap();
            assert_eq!(&seen, want);
        }
        assert!(l.with_node(HEAD, |_, _, _| ()).is_none());
    }

    #[test]
    fn sorted_seek_and_reverse() {
        let l = SkipList::new(1 << 20);
        let mut want = Vec::new();
        for i in (0..500u32).rev() {
            // Mix short keys, long keys and keys sharing long prefixes.
            let uk = match i % 3 {
                0 => format!("k{:05}", i * 7 % 500),
                1 => format!("a-long-shared-prefix-{:05}-{}", i * 7 % 500, "y".repeat(20)),
                _ => format!("{:03}", i % 97),
            };
            let k = internal_key(uk.as_bytes(), i as u64, Kind::Put);
            want.push(k.clone());
            l.insert(&k, i as u64, i as u64);
        }
        want.sort_by(|a, b| compare_internal(a, b));
        assert_eq!(keys_in_order(&l), want);
        assert_eq!(l.len(), 500);
        let probe = internal_key(b"k00100", u64::MAX >> 8, Kind::Put);
        let x = l.seek(&probe);
        let n = l.node(x).unwrap();
        assert_eq!(crate::key::user_key(n.key()), b"k00100");
        assert_eq!(n.value_off(), n.value_len() as u64);
        // Walk backwards from the end.
        let mut back = Vec::new();
        let mut x = l.last();
        while SkipList::is_node(x) {
            back.push(l.node(x).unwrap().key().to_vec());
            x = l.prev_of(x);
        }
        back.reverse();
        assert_eq!(back, want);
    }

    #[test]
    fn chunks_fill_and_roll_over() {
        let l = SkipList::new(1 << 20);
        // Big keys so that a few thousand nodes span several chunks.
        let big = "z".repeat(3000);
        for i in 0..4000u32 {
            let k = internal_key(format!("{i:06}{big}").as_bytes(), 1, Kind::Put);
            l.insert(&k, i as u64, 0);
        }
        let got = keys_in_order(&l);
        assert_eq!(got.len(), 4000);
        assert!(got.windows(2).all(|w| compare_internal(&w[0], &w[1]) == CmpOrdering::Less));
    }

    #[test]
    fn seek_during_inserts_never_returns_a_smaller_key() {
        // Newer versions of one key sort first; a reader seeking (k, s) must
        // never get a version newer than s while a writer keeps inserting.
        let l = Arc::new(SkipList::new(1 << 20));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let w = {
            let l = l.clone();
            std::thread::spawn(move || {
                for s in 1..20_000u64 {
                    l.insert(&internal_key(b"k", s, Kind::Put), s, 0);
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
                            assert!(node.value_off() <= s, "seek({s}) returned version {}", node.value_off());
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
        let l = Arc::new(SkipList::new(1 << 20));
        on_threads(&l, 4, |l, t| {
            for i in 0..2000u64 {
                let k = internal_key(format!("{:08}", i * 4 + t).as_bytes(), i, Kind::Put);
                l.insert(&k, i, 0);
            }
        });
        let got = keys_in_order(&l);
        assert_eq!(got.len(), 8000);
        assert!(got.windows(2).all(|w| compare_internal(&w[0], &w[1]) == CmpOrdering::Less));
    }

    #[test]
    fn concurrent_random_keys_seek_like_a_sorted_set() {
        use rand::{Rng, SeedableRng};
        // Random leading bytes make the prefix halves carried in links differ,
        // so searches decide most steps from the link word alone.
        let l = Arc::new(SkipList::new(1 << 20));
        let mut want: Vec<Vec<u8>> = on_threads(&l, 4, |l, t| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(t);
            let mut mine = Vec::new();
            for i in 0..3000u64 {
                let mut uk = vec![rng.gen_range(0..4u8), rng.gen::<u8>(), rng.gen::<u8>()];
                uk.extend((0..rng.gen_range(0..6)).map(|_| rng.gen::<u8>()));
                let k = internal_key(&uk, i * 4 + t, Kind::Put);
                l.insert(&k, i, 0);
                mine.push(k);
            }
            mine
        })
        .concat();
        want.sort_by(|a, b| compare_internal(a, b));
        assert_eq!(keys_in_order(&l), want);
        let mut rng = rand::rngs::StdRng::seed_from_u64(99);
        for _ in 0..5000 {
            let uk: Vec<u8> = (0..rng.gen_range(0..5)).map(|_| rng.gen_range(0..5u8)).collect();
            let probe = internal_key(&uk, rng.gen_range(0..12_000), Kind::Put);
            let first = want.partition_point(|k| compare_internal(k, &probe) == CmpOrdering::Less);
            let got = l.node(l.seek(&probe)).map(|n| n.key().to_vec());
            assert_eq!(got.as_ref(), want.get(first));
        }
    }

    /// Asserts that `l` holds exactly the keys `want`, in order on every
    /// level (seek relies on the upper levels).
    fn holds_exactly(l: &SkipList, mut want: Vec<Vec<u8>>) {
        want.sort_by(|a, b| compare_internal(a, b));
        assert_eq!(l.len(), want.len());
        assert_eq!(keys_in_order(l), want);
        for k in &want {
            assert_eq!(l.node(l.seek(k)).map(|n| n.key().to_vec()).as_ref(), Some(k));
        }
    }

    #[test]
    fn batch_inserts_from_threads_agree_with_a_sorted_set() {
        use rand::{Rng, SeedableRng};
        // Two threads insert in batches of 1 to 80 keys (short keys, so a
        // batch often holds neighbours and versions of one user key, and
        // keys linked earlier in a batch sit inside later keys' splices);
        // a third inserts one key at a time.
        let l = Arc::new(SkipList::new(1 << 20));
        let want: Vec<Vec<u8>> = on_threads(&l, 3, |l, t| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(t + 10);
            let mut mine: Vec<Vec<u8>> = Vec::new();
            let mut seq = t;
            while mine.len() < 4000 {
                let n = if t == 2 { 1 } else { rng.gen_range(1..=80) };
                let batch: Vec<(Vec<u8>, u64)> = (0..n)
                    .map(|_| {
                        seq += 3;
                        let uk: Vec<u8> = (0..rng.gen_range(0..4)).map(|_| rng.gen_range(0..6u8)).collect();
                        (internal_key(&uk, seq, Kind::Put), seq)
                    })
                    .collect();
                let items: Vec<(&[u8], u64, u64)> = batch.iter().map(|(k, s)| (&k[..], *s, 7)).collect();
                let nodes = l.insert_batch(&items).unwrap();
                assert_eq!(nodes.len(), items.len());
                for (node, (k, s)) in nodes.iter().zip(&batch) {
                    let got = l.node(*node).unwrap();
                    assert_eq!((got.key(), got.value_off(), got.value_len()), (&k[..], *s, 7));
                }
                mine.extend(batch.into_iter().map(|(k, _)| k));
            }
            mine
        })
        .concat();
        holds_exactly(&l, want);
    }

    #[test]
    fn batches_of_record_fields_from_threads_agree_with_a_sorted_set() {
        use rand::{Rng, SeedableRng};
        // Batches like a server's: a record's fields in order (keys sharing
        // a long prefix, found by walking from the previous field), records
        // rewritten (older versions sit between a batch's keys), sometimes
        // out of order, with other threads linking into the same splices.
        let l = Arc::new(SkipList::new(1 << 20));
        let want: Vec<Vec<u8>> = on_threads(&l, 3, |l, t| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(t + 20);
            let mut mine: Vec<Vec<u8>> = Vec::new();
            let mut seq = t;
            while mine.len() < 6000 {
                let record = format!("record:{:05}:", rng.gen_range(0..40));
                let mut fields: Vec<u32> = (0..rng.gen_range(1..12)).map(|_| rng.gen_range(0..30)).collect();
                fields.sort_unstable();
                fields.dedup();
                if rng.gen_bool(0.2) {
                    fields.reverse();
                }
                let batch: Vec<(Vec<u8>, u64)> = fields
                    .iter()
                    .map(|f| {
                        seq += 3;
                        (internal_key(format!("{record}field{f}").as_bytes(), seq, Kind::Put), seq)
                    })
                    .collect();
                let items: Vec<(&[u8], u64, u64)> = batch.iter().map(|(k, s)| (&k[..], *s, 7)).collect();
                let nodes = l.insert_batch(&items).unwrap();
                for (node, (k, s)) in nodes.iter().zip(&batch) {
                    let got = l.node(*node).unwrap();
                    assert_eq!((got.key(), got.value_off()), (&k[..], *s));
                }
                mine.extend(batch.into_iter().map(|(k, _)| k));
            }
            mine
        })
        .concat();
        holds_exactly(&l, want);
    }

    #[test]
    fn word_compare_agrees_with_compare_internal() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Short alphabets and shared prefixes make ties, zero bytes and
        // length differences at every position common.
        let key = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
            let mut k = b"user:000".to_vec();
            k.truncate(rng.gen_range(0..=8));
            for _ in 0..rng.gen_range(0..20) {
                k.push([0u8, 1, b'a', 0xff][rng.gen_range(0..4)]);
            }
            internal_key(&k, rng.gen_range(0..4), Kind::Put)
        };
        let l = SkipList::new(1 << 20);
        let mut nodes = Vec::new();
        for i in 0..2000u64 {
            let k = key(&mut rng);
            if let Some(n) = l.insert(&k, i, 0) {
                nodes.push((n, k));
            }
        }
        for _ in 0..20000 {
            let (n, k) = &nodes[rng.gen_range(0..nodes.len())];
            let probe = key(&mut rng);
            assert_eq!(l.cmp_key(*n, &probe, 0).0, compare_internal(k, &probe), "{k:?} vs {probe:?}");
        }
    }
}
