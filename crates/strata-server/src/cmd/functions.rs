//! FUNCTION: Redis 7's function libraries. None can be loaded here (there
//! is no Lua yet), so the library list is always empty: FUNCTION LIST
//! answers so and FUNCTION FLUSH (which test harnesses and clients send
//! before they start) has nothing to delete. Loading one is refused.

use bytes::Bytes;

use super::{arg, is, wrong_args, Session, Shared};
use crate::resp::Reply;

pub(crate) fn function(_: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    let sub = arg(args, 1);
    if is(sub, "flush") {
        match args.len() {
            2 => Reply::ok(),
            3 if is(arg(args, 2), "async") || is(arg(args, 2), "sync") => Reply::ok(),
            3 => Reply::err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
            _ => wrong_args("function|flush"),
        }
    } else if is(sub, "list") {
        Reply::Array(Vec::new())
    } else {
        Reply::err(format!("ERR unknown subcommand '{}'. Try FUNCTION HELP.", String::from_utf8_lossy(sub)))
    }
}
