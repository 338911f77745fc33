//! The replication rounds' data model: the typed value of one key, the
//! commands the writers send, and an interpreter of those commands over a
//! map of keys, so a writer knows the exact state (and the exact reply) its
//! own keys must show after any prefix of its writes.

use std::collections::{BTreeMap, BTreeSet};

use crate::resp_client::Reply;

/// A key's value, in a canonical form (members and fields sorted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// A string (counters too).
    Str(Vec<u8>),
    /// A hash: field to value.
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set.
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set: member to score, the score as Rust prints the `f64`
    /// (so the server's `5` and the model's `5` agree).
    Zset(BTreeMap<Vec<u8>, String>),
}

impl Val {
    /// The name `TYPE` gives.
    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Str(_) => "string",
            Val::Hash(_) => "hash",
            Val::List(_) => "list",
            Val::Set(_) => "set",
            Val::Zset(_) => "zset",
        }
    }

    /// Bytes of keys, fields, members and values (what a comparison reads).
    pub fn size(&self) -> u64 {
        let n: usize = match self {
            Val::Str(s) => s.len(),
            Val::Hash(h) => h.iter().map(|(f, v)| f.len() + v.len()).sum(),
            Val::List(l) => l.iter().map(Vec::len).sum(),
            Val::Set(s) => s.iter().map(Vec::len).sum(),
            Val::Zset(z) => z.iter().map(|(m, s)| m.len() + s.len()).sum(),
        };
        n as u64
    }

    fn is_empty(&self) -> bool {
        match self {
            Val::Str(_) => false,
            Val::Hash(h) => h.is_empty(),
            Val::List(l) => l.is_empty(),
            Val::Set(s) => s.is_empty(),
            Val::Zset(z) => z.is_empty(),
        }
    }
}

/// What the writer's model knows of a key: its value and whether it has a
/// time to live (the model cannot know the server's clock, so not when).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub val: Val,
    /// Whether an EXPIRE is in force.
    pub ttl: bool,
}

/// Keys to entries.
pub type Model = BTreeMap<Vec<u8>, Entry>;

/// One command: its arguments, the name first.
pub type Cmd = Vec<Vec<u8>>;

/// The reply the model predicts for a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// `+OK`.
    Ok,
    /// `:n`.
    Int(i64),
    /// A bulk string or nil.
    Bulk(Option<Vec<u8>>),
    /// An error (the model saw a key of another type: a diverged server).
    Error,
}

impl Expect {
    /// Whether `r` is this reply.
    pub fn matches(&self, r: &Reply) -> bool {
        match (self, r) {
            (Expect::Ok, Reply::Simple(s)) => s == "OK",
            (Expect::Int(n), Reply::Int(m)) => n == m,
            (Expect::Bulk(b), Reply::Bulk(c)) => b == c,
            (Expect::Error, Reply::Error(_)) => true,
            _ => false,
        }
    }
}

/// Normalises a sorted-set score as the model stores it.
pub fn score_text(s: &str) -> String {
    match s.parse::<f64>() {
        Ok(f) => format!("{f}"),
        Err(_) => s.to_string(),
    }
}

fn arg(cmd: &Cmd, i: usize) -> &[u8] {
    cmd.get(i).map(Vec::as_slice).unwrap_or_default()
}

fn int_arg(cmd: &Cmd, i: usize) -> i64 {
    std::str::from_utf8(arg(cmd, i)).ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Applies one command to `m` and returns the reply it must get. Only the
/// commands the writers send are known (SET, DEL, INCRBY, HSET, HDEL,
/// RPUSH, LPOP, SADD, SREM, ZADD, ZREM, EXPIRE, PERSIST; one key each).
pub fn apply(m: &mut Model, cmd: &Cmd) -> Expect {
    let name = arg(cmd, 0).to_ascii_uppercase();
    let key = arg(cmd, 1).to_vec();
    let cur = m.get(&key).cloned();
    let wrong = |v: &Option<Entry>, want: fn(&Val) -> bool| v.as_ref().is_some_and(|e| !want(&e.val));
    match name.as_slice() {
        b"SET" => {
            m.insert(key, Entry { val: Val::Str(arg(cmd, 2).to_vec()), ttl: false });
            Expect::Ok
        }
        b"DEL" => Expect::Int(i64::from(m.remove(&key).is_some())),
        b"EXPIRE" => match m.get_mut(&key) {
            Some(e) => {
                e.ttl = true;
                Expect::Int(1)
            }
            None => Expect::Int(0),
        },
        b"PERSIST" => match m.get_mut(&key) {
            Some(e) if e.ttl => {
                e.ttl = false;
                Expect::Int(1)
            }
            _ => Expect::Int(0),
        },
        b"INCRBY" => {
            let old = match &cur {
                None => Some(0),
                Some(Entry { val: Val::Str(s), .. }) => std::str::from_utf8(s).ok().and_then(|s| s.parse::<i64>().ok()),
                Some(_) => None,
            };
            match old.and_then(|o| o.checked_add(int_arg(cmd, 2))) {
                Some(n) => {
                    let ttl = cur.is_some_and(|e| e.ttl);
                    m.insert(key, Entry { val: Val::Str(n.to_string().into_bytes()), ttl });
                    Expect::Int(n)
                }
                None => Expect::Error,
            }
        }
        b"HSET" | b"HDEL" if wrong(&cur, |v| matches!(v, Val::Hash(_))) => Expect::Error,
        b"RPUSH" | b"LPOP" if wrong(&cur, |v| matches!(v, Val::List(_))) => Expect::Error,
        b"SADD" | b"SREM" if wrong(&cur, |v| matches!(v, Val::Set(_))) => Expect::Error,
        b"ZADD" | b"ZREM" if wrong(&cur, |v| matches!(v, Val::Zset(_))) => Expect::Error,
        b"HSET" | b"RPUSH" | b"SADD" | b"ZADD" => {
            let entry = m.entry(key).or_insert_with(|| Entry {
                val: match name.as_slice() {
                    b"HSET" => Val::Hash(BTreeMap::new()),
                    b"RPUSH" => Val::List(Vec::new()),
                    b"SADD" => Val::Set(BTreeSet::new()),
                    _ => Val::Zset(BTreeMap::new()),
                },
                ttl: false,
            });
            let rest = cmd.get(2..).unwrap_or_default();
            match &mut entry.val {
                Val::Hash(h) => {
                    Expect::Int(rest.chunks(2).filter(|p| h.insert(arg_of(p, 0), arg_of(p, 1)).is_none()).count() as i64)
                }
                Val::List(l) => {
                    l.extend(rest.iter().cloned());
                    Expect::Int(l.len() as i64)
                }
                Val::Set(s) => Expect::Int(rest.iter().filter(|x| s.insert(x.to_vec())).count() as i64),
                Val::Zset(z) => Expect::Int(
                    rest.chunks(2)
                        .filter(|p| {
                            let score = score_text(&String::from_utf8_lossy(&arg_of(p, 0)));
                            z.insert(arg_of(p, 1), score).is_none()
                        })
                        .count() as i64,
                ),
                Val::Str(_) => Expect::Error,
            }
        }
        b"HDEL" | b"LPOP" | b"SREM" | b"ZREM" => {
            let rest = cmd.get(2..).unwrap_or_default();
            let Some(entry) = m.get_mut(&key) else {
                return if name == b"LPOP" { Expect::Bulk(None) } else { Expect::Int(0) };
            };
            let e = match &mut entry.val {
                Val::Hash(h) => Expect::Int(rest.iter().filter(|f| h.remove(*f).is_some()).count() as i64),
                Val::List(l) => Expect::Bulk(if l.is_empty() { None } else { Some(l.remove(0)) }),
                Val::Set(s) => Expect::Int(rest.iter().filter(|x| s.remove(*x)).count() as i64),
                Val::Zset(z) => Expect::Int(rest.iter().filter(|x| z.remove(*x).is_some()).count() as i64),
                Val::Str(_) => Expect::Error,
            };
            // An emptied collection is no key at all (and loses its TTL).
            if entry.val.is_empty() {
                m.remove(&key);
            }
            e
        }
        _ => Expect::Error,
    }
}

fn arg_of(p: &[Vec<u8>], i: usize) -> Vec<u8> {
    p.get(i).cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(args: &[&str]) -> Cmd {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn interpreter_tracks_values_replies_and_ttls() {
        let mut m = Model::new();
        assert_eq!(apply(&mut m, &c(&["INCRBY", "n", "5"])), Expect::Int(5));
        assert_eq!(apply(&mut m, &c(&["EXPIRE", "n", "1000"])), Expect::Int(1));
        assert_eq!(apply(&mut m, &c(&["INCRBY", "n", "-2"])), Expect::Int(3));
        assert!(m.get(b"n".as_slice()).is_some_and(|e| e.ttl), "INCRBY keeps the TTL");
        assert_eq!(apply(&mut m, &c(&["SET", "n", "x"])), Expect::Ok);
        assert!(m.get(b"n".as_slice()).is_some_and(|e| !e.ttl), "SET drops the TTL");
        assert_eq!(apply(&mut m, &c(&["INCRBY", "n", "1"])), Expect::Error);
        assert_eq!(apply(&mut m, &c(&["RPUSH", "l", "a", "b"])), Expect::Int(2));
        assert_eq!(apply(&mut m, &c(&["LPOP", "l"])), Expect::Bulk(Some(b"a".to_vec())));
        assert_eq!(apply(&mut m, &c(&["LPOP", "l"])), Expect::Bulk(Some(b"b".to_vec())));
        assert!(!m.contains_key(b"l".as_slice()), "an emptied list is gone");
        assert_eq!(apply(&mut m, &c(&["LPOP", "l"])), Expect::Bulk(None));
        assert_eq!(apply(&mut m, &c(&["ZADD", "z", "5", "m"])), Expect::Int(1));
        assert_eq!(apply(&mut m, &c(&["ZADD", "z", "7", "m"])), Expect::Int(0));
        assert_eq!(
            m.get(b"z".as_slice()).map(|e| e.val.clone()),
            Some(Val::Zset([(b"m".to_vec(), "7".to_string())].into_iter().collect()))
        );
        assert_eq!(apply(&mut m, &c(&["HSET", "z", "f", "v"])), Expect::Error, "WRONGTYPE");
        assert_eq!(apply(&mut m, &c(&["HSET", "h", "f", "v"])), Expect::Int(1));
        assert_eq!(apply(&mut m, &c(&["HDEL", "h", "f"])), Expect::Int(1));
        assert_eq!(apply(&mut m, &c(&["DEL", "h"])), Expect::Int(0));
        assert_eq!(apply(&mut m, &c(&["SADD", "s", "a"])), Expect::Int(1));
        assert_eq!(apply(&mut m, &c(&["PERSIST", "s"])), Expect::Int(0));
        assert_eq!(apply(&mut m, &c(&["DEL", "s"])), Expect::Int(1));
    }

    #[test]
    fn replies_are_compared_exactly() {
        assert!(Expect::Int(2).matches(&Reply::Int(2)));
        assert!(!Expect::Int(2).matches(&Reply::Int(3)));
        assert!(!Expect::Ok.matches(&Reply::Error("READONLY".into())));
        assert_eq!(score_text("5"), "5");
        assert_eq!(score_text("5.0"), "5");
    }
}
