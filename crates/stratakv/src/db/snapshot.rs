//! Snapshots: a fixed sequence number that compaction keeps readable.

use std::sync::Arc;

use super::{DbInner, DbIter};
use crate::error::Result;
use crate::key::KeyRange;
use crate::key::SeqNo;
use crate::options::ReadOptions;

/// A consistent, read-only view of the database at the moment it was taken.
/// Versions it can see are kept until it is dropped.
pub struct Snapshot {
    db: Arc<DbInner>,
    seq: SeqNo,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seq", &self.seq).finish()
    }
}

impl Snapshot {
    pub(crate) fn new(db: Arc<DbInner>) -> Snapshot {
        // Register under the same lock compaction reads the oldest snapshot
        // with, so no compaction can drop what this snapshot needs.
        let seq = {
            let mut snaps = db.eng.snapshots.lock();
            let seq = db.eng.pipeline.visible();
            *snaps.entry(seq).or_insert(0) += 1;
            seq
        };
        Snapshot { db, seq }
    }

    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> SeqNo {
        self.seq
    }

    /// Read options that read at this snapshot.
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions { snapshot: Some(self.seq) }
    }

    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.db.get_at(key.as_ref(), self.seq)
    }

    /// Iterates `range` as of the snapshot.
    pub fn iter(&self, range: impl Into<KeyRange>) -> Result<DbIter> {
        let pin = Snapshot::pin(&self.db, self.seq);
        DbIter::new(self.db.clone(), self.db.default_range(range.into()), self.seq, Some(pin))
    }

    fn pin(db: &Arc<DbInner>, seq: SeqNo) -> Snapshot {
        *db.eng.snapshots.lock().entry(seq).or_insert(0) += 1;
        Snapshot { db: db.clone(), seq }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut snaps = self.db.eng.snapshots.lock();
        if let Some(n) = snaps.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                snaps.remove(&self.seq);
            }
        }
    }
}
