//! Hashes packed in their meta and hashes with one entry per field
//! (FORMAT.md, "Server keyspace encoding"): random commands checked
//! against a model across the move from one layout to the other and
//! across restarts, and directories of format 1 (every hash field by
//! field) opened, read, changed and upgraded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use clap::Parser;
use rand::{Rng, SeedableRng};
use strata_server::cmd::{execute, Session, Shared};
use strata_server::config::{Config, Flags};
use strata_server::resp::Reply;
use strata_server::store::engine::EngineStore;
use strata_server::store::Backend;

fn options() -> stratakv::Options {
    stratakv::Options { pm_size: 64 << 20, write_buffer_size: 256 << 10, ..Default::default() }
}

fn open_store(dir: &Path) -> Arc<dyn Backend> {
    Arc::new(EngineStore::open(dir, options()).unwrap())
}

fn server(store: Arc<dyn Backend>, dir: &Path) -> Result<Shared, String> {
    let cfg = Config::from_flags(Flags::parse_from(["strata-server", "--dir", dir.to_str().unwrap()])).unwrap();
    Shared::new(store, cfg).map_err(|e| e.to_string())
}

fn run(shared: &Shared, sess: &mut Session, args: &[&[u8]]) -> Reply {
    let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
    execute(shared, sess, &args).unwrap()
}

fn int(r: Reply) -> i64 {
    match r {
        Reply::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn pairs(r: Reply) -> Vec<(Vec<u8>, Vec<u8>)> {
    let bulk = |r: Reply| match r {
        Reply::Bulk(b) => b.to_vec(),
        other => panic!("not a bulk: {other:?}"),
    };
    match r {
        Reply::Map(kv) => kv.into_iter().map(|(k, v)| (bulk(k), bulk(v))).collect(),
        other => panic!("not a map: {other:?}"),
    }
}

/// The engine keys of `key`'s fields stored one entry each.
fn field_entries(store: &dyn Backend, key: &[u8]) -> usize {
    let mut p = vec![b'H'];
    p.extend_from_slice(&(key.len() as u32).to_be_bytes());
    p.extend_from_slice(key);
    let end = strata_server::store::prefix_end(&p);
    store.scan(&p, end.as_deref(), usize::MAX).unwrap().len()
}

/// Random HSET/HMSET/HSETNX/HDEL/HINCRBY/DEL on a few keys, with field
/// counts and value sizes that cross the packed limits both ways, checked
/// after every command against a model (HGETALL, HLEN, HGET, HMGET,
/// HEXISTS, HSTRLEN), with restarts in between.
#[test]
fn hashes_agree_with_a_model_across_layouts_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(33);
    let mut model: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
    let keys: Vec<Vec<u8>> = (0..4).map(|i| format!("h{i}").into_bytes()).collect();
    let (mut packed_seen, mut entries_seen) = (false, false);
    for round in 0..6 {
        let store = open_store(dir.path());
        let shared = server(store.clone(), dir.path()).unwrap();
        let mut sess = Session::new(&shared, "test".into());
        // Everything the model holds survived the restart.
        for k in &keys {
            let want: Vec<(Vec<u8>, Vec<u8>)> =
                model.get(k).map(|m| m.clone().into_iter().collect()).unwrap_or_default();
            assert_eq!(pairs(run(&shared, &mut sess, &[b"HGETALL", k])), want, "round {round}, after reopen");
        }
        for _ in 0..400 {
            let k = keys[rng.gen_range(0..keys.len())].clone();
            // Up to 300 names: the 128-field limit is crossed; values up to
            // 120 bytes: 8 KiB is crossed with fewer fields.
            let f = format!("f{}", rng.gen_range(0..300)).into_bytes();
            let v: Vec<u8> = (0..rng.gen_range(0..120)).map(|_| rng.gen_range(b'a'..=b'z')).collect();
            let m = model.entry(k.clone()).or_default();
            match rng.gen_range(0..100) {
                0..=49 => {
                    // HSET of 1-20 pairs (duplicates within one command too).
                    let n = rng.gen_range(1..=20);
                    let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), k.clone()];
                    let mut added = 0;
                    for i in 0..n {
                        let f = if i == 1 { f.clone() } else { format!("f{}", rng.gen_range(0..300)).into_bytes() };
                        let mut v = v.clone();
                        v.push(b'0' + i as u8 % 10);
                        if m.insert(f.clone(), v.clone()).is_none() {
                            added += 1;
                        }
                        args.push(f);
                        args.push(v);
                    }
                    let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                    assert_eq!(int(run(&shared, &mut sess, &a)), added);
                }
                50..=54 => {
                    let fresh = !m.contains_key(&f);
                    if fresh {
                        m.insert(f.clone(), v.clone());
                    }
                    assert_eq!(int(run(&shared, &mut sess, &[b"HSETNX", &k, &f, &v])), i64::from(fresh));
                }
                55..=79 => {
                    let n = rng.gen_range(1..=30);
                    let fs: Vec<Vec<u8>> = (0..n).map(|_| format!("f{}", rng.gen_range(0..300)).into_bytes()).collect();
                    let mut removed = 0;
                    for f in &fs {
                        if m.remove(f).is_some() {
                            removed += 1;
                        }
                    }
                    let mut args: Vec<&[u8]> = vec![b"HDEL", &k];
                    args.extend(fs.iter().map(Vec::as_slice));
                    assert_eq!(int(run(&shared, &mut sess, &args)), removed);
                }
                80..=89 => {
                    let f = b"counter".to_vec();
                    let cur: i64 = m.get(&f).map(|v| std::str::from_utf8(v).unwrap().parse().unwrap()).unwrap_or(0);
                    m.insert(f.clone(), (cur + 7).to_string().into_bytes());
                    assert_eq!(int(run(&shared, &mut sess, &[b"HINCRBY", &k, &f, b"7"])), cur + 7);
                }
                90..=93 => {
                    let existed = !m.is_empty();
                    m.clear();
                    assert_eq!(int(run(&shared, &mut sess, &[b"DEL", &k])), i64::from(existed));
                }
                _ => {
                    // A MULTI block that grows and then reads one hash.
                    assert_eq!(run(&shared, &mut sess, &[b"MULTI"]), Reply::ok());
                    let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), k.clone()];
                    for i in 0..140 {
                        let f = format!("m{i}").into_bytes();
                        m.insert(f.clone(), v.clone());
                        args.push(f);
                        args.push(v.clone());
                    }
                    let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                    let _ = run(&shared, &mut sess, &a);
                    let _ = run(&shared, &mut sess, &[b"HLEN", &k]);
                    match run(&shared, &mut sess, &[b"EXEC"]) {
                        Reply::Array(r) => assert_eq!(r.get(1), Some(&Reply::Int(m.len() as i64))),
                        other => panic!("EXEC: {other:?}"),
                    }
                }
            }
            let want: Vec<(Vec<u8>, Vec<u8>)> = m.clone().into_iter().collect();
            assert_eq!(pairs(run(&shared, &mut sess, &[b"HGETALL", &k])), want);
            assert_eq!(int(run(&shared, &mut sess, &[b"HLEN", &k])), want.len() as i64);
            let probe = format!("f{}", rng.gen_range(0..300)).into_bytes();
            let got = run(&shared, &mut sess, &[b"HGET", &k, &probe]);
            assert_eq!(got, m.get(&probe).map(Reply::bulk).unwrap_or(Reply::Nil));
            let got = run(&shared, &mut sess, &[b"HMGET", &k, &probe, b"counter"]);
            let want_mget = vec![
                m.get(&probe).map(Reply::bulk).unwrap_or(Reply::Nil),
                m.get(&b"counter"[..]).map(Reply::bulk).unwrap_or(Reply::Nil),
            ];
            assert_eq!(got, Reply::Array(want_mget));
            assert_eq!(int(run(&shared, &mut sess, &[b"HEXISTS", &k, &probe])), i64::from(m.contains_key(&probe)));
            assert_eq!(
                int(run(&shared, &mut sess, &[b"HSTRLEN", &k, &probe])),
                m.get(&probe).map_or(0, |v| v.len() as i64)
            );
            // Which layout the key has: no field entries while packed.
            let entries = field_entries(&*store, &k);
            if m.is_empty() {
                assert_eq!(entries, 0, "a deleted hash leaves no field entries");
            } else if entries == 0 {
                packed_seen = true;
            } else {
                assert_eq!(entries, m.len(), "a hash field by field has one entry per field");
                entries_seen = true;
            }
        }
        drop(sess);
        store.shutdown(strata_server::store::ShutdownSave::Default).unwrap();
    }
    assert!(packed_seen && entries_seen, "both layouts were exercised ({packed_seen}, {entries_seen})");
}

/// A hash stays packed up to 128 fields and 8 KiB, and moves to one entry
/// per field (for good) past either; its type, TTL, RENAME and COPY carry
/// the packed fields along.
#[test]
fn packed_hashes_move_to_entries_past_their_limits() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let shared = server(store.clone(), dir.path()).unwrap();
    let mut sess = Session::new(&shared, "test".into());
    for i in 0..128 {
        let f = format!("f{i:03}");
        assert_eq!(int(run(&shared, &mut sess, &[b"HSET", b"a", f.as_bytes(), b"v"])), 1);
    }
    assert_eq!(field_entries(&*store, b"a"), 0, "128 fields stay packed");
    assert_eq!(int(run(&shared, &mut sess, &[b"HSET", b"a", b"f128", b"v"])), 1);
    assert_eq!(field_entries(&*store, b"a"), 129, "the 129th field moves the hash to entries");
    assert_eq!(int(run(&shared, &mut sess, &[b"HDEL", b"a", b"f128", b"f127"])), 2);
    assert_eq!(field_entries(&*store, b"a"), 127, "it does not move back");
    assert_eq!(int(run(&shared, &mut sess, &[b"HLEN", b"a"])), 127);

    let big = vec![b'x'; 5000];
    assert_eq!(int(run(&shared, &mut sess, &[b"HSET", b"b", b"one", &big])), 1);
    assert_eq!(field_entries(&*store, b"b"), 0);
    assert_eq!(int(run(&shared, &mut sess, &[b"HSET", b"b", b"two", &big])), 1);
    assert_eq!(field_entries(&*store, b"b"), 2, "past 8 KiB: entries");

    assert_eq!(int(run(&shared, &mut sess, &[b"HSET", b"c", b"f", b"1", b"g", b"2"])), 2);
    assert_eq!(run(&shared, &mut sess, &[b"TYPE", b"c"]), Reply::Simple("hash"));
    assert_eq!(int(run(&shared, &mut sess, &[b"EXPIRE", b"c", b"100"])), 1);
    assert_eq!(int(run(&shared, &mut sess, &[b"HSET", b"c", b"h", b"3"])), 1);
    assert_eq!(int(run(&shared, &mut sess, &[b"TTL", b"c"])), 100, "a write to a packed hash keeps its TTL");
    assert_eq!(run(&shared, &mut sess, &[b"RENAME", b"c", b"d"]), Reply::ok());
    assert_eq!(int(run(&shared, &mut sess, &[b"COPY", b"d", b"e"])), 1);
    let want = vec![(b"f".to_vec(), b"1".to_vec()), (b"g".to_vec(), b"2".to_vec()), (b"h".to_vec(), b"3".to_vec())];
    assert_eq!(pairs(run(&shared, &mut sess, &[b"HGETALL", b"d"])), want);
    assert_eq!(pairs(run(&shared, &mut sess, &[b"HGETALL", b"e"])), want);
    assert_eq!(run(&shared, &mut sess, &[b"SET", b"c", b"s"]), Reply::ok());
    assert!(run(&shared, &mut sess, &[b"HGET", b"c", b"f"]).is_error(), "a string is not a hash");
    assert_eq!(int(run(&shared, &mut sess, &[b"HDEL", b"d", b"f", b"g", b"h"])), 3);
    assert_eq!(int(run(&shared, &mut sess, &[b"EXISTS", b"d"])), 0, "an emptied packed hash is deleted");
}

/// A directory written by a server of format 1 (each hash field an entry
/// of its own) opens: its hashes read and change as before, new hashes
/// are packed, and the marker is raised to 2 so that a server of format 1
/// refuses the directory instead of misreading it. Unknown formats are refused.
#[test]
fn format_1_directories_open_and_are_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open_store(dir.path());
        // What a format-1 server wrote for `HSET old a 1 b 2` and `SET s x`.
        let meta = |key: &[u8], value: &[u8]| {
            let mut k = vec![b'm'];
            k.extend_from_slice(&strata_server::keyspace::fnv1a32(key).to_be_bytes());
            k.extend_from_slice(key);
            (k, Some(value.to_vec()))
        };
        let field = |f: &[u8], v: &[u8]| {
            let mut k = vec![b'H', 0, 0, 0, 3];
            k.extend_from_slice(b"old");
            k.extend_from_slice(f);
            (k, Some(v.to_vec()))
        };
        let mut hash_meta = vec![2u8];
        hash_meta.extend_from_slice(&0u64.to_le_bytes());
        hash_meta.extend_from_slice(&2u64.to_le_bytes());
        let mut string_meta = vec![1u8];
        string_meta.extend_from_slice(&0u64.to_le_bytes());
        string_meta.extend_from_slice(b"x");
        let ops = vec![
            (b"!version".to_vec(), Some(b"1".to_vec())),
            meta(b"old", &hash_meta),
            field(b"a", b"1"),
            field(b"b", b"2"),
            meta(b"s", &string_meta),
        ];
        let p = store.write(ops, true).unwrap();
        store.wait_durable(p).unwrap();
        store.shutdown(strata_server::store::ShutdownSave::Default).unwrap();
    }
    {
        let store = open_store(dir.path());
        let shared = server(store.clone(), dir.path()).unwrap();
        assert_eq!(store.get(b"!version").unwrap().as_deref(), Some(&b"2"[..]), "the marker is raised at open");
        let mut sess = Session::new(&shared, "test".into());
        assert_eq!(int(run(&shared, &mut sess, &[b"DBSIZE"])), 2);
        let two = vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())];
        assert_eq!(pairs(run(&shared, &mut sess, &[b"HGETALL", b"old"])), two);
        assert_eq!(int(run(&shared, &mut sess, &[b"HSET", b"old", b"c", b"3", b"a", b"9"])), 1);
        assert_eq!(int(run(&shared, &mut sess, &[b"HLEN", b"old"])), 3);
        assert_eq!(field_entries(&*store, b"old"), 3, "an old hash keeps its layout");
        assert_eq!(run(&shared, &mut sess, &[b"GET", b"s"]), Reply::bulk("x"));
        assert_eq!(int(run(&shared, &mut sess, &[b"HSET", b"new", b"f", b"v"])), 1);
        assert_eq!(field_entries(&*store, b"new"), 0, "a new hash is packed");
        drop(sess);
        store.shutdown(strata_server::store::ShutdownSave::Default).unwrap();
    }
    {
        let store = open_store(dir.path());
        let p = store.write(vec![(b"!version".to_vec(), Some(b"3".to_vec()))], true).unwrap();
        store.wait_durable(p).unwrap();
        let err = server(store.clone(), dir.path()).err().expect("format 3 is refused");
        assert!(err.contains("format \"3\""), "{err}");
        store.shutdown(strata_server::store::ShutdownSave::Default).unwrap();
    }
}
