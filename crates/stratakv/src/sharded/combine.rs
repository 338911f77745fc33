//! Combining: a blocking caller applies an idle shard's queue itself
//! instead of handing its request to the worker, and reads a shard
//! directly when nothing is queued there.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use crate::batch::WriteBatch;
use crate::db::Db;
use crate::error::Result;

use super::iter::check_key;
use super::layout::shard_of;
use super::queue::Queue;
use super::worker::Applier;
use super::Sharded;

/// Most runs a combining caller applies before it leaves the rest to the
/// worker.
const CALLER_RUNS: usize = 8;

/// The shards a request was pushed to.
pub(super) enum Touched {
    /// None (the request was refused before it was pushed).
    None,
    /// One shard.
    One(usize),
    /// These shards.
    Many(Vec<usize>),
    /// Every shard.
    All,
}

impl Sharded {
    /// Gets the requests just pushed to the shards `t` applied: with `help`
    /// (a blocking caller) and `callers_apply`, the caller applies each idle
    /// shard's queue itself; otherwise, or where a worker or another caller
    /// holds the queue, the holder or the woken worker does.
    pub(super) fn kick(&self, t: &Touched, help: bool) {
        let one = |s: usize| {
            let Some(q) = self.queues.get(s) else { return };
            if help && self.callers_apply {
                let mut items = VecDeque::new();
                if q.try_claim(&mut items) {
                    let Some(a) = self.appliers.get(s) else { return q.release() };
                    a.apply(&mut items);
                    apply_rest(q, a);
                }
                // Not claimed: the holder releases with requests queued and
                // so wakes the worker, or the worker is the holder.
            } else {
                q.notify();
            }
        };
        match t {
            Touched::None => {}
            Touched::One(s) => one(*s),
            Touched::Many(v) => v.iter().copied().for_each(one),
            Touched::All => (0..self.queues.len()).for_each(one),
        }
    }

    /// A blocking single-shard write applied by the caller without a trip
    /// through the queue, when `callers_apply` is on and the shard's queue
    /// is empty and unclaimed (so every request pushed before is applied):
    /// the same order as pushing it and applying the queue, without the
    /// request, its completion and their allocations. Hands the batch back
    /// when that does not hold.
    pub(super) fn write_direct(&self, batch: WriteBatch, sync: bool) -> std::result::Result<Result<()>, WriteBatch> {
        if !self.callers_apply {
            return Err(batch);
        }
        let n = self.dbs.len();
        let single = {
            let mut shards = batch.iter().map(|(_, k, _)| shard_of(k, n));
            shards.next().filter(|&s| shards.all(|x| x == s))
        };
        let (Some(q), Some(a)) = (single.and_then(|s| self.queues.get(s)), single.and_then(|s| self.appliers.get(s)))
        else {
            return Err(batch);
        };
        if let Err(e) = self.check_write(&batch) {
            return Ok(Err(e));
        }
        if !q.claim_idle(|| {
            self.gsn.fetch_add(1, Ordering::Relaxed);
        }) {
            return Err(batch);
        }
        let r = a.apply_direct(&batch, sync);
        apply_rest(q, a);
        Ok(r)
    }

    /// The shard a blocking read of `keys` may read directly, without a
    /// trip through the queue: with `callers_apply`, when every key is in
    /// one shard and every write pushed to it is applied (so this caller's
    /// async ones too; one shard cannot show half a cross-shard batch).
    /// Reads queued there meanwhile do not matter: a read changes nothing.
    pub(super) fn direct_reader<K: AsRef<[u8]>>(&self, keys: &[K]) -> Option<&Db> {
        if !self.callers_apply {
            return None;
        }
        let n = self.dbs.len();
        let mut shards = keys.iter().map(|k| shard_of(k.as_ref(), n));
        let s = shards.next()?;
        if !shards.all(|x| x == s) || keys.iter().any(|k| check_key(k.as_ref()).is_err()) {
            return None;
        }
        self.queues.get(s).filter(|q| q.writes_applied()).and(self.dbs.get(s))
    }
}

/// For a caller holding `q`'s claim after its own run: requests that came
/// meanwhile are folded into its next runs (their callers wait on it), a
/// few runs at most so it gets back to its own work; then the claim ends.
fn apply_rest(q: &Queue, a: &Applier) {
    let mut items = VecDeque::new();
    let mut runs = 1;
    while runs < CALLER_RUNS && q.next_run(&mut items) {
        a.apply(&mut items);
        runs += 1;
    }
    if runs == CALLER_RUNS {
        q.release();
    }
}
