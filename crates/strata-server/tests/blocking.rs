//! Blocking list pops served on the event loop: a waiting client gets the
//! element another client pushes, requests it pipelined after the blocking
//! one wait for it, timeouts answer Redis 7's null array, INFO counts the
//! blocked clients and stops counting one that disconnects, and inside
//! MULTI nothing blocks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{connect, info_field, roundtrip, start};

fn wait_blocked(s: &mut std::net::TcpStream, n: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(s, "clients", "blocked_clients") != n {
        assert!(Instant::now() < deadline, "blocked_clients never reached {n}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn blocked_clients_get_pushed_elements_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--event-loops", "2"]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    let mut c = connect(srv.port);
    a.write_all(b"BLPOP q1 q2 0\r\nPING\r\n").unwrap();
    wait_blocked(&mut c, "1");
    b.write_all(b"BLMOVE src dst RIGHT LEFT 0\r\n").unwrap();
    wait_blocked(&mut c, "2");
    roundtrip(&mut c, b"RPUSH q2 hello\r\nRPUSH src x y\r\n", b":1\r\n:2\r\n");
    // The PING sent after BLPOP is answered only after it.
    let want = b"*2\r\n$2\r\nq2\r\n$5\r\nhello\r\n+PONG\r\n";
    let mut got = vec![0u8; want.len()];
    a.read_exact(&mut got).unwrap();
    assert_eq!(got, want);
    let mut got = vec![0u8; 7];
    b.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"$1\r\ny\r\n");
    roundtrip(&mut c, b"LRANGE dst 0 -1\r\nLRANGE src 0 -1\r\n", b"*1\r\n$1\r\ny\r\n*1\r\n$1\r\nx\r\n");
    wait_blocked(&mut c, "0");
}

#[test]
fn timeouts_disconnects_and_multi() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut a = connect(srv.port);
    let t = Instant::now();
    roundtrip(&mut a, b"BLPOP nokey 0.2\r\n", b"*-1\r\n");
    assert!(t.elapsed() >= Duration::from_millis(190), "answered early: {:?}", t.elapsed());
    roundtrip(&mut a, b"BRPOPLPUSH nokey d 0.05\r\n", b"*-1\r\n");
    roundtrip(
        &mut a,
        b"BLPOP nokey -1\r\nBLPOP nokey x\r\n",
        b"-ERR timeout is negative\r\n-ERR timeout is not a float or out of range\r\n",
    );
    roundtrip(
        &mut a,
        b"MULTI\r\nBLPOP nokey 0\r\nBLMOVE nokey d LEFT LEFT 0\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n*-1\r\n$-1\r\n",
    );
    let mut gone = connect(srv.port);
    gone.write_all(b"BLPOP nokey 0\r\n").unwrap();
    wait_blocked(&mut a, "1");
    drop(gone);
    wait_blocked(&mut a, "0");
    // Nothing was taken by the client that left.
    roundtrip(&mut a, b"RPUSH nokey v\r\nLLEN nokey\r\n", b":1\r\n:1\r\n");
}

/// Reads exactly `want.len()` bytes from `s` and compares them.
fn expect(s: &mut std::net::TcpStream, want: &[u8]) {
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
}

/// CLIENT UNBLOCK from another connection (on another loop) ends a wait
/// as a timeout or with the UNBLOCKED error, answers 0 for a client that
/// does not wait, and leaves the client able to wait again; reply bytes as
/// redis-server 7.0 sends them.
#[test]
fn client_unblock_ends_a_wait_from_another_connection() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--event-loops", "2"]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    a.write_all(b"CLIENT ID\r\n").unwrap();
    let mut id = Vec::new();
    let mut byte = [0u8];
    while !id.ends_with(b"\r\n") {
        a.read_exact(&mut byte).unwrap();
        id.push(byte[0]);
    }
    let id = String::from_utf8(id).unwrap().trim().trim_start_matches(':').to_string();
    for (how, reply) in [
        ("", &b"*-1\r\n"[..]),
        (" TIMEOUT", b"*-1\r\n"),
        (" error", b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"),
    ] {
        a.write_all(b"BLMOVE src dst LEFT RIGHT 0\r\n").unwrap();
        wait_blocked(&mut b, "1");
        roundtrip(&mut b, format!("CLIENT UNBLOCK {id}{how}\r\n").as_bytes(), b":1\r\n");
        expect(&mut a, reply);
        wait_blocked(&mut b, "0");
    }
    roundtrip(
        &mut b,
        format!("CLIENT UNBLOCK {id}\r\nCLIENT UNBLOCK asd\r\nCLIENT UNBLOCK {id} later\r\nCLIENT UNBLOCK\r\n").as_bytes(),
        b":0\r\n-ERR value is not an integer or out of range\r\n-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n-ERR wrong number of arguments for 'client|unblock' command\r\n",
    );
    a.write_all(b"BLPOP l 0\r\n").unwrap();
    wait_blocked(&mut b, "1");
    roundtrip(&mut b, b"LPUSH l foo\r\n", b":1\r\n");
    expect(&mut a, b"*2\r\n$1\r\nl\r\n$3\r\nfoo\r\n");
    // A waiting client that leaves is no longer one to unblock.
    a.write_all(b"BLPOP l 0\r\n").unwrap();
    wait_blocked(&mut b, "1");
    drop(a);
    wait_blocked(&mut b, "0");
    roundtrip(&mut b, format!("CLIENT UNBLOCK {id}\r\nCLIENT UNBLOCK -1\r\n").as_bytes(), b":0\r\n:0\r\n");
}
