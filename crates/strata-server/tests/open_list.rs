//! The items left open when the server issue was closed (issue 33): SHUTDOWN
//! refused inside MULTI, SHUTDOWN NOSAVE/SAVE and SAVE as Redis 7 has them,
//! BGSAVE in the background, maxclients counting only open connections,
//! and `everysec` fsyncing once a second. Reply bytes are redis-server 7.0's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{connect, info_field, read_to_close, roundtrip, start, wait_exit};

/// Redis 7 refuses SHUTDOWN while MULTI queues (`no-multi`) and discards
/// the transaction at EXEC; the server keeps running.
#[test]
fn shutdown_inside_multi_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"MULTI\r\nSET a 1\r\nSHUTDOWN\r\nEXEC\r\nMULTI\r\nSHUTDOWN NOSAVE\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n-ERR Command not allowed inside a transaction\r\n\
          -EXECABORT Transaction discarded because of previous errors.\r\n\
          +OK\r\n-ERR Command not allowed inside a transaction\r\n\
          -EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    roundtrip(&mut s, b"GET a\r\nPING\r\n", b"$-1\r\n+PONG\r\n");
    roundtrip(&mut s, b"SHUTDOWN NOSAVE SAVE\r\nSHUTDOWN BOGUS\r\n", b"-ERR syntax error\r\n-ERR syntax error\r\n");
    roundtrip(&mut s, b"SHUTDOWN ABORT\r\n", b"-ERR No shutdown in progress.\r\n");
}

/// With snapshots configured SHUTDOWN NOSAVE writes none; with no
/// persistence SHUTDOWN SAVE writes one and SAVE's snapshot is loaded at
/// the next start, as Redis loads dump.rdb.
#[test]
fn shutdown_nosave_save_and_save_without_persistence() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("dump.strata");
    let snapshots = ["--storage", "memory", "--snapshot-seconds", "3600"];
    let mut srv = start(dir.path(), &snapshots);
    let mut s = connect(srv.port);
    roundtrip(&mut s, b"SET a 1\r\nSHUTDOWN NOSAVE\r\n", b"+OK\r\n");
    assert_eq!(read_to_close(&mut s), b"");
    assert_eq!(wait_exit(&mut srv), 0);
    assert!(!snap.exists(), "SHUTDOWN NOSAVE wrote a snapshot");

    let none = ["--storage", "memory"];
    let mut srv = start(dir.path(), &none);
    let mut s = connect(srv.port);
    roundtrip(&mut s, b"DBSIZE\r\nSET a 1\r\nSAVE\r\nSET b 2\r\n", b":0\r\n+OK\r\n+OK\r\n+OK\r\n");
    assert!(snap.exists(), "SAVE writes a snapshot, as Redis's SAVE writes dump.rdb");
    s.write_all(b"SHUTDOWN\r\n").unwrap();
    assert_eq!(wait_exit(&mut srv), 0);
    let mut srv = start(dir.path(), &none);
    let mut s = connect(srv.port);
    // SAVE's snapshot is loaded; the write after it was not saved.
    roundtrip(&mut s, b"GET a\r\nGET b\r\nSET c 3\r\n", b"$1\r\n1\r\n$-1\r\n+OK\r\n");
    s.write_all(b"SHUTDOWN SAVE\r\n").unwrap();
    assert_eq!(wait_exit(&mut srv), 0);
    let srv = start(dir.path(), &none);
    let mut s = connect(srv.port);
    roundtrip(&mut s, b"GET c\r\n", b"$1\r\n3\r\n");
}

/// BGSAVE answers at once, a second one while it runs is refused as Redis
/// refuses it, and its snapshot carries the data across a kill -9.
#[test]
fn bgsave_runs_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--storage", "memory", "--snapshot-seconds", "3600"];
    {
        let srv = start(dir.path(), &args);
        let mut s = connect(srv.port);
        let mut fill = Vec::new();
        for i in 0..20_000 {
            fill.extend_from_slice(format!("SET key:{i} {}\r\n", "v".repeat(200)).as_bytes());
        }
        s.write_all(&fill).unwrap();
        let mut got = vec![0u8; 5 * 20_000];
        s.read_exact(&mut got).unwrap();
        roundtrip(&mut s, b"BGSAVE\r\n", b"+Background saving started\r\n");
        // Clients are served while it runs.
        roundtrip(&mut s, b"SET during 1\r\n", b"+OK\r\n");
        let deadline = Instant::now() + Duration::from_secs(60);
        while info_field(&mut s, "persistence", "rdb_bgsave_in_progress") != "0" {
            assert!(Instant::now() < deadline, "BGSAVE never finished");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(info_field(&mut s, "persistence", "rdb_last_bgsave_status"), "ok");
        roundtrip(&mut s, b"BGSAVE BOGUS\r\n", b"-ERR syntax error\r\n");
        // Dropping the server kills it: only the snapshot carries the data.
    }
    let srv = start(dir.path(), &args);
    let mut s = connect(srv.port);
    roundtrip(&mut s, b"DBSIZE\r\n", b":20000\r\n");
}

/// A second BGSAVE while one runs: Redis's error. Run against a store big
/// enough that the first is still writing when the second arrives.
#[test]
fn bgsave_while_one_runs_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--storage", "memory"]);
    let mut s = connect(srv.port);
    let mut fill = Vec::new();
    for i in 0..2_000 {
        fill.extend_from_slice(format!("SET key:{i} {}\r\n", "v".repeat(20_000)).as_bytes());
    }
    s.write_all(&fill).unwrap();
    let mut got = vec![0u8; 5 * 2_000];
    s.read_exact(&mut got).unwrap();
    roundtrip(
        &mut s,
        b"BGSAVE\r\nBGSAVE\r\nSAVE\r\n",
        b"+Background saving started\r\n-ERR Background save already in progress\r\n\
          -ERR Background save already in progress\r\n",
    );
}

/// maxclients counts open connections: a client that closes and connects
/// again at once, over and over, is never refused.
#[test]
fn rapid_reconnects_do_not_hit_maxclients() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--maxclients", "2"]);
    let _held = connect(srv.port);
    for i in 0..300 {
        let mut s = connect(srv.port);
        s.write_all(b"PING\r\n").unwrap();
        let mut b = [0u8; 7];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"+PONG\r\n", "reconnect {i} was refused: {}", String::from_utf8_lossy(&b));
    }
    // Over the limit with every connection open: still refused.
    let mut second = connect(srv.port);
    roundtrip(&mut second, b"PING\r\n", b"+PONG\r\n");
    let mut third = connect(srv.port);
    assert_eq!(read_to_close(&mut third), b"-ERR max number of clients reached\r\n");
}

/// `everysec` fsyncs the log once a second while writes go on, not every
/// 100 ms.
#[test]
fn everysec_fsyncs_once_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--storage", "memory", "--appendfsync", "everysec"]);
    let mut s = connect(srv.port);
    let before: u64 = info_field(&mut s, "persistence", "aof_fsyncs").parse().unwrap();
    let t = Instant::now();
    let mut i = 0;
    while t.elapsed() < Duration::from_millis(3500) {
        roundtrip(&mut s, format!("SET k{i} v\r\n").as_bytes(), b"+OK\r\n");
        i += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let after: u64 = info_field(&mut s, "persistence", "aof_fsyncs").parse().unwrap();
    let n = after - before;
    assert!((2..=5).contains(&n), "{n} fsyncs in 3.5 s of writes");
}
