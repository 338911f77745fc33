//! The slot table's two halves: the head-word codec (what the 8-byte word
//! in front of each slot says on PM) and the DRAM map of which slots are
//! leased.
//!
//! A slot's head word (8 bytes, little-endian) is
//! `kind (bits 0..8) | (slots - 1) (bits 8..24) | number (bits 24..64)`,
//! zero for "no extent starts here". The engine decides which extents are
//! live (from its own roots) at recovery; the head words only say where
//! extents are and what they were for.
//!
//! Both `region` (which scans head words and owns the map) and `alloc`
//! (which leases extents through them) build on this module; it depends on
//! neither.

/// Largest number of slots one extent can span.
pub const MAX_EXTENT_SLOTS: u64 = 1 << 16;
/// Largest extent number.
pub const MAX_EXTENT_NUMBER: u64 = (1 << 40) - 1;

/// What a head word says about the extent starting at `slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtentHead {
    /// First slot of the extent.
    pub slot: u64,
    /// Engine-defined kind (never 0).
    pub kind: u8,
    /// Number of slots.
    pub slots: u64,
    /// Engine-defined number (e.g. the log number).
    pub number: u64,
}

impl ExtentHead {
    pub(crate) fn encode(&self) -> u64 {
        self.kind as u64 | ((self.slots - 1) << 8) | (self.number << 24)
    }

    pub(crate) fn decode(slot: u64, w: u64) -> Option<ExtentHead> {
        let kind = (w & 0xff) as u8;
        if kind == 0 {
            return None;
        }
        Some(ExtentHead { slot, kind, slots: ((w >> 8) & 0xffff) + 1, number: w >> 24 })
    }
}

/// DRAM map of which slots are leased, which have had their memory
/// reserved in this process (nothing ever gives it back: extents are not
/// punched out when freed), and which were written through to the file
/// once in this process (see `Extent::write_through_once`).
pub(crate) struct SlotMap {
    used: Vec<bool>,
    reserved: Vec<bool>,
    written: Vec<bool>,
    free: u64,
}

impl SlotMap {
    pub fn new(count: u64) -> SlotMap {
        SlotMap {
            used: vec![false; count as usize],
            reserved: vec![false; count as usize],
            written: vec![false; count as usize],
            free: count,
        }
    }

    /// Whether every slot of `[start, start+n)` has its memory reserved.
    pub fn is_reserved(&self, start: usize, n: usize) -> bool {
        (start..start + n).all(|j| self.reserved.get(j).copied().unwrap_or(false))
    }

    /// Records that `[start, start+n)` has its memory reserved.
    pub fn mark_reserved(&mut self, start: usize, n: usize) {
        for j in start..start + n {
            if let Some(r) = self.reserved.get_mut(j) {
                *r = true;
            }
        }
    }

    /// Records that `[start, start+n)` is written through; true if some
    /// slot of it was not before.
    pub fn mark_written(&mut self, start: usize, n: usize) -> bool {
        let mut any = false;
        for j in start..start + n {
            if let Some(w) = self.written.get_mut(j) {
                any |= !*w;
                *w = true;
            }
        }
        any
    }

    /// Runs `(start, len)` of not yet reserved slots among the first `n`
    /// free slots, lowest first: the ones the next allocations take (first
    /// fit).
    pub fn unreserved_ahead(&self, n: usize) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let free = self.used.iter().enumerate().filter(|(_, used)| !**used).map(|(i, _)| i).take(n);
        for i in free.filter(|i| !self.reserved.get(*i).copied().unwrap_or(true)) {
            match runs.last_mut() {
                Some((start, len)) if *start + *len == i => *len += 1,
                _ => runs.push((i, 1)),
            }
        }
        runs
    }

    pub fn free(&self) -> u64 {
        self.free
    }

    /// First-fit search for `n` contiguous free slots. Reusing the lowest
    /// free slots keeps the region's working set small and its pages warm
    /// (a fresh page of a file-backed region costs a fault and a zero-fill).
    pub fn find_run(&self, n: usize) -> Option<usize> {
        let total = self.used.len();
        if n == 0 || n > total {
            return None;
        }
        let mut run = 0;
        for (i, used) in self.used.iter().enumerate() {
            if *used {
                run = 0;
            } else {
                run += 1;
                if run == n {
                    return Some(i + 1 - n);
                }
            }
        }
        None
    }

    pub fn is_free(&self, start: usize, n: usize) -> bool {
        (start..start + n).all(|j| !self.used.get(j).copied().unwrap_or(true))
    }

    pub fn mark(&mut self, start: usize, n: usize, used: bool) {
        for j in start..start + n {
            if let Some(s) = self.used.get_mut(j) {
                if *s != used {
                    *s = used;
                    if used {
                        self.free -= 1;
                    } else {
                        self.free += 1;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_word_round_trips() {
        let h = ExtentHead { slot: 3, kind: 2, slots: 17, number: 123_456_789 };
        assert_eq!(ExtentHead::decode(3, h.encode()), Some(h));
        assert_eq!(ExtentHead::decode(0, 0), None);
    }

    #[test]
    fn reserving_ahead_names_the_unreserved_slots_first_fit_takes_next() {
        let mut m = SlotMap::new(8);
        m.mark(0, 2, true);
        m.mark(4, 1, true);
        m.mark_reserved(3, 1);
        // Free: 2, 3, 5, 6, 7; the first 4 are 2, 3, 5, 6, of which 3 is reserved.
        assert_eq!(m.unreserved_ahead(4), vec![(2, 1), (5, 2)]);
        assert!(!m.is_reserved(2, 2));
        m.mark_reserved(2, 1);
        assert!(m.is_reserved(2, 2));
        assert_eq!(m.unreserved_ahead(2), Vec::<(usize, usize)>::new());
        assert_eq!(m.unreserved_ahead(100), vec![(5, 3)]);
    }

    #[test]
    fn slot_map_finds_runs_and_wraps() {
        let mut m = SlotMap::new(8);
        let a = m.find_run(3).unwrap();
        m.mark(a, 3, true);
        let b = m.find_run(3).unwrap();
        m.mark(b, 3, true);
        assert_eq!(m.free(), 2);
        assert!(m.find_run(3).is_none());
        m.mark(a, 3, false);
        // Free now: 0..3 and 6..8; no run of 4, and first fit takes the lowest.
        assert!(m.find_run(4).is_none());
        assert_eq!(m.find_run(2), Some(0));
        assert_eq!(m.find_run(3), Some(0));
    }
}
