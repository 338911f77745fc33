//! `--durability sync`: a reply that could reveal a write leaves the
//! server only after a sync covered the write, also when the loop gathers
//! several passes into one sync, and every reply a failed sync covered
//! becomes an error. The store is the engine behind a gate that records
//! which ticket each key's write got and which tickets were synced, and
//! that can make syncs slow or fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use strata_server::cmd::Shared;
use strata_server::config::{Config, Flags};
use strata_server::net::{ClientGuard, Incoming, Loops};
use strata_server::store::engine::EngineStore;
use strata_server::store::{Backend, Op, Pending, ShutdownSave, StoreError, StoreResult};

/// The engine, with each write's ticket recorded by key, the highest
/// synced ticket, slow syncs, and syncs that fail on demand.
struct Gate {
    inner: EngineStore,
    tickets: Mutex<HashMap<Vec<u8>, u64>>,
    synced: AtomicU64,
    syncs: AtomicU64,
    fail: AtomicBool,
}

impl Backend for Gate {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan(start, end, limit)
    }
    fn write(&self, ops: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        let keys: Vec<Vec<u8>> = ops.iter().map(|(k, _)| k.clone()).collect();
        let p = self.inner.write(ops, durable)?;
        // The ticket that covers this write (taken after it is applied).
        let t = self.inner.last_ticket().0.unwrap_or(0);
        let mut m = self.tickets.lock().unwrap();
        for k in keys {
            m.insert(k, t);
        }
        Ok(p)
    }
    fn wait_durable(&self, pending: Pending) -> StoreResult<()> {
        // Slow, so that a reply sent before the sync would be seen first.
        std::thread::sleep(Duration::from_millis(3));
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError("injected sync failure".into()));
        }
        self.inner.wait_durable(pending)?;
        self.syncs.fetch_add(1, Ordering::SeqCst);
        self.synced.fetch_max(pending.0.unwrap_or(0), Ordering::SeqCst);
        Ok(())
    }
    fn last_ticket(&self) -> Pending {
        self.inner.last_ticket()
    }
    fn save(&self) -> StoreResult<()> {
        self.inner.save()
    }
    fn info(&self) -> Vec<(String, String)> {
        self.inner.info()
    }
    fn used_memory(&self) -> u64 {
        self.inner.used_memory()
    }
    fn shutdown(&self, save: ShutdownSave) -> StoreResult<()> {
        self.inner.shutdown(save)
    }
}

fn meta_key(key: &[u8]) -> Vec<u8> {
    let mut k = vec![b'm'];
    k.extend_from_slice(&strata_server::keyspace::fnv1a32(key).to_be_bytes());
    k.extend_from_slice(key);
    k
}

#[test]
fn replies_wait_for_the_sync_that_covers_them_and_a_failed_sync_answers_errors() {
    held_replies("yes");
}

#[test]
fn held_replies_sent_by_one_write_each_wait_for_their_sync_too() {
    held_replies("no");
}

fn held_replies(io_uring: &str) {
    let dir = tempfile::tempdir().unwrap();
    let opts = stratakv::Options { pm_size: 64 << 20, write_buffer_size: 1 << 20, ..Default::default() };
    let gate = Arc::new(Gate {
        inner: EngineStore::open(dir.path(), opts).unwrap(),
        tickets: Mutex::new(HashMap::new()),
        synced: AtomicU64::new(0),
        syncs: AtomicU64::new(0),
        fail: AtomicBool::new(false),
    });
    let flags = Flags::parse_from([
        "strata-server",
        "--dir",
        dir.path().to_str().unwrap(),
        "--durability",
        "sync",
        "--io-uring",
        io_uring,
    ]);
    let cfg = Config::from_flags(flags).unwrap();
    let shared = Arc::new(Shared::new(gate.clone(), cfg).unwrap());
    let mut loops = Loops::start(&shared, 1).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let clients = 8;
    let mut conns = Vec::new();
    for _ in 0..clients {
        let c = TcpStream::connect(addr).unwrap();
        let (s, peer) = listener.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        shared.stats.connected_clients.fetch_add(1, Ordering::AcqRel);
        loops.assign(Incoming { stream: s, addr: peer.to_string(), guard: ClientGuard(shared.clone()), tls: None });
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        conns.push(c);
    }
    // Clients write in pipelines of 5 at once, so passes come back to back
    // and share syncs; each reply is checked against what was synced.
    let handles: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            let gate = gate.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(c.try_clone().unwrap());
                for round in 0..20 {
                    let keys: Vec<String> = (0..5).map(|j| format!("c{i}-r{round}-{j}")).collect();
                    let mut req = Vec::new();
                    for k in &keys {
                        req.extend_from_slice(
                            format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n$1\r\nv\r\n", k.len()).as_bytes(),
                        );
                    }
                    c.write_all(&req).unwrap();
                    for k in &keys {
                        let mut line = String::new();
                        r.read_line(&mut line).unwrap();
                        assert_eq!(line, "+OK\r\n");
                        let t = gate.tickets.lock().unwrap().get(&meta_key(k.as_bytes())).copied().unwrap();
                        let synced = gate.synced.load(Ordering::SeqCst);
                        assert!(synced >= t, "{k}: reply seen with ticket {t} written but only {synced} synced");
                    }
                }
                c
            })
        })
        .collect();
    let mut conns: Vec<TcpStream> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let writes = clients as u64 * 20 * 5;
    let syncs = gate.syncs.load(Ordering::SeqCst);
    assert!(syncs < writes, "syncs are shared: {syncs} for {writes} writes");

    // A failed sync: the replies it covered are errors, in order, and the
    // connection goes on.
    gate.fail.store(true, Ordering::SeqCst);
    let c = &mut conns[0];
    c.write_all(b"SET f1 v\r\nSET f2 v\r\nGET f1\r\n").unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    for _ in 0..3 {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("-ERR") && line.contains("injected sync failure"), "{line:?}");
    }
    gate.fail.store(false, Ordering::SeqCst);
    c.write_all(b"SET f3 v\r\n").unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "+OK\r\n");

    shared.request_shutdown();
    loops.stop(Duration::from_secs(10));
}
