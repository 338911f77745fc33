//! Background expiry: a thread that removes keys whose time has come,
//! walking the expiry index (`e | expire_ms BE | key`) from the oldest
//! entry. Reads never see an expired key whether or not it was swept. A
//! read-only replica does not sweep: its primary sends the DELs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::cmd::{commit, Ctx, Shared};
use crate::keyspace::{expire_index_key, now_ms, parse_expire_index};
use crate::resp::Reply;
use crate::store::StoreResult;

/// Keys looked at per sweep round.
const PER_ROUND: usize = 256;

/// Removes up to `limit` expired keys of each database; returns how many
/// index entries it handled in the busiest one (expired keys and stale
/// entries).
pub fn sweep_once(shared: &Shared, limit: usize) -> StoreResult<usize> {
    // A read-only replica expires nothing itself: its primary's DEL does
    // (Redis's rule; see `Txn::keep_expired`), and its reads hide expired
    // keys. A writable one (`replica-read-only no`) sweeps, so that keys
    // its own clients wrote with a TTL go (Redis tracks those keys alone;
    // here the primary's expired keys go too, a little before its DEL).
    if shared.replication.is_replica() && shared.replication.read_only() {
        return Ok(0);
    }
    let mut most = 0;
    for db in 0..shared.dbs.len() {
        most = most.max(sweep_db(shared, db, limit)?);
    }
    Ok(most)
}

/// [`sweep_once`] for database `db`.
fn sweep_db(shared: &Shared, db: usize, limit: usize) -> StoreResult<usize> {
    let now = now_ms();
    let end = expire_index_key(now.saturating_add(1), b"");
    let due = shared.store_of(db).scan(b"e", Some(&end), limit)?;
    let n = due.len();
    for (ik, _) in due {
        let Some((ms, key)) = parse_expire_index(&ik) else { continue };
        let key = key.to_vec();
        let _lock = shared.locks.lock(&[&key]);
        let mut ctx = Ctx::new(shared, db, 2, now);
        match ctx.txn.raw_meta(&key)? {
            Some(m) if m.expire_ms == ms && m.expired(now) => {
                ctx.txn.delete_key(&key, &m)?;
                // Replicas delete it when the primary does (Redis sends DEL).
                if let Some(log) = ctx.repl.as_mut() {
                    log.push((db, vec![bytes::Bytes::from_static(b"DEL"), bytes::Bytes::from(key.clone())]));
                }
                ctx.txn.expired += 1;
                if shared.pubsub.wants(crate::pubsub::events::EXPIRED) {
                    let event = "expired";
                    ctx.events.push(crate::pubsub::events::KeyEvent {
                        class: crate::pubsub::events::EXPIRED,
                        event,
                        db,
                        key: key.clone(),
                    });
                }
            }
            Some(m) if m.expire_ms == ms => continue,
            // An index entry left behind by an older expiry: drop it.
            _ => ctx.txn.delete(ik.clone()),
        }
        // Expiry deletions need no acknowledgement: they are not waited on.
        let r = commit(ctx, Reply::ok(), &[&key]);
        if let Reply::Error(e) = r {
            return Err(crate::store::StoreError(e));
        }
    }
    Ok(n)
}

/// Starts the sweeper thread; it stops when `stop` is set.
pub fn spawn_sweeper(shared: Arc<Shared>, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("strata-expire".into()).spawn(move || {
        while !stop.load(Ordering::Acquire) {
            // A full round means more may be due: go again at once.
            let on = shared.active_expire.load(Ordering::Relaxed);
            let busy = on && matches!(sweep_once(&shared, PER_ROUND), Ok(n) if n == PER_ROUND);
            if !busy {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    })
}
