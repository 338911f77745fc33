//! Fences: every few keys of a row in DRAM, so a search narrows its
//! window before it reads PM.

use std::cmp::Ordering;

use super::row::Row;
use crate::error::Result;
use crate::key::key_prefix;

/// Every `FENCE_EVERY`-th key of a row, in DRAM, after the row's common key
/// prefix and cut to `FENCE_BYTES`. The element prefixes stored in PM are
/// the first 8 key bytes, which tell nothing apart when keys share a long
/// prefix (the server's `key:000000…`, `H<len>user…` hash fields, any
/// `user:…` scheme); skipping the shared bytes and keeping more of the
/// rest makes the fences distinct again.
///
/// A fence is compared as (8-byte word, up to `FENCE_BYTES - 8` more bytes).
/// That map from keys is monotone (cutting and zero-padding never reorder
/// two keys), so a fence that compares below (above) a key's image
/// belongs to a smaller (larger) key; equal images decide nothing.
#[derive(Debug, Default)]
pub(super) struct Fences {
    /// The bytes all keys of the row begin with.
    common: Vec<u8>,
    /// `key_prefix(rest)` of elements 0, FENCE_EVERY, ..., where `rest` is
    /// the key after `common`.
    words: Vec<u64>,
    /// `rest[8..FENCE_BYTES]` of the same elements, back to back; fence
    /// `i`'s bytes are `tails[tail_starts[i]..tail_starts[i + 1]]`.
    tails: Vec<u8>,
    tail_starts: Vec<u32>,
}

/// Key bytes (after the row's common prefix) a fence keeps.
const FENCE_BYTES: usize = 32;

/// The bytes of a key's image after its 8-byte word (see [`Fences`]).
fn fence_tail(rest: &[u8]) -> &[u8] {
    rest.get(8..rest.len().min(FENCE_BYTES)).unwrap_or_default()
}

/// The first index in `0..n` where `pred` is false (`pred` holds on a prefix).
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Elements per fence: a lookup's search in PM spans at most about this many.
/// Each fence costs up to 40 bytes of DRAM; 8 rather than 16 made YCSB's
/// HGETALL-only workload C 6-18% faster (a seek reads about one PM key fewer
/// per row) and left redis-benchmark GET unchanged.
const FENCE_EVERY: u32 = 8;

impl Fences {
    /// DRAM bytes used.
    pub(super) fn bytes(&self) -> usize {
        self.common.len() + self.words.len() * 8 + self.tails.len() + self.tail_starts.len() * 4
    }

    /// The range `[lo, hi)` of a row of `n` elements that holds its first
    /// element with user key >= `ukey` (or `hi == n` if there is none).
    /// Every element before `lo` has a smaller user key and element `hi`,
    /// if any, a larger one, so a search for any internal key of `ukey`
    /// may stay inside the window.
    pub(super) fn window(&self, ukey: &[u8], n: u32) -> (u32, u32) {
        let common = &self.common;
        let head = &ukey[..ukey.len().min(common.len())];
        // Keys of the row all start with `common`: a key that does not sort
        // before or after all of them.
        match head.cmp(common) {
            Ordering::Less => return (0, 0),
            Ordering::Greater => return (n, n),
            Ordering::Equal if ukey.len() < common.len() => return (0, 0),
            Ordering::Equal => {}
        }
        let rest = &ukey[common.len()..];
        let (word, tail) = (key_prefix(rest), fence_tail(rest));
        // Fences are monotone in the key: a fence that compares below
        // (above) the probe bounds the range from below (above).
        let nf = self.words.len();
        let below = partition(nf, |i| self.cmp(i, word, tail) == Ordering::Less) as u32;
        let lo = if below == 0 { 0 } else { (below - 1) * FENCE_EVERY + 1 };
        // Fences equal to the probe follow `below` and are usually none:
        // step over a few, and search only if there are more.
        let mut above = below as usize;
        while above < nf && above < below as usize + 4 && self.cmp(above, word, tail) == Ordering::Equal {
            above += 1;
        }
        if above == below as usize + 4 {
            above += partition(nf - above, |i| self.cmp(above + i, word, tail) == Ordering::Equal);
        }
        let hi = if above == nf { n } else { above as u32 * FENCE_EVERY };
        (lo.min(n), hi.min(n))
    }

    /// Fence `i` against a key image `(word, tail)`.
    fn cmp(&self, i: usize, word: u64, tail: &[u8]) -> Ordering {
        let w = self.words.get(i).copied().unwrap_or(u64::MAX);
        let start = self.tail_starts.get(i).copied().unwrap_or(0) as usize;
        let end = self.tail_starts.get(i + 1).copied().unwrap_or(0) as usize;
        w.cmp(&word).then_with(|| self.tails.get(start..end).unwrap_or_default().cmp(tail))
    }

    /// Reads the fence keys of `row` (about one key in `FENCE_EVERY`).
    pub(super) fn of(row: &Row) -> Result<Fences> {
        let n = row.len();
        if n == 0 {
            return Ok(Fences::default());
        }
        let first = row.user_key(&row.elem(0)?)?;
        let last = row.user_key(&row.elem(n - 1)?)?;
        let shared = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let mut f = Fences { common: first[..shared].to_vec(), tail_starts: vec![0], ..Fences::default() };
        for i in (0..n).step_by(FENCE_EVERY as usize) {
            let key = row.user_key(&row.elem(i)?)?;
            let rest = key.get(shared..).unwrap_or_default();
            f.words.push(key_prefix(rest));
            f.tails.extend_from_slice(fence_tail(rest));
            f.tail_starts.push(f.tails.len() as u32);
        }
        Ok(f)
    }
}
