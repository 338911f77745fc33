//! A whole database read back over RESP (`KEYS *`, then `TYPE`, the value
//! and `PEXPIRETIME` of each key, pipelined), for comparing a replica with its primary
//! and a primary with the writers' models. Only called on idle servers, so
//! the keys cannot change between `KEYS` and the per-key reads.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::model::{score_text, Entry, Model, Val};
use crate::oracle::show;
use crate::resp_client::{encode, Client, Reply};

/// A key as a server holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dumped {
    /// The value.
    pub val: Val,
    /// `PEXPIRETIME`: the absolute expiry in Unix milliseconds, or -1.
    /// Replicas get expiries as absolute times (`PEXPIREAT`, or the RDB
    /// image), so a replica must show the very same number.
    pub expire_ms: i64,
}

/// Every key of database 0.
pub type Dump = BTreeMap<Vec<u8>, Dumped>;

fn bulks(r: Reply, what: &str) -> Result<Vec<Vec<u8>>, String> {
    match r {
        Reply::Array(Some(items)) => items
            .into_iter()
            .map(|i| match i {
                Reply::Bulk(Some(b)) => Ok(b),
                other => Err(format!("{what}: item {other:?}")),
            })
            .collect(),
        other => Err(format!("{what}: reply {other:?}")),
    }
}

fn pairs(items: Vec<Vec<u8>>, what: &str) -> Result<crate::oracle::Kvs, String> {
    if !items.len().is_multiple_of(2) {
        return Err(format!("{what}: odd number of items"));
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

/// The command that reads a key of type `ty`.
fn read_cmd<'a>(ty: &str, k: &'a [u8]) -> Option<Vec<&'a [u8]>> {
    Some(match ty {
        "string" => vec![b"GET", k],
        "hash" => vec![b"HGETALL", k],
        "list" => vec![b"LRANGE", k, b"0", b"-1"],
        "set" => vec![b"SMEMBERS", k],
        "zset" => vec![b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"],
        _ => return None,
    })
}

fn parse_val(ty: &str, r: Reply, what: &str) -> Result<Val, String> {
    match ty {
        "string" => match r {
            Reply::Bulk(Some(v)) => Ok(Val::Str(v)),
            other => Err(format!("GET: {other:?}")),
        },
        "hash" => bulks(r, what).and_then(|i| pairs(i, what)).map(|p| Val::Hash(p.into_iter().collect())),
        "list" => bulks(r, what).map(Val::List),
        "set" => bulks(r, what).map(|m| Val::Set(m.into_iter().collect())),
        _ => bulks(r, what)
            .and_then(|i| pairs(i, what))
            .map(|p| Val::Zset(p.into_iter().map(|(m, s)| (m, score_text(&String::from_utf8_lossy(&s)))).collect())),
    }
}

/// Reads every key of database 0 (pipelined, 200 keys at a time). `Err`
/// inside: the server answered something no well-formed database would.
pub fn dump(c: &mut Client) -> anyhow::Result<Result<Dump, String>> {
    let keys = match bulks(c.call(&[b"KEYS", b"*"])?, "KEYS *") {
        Ok(k) => k,
        Err(e) => return Ok(Err(e)),
    };
    let mut out = Dump::new();
    for chunk in keys.chunks(200) {
        let mut buf = Vec::new();
        for k in chunk {
            buf.extend_from_slice(&encode(&[b"TYPE", k]));
        }
        c.send_raw(&buf)?;
        let mut types = Vec::new();
        for k in chunk {
            match c.read_reply()? {
                Reply::Simple(t) => types.push(t),
                other => return Ok(Err(format!("TYPE {}: {other:?}", show(k)))),
            }
        }
        let mut buf = Vec::new();
        for (k, ty) in chunk.iter().zip(&types) {
            let Some(cmd) = read_cmd(ty, k) else {
                return Ok(Err(format!("{}, listed by KEYS, has type {ty:?}", show(k))));
            };
            buf.extend_from_slice(&encode(&cmd));
            buf.extend_from_slice(&encode(&[b"PEXPIRETIME", k]));
        }
        c.send_raw(&buf)?;
        for (k, ty) in chunk.iter().zip(&types) {
            let what = format!("{ty} {}", show(k));
            let val = match parse_val(ty, c.read_reply()?, &what) {
                Ok(v) => v,
                Err(e) => return Ok(Err(format!("{what}: {e}"))),
            };
            let expire_ms = match c.read_reply()? {
                Reply::Int(n) if n >= -1 => n,
                other => return Ok(Err(format!("PEXPIRETIME {}: {other:?}", show(k)))),
            };
            out.insert(k.clone(), Dumped { val, expire_ms });
        }
    }
    Ok(Ok(out))
}

/// The dump as the writers' models see it (a TTL or none).
pub fn to_model(d: &Dump) -> Model {
    d.iter().map(|(k, v)| (k.clone(), Entry { val: v.val.clone(), ttl: v.expire_ms >= 0 })).collect()
}

/// Bytes of keys and values in a dump.
pub fn size(d: &Dump) -> u64 {
    d.iter().map(|(k, v)| k.len() as u64 + v.val.size() + 8).sum()
}

/// Compares a replica's dump with its primary's; `Err` lists the first
/// differences.
pub fn compare(primary: &Dump, replica: &Dump) -> Result<(), String> {
    let mut s = String::new();
    let mut n = 0;
    for (k, p) in primary {
        match replica.get(k) {
            None => {
                n += 1;
                if n <= 4 {
                    let _ = write!(s, "{} missing; ", show(k));
                }
            }
            Some(r) if r != p => {
                n += 1;
                if n <= 4 {
                    let _ = write!(s, "{} = {} but the primary has {}; ", show(k), brief(r), brief(p));
                }
            }
            Some(_) => {}
        }
    }
    for k in replica.keys().filter(|k| !primary.contains_key(*k)) {
        n += 1;
        if n <= 4 {
            let _ = write!(s, "{} only on the replica; ", show(k));
        }
    }
    if n == 0 {
        Ok(())
    } else {
        Err(format!("{n} keys differ: {s}"))
    }
}

/// A short printable form of a key's value and expiry.
pub fn brief(d: &Dumped) -> String {
    format!("{} (expire {})", brief_val(&d.val), d.expire_ms)
}

/// A short printable form of a value.
pub fn brief_val(v: &Val) -> String {
    let items: Vec<String> = match v {
        Val::Str(s) => return format!("string {}", show(s)),
        Val::Hash(h) => h.iter().map(|(f, v)| format!("{}={}", show(f), show(v))).collect(),
        Val::List(l) => l.iter().map(|x| show(x)).collect(),
        Val::Set(s) => s.iter().map(|x| show(x)).collect(),
        Val::Zset(z) => z.iter().map(|(m, s)| format!("{}:{s}", show(m))).collect(),
    };
    let n = items.len();
    let mut shown = items.into_iter().take(6).collect::<Vec<_>>().join(",");
    if n > 6 {
        let _ = write!(shown, ",..({n})");
    }
    format!("{} [{shown}]", v.type_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(pairs: &[(&str, &str, i64)]) -> Dump {
        pairs
            .iter()
            .map(|(k, v, e)| (k.as_bytes().to_vec(), Dumped { val: Val::Str(v.as_bytes().to_vec()), expire_ms: *e }))
            .collect()
    }

    #[test]
    fn compare_sees_missing_extra_changed_and_expiry() {
        let p = d(&[("a", "1", -1), ("b", "2", 99)]);
        assert!(compare(&p, &p.clone()).is_ok());
        assert!(compare(&p, &d(&[("a", "1", -1)])).is_err(), "missing");
        assert!(compare(&p, &d(&[("a", "1", -1), ("b", "2", 99), ("c", "3", -1)])).is_err(), "extra");
        assert!(compare(&p, &d(&[("a", "1", -1), ("b", "3", 99)])).is_err(), "value");
        assert!(compare(&p, &d(&[("a", "1", -1), ("b", "2", 98)])).is_err(), "expiry");
        assert!(to_model(&p).get(b"b".as_slice()).is_some_and(|e| e.ttl));
    }
}
