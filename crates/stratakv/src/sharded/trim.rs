//! Trimming the coordinator log without making a writer wait for it.
//!
//! A record may go once every shard has applied its part durably. When the
//! log passes its limit, the writer that appended last pushes a sync marker
//! into every queue (behind every part of every record so far: parts are
//! queued with the log's lock held, and so is this) and notes the log's
//! length; it does not wait. A later writer that finds every marker done
//! drops the records up to that length ([`CoordLog::drop_prefix`]), keeping
//! those appended since. A marker that failed (a shard could not apply or
//! sync) leaves every record in place for the next trim, and for recovery.

use std::sync::atomic::Ordering;

use super::combine::Touched;
use super::coord::CoordLog;
use super::Sharded;

impl Sharded {
    /// Finishes the trim under way if its markers are done, and starts one
    /// when the log is over its limit (call with the log locked).
    pub(super) fn trim_coord(&self, coord: &mut CoordLog) {
        let mut pending = self.trim.lock();
        if let Some((upto, c)) = pending.as_mut() {
            let Some(r) = c.try_take() else { return };
            let upto = *upto;
            *pending = None;
            // A marker settles owed parts before it syncs, so one that
            // returned Ok means no part of a record up to `upto` is owed.
            if r.is_ok() && !self.poisoned.load(Ordering::Acquire) && coord.drop_prefix(upto).is_err() && coord.failed()
            {
                // The log's durable state is unknown: no more records.
                self.poisoned.store(true, Ordering::Release);
            }
        }
        if pending.is_none() && coord.len() > self.coord_limit && !coord.failed() {
            *pending = Some((coord.len(), self.sync_all()));
            // The workers apply the markers (and what is queued before them).
            self.kick(&Touched::All, false);
        }
    }
}
