//! Commands that move or copy a whole key: RENAME, RENAMENX, COPY, and
//! RANDOMKEY (which picks one). A key's members are entries of their own
//! under the key's name, so moving a collection rewrites each of them,
//! in the command's one transaction (atomic, also across a crash).

use bytes::Bytes;
use rand::Rng;

use super::{arg, is, CmdError, CmdResult, Ctx};
use crate::keyspace::{member_prefix, meta_bucket_start, user_key_of_meta, Meta};
use crate::resp::Reply;

/// Writes a copy of `src` (with meta `meta`, expiry included) as `dst`,
/// first removing whatever `dst` holds.
fn copy_key(ctx: &mut Ctx<'_>, src: &[u8], meta: &Meta, dst: &[u8]) -> Result<(), CmdError> {
    let old = ctx.txn.meta_for_write(dst)?;
    if let Some(o) = &old {
        ctx.txn.delete_key(dst, o)?;
    }
    for &tag in meta.member_tags() {
        let from = member_prefix(tag, src);
        let to = member_prefix(tag, dst);
        for (k, v) in ctx.txn.scan_prefix(&from)? {
            let mut nk = to.clone();
            nk.extend_from_slice(k.get(from.len()..).unwrap_or_default());
            ctx.txn.put(nk, v);
        }
    }
    ctx.txn.put_meta(dst, None, meta);
    Ok(())
}

fn rename_impl(ctx: &mut Ctx<'_>, args: &[Bytes], nx: bool) -> Result<Option<bool>, CmdError> {
    let (src, dst) = (arg(args, 1), arg(args, 2));
    let Some(meta) = ctx.txn.meta_for_write(src)? else {
        return Err(CmdError::Msg("ERR no such key".into()));
    };
    if src == dst {
        return Ok(Some(!nx));
    }
    if nx && ctx.txn.meta_for_write(dst)?.is_some() {
        return Ok(Some(false));
    }
    copy_key(ctx, src, &meta, dst)?;
    ctx.txn.delete_key(src, &meta)?;
    Ok(Some(true))
}

pub(crate) fn rename(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    rename_impl(ctx, args, false)?;
    Ok(Reply::ok())
}

pub(crate) fn renamenx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(i64::from(rename_impl(ctx, args, true)? == Some(true))))
}

/// COPY source destination [DB destination-db] [REPLACE]
pub(crate) fn copy(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let (src, dst) = (arg(args, 1), arg(args, 2));
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        let a = arg(args, i);
        if is(a, "replace") {
            replace = true;
        } else if is(a, "db") && i + 1 < args.len() {
            i += 1;
            match crate::numbers::parse_i64(arg(args, i)) {
                Some(0) => {}
                Some(_) => return Err(CmdError::Msg("ERR DB index is out of range".into())),
                None => return Err(CmdError::NotInt),
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src == dst {
        return Err(CmdError::Msg("ERR source and destination objects are the same".into()));
    }
    let Some(meta) = ctx.txn.meta(src)? else { return Ok(Reply::Int(0)) };
    if !replace && ctx.txn.meta_for_write(dst)?.is_some() {
        return Ok(Reply::Int(0));
    }
    copy_key(ctx, src, &meta, dst)?;
    Ok(Reply::Int(1))
}

/// RANDOMKEY: the first live key at or after a random point of the
/// hashed meta order (wrapping around); nil when there is none.
pub(crate) fn randomkey(ctx: &mut Ctx<'_>, _: &[Bytes]) -> CmdResult {
    let start = meta_bucket_start(u64::from(rand::thread_rng().gen::<u32>()));
    for (from, to) in [(start.clone(), Some(b"n".to_vec())), (b"m".to_vec(), Some(start))] {
        let mut cursor = from;
        loop {
            let chunk = ctx.txn.scan(&cursor, to.as_deref(), 256)?;
            for (mk, _) in &chunk {
                let Some(key) = user_key_of_meta(mk) else { continue };
                // Expired keys are skipped (and not removed: a read).
                if ctx.txn.meta(key)?.is_some() {
                    return Ok(Reply::bulk(key));
                }
            }
            match chunk.last() {
                Some((k, _)) if chunk.len() == 256 => {
                    cursor = k.clone();
                    cursor.push(0);
                }
                _ => break,
            }
        }
    }
    Ok(Reply::Nil)
}
