//! Striped key locks: a command holds the locks of every key it touches
//! for its whole read-modify-write, so commands are atomic against each
//! other while different keys proceed in parallel. Each stripe also has a
//! version, bumped by every write under it, which WATCH compares.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use super::fnv1a32;

/// Number of lock stripes.
pub const STRIPES: usize = 1024;

/// A fixed set of mutexes; a key maps to one by hash.
pub struct KeyLocks {
    stripes: Vec<Mutex<()>>,
    versions: Vec<AtomicU64>,
}

/// Held locks; released on drop.
pub struct LockSet<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            versions: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// The stripe of `key`.
pub fn stripe_of(key: &[u8]) -> usize {
    fnv1a32(key) as usize % STRIPES
}

impl KeyLocks {
    /// Locks the stripes of `keys`, in stripe order (no deadlock).
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, keys: &[K]) -> LockSet<'a> {
        self.lock_stripes(keys.iter().map(|k| stripe_of(k.as_ref())).collect())
    }

    /// Locks the given stripes, in stripe order.
    pub fn lock_stripes(&self, mut idx: Vec<usize>) -> LockSet<'_> {
        idx.sort_unstable();
        idx.dedup();
        LockSet { _guards: idx.into_iter().filter_map(|i| self.stripes.get(i)).map(|m| m.lock()).collect() }
    }

    /// Locks every stripe (FLUSHALL).
    pub fn lock_all(&self) -> LockSet<'_> {
        LockSet { _guards: self.stripes.iter().map(|m| m.lock()).collect() }
    }

    /// Records a write under the stripes of `keys` (all stripes if `all`).
    /// Call with those stripes locked, after the write is applied.
    pub fn bump<K: AsRef<[u8]>>(&self, keys: &[K], all: bool) {
        if all {
            self.versions.iter().for_each(|v| {
                v.fetch_add(1, Ordering::AcqRel);
            });
            return;
        }
        self.bump_stripes(keys.iter().map(|k| stripe_of(k.as_ref())));
    }

    /// Records a write under these stripes (of the user keys it changed).
    /// Call with those stripes locked, after the write is applied.
    pub fn bump_stripes(&self, stripes: impl IntoIterator<Item = usize>) {
        for s in stripes {
            if let Some(v) = self.versions.get(s) {
                v.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// The current version of a stripe.
    pub fn version(&self, stripe: usize) -> u64 {
        self.versions.get(stripe).map(|v| v.load(Ordering::Acquire)).unwrap_or(0)
    }
}
