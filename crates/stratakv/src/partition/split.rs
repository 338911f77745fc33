//! Range partitions (TridentKV's partitions by key range): with
//! `Options::partition_split_bytes` set, a range of the key space whose
//! tables hold more than that splits at a key. The split points, a range
//! router, are kept in the MANIFEST and in each version; flushes and
//! compactions cut tables at them, so dropping a range partition
//! (`Db::drop_range_partition`, one range tombstone) leaves whole tables
//! that are deleted without being read.
//!
//! Unlike TridentKV, whose partitions are separate trees, the ranges share
//! one tree; what a split buys here is the alignment of tables to the
//! ranges, which is what makes dropping one cheap.

use std::sync::Arc;

use crate::db::{Db, DbInner};
use crate::engine::{Commit, Engine};
use crate::error::Result;
use crate::key::partition::PARTITION_MARK;
use crate::key::MAX_KEY_LEN;
use crate::l0::Job;
use crate::version::{Version, VersionEdit};

/// One range partition: `[start, end)` of the key space, and the bytes of
/// the tables that begin in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangePartition {
    /// First key (empty: the start of the key space).
    pub start: Vec<u8>,
    /// First key after it (None: the end of the key space).
    pub end: Option<Vec<u8>>,
    /// Bytes of the tables whose smallest key is in the range.
    pub bytes: u64,
}

/// The range partitions of `v`.
fn ranges(v: &Version) -> Vec<RangePartition> {
    let splits = &v.splits;
    let mut out: Vec<RangePartition> = (0..=splits.len())
        .map(|i| RangePartition {
            start: if i == 0 { Vec::new() } else { splits[i - 1].clone() },
            end: splits.get(i).cloned(),
            bytes: 0,
        })
        .collect();
    for f in v.all_files() {
        let i = splits.partition_point(|s| s.as_slice() <= f.smallest_user());
        if let Some(r) = out.get_mut(i) {
            r.bytes += f.size;
        }
    }
    out
}

impl Db {
    /// The range partitions, in key order (one covering everything until
    /// the first split).
    pub fn range_partitions(&self) -> Vec<RangePartition> {
        ranges(&self.inner.eng.version())
    }

    /// Removes every key of the default partition in the range partition
    /// that holds `key`, with one range tombstone (see
    /// [`Db::delete_range`]): its tables are deleted whole.
    pub fn drop_range_partition(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let v = self.inner.eng.version();
        let i = v.splits.partition_point(|s| s.as_slice() <= key.as_ref());
        let start = if i == 0 { Vec::new() } else { v.splits[i - 1].clone() };
        let end = match v.splits.get(i) {
            Some(e) => e.clone(),
            // Past every key the default partition may hold.
            None => vec![0xff; MAX_KEY_LEN + 1],
        };
        let end = if self.inner.partitioned.load(std::sync::atomic::Ordering::Acquire) {
            end.min(PARTITION_MARK.to_vec())
        } else {
            end
        };
        self.inner.delete_range(start, end)
    }
}

impl DbInner {
    /// A job adding a split point, if a range holds more than
    /// `partition_split_bytes` and a key inside it divides its tables.
    pub(crate) fn pick_split(&self) -> Option<Job<'_>> {
        let limit = self.eng.opts.partition_split_bytes;
        if limit == 0 {
            return None;
        }
        let v = self.eng.version();
        let key = ranges(&v).iter().filter(|r| r.bytes > limit).find_map(|r| split_key(&v, r))?;
        Some(Box::new(move |eng: &Engine| {
            let mut vs = eng.versions.lock();
            if vs.current().splits.contains(&key) {
                return Ok(());
            }
            let edit = VersionEdit { split_points: vec![key], ..Default::default() };
            eng.commit(&mut vs, Commit { edit, ..Default::default() })
        }))
    }
}

/// Where to split `r`: the smallest key of the table at the middle of its
/// bytes in the level that holds most of them (levels below 0 are sorted
/// and disjoint, so no table of it spans the key); None if no key inside
/// the range divides it.
fn split_key(v: &Version, r: &RangePartition) -> Option<Vec<u8>> {
    let inside = |k: &[u8]| k > r.start.as_slice() && r.end.as_deref().is_none_or(|e| k < e);
    let level = (1..v.levels.len())
        .max_by_key(|l| v.files(*l).iter().filter(|f| in_range(r, f.smallest_user())).map(|f| f.size).sum::<u64>())?;
    let files: Vec<&Arc<crate::version::FileMeta>> =
        v.files(level).iter().filter(|f| in_range(r, f.smallest_user())).collect();
    let total: u64 = files.iter().map(|f| f.size).sum();
    let mut acc = 0;
    for f in &files {
        if acc * 2 >= total && inside(f.smallest_user()) {
            return Some(f.smallest_user().to_vec());
        }
        acc += f.size;
    }
    None
}

fn in_range(r: &RangePartition, k: &[u8]) -> bool {
    k >= r.start.as_slice() && r.end.as_deref().is_none_or(|e| k < e)
}
