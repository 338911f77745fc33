//! DEBUG: the subcommands that inspect rather than break: `DIGEST` and
//! `DIGEST-VALUE` (Redis's dataset and value digests, computed the way
//! Redis 7.0 does, see [`crate::rdb::digest`]), `SET-ACTIVE-EXPIRE` (the
//! expiry sweeper off and on), `SLEEP` (the connection's event loop
//! and the replication link) and `POPULATE` (test data). Redis's
//! subcommands that crash, reload or reconfigure the server are not here
//! and answer an unknown-subcommand error.

use std::time::Duration;

use bytes::Bytes;

use super::{arg, is, Session, Shared};
use crate::rdb::digest;
use crate::resp::Reply;

/// Longest DEBUG SLEEP honoured, so a typo cannot hold a connection for
/// days.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

pub(crate) fn debug(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    let sub = arg(args, 1);
    if is(sub, "digest") && args.len() == 2 {
        let views = match shared.store.snapshot_databases(shared.dbs.len()) {
            Ok(v) => v,
            Err(e) => return Reply::err(format!("ERR {e}")),
        };
        match digest::dataset_digest(&views) {
            Ok(d) => Reply::Status(d),
            Err(e) => Reply::err(format!("ERR {e}")),
        }
    } else if is(sub, "digest-value") {
        let views = match shared.store.snapshot_databases(shared.dbs.len()) {
            Ok(v) => v,
            Err(e) => return Reply::err(format!("ERR {e}")),
        };
        let Some(view) = views.get(sess.db) else { return Reply::err("ERR DB index is out of range") };
        let digests: Result<Vec<Reply>, _> =
            args.iter().skip(2).map(|k| digest::value_digest(view.as_ref(), k).map(Reply::Status)).collect();
        digests.map_or_else(|e| Reply::err(format!("ERR {e}")), Reply::Array)
    } else if is(sub, "help") && args.len() == 2 {
        Reply::Array(
            [
                "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DIGEST",
                "    Output a hex signature representing the current DB content.",
                "DIGEST-VALUE <key> [<key> ...]",
                "    Output a hex signature of the values of all the specified keys.",
                "POPULATE <count> [<prefix>] [<size>]",
                "    Create <count> string keys named key:<num>. If <prefix> is specified then",
                "    it is used instead of the 'key' prefix. These are not propagated to",
                "    replicas as DEBUG: each key goes as a SET ... NX.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not accessed.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
                "HELP",
                "    Print this help.",
            ]
            .into_iter()
            .map(|l| Reply::Status(l.to_string()))
            .collect(),
        )
    } else if is(sub, "populate") && (3..=5).contains(&args.len()) {
        populate(shared, sess, args)
    } else if is(sub, "set-active-expire") && args.len() == 3 {
        let on = match arg(args, 2) {
            b"0" => false,
            b"1" => true,
            _ => return Reply::err("ERR value is not an integer or out of range"),
        };
        shared.active_expire.store(on, std::sync::atomic::Ordering::Relaxed);
        Reply::ok()
    } else if is(sub, "sleep") && args.len() == 3 {
        let Some(secs) = std::str::from_utf8(arg(args, 2)).ok().and_then(|s| s.parse::<f64>().ok()) else {
            return Reply::err("ERR value is not a valid float");
        };
        if secs.is_finite() && secs > 0.0 {
            // As Redis's whole server sleeps, the replication link does
            // too: it applies nothing and does not reconnect meanwhile.
            let _frozen = shared.replication.apply_lock.lock();
            std::thread::sleep(Duration::from_secs_f64(secs).min(MAX_SLEEP));
        }
        Reply::ok()
    } else {
        Reply::err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}

/// Keys written per engine batch by POPULATE.
const POPULATE_BATCH: usize = 1000;

/// DEBUG POPULATE count [prefix] [size]: string keys `prefix:N` (`key:N`)
/// holding `value:N`, cut or zero-padded to `size` bytes when given, in
/// the connection's database; keys that exist are left alone, as in
/// Redis. They are written as `SET ... NX` commands, in batches, so they
/// replicate and are as durable as any write.
fn populate(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    let positive = |a: &[u8]| std::str::from_utf8(a).ok().and_then(|s| s.parse::<u64>().ok());
    let Some(count) = positive(arg(args, 2)) else {
        return Reply::err("ERR value is out of range, must be positive");
    };
    let prefix = args.get(3).map_or(&b"key"[..], |p| p.as_ref());
    let size = match args.get(4) {
        Some(a) => match positive(a).and_then(|n| usize::try_from(n).ok()) {
            Some(n) => Some(n),
            None => return Reply::err("ERR value is out of range, must be positive"),
        },
        None => None,
    };
    let mut writer = Session::new(shared, sess.addr.clone());
    writer.db = sess.db;
    writer.authed = true;
    let mut batch = Vec::with_capacity(POPULATE_BATCH);
    let mut scratch = Vec::new();
    for j in 0..count {
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!(":{j}").as_bytes());
        let mut value = format!("value:{j}").into_bytes();
        if let Some(n) = size {
            value.resize(n, 0);
        }
        batch.push(vec![Bytes::from_static(b"SET"), Bytes::from(key), Bytes::from(value), Bytes::from_static(b"NX")]);
        if batch.len() >= POPULATE_BATCH || j + 1 == count {
            scratch.clear();
            super::execute_batch(shared, &mut writer, std::mem::take(&mut batch), &mut scratch);
            // A refused write (out of memory, a full store) ends it there.
            if scratch.first() == Some(&b'-') || scratch.windows(3).any(|w| w == b"\r\n-") {
                let line = scratch.split(|&b| b == b'\n').find(|l| l.first() == Some(&b'-')).unwrap_or_default();
                let msg = String::from_utf8_lossy(line.get(1..).unwrap_or_default()).trim_end().to_string();
                return Reply::err(msg);
            }
        }
    }
    Reply::ok()
}
