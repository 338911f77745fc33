//! `--shards N`: the server on the sharded front end (p2KVS). Strings,
//! hashes, sorted sets and transactions work across shards, the data
//! survives a restart and a SIGKILL (acknowledged `--durability sync`
//! writes, whole MULTI blocks), and another shard count is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{connect, info_field, read_bulk, read_line, req, roundtrip, start};

#[test]
fn commands_work_across_shards_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &["--shards", "3"]);
    let mut s = connect(srv.port);
    assert_eq!(info_field(&mut s, "persistence", "engine_shards"), "3");
    roundtrip(
        &mut s,
        b"SET a 1\r\nMSET b 2 c 3\r\nHSET h f1 v1 f2 v2 f3 v3\r\nZADD z 1 one 2 two 3 three\r\nRPUSH l x y z\r\n",
        b"+OK\r\n+OK\r\n:3\r\n:3\r\n:3\r\n",
    );
    roundtrip(
        &mut s,
        b"MGET a b c d\r\nHGETALL h\r\nZRANGEBYSCORE z 2 +inf LIMIT 0 1\r\nLRANGE l 0 -1\r\nDBSIZE\r\n",
        b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$-1\r\n\
*6\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n$2\r\nf3\r\n$2\r\nv3\r\n\
*1\r\n$3\r\ntwo\r\n*3\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nz\r\n:6\r\n",
    );
    roundtrip(&mut s, b"MULTI\r\nINCR a\r\nHDEL h f2\r\nEXEC\r\n", b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:2\r\n:1\r\n");
    let cross: u64 = info_field(&mut s, "persistence", "engine_cross_shard_batches").parse().unwrap();
    assert!(cross > 0, "a hash's meta and fields span shards");
    roundtrip(
        &mut s,
        b"SELECT 1\r\nCONFIG GET databases\r\n",
        b"-ERR DB index is out of range\r\n*2\r\n$9\r\ndatabases\r\n$1\r\n1\r\n",
    );
    roundtrip(&mut s, b"SHUTDOWN\r\n", b"");
    drop(s);
    drop(srv);

    let srv = start(dir.path(), &["--shards", "3"]);
    let mut s = connect(srv.port);
    roundtrip(&mut s, b"GET a\r\nHLEN h\r\nZCARD z\r\n", b"$1\r\n2\r\n:2\r\n:3\r\n");
    roundtrip(&mut s, b"FLUSHALL\r\nDBSIZE\r\nGET a\r\n", b"+OK\r\n:0\r\n$-1\r\n");
    drop(srv);

    // Another shard count is refused at start, not silently re-hashed.
    let out = Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .args(["--port", &common::free_port().to_string(), "--dir"])
        .arg(dir.path())
        .args(["--pm-size", "128mb", "--shards", "2"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("3") && err.contains("2"), "names both counts: {err}");
}

/// With `--durability sync`, every acknowledged write is there after a
/// SIGKILL, and a MULTI block (hash fields on several shards) is whole.
#[test]
fn acknowledged_sync_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--shards", "2", "--durability", "sync"];
    let srv = start(dir.path(), &args);
    let mut s = connect(srv.port);
    let mut acked = 0;
    for i in 0..300 {
        let mut r = req(&["MULTI"]);
        r.extend(req(&["SET", &format!("k{i}"), &i.to_string()]));
        r.extend(req(&["HSET", &format!("h{i}"), "a", "1", "b", "2", "c", "3", "d", "4"]));
        r.extend(req(&["EXEC"]));
        s.write_all(&r).unwrap();
        for want in ["+OK", "+QUEUED", "+QUEUED", "*2", "+OK", ":4"] {
            assert_eq!(read_line(&mut s).trim_end(), want);
        }
        acked = i + 1;
    }
    drop(srv); // SIGKILL
    let srv = start(dir.path(), &args);
    let mut s = connect(srv.port);
    for i in 0..acked {
        s.write_all(&req(&["GET", &format!("k{i}")])).unwrap();
        assert_eq!(read_bulk(&mut s), i.to_string().into_bytes());
        roundtrip(&mut s, &req(&["HLEN", &format!("h{i}")]), b":4\r\n");
    }
}
