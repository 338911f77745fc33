//! Drives the built `strata-server` binary over raw TCP on 127.0.0.1:
//! inline and multibulk requests, pipelining, RESP3 after HELLO 3, error
//! texts, malformed frames closing only their own connection, restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{connect, read_to_close, roundtrip, start};

#[test]
fn inline_multibulk_pipelining_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(&mut s, b"PING\r\nPING hi\r\n", b"+PONG\r\n$2\r\nhi\r\n");
    roundtrip(
        &mut s,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nGET nokey\r\n",
        b"+OK\r\n$2\r\nv1\r\n$-1\r\n",
    );
    roundtrip(&mut s, b"FOO a b\r\n", b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n");
    roundtrip(&mut s, b"GET\r\n", b"-ERR wrong number of arguments for 'get' command\r\n");
    roundtrip(&mut s, b"INCR k\r\n", b"-ERR value is not an integer or out of range\r\n");
    roundtrip(
        &mut s,
        b"HSET h f v\r\nGET h\r\n",
        b":1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    roundtrip(&mut s, b"SET k v XX NX\r\n", b"-ERR syntax error\r\n");
    roundtrip(&mut s, b"HELLO 4\r\n", b"-NOPROTO unsupported protocol version\r\n");
    roundtrip(&mut s, b"\r\n\r\nPING\r\n", b"+PONG\r\n");
    // RESP3 after HELLO 3: null, map, double.
    s.write_all(b"HELLO 3\r\n").unwrap();
    let mut head = [0u8; 3];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"%7\r");
    // The map ends with `modules` => empty array.
    let mut rest = Vec::new();
    while !rest.ends_with(b"$7\r\nmodules\r\n*0\r\n") {
        let mut b = [0u8; 256];
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "connection closed");
        rest.extend_from_slice(&b[..n]);
    }
    assert!(String::from_utf8_lossy(&rest).contains("proto\r\n:3"));
    roundtrip(&mut s, b"GET nokey\r\n", b"_\r\n");
    roundtrip(&mut s, b"HGETALL h\r\n", b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    roundtrip(&mut s, b"ZADD z 1.5 m\r\nZSCORE z m\r\n", b":1\r\n,1.5\r\n");
    // MULTI/EXEC in one batch.
    roundtrip(&mut s, b"MULTI\r\nINCR c\r\nINCR c\r\nEXEC\r\n", b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:2\r\n");
    // A malformed frame closes that connection only, after earlier replies.
    let mut bad = connect(srv.port);
    bad.write_all(b"PING\r\n*1\r\n$-5\r\n").unwrap();
    assert_eq!(read_to_close(&mut bad), b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
    roundtrip(&mut s, b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn data_survives_restart_and_kill() {
    let dir = tempfile::tempdir().unwrap();
    {
        let srv = start(dir.path(), &["--durability", "sync"]);
        let mut s = connect(srv.port);
        roundtrip(&mut s, b"SET a 1\r\nRPUSH l x y\r\nSADD s m\r\n", b"+OK\r\n:2\r\n:1\r\n");
        // Dropping the server kills it (SIGKILL): acknowledged writes must stay.
    }
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"GET a\r\nLRANGE l 0 -1\r\nSCARD s\r\nDBSIZE\r\n",
        b"$1\r\n1\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n:1\r\n:3\r\n",
    );
}

/// Differences from Redis 7 found by differential testing (stop 18), each
/// checked against redis-server 7.0's reply bytes.
#[test]
fn edge_cases_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    // SPOP with a count of 0 removes nothing.
    roundtrip(&mut s, b"SADD s a b c\r\nSPOP s 0\r\nSCARD s\r\n", b":3\r\n*0\r\n:3\r\n");
    // A stop index before the first element is an empty range, not element 0.
    roundtrip(&mut s, b"RPUSH l a b c d e\r\nLRANGE l 0 -6\r\nLRANGE l -7 -7\r\n", b":5\r\n*0\r\n*0\r\n");
    roundtrip(
        &mut s,
        b"LRANGE l -100 1\r\nLRANGE l 3 100\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n*2\r\n$1\r\nd\r\n$1\r\ne\r\n",
    );
    roundtrip(
        &mut s,
        b"ZADD z 1 a 2 b 3 c\r\nZRANGE z 0 -4\r\nZRANGE z -2 -1\r\n",
        b":3\r\n*0\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    // Pop counts: Redis's message for a non-integer too; LPOP's arity error.
    let positive = b"-ERR value is out of range, must be positive\r\n";
    roundtrip(&mut s, b"LPOP l x\r\n", positive);
    roundtrip(&mut s, b"SPOP s -1\r\n", positive);
    roundtrip(&mut s, b"ZPOPMIN z x\r\n", positive);
    roundtrip(&mut s, b"LPOP l 1 2\r\n", b"-ERR wrong number of arguments for 'lpop' command\r\n");
    // Expire times whose conversion to ms overflows are refused; the key stays.
    roundtrip(
        &mut s,
        b"SET e v\r\nEXPIRE e -9223372036854775808\r\n",
        b"+OK\r\n-ERR invalid expire time in 'expire' command\r\n",
    );
    roundtrip(
        &mut s,
        b"EXPIREAT e -9223372036854776\r\nEXISTS e\r\n",
        b"-ERR invalid expire time in 'expireat' command\r\n:1\r\n",
    );
    // SET may repeat its expiry option (the last wins), not mix two.
    roundtrip(&mut s, b"SET r v EX 10 EX 20\r\nTTL r\r\n", b"+OK\r\n:20\r\n");
    roundtrip(&mut s, b"SET r v KEEPTTL KEEPTTL\r\nTTL r\r\n", b"+OK\r\n:20\r\n");
    roundtrip(&mut s, b"SET r v EX 10 PX 100\r\nSET r v EX\r\n", b"-ERR syntax error\r\n-ERR syntax error\r\n");
    // Scores that overflow or underflow strtod are not floats.
    let not_float = b"-ERR value is not a valid float\r\n";
    roundtrip(&mut s, b"ZADD z 1e309 m\r\n", not_float);
    roundtrip(&mut s, b"ZADD z 1e-400 m\r\nZADD z inf m\r\n", &[&not_float[..], b":1\r\n"].concat());
    // UNWATCH inside MULTI is queued: the watch still guards this EXEC.
    let mut other = connect(srv.port);
    roundtrip(&mut s, b"SET w 1\r\nWATCH w\r\nMULTI\r\nUNWATCH\r\n", b"+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n");
    roundtrip(&mut other, b"SET w 2\r\n", b"+OK\r\n");
    roundtrip(&mut s, b"SET w 3\r\nEXEC\r\nGET w\r\n", b"+QUEUED\r\n*-1\r\n$1\r\n2\r\n");
    roundtrip(&mut s, b"MULTI\r\nUNWATCH\r\nEXEC\r\n", b"+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n");
    // A watched key that expires before EXEC aborts it, even unread.
    roundtrip(&mut s, b"SET t 1 PX 30\r\nWATCH t\r\n", b"+OK\r\n+OK\r\n");
    std::thread::sleep(Duration::from_millis(80));
    roundtrip(&mut s, b"MULTI\r\nSET u 1\r\nEXEC\r\nEXISTS u\r\n", b"+OK\r\n+QUEUED\r\n*-1\r\n:0\r\n");
    // Keys over the engine's key limit are absent to every read and delete.
    let long = "k".repeat(70_000);
    let cmd = |parts: &[&str]| {
        let mut b = format!("*{}\r\n", parts.len()).into_bytes();
        for p in parts {
            b.extend_from_slice(format!("${}\r\n{p}\r\n", p.len()).as_bytes());
        }
        b
    };
    let reqs: Vec<u8> = [
        cmd(&["GET", &long]),
        cmd(&["EXISTS", &long]),
        cmd(&["TYPE", &long]),
        cmd(&["TTL", &long]),
        cmd(&["HGETALL", &long]),
        cmd(&["MGET", "a", &long]),
        cmd(&["SET", "short", "v"]),
        cmd(&["DEL", "short", &long]),
    ]
    .concat();
    roundtrip(&mut s, &reqs, b"$-1\r\n:0\r\n+none\r\n:-2\r\n*0\r\n*2\r\n$-1\r\n$-1\r\n+OK\r\n:1\r\n");
    // In a pipeline, a write the engine refuses fails only its own command.
    let reqs: Vec<u8> = [
        cmd(&["SET", "a", "1"]),
        cmd(&["GET", &long]),
        cmd(&["GET", "a"]),
        cmd(&["SET", "b", "2"]),
        cmd(&["SET", &long, "x"]),
        cmd(&["GET", "b"]),
    ]
    .concat();
    let refused = format!("-ERR invalid argument: key of {} bytes exceeds the 65536-byte limit\r\n", long.len() + 5);
    let want = ["+OK\r\n$-1\r\n$1\r\n1\r\n+OK\r\n", &refused, "$1\r\n2\r\n"].concat();
    roundtrip(&mut s, &reqs, want.as_bytes());
    // ... but one with a TTL that has not passed does not.
    roundtrip(
        &mut s,
        b"SET t 1 EX 100\r\nWATCH t\r\nMULTI\r\nSET u 1\r\nEXEC\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n",
    );
}

/// Reverse and rank reads of sorted sets, checked byte for byte against
/// redis-server 7.0.
#[test]
fn sorted_set_reverse_ranges_and_ranks_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(&mut s, b"ZADD z 1 a 2 b 2 bb 3 c 4 d 5 e\r\n", b":6\r\n");
    roundtrip(&mut s, b"ZREVRANGE z 0 2\r\n", b"*3\r\n$1\r\ne\r\n$1\r\nd\r\n$1\r\nc\r\n");
    roundtrip(&mut s, b"ZREVRANGE z -2 -1\r\nZREVRANGE z 5 10\r\n", b"*2\r\n$1\r\nb\r\n$1\r\na\r\n*1\r\n$1\r\na\r\n");
    roundtrip(&mut s, b"ZRANGE z 0 1 REV\r\n", b"*2\r\n$1\r\ne\r\n$1\r\nd\r\n");
    roundtrip(&mut s, b"ZRANGE z (1 3 BYSCORE\r\n", b"*3\r\n$1\r\nb\r\n$2\r\nbb\r\n$1\r\nc\r\n");
    roundtrip(&mut s, b"ZRANGE z 3 (1 BYSCORE REV\r\n", b"*3\r\n$1\r\nc\r\n$2\r\nbb\r\n$1\r\nb\r\n");
    roundtrip(
        &mut s,
        b"ZRANGE z -inf +inf BYSCORE LIMIT 1 2 WITHSCORES\r\n",
        b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$2\r\nbb\r\n$1\r\n2\r\n",
    );
    roundtrip(&mut s, b"ZRANGE z +inf -inf BYSCORE REV LIMIT 1 2\r\n", b"*2\r\n$1\r\nd\r\n$1\r\nc\r\n");
    roundtrip(
        &mut s,
        b"ZRANGE z 0 1 LIMIT 0 1\r\n",
        b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n",
    );
    roundtrip(
        &mut s,
        b"ZREVRANGEBYSCORE z 4 2 WITHSCORES LIMIT 1 10\r\n",
        b"*6\r\n$1\r\nc\r\n$1\r\n3\r\n$2\r\nbb\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n2\r\n",
    );
    roundtrip(&mut s, b"ZREVRANGEBYSCORE z (4 (2\r\n", b"*1\r\n$1\r\nc\r\n");
    roundtrip(
        &mut s,
        b"ZRANK z a\r\nZRANK z bb\r\nZRANK z e\r\nZRANK z nope\r\nZRANK nokey a\r\nZREVRANK z a\r\nZREVRANK z bb\r\n",
        b":0\r\n:2\r\n:5\r\n$-1\r\n$-1\r\n:5\r\n:3\r\n",
    );
    roundtrip(
        &mut s,
        b"SET str x\r\nZREVRANGE str 0 1\r\n",
        b"+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
}

/// GETEX, GETRANGE, SETRANGE, INCRBYFLOAT, HINCRBYFLOAT, LSET, LTRIM and
/// the set algebra, checked byte for byte against redis-server 7.0 (set
/// replies are sorted here; Redis's order is its hash order).
#[test]
fn more_commands_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"SET f 10.5\r\nINCRBYFLOAT f 0.1\r\nINCRBYFLOAT f -5\r\nINCRBYFLOAT nf 3\r\nINCRBYFLOAT f abc\r\n",
        b"+OK\r\n$4\r\n10.6\r\n$3\r\n5.6\r\n$1\r\n3\r\n-ERR value is not a valid float\r\n",
    );
    roundtrip(
        &mut s,
        b"HSET h a 1.5\r\nHINCRBYFLOAT h a 0.25\r\nHINCRBYFLOAT h b -3\r\nHSET h c x\r\nHINCRBYFLOAT h c 1\r\n",
        b":1\r\n$4\r\n1.75\r\n$2\r\n-3\r\n:1\r\n-ERR hash value is not a float\r\n",
    );
    // An infinite increment is refused before the key is looked at (and
    // so not created), as in Redis 7; INCRBYFLOAT words it differently.
    roundtrip(
        &mut s,
        b"HINCRBYFLOAT hinf f +inf\r\nHINCRBYFLOAT h c -inf\r\nEXISTS hinf\r\nINCRBYFLOAT f +inf\r\n",
        b"-ERR value is NaN or Infinity\r\n-ERR value is NaN or Infinity\r\n:0\r\n-ERR increment would produce NaN or Infinity\r\n",
    );
    // Scores past 1e17 as %.17g lays them out (Redis's "zset score double range").
    roundtrip(
        &mut s,
        b"ZADD zd 1.7976931348623157e308 max 1.5e20 big 1e16 int\r\nZSCORE zd max\r\nZSCORE zd big\r\nZSCORE zd int\r\n",
        b":3\r\n$23\r\n1.7976931348623157e+308\r\n$7\r\n1.5e+20\r\n$17\r\n10000000000000000\r\n",
    );
    roundtrip(
        &mut s,
        b"SET g v\r\nGETEX g EX 100\r\nTTL g\r\nGETEX g PERSIST\r\nTTL g\r\nGETEX g EX 10 PX 10\r\nGETEX g EX 0\r\n",
        b"+OK\r\n$1\r\nv\r\n:100\r\n$1\r\nv\r\n:-1\r\n-ERR syntax error\r\n-ERR invalid expire time in 'getex' command\r\n",
    );
    roundtrip(&mut s, b"GETEX nokey EX 10\r\nGETEX g EXAT 1\r\nEXISTS g\r\n", b"$-1\r\n$1\r\nv\r\n:0\r\n");
    roundtrip(
        &mut s,
        b"SET r Hello\r\nGETRANGE r 1 3\r\nGETRANGE r -3 -1\r\nGETRANGE r 0 -100\r\nGETRANGE r 3 1\r\n",
        b"+OK\r\n$3\r\nell\r\n$3\r\nllo\r\n$1\r\nH\r\n$0\r\n\r\n",
    );
    roundtrip(
        &mut s,
        b"SETRANGE r 7 !!\r\nGET r\r\nSETRANGE r -1 x\r\nSETRANGE h 0 x\r\n",
        b":9\r\n$9\r\nHello\0\0!!\r\n-ERR offset is out of range\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    roundtrip(
        &mut s,
        b"RPUSH l a b c d e\r\nLSET l -1 E\r\nLSET l 5 x\r\nLSET nol 0 x\r\nLTRIM l 1 -2\r\nLRANGE l 0 -1\r\nLTRIM l 1 0\r\nEXISTS l\r\n",
        b":5\r\n+OK\r\n-ERR index out of range\r\n-ERR no such key\r\n+OK\r\n*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n+OK\r\n:0\r\n",
    );
    roundtrip(
        &mut s,
        b"SADD s1 a b c d\r\nSADD s2 c d e\r\nSINTER s1 s2\r\nSDIFF s1 s2\r\nSUNION s2 nos\r\nSINTER r s1\r\nSMISMEMBER s1 a z d\r\n",
        b":4\r\n:3\r\n*2\r\n$1\r\nc\r\n$1\r\nd\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n*3\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n*3\r\n:1\r\n:0\r\n:1\r\n",
    );
}

/// BITFIELD and BITFIELD_RO: every subcommand, overflow mode and refusal,
/// byte for byte as redis-server 7.0.15 answered the same requests.
#[test]
fn bitfield_matches_redis() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    let cases: &[(&[&str], &[u8])] = &[
        (&["BITFIELD", "k", "SET", "i5", "0", "0"], b"*1\r\n:0\r\n"),
        (&["GET", "k"], b"$1\r\n\x00\r\n"),
        (&["BITFIELD", "k", "GET", "u4", "0", "GET", "i8", "#1", "GET", "u63", "3"], b"*3\r\n:0\r\n:0\r\n:0\r\n"),
        (
            &["BITFIELD", "k", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2", "102", "1"],
            b"*2\r\n:1\r\n:1\r\n",
        ),
        (&["BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "200", "GET", "i8", "0"], b"*2\r\n$-1\r\n:0\r\n"),
        (
            &["BITFIELD", "k", "SET", "u8", "0", "255", "GET", "u8", "0", "INCRBY", "u8", "0", "1"],
            b"*3\r\n:0\r\n:255\r\n:0\r\n",
        ),
        (
            &[
                "BITFIELD",
                "k",
                "OVERFLOW",
                "WRAP",
                "SET",
                "i64",
                "0",
                "-1",
                "INCRBY",
                "i64",
                "0",
                "1",
                "INCRBY",
                "i64",
                "0",
                "-9223372036854775808",
            ],
            b"*3\r\n:0\r\n:0\r\n:-9223372036854775808\r\n",
        ),
        (
            &["BITFIELD", "k", "SET", "u64", "0", "1"],
            b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n",
        ),
        (
            &["BITFIELD", "k", "SET", "i0", "0", "1"],
            b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n",
        ),
        (
            &["BITFIELD", "k", "SET", "x8", "0", "1"],
            b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n",
        ),
        (&["BITFIELD", "k", "SET", "i8", "-1", "1"], b"-ERR bit offset is not an integer or out of range\r\n"),
        (&["BITFIELD", "k", "SET", "i8", "#x", "1"], b"-ERR bit offset is not an integer or out of range\r\n"),
        (&["BITFIELD", "k", "SET", "i8", "0", "x"], b"-ERR value is not an integer or out of range\r\n"),
        (&["BITFIELD", "k", "OVERFLOW", "BAD", "SET", "i8", "0", "1"], b"-ERR Invalid OVERFLOW type specified\r\n"),
        (&["BITFIELD", "k", "FOO"], b"-ERR syntax error\r\n"),
        (&["BITFIELD", "k", "GET", "i8"], b"-ERR syntax error\r\n"),
        (&["BITFIELD_RO", "k", "GET", "i8", "0"], b"*1\r\n:-128\r\n"),
        (&["BITFIELD_RO", "k", "SET", "i8", "0", "1"], b"-ERR BITFIELD_RO only supports the GET subcommand\r\n"),
        (&["BITFIELD_RO", "k", "OVERFLOW", "SAT"], b"*0\r\n"),
        (&["BITFIELD", "nokey", "GET", "u8", "0"], b"*1\r\n:0\r\n"),
        (&["EXISTS", "nokey"], b":0\r\n"),
        (&["BITFIELD", "nokey2", "OVERFLOW", "FAIL", "SET", "u2", "0", "9"], b"*1\r\n$-1\r\n"),
        (&["GET", "nokey2"], b"$1\r\n\x00\r\n"),
        (&["LPUSH", "lst", "a"], b":1\r\n"),
        (
            &["BITFIELD", "lst", "GET", "u8", "0"],
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["BITFIELD", "lst", "SET", "u8", "0", "1"],
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (&["BITFIELD", "k"], b"*0\r\n"),
        (&["SET", "s", "hello"], b"+OK\r\n"),
        (
            &["BITFIELD", "s", "INCRBY", "u8", "#0", "3", "GET", "u16", "#1", "SET", "i16", "#2", "-2"],
            b"*3\r\n:107\r\n:27756\r\n:28416\r\n",
        ),
        (&["GET", "s"], b"$6\r\nkell\xff\xfe\r\n"),
    ];
    for (args, want) in cases {
        roundtrip(&mut s, &common::req(args), want);
    }
}

/// INFO's rdb_changes_since_last_save counts the entries written since the
/// last SAVE: a SETBIT or BITFIELD SET that leaves a key as it was writes
/// nothing (as in Redis), and SAVE starts the count again.
#[test]
fn changes_since_save_count_writes_not_no_ops() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    let dirty = |s: &mut std::net::TcpStream| -> u64 {
        common::info_field(s, "persistence", "rdb_changes_since_last_save").trim().parse().unwrap()
    };
    let d0 = dirty(&mut s);
    roundtrip(&mut s, b"SETBIT b 0 0\r\nBITFIELD f SET i5 0 0\r\n", b":0\r\n*1\r\n:0\r\n");
    let d1 = dirty(&mut s);
    assert_eq!(d1, d0 + 2);
    roundtrip(&mut s, b"SETBIT b 0 0\r\nBITFIELD f SET i5 0 0\r\nSETBIT b 0 1\r\n", b":0\r\n*1\r\n:0\r\n:0\r\n");
    assert_eq!(dirty(&mut s), d1 + 1);
    roundtrip(&mut s, b"SAVE\r\n", b"+OK\r\n");
    assert_eq!(dirty(&mut s), 0);
}
