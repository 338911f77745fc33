//! The key directory's hash table: open addressing with linear probing,
//! each slot holding its key (inline up to [`INLINE`] bytes) beside its
//! entry, so that a lookup costs one cache miss (a chained or split-array
//! table costs two) and can be prefetched ahead of use, letting the misses
//! of a pipeline's keys overlap. Deletion shifts the following run back
//! (no tombstones), so probe runs never grow with churn.

/// Longest key held inline (no allocation, no second miss to compare it).
pub const INLINE: usize = 22;

/// The entry value that marks a free slot (no packed entry is 0).
const FREE: u64 = 0;

/// Grow past this load (numerator over 8): linear probing stays short
/// below three quarters.
const MAX_LOAD_EIGHTHS: usize = 6;

/// A key as the table holds it.
#[derive(Clone, Debug, Default)]
enum Key {
    #[default]
    None,
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap(Box<[u8]>),
}

impl Key {
    fn new(key: &[u8]) -> Key {
        match key.len() {
            n if n <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..n].copy_from_slice(key);
                Key::Inline { len: n as u8, bytes }
            }
            _ => Key::Heap(key.into()),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Key::None => &[],
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Heap(b) => b,
        }
    }
}

/// One slot: a key and its entry ([`FREE`]: the slot is free).
#[derive(Clone, Debug, Default)]
struct Slot {
    key: Key,
    entry: u64,
}

/// Keys to nonzero `u64` entries.
pub struct Table {
    slots: Vec<Slot>,
    len: usize,
    /// Heap bytes of keys longer than [`INLINE`].
    heap: usize,
    hasher: ahash::RandomState,
}

impl Default for Table {
    fn default() -> Self {
        Table { slots: Vec::new(), len: 0, heap: 0, hasher: ahash::RandomState::new() }
    }
}

impl Table {
    fn home(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) as usize) & (self.slots.len() - 1)
    }

    /// The slot holding `key`, or the free slot ending its probe run.
    fn find(&self, key: &[u8]) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = &self.slots[i];
            if s.entry == FREE || s.key.as_slice() == key {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// Asks the CPU for the slot where a lookup of `key` starts.
    pub fn prefetch(&self, key: &[u8]) {
        if !self.slots.is_empty() {
            strata_pmem::prefetch(&self.slots[self.home(key)]);
        }
    }

    /// The entry of `key`.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        if self.slots.is_empty() {
            return None;
        }
        match &self.slots[self.find(key)] {
            s if s.entry == FREE => None,
            s => Some(s.entry),
        }
    }

    /// Sets the entry of `key` (`entry` must not be 0).
    pub fn insert(&mut self, key: &[u8], entry: u64) {
        debug_assert_ne!(entry, FREE);
        if (self.len + 1) * 8 > self.slots.len() * MAX_LOAD_EIGHTHS {
            self.grow();
        }
        let i = self.find(key);
        let s = &mut self.slots[i];
        if s.entry == FREE {
            s.key = Key::new(key);
            self.len += 1;
            if key.len() > INLINE {
                self.heap += key.len();
            }
        }
        s.entry = entry;
    }

    /// Sets the entry of `key` if it is held; whether it was.
    pub fn update(&mut self, key: &[u8], entry: u64) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let i = self.find(key);
        let s = &mut self.slots[i];
        if s.entry == FREE {
            return false;
        }
        s.entry = entry;
        true
    }

    /// Removes `key` if its entry is `only_if`; whether it did.
    pub fn remove_if(&mut self, key: &[u8], only_if: u64) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut hole = self.find(key);
        if self.slots[hole].entry != only_if || self.slots[hole].entry == FREE {
            return false;
        }
        if key.len() > INLINE {
            self.heap -= key.len();
        }
        self.len -= 1;
        // Shift back every later slot of the run that may move into the
        // hole (its home is not cyclically within (hole, j]).
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            if self.slots[j].entry == FREE {
                break;
            }
            let h = self.home(self.slots[j].key.as_slice());
            let stays = if hole <= j { hole < h && h <= j } else { hole < h || h <= j };
            if !stays {
                self.slots[hole] = std::mem::take(&mut self.slots[j]);
                hole = j;
            }
        }
        self.slots[hole] = Slot::default();
        true
    }

    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); cap]);
        for s in old.into_iter().filter(|s| s.entry != FREE) {
            let i = self.find(s.key.as_slice());
            self.slots[i] = s;
        }
    }

    /// Empties the table and gives its memory back.
    pub fn clear(&mut self) {
        self.slots = Vec::new();
        self.len = 0;
        self.heap = 0;
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes held: the slots and the long keys.
    pub fn bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>() + self.heap
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::{Rng, SeedableRng};

    use super::*;

    /// Random inserts, updates and removals against a std map, keys short
    /// and long, with heavy churn (the back shift of deletion).
    #[test]
    fn agrees_with_a_map() {
        let mut t = Table::default();
        let mut m: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let name =
            |i: u32| if i.is_multiple_of(4) { format!("long-key-past-the-inline-bytes-{i}") } else { format!("k{i}") };
        for step in 0..200_000 {
            let k = name(rng.gen_range(0..2000)).into_bytes();
            let v = rng.gen_range(1..u64::MAX);
            match rng.gen_range(0..4) {
                0 | 1 => {
                    t.insert(&k, v);
                    m.insert(k.clone(), v);
                }
                2 => assert_eq!(t.update(&k, v), m.get_mut(&k).map(|e| *e = v).is_some(), "step {step}"),
                _ => {
                    let cur = m.get(&k).copied().unwrap_or(1);
                    assert_eq!(t.remove_if(&k, cur), m.remove(&k).is_some(), "step {step}");
                }
            }
            let probe = name(rng.gen_range(0..2000)).into_bytes();
            assert_eq!(t.get(&probe), m.get(&probe).copied(), "step {step}");
        }
        assert_eq!(t.len(), m.len());
        let long: usize = m.keys().map(Vec::len).filter(|n| *n > INLINE).sum();
        assert_eq!(t.heap, long);
        assert!(m.iter().all(|(k, v)| t.get(k) == Some(*v)));
        assert!(!t.remove_if(b"k1", 0), "a free slot is never removed");
        t.clear();
        assert_eq!((t.len(), t.bytes(), t.get(b"k1")), (0, 0, None));
    }
}
