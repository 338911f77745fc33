//! OBJECT: ENCODING, REFCOUNT, IDLETIME, FREQ, HELP.
//!
//! The keyspace's layouts (entries of the ordered keyspace; small hashes
//! packed in their meta, with thresholds of their own) are not Redis's
//! listpack or hashtable, so they are not what ENCODING reports. ENCODING
//! answers with the encoding Redis 7.0 gives a value of the same contents
//! under the same thresholds (the `*-max-listpack-*` and
//! `set-max-intset-entries` parameters, which CONFIG SET accepts): what a
//! client that reads it (to estimate memory, or to check its settings)
//! expects. It depends on the contents only: Redis never converts a big
//! encoding back when the value shrinks; here it does. REFCOUNT is 1 (no
//! value is shared); IDLETIME is 0 (access times are not tracked); FREQ is
//! refused as Redis refuses it without an LFU policy (there is none here).

use bytes::Bytes;

use super::{arg, is, CmdError, CmdResult, Ctx};
use crate::keyspace::types::{set, zset};
use crate::keyspace::{KeyType, Meta};
use crate::resp::Reply;

/// Whether every member of the sorted set `key` is at most `max_len` bytes.
fn members_short(ctx: &mut Ctx<'_>, key: &[u8], max_len: i64) -> Result<bool, CmdError> {
    let max = usize::try_from(max_len).unwrap_or(0);
    Ok(zset::all_members(&mut ctx.txn, key)?.iter().all(|(m, _)| m.len() <= max))
}

/// The encoding Redis 7.0 gives a value with these contents.
fn encoding(ctx: &mut Ctx<'_>, key: &[u8], meta: &Meta) -> Result<&'static str, CmdError> {
    let t = &ctx.shared.tuning;
    let count = i64::try_from(meta.count()).unwrap_or(i64::MAX);
    Ok(match meta.kind {
        KeyType::String => {
            let v = &meta.body;
            if v.len() <= 20 && crate::numbers::parse_i64(v).is_some() {
                "int"
            } else if v.len() <= 44 {
                "embstr"
            } else {
                "raw"
            }
        }
        KeyType::List => "quicklist",
        KeyType::Hash => {
            let max = usize::try_from(t.int("hash-max-listpack-value")).unwrap_or(0);
            let small = count <= t.int("hash-max-listpack-entries")
                && super::hashes::all_fields(ctx, key)?.iter().all(|(f, v)| f.len() <= max && v.len() <= max);
            if small {
                "listpack"
            } else {
                "hashtable"
            }
        }
        KeyType::Set => {
            let ints = count <= t.int("set-max-intset-entries")
                && set::members(&mut ctx.txn, key)?.iter().all(|m| crate::numbers::parse_i64(m).is_some());
            if ints {
                "intset"
            } else {
                "hashtable"
            }
        }
        KeyType::ZSet => {
            let small = count <= t.int("zset-max-listpack-entries")
                && members_short(ctx, key, t.int("zset-max-listpack-value"))?;
            if small {
                "listpack"
            } else {
                "skiplist"
            }
        }
    })
}

const HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Print this help.",
];

pub(crate) fn object(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let sub = arg(args, 1);
    if is(sub, "help") && args.len() == 2 {
        return Ok(Reply::Array(HELP.iter().map(|l| Reply::Simple(l)).collect()));
    }
    let Some(name) = ["encoding", "refcount", "idletime", "freq", "help"].into_iter().find(|w| is(sub, w)) else {
        return Err(CmdError::Msg(format!(
            "ERR unknown subcommand '{}'. Try OBJECT HELP.",
            String::from_utf8_lossy(sub)
        )));
    };
    if args.len() != 3 {
        return Ok(super::wrong_args(&format!("object|{name}")));
    }
    let key = arg(args, 2);
    let Some(meta) = ctx.txn.meta(key)? else { return Ok(Reply::Nil) };
    if is(sub, "encoding") {
        Ok(Reply::bulk(encoding(ctx, key, &meta)?))
    } else if is(sub, "refcount") {
        Ok(Reply::Int(1))
    } else if is(sub, "idletime") {
        Ok(Reply::Int(0))
    } else {
        Err(CmdError::Msg(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust."
                .into(),
        ))
    }
}
