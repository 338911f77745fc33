//! Compaction: which files to merge (a pure policy, [`picker`]; the
//! matrix's own policy is in `matrix::policy`) and the merge itself
//! ([`executor`], writing tables with [`build_tables`]), shared by flushes
//! and every compaction.

mod executor;
pub mod picker;
#[cfg(test)]
mod picker_cases;

pub(crate) use executor::{execute, sorted_input, table_input, Merge};

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::iterator::InternalIterator;
use crate::key::partition::partition_of;
use crate::key::{user_key, Kind, ParsedKey, SeqNo, MAX_SEQ};
use crate::sstable::{TableBuilder, TableOptions};
use crate::version::filename::table_path;
use crate::version::{FileMeta, RangeDels};

pub use picker::{pick, pick_range, CompactionTask, LevelPolicy};

/// A test on a user key.
type KeyPredicate<'a> = Box<dyn Fn(&[u8]) -> bool + 'a>;

/// Decides which versions a merge may drop.
///
/// An older version of a key is dropped when a newer version is already
/// visible to every snapshot (its sequence <= the oldest snapshot). A
/// tombstone is dropped when it is visible to every snapshot and no deeper
/// level can hold the key.
pub struct Dropper<'a> {
    oldest_snapshot: SeqNo,
    current: Vec<u8>,
    has_current: bool,
    last_seq_for_key: SeqNo,
    may_exist_below: KeyPredicate<'a>,
    /// Entries dropped so far.
    pub dropped: u64,
}

impl Dropper<'_> {
    /// The sequence every reader is at or past.
    pub fn oldest_snapshot(&self) -> SeqNo {
        self.oldest_snapshot
    }
}

impl<'a> Dropper<'a> {
    /// A dropper for a merge whose output sits above the levels `may_exist_below` checks.
    pub fn new(oldest_snapshot: SeqNo, may_exist_below: impl Fn(&[u8]) -> bool + 'a) -> Dropper<'a> {
        Dropper {
            oldest_snapshot,
            current: Vec::new(),
            has_current: false,
            last_seq_for_key: MAX_SEQ,
            may_exist_below: Box::new(may_exist_below),
            dropped: 0,
        }
    }

    /// Whether to keep the entry with internal key `ikey` (entries arrive in order).
    pub fn keep(&mut self, ikey: &[u8]) -> bool {
        let Some(p) = ParsedKey::parse(ikey) else { return true };
        if !self.has_current || p.user_key != self.current.as_slice() {
            self.current.clear();
            self.current.extend_from_slice(p.user_key);
            self.has_current = true;
            self.last_seq_for_key = MAX_SEQ;
        }
        let drop = if self.last_seq_for_key <= self.oldest_snapshot {
            true
        } else {
            p.kind == Kind::Delete && p.seq <= self.oldest_snapshot && !(self.may_exist_below)(p.user_key)
        };
        self.last_seq_for_key = p.seq;
        if drop {
            self.dropped += 1;
        }
        !drop
    }
}

/// Where and how a merge writes its tables.
pub struct BuildCtx<'a> {
    /// File system.
    pub fs: &'a dyn Fs,
    /// Data directory.
    pub dir: &'a Path,
    /// Table format options.
    pub table: TableOptions,
    /// Cut outputs at about this size.
    pub target_file_size: u64,
    /// Hands out file numbers.
    pub next_number: &'a dyn Fn() -> u64,
    /// Set when the database shuts down: a merge stops early (its tables
    /// are removed) instead of holding up the close.
    pub stop: Option<&'a AtomicBool>,
    /// While this says so, the merge pauses (up to `MAX_PAUSE` at a time,
    /// so it always progresses): work that can wait gives its CPU to work
    /// that writers are waiting for.
    pub pause: Option<&'a (dyn Fn() -> bool + Sync)>,
    /// Range tombstones: an entry one hides from every reader is dropped.
    pub range_dels: Arc<RangeDels>,
    /// Range-partition split points (sorted): no output spans one.
    pub splits: Arc<Vec<Vec<u8>>>,
}

/// Longest single pause of a merge that `BuildCtx::pause` holds back.
const MAX_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// Writes the entries of `iter` that `dropper` keeps into tables of about
/// `target_file_size`, never splitting one user key across two tables.
/// Each table is fsynced; the directory is fsynced at the end.
///
/// On error every table it created is removed again (best effort), so a
/// failed flush or compaction (a full disk, say) leaves nothing behind.
pub fn build_tables(
    ctx: &BuildCtx<'_>,
    iter: &mut dyn InternalIterator,
    dropper: &mut Dropper<'_>,
    grandparents: &[Arc<FileMeta>],
) -> Result<Vec<FileMeta>> {
    let mut created = Vec::new();
    let r = build_tables_inner(ctx, iter, dropper, grandparents, &mut created);
    if r.is_err() {
        for n in created {
            let _ = ctx.fs.remove(&table_path(ctx.dir, n));
        }
    }
    r
}

fn build_tables_inner(
    ctx: &BuildCtx<'_>,
    iter: &mut dyn InternalIterator,
    dropper: &mut Dropper<'_>,
    grandparents: &[Arc<FileMeta>],
    created: &mut Vec<u64>,
) -> Result<Vec<FileMeta>> {
    let mut outputs = Vec::new();
    let mut cur: Option<(u64, TableBuilder)> = None;
    let mut gp_index = 0usize;
    let mut gp_overlap = 0u64;
    let gp_limit = ctx.target_file_size.saturating_mul(10);
    let mut seen = 0u32;
    iter.seek_to_first()?;
    while iter.valid() {
        seen = seen.wrapping_add(1);
        if seen.is_multiple_of(4096) {
            let stopped = || ctx.stop.is_some_and(|s| s.load(Ordering::Acquire));
            if let Some(pause) = ctx.pause {
                let until = std::time::Instant::now() + MAX_PAUSE;
                while pause() && !stopped() && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            if stopped() {
                return Err(Error::Closed);
            }
        }
        let key = iter.key();
        if !dropper.keep(key) || hidden_by_range(&ctx.range_dels, key, dropper.oldest_snapshot()) {
            iter.next()?;
            continue;
        }
        let uk = user_key(key);
        // Account grandparent files we have moved past.
        while let Some(g) = grandparents.get(gp_index) {
            if g.largest_user() < uk {
                gp_overlap += g.size;
                gp_index += 1;
            } else {
                break;
            }
        }
        if let Some((_, b)) = &cur {
            let last = user_key(b.last_key());
            let new_user_key = last != uk;
            let big = b.estimated_size() >= ctx.target_file_size || gp_overlap > gp_limit;
            // A table never spans two partitions, so dropping one leaves
            // whole tables to delete and none to rewrite.
            if new_user_key && (big || partition_of(last) != partition_of(uk) || crosses(&ctx.splits, last, uk)) {
                if let Some((n, b)) = cur.take() {
                    outputs.push(finish_table(n, b)?);
                }
                gp_overlap = 0;
            }
        }
        if cur.is_none() {
            let n = (ctx.next_number)();
            let path = table_path(ctx.dir, n);
            created.push(n);
            let f = ctx.fs.create(&path).map_err(|e| Error::io(&path, "create", e))?;
            cur = Some((n, TableBuilder::new(f, &path, ctx.table.clone())));
        }
        if let Some((_, b)) = &mut cur {
            b.add(key, iter.value())?;
        }
        iter.next()?;
    }
    if let Some((n, b)) = cur.take() {
        outputs.push(finish_table(n, b)?);
    }
    if !outputs.is_empty() {
        ctx.fs.sync_dir(ctx.dir).map_err(|e| Error::io(ctx.dir, "fsync dir", e))?;
    }
    Ok(outputs)
}

/// Whether a split point lies in `(last, next]`: the table holding `last`
/// must end before `next`.
fn crosses(splits: &[Vec<u8>], last: &[u8], next: &[u8]) -> bool {
    !splits.is_empty()
        && splits.partition_point(|s| s.as_slice() <= last) != splits.partition_point(|s| s.as_slice() <= next)
}

/// Whether a range tombstone hides the entry `ikey` from every reader
/// (one at or past `oldest`).
fn hidden_by_range(dels: &RangeDels, ikey: &[u8], oldest: SeqNo) -> bool {
    if dels.is_empty() {
        return false;
    }
    ParsedKey::parse(ikey).is_some_and(|p| dels.hides(p.user_key, p.seq, oldest))
}

fn finish_table(number: u64, b: TableBuilder) -> Result<FileMeta> {
    let (size, props) = b.finish()?;
    Ok(FileMeta {
        number,
        size,
        smallest: props.smallest,
        largest: props.largest,
        entries: props.entries,
        deletions: props.deletions,
        smallest_seq: props.smallest_seq,
        largest_seq: props.largest_seq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;

    #[test]
    fn dropper_keeps_what_snapshots_can_see() {
        // Versions of "k" at 9 (put), 7 (delete), 5 (put), 3 (put); oldest snapshot 6.
        let mut d = Dropper::new(6, |_| false);
        assert!(d.keep(&internal_key(b"k", 9, Kind::Put)));
        assert!(d.keep(&internal_key(b"k", 7, Kind::Delete)));
        // Snapshot 6 sees the put at 5.
        assert!(d.keep(&internal_key(b"k", 5, Kind::Put)));
        // Hidden from everyone by 5 <= 6.
        assert!(!d.keep(&internal_key(b"k", 3, Kind::Put)));
        // A tombstone visible to all, nothing below: dropped.
        assert!(!d.keep(&internal_key(b"z", 2, Kind::Delete)));
        let mut d2 = Dropper::new(6, |_| true);
        assert!(d2.keep(&internal_key(b"z", 2, Kind::Delete)));
    }
}
