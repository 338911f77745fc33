//! Pub/sub against the built binary: reply bytes (recorded from
//! redis-server 7.0.15), delivery across connections (and event loops),
//! pattern delivery, RESP3 push frames, keyspace notifications, and
//! subscriptions dropped when a connection closes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{connect, roundtrip, start};

/// Reads until `want` bytes arrived (or 10 s passed) and compares.
fn expect(s: &mut TcpStream, want: &[u8]) {
    let mut got = vec![0u8; want.len()];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
}

/// PUBSUB NUMSUB until `ch` has `n` subscribers (subscriptions made on
/// another connection are in place once its reply was read, but wait a
/// little anyway for close-driven changes).
fn wait_numsub(s: &mut TcpStream, ch: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let want = format!("*2\r\n${}\r\n{ch}\r\n:{n}\r\n", ch.len());
    loop {
        s.write_all(format!("PUBSUB NUMSUB {ch}\r\n").as_bytes()).unwrap();
        let mut got = vec![0u8; want.len()];
        s.read_exact(&mut got).unwrap();
        if got == want.as_bytes() {
            return;
        }
        assert!(Instant::now() < deadline, "numsub of {ch} stays {}", String::from_utf8_lossy(&got));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn resp2_reply_bytes_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    roundtrip(&mut b, b"SET k v\r\n", b"+OK\r\n");
    roundtrip(
        &mut a,
        b"SUBSCRIBE a b\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
    );
    roundtrip(
        &mut a,
        b"PING\r\nPING x\r\nGET k\r\nCLIENT LIST\r\n",
        b"*2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$1\r\nx\r\n\
          -ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n\
          -ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    roundtrip(&mut b, b"PUBLISH a hello\r\nPUBLISH zz no\r\n", b":1\r\n:0\r\n");
    expect(&mut a, b"*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n");
    roundtrip(&mut a, b"PSUBSCRIBE p*\r\n", b"*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:3\r\n");
    roundtrip(
        &mut b,
        b"PUBLISH pq m1\r\nPUBSUB NUMSUB a x\r\nPUBSUB NUMPAT\r\nPUBSUB CHANNELS a*\r\n",
        b":1\r\n*4\r\n$1\r\na\r\n:1\r\n$1\r\nx\r\n:0\r\n:1\r\n*1\r\n$1\r\na\r\n",
    );
    expect(&mut a, b"*4\r\n$8\r\npmessage\r\n$2\r\np*\r\n$2\r\npq\r\n$2\r\nm1\r\n");
    roundtrip(
        &mut a,
        b"UNSUBSCRIBE a b\r\nPUNSUBSCRIBE p*\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nPING\r\n",
        b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:1\r\n\
          *3\r\n$12\r\npunsubscribe\r\n$2\r\np*\r\n:0\r\n*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n\
          *3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n+PONG\r\n",
    );
    roundtrip(
        &mut b,
        b"SUBSCRIBE x\r\nSET k v\r\nRESET\r\nPUBLISH x y\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n\
          -ERR Can't execute 'set': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n\
          +RESET\r\n:0\r\n",
    );
    roundtrip(
        &mut b,
        b"PUBSUB FOO\r\nPUBSUB NUMPAT x\r\nSUBSCRIBE\r\n",
        b"-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n\
          -ERR wrong number of arguments for 'pubsub|numpat' command\r\n\
          -ERR wrong number of arguments for 'subscribe' command\r\n",
    );
}

#[test]
fn resp3_pushes_and_commands_while_subscribed() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut a = connect(srv.port);
    roundtrip(&mut a, b"SET k v\r\n", b"+OK\r\n");
    // HELLO's map, then PING's reply.
    a.write_all(b"HELLO 3\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"+PONG\r\n") {
        a.read_exact(&mut byte).unwrap();
        got.push(byte[0]);
    }
    assert!(got.starts_with(b"%7\r\n"));
    // Its own message comes before PUBLISH's reply, as in Redis.
    roundtrip(
        &mut a,
        b"SUBSCRIBE c\r\nPUBLISH c self\r\nGET k\r\nPING\r\nUNSUBSCRIBE c\r\nUNSUBSCRIBE\r\n",
        b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n>3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$4\r\nself\r\n:1\r\n\
          $1\r\nv\r\n+PONG\r\n>3\r\n$11\r\nunsubscribe\r\n$1\r\nc\r\n:0\r\n>3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n",
    );
    roundtrip(
        &mut a,
        b"SSUBSCRIBE s1\r\nSPUBLISH s1 m\r\nPUBSUB SHARDNUMSUB s1\r\nSUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\n",
        b">3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:1\r\n>3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$1\r\nm\r\n:1\r\n\
          *2\r\n$2\r\ns1\r\n:1\r\n>3\r\n$12\r\nsunsubscribe\r\n$2\r\ns1\r\n:0\r\n>3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n",
    );
}

#[test]
fn many_subscribers_on_all_loops_get_every_message_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--event-loops", "4"]);
    let mut subs: Vec<TcpStream> = (0..8).map(|_| connect(srv.port)).collect();
    for (i, s) in subs.iter_mut().enumerate() {
        if i % 2 == 0 {
            roundtrip(s, b"SUBSCRIBE news\r\n", b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
        } else {
            roundtrip(s, b"PSUBSCRIBE n*s\r\n", b"*3\r\n$10\r\npsubscribe\r\n$3\r\nn*s\r\n:1\r\n");
        }
    }
    let mut p = connect(srv.port);
    let mut req = Vec::new();
    for i in 0..200 {
        req.extend_from_slice(format!("PUBLISH news m{i:03}\r\n").as_bytes());
    }
    let mut want = Vec::new();
    for _ in 0..200 {
        want.extend_from_slice(b":8\r\n");
    }
    roundtrip(&mut p, &req, &want);
    for (i, s) in subs.iter_mut().enumerate() {
        let mut want = Vec::new();
        for m in 0..200 {
            if i % 2 == 0 {
                want.extend_from_slice(format!("*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$4\r\nm{m:03}\r\n").as_bytes());
            } else {
                want.extend_from_slice(
                    format!("*4\r\n$8\r\npmessage\r\n$3\r\nn*s\r\n$4\r\nnews\r\n$4\r\nm{m:03}\r\n").as_bytes(),
                );
            }
        }
        expect(s, &want);
    }
}

#[test]
fn close_unsubscribes_and_keyspace_events_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    roundtrip(&mut a, b"SUBSCRIBE gone\r\n", b"*3\r\n$9\r\nsubscribe\r\n$4\r\ngone\r\n:1\r\n");
    wait_numsub(&mut b, "gone", 1);
    drop(a);
    wait_numsub(&mut b, "gone", 0);
    roundtrip(&mut b, b"PUBLISH gone x\r\n", b":0\r\n");

    roundtrip(&mut b, b"CONFIG SET notify-keyspace-events KEA\r\n", b"+OK\r\n");
    let mut c = connect(srv.port);
    roundtrip(&mut c, b"PSUBSCRIBE __key*\r\n", b"*3\r\n$10\r\npsubscribe\r\n$6\r\n__key*\r\n:1\r\n");
    roundtrip(&mut b, b"RPUSH l x\r\n", b":1\r\n");
    expect(
        &mut c,
        b"*4\r\n$8\r\npmessage\r\n$6\r\n__key*\r\n$16\r\n__keyspace@0__:l\r\n$5\r\nrpush\r\n\
          *4\r\n$8\r\npmessage\r\n$6\r\n__key*\r\n$20\r\n__keyevent@0__:rpush\r\n$1\r\nl\r\n",
    );
    roundtrip(
        &mut b,
        b"CONFIG GET notify-keyspace-events\r\n",
        b"*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n",
    );
}

#[test]
fn a_subscriber_that_does_not_read_is_dropped_and_the_publisher_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut slow = connect(srv.port);
    roundtrip(&mut slow, b"SUBSCRIBE firehose\r\n", b"*3\r\n$9\r\nsubscribe\r\n$8\r\nfirehose\r\n:1\r\n");
    let mut p = connect(srv.port);
    // 64 KB messages, well past the 32 MB limit, while `slow` reads nothing.
    let payload = "x".repeat(64 << 10);
    let req = format!("*3\r\n$7\r\nPUBLISH\r\n$8\r\nfirehose\r\n${}\r\n{payload}\r\n", payload.len());
    let started = Instant::now();
    let mut receivers = Vec::new();
    for _ in 0..1200 {
        p.write_all(req.as_bytes()).unwrap();
        let mut r = [0u8; 4];
        p.read_exact(&mut r).unwrap();
        receivers.push(r);
    }
    assert!(started.elapsed() < Duration::from_secs(60), "the publisher was held up");
    assert_eq!(receivers.first(), Some(b":1\r\n"));
    // Past the limit the subscriber is gone: later publishes reach no one.
    wait_numsub(&mut p, "firehose", 0);
    roundtrip(&mut p, b"PUBLISH firehose again\r\n", b":0\r\n");
}

/// Reads one RESP2 array of bulk strings.
fn read_strings(s: &mut TcpStream) -> Vec<String> {
    let mut line = || {
        let mut l = Vec::new();
        let mut b = [0u8; 1];
        while !l.ends_with(b"\r\n") {
            s.read_exact(&mut b).unwrap();
            l.push(b[0]);
        }
        l.truncate(l.len() - 2);
        String::from_utf8(l).unwrap()
    };
    let n: usize = line().trim_start_matches('*').parse().unwrap();
    (0..n).map(|_| (line(), line()).1).collect()
}

#[test]
fn keyspace_events_in_redis_order() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut b = connect(srv.port);
    let mut a = connect(srv.port);
    roundtrip(&mut b, b"CONFIG SET notify-keyspace-events KEA\r\n", b"+OK\r\n");
    roundtrip(&mut a, b"PSUBSCRIBE __keyevent*\r\n", b"*3\r\n$10\r\npsubscribe\r\n$11\r\n__keyevent*\r\n:1\r\n");
    b.write_all(
        b"MSET a 1 b 2\r\nEXPIRE a -1\r\nSET c v EX 100\r\nGETEX c PERSIST\r\nRPUSH l1 x y\r\n\
          LMOVE l1 l2 LEFT RIGHT\r\nDEL b c nokey\r\nEXPIRE l2 100\r\nHSET h f v\r\nSADD s m\r\nSREM s m\r\n\
          INCR n\r\nRENAME n n2\r\nSETEX e 100 v\r\nZADD z 1 a\r\nZINCRBY z 1 a\r\n",
    )
    .unwrap();
    // As redis-server 7.0.15 publishes them for the same requests.
    let want = [
        ("set", "a"),
        ("set", "b"),
        ("del", "a"),
        ("set", "c"),
        ("expire", "c"),
        ("persist", "c"),
        ("rpush", "l1"),
        ("rpush", "l2"),
        ("lpop", "l1"),
        ("del", "b"),
        ("del", "c"),
        ("expire", "l2"),
        ("hset", "h"),
        ("sadd", "s"),
        ("srem", "s"),
        ("del", "s"),
        ("incrby", "n"),
        ("rename_from", "n"),
        ("rename_to", "n2"),
        ("set", "e"),
        ("expire", "e"),
        ("zadd", "z"),
        ("zincr", "z"),
    ];
    for (event, key) in want {
        let m = read_strings(&mut a);
        assert_eq!(m, ["pmessage", "__keyevent*", &format!("__keyevent@0__:{event}"), key]);
    }
}
