//! Group commit: writers that need durability wait on one shared sync
//! (fsync of the command log, msync of the engine's PM log) instead of
//! each making their own, and they wait after releasing their key locks,
//! so even writers of one hot key share a sync.

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
struct State {
    /// Tickets handed out: every write with a ticket <= this is applied.
    applied: u64,
    /// Every write with a ticket <= this is durable.
    synced: u64,
    /// A leader is syncing.
    syncing: bool,
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

    /// Records that everything up to `ticket` is durable (a sync made elsewhere).
    pub fn mark_synced(&self, ticket: u64) {
        let mut s = self.state.lock();
        s.synced = s.synced.max(ticket);
        self.cv.notify_all();
    }

    /// The last ticket handed out.
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
            if s.syncing {
                self.cv.wait(&mut s);
                continue;
            }
            s.syncing = true;
            let target = s.applied;
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
    fn failed_sync_is_reported_and_retried() {
        let g = GroupSync::default();
        let t = g.applied();
        assert_eq!(g.wait(t, || Err("eio")), Err("eio"));
        assert_eq!(g.wait(t, || Ok::<(), &str>(())), Ok(()));
    }
}
