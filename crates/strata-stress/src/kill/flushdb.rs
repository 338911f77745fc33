//! FLUSHDB in the middle of the server rounds: while the clients write db
//! 0, one more client writes a few keys of database 3 (an engine
//! partition) and now and then empties it with FLUSHDB (a partition drop).
//! After the SIGKILL and restart, db 3 must hold what was acknowledged —
//! with a FLUSHDB in flight either all of it or nothing (the drop is
//! atomic) — and none of its keys may show up in db 0; the db 0 check of
//! the round shows the drops removed nothing there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::resp_client::{Client, Reply};

/// The database the flushing client writes.
const DB: &[u8] = b"3";
/// Keys it writes.
const KEYS: usize = 16;

fn key(k: usize) -> Vec<u8> {
    format!("flush-{k:02}").into_bytes()
}

/// The write in flight when the server was killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    None,
    Set(usize, u64),
    Flush,
}

/// What database 3 holds: acknowledged values, and the write in flight.
#[derive(Debug)]
pub struct FlushModel {
    vals: Vec<Option<u64>>,
    pending: Pending,
    /// FLUSHDBs acknowledged since the last [`FlushModel::take_flushes`].
    flushes: u64,
}

impl Default for FlushModel {
    fn default() -> Self {
        FlushModel { vals: vec![None; KEYS], pending: Pending::None, flushes: 0 }
    }
}

/// The flushing client: writes until `stop` or the server dies; returns
/// an error reply, if the server sent one.
pub fn client(
    addr: String,
    model: Arc<Mutex<FlushModel>>,
    stop: Arc<AtomicBool>,
    round: u64,
    seed: u64,
) -> Option<String> {
    let Ok(mut conn) = Client::connect(&addr) else { return None };
    match conn.call(&[b"SELECT", DB]) {
        Ok(Reply::Simple(_)) => {}
        Ok(other) => return Some(format!("SELECT {other:?}")),
        Err(_) => return None,
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        counter += 1;
        let id = (round << 32) | counter;
        let op = if rng.gen_bool(0.1) { Pending::Flush } else { Pending::Set(rng.gen_range(0..KEYS), id) };
        model.lock().pending = op;
        let reply = match op {
            Pending::Set(k, v) => conn.call(&[b"SET", &key(k), v.to_string().as_bytes()]),
            _ => conn.call(&[b"FLUSHDB"]),
        };
        match reply {
            Ok(Reply::Simple(_)) => {
                let mut m = model.lock();
                match op {
                    Pending::Set(k, v) => {
                        if let Some(slot) = m.vals.get_mut(k) {
                            *slot = Some(v);
                        }
                    }
                    _ => {
                        m.vals.iter_mut().for_each(|v| *v = None);
                        m.flushes += 1;
                    }
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

/// MGET of every key in the connection's database.
fn read_all(c: &mut Client) -> anyhow::Result<Result<Vec<Option<u64>>, String>> {
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(keys.iter().map(|k| k.as_slice()));
    let Reply::Array(Some(items)) = c.call(&args)? else {
        return Ok(Err("MGET did not return an array".into()));
    };
    let mut out = Vec::with_capacity(KEYS);
    for item in items {
        out.push(match item {
            Reply::Bulk(None) => None,
            Reply::Bulk(Some(v)) => match std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()) {
                Some(id) => Some(id),
                None => return Ok(Err(format!("db 3 holds a value no write stored: {v:?}"))),
            },
            other => return Ok(Err(format!("MGET item {other:?}"))),
        });
    }
    Ok(Ok(out))
}

impl FlushModel {
    /// FLUSHDBs acknowledged since the last call.
    pub fn take_flushes(&mut self) -> u64 {
        std::mem::take(&mut self.flushes)
    }

    /// Checks database 3 (and that db 0 holds none of its keys) after a
    /// restart, then takes what it holds as acknowledged.
    pub fn verify(&mut self, c: &mut Client) -> anyhow::Result<Result<(), String>> {
        match read_all(c)? {
            Ok(in_db0) if in_db0.iter().all(Option::is_none) => {}
            Ok(in_db0) => return Ok(Err(format!("db 3's keys show up in db 0: {in_db0:?}"))),
            Err(e) => return Ok(Err(e)),
        }
        if c.call(&[b"SELECT", DB])? != Reply::Simple("OK".into()) {
            return Ok(Err("SELECT 3 failed after the restart".into()));
        }
        let got = match read_all(c)? {
            Ok(g) => g,
            Err(e) => return Ok(Err(e)),
        };
        c.call(&[b"SELECT", b"0"])?;
        let mut allowed = vec![self.vals.clone()];
        match self.pending {
            Pending::None => {}
            Pending::Set(k, v) => {
                let mut after = self.vals.clone();
                if let Some(slot) = after.get_mut(k) {
                    *slot = Some(v);
                }
                allowed.push(after);
            }
            Pending::Flush => allowed.push(vec![None; KEYS]),
        }
        if !allowed.contains(&got) {
            return Ok(Err(format!(
                "db 3 after the restart holds {got:?}; acknowledged {:?}, in flight {:?}",
                self.vals, self.pending
            )));
        }
        self.vals = got;
        self.pending = Pending::None;
        Ok(Ok(()))
    }
}
