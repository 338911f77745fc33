//! Striped key locks: a command holds the locks of every key it touches
//! for its whole read-modify-write (durable write included), so commands
//! are atomic against each other while different keys proceed in parallel
//! (and concurrent sync writes share one group commit).

use parking_lot::{Mutex, MutexGuard};

use super::fnv1a32;

/// Number of lock stripes.
const STRIPES: usize = 1024;

/// A fixed set of mutexes; a key maps to one by hash.
pub struct KeyLocks {
    stripes: Vec<Mutex<()>>,
}

/// Held locks; released on drop.
pub struct LockSet<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks { stripes: (0..STRIPES).map(|_| Mutex::new(())).collect() }
    }
}

impl KeyLocks {
    /// Locks the stripes of `keys`, in stripe order (no deadlock).
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, keys: &[K]) -> LockSet<'a> {
        let mut idx: Vec<usize> = keys.iter().map(|k| fnv1a32(k.as_ref()) as usize % STRIPES).collect();
        idx.sort_unstable();
        idx.dedup();
        LockSet { _guards: idx.into_iter().filter_map(|i| self.stripes.get(i)).map(|m| m.lock()).collect() }
    }

    /// Locks every stripe (FLUSHALL).
    pub fn lock_all(&self) -> LockSet<'_> {
        LockSet { _guards: self.stripes.iter().map(|m| m.lock()).collect() }
    }
}
