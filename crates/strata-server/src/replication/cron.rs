//! What a primary does every second unasked (Redis's `replicationCron`,
//! the part not tied to a link): after `repl-backlog-ttl` seconds without
//! a replica it frees the backlog and takes a new replication id, so the
//! memory is returned and no replica can later continue a stream whose
//! bytes are gone. A replica keeps its backlog (it may be promoted).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{new_replid, unix_secs, State, NO_REPLID};

impl State {
    /// Frees the backlog if `repl-backlog-ttl` passed with no replica
    /// attached; returns whether it did.
    pub fn expire_backlog(&self) -> bool {
        let ttl = self.settings.backlog_ttl();
        let Some(stream) = self.stream.get() else { return false };
        if ttl == 0 || self.is_replica() || !self.replicas.lock().is_empty() || !stream.backlog().0 {
            return false;
        }
        if unix_secs().saturating_sub(self.no_replicas_since.load(Ordering::Acquire)) <= ttl {
            return false;
        }
        let mut r = self.role.lock();
        r.replid = new_replid();
        r.replid2 = NO_REPLID.into();
        r.second_offset = -1;
        stream.free();
        eprintln!("strata-server: replication backlog freed after {ttl} seconds without connected replicas");
        true
    }
}

/// Starts the thread that runs [`State::expire_backlog`] every second
/// until the state is dropped or the server stops.
pub fn spawn(state: &Arc<State>) {
    let weak: Weak<State> = Arc::downgrade(state);
    let spawned = std::thread::Builder::new().name("strata-repl-cron".into()).spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        match weak.upgrade() {
            Some(s) if !s.stopping() => {
                s.expire_backlog();
            }
            _ => return,
        }
    });
    if let Err(e) = spawned {
        eprintln!("strata-server: starting the replication cron thread: {e}");
    }
}
