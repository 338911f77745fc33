//! The client's optimistic cache of directory access metadata: a tree
//! mirroring the namespace (entries keyed by parent id and name), evicting
//! the least recently used *leaf*, so directories near the root stay cached.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::types::AccessRec;

#[derive(Debug, Clone)]
struct Entry {
    rec: AccessRec,
    seq: u64,
    tick: u64,
    at: Instant,
}

/// An LRU-on-leaves tree cache of directory access records.
#[derive(Debug, Default)]
pub struct AccessCache {
    cap: usize,
    ttl: Duration,
    map: HashMap<(u64, String), Entry>,
    by_id: HashMap<u64, (u64, String)>,
    children: HashMap<u64, usize>,
    leaves: BTreeMap<u64, (u64, String)>,
    tick: u64,
}

impl AccessCache {
    /// A cache of at most `cap` entries (0 disables it), each trusted for
    /// `ttl` (servers forget invalidations after a longer time).
    pub fn new(cap: usize, ttl: Duration) -> AccessCache {
        AccessCache { cap, ttl, ..Default::default() }
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn is_leaf(&self, id: u64) -> bool {
        self.children.get(&id).copied().unwrap_or(0) == 0
    }

    /// The cached record of `name` in `pid` and the seq it was validated at.
    pub fn get(&mut self, pid: u64, name: &str) -> Option<(AccessRec, u64)> {
        self.tick += 1;
        let tick = self.tick;
        let k = (pid, name.to_string());
        if self.map.get(&k)?.at.elapsed() > self.ttl {
            self.remove_key(&k);
            return None;
        }
        let e = self.map.get_mut(&k)?;
        let old = e.tick;
        e.tick = tick;
        let out = (e.rec.clone(), e.seq);
        if let Some(v) = self.leaves.remove(&old) {
            self.leaves.insert(tick, v);
        }
        Some(out)
    }

    /// Caches a directory's access record validated at `seq`.
    pub fn insert(&mut self, pid: u64, name: &str, rec: AccessRec, seq: u64) {
        if self.cap == 0 {
            return;
        }
        let k = (pid, name.to_string());
        if self.map.contains_key(&k) {
            self.remove_key(&k);
        }
        self.tick += 1;
        let id = rec.id;
        // The parent stops being a leaf.
        if let Some(pk) = self.by_id.get(&pid).cloned() {
            if self.is_leaf(pid) {
                if let Some(pe) = self.map.get(&pk) {
                    self.leaves.remove(&pe.tick);
                }
            }
        }
        *self.children.entry(pid).or_default() += 1;
        self.by_id.insert(id, k.clone());
        if self.is_leaf(id) {
            self.leaves.insert(self.tick, k.clone());
        }
        self.map.insert(k, Entry { rec, seq, tick: self.tick, at: Instant::now() });
        while self.map.len() > self.cap {
            let Some((_, victim)) = self.leaves.pop_first() else { break };
            self.remove_key(&victim);
        }
    }

    fn remove_key(&mut self, k: &(u64, String)) {
        let Some(e) = self.map.remove(k) else { return };
        self.leaves.remove(&e.tick);
        if self.by_id.get(&e.rec.id) == Some(k) {
            self.by_id.remove(&e.rec.id);
        }
        let pid = k.0;
        if let Some(c) = self.children.get_mut(&pid) {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.children.remove(&pid);
                if let Some(pk) = self.by_id.get(&pid).cloned() {
                    if let Some(pe) = self.map.get(&pk) {
                        self.leaves.insert(pe.tick, pk);
                    }
                }
            }
        }
    }

    /// Drops the entries of directories `ids` (named stale by a server).
    pub fn remove_ids(&mut self, ids: &[u64]) {
        for id in ids {
            if let Some(k) = self.by_id.get(id).cloned() {
                self.remove_key(&k);
            }
        }
    }

    /// Drops the entry of `name` in `pid`, if cached.
    pub fn remove(&mut self, pid: u64, name: &str) {
        self.remove_key(&(pid, name.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Kind, Perm};

    fn rec(id: u64) -> AccessRec {
        AccessRec {
            kind: Kind::Dir,
            id,
            perm: Perm { mode: 0o755, uid: 0, gid: 0 },
            version: 0,
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        }
    }

    #[test]
    fn evicts_least_recent_leaf_and_keeps_inner_nodes() {
        let mut c = AccessCache::new(3, Duration::from_secs(60));
        c.insert(1, "a", rec(10), 0); // inner
        c.insert(10, "b", rec(11), 0); // leaf
        c.insert(10, "c", rec(12), 0); // leaf
        assert!(c.get(10, "b").is_some()); // b is now more recent than c
        c.insert(10, "d", rec(13), 0); // evicts c (LRU leaf), never a
        assert_eq!(c.len(), 3);
        assert!(c.get(1, "a").is_some());
        assert!(c.get(10, "c").is_none());
        assert!(c.get(10, "b").is_some());
        c.remove_ids(&[11, 13]);
        assert_eq!(c.len(), 1);
        c.insert(1, "x", rec(20), 0);
        c.insert(1, "y", rec(21), 0);
        c.insert(1, "z", rec(22), 0); // a is a leaf again and the oldest
        assert!(c.get(1, "a").is_none());
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let mut c = AccessCache::new(0, Duration::from_secs(60));
        c.insert(1, "a", rec(10), 0);
        assert!(c.is_empty());
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let mut c = AccessCache::new(10, Duration::from_millis(20));
        c.insert(1, "a", rec(10), 0);
        assert!(c.get(1, "a").is_some());
        std::thread::sleep(Duration::from_millis(40));
        assert!(c.get(1, "a").is_none());
        assert!(c.is_empty());
    }
}
