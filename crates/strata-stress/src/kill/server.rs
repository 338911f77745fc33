//! Kill rounds against `strata-server --durability sync`: client threads in
//! this process write with SET, DEL and MSET (one atomic batch), tracking
//! committed and pending values per key; the server is killed with SIGKILL
//! under load (and sometimes during its startup recovery), restarted, and
//! every key is read back with MGET and checked. One more client writes
//! database 3 and FLUSHDBs it meanwhile (see `flushdb`).

use std::collections::{BTreeMap, HashMap};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::expected::{allowed, id_of, value_of, DELETE};
use super::flushdb::{self, FlushModel};
use super::key_of;
use crate::report::Report;
use crate::resp_client::{Client, Reply};

/// `STRATA_SERVER_BIN`, or `strata-server` next to this executable.
pub fn find_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("STRATA_SERVER_BIN") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
    }
    let me = std::env::current_exe().ok()?;
    let p = me.parent()?.join("strata-server");
    p.is_file().then_some(p)
}

/// A free local port (the listener is closed before the server binds it).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts `strata-server` on `port` with data in `dir` and `extra` flags.
pub fn spawn_server(bin: &Path, dir: &Path, port: u16, extra: &[&str]) -> anyhow::Result<Child> {
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.with_extension("log")).context("server log")?;
    Command::new(bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Waits until the server answers PING (or exits, or a minute passes).
pub fn wait_ready(child: &mut Child, port: u16) -> anyhow::Result<bool> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if child.try_wait()?.is_some() {
            return Ok(false);
        }
        if let Ok(mut c) = Client::connect(&format!("127.0.0.1:{port}")) {
            if let Ok(Reply::Simple(s)) = c.call(&[b"PING"]) {
                if s == "PONG" {
                    return Ok(true);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(false)
}

/// The server under test and the expected state of its keys.
pub struct ServerTarget {
    bin: PathBuf,
    dir: PathBuf,
    /// Per key: (committed id, pending id).
    exp: Arc<Mutex<Vec<(u64, u64)>>>,
    /// Database 3, written and flushed by one more client.
    flush: Arc<Mutex<FlushModel>>,
}

fn server_log_tail(dir: &Path) -> String {
    let s = std::fs::read_to_string(dir.with_extension("log")).unwrap_or_default();
    let lines: Vec<&str> = s.lines().rev().take(5).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

impl ServerTarget {
    /// A server target with data in `dir`.
    pub fn new(bin: PathBuf, dir: PathBuf, keys: u64) -> anyhow::Result<ServerTarget> {
        std::fs::create_dir_all(&dir)?;
        let exp = Arc::new(Mutex::new(vec![(0, 0); keys as usize]));
        Ok(ServerTarget { bin, dir, exp, flush: Arc::default() })
    }

    fn start(&self, port: u16) -> anyhow::Result<Child> {
        spawn_server(&self.bin, &self.dir, port, &["--durability", "sync"])
    }

    /// One round: start, load, SIGKILL, restart, verify, resolve.
    pub fn round(
        &mut self,
        rng: &mut StdRng,
        round: u64,
        clients: usize,
        rep: &mut Report,
    ) -> anyhow::Result<Result<(), String>> {
        if round.is_multiple_of(4) {
            // A kill during startup (recovery of the previous round's data).
            let port = free_port()?;
            let mut s = self.start(port)?;
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..40)));
            let _ = s.kill();
            let _ = s.wait();
            rep.add("server_kills_during_startup", 1);
        }
        let port = free_port()?;
        let mut srv = self.start(port)?;
        if !wait_ready(&mut srv, port)? {
            let _ = srv.kill();
            let _ = srv.wait();
            return Ok(Err(format!("strata-server did not start: {}", server_log_tail(&self.dir))));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicU64::new(0));
        let mut hs = Vec::new();
        for c in 0..clients as u64 {
            let (exp, stop, acked) = (self.exp.clone(), stop.clone(), acked.clone());
            let seed = rng.gen::<u64>();
            let addr = format!("127.0.0.1:{port}");
            hs.push(std::thread::spawn(move || client(addr, exp, stop, acked, round, c, clients as u64, seed)));
        }
        {
            let (model, stop, seed) = (self.flush.clone(), stop.clone(), rng.gen::<u64>());
            let addr = format!("127.0.0.1:{port}");
            hs.push(std::thread::spawn(move || flushdb::client(addr, model, stop, round, seed)));
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(150..1000)));
        let _ = srv.kill();
        let _ = srv.wait();
        stop.store(true, Ordering::SeqCst);
        let mut protocol_errors = Vec::new();
        for h in hs {
            if let Ok(Some(e)) = h.join() {
                protocol_errors.push(e);
            }
        }
        if let Some(e) = protocol_errors.first() {
            return Ok(Err(format!("server answered a write with an error: {e}")));
        }
        rep.add("server_kill_rounds", 1);
        rep.add("server_writes_acked", acked.load(Ordering::Relaxed));
        // Restart and verify.
        let port = free_port()?;
        let mut srv = self.start(port)?;
        if !wait_ready(&mut srv, port)? {
            let _ = srv.kill();
            let _ = srv.wait();
            return Ok(Err(format!("strata-server did not restart after SIGKILL: {}", server_log_tail(&self.dir))));
        }
        let r = self.verify(port, rep);
        let _ = srv.kill();
        let _ = srv.wait();
        r
    }

    fn verify(&self, port: u16, rep: &mut Report) -> anyhow::Result<Result<(), String>> {
        let mut c = Client::connect(&format!("127.0.0.1:{port}"))?;
        let mut exp = self.exp.lock();
        let n = exp.len() as u64;
        let mut got: BTreeMap<u64, Option<u64>> = BTreeMap::new();
        let mut k = 0u64;
        while k < n {
            let end = (k + 100).min(n);
            let keys: Vec<Vec<u8>> = (k..end).map(key_of).collect();
            let mut args: Vec<&[u8]> = vec![b"MGET"];
            args.extend(keys.iter().map(|x| x.as_slice()));
            let Reply::Array(Some(items)) = c.call(&args)? else {
                return Ok(Err("MGET did not return an array".into()));
            };
            for (i, item) in items.into_iter().enumerate() {
                let key = k + i as u64;
                let id = match item {
                    Reply::Bulk(None) => None,
                    Reply::Bulk(Some(v)) => match id_of(key, &v) {
                        Some(id) => Some(id),
                        None => return Ok(Err(format!("key {key} holds a value no write stored"))),
                    },
                    other => return Ok(Err(format!("MGET item {other:?}"))),
                };
                got.insert(key, id);
            }
            k = end;
        }
        let mut problems = Vec::new();
        let mut batches: HashMap<u64, (u64, u64)> = HashMap::new();
        for (key, (committed, pending)) in exp.iter().enumerate() {
            let id = got.get(&(key as u64)).copied().flatten();
            if !allowed(id, *committed, *pending) {
                problems.push(format!("{key} = {id:?} but committed {committed:#x} pending {pending:#x}"));
            }
            if *pending != 0 && pending & DELETE == 0 {
                let e = batches.entry(*pending).or_default();
                e.0 += 1;
                if id == Some(*pending) {
                    e.1 += 1;
                }
            }
            rep.add("server_keys_checked", 1);
        }
        for (id, (n, shown)) in batches {
            if shown != 0 && shown != n {
                problems.push(format!("MSET {id:#x} half applied: {shown} of {n}"));
            }
        }
        if !problems.is_empty() {
            problems.truncate(6);
            return Ok(Err(format!("after restarting strata-server: {}", problems.join("; "))));
        }
        let mut flush = self.flush.lock();
        if let Err(e) = flush.verify(&mut c)? {
            return Ok(Err(format!("after restarting strata-server: {e}")));
        }
        rep.add("server_flushdb_checks", 1);
        rep.add("server_flushdbs_acked", flush.take_flushes());
        for (key, e) in exp.iter_mut().enumerate() {
            if e.1 != 0 {
                e.0 = match got.get(&(key as u64)).copied().flatten() {
                    Some(id) => id,
                    None => e.0 | DELETE,
                };
                e.1 = 0;
            }
        }
        Ok(Ok(()))
    }
}

/// One client: writes its own keys until the server dies or `stop`.
/// Returns an error reply, if the server sent one.
#[allow(clippy::too_many_arguments)]
fn client(
    addr: String,
    exp: Arc<Mutex<Vec<(u64, u64)>>>,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicU64>,
    round: u64,
    c: u64,
    clients: u64,
    seed: u64,
) -> Option<String> {
    let Ok(mut conn) = Client::connect(&addr) else {
        return None;
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let n = exp.lock().len() as u64;
    let per = (n / clients).max(1);
    let mut counter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        counter += 1;
        let id = (round << 40) | (c << 32) | counter;
        let count = if rng.gen_bool(0.25) { rng.gen_range(2..6) } else { 1 };
        let mut keys = Vec::new();
        while keys.len() < count {
            let k = (c + clients * rng.gen_range(0..per)).min(n - 1);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let delete = count == 1 && rng.gen_bool(0.15);
        let ids: Vec<u64> = keys.iter().map(|_| if delete { id | DELETE } else { id }).collect();
        {
            let mut e = exp.lock();
            for (k, i) in keys.iter().zip(&ids) {
                if let Some(slot) = e.get_mut(*k as usize) {
                    slot.1 = *i;
                }
            }
        }
        let names: Vec<Vec<u8>> = keys.iter().map(|k| key_of(*k)).collect();
        let values: Vec<Vec<u8>> = keys.iter().map(|k| value_of(*k, id)).collect();
        let reply = if delete {
            conn.call(&[b"DEL", &names[0]])
        } else if count == 1 {
            conn.call(&[b"SET", &names[0], &values[0]])
        } else {
            let mut args: Vec<&[u8]> = vec![b"MSET"];
            for (k, v) in names.iter().zip(&values) {
                args.push(k);
                args.push(v);
            }
            conn.call(&args)
        };
        match reply {
            Ok(Reply::Simple(_)) | Ok(Reply::Int(_)) => {
                let mut e = exp.lock();
                for (k, i) in keys.iter().zip(&ids) {
                    if let Some(slot) = e.get_mut(*k as usize) {
                        *slot = (*i, 0);
                    }
                }
                acked.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Reply::Error(e)) => return Some(e),
            Ok(other) => return Some(format!("unexpected reply {other:?}")),
            // The server was killed: the write stays pending.
            Err(_) => return None,
        }
    }
    None
}
