//! Commands that move or copy a whole key: RENAME, RENAMENX, COPY, MOVE
//! (to another database), and RANDOMKEY (which picks one). A key's members are entries of their own
//! under the key's name, so moving a collection rewrites each of them,
//! in the command's one transaction (atomic, also across a crash).

use bytes::Bytes;
use rand::Rng;

use super::{arg, is, CmdError, CmdResult, Ctx};
use crate::keyspace::{meta_bucket_start, types, user_key_of_meta, Meta};
use crate::pubsub::events::GENERIC;
use crate::resp::Reply;

/// Writes a copy of `src` (with meta `meta`, expiry included) as `dst`,
/// first removing whatever `dst` holds; in the selected database.
fn copy_key(ctx: &mut Ctx<'_>, src: &[u8], meta: &Meta, dst: &[u8]) -> Result<(), CmdError> {
    let db = ctx.db;
    copy_key_to(ctx, src, meta, (db, dst))
}

/// [`copy_key`] from the selected database to key `dst.1` of database
/// `dst.0`.
fn copy_key_to(ctx: &mut Ctx<'_>, src: &[u8], meta: &Meta, dst: (usize, &[u8])) -> Result<(), CmdError> {
    let (db, dst) = dst;
    let old = ctx.txn_of(db).meta_for_write(dst)?;
    if let Some(o) = &old {
        ctx.txn_of(db).delete_key(dst, o)?;
    }
    for (k, v) in types::members_renamed(&mut ctx.txn, src, meta, dst)? {
        ctx.txn_of(db).put(k, v);
    }
    ctx.txn_of(db).put_meta(dst, None, meta);
    Ok(())
}

/// A database index argument of a data command, with Redis's errors.
fn db_arg(ctx: &Ctx<'_>, a: &[u8]) -> Result<usize, CmdError> {
    super::connection::db_index(ctx.shared, a).map_err(|e| CmdError::Msg(e.into()))
}

/// MOVE key db: moves `key` to database `db` unless it exists there.
pub(crate) fn move_(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let db = db_arg(ctx, arg(args, 2))?;
    if db == ctx.db {
        return Err(CmdError::Msg("ERR source and destination objects are the same".into()));
    }
    let Some(meta) = ctx.txn.meta_for_write(key)? else { return Ok(Reply::Int(0)) };
    if ctx.txn_of(db).meta_for_write(key)?.is_some() {
        return Ok(Reply::Int(0));
    }
    copy_key_to(ctx, key, &meta, (db, key))?;
    ctx.txn.delete_key(key, &meta)?;
    let here = ctx.db;
    ctx.notify_direct(here, GENERIC, "move_from", key);
    ctx.notify_direct(db, GENERIC, "move_to", key);
    Ok(Reply::Int(1))
}

/// SWAPDB: refused (see README, "Where it differs"): swapping two
/// databases' partitions is not one atomic step in the engine.
pub(crate) fn swapdb(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    db_arg(ctx, arg(args, 1))?;
    db_arg(ctx, arg(args, 2))?;
    Err(CmdError::Msg("ERR SWAPDB is not supported by strata-server".into()))
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
    let mut db = ctx.db;
    let mut i = 3;
    while i < args.len() {
        let a = arg(args, i);
        if is(a, "replace") {
            replace = true;
        } else if is(a, "db") && i + 1 < args.len() {
            i += 1;
            db = db_arg(ctx, arg(args, i))?;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src == dst && db == ctx.db {
        return Err(CmdError::Msg("ERR source and destination objects are the same".into()));
    }
    let Some(meta) = ctx.txn.meta(src)? else { return Ok(Reply::Int(0)) };
    if !replace && ctx.txn_of(db).meta_for_write(dst)?.is_some() {
        return Ok(Reply::Int(0));
    }
    copy_key_to(ctx, src, &meta, (db, dst))?;
    ctx.notify_in(db, GENERIC, "copy_to", dst);
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
