//! DEBUG: the subcommands that inspect rather than break: `DIGEST` and
//! `DIGEST-VALUE` (Redis's dataset and value digests, computed the way
//! Redis 7.0 does, see [`crate::rdb::digest`]), `SET-ACTIVE-EXPIRE` (the
//! expiry sweeper off and on) and `SLEEP` (the connection's event loop
//! and the replication link). Redis's
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
