//! MEMORY USAGE: the bytes a key takes in the keyspace: its meta entry and
//! every member entry (key and value bytes, plus a per-entry overhead for
//! the engine's index and log headers). An estimate, as Redis's is.

use bytes::Bytes;

use super::{arg, is, wrong_args, CmdError, CmdResult, Ctx};
use crate::keyspace::{meta_key, types};
use crate::resp::Reply;

/// Bytes counted per stored entry besides its key and value (log entry
/// header, index node).
const ENTRY_OVERHEAD: u64 = 48;

pub(crate) fn memory(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sub = arg(args, 1);
    if !is(sub, "usage") {
        return Err(CmdError::Msg(format!(
            "ERR unknown subcommand '{}'. Try MEMORY HELP.",
            String::from_utf8_lossy(sub)
        )));
    }
    if args.len() != 3 && args.len() != 5 {
        return Ok(if args.len() < 3 { wrong_args("memory|usage") } else { Reply::err("ERR syntax error") });
    }
    if args.len() == 5 {
        if !is(arg(args, 3), "samples") {
            return Err(CmdError::Syntax);
        }
        crate::numbers::parse_i64(arg(args, 4)).ok_or(CmdError::NotInt)?;
    }
    let key = arg(args, 2);
    let Some(meta) = ctx.txn.meta(key)? else { return Ok(Reply::Nil) };
    let mut bytes = (meta_key(key).len() + meta.encode().len()) as u64 + ENTRY_OVERHEAD;
    for (k, v) in types::member_entries(&mut ctx.txn, key, &meta)? {
        bytes += (k.len() + v.len()) as u64 + ENTRY_OVERHEAD;
    }
    Ok(Reply::Int(bytes as i64))
}
