//! A script running past `lua-time-limit` with ONE event loop: scripts
//! run on the script thread, so the loop serves the other clients: they
//! wait before the limit, get `-BUSY` after it, and SCRIPT KILL stops a
//! script that has not written (UNKILLABLE otherwise; SHUTDOWN NOSAVE then
//! stops it and drops its writes), as in Redis 7.0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{connect, read_line, req, roundtrip, start, wait_exit};

const BUSY: &str = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

#[test]
fn busy_script_serves_others_and_script_kill_ends_it() {
    busy_script_with_loops("1");
}

/// The same with the two clients on two event loops: the other loop holds
/// its client back, then answers -BUSY, as the script's own loop does.
#[test]
fn busy_script_with_two_event_loops() {
    busy_script_with_loops("2");
}

fn busy_script_with_loops(loops: &str) {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--event-loops", loops]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    roundtrip(&mut a, &req(&["CONFIG", "SET", "lua-time-limit", "200"]), b"+OK\r\n");
    roundtrip(&mut a, &req(&["SET", "x", "1"]), b"+OK\r\n");
    a.write_all(&req(&["EVAL", "while true do end", "0"])).unwrap();
    std::thread::sleep(Duration::from_millis(20));

    // Sent before the limit: answered (-BUSY) only once the script has run
    // past it; the loop did not serve the command meanwhile.
    let sent = Instant::now();
    b.write_all(&req(&["GET", "x"])).unwrap();
    assert_eq!(read_line(&mut b), BUSY);
    assert!(sent.elapsed() >= Duration::from_millis(100), "answered after {:?}", sent.elapsed());

    // Inside MULTI a refused command fails the EXEC; MULTI itself is allowed.
    roundtrip(&mut b, &req(&["MULTI"]), b"+OK\r\n");
    b.write_all(&req(&["INCR", "x"])).unwrap();
    assert_eq!(read_line(&mut b), BUSY);
    b.write_all(&req(&["EXEC"])).unwrap();
    assert_eq!(read_line(&mut b), format!("-EXECABORT Transaction discarded because of: {}", &BUSY[1..]));

    roundtrip(&mut b, &req(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let killed = read_line(&mut a);
    assert!(killed.starts_with("-ERR") && killed.contains("Script killed by user"), "{killed}");
    roundtrip(&mut b, &req(&["SCRIPT", "KILL"]), b"-NOTBUSY No scripts in execution right now.\r\n");
    roundtrip(&mut b, &req(&["GET", "x"]), b"$1\r\n1\r\n");
    roundtrip(&mut a, &req(&["PING"]), b"+PONG\r\n");
}

#[test]
fn clients_wait_for_a_script_before_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--event-loops", "1"]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    roundtrip(&mut a, &req(&["CONFIG", "SET", "lua-time-limit", "20000"]), b"+OK\r\n");
    roundtrip(&mut a, &req(&["SET", "x", "1"]), b"+OK\r\n");
    // Busy for a while, then one write: nobody may see the state before it.
    let script = "local n = 0 for i = 1, 30000000 do n = n + 1 end redis.call('set', 'x', '2') return n";
    a.write_all(&req(&["EVAL", script, "0"])).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    roundtrip(&mut b, &req(&["GET", "x"]), b"$1\r\n2\r\n");
    roundtrip(&mut a, b"", b":30000000\r\n");
}

#[test]
fn script_that_wrote_is_unkillable_and_shutdown_nosave_drops_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = start(dir.path(), &["--event-loops", "1"]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    roundtrip(&mut a, &req(&["CONFIG", "SET", "lua-time-limit", "100"]), b"+OK\r\n");
    roundtrip(&mut a, &req(&["SET", "x", "1"]), b"+OK\r\n");
    a.write_all(&req(&["EVAL", "redis.call('set', 'x', '2') while true do end", "0"])).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    b.write_all(&req(&["SCRIPT", "KILL"])).unwrap();
    let reply = read_line(&mut b);
    assert!(reply.starts_with("-UNKILLABLE Sorry the script already executed write commands"), "{reply}");
    b.write_all(&req(&["SHUTDOWN"])).unwrap();
    assert_eq!(read_line(&mut b), BUSY);
    b.write_all(&req(&["SHUTDOWN", "NOSAVE"])).unwrap();
    assert_eq!(wait_exit(&mut srv), 0);
    drop(srv);

    // The script's write was never applied.
    let srv = start(dir.path(), &["--event-loops", "1"]);
    let mut c = connect(srv.port);
    roundtrip(&mut c, &req(&["GET", "x"]), b"$1\r\n1\r\n");
}

#[test]
fn pipelined_scripts_answer_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--event-loops", "1"]);
    let mut a = connect(srv.port);
    roundtrip(&mut a, &req(&["SET", "x", "5"]), b"+OK\r\n");
    // Scripts after a script go to the script thread in the same pass;
    // everything else (errors included) waits for their replies.
    let incr = "return redis.call('incr', KEYS[1])";
    let mut pipeline = Vec::new();
    for r in [
        req(&["EVAL", incr, "1", "x"]),
        req(&["EVAL", incr, "1", "x"]),
        req(&["GET", "x"]),
        req(&["EVAL", "return 1"]),
        req(&["EVAL", incr, "1", "x"]),
        req(&["EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"]),
        req(&["EVAL", incr, "1", "x"]),
        req(&["PING"]),
    ] {
        pipeline.extend_from_slice(&r);
    }
    let want: &[u8] = b":6\r\n:7\r\n$1\r\n7\r\n-ERR wrong number of arguments for 'eval' command\r\n:8\r\n\
        -NOSCRIPT No matching script. Please use EVAL.\r\n:9\r\n+PONG\r\n";
    roundtrip(&mut a, &pipeline, want);
}
