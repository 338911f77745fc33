//! The key directory (`--key-directory`) answers writes' meta reads from
//! DRAM; it must never change a reply. Random commands over a small
//! keyspace go to a server with it and one without, with restarts (the
//! directory rebuilt from the open scan), flushes, MULTI, MOVE and COPY
//! between databases; every reply must match.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{connect, req, start, wait_exit, Server};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Reads one RESP reply whole, rendered as text.
fn read_reply(s: &mut TcpStream) -> String {
    let text = common::read_line(s);
    match text.as_bytes().first() {
        Some(b'$') => {
            let n: i64 = text[1..].parse().unwrap();
            if n < 0 {
                return "(nil)".into();
            }
            let mut body = vec![0u8; n as usize + 2];
            s.read_exact(&mut body).unwrap();
            body.truncate(n as usize);
            format!("\"{}\"", String::from_utf8_lossy(&body))
        }
        Some(b'*') => {
            let n: i64 = text[1..].parse().unwrap();
            if n < 0 {
                return "(nil array)".into();
            }
            let items: Vec<String> = (0..n).map(|_| read_reply(s)).collect();
            format!("[{}]", items.join(", "))
        }
        _ => text,
    }
}

fn call(s: &mut TcpStream, args: &[String]) -> String {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    s.write_all(&req(&a)).unwrap();
    let r = read_reply(s);
    // Seconds left differ by when each server ran the command.
    if args[0] == "TTL" {
        return match r.as_str() {
            ":-2" | ":-1" => r,
            _ => ":positive".into(),
        };
    }
    r
}

fn random_command(rng: &mut StdRng) -> Vec<String> {
    let key = |rng: &mut StdRng| format!("k{}", rng.gen_range(0..16));
    let val = |rng: &mut StdRng| format!("{}", rng.gen_range(0..1000));
    let k = key(rng);
    let v = val(rng);
    let words: Vec<String> = match rng.gen_range(0..30) {
        0..=5 => {
            let mut c = vec!["SET".into(), k, v];
            match rng.gen_range(0..8) {
                0 => c.extend(["EX".into(), "1000".into()]),
                1 => c.push("KEEPTTL".into()),
                2 => c.push("NX".into()),
                3 => c.push("XX".into()),
                4 => c.push("GET".into()),
                5 => c.extend(["PX".into(), "500000".into(), "GET".into()]),
                _ => {}
            }
            c
        }
        6 => vec!["MSET".into(), k, v, key(rng), val(rng)],
        7 => vec!["INCR".into(), k],
        8 => vec!["APPEND".into(), k, v],
        9 | 10 => vec!["DEL".into(), k, key(rng)],
        11 => vec!["HSET".into(), k, "f".into(), v],
        12 => vec!["LPUSH".into(), k, v],
        13 => vec!["SADD".into(), k, v],
        14 => vec!["ZADD".into(), k, "1".into(), v],
        15 => vec!["EXPIRE".into(), k, "1000".into()],
        16 => vec!["PEXPIREAT".into(), k, "1".into()],
        17 => vec!["PERSIST".into(), k],
        18 => vec!["TYPE".into(), k],
        19 => vec!["EXISTS".into(), k, key(rng)],
        20 => vec!["GET".into(), k],
        21 => vec!["TTL".into(), k],
        22 => vec!["DBSIZE".into()],
        23 => vec!["SELECT".into(), rng.gen_range(0..3).to_string()],
        24 => vec!["MOVE".into(), k, rng.gen_range(0..3).to_string()],
        25 => vec!["COPY".into(), k, key(rng), "DB".into(), rng.gen_range(0..3).to_string(), "REPLACE".into()],
        26 => vec!["RENAME".into(), k, key(rng)],
        27 => vec!["SETNX".into(), k, v],
        28 if rng.gen_range(0..10) == 0 => vec!["FLUSHDB".into()],
        28 => vec!["GETDEL".into(), k],
        _ if rng.gen_range(0..20) == 0 => vec!["FLUSHALL".into()],
        _ => vec!["SETEX".into(), k, "1000".into(), v],
    };
    words
}

/// The keys and keys with an expiry per database, as INFO keyspace says.
fn keyspace(s: &mut TcpStream) -> String {
    s.write_all(&req(&["INFO", "keyspace"])).unwrap();
    read_reply(s)
}

fn restart(dir: &std::path::Path, mut srv: Server, flags: &[&str]) -> Server {
    let mut c = connect(srv.port);
    c.write_all(&req(&["SHUTDOWN"])).unwrap();
    assert_eq!(wait_exit(&mut srv), 0);
    start(dir, flags)
}

#[test]
fn replies_match_a_server_without_the_directory() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let fa = ["--key-directory", "yes", "--databases", "3"];
    let fb = ["--key-directory", "no", "--databases", "3"];
    let (mut a, mut b) = (start(da.path(), &fa), start(db.path(), &fb));
    let mut rng = StdRng::seed_from_u64(0x6b65_7964);
    for round in 0..4 {
        let (mut ca, mut cb) = (connect(a.port), connect(b.port));
        for i in 0..600 {
            let multi = rng.gen_range(0..25) == 0;
            let cmds: Vec<Vec<String>> = if multi {
                let mut v = vec![vec!["MULTI".to_string()]];
                v.extend((0..rng.gen_range(1..5)).map(|_| random_command(&mut rng)));
                v.push(vec!["EXEC".into()]);
                v
            } else {
                vec![random_command(&mut rng)]
            };
            for c in &cmds {
                let (ra, rb) = (call(&mut ca, c), call(&mut cb, c));
                assert_eq!(ra, rb, "round {round} op {i}: {c:?}");
            }
            if i % 50 == 0 {
                assert_eq!(keyspace(&mut ca), keyspace(&mut cb), "round {round} op {i}");
            }
        }
        assert_eq!(keyspace(&mut ca), keyspace(&mut cb), "round {round} end");
        a = restart(da.path(), a, &fa);
        b = restart(db.path(), b, &fb);
    }
    let mut ca = connect(a.port);
    let entries = common::info_field(&mut ca, "all", "key_directory_on");
    assert_eq!(entries, "1", "the directory stayed on");
}

/// A key past its expiry, overwritten by a SET the directory answers,
/// counts as removed and created again (keys and expires in INFO).
#[test]
fn an_expired_key_overwritten_is_counted_once() {
    let d = tempfile::tempdir().unwrap();
    let srv = start(d.path(), &["--key-directory", "yes"]);
    let mut c = connect(srv.port);
    for args in [&["SET", "a", "1", "PX", "40"][..], &["SET", "b", "1", "EX", "1000"], &["SET", "c", "1"]] {
        assert_eq!(call(&mut c, &args.iter().map(|s| s.to_string()).collect::<Vec<_>>()), "+OK");
    }
    std::thread::sleep(std::time::Duration::from_millis(120));
    for k in ["a", "b", "c"] {
        assert_eq!(call(&mut c, &["SET".into(), k.into(), "2".into()]), "+OK");
    }
    assert_eq!(call(&mut c, &["DBSIZE".into()]), ":3");
    assert!(keyspace(&mut c).contains("db0:keys=3,expires=0"), "{}", keyspace(&mut c));
    assert_eq!(call(&mut c, &["GET".into(), "a".into()]), "\"2\"");
}
