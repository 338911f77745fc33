//! RDB files against the real Redis 7.0 (`redis-server`,
//! `redis-check-rdb`): an image this server writes of a keyspace holding
//! every type loads in Redis with every key equal, and a `dump.rdb` Redis
//! saves, with every type in its compact and its big encodings, reads
//! back here equal to what Redis reports. Skipped (with a printed reason)
//! when redis-server is not installed; CI installs it
//! (scripts/test.d/20-server.sh).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_server::keyspace::now_ms;
use strata_server::rdb::image::{write_image, ImageOptions};
use strata_server::rdb::read::{read_rdb, Entry, Item, ReadOptions};
use strata_server::rdb::write::Header;
use strata_server::rdb::Value;
use strata_server::store::engine::EngineStore;
use strata_server::store::Backend;

/// A RESP reply.
#[derive(Clone, Debug, PartialEq)]
enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
}

impl Resp {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Resp::Bulk(Some(b)) => b.clone(),
            Resp::Simple(s) => s.as_bytes().to_vec(),
            other => panic!("not a string: {other:?}"),
        }
    }

    fn text(&self) -> String {
        String::from_utf8(self.bytes()).unwrap()
    }

    fn int(&self) -> i64 {
        match self {
            Resp::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    fn items(&self) -> Vec<Vec<u8>> {
        match self {
            Resp::Array(v) => v.iter().map(Resp::bytes).collect(),
            other => panic!("not an array: {other:?}"),
        }
    }
}

/// A connection speaking RESP2.
struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    fn new(port: u16) -> Client {
        let s = common::connect(port);
        Client { r: BufReader::new(s.try_clone().unwrap()), w: s }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        l.trim_end_matches("\r\n").to_string()
    }

    fn reply(&mut self) -> Resp {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            "+" => Resp::Simple(rest.into()),
            "-" => Resp::Error(rest.into()),
            ":" => Resp::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Resp::Bulk(None);
                }
                let mut b = vec![0u8; n as usize + 2];
                std::io::Read::read_exact(&mut self.r, &mut b).unwrap();
                b.truncate(n as usize);
                Resp::Bulk(Some(b))
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                Resp::Array((0..n.max(0)).map(|_| self.reply()).collect())
            }
            _ => panic!("bad reply line {l:?}"),
        }
    }

    fn call(&mut self, args: &[&[u8]]) -> Resp {
        self.w.write_all(&common::req_bytes(args)).unwrap();
        self.reply()
    }

    /// A command that must not fail.
    fn ok(&mut self, args: &[&str]) -> Resp {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let r = self.call(&args);
        assert!(!matches!(r, Resp::Error(_)), "{args:?}: {r:?}");
        r
    }
}

/// What a server reports of one key: its type, value (members sorted
/// where the type has no order; scores as numbers) and PTTL.
#[derive(Clone, Debug, PartialEq)]
enum Reported {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    ZSet(Vec<(Vec<u8>, f64)>),
}

fn parse_score(b: &[u8]) -> f64 {
    match b {
        b"inf" | b"+inf" => f64::INFINITY,
        b"-inf" => f64::NEG_INFINITY,
        _ => std::str::from_utf8(b).unwrap().parse().unwrap(),
    }
}

/// Every key of database `db` as `c`'s server reports it, with its PTTL.
fn report(c: &mut Client, db: u64) -> BTreeMap<Vec<u8>, (Reported, i64)> {
    c.ok(&["SELECT", &db.to_string()]);
    let keys = c.ok(&["KEYS", "*"]).items();
    let mut out = BTreeMap::new();
    for k in keys {
        let kind = c.call(&[b"TYPE", &k]).text();
        let v = match kind.as_str() {
            "string" => Reported::String(c.call(&[b"GET", &k]).bytes()),
            "list" => Reported::List(c.call(&[b"LRANGE", &k, b"0", b"-1"]).items()),
            "set" => {
                let mut m = c.call(&[b"SMEMBERS", &k]).items();
                m.sort();
                Reported::Set(m)
            }
            "hash" => {
                let flat = c.call(&[b"HGETALL", &k]).items();
                let mut pairs: Vec<_> = flat.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
                pairs.sort();
                Reported::Hash(pairs)
            }
            "zset" => {
                let flat = c.call(&[b"ZRANGE", &k, b"0", b"-1", b"WITHSCORES"]).items();
                Reported::ZSet(flat.chunks(2).map(|p| (p[0].clone(), parse_score(&p[1]))).collect())
            }
            other => panic!("type {other} of {k:?}"),
        };
        let pttl = c.call(&[b"PTTL", &k]).int();
        out.insert(k, (v, pttl));
    }
    out
}

/// A value read from a file, as a server would report it.
fn reported(value: Value) -> Reported {
    match value {
        Value::String(s) => Reported::String(s),
        Value::List(v) => Reported::List(v),
        Value::Set(mut v) => {
            v.sort();
            Reported::Set(v)
        }
        Value::Hash(mut v) => {
            v.sort();
            Reported::Hash(v)
        }
        // ZRANGE's order: by score, then member.
        Value::ZSet(mut v) => {
            v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            Reported::ZSet(v)
        }
    }
}

fn have_redis() -> bool {
    let found = Command::new("redis-server").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: redis-server is not installed (apt-get install redis-server)");
    }
    found
}

/// A redis-server child; killed when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts redis-server on a free port with `dir/dump.rdb`, no saving,
/// and `extra` settings; waits until it has loaded its file.
fn start_redis(dir: &Path, extra: &[&str]) -> Redis {
    let port = common::free_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let redis = Redis { child, port };
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut c = Client { r: BufReader::new(s.try_clone().unwrap()), w: s };
            if c.call(&[b"PING"]) == Resp::Simple("PONG".into()) {
                return redis;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("redis-server did not start (or did not load dump.rdb; see its log)");
}

/// Runs redis-check-rdb on `file`; panics with its output unless it is
/// happy.
fn check_rdb(file: &Path) {
    let out = Command::new("redis-check-rdb").arg(file).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("RDB looks OK"), "redis-check-rdb:\n{text}");
}

/// Writes, through a strata-server, a keyspace holding every type: what
/// the test compares.
fn fill(c: &mut Client) {
    let bin: Vec<u8> = (0..=255u8).collect();
    c.call(&[b"SET", b"bin", &bin]);
    c.call(&[b"SET", &bin, b"binary key"]);
    c.ok(&["SET", "str", "hello"]);
    c.ok(&["SET", "int", "12345"]);
    c.ok(&["SET", "neg", "-9000000000"]);
    c.ok(&["SET", "empty", ""]);
    c.ok(&["SET", "big", &"x".repeat(100_000)]);
    c.ok(&["SET", "ttl:str", "v", "PX", "100000"]);
    c.ok(&["SET", "gone", "v", "PX", "1"]);
    c.ok(&["RPUSH", "list:small", "a", "12", "-100000", ""]);
    let long: Vec<String> = (0..1000).map(|i| format!("element-{i}-{}", "y".repeat(i % 50))).collect();
    let mut args = vec!["RPUSH", "list:big"];
    args.extend(long.iter().map(String::as_str));
    c.ok(&args);
    c.ok(&["RPUSH", "list:big", &"z".repeat(20_000)]);
    c.ok(&["LPUSH", "list:big", "head"]);
    c.ok(&["SADD", "set:int", "1", "2", "3", "-5", "100000", "5000000000"]);
    c.ok(&["SADD", "set:str", "a", "b", "c"]);
    let members: Vec<String> = (0..600).map(|i| format!("member{i}")).collect();
    let mut args = vec!["SADD", "set:big"];
    args.extend(members.iter().map(String::as_str));
    c.ok(&args);
    c.ok(&["HSET", "hash:small", "f1", "v1", "f2", "2", "f3", ""]);
    let fields: Vec<String> = (0..300).flat_map(|i| [format!("field{i}"), format!("value{i}")]).collect();
    let mut args = vec!["HSET", "hash:big"];
    args.extend(fields.iter().map(String::as_str));
    c.ok(&args);
    c.ok(&["HSET", "hash:bigvalue", "f", &"v".repeat(10_000)]);
    c.ok(&["HSET", "ttl:hash", "a", "b"]);
    c.ok(&["PEXPIRE", "ttl:hash", "200000"]);
    c.ok(&["ZADD", "zset", "1.5", "a", "-inf", "b", "+inf", "c", "0", "d", "-2.25", "e", "1e300", "f"]);
    let scored: Vec<String> = (0..300).flat_map(|i| [format!("{}", f64::from(i) / 7.0), format!("m{i}")]).collect();
    let mut args = vec!["ZADD", "zset:big"];
    args.extend(scored.iter().map(String::as_str));
    c.ok(&args);
    c.ok(&["SELECT", "1"]);
    c.ok(&["SET", "k", "in db 1"]);
    c.ok(&["SELECT", "5"]);
    c.ok(&["RPUSH", "k", "in", "db", "5"]);
    c.ok(&["SET", "ttl", "x", "EX", "1000"]);
    c.ok(&["SELECT", "15"]);
    c.ok(&["ZADD", "k", "1", "one"]);
    c.ok(&["SELECT", "0"]);
}

/// A short description of a value, for a failure message.
fn brief(v: &Reported) -> String {
    let (kind, n, first) = match v {
        Reported::String(s) => ("string", s.len(), s.iter().take(16).copied().collect::<Vec<_>>()),
        Reported::List(e) => ("list", e.len(), e.first().cloned().unwrap_or_default()),
        Reported::Set(e) => ("set", e.len(), e.first().cloned().unwrap_or_default()),
        Reported::Hash(e) => ("hash", e.len(), e.first().map(|p| p.0.clone()).unwrap_or_default()),
        Reported::ZSet(e) => ("zset", e.len(), e.first().map(|p| p.0.clone()).unwrap_or_default()),
    };
    format!("{kind} of {n} (first {:?})", String::from_utf8_lossy(&first))
}

/// Compares two reports of a database: same keys, same values, PTTLs
/// within `slack` ms (both -1 for no expiry).
fn assert_same(
    db: u64,
    want: &BTreeMap<Vec<u8>, (Reported, i64)>,
    got: &BTreeMap<Vec<u8>, (Reported, i64)>,
    slack: i64,
) {
    let names =
        |m: &BTreeMap<Vec<u8>, _>| m.keys().map(|k| String::from_utf8_lossy(k).into_owned()).collect::<Vec<_>>();
    assert_eq!(names(got), names(want), "keys of db {db}");
    for (k, (v, ttl)) in want {
        let (gv, gttl) = &got[k];
        assert!(gv == v, "db {db} key {:?}: {} read, {} wanted", String::from_utf8_lossy(k), brief(gv), brief(v));
        if *ttl < 0 {
            assert_eq!(gttl, ttl, "db {db} key {:?} has no expiry", String::from_utf8_lossy(k));
        } else {
            assert!(
                (gttl - ttl).abs() <= slack,
                "db {db} key {:?}: PTTL {gttl}, wanted about {ttl}",
                String::from_utf8_lossy(k)
            );
        }
    }
}

/// A keyspace with every type, written by strata-server, imaged from an
/// engine snapshot: redis-check-rdb accepts the file and redis-server
/// 7.0 loads every key with its type, value and expiry.
#[test]
fn an_image_of_every_type_loads_in_redis() {
    if !have_redis() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut srv = common::start(data.path(), &[]);
    let mut c = Client::new(srv.port);
    fill(&mut c);
    std::thread::sleep(Duration::from_millis(20)); // "gone" expires
    let dbs = [0u64, 1, 5, 15];
    let want: Vec<_> = dbs.iter().map(|&db| report(&mut c, db)).collect();
    assert_eq!(want[0].len(), 19, "{:?}", want[0].keys());
    c.w.write_all(&common::req(&["SHUTDOWN"])).unwrap();
    assert_eq!(common::wait_exit(&mut srv), 0);
    let taken_ms = now_ms();

    let opts = stratakv::Options {
        pm_size: 128 << 20,
        prefix_extractor: Some(Arc::new(strata_server::keyspace::MemberPrefix)),
        ..stratakv::Options::default()
    };
    let store = EngineStore::open(data.path(), opts).unwrap();
    let views = store.snapshot_databases(16).unwrap();
    let rdb_dir = tempfile::tempdir().unwrap();
    let file = rdb_dir.path().join("dump.rdb");
    let out = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
    let (out, stats) = write_image(out, &Header::now("7.0.15", 0), &views, &ImageOptions::default()).unwrap();
    drop(out);
    assert_eq!(stats.databases, 4);
    assert_eq!(stats.keys, want.iter().map(|w| w.len() as u64).sum::<u64>());
    check_rdb(&file);

    let redis = start_redis(rdb_dir.path(), &[]);
    let mut r = Client::new(redis.port);
    for (i, &db) in dbs.iter().enumerate() {
        let got = report(&mut r, db);
        // The TTLs were read before the shutdown; time has passed since.
        let slack = (now_ms() - taken_ms) as i64 + 5000;
        assert_same(db, &want[i], &got, slack);
    }
    let dbsizes: i64 = (0..16)
        .map(|db| {
            r.ok(&["SELECT", &db.to_string()]);
            r.ok(&["DBSIZE"]).int()
        })
        .sum();
    assert_eq!(dbsizes as u64, stats.keys, "no other keys");
}

/// A dump.rdb Redis 7.0 saved, holding every type in its compact
/// encoding (listpack, intset) and its big one (hash table, skiplist,
/// quicklist of many nodes, a plain node), integer and LZF strings,
/// expiries, several databases and a function library: every key reads
/// back equal to what Redis reports.
#[test]
fn a_redis_dump_reads_back_equal() {
    if !have_redis() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The thresholds set, whatever the build's defaults (Debian's differ).
    let settings = [
        "--list-max-listpack-size",
        "4",
        "--hash-max-listpack-entries",
        "128",
        "--zset-max-listpack-entries",
        "128",
        "--set-max-intset-entries",
        "512",
        "--enable-debug-command",
        "yes",
    ];
    let redis = start_redis(dir.path(), &settings);
    let mut c = Client::new(redis.port);
    fill(&mut c);
    // Compact and big encodings of each type.
    c.ok(&["SET", "lzf", &"abc".repeat(100)]);
    c.ok(&["SET", "12345", "an integer key"]);
    let plain = c.ok(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1000"]);
    assert_eq!(plain, Resp::Simple("OK".into()));
    c.ok(&["RPUSH", "list:plain", "small", &"p".repeat(5000), "after"]);
    let lib = "#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 1 end)";
    c.ok(&["FUNCTION", "LOAD", lib]);
    for (key, want) in [
        ("list:small", "quicklist"),
        ("set:int", "intset"),
        ("set:big", "hashtable"),
        ("hash:small", "listpack"),
        ("hash:big", "hashtable"),
        ("zset", "listpack"),
        ("zset:big", "skiplist"),
    ] {
        assert_eq!(c.ok(&["OBJECT", "ENCODING", key]).text(), want, "{key}");
    }
    let dbs = [0u64, 1, 5, 15];
    let want: Vec<_> = dbs.iter().map(|&db| report(&mut c, db)).collect();
    c.ok(&["SAVE"]);
    let saved_ms = now_ms() as i64;

    let mut got: BTreeMap<u64, BTreeMap<Vec<u8>, (Reported, i64)>> = BTreeMap::new();
    let mut functions = Vec::new();
    let mut aux = BTreeMap::new();
    let file = std::fs::File::open(dir.path().join("dump.rdb")).unwrap();
    let sum = read_rdb(BufReader::new(file), &ReadOptions::default(), &mut |item| {
        match item {
            // Saved although expired (a primary drops these as it loads).
            Item::Key(Entry { expire_ms: Some(at), .. }) if at as i64 <= saved_ms => {}
            Item::Key(Entry { db, key, value, expire_ms }) => {
                let pttl = expire_ms.map_or(-1, |at| at as i64 - saved_ms);
                got.entry(db).or_default().insert(key, (reported(value), pttl));
            }
            Item::Function { code } => functions.push(code),
            Item::Aux { name, value } => {
                aux.insert(String::from_utf8(name).unwrap(), String::from_utf8(value).unwrap());
            }
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(sum.version, 10);
    assert!(sum.checksum_checked);
    assert_eq!(aux.get("redis-ver").map(String::as_str), Some("7.0.15"));
    assert_eq!(functions, vec![lib.as_bytes().to_vec()]);
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), dbs);
    for (i, db) in dbs.iter().enumerate() {
        assert_same(*db, &want[i], &got[db], 5000);
    }
}
