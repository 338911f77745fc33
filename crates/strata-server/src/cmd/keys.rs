//! Keyspace commands: DEL/UNLINK, EXISTS, TYPE, SCAN, KEYS, EXPIRE family,
//! TTL/PTTL, PERSIST.

use bytes::Bytes;

use super::{arg, int_arg, is, CmdError, CmdResult, Ctx};
use crate::glob::glob_match;
use crate::keyspace::{bucket_of_meta, meta_bucket_start, user_key_of_meta, KeyType, Meta};
use crate::resp::Reply;

pub(crate) fn del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for k in args.iter().skip(1) {
        if let Some(m) = ctx.txn.raw_meta(k)? {
            ctx.txn.delete_key(k, &m)?;
            if ctx.txn.is_expired(&m) {
                ctx.txn.expired += 1;
                ctx.txn.note("expired", k);
            } else {
                n += 1;
                ctx.txn.note("del", k);
            }
        }
    }
    Ok(Reply::Int(n))
}

pub(crate) fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut n = 0;
    for k in args.iter().skip(1) {
        if ctx.txn.meta(k)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

pub(crate) fn type_(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Simple(ctx.txn.meta(arg(args, 1))?.map(|m| m.kind.name()).unwrap_or("none")))
}

/// Options of SCAN: MATCH, COUNT, TYPE.
struct ScanOpts {
    pattern: Option<Vec<u8>>,
    count: usize,
    kind: Option<KeyType>,
    /// A TYPE filter naming no type matches nothing.
    kind_unknown: bool,
}

fn scan_opts(args: &[Bytes], from: usize) -> Result<ScanOpts, CmdError> {
    let mut o = ScanOpts { pattern: None, count: 10, kind: None, kind_unknown: false };
    let mut i = from;
    while i < args.len() {
        let (opt, val) = (arg(args, i), args.get(i + 1).ok_or(CmdError::Syntax)?);
        if is(opt, "match") {
            o.pattern = Some(val.to_vec());
        } else if is(opt, "count") {
            let n = int_arg(val)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = n.min(1 << 20) as usize;
        } else if is(opt, "type") {
            o.kind = KeyType::parse(val);
            o.kind_unknown = o.kind.is_none();
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

fn keep(o: &ScanOpts, key: &[u8], meta: &Meta, now: u64) -> bool {
    !meta.expired(now)
        && !o.kind_unknown
        && o.kind.is_none_or(|k| k == meta.kind)
        && o.pattern.as_deref().is_none_or(|p| glob_match(p, key))
}

/// SCAN cursor: 0 starts (and ends); otherwise 1 + the hash bucket of
/// the next meta key to visit. Buckets are finished whole, so a key
/// present for the whole iteration is returned at least once.
pub(crate) fn scan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let cursor: u64 = std::str::from_utf8(arg(args, 1))
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::Msg("ERR invalid cursor".into()))?;
    let o = scan_opts(args, 2)?;
    let done = |keys: Vec<Reply>| Reply::Array(vec![Reply::bulk("0"), Reply::Array(keys)]);
    let bucket = cursor.saturating_sub(1);
    if bucket > u64::from(u32::MAX) {
        return Ok(done(Vec::new()));
    }
    let store = ctx.txn.store();
    let now = ctx.txn.now_ms;
    let mut start = meta_bucket_start(bucket);
    let mut examined = 0usize;
    let mut last_bucket: Option<u32> = None;
    let mut out = Vec::new();
    let chunk_size = o.count.clamp(64, 4096) + 16;
    loop {
        let chunk = store.scan(&start, Some(b"n"), chunk_size)?;
        let short = chunk.len() < chunk_size;
        for (mk, v) in &chunk {
            let b = bucket_of_meta(mk);
            if examined >= o.count && b != last_bucket {
                let next = b.map(|b| u64::from(b) + 1).unwrap_or(0);
                return Ok(Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(out)]));
            }
            examined += 1;
            last_bucket = b;
            let (Some(key), Some(meta)) = (user_key_of_meta(mk), Meta::decode(v)) else { continue };
            if keep(&o, key, &meta, now) {
                out.push(Reply::bulk(key));
            }
        }
        match chunk.last() {
            Some((k, _)) if !short => {
                start = k.clone();
                start.push(0);
            }
            _ => return Ok(done(out)),
        }
    }
}

pub(crate) fn keys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let o = ScanOpts { pattern: Some(arg(args, 1).to_vec()), count: 0, kind: None, kind_unknown: false };
    let store = ctx.txn.store();
    let now = ctx.txn.now_ms;
    let mut out = Vec::new();
    let mut start = b"m".to_vec();
    loop {
        let chunk = store.scan(&start, Some(b"n"), 4096)?;
        for (mk, v) in &chunk {
            if let (Some(key), Some(meta)) = (user_key_of_meta(mk), Meta::decode(v)) {
                if keep(&o, key, &meta, now) {
                    out.push(Reply::bulk(key));
                }
            }
        }
        match chunk.last() {
            Some((k, _)) if chunk.len() == 4096 => {
                start = k.clone();
                start.push(0);
            }
            _ => return Ok(Reply::Array(out)),
        }
    }
}

fn expire_generic(ctx: &mut Ctx<'_>, args: &[Bytes], unit_ms: i128, absolute: bool, name: &str) -> CmdResult {
    let key = arg(args, 1);
    let n = i128::from(int_arg(arg(args, 2))?);
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in args.iter().skip(3) {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            return Err(CmdError::Msg(format!("ERR Unsupported option {}", String::from_utf8_lossy(a))));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::Msg("ERR NX and XX, GT or LT options at the same time are not compatible".into()));
    }
    if gt && lt {
        return Err(CmdError::Msg("ERR GT and LT options at the same time are not compatible".into()));
    }
    let now = i128::from(ctx.txn.now_ms);
    let when = n * unit_ms + if absolute { 0 } else { now };
    // Redis refuses a time whose conversion to ms overflows either way, and
    // one whose sum with now overflows upwards.
    let bounds = i128::from(i64::MIN)..=i128::from(i64::MAX);
    if when > i128::from(i64::MAX) || !bounds.contains(&(n * unit_ms)) {
        return Err(CmdError::Msg(format!("ERR invalid expire time in '{name}' command")));
    }
    let Some(meta) = ctx.txn.meta_for_write(key)? else { return Ok(Reply::Int(0)) };
    let cur = meta.expire_ms;
    // Kept past expiries (the master client) must stay expiries: 0 is none.
    let when_u = when.max(1) as u64;
    let allowed = (!nx || cur == 0)
        && (!xx || cur != 0)
        && (!gt || (cur != 0 && when_u > cur))
        && (!lt || cur == 0 || when_u < cur);
    if !allowed {
        return Ok(Reply::Int(0));
    }
    if when <= now && !ctx.txn.keep_expired {
        // An expiry in the past deletes the key: a `del` event, and a DEL
        // to replicas, as Redis (a Redis replica would keep the key, its
        // expiry passed, until the primary deletes it).
        ctx.txn.delete_key(key, &meta)?;
        ctx.txn.note("del", key);
        ctx.propagate_as(vec![vec![Bytes::from_static(b"DEL"), Bytes::copy_from_slice(key)]]);
        return Ok(Reply::Int(1));
    }
    let mut new = meta.clone();
    new.expire_ms = when_u;
    ctx.txn.put_meta(key, Some(&meta), &new);
    Ok(Reply::Int(1))
}

pub(crate) fn expire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 1000, false, "expire")
}

pub(crate) fn pexpire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 1, false, "pexpire")
}

pub(crate) fn expireat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 1000, true, "expireat")
}

pub(crate) fn pexpireat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 1, true, "pexpireat")
}

fn ttl_ms(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<i64, CmdError> {
    Ok(match ctx.txn.meta(key)? {
        None => -2,
        Some(m) if m.expire_ms == 0 => -1,
        Some(m) => m.expire_ms.saturating_sub(ctx.txn.now_ms) as i64,
    })
}

pub(crate) fn ttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let ms = ttl_ms(ctx, arg(args, 1))?;
    Ok(Reply::Int(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

pub(crate) fn pttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ttl_ms(ctx, arg(args, 1))?))
}

/// EXPIRETIME / PEXPIRETIME: the absolute expiry (-1 none, -2 no key).
fn expire_time(ctx: &mut Ctx<'_>, key: &[u8], ms: bool) -> CmdResult {
    Ok(Reply::Int(match ctx.txn.meta(key)? {
        None => -2,
        Some(m) if m.expire_ms == 0 => -1,
        Some(m) if ms => m.expire_ms as i64,
        // Rounded to the nearest second, as Redis does.
        Some(m) => (m.expire_ms.saturating_add(500) / 1000) as i64,
    }))
}

pub(crate) fn expiretime(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    expire_time(ctx, arg(args, 1), false)
}

pub(crate) fn pexpiretime(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    expire_time(ctx, arg(args, 1), true)
}

pub(crate) fn persist(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    match ctx.txn.meta_for_write(key)? {
        Some(m) if m.expire_ms != 0 => {
            let mut new = m.clone();
            new.expire_ms = 0;
            ctx.txn.put_meta(key, Some(&m), &new);
            Ok(Reply::Int(1))
        }
        _ => Ok(Reply::Int(0)),
    }
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};

    use crate::cmd::tests::server;
    use crate::cmd::{execute, execute_batch, Session, Shared};
    use crate::resp::{parse_request, Limits};

    fn cmd(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    /// The replication stream from offset `from`, as words.
    fn stream(shared: &Shared, from: u64) -> Vec<Vec<String>> {
        let mut bytes = BytesMut::from(&shared.repl_stream.since(from).unwrap()[..]);
        let mut out = Vec::new();
        while let Some(c) = parse_request(&mut bytes, &Limits::default()).unwrap() {
            out.push(c.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect());
        }
        out
    }

    /// A key deleted because its time passed reaches replicas as DEL:
    /// EXPIREAT and GETEX PXAT in the past, and a write that finds its key
    /// expired (alone or in a pipelined group), which sends the DEL before
    /// itself. A Redis replica keeps an expired key until its primary
    /// deletes it, so without the DEL it would apply the write to the old
    /// value.
    #[test]
    fn deletions_by_expiry_reach_replicas_as_del() {
        let d = tempfile::tempdir().unwrap();
        let a = server(d.path());
        let mut sess = Session::new(&a, "client".into());
        a.repl_stream.start(1 << 20);
        execute(&a, &mut sess, &cmd(&["SET", "k", "v"]));
        execute(&a, &mut sess, &cmd(&["SET", "g", "v"]));
        let from = a.repl_stream.offset();
        execute(&a, &mut sess, &cmd(&["EXPIREAT", "k", "1"]));
        execute(&a, &mut sess, &cmd(&["GETEX", "g", "PXAT", "1"]));
        assert_eq!(stream(&a, from), [["DEL", "k"], ["DEL", "g"]]);

        execute(&a, &mut sess, &cmd(&["SET", "n", "5", "PX", "1"]));
        execute(&a, &mut sess, &cmd(&["SET", "m", "5", "PX", "1"]));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let from = a.repl_stream.offset();
        execute(&a, &mut sess, &cmd(&["INCR", "n"]));
        let group = vec![cmd(&["INCR", "m"]), cmd(&["INCR", "m"])];
        execute_batch(&a, &mut sess, group, &mut Vec::new());
        let got = stream(&a, from);
        let del = |k: &str| vec!["DEL".to_string(), k.to_string()];
        let pos = |c: &Vec<String>| got.iter().position(|x| x == c);
        let (del_n, del_m) = (pos(&del("n")).unwrap(), pos(&del("m")).unwrap());
        let first_incr = |k: &str| got.iter().position(|c| c.len() > 1 && c[0].starts_with("INCR") && c[1] == k);
        assert!(del_n < first_incr("n").unwrap(), "{got:?}");
        assert!(del_m < first_incr("m").unwrap(), "{got:?}");
        assert_eq!(got.iter().filter(|c| c[0] == "DEL").count(), 2, "{got:?}");
    }

    /// A write that reads an expired key (a ZUNIONSTORE's source, SMOVE's
    /// destination) sends its DEL first, once; a read does not.
    #[test]
    fn a_write_reading_an_expired_key_sends_its_del_first() {
        let d = tempfile::tempdir().unwrap();
        let a = server(d.path());
        let mut sess = Session::new(&a, "client".into());
        a.repl_stream.start(1 << 20);
        execute(&a, &mut sess, &cmd(&["ZADD", "z", "1", "old"]));
        execute(&a, &mut sess, &cmd(&["PEXPIRE", "z", "1"]));
        execute(&a, &mut sess, &cmd(&["ZADD", "live", "2", "new"]));
        execute(&a, &mut sess, &cmd(&["SADD", "src", "m"]));
        execute(&a, &mut sess, &cmd(&["SADD", "dst", "old"]));
        execute(&a, &mut sess, &cmd(&["PEXPIRE", "dst", "1"]));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let from = a.repl_stream.offset();
        execute(&a, &mut sess, &cmd(&["ZCARD", "z"]));
        execute(&a, &mut sess, &cmd(&["ZUNIONSTORE", "out", "3", "z", "live", "z"]));
        execute(&a, &mut sess, &cmd(&["SMOVE", "src", "dst", "m"]));
        // A DEL and the write it precedes commit together: MULTI/EXEC.
        let got: Vec<Vec<String>> =
            stream(&a, from).into_iter().filter(|c| c[0] != "MULTI" && c[0] != "EXEC").collect();
        let want: [&[&str]; 4] = [
            &["DEL", "z"],
            &["ZUNIONSTORE", "out", "3", "z", "live", "z"],
            &["DEL", "dst"],
            &["SMOVE", "src", "dst", "m"],
        ];
        assert_eq!(got, want.map(|c| c.iter().map(|w| w.to_string()).collect::<Vec<_>>()));
    }
}
