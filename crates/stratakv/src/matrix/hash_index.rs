//! A DRAM hash index over one segment of rows: key hash → the element that
//! begins the key's run in each row of the segment, so a point lookup
//! probes one table per segment and reads PM only for the elements it
//! names, instead of a segment filter and then one probe per row.
//!
//! It is rebuilt from the key hashes the rows store, like the filters.
//! Rows are entered oldest first and number their elements consecutively
//! (a row's elements follow those of the rows entered before it). A slot is
//! a `u32`: that element number plus one in the low `idx_bits` bits
//! (0 = empty), and a fingerprint of the hash in the bits above, so most
//! probes of absent keys end without touching PM. Linear probing at a load
//! of at most `MAX_LOAD` keeps a probe inside one or two cache lines.
//!
//! The slot array of a growing segment is shared, not copied, between the
//! index readers hold and the one the flush adds the next row to: adding
//! only fills empty slots, and each index ignores element numbers past its
//! own rows. So a reader's probe finds every key of its rows (slots filled
//! since only lengthen probe paths) and sealing a row costs its keys, not
//! a copy of the whole segment's table.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Highest share of occupied slots.
const MAX_LOAD: f64 = 0.75;

/// `Slots::owner` while an index is entering a row.
const BUSY: u64 = u64::MAX;

/// The slot array, shared by an index and its clones.
#[derive(Debug, Default)]
struct Slots {
    words: Box<[AtomicU32]>,
    /// Element numbers entered so far: only the index whose own count
    /// equals this may enter more (`BUSY` while one does); any other
    /// clone copies the array first, so clones that diverged never mix
    /// their rows in one array.
    owner: AtomicU64,
}

impl Slots {
    fn zeroed(n: usize) -> Slots {
        Slots { words: (0..n).map(|_| AtomicU32::new(0)).collect(), owner: AtomicU64::new(0) }
    }
}

/// Hash index of one segment.
#[derive(Clone, Debug, Default)]
pub struct HashIndex {
    slots: Arc<Slots>,
    idx_bits: u32,
    /// Rows entered, oldest first: (row id, number of its first element).
    rows: Vec<(u64, u32)>,
    /// Element numbers handed out (the next row's first number).
    elems: u64,
    /// Occupied slots.
    keys: usize,
}

/// Distinct runs of equal hashes in `hashes` (the keys of a row).
fn runs(hashes: &[u64]) -> usize {
    hashes.windows(2).filter(|w| w[0] != w[1]).count() + usize::from(!hashes.is_empty())
}

impl HashIndex {
    /// An empty index with room for `keys` keys over `elems` elements.
    pub fn with_capacity(keys: usize, elems: u64) -> HashIndex {
        // The largest element number plus one must fit in the index bits.
        let idx_bits = (u64::BITS - elems.saturating_add(1).leading_zeros()).min(32);
        let cap = ((keys as f64 / MAX_LOAD) as usize + 1).max(8);
        HashIndex { slots: Arc::new(Slots::zeroed(cap)), idx_bits, ..HashIndex::default() }
    }

    /// An index of `rows` (row id and stored key hashes in element order),
    /// oldest first, with room for at least `room` keys and elements.
    pub fn build<H: AsRef<[u64]>>(rows: &[(u64, H)], room: usize) -> HashIndex {
        let keys: usize = rows.iter().map(|(_, h)| runs(h.as_ref())).sum();
        let elems: u64 = rows.iter().map(|(_, h)| h.as_ref().len() as u64).sum();
        let mut ix = HashIndex::with_capacity(keys.max(room), elems.max(room as u64));
        for (id, hashes) in rows {
            // Sized for at least these rows, so every row fits.
            ix.add_row(*id, hashes.as_ref());
        }
        ix
    }

    /// Enters a row newer than every row entered so far, from its stored
    /// key hashes in element order. Versions of one key are adjacent and
    /// share a hash: only the first element of each run of equal hashes is
    /// entered. Returns false, entering nothing, if the row does not fit
    /// (then build a bigger index).
    pub fn add_row(&mut self, id: u64, hashes: &[u64]) -> bool {
        let new_keys = runs(hashes);
        let max_elems = if self.idx_bits >= 32 { u64::from(u32::MAX) - 1 } else { (1u64 << self.idx_bits) - 2 };
        let fits = self.elems + hashes.len() as u64 <= max_elems + 1
            && (self.keys + new_keys) as f64 <= self.slots.words.len() as f64 * MAX_LOAD;
        if !fits {
            return false;
        }
        if self.slots.owner.compare_exchange(self.elems, BUSY, Ordering::Acquire, Ordering::Relaxed).is_err() {
            // Another clone entered rows this one does not have (or is
            // entering them now): continue on a copy holding only ours.
            self.slots = Arc::new(self.own_copy());
            self.slots.owner.store(BUSY, Ordering::Relaxed);
        }
        let base = self.elems as u32;
        self.rows.push((id, base));
        let mut prev = None;
        for (i, &h) in hashes.iter().enumerate() {
            if prev != Some(h) {
                self.insert(h, base + i as u32);
            }
            prev = Some(h);
        }
        self.elems += hashes.len() as u64;
        self.keys += new_keys;
        self.slots.owner.store(self.elems, Ordering::Release);
        true
    }

    /// A copy of the slot array with only the entries of this index's rows.
    fn own_copy(&self) -> Slots {
        let mask = self.idx_mask();
        let words = self
            .slots
            .words
            .iter()
            .map(|w| {
                let s = w.load(Ordering::Relaxed);
                AtomicU32::new(if self.own_elem(s, mask).is_some() { s } else { 0 })
            })
            .collect();
        // Entries are never moved, so dropping the others leaves every probe
        // path of ours unbroken: a path ends at the first empty slot, and no
        // entry of ours sat behind one of theirs that it could not pass.
        Slots { words, owner: AtomicU64::new(self.elems) }
    }

    /// Keys entered and the slots they could fill before a rebuild.
    #[cfg(test)]
    pub fn load(&self) -> (usize, usize) {
        (self.keys, (self.slots.words.len() as f64 * MAX_LOAD) as usize)
    }

    fn home(&self, h: u64) -> usize {
        (((h >> 32) * self.slots.words.len() as u64) >> 32) as usize
    }

    fn fingerprint(&self, h: u64) -> u32 {
        // The bits above the index; with 32 index bits there are none and
        // every occupied slot on the probe path is a candidate.
        (h as u32).checked_shl(self.idx_bits).unwrap_or(0)
    }

    /// The element number in occupied slot value `s`, if it is one of this
    /// index's rows (not entered into the shared slots after this index).
    fn own_elem(&self, s: u32, mask: u32) -> Option<u32> {
        let num = (s & mask).checked_sub(1)?;
        (u64::from(num) < self.elems).then_some(num)
    }

    fn idx_mask(&self) -> u32 {
        1u32.checked_shl(self.idx_bits).map(|b| b - 1).unwrap_or(u32::MAX)
    }

    /// Call only while owning the slots (see `add_row`).
    fn insert(&mut self, h: u64, num: u32) {
        let cap = self.slots.words.len();
        let mut pos = self.home(h);
        let slot = self.fingerprint(h) | (num + 1);
        // The load bound leaves empty slots, so the walk ends. Readers may
        // load a slot while it is stored: a relaxed atomic suffices, since
        // they ignore numbers past their rows and learn of new rows only
        // through a later (release/acquire) publication of a newer index.
        while let Some(s) = self.slots.words.get(pos) {
            if s.load(Ordering::Relaxed) == 0 {
                s.store(slot, Ordering::Relaxed);
                return;
            }
            pos = if pos + 1 == cap { 0 } else { pos + 1 };
        }
    }

    /// Asks for the cache line of the first slot a lookup of `h` reads.
    pub fn prefetch(&self, h: u64) {
        if let Some(s) = self.slots.words.get(self.home(h)) {
            strata_pmem::prefetch(s);
        }
    }

    /// Candidates for key hash `h` as (row id, element index in the row),
    /// newest row first. Every run start of the key in every entered row is
    /// among them; a candidate may belong to another key (same fingerprint).
    /// `out` is cleared first.
    pub fn candidates(&self, h: u64, out: &mut Vec<(u64, u32)>) {
        out.clear();
        let mask = self.idx_mask();
        let fp = self.fingerprint(h);
        let n = self.slots.words.len();
        let mut pos = self.home(h);
        for _ in 0..n {
            let Some(s) = self.slots.words.get(pos).map(|w| w.load(Ordering::Relaxed)) else { break };
            if s == 0 {
                break;
            }
            let candidate = if s & !mask == fp { self.own_elem(s, mask) } else { None };
            if let Some(num) = candidate {
                // The row whose numbers include `num`: the last one starting at or before it.
                let r = self.rows.partition_point(|(_, base)| *base <= num);
                if let Some((id, base)) = r.checked_sub(1).and_then(|r| self.rows.get(r)) {
                    out.push((*id, num - base));
                }
            }
            pos = if pos + 1 == n { 0 } else { pos + 1 };
        }
        // Slots of equal hashes lie in insertion order (oldest row first);
        // a row's own candidates keep their order under a stable sort.
        let newness = |id: u64| self.rows.iter().position(|(r, _)| *r == id);
        out.sort_by_key(|(id, _)| std::cmp::Reverse(newness(*id)));
    }

    /// DRAM bytes used.
    pub fn bytes(&self) -> usize {
        self.slots.words.len() * 4 + self.rows.len() * 12
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::key_hash;

    #[test]
    fn every_run_start_is_a_candidate_and_absent_keys_rarely_are() {
        // Two rows with runs of 1-3 versions per key, as rows hold them.
        let mut rows: Vec<(u64, Vec<u64>)> = Vec::new();
        let mut starts = Vec::new();
        for (id, keys) in [(7u64, 0..30_000u32), (9u64, 20_000..50_000u32)] {
            let mut hashes = Vec::new();
            for k in keys {
                let h = key_hash(&k.to_be_bytes());
                starts.push((h, id, hashes.len() as u32));
                hashes.extend(std::iter::repeat_n(h, 1 + (k % 3) as usize));
            }
            rows.push((id, hashes));
        }
        let refs: Vec<(u64, &[u64])> = rows.iter().map(|(id, h)| (*id, &h[..])).collect();
        let ix = HashIndex::build(&refs, 0);
        let mut out = Vec::new();
        for (h, id, first) in &starts {
            ix.candidates(*h, &mut out);
            assert!(out.contains(&(*id, *first)), "run at {id}/{first} not found");
            // Newest row first: keys in both rows name row 9 before row 7.
            let ids: Vec<u64> = out.iter().map(|c| c.0).collect();
            assert!(ids.windows(2).all(|w| !(w[0] == 7 && w[1] == 9)), "{ids:?}");
        }
        let mut fp = 0;
        for k in 50_000..150_000u32 {
            ix.candidates(key_hash(&k.to_be_bytes()), &mut out);
            fp += out.len();
        }
        // 100k absent keys, 12 fingerprint bits: about 100k * probe length / 4096.
        assert!(fp < 100_000 * 4 / 4096 + 200, "{fp} false candidates");
        assert!(ix.bytes() <= (starts.len() * 4 * 4 / 3) + 64, "{} bytes", ix.bytes());
    }

    #[test]
    fn rows_that_do_not_fit_are_refused_whole() {
        let a: Vec<u64> = (0..100).map(|k| key_hash(&[k])).collect();
        let mut ix = HashIndex::with_capacity(150, 150);
        assert!(ix.add_row(1, &a));
        // 100 more keys pass the load bound and 200 elements the index bits.
        assert!(!ix.add_row(2, &a));
        assert_eq!(ix.load().0, 100);
        let mut out = Vec::new();
        ix.candidates(a[5], &mut out);
        assert_eq!(out, vec![(1, 5)]);
    }

    #[test]
    fn colliding_hashes_and_tiny_rows() {
        // Equal hashes everywhere: every run start is still reachable.
        let hashes = [7u64, 7, 9, 7, 7, 7, 9];
        let ix = HashIndex::build(&[(4, &hashes[..]), (5, &hashes[..2])], 0);
        let mut c = Vec::new();
        ix.candidates(7, &mut c);
        assert_eq!(c.first(), Some(&(5, 0)), "{c:?}");
        assert!(c.contains(&(4, 0)) && c.contains(&(4, 3)), "{c:?}");
        ix.candidates(9, &mut c);
        assert!(c.contains(&(4, 2)) && c.contains(&(4, 6)), "{c:?}");
        HashIndex::build::<&[u64]>(&[], 0).candidates(7, &mut c);
        assert!(c.is_empty());
    }

    #[test]
    fn clones_share_slots_but_see_only_their_own_rows() {
        let keys = |r: std::ops::Range<u32>| -> Vec<u64> { r.map(|k| key_hash(&k.to_be_bytes())).collect() };
        let (r1, r2, r3) = (keys(0..1000), keys(1000..2000), keys(2000..3000));
        let mut a = HashIndex::with_capacity(4000, 4000);
        assert!(a.add_row(1, &r1));
        // `b` is what a reader holds; `a` goes on growing in the same slots.
        let b = a.clone();
        assert!(a.add_row(2, &r2));
        assert!(Arc::ptr_eq(&a.slots, &b.slots), "entering a row copied the slots");
        let mut out = Vec::new();
        for (i, h) in r2.iter().enumerate() {
            b.candidates(*h, &mut out);
            assert!(out.iter().all(|c| c.0 == 1 && c.1 < 1000), "old clone sees row 2: {out:?}");
            a.candidates(*h, &mut out);
            assert!(out.contains(&(2, i as u32)), "{out:?}");
        }
        // A clone that fell behind and enters a row of its own continues on
        // a copy: neither sees the other's newest row, both keep row 1.
        let mut c = b.clone();
        assert!(c.add_row(3, &r3));
        assert!(!Arc::ptr_eq(&a.slots, &c.slots));
        for (i, h) in r3.iter().enumerate() {
            c.candidates(*h, &mut out);
            assert!(out.contains(&(3, i as u32)), "{out:?}");
            a.candidates(*h, &mut out);
            assert!(out.iter().all(|x| x.0 != 3 && (x.0 != 2 || x.1 < 1000)), "{out:?}");
        }
        for (i, h) in r1.iter().enumerate() {
            for ix in [&a, &b, &c] {
                ix.candidates(*h, &mut out);
                assert!(out.contains(&(1, i as u32)), "{out:?}");
            }
        }
        for h in &r2 {
            c.candidates(*h, &mut out);
            assert!(out.iter().all(|x| (x.0 == 1 || x.0 == 3) && x.1 < 1000), "{out:?}");
        }
        assert!(a.add_row(4, &keys(3000..3100)), "the owner goes on in place");
        assert_eq!(c.load().0, 2000);
    }
}
