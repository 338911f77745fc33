//! DUMP and RESTORE over the wire: every type survives DUMP, RESTORE and a
//! restart; payloads redis-server 7.0.15 dumped are restored; refusals and
//! options answer as Redis 7.0 answers (bytes captured from it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{connect, read_bulk, read_line, req_bytes as cmd, roundtrip, start};

/// Every reply byte of `req` (read until `n` replies' worth is there: the
/// read commands here answer one array or bulk each).
fn reply_of(s: &mut TcpStream, req: &[u8]) -> Vec<u8> {
    s.write_all(req).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while !out.ends_with(b"+PONG\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "connection closed");
        out.extend_from_slice(&buf[..n]);
    }
    out.truncate(out.len() - 7);
    out
}

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
}

/// How each type is read back whole.
const READS: [(&str, &str); 8] = [
    ("s", "GET"),
    ("n", "GET"),
    ("h", "HGETALL"),
    ("hb", "HGETALL"),
    ("l", "LRANGE"),
    ("st", "SMEMBERS"),
    ("z", "ZRANGE"),
    ("zb", "ZRANGE"),
];

fn read_whole(s: &mut TcpStream, key: &str, how: &str) -> Vec<u8> {
    let k = key.as_bytes();
    match how {
        "LRANGE" => reply_of(s, &cmd(&[b"LRANGE", k, b"0", b"-1"])),
        "ZRANGE" => reply_of(s, &cmd(&[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"])),
        other => reply_of(s, &cmd(&[other.as_bytes(), k])),
    }
}

#[test]
fn every_type_survives_dump_restore_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    let mut setup = Vec::new();
    setup.push(cmd(&[b"SET", b"s", &[0u8, 1, 2, 255]]));
    setup.push(cmd(&[b"SET", b"n", b"-12345"]));
    setup.push(cmd(&[b"HSET", b"h", b"a", b"1", b"b", &vec![b'x'; 70_000]]));
    let mut hb: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"hb".to_vec()];
    for i in 0..300 {
        hb.push(format!("f{i}").into_bytes());
        hb.push(format!("v{i}").into_bytes());
    }
    setup.push(cmd(&hb.iter().map(Vec::as_slice).collect::<Vec<_>>()));
    let mut l: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), b"l".to_vec()];
    l.extend((0..3000).map(|i| format!("e{i}").into_bytes()));
    setup.push(cmd(&l.iter().map(Vec::as_slice).collect::<Vec<_>>()));
    setup.push(cmd(&[b"SADD", b"st", b"1", b"-2", b"m"]));
    setup.push(cmd(&[b"ZADD", b"z", b"1.5", b"a", b"-inf", b"b", b"1e20", b"c"]));
    let mut zb: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), b"zb".to_vec()];
    for i in 0..500 {
        zb.push(format!("{}", f64::from(i) / 7.0).into_bytes());
        zb.push(format!("m{i}").into_bytes());
    }
    setup.push(cmd(&zb.iter().map(Vec::as_slice).collect::<Vec<_>>()));
    s.write_all(&setup.concat()).unwrap();
    for _ in 0..setup.len() {
        read_line(&mut s);
    }
    let mut want = Vec::new();
    for (key, how) in READS {
        want.push(read_whole(&mut s, key, how));
        s.write_all(&cmd(&[b"DUMP", key.as_bytes()])).unwrap();
        let payload = read_bulk(&mut s);
        let copy = format!("{key}-copy");
        // One copy with a TTL, one replacing an existing key of another type.
        roundtrip(&mut s, &cmd(&[b"RESTORE", copy.as_bytes(), b"100000", &payload]), b"+OK\r\n");
        roundtrip(&mut s, &cmd(&[b"SET", b"other", b"x"]), b"+OK\r\n");
        roundtrip(&mut s, &cmd(&[b"RESTORE", b"other", b"0", &payload, b"REPLACE"]), b"+OK\r\n");
        assert_eq!(read_whole(&mut s, &copy, how), *want.last().unwrap(), "{key}");
        assert_eq!(read_whole(&mut s, "other", how), *want.last().unwrap(), "{key} over another key");
        let pttl = reply_of(&mut s, &cmd(&[b"PTTL", copy.as_bytes()]));
        let ms: i64 = std::str::from_utf8(&pttl[1..pttl.len() - 2]).unwrap().parse().unwrap();
        assert!((90_000..=100_000).contains(&ms), "{key}: pttl {ms}");
    }
    drop(s);
    drop(srv);
    srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    for ((key, how), want) in READS.iter().zip(&want) {
        assert_eq!(read_whole(&mut s, &format!("{key}-copy"), how), *want, "{key} after restart");
    }
}

#[test]
fn payloads_of_redis_are_restored_and_refusals_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    // DUMP replies of redis-server 7.0.15: a listpack hash, a quicklist
    // list, an LZF-compressed intset, an integer-encoded string.
    let h = unhex("1032320000000a0081610201018162028568656c6c6f06816302f178ec03816402f270110104816502f400e68ee7fdffffff09ff0a0002054361825c35b3");
    let l = unhex("120102151500000004008161020c01f26079fe0482626203ff0a008b4b31c9810c7224");
    let si = unhex("0bc32128040800000004200302d4feff60000001200b4000017011a00902f2052a200900000a00795f43387e43e5e1");
    let n = unhex("00c139300a009d94ea2793fc08b9");
    for (key, payload) in [(&b"h"[..], &h), (b"l", &l), (b"si", &si), (b"n", &n)] {
        roundtrip(&mut s, &cmd(&[b"RESTORE", key, b"0", payload]), b"+OK\r\n");
    }
    roundtrip(
        &mut s,
        b"HGET h e\r\nHLEN h\r\nLRANGE l 0 -1\r\nSISMEMBER si 5000000000\r\nSCARD si\r\nGET n\r\n",
        b"$11\r\n-9000000000\r\n:5\r\n*4\r\n$1\r\na\r\n$2\r\n12\r\n$7\r\n-100000\r\n$2\r\nbb\r\n:1\r\n:4\r\n$5\r\n12345\r\n",
    );
    s.write_all(b"DUMP n\r\n").unwrap();
    let mut d = read_bulk(&mut s);
    let last = d.len() - 1;
    d[last] ^= 1;
    let mut reqs = Vec::new();
    reqs.extend(cmd(&[b"RESTORE", b"n", b"0", &n]));
    reqs.extend(cmd(&[b"RESTORE", b"k2", b"-1", &n]));
    reqs.extend(cmd(&[b"RESTORE", b"k2", b"0", &d]));
    reqs.extend(cmd(&[b"RESTORE", b"k2", b"0", &n, b"BOGUS"]));
    reqs.extend(cmd(&[b"RESTORE", b"k2", b"x", &n]));
    reqs.extend(cmd(&[b"RESTORE", b"k2", b"0", &n, b"IDLETIME", b"-1"]));
    reqs.extend(cmd(&[b"RESTORE", b"k2", b"0", &n, b"FREQ", b"300"]));
    reqs.extend(cmd(&[b"RESTORE", b"n", b"0", &n, b"REPLACE", b"IDLETIME", b"5"]));
    reqs.extend(cmd(&[b"RESTORE", b"k3", b"1000", &n, b"ABSTTL"]));
    reqs.extend(cmd(&[b"EXISTS", b"k3"]));
    reqs.extend(cmd(&[b"DUMP", b"nokey"]));
    // A well-formed footer over an empty list: Redis never dumps one.
    let mut empty = vec![1u8, 0, 10, 0];
    empty.extend_from_slice(&crc_redis(&empty));
    reqs.extend(cmd(&[b"RESTORE", b"k4", b"0", &empty]));
    roundtrip(
        &mut s,
        &reqs,
        b"-BUSYKEY Target key name already exists.\r\n-ERR Invalid TTL value, must be >= 0\r\n\
          -ERR DUMP payload version or checksum are wrong\r\n-ERR syntax error\r\n\
          -ERR value is not an integer or out of range\r\n-ERR Invalid IDLETIME value, must be >= 0\r\n\
          -ERR Invalid FREQ value, must be >= 0 and <= 255\r\n+OK\r\n+OK\r\n:0\r\n$-1\r\n-ERR Bad data format\r\n",
    );
    // Inside MULTI, with the rest of the transaction.
    roundtrip(
        &mut s,
        &[&b"MULTI\r\n"[..], &cmd(&[b"RESTORE", b"m", b"0", &n]), b"INCR m\r\nEXEC\r\n"].concat(),
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:12346\r\n",
    );
}

/// The CRC-64 Redis puts after a payload (little-endian).
fn crc_redis(bytes: &[u8]) -> [u8; 8] {
    crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(bytes).to_le_bytes()
}
