//! SELECT's databases (issue 29): db 0 is the engine's default partition,
//! db n a partition of its own. Keys, counts, expiry, MULTI, MOVE/COPY,
//! FLUSHDB and FLUSHALL act on the selected database only, and every
//! database survives a restart. Error replies are redis-server 7.0's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{connect, read_bulk, roundtrip, start};

/// The `dbN:...` lines of `INFO keyspace`, in order.
fn keyspace(s: &mut TcpStream) -> Vec<String> {
    s.write_all(b"INFO keyspace\r\n").unwrap();
    let text = String::from_utf8(read_bulk(s)).unwrap();
    text.lines().filter(|l| l.starts_with("db")).map(str::to_string).collect()
}

/// Reads one `\r\n`-terminated line.
fn read_line(s: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut b).unwrap();
        line.push(b[0]);
    }
    String::from_utf8(line).unwrap()
}

#[test]
fn select_isolates_databases() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"SET k zero\r\nSELECT 3\r\nGET k\r\nSET k three\r\nHSET h f v\r\nRPUSH l a b\r\nDBSIZE\r\nEXISTS k h l\r\nKEYS k*\r\nSCAN 0 MATCH h\r\n",
        b"+OK\r\n+OK\r\n$-1\r\n+OK\r\n:1\r\n:2\r\n:3\r\n:3\r\n*1\r\n$1\r\nk\r\n*2\r\n$1\r\n0\r\n*1\r\n$1\r\nh\r\n",
    );
    roundtrip(
        &mut s,
        b"SELECT 0\r\nGET k\r\nDBSIZE\r\nEXISTS h l\r\nKEYS *\r\nSELECT 3\r\nGET k\r\nHGET h f\r\nLRANGE l 0 -1\r\n",
        b"+OK\r\n$4\r\nzero\r\n:1\r\n:0\r\n*1\r\n$1\r\nk\r\n+OK\r\n$5\r\nthree\r\n$1\r\nv\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    // Out of range or not a number: Redis's replies, and the connection
    // stays in the database it had.
    roundtrip(
        &mut s,
        b"SELECT 16\r\nSELECT -1\r\nSELECT x\r\nSELECT 99999999999999999999\r\nGET k\r\n",
        b"-ERR DB index is out of range\r\n-ERR DB index is out of range\r\n-ERR value is not an integer or out of range\r\n-ERR value is not an integer or out of range\r\n$5\r\nthree\r\n",
    );
    roundtrip(&mut s, b"CONFIG GET databases\r\n", b"*2\r\n$9\r\ndatabases\r\n$2\r\n16\r\n");
    assert_eq!(keyspace(&mut s), ["db0:keys=1,expires=0,avg_ttl=0", "db3:keys=3,expires=0,avg_ttl=0"]);
    s.write_all(b"CLIENT INFO\r\n").unwrap();
    let info = String::from_utf8(read_bulk(&mut s)).unwrap();
    assert!(info.contains(" db=3 "), "{info}");
    // Another connection starts in db 0; RESET goes back to it.
    let mut t = connect(srv.port);
    roundtrip(&mut t, b"GET k\r\nSELECT 3\r\nRESET\r\nGET k\r\n", b"$4\r\nzero\r\n+OK\r\n+RESET\r\n$4\r\nzero\r\n");
}

#[test]
fn flushdb_empties_only_the_selected_database_and_flushall_all() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"SET a 0\r\nSELECT 3\r\nSET b 3\r\nSADD s x y\r\nSELECT 5\r\nSET c 5\r\nSELECT 3\r\nFLUSHDB\r\nDBSIZE\r\nGET b\r\nSMEMBERS s\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n:2\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n:0\r\n$-1\r\n*0\r\n",
    );
    // The dropped database takes writes again; the others kept theirs.
    roundtrip(
        &mut s,
        b"SET b again\r\nGET b\r\nSELECT 0\r\nGET a\r\nSELECT 5\r\nGET c\r\n",
        b"+OK\r\n$5\r\nagain\r\n+OK\r\n$1\r\n0\r\n+OK\r\n$1\r\n5\r\n",
    );
    // FLUSHDB of db 0 leaves the others.
    roundtrip(
        &mut s,
        b"SELECT 0\r\nFLUSHDB ASYNC\r\nDBSIZE\r\nGET a\r\nSELECT 5\r\nGET c\r\nSELECT 3\r\nGET b\r\n",
        b"+OK\r\n+OK\r\n:0\r\n$-1\r\n+OK\r\n$1\r\n5\r\n+OK\r\n$5\r\nagain\r\n",
    );
    assert_eq!(keyspace(&mut s), ["db3:keys=1,expires=0,avg_ttl=0", "db5:keys=1,expires=0,avg_ttl=0"]);
    // FLUSHDB in MULTI, with writes after it in the same block.
    roundtrip(
        &mut s,
        b"MULTI\r\nFLUSHDB\r\nSET after 1\r\nEXEC\r\nDBSIZE\r\nGET b\r\nGET after\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n:1\r\n$-1\r\n$1\r\n1\r\n",
    );
    roundtrip(
        &mut s,
        b"FLUSHALL\r\nDBSIZE\r\nGET after\r\nSELECT 5\r\nDBSIZE\r\nGET c\r\nSELECT 0\r\nDBSIZE\r\nSET z 1\r\nGET z\r\nFLUSHDB x\r\n",
        b"+OK\r\n:0\r\n$-1\r\n+OK\r\n:0\r\n$-1\r\n+OK\r\n:0\r\n+OK\r\n$1\r\n1\r\n-ERR syntax error\r\n",
    );
    assert_eq!(keyspace(&mut s), ["db0:keys=1,expires=0,avg_ttl=0"]);
}

#[test]
fn data_in_db3_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let srv = start(dir.path(), &["--durability", "sync"]);
        let mut s = connect(srv.port);
        roundtrip(
            &mut s,
            b"SELECT 3\r\nSET k v3\r\nRPUSH l a b c\r\nSET t x EX 1000\r\nSELECT 4\r\nSET gone 1\r\nFLUSHDB\r\nSELECT 0\r\nSET k v0\r\n",
            b"+OK\r\n+OK\r\n:3\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n",
        );
        // Dropping the server kills it (SIGKILL): acknowledged writes stay.
    }
    {
        let srv = start(dir.path(), &[]);
        let mut s = connect(srv.port);
        roundtrip(
            &mut s,
            b"DBSIZE\r\nGET k\r\nSELECT 3\r\nDBSIZE\r\nGET k\r\nLRANGE l 0 -1\r\nSELECT 4\r\nDBSIZE\r\nGET gone\r\n",
            b":1\r\n$2\r\nv0\r\n+OK\r\n:3\r\n$2\r\nv3\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n+OK\r\n:0\r\n$-1\r\n",
        );
        assert_eq!(keyspace(&mut s), ["db0:keys=1,expires=0,avg_ttl=0", "db3:keys=3,expires=1,avg_ttl=0"]);
        // A FLUSHDB of db 3 after the restart, then a clean shutdown.
        roundtrip(&mut s, b"SELECT 3\r\nFLUSHDB\r\nSET new 1\r\nSHUTDOWN\r\n", b"+OK\r\n+OK\r\n+OK\r\n");
        let mut srv = srv;
        assert_eq!(common::wait_exit(&mut srv), 0);
    }
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"SELECT 3\r\nDBSIZE\r\nGET new\r\nGET k\r\nSELECT 0\r\nGET k\r\n",
        b"+OK\r\n:1\r\n$1\r\n1\r\n$-1\r\n+OK\r\n$2\r\nv0\r\n",
    );
}

#[test]
fn multi_move_copy_and_swapdb() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    // SELECT inside MULTI: the commands after it act on its database, and
    // the connection stays there after EXEC (as in Redis).
    roundtrip(
        &mut s,
        b"MULTI\r\nSET a 0\r\nSELECT 2\r\nSET a 2\r\nINCR a\r\nEXEC\r\nGET a\r\nSELECT 0\r\nGET a\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n+OK\r\n+OK\r\n+OK\r\n:3\r\n$1\r\n3\r\n+OK\r\n$1\r\n0\r\n",
    );
    roundtrip(
        &mut s,
        b"SET m x\r\nEXPIRE m 100\r\nMOVE m 4\r\nEXISTS m\r\nMOVE m 4\r\nMOVE a 0\r\nMOVE a 16\r\nMOVE a x\r\nSELECT 4\r\nGET m\r\nTTL m\r\n",
        b"+OK\r\n:1\r\n:1\r\n:0\r\n:0\r\n-ERR source and destination objects are the same\r\n-ERR DB index is out of range\r\n-ERR value is not an integer or out of range\r\n+OK\r\n$1\r\nx\r\n",
    );
    let ttl = read_line(&mut s);
    assert!(ttl == ":100\r\n" || ttl == ":99\r\n", "{ttl}");
    roundtrip(
        &mut s,
        b"SET a other\r\nSELECT 0\r\nMOVE a 4\r\nGET a\r\nRPUSH q 1 2\r\nCOPY q q DB 5\r\nCOPY q q\r\nCOPY q r DB 16\r\nSELECT 5\r\nLRANGE q 0 -1\r\n",
        b"+OK\r\n+OK\r\n:0\r\n$1\r\n0\r\n:2\r\n:1\r\n-ERR source and destination objects are the same\r\n-ERR DB index is out of range\r\n+OK\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    roundtrip(
        &mut s,
        b"SWAPDB 0 1\r\nSWAPDB 0 99\r\nDBSIZE\r\n",
        b"-ERR SWAPDB is not supported by strata-server\r\n-ERR DB index is out of range\r\n:1\r\n",
    );
    assert_eq!(
        keyspace(&mut s),
        [
            "db0:keys=2,expires=0,avg_ttl=0",
            "db2:keys=1,expires=0,avg_ttl=0",
            "db4:keys=2,expires=1,avg_ttl=0",
            "db5:keys=1,expires=0,avg_ttl=0"
        ]
    );
}

/// Redis's multi.tcl "FLUSHDB/FLUSHALL is able to touch the watched keys"
/// and "... does not touch non affected keys", and a flush of another
/// database leaves a WATCH alone.
#[test]
fn flushes_touch_the_watched_keys_that_exist() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    let aborted = b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n*-1\r\n";
    let passed = b"+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n";
    roundtrip(&mut s, b"SET x 30\r\nWATCH x\r\nFLUSHDB\r\nMULTI\r\nPING\r\nEXEC\r\n", aborted);
    roundtrip(
        &mut s,
        b"DEL x\r\nWATCH x\r\nFLUSHDB\r\nMULTI\r\nPING\r\nEXEC\r\n",
        &[b":0\r\n".as_slice(), passed].concat(),
    );
    roundtrip(&mut s, b"SET x 30\r\nWATCH x\r\nFLUSHALL\r\nMULTI\r\nPING\r\nEXEC\r\n", aborted);
    roundtrip(
        &mut s,
        b"DEL x\r\nWATCH x\r\nFLUSHALL\r\nMULTI\r\nPING\r\nEXEC\r\n",
        &[b":0\r\n".as_slice(), passed].concat(),
    );
    roundtrip(
        &mut s,
        b"SET x 30\r\nWATCH x\r\nSELECT 3\r\nSET y 1\r\nFLUSHDB\r\nSELECT 0\r\nMULTI\r\nPING\r\nEXEC\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n",
    );
    // A key watched in db 3, flushed there.
    roundtrip(
        &mut s,
        b"SELECT 3\r\nSET y 1\r\nWATCH y\r\nSELECT 0\r\nFLUSHALL\r\nMULTI\r\nPING\r\nEXEC\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n*-1\r\n",
    );
}

#[test]
fn keys_expire_in_every_database() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(&mut s, b"SELECT 7\r\nSET e v PX 100\r\nSET keep v\r\nDBSIZE\r\n", b"+OK\r\n+OK\r\n+OK\r\n:2\r\n");
    // The background sweep removes it from db 7's count.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        s.write_all(b"DBSIZE\r\n").unwrap();
        if read_line(&mut s) == ":1\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the expired key in db 7 was not swept");
        std::thread::sleep(Duration::from_millis(50));
    }
    roundtrip(&mut s, b"GET e\r\nGET keep\r\n", b"$-1\r\n$1\r\nv\r\n");
}

#[test]
fn the_memory_store_has_db_0_only() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--storage", "memory"]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"SELECT 0\r\nSELECT 1\r\nCONFIG GET databases\r\nMOVE k 1\r\n",
        b"+OK\r\n-ERR DB index is out of range\r\n*2\r\n$9\r\ndatabases\r\n$1\r\n1\r\n-ERR DB index is out of range\r\n",
    );
}

/// FLUSHALL in MULTI with writes after it in other databases: they land on
/// the emptied keyspace (the one-step flush commits first) and survive a
/// SIGKILL.
#[test]
fn flushall_in_multi_keeps_the_writes_after_it_in_every_database() {
    let dir = tempfile::tempdir().unwrap();
    {
        let srv = start(dir.path(), &["--durability", "sync"]);
        let mut s = connect(srv.port);
        roundtrip(
            &mut s,
            b"SET a 0\r\nSELECT 3\r\nSET b 3\r\nSELECT 5\r\nSET c 5\r\nSELECT 0\r\n",
            b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n",
        );
        roundtrip(
            &mut s,
            b"MULTI\r\nSELECT 3\r\nSET early 1\r\nFLUSHALL\r\nSET b3 new\r\nSELECT 0\r\nSET a0 new\r\nEXEC\r\n",
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*6\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n",
        );
        assert_eq!(keyspace(&mut s), ["db0:keys=1,expires=0,avg_ttl=0", "db3:keys=1,expires=0,avg_ttl=0"]);
    }
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"GET a\r\nGET a0\r\nSELECT 3\r\nGET b\r\nGET early\r\nGET b3\r\nSELECT 5\r\nDBSIZE\r\n",
        b"$-1\r\n$3\r\nnew\r\n+OK\r\n$-1\r\n$-1\r\n$3\r\nnew\r\n+OK\r\n:0\r\n",
    );
    assert_eq!(keyspace(&mut s), ["db0:keys=1,expires=0,avg_ttl=0", "db3:keys=1,expires=0,avg_ttl=0"]);
}
