//! Group commit: writers that need durability wait on one shared sync
//! (fsync of the command log, msync of the engine's PM log) instead of
//! each making their own. The event loops wait once per pass, after every
//! command of the pass ran, so one sync covers all their clients, and
//! loops waiting at the same time share it too.

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
struct State {
    /// Tickets handed out.
    applied: u64,
    /// Every write with a ticket <= this is durable.
    synced: u64,
    /// A leader is syncing.
    syncing: bool,
    /// Tickets of writes begun ([`GroupSync::begin`]) but not yet applied.
    inflight: Vec<u64>,
}

impl State {
    /// Every write with a ticket <= this is applied (a sync started now covers it).
    fn syncable(&self) -> u64 {
        self.inflight.iter().min().map(|t| t - 1).unwrap_or(self.applied)
    }
}

/// Tickets for applied writes and a leader/follower wait for durability.
#[derive(Default)]
pub struct GroupSync {
    state: Mutex<State>,
    cv: Condvar,
}

impl GroupSync {
    /// Call once a write is applied (in the order writes reach the log, if
    /// the log is ordered); returns its ticket.
    pub fn applied(&self) -> u64 {
        let mut s = self.state.lock();
        s.applied += 1;
        s.applied
    }

    /// Call before a write may become visible; returns its ticket, which
    /// [`GroupSync::last_applied`] includes at once (so a reader that saw
    /// the write waits for it) but no sync covers until [`GroupSync::end`].
    pub fn begin(&self) -> u64 {
        let mut s = self.state.lock();
        s.applied += 1;
        let t = s.applied;
        s.inflight.push(t);
        t
    }

    /// The write of `ticket` (from [`GroupSync::begin`]) is applied, or failed.
    pub fn end(&self, ticket: u64) {
        let mut s = self.state.lock();
        s.inflight.retain(|&t| t != ticket);
        self.cv.notify_all();
    }

    /// Records that everything up to `ticket` is durable (a sync made elsewhere).
    pub fn mark_synced(&self, ticket: u64) {
        let mut s = self.state.lock();
        s.synced = s.synced.max(ticket);
        self.cv.notify_all();
    }

    /// The last ticket known durable.
    pub fn last_synced(&self) -> u64 {
        self.state.lock().synced
    }

    /// The ticket of the last write applied.
    pub fn last_applied(&self) -> u64 {
        self.state.lock().applied
    }

    /// Waits until `ticket` is durable; one caller at a time runs `sync`,
    /// which covers every write applied before it started.
    pub fn wait<E>(&self, ticket: u64, sync: impl Fn() -> Result<(), E>) -> Result<(), E> {
        let mut s = self.state.lock();
        loop {
            if s.synced >= ticket {
                return Ok(());
            }
            let target = s.syncable();
            // A sync is running, or the write waited for is still in flight.
            if s.syncing || target <= s.synced {
                self.cv.wait(&mut s);
                continue;
            }
            s.syncing = true;
            drop(s);
            let res = sync();
            s = self.state.lock();
            s.syncing = false;
            if res.is_ok() {
                s.synced = s.synced.max(target);
            }
            self.cv.notify_all();
            res?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn one_sync_serves_many_waiters() {
        let g = Arc::new(GroupSync::default());
        let syncs = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (g, syncs) = (g.clone(), syncs.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let t = g.applied();
                        g.wait(t, || {
                            syncs.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(std::time::Duration::from_micros(200));
                            Ok::<(), ()>(())
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = syncs.load(Ordering::Relaxed);
        assert!((1..=400).contains(&n), "{n}");
        assert_eq!(g.last_applied(), 400);
    }

    #[test]
    fn in_flight_writes_are_not_covered_early() {
        let g = Arc::new(GroupSync::default());
        let t = g.begin();
        let g2 = g.clone();
        let waiter = std::thread::spawn(move || g2.wait(t, || Ok::<(), ()>(())));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished());
        g.end(t);
        assert_eq!(waiter.join().unwrap(), Ok(()));
        let a = g.begin();
        let b = g.applied();
        // `b` is applied but `a` is not: a sync now must not claim `b`.
        let (g3, synced) = (g.clone(), Arc::new(AtomicU64::new(0)));
        let s3 = synced.clone();
        let waiter = std::thread::spawn(move || {
            g3.wait(b, || {
                s3.store(1, Ordering::Relaxed);
                Ok::<(), ()>(())
            })
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished());
        g.end(a);
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(synced.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn failed_sync_is_reported_and_retried() {
        let g = GroupSync::default();
        let t = g.applied();
        assert_eq!(g.wait(t, || Err("eio")), Err("eio"));
        assert_eq!(g.wait(t, || Ok::<(), &str>(())), Ok(()));
    }
}
