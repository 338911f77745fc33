//! FLUSHALL under SIGKILL: one client writes a few keys in databases 0, 3
//! and 5 of a server of its own and often runs FLUSHALL; the server is
//! killed at a random moment. After the restart every database must hold
//! what was acknowledged, and a FLUSHALL in flight must have emptied all
//! three databases or none (it is one range tombstone in the engine).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::server::{free_port, spawn_server, wait_ready};
use crate::report::Report;
use crate::resp_client::{Client, Reply};

/// The databases written.
const DBS: [&[u8]; 3] = [b"0", b"3", b"5"];
/// Keys per database.
const KEYS: usize = 8;

fn key(k: usize) -> Vec<u8> {
    format!("all-{k:02}").into_bytes()
}

/// The write in flight when the server was killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    None,
    Set(usize, usize, u64),
    FlushAll,
}

/// Per database, per key: the acknowledged value.
type State = Vec<Vec<Option<u64>>>;

#[derive(Debug)]
struct Model {
    vals: State,
    pending: Pending,
}

/// The FLUSHALL target: a server with its own data directory.
pub struct FlushAllTarget {
    bin: PathBuf,
    dir: PathBuf,
    model: Arc<Mutex<Model>>,
}

fn client(addr: String, model: Arc<Mutex<Model>>, stop: Arc<AtomicBool>, round: u64, seed: u64) -> Option<String> {
    let Ok(mut conn) = Client::connect(&addr) else { return None };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut selected = 0;
    let mut counter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        counter += 1;
        let op = if rng.gen_bool(0.25) {
            Pending::FlushAll
        } else {
            Pending::Set(rng.gen_range(0..DBS.len()), rng.gen_range(0..KEYS), (round << 32) | counter)
        };
        if let Pending::Set(db, ..) = op {
            if db != selected {
                match conn.call(&[b"SELECT", DBS[db]]) {
                    Ok(Reply::Simple(_)) => selected = db,
                    Ok(other) => return Some(format!("SELECT {other:?}")),
                    Err(_) => return None,
                }
            }
        }
        model.lock().pending = op;
        let reply = match op {
            Pending::Set(_, k, v) => conn.call(&[b"SET", &key(k), v.to_string().as_bytes()]),
            _ => conn.call(&[b"FLUSHALL"]),
        };
        match reply {
            Ok(Reply::Simple(_)) => {
                let mut m = model.lock();
                match op {
                    Pending::Set(db, k, v) => {
                        if let Some(slot) = m.vals.get_mut(db).and_then(|d| d.get_mut(k)) {
                            *slot = Some(v);
                        }
                    }
                    _ => m.vals.iter_mut().flatten().for_each(|v| *v = None),
                }
                m.pending = Pending::None;
            }
            Ok(Reply::Error(e)) => return Some(e),
            Ok(other) => return Some(format!("unexpected reply {other:?}")),
            // The server was killed: the write stays pending.
            Err(_) => return None,
        }
    }
    None
}

/// Every database's keys, read with SELECT and MGET.
fn read_state(c: &mut Client) -> anyhow::Result<Result<State, String>> {
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let mut state = Vec::new();
    for db in DBS {
        if c.call(&[b"SELECT", db])? != Reply::Simple("OK".into()) {
            return Ok(Err("SELECT failed after the restart".into()));
        }
        let mut args: Vec<&[u8]> = vec![b"MGET"];
        args.extend(keys.iter().map(|k| k.as_slice()));
        let Reply::Array(Some(items)) = c.call(&args)? else {
            return Ok(Err("MGET did not return an array".into()));
        };
        let mut vals = Vec::new();
        for item in items {
            vals.push(match item {
                Reply::Bulk(None) => None,
                Reply::Bulk(Some(v)) => match std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()) {
                    Some(id) => Some(id),
                    None => return Ok(Err(format!("a value no write stored: {v:?}"))),
                },
                other => return Ok(Err(format!("MGET item {other:?}"))),
            });
        }
        state.push(vals);
    }
    Ok(Ok(state))
}

impl FlushAllTarget {
    /// A target with data in `dir`.
    pub fn new(bin: PathBuf, dir: PathBuf) -> anyhow::Result<FlushAllTarget> {
        std::fs::create_dir_all(&dir)?;
        let model = Model { vals: vec![vec![None; KEYS]; DBS.len()], pending: Pending::None };
        Ok(FlushAllTarget { bin, dir, model: Arc::new(Mutex::new(model)) })
    }

    /// One round: start, write and flush, SIGKILL, restart, verify.
    pub fn round(&mut self, rng: &mut StdRng, round: u64, rep: &mut Report) -> anyhow::Result<Result<(), String>> {
        let port = free_port()?;
        let mut srv = spawn_server(&self.bin, &self.dir, port, &["--durability", "sync"])?;
        if !wait_ready(&mut srv, port)? {
            let _ = srv.kill();
            let _ = srv.wait();
            return Ok(Err("strata-server (FLUSHALL target) did not start".into()));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (model, stop2, seed) = (self.model.clone(), stop.clone(), rng.gen::<u64>());
        let addr = format!("127.0.0.1:{port}");
        let h = std::thread::spawn(move || client(addr, model, stop2, round, seed));
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..400)));
        let _ = srv.kill();
        let _ = srv.wait();
        stop.store(true, Ordering::SeqCst);
        if let Ok(Some(e)) = h.join() {
            return Ok(Err(format!("server answered a FLUSHALL round's write with an error: {e}")));
        }
        let port = free_port()?;
        let mut srv = spawn_server(&self.bin, &self.dir, port, &["--durability", "sync"])?;
        if !wait_ready(&mut srv, port)? {
            let _ = srv.kill();
            let _ = srv.wait();
            return Ok(Err("strata-server (FLUSHALL target) did not restart after SIGKILL".into()));
        }
        let r = self.verify(port, rep);
        let _ = srv.kill();
        let _ = srv.wait();
        r
    }

    fn verify(&self, port: u16, rep: &mut Report) -> anyhow::Result<Result<(), String>> {
        let mut c = Client::connect(&format!("127.0.0.1:{port}"))?;
        let got = match read_state(&mut c)? {
            Ok(g) => g,
            Err(e) => return Ok(Err(e)),
        };
        let mut m = self.model.lock();
        let mut allowed = vec![m.vals.clone()];
        match m.pending {
            Pending::None => {}
            Pending::Set(db, k, v) => {
                let mut after = m.vals.clone();
                if let Some(slot) = after.get_mut(db).and_then(|d| d.get_mut(k)) {
                    *slot = Some(v);
                }
                allowed.push(after);
            }
            Pending::FlushAll => {
                allowed.push(vec![vec![None; KEYS]; DBS.len()]);
                rep.add("server_flushall_in_flight_at_kill", 1);
            }
        }
        if !allowed.contains(&got) {
            return Ok(Err(format!(
                "after a SIGKILL the databases hold {got:?}; acknowledged {:?}, in flight {:?}",
                m.vals, m.pending
            )));
        }
        rep.add("server_flushall_rounds", 1);
        m.vals = got;
        m.pending = Pending::None;
        Ok(Ok(()))
    }
}
