//! In-order publication of concurrent writes, with group sync.
//!
//! Writers reserve sequence numbers and log space under a short lock, then
//! copy into PM and index the memtable in parallel. Here they publish in
//! sequence order: the writer whose first sequence follows the last
//! published one becomes the leader, takes every contiguous finished
//! writer after it as its group, msyncs once if any of them asked for
//! `sync`, and publishes the whole group. So a write becomes visible (and
//! is acknowledged) only when it and every earlier write are in PM — and
//! durable, for sync writes — which is why recovery may stop at the first
//! torn entry.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::error::Result;

#[derive(Debug)]
struct Ticket {
    last: u64,
    sync: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Finished writers waiting for their turn, by first sequence.
    done: BTreeMap<u64, Ticket>,
    /// A leader is msyncing with the lock released.
    syncing: bool,
}

/// The publication order of writes.
#[derive(Debug)]
pub struct Pipeline {
    visible: AtomicU64,
    state: Mutex<State>,
    cv: Condvar,
}

impl Pipeline {
    /// A pipeline whose writes up to `last` are already visible.
    pub fn new(last: u64) -> Pipeline {
        Pipeline { visible: AtomicU64::new(last), state: Mutex::new(State::default()), cv: Condvar::new() }
    }

    /// Highest published sequence number: reads see exactly the writes up to it.
    pub fn visible(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }

    /// Publishes the finished write `[first, last]` in order. If `sync` is
    /// set, `syncer(end)` makes the log durable before the group is
    /// published; every write up to `end` is in PM when it is called. It
    /// must record a failure (poison) before it returns: the group becomes
    /// visible right after, and its members check for poison then.
    /// Returns the syncer's error if the sync covering this write failed.
    pub fn publish(&self, first: u64, last: u64, sync: bool, syncer: &dyn Fn(u64) -> Result<()>) -> Result<()> {
        let mut st = self.state.lock();
        if !sync && !st.syncing && st.done.is_empty() && self.visible() + 1 == first {
            self.visible.store(last, Ordering::Release);
            self.cv.notify_all();
            return Ok(());
        }
        st.done.insert(first, Ticket { last, sync });
        loop {
            if self.visible() >= last {
                return Ok(());
            }
            if !st.syncing && self.visible() + 1 == first {
                // Leader: take the contiguous run of finished writers.
                let mut end = last;
                let mut need_sync = false;
                let mut next = first;
                while let Some(t) = st.done.remove(&next) {
                    need_sync |= t.sync;
                    end = t.last;
                    next = t.last + 1;
                }
                let mut result = Ok(());
                if need_sync {
                    st.syncing = true;
                    drop(st);
                    result = syncer(end);
                    st = self.state.lock();
                    st.syncing = false;
                }
                // Publish even on failure so later writers do not wait
                // forever; the caller poisons the database, and every writer
                // checks for poison after publishing.
                self.visible.store(end, Ordering::Release);
                self.cv.notify_all();
                return result;
            }
            self.cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    /// Blocks until every write up to `seq` is published.
    pub fn wait_visible(&self, seq: u64) {
        if self.visible() >= seq {
            return;
        }
        let mut st = self.state.lock();
        while self.visible() < seq {
            self.cv.wait_for(&mut st, Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn out_of_order_finishers_publish_in_order() {
        let p = Arc::new(Pipeline::new(0));
        let syncs = Arc::new(AtomicU64::new(0));
        let mut hs = Vec::new();
        for i in (1..=50u64).rev() {
            let p = p.clone();
            let syncs = syncs.clone();
            hs.push(std::thread::spawn(move || {
                p.publish(i, i, i % 5 == 0, &|_| {
                    syncs.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
                // When publish returns, everything up to i is visible.
                assert!(p.visible() >= i);
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(p.visible(), 50);
        // Groups share syncs: never more than one per sync writer.
        assert!(syncs.load(Ordering::Relaxed) <= 10);
        assert!(syncs.load(Ordering::Relaxed) >= 1);
    }

    #[test]
    fn multi_sequence_writes_chain() {
        let p = Pipeline::new(10);
        p.publish(11, 15, false, &|_| Ok(())).unwrap();
        p.publish(16, 16, true, &|_| Ok(())).unwrap();
        assert_eq!(p.visible(), 16);
        assert!(p.publish(17, 20, true, &|_| Err(crate::error::Error::Closed)).is_err());
        assert_eq!(p.visible(), 20);
    }
}
