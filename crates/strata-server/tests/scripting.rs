//! Lua scripting (EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL): each request's
//! reply bytes as redis-server 7.0.15 sent them (captured from it), a
//! script's writes kept when it fails after them (as Redis does), and its
//! writes as durable as any other once acknowledged (kill -9).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{connect, req, roundtrip, start};

#[test]
fn replies_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    let cases: &[(&[&str], &[u8])] = &[
        (&["FLUSHALL"], b"+OK\r\n"),
        (&["EVAL", "return 100.5", "0"], b":100\r\n"),
        (&["EVAL", "return 'hello world'", "0"], b"$11\r\nhello world\r\n"),
        (&["EVAL", "return true", "0"], b":1\r\n"),
        (&["EVAL", "return false", "0"], b"$-1\r\n"),
        (&["EVAL", "return {ok='fine'}", "0"], b"+fine\r\n"),
        (&["EVAL", "return {err='ERR this is an error'}", "0"], b"-ERR this is an error\r\n"),
        (&["EVAL", "return {1,2,3,'ciao',{1,2}}", "0"], b"*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n"),
        (&["EVAL", "return {1,nil,3}", "0"], b"*1\r\n:1\r\n"),
        (&["EVAL", "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}", "2", "a", "b", "c", "d"], b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
        (&["EVAL", "return redis.status_reply('PONG')", "0"], b"+PONG\r\n"),
        (&["EVAL", "return redis.error_reply('MY_CODE custom')", "0"], b"-MY_CODE custom\r\n"),
        (&["SET", "x", "5"], b"+OK\r\n"),
        (&["EVAL", "local v = redis.call('incr', KEYS[1]) return {type(v), v}", "1", "x"], b"*2\r\n$6\r\nnumber\r\n:6\r\n"),
        (&["EVAL", "local v = redis.call('get', 'nokey') return {type(v), tostring(v)}", "0"], b"*2\r\n$7\r\nboolean\r\n$5\r\nfalse\r\n"),
        (&["EVAL", "local v = redis.call('set', 'y', 'z') return {type(v), v.ok}", "0"], b"*2\r\n$5\r\ntable\r\n$2\r\nOK\r\n"),
        (&["EVAL", "redis.setresp(3) return redis.call('hgetall', 'nokey')", "0"], b"*0\r\n"),
        (&["EVAL", "return 1", "-1"], b"-ERR Number of keys can't be negative\r\n"),
        (&["EVAL", "return 1", "2", "a"], b"-ERR Number of keys can't be greater than number of args\r\n"),
        (&["EVAL", "return 1", "x"], b"-ERR value is not an integer or out of range\r\n"),
        (&["SCRIPT", "LOAD", "return 'loaded'"], b"$40\r\nb534286061d4b9e4026607613b95c06c06015ae8\r\n"),
        (&["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"], b"$6\r\nloaded\r\n"),
        (&["EVALSHA", "B534286061D4B9E4026607613B95C06C06015AE8", "0"], b"$6\r\nloaded\r\n"),
        (&["EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"], b"-NOSCRIPT No matching script. Please use EVAL.\r\n"),
        (&["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8", "ffd632c7d33e571e9f24556ebed26c3479a87130"], b"*2\r\n:1\r\n:0\r\n"),
        (&["SCRIPT", "FLUSH"], b"+OK\r\n"),
        (&["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8"], b"*1\r\n:0\r\n"),
        (&["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"], b"-NOSCRIPT No matching script. Please use EVAL.\r\n"),
        (&["SET", "s", "str"], b"+OK\r\n"),
        (&["EVAL", "local t = redis.pcall('lpush', KEYS[1], 'v') return t", "1", "s"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["EVAL", "local t = redis.pcall('nosuch') return t.err", "0"], b"$44\r\nERR Unknown Redis command called from script\r\n"),
        (&["EVAL", "local t = redis.pcall('get', 'a', 'b') return t.err", "0"], b"$58\r\nERR Wrong number of args calling Redis command from script\r\n"),
        (&["EVAL", "redis.call('lpush', KEYS[1], 'v') return 1", "1", "s"], b"-WRONGTYPE Operation against a key holding the wrong kind of value script: fc3bb8270a5bc56abe0b40ea403ffefc90a7e24c, on @user_script:1.\r\n"),
        (&["EVAL", "redis.call('nosuch') return 1", "0"], b"-ERR Unknown Redis command called from script script: ac65d9d18fee374ebc129aa5b3db6278a71df110, on @user_script:1.\r\n"),
        (&["EVAL", "return a", "0"], b"-ERR user_script:1: Script attempted to access nonexistent global variable 'a' script: bbfcd1ececc90deec823f7fb730e4bfb2a4ba625, on @user_script:1.\r\n"),
        (&["EVAL", "a = 1", "0"], b"-ERR user_script:1: Attempt to modify a readonly table script: b88f1ec0c9fe96fde96a6f9dabcbeee661dd7afe, on @user_script:1.\r\n"),
        (&["EVAL", "return 1 +", "0"], b"-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n"),
        (&["EVAL", "return redis.sha1hex('Pizza & Mandolino')", "0"], b"$40\r\n74822d82031af7493c20eefa13bd07ec4fada82f\r\n"),
        (&["EVAL", "return cjson.encode({1,2,{a='b/c'}})", "0"], b"$18\r\n[1,2,{\"a\":\"b\\/c\"}]\r\n"),
        (&["EVAL", "return cjson.decode('{\"k\":[1,2.5,\"x\"]}').k[2]", "0"], b":2\r\n"),
        (&["EVAL", "return bit.band(0xff, 0x0f) + bit.lshift(1, 4)", "0"], b":31\r\n"),
        (&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "x"], b"$1\r\n6\r\n"),
        (&["EVAL_RO", "redis.call('del', KEYS[1]) return 1", "1", "x"], b"-ERR Write commands are not allowed from read-only scripts. script: 5b8d634568584a5b07b318fc302866ad2d768200, on @user_script:1.\r\n"),
        (&["EVAL", "#!lua flags=no-writes\nredis.call('set', 'x', 1) return 1", "1", "x"], b"-ERR Write commands are not allowed from read-only scripts. script: a6b97d6e477a9963088bb691a4b0d131a91750eb, on @user_script:2.\r\n"),
        (&["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'x')", "1", "x"], b"$1\r\n6\r\n"),
        (&["EVAL", "#!lua badger=x\nreturn 1", "0"], b"-ERR Unknown lua shebang option: badger=x\r\n"),
        (&["EVAL", "#!lua flags=what\nreturn 1", "0"], b"-ERR Unexpected flag in script shebang: what\r\n"),
        (&["EVAL", "#!perl\nreturn 1", "0"], b"-ERR Unexpected engine in script shebang: #!perl\r\n"),
        (&["EVAL", "return redis.pcall('blpop', 'l', 0)", "0"], b"-ERR This Redis command is not allowed from script\r\n"),
        (&["EVAL", "redis.call('select', 1) redis.call('set', 'k1', 'v1') return redis.call('get', 'k1')", "0"], b"$2\r\nv1\r\n"),
        (&["GET", "k1"], b"$-1\r\n"),
        (&["FUNCTION", "LOAD", "#!lua name=mylib\nredis.register_function('f1', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)\nredis.register_function{function_name='f2', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}"], b"$5\r\nmylib\r\n"),
        (&["FUNCTION", "LOAD", "#!lua name=mylib\nredis.register_function('f1', function() return 1 end)"], b"-ERR Library 'mylib' already exists\r\n"),
        (&["FCALL", "f1", "1", "x", "10"], b":16\r\n"),
        (&["FCALL_RO", "f2", "1", "x"], b"$2\r\n16\r\n"),
        (&["FCALL_RO", "f1", "1", "x", "10"], b"-ERR Can not execute a script with write flag using *_ro command.\r\n"),
        (&["FCALL", "nosuch", "0"], b"-ERR Function not found\r\n"),
        (&["FUNCTION", "LIST"], b"*1\r\n*6\r\n$12\r\nlibrary_name\r\n$5\r\nmylib\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*2\r\n*6\r\n$4\r\nname\r\n$2\r\nf1\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n*6\r\n$4\r\nname\r\n$2\r\nf2\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*1\r\n+no-writes\r\n"),
        (&["FUNCTION", "LOAD", "return 1"], b"-ERR Missing library metadata\r\n"),
        (&["FUNCTION", "LOAD", "#!lua name=empty\nlocal a = 1"], b"-ERR No functions registered\r\n"),
        (&["FUNCTION", "DELETE", "mylib"], b"+OK\r\n"),
        (&["FUNCTION", "DELETE", "mylib"], b"-ERR Library not found\r\n"),
        (&["FCALL", "f1", "1", "x", "10"], b"-ERR Function not found\r\n"),
        (&["MULTI"], b"+OK\r\n"),
        (&["EVAL", "return redis.call('incr', KEYS[1])", "1", "x"], b"+QUEUED\r\n"),
        (&["INCR", "x"], b"+QUEUED\r\n"),
        (&["EXEC"], b"*2\r\n:17\r\n:18\r\n"),    ];
    for (args, want) in cases {
        roundtrip(&mut s, &req(args), want);
    }
}

/// Redis keeps what a script wrote before it failed (no rollback); the
/// writes of one script are one engine batch.
#[test]
fn failed_script_keeps_earlier_writes() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    let script = "redis.call('set', 'a', 1) redis.call('set', 'b', 2) redis.call('set', 'c', 3) \
                  redis.call('lpush', 'a', 'x') return 1";
    roundtrip(
        &mut s,
        &req(&["EVAL", script, "0"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value script: \
          d34f3ab81aee1d7518f460cf2259c184180ba3c8, on @user_script:1.\r\n",
    );
    roundtrip(&mut s, &req(&["MGET", "a", "b", "c"]), b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
    // A Lua error (not a command's) keeps the writes too.
    roundtrip(
        &mut s,
        &req(&["EVAL", "redis.call('incr', 'a') error('boom')", "0"]),
        b"-ERR user_script:1: boom script: 89b8aad72249889b31abc12a86868fbd05c26349, on @user_script:1.\r\n",
    );
    roundtrip(&mut s, &req(&["GET", "a"]), b"$1\r\n2\r\n");
}

/// A script's writes, once acknowledged, survive kill -9 like any write
/// (`--durability sync`), and FUNCTION libraries are per process.
#[test]
fn script_writes_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    {
        let srv = start(dir.path(), &["--durability", "sync"]);
        let mut s = connect(srv.port);
        roundtrip(
            &mut s,
            &req(&[
                "EVAL",
                "for i = 1, 100 do redis.call('rpush', KEYS[1], i) end return redis.call('llen', KEYS[1])",
                "1",
                "l",
            ]),
            b":100\r\n",
        );
        roundtrip(
            &mut s,
            &req(&[
                "FUNCTION",
                "LOAD",
                "#!lua name=lib\nredis.register_function('f', function(k, a) return redis.call('set', k[1], a[1]) end)",
            ]),
            b"$3\r\nlib\r\n",
        );
        roundtrip(&mut s, &req(&["FCALL", "f", "1", "k", "v"]), b"+OK\r\n");
        // Dropping the server kills it (SIGKILL).
    }
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(&mut s, &req(&["LLEN", "l"]), b":100\r\n");
    roundtrip(&mut s, &req(&["LINDEX", "l", "99"]), b"$3\r\n100\r\n");
    roundtrip(&mut s, &req(&["GET", "k"]), b"$1\r\nv\r\n");
}

/// A script's writes are changes like any other: a WATCH on a key it
/// wrote aborts the EXEC, and a client blocked on a list it pushed to is
/// served.
#[test]
fn script_writes_wake_watchers_and_blocked_clients() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut a = connect(srv.port);
    let mut b = connect(srv.port);
    roundtrip(&mut a, &req(&["WATCH", "w"]), b"+OK\r\n");
    roundtrip(&mut b, &req(&["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "w"]), b"+OK\r\n");
    roundtrip(&mut a, &req(&["MULTI"]), b"+OK\r\n");
    roundtrip(&mut a, &req(&["SET", "w", "y"]), b"+QUEUED\r\n");
    roundtrip(&mut a, &req(&["EXEC"]), b"*-1\r\n");
    use std::io::Write;
    a.write_all(&req(&["BLPOP", "q", "10"])).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    roundtrip(&mut b, &req(&["EVAL", "return redis.call('rpush', 'q', 'v')", "0"]), b":1\r\n");
    roundtrip(&mut a, b"", b"*2\r\n$1\r\nq\r\n$1\r\nv\r\n");
}

/// SORT and SORT_RO (which scripts use), reply bytes from redis-server
/// 7.0.15: numeric, ALPHA, BY/GET patterns, LIMIT, STORE, and a set
/// sorted BY a constant inside a script coming out ordered.
#[test]
fn sort_matches_redis() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    let cases: &[(&[&str], &[u8])] = &[
        (&["FLUSHALL"], b"+OK\r\n"),
        (&["RPUSH", "l", "3", "1", "10", "2"], b":4\r\n"),
        (&["SORT", "l"], b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
        (&["SORT", "l", "DESC"], b"*4\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n"),
        (&["SORT", "l", "ALPHA"], b"*4\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n"),
        (&["SORT", "l", "LIMIT", "1", "2"], b"*2\r\n$1\r\n2\r\n$1\r\n3\r\n"),
        (&["SORT", "l", "LIMIT", "-5", "-1"], b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
        (&["MSET", "w_3", "30", "w_1", "100", "w_10", "5", "w_2", "20"], b"+OK\r\n"),
        (&["SORT", "l", "BY", "w_*"], b"*4\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n1\r\n"),
        (
            &["SORT", "l", "BY", "w_*", "GET", "#", "GET", "w_*"],
            b"*8\r\n$2\r\n10\r\n$1\r\n5\r\n$1\r\n2\r\n$2\r\n20\r\n$1\r\n3\r\n$2\r\n30\r\n$1\r\n1\r\n$3\r\n100\r\n",
        ),
        (&["SORT", "l", "BY", "nosort"], b"*4\r\n$1\r\n3\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n2\r\n"),
        (&["SORT", "l", "BY", "nosort", "DESC"], b"*4\r\n$1\r\n2\r\n$2\r\n10\r\n$1\r\n1\r\n$1\r\n3\r\n"),
        (&["HSET", "h_1", "f", "9"], b":1\r\n"),
        (
            &["SORT", "l", "GET", "h_*->f", "GET", "#"],
            b"*8\r\n$1\r\n9\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n$-1\r\n$1\r\n3\r\n$-1\r\n$2\r\n10\r\n",
        ),
        (&["SADD", "s", "a", "c", "b"], b":3\r\n"),
        (&["SORT", "s"], b"-ERR One or more scores can't be converted into double\r\n"),
        (&["SORT", "s", "ALPHA"], b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        (&["SORT", "s", "ALPHA", "DESC", "STORE", "dst"], b":3\r\n"),
        (&["LRANGE", "dst", "0", "-1"], b"*3\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"),
        (&["ZADD", "z", "1", "x", "2", "y", "3", "a"], b":3\r\n"),
        (&["SORT", "z", "BY", "nosort"], b"*3\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\na\r\n"),
        (&["SORT", "z", "BY", "nosort", "DESC"], b"*3\r\n$1\r\na\r\n$1\r\ny\r\n$1\r\nx\r\n"),
        (&["SORT", "z", "ALPHA"], b"*3\r\n$1\r\na\r\n$1\r\nx\r\n$1\r\ny\r\n"),
        (&["SET", "str", "v"], b"+OK\r\n"),
        (&["SORT", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["SORT", "nokey"], b"*0\r\n"),
        (&["SORT", "l", "FOO"], b"-ERR syntax error\r\n"),
        (&["SORT_RO", "l", "STORE", "x"], b"-ERR syntax error\r\n"),
        (&["SORT_RO", "l", "DESC"], b"*4\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n"),
        (&["SORT", "l", "STORE", "dst2"], b":4\r\n"),
        (&["LRANGE", "dst2", "0", "-1"], b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
        (
            &["EVAL", "return redis.call('sort', KEYS[1], 'by', '_')", "1", "s"],
            b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        ),
        (
            &["EVAL", "return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', '_:*')", "1", "s"],
            b"*6\r\n$1\r\na\r\n$-1\r\n$1\r\nb\r\n$-1\r\n$1\r\nc\r\n$-1\r\n",
        ),
    ];
    for (args, want) in cases {
        roundtrip(&mut s, &req(args), want);
    }
}
