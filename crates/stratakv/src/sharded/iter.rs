//! Reading a consistent cut: one snapshot per shard, taken at the same
//! point of every shard's queue, and an iterator merging the shards'
//! iterators in key order, both directions.

use crate::db::{DbIter, Snapshot};
use crate::error::{Error, Result};
use crate::key::KeyRange;

use super::layout::{is_meta, shard_of, user_range};

/// A consistent read view of every shard at one point: a cross-shard batch
/// is in all of its shards' snapshots or in none. Released when dropped.
pub struct ShardedSnapshot {
    snaps: Vec<Snapshot>,
}

impl std::fmt::Debug for ShardedSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedSnapshot").field("shards", &self.snaps.len()).finish()
    }
}

impl ShardedSnapshot {
    pub(crate) fn new(snaps: Vec<Snapshot>) -> ShardedSnapshot {
        ShardedSnapshot { snaps }
    }

    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        check_key(key)?;
        match self.snaps.get(shard_of(key, self.snaps.len())) {
            Some(s) => s.get(key),
            None => Err(Error::Closed),
        }
    }

    /// Values of several keys as of the snapshot.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Iterates `range` as of the snapshot, merging the shards.
    pub fn iter(&self, range: impl Into<KeyRange>) -> Result<ShardedIter> {
        let range = user_range(range.into());
        let iters = self.snaps.iter().map(|s| s.iter(range.clone())).collect::<Result<Vec<_>>>()?;
        Ok(ShardedIter::new(iters))
    }
}

/// Users may not address the front end's meta keys.
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if is_meta(key) {
        return Err(Error::InvalidArgument(
            "keys beginning with six 0xff bytes are reserved by the sharded front end".into(),
        ));
    }
    Ok(())
}

/// One shard's iterator and the items taken from it but not yet returned:
/// the smallest it has left (front) and the largest (back).
struct Source {
    it: DbIter,
    front: Option<(Vec<u8>, Vec<u8>)>,
    back: Option<(Vec<u8>, Vec<u8>)>,
    /// The iterator gave all it has at the front (or the back): whatever is
    /// left is in `front`/`back`.
    dry: bool,
}

impl Source {
    /// The smallest key this shard has left, pulling one item on demand.
    fn peek_front(&mut self) -> Option<&[u8]> {
        if self.front.is_none() && !self.dry {
            self.front = self.it.next();
            if self.front.is_none() {
                self.dry = true;
            }
        }
        if self.front.is_none() {
            // Met the back: its held item is the last one left.
            self.front = self.back.take();
        }
        self.front.as_ref().map(|(k, _)| k.as_slice())
    }

    /// The largest key this shard has left.
    fn peek_back(&mut self) -> Option<&[u8]> {
        if self.back.is_none() && !self.dry {
            self.back = self.it.next_back();
            if self.back.is_none() {
                self.dry = true;
            }
        }
        if self.back.is_none() {
            self.back = self.front.take();
        }
        self.back.as_ref().map(|(k, _)| k.as_slice())
    }
}

/// Iterates the keys of a range over every shard in order, forward
/// (`next`) or backward (`next_back`), at one consistent cut. Each shard's
/// iterator is read one item ahead, on demand; the next key is the
/// smallest (largest) of those heads, found by a scan of the N heads (N is
/// small, so a scan beats a heap that would need rebuilding whenever the
/// direction changes). A read error ends the iteration; see [`ShardedIter::status`].
pub struct ShardedIter {
    sources: Vec<Source>,
    error: Option<Error>,
}

impl ShardedIter {
    fn new(iters: Vec<DbIter>) -> ShardedIter {
        let sources = iters.into_iter().map(|it| Source { it, front: None, back: None, dry: false }).collect();
        ShardedIter { sources, error: None }
    }

    /// The error that ended iteration, if any.
    pub fn status(&self) -> Result<(), &Error> {
        match &self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Like `next`, but reports errors.
    pub fn try_next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let item = self.next();
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(item),
        }
    }

    fn check(&mut self) -> bool {
        if self.error.is_some() {
            return false;
        }
        for s in &self.sources {
            if let Err(e) = s.it.status() {
                self.error = Some(super::oneshot::dup_error(e));
                return false;
            }
        }
        true
    }
}

impl Iterator for ShardedIter {
    type Item = (Vec<u8>, Vec<u8>);

    fn next(&mut self) -> Option<Self::Item> {
        let mut best: Option<(usize, &[u8])> = None;
        for (i, s) in self.sources.iter_mut().enumerate() {
            if let Some(k) = s.peek_front() {
                if best.is_none_or(|(_, b)| k < b) {
                    best = Some((i, k));
                }
            }
        }
        let i = best.map(|(i, _)| i);
        if !self.check() {
            return None;
        }
        self.sources.get_mut(i?)?.front.take()
    }
}

impl DoubleEndedIterator for ShardedIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        let mut best: Option<(usize, &[u8])> = None;
        for (i, s) in self.sources.iter_mut().enumerate() {
            if let Some(k) = s.peek_back() {
                if best.is_none_or(|(_, b)| k > b) {
                    best = Some((i, k));
                }
            }
        }
        let i = best.map(|(i, _)| i);
        if !self.check() {
            return None;
        }
        self.sources.get_mut(i?)?.back.take()
    }
}
