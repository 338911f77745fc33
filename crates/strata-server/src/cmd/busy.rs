//! What other clients get while a script runs past `lua-time-limit`, as
//! Redis 7.0 answers them: `-BUSY` for every command but those the table
//! flags `allow_busy` (SCRIPT KILL, FUNCTION KILL, SHUTDOWN — which itself
//! refuses all but SHUTDOWN NOSAVE —, the transaction and connection
//! commands). A command refused inside MULTI
//! makes the EXEC fail; an EXEC refused discards the transaction.

use super::{Session, Shared, Spec};
use crate::resp::Reply;

/// The reply to a command that a script running past `lua-time-limit`
/// refuses, or `None` when the command may run.
pub(crate) fn refusal(shared: &Shared, sess: &mut Session, spec: &Spec) -> Option<Reply> {
    if !script_busy(shared, spec) {
        return None;
    }
    let busy = shared.scripts.busy_error();
    if sess.multi.is_some() {
        if spec.name == "exec" {
            // Redis's execCommandAbort: the transaction is discarded.
            sess.multi = None;
            sess.multi_failed = false;
            sess.unwatch();
            return Some(Reply::err(format!("EXECABORT Transaction discarded because of: {busy}")));
        }
        sess.multi_failed = true;
    }
    Some(Reply::err(busy))
}

/// Whether a script has run past `lua-time-limit` and this command must
/// get `-BUSY`.
fn script_busy(shared: &Shared, spec: &Spec) -> bool {
    // One atomic load on the common path: no script runs.
    if !shared.scripts.running() {
        return false;
    }
    if !shared.scripts.busy(super::script::lua_time_limit(shared)) {
        return false;
    }
    !spec.has(super::flag::ALLOW_BUSY)
}
