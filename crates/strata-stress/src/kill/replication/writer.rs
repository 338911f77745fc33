//! The writers of the replication rounds and their oracle.
//!
//! Each writer owns its keys (no other client touches them), sends one
//! operation at a time (a command, or a MULTI/EXEC of a few) and keeps
//! every operation it sent since the last resolved state (`base`). The
//! replication stream is the primary's execution order, and a replica
//! applies a prefix of it, so after a failover the writer's keys on the
//! promoted replica must show exactly the state after some prefix of the
//! writer's operations — never half a transaction, never a state no prefix
//! gives — and that prefix must reach the last operation a `WAIT 1`
//! acknowledged. Values carry the writer's sequence numbers, so states of
//! different prefixes rarely coincide; where they do, any matching prefix
//! is as good as another (nothing observable was lost).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::dump::brief_val;
use super::model::{apply, Cmd, Expect, Model};
use crate::oracle::show;
use crate::resp_client::{encode, Client, Reply};

/// Keys each writer owns: two of each kind.
pub const KEYS_PER_WRITER: usize = 12;

const KINDS: [&str; 6] = ["str", "ctr", "hash", "list", "set", "zset"];

/// The name of writer `w`'s key `k` (its kind is `k % 6`).
pub fn key_name(w: usize, k: usize) -> Vec<u8> {
    let kind = KINDS.get(k % KINDS.len()).copied().unwrap_or("str");
    format!("repl-w{w}-{kind}-{k:02}").into_bytes()
}

/// One operation: a command, or several in MULTI/EXEC.
#[derive(Clone, Debug)]
struct Op {
    cmds: Vec<Cmd>,
    multi: bool,
}

/// How a writer's run ended.
#[derive(Debug)]
pub enum End {
    /// Told to stop.
    Stopped,
    /// The connection failed (the server was killed): the last operation
    /// may be in flight.
    ConnLost(String),
    /// The server answered something the model does not allow.
    Wrong(String),
}

/// Counts a writer keeps for the report.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Operations acknowledged.
    pub acked: u64,
    /// Of them, MULTI/EXEC transactions.
    pub multi: u64,
    /// WAITs sent.
    pub waits: u64,
    /// WAITs answered with at least one replica.
    pub waits_ok: u64,
}

/// A writer: its keys, its model and the operations since `base`.
pub struct Writer {
    /// Writer number (in its key names).
    pub id: usize,
    keys: Vec<Vec<u8>>,
    /// State of the writer's keys before `ops`.
    base: Model,
    /// Operations sent since `base`, in order.
    ops: Vec<Op>,
    /// State after all of `ops`.
    model: Model,
    /// Operations of `ops` acknowledged (a prefix: one at a time).
    acked: usize,
    /// Operations of `ops` covered by a `WAIT` that counted a replica.
    waited: usize,
    counter: u64,
    rng: StdRng,
    /// Counts for the report.
    pub stats: Stats,
}

/// What the check after a failover found.
#[derive(Clone, Copy, Debug)]
pub struct Prefix {
    /// The longest prefix of the writer's operations the state matches.
    pub matched: usize,
    /// Operations acknowledged.
    pub acked: usize,
    /// Operations sent.
    pub issued: usize,
}

impl Writer {
    /// Writer `id` with an empty key space.
    pub fn new(id: usize, seed: u64) -> Writer {
        Writer {
            id,
            keys: (0..KEYS_PER_WRITER).map(|k| key_name(id, k)).collect(),
            base: Model::new(),
            ops: Vec::new(),
            model: Model::new(),
            acked: 0,
            waited: 0,
            counter: 0,
            rng: StdRng::seed_from_u64(seed),
            stats: Stats::default(),
        }
    }

    /// Whether `key` is one of this writer's.
    pub fn owns(&self, key: &[u8]) -> bool {
        self.keys.iter().any(|k| k == key)
    }

    fn gen_cmd(&mut self) -> Cmd {
        let k = self.rng.gen_range(0..KEYS_PER_WRITER);
        let key = key_name(self.id, k);
        self.counter += 1;
        let v = format!("w{}-{}", self.id, self.counter).into_bytes();
        let r = self.rng.gen_range(0..100);
        let field = |rng: &mut StdRng, n: u32| format!("m{}", rng.gen_range(0..n)).into_bytes();
        let mut c: Vec<Vec<u8>> = if r < 6 {
            // Long TTLs: nothing expires during a round, so the model
            // needs no clock.
            vec![b"EXPIRE".to_vec(), key, self.rng.gen_range(1000..100_000).to_string().into_bytes()]
        } else if r < 8 {
            vec![b"PERSIST".to_vec(), key]
        } else if r < 14 {
            vec![b"DEL".to_vec(), key]
        } else {
            let add = r < 70;
            match k % KINDS.len() {
                0 => vec![b"SET".to_vec(), key, v],
                1 => vec![b"INCRBY".to_vec(), key, self.rng.gen_range(-5..100).to_string().into_bytes()],
                2 if add => vec![b"HSET".to_vec(), key, field(&mut self.rng, 8), v],
                2 => vec![b"HDEL".to_vec(), key, field(&mut self.rng, 8)],
                3 if add => vec![b"RPUSH".to_vec(), key, v],
                3 => vec![b"LPOP".to_vec(), key],
                4 if add => vec![b"SADD".to_vec(), key, field(&mut self.rng, 16)],
                4 => vec![b"SREM".to_vec(), key, field(&mut self.rng, 16)],
                _ if add => {
                    vec![b"ZADD".to_vec(), key, self.counter.to_string().into_bytes(), field(&mut self.rng, 16)]
                }
                _ => vec![b"ZREM".to_vec(), key, field(&mut self.rng, 16)],
            }
        };
        if c.first().is_some_and(|n| n == b"RPUSH") && self.rng.gen_bool(0.3) {
            c.push(format!("w{}-{}b", self.id, self.counter).into_bytes());
        }
        c
    }

    /// Writes to `addr` until `stop` or a failure; a fraction of the
    /// operations is followed by `WAIT 1 wait_ms`.
    pub fn run(&mut self, addr: &str, stop: &AtomicBool, wait_ms: u64) -> End {
        let mut conn = match Client::connect(addr) {
            Ok(c) => c,
            Err(e) => return End::ConnLost(format!("connect: {e:#}")),
        };
        let wait_ms = wait_ms.to_string();
        while !stop.load(Ordering::Relaxed) {
            let multi = self.rng.gen_bool(0.1);
            let n = if multi { self.rng.gen_range(2..=4) } else { 1 };
            let cmds: Vec<Cmd> = (0..n).map(|_| self.gen_cmd()).collect();
            let expect: Vec<Expect> = cmds.iter().map(|c| apply(&mut self.model, c)).collect();
            self.ops.push(Op { cmds: cmds.clone(), multi });
            let got = if multi { transaction(&mut conn, &cmds) } else { single(&mut conn, &cmds) };
            let replies = match got {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => return End::Wrong(e),
                // The server is gone: the operation stays in flight.
                Err(e) => return End::ConnLost(format!("{e:#}")),
            };
            for ((c, e), r) in cmds.iter().zip(&expect).zip(&replies) {
                if !e.matches(r) {
                    return End::Wrong(format!("{} answered {r:?}, the model expects {e:?}", show_cmd(c)));
                }
            }
            self.acked = self.ops.len();
            self.stats.acked += 1;
            self.stats.multi += u64::from(multi);
            if self.rng.gen_bool(0.3) {
                self.stats.waits += 1;
                match conn.call(&[b"WAIT", b"1", wait_ms.as_bytes()]) {
                    Ok(Reply::Int(n)) if n >= 1 => {
                        self.waited = self.acked;
                        self.stats.waits_ok += 1;
                    }
                    Ok(Reply::Int(_)) => {}
                    Ok(other) => return End::Wrong(format!("WAIT answered {other:?}")),
                    Err(e) => return End::ConnLost(format!("{e:#}")),
                }
            }
        }
        End::Stopped
    }

    fn state_after(&self, n: usize) -> Model {
        let mut s = self.base.clone();
        for op in self.ops.iter().take(n) {
            for c in &op.cmds {
                apply(&mut s, c);
            }
        }
        s
    }

    fn diff(&self, want: &Model, got: &Model) -> String {
        let mut out = Vec::new();
        for k in &self.keys {
            let (w, g) = (want.get(k), got.get(k));
            if w != g {
                let f = |e: Option<&super::model::Entry>| match e {
                    None => "<absent>".to_string(),
                    Some(e) => format!("{}{}", brief_val(&e.val), if e.ttl { " +ttl" } else { "" }),
                };
                out.push(format!("{} = {} (want {})", show(k), f(g), f(w)));
            }
        }
        out.truncate(3);
        out.join("; ")
    }

    /// After a failover: the longest prefix of this writer's operations
    /// whose state `got` (the promoted replica's keys) shows. `Err` if no
    /// prefix gives it, or if it is shorter than what `WAIT` acknowledged.
    pub fn check_prefix(&self, got: &Model) -> Result<Prefix, String> {
        let mut s = self.base.clone();
        let mut bad: BTreeSet<Vec<u8>> = self.keys.iter().filter(|k| s.get(*k) != got.get(*k)).cloned().collect();
        let mut matched = bad.is_empty().then_some(0);
        for (i, op) in self.ops.iter().enumerate() {
            for c in &op.cmds {
                apply(&mut s, c);
            }
            for c in &op.cmds {
                if let Some(k) = c.get(1) {
                    if s.get(k) == got.get(k) {
                        bad.remove(k);
                    } else {
                        bad.insert(k.clone());
                    }
                }
            }
            if bad.is_empty() {
                matched = Some(i + 1);
            }
        }
        let issued = self.ops.len();
        let Some(matched) = matched else {
            let last = self.ops.last().map(|o| if o.multi { " (the last was a MULTI/EXEC)" } else { "" });
            return Err(format!(
                "writer {}: its keys show a state after no prefix of its {issued} operations{}; against the {} acknowledged: {}",
                self.id,
                last.unwrap_or_default(),
                self.acked,
                self.diff(&self.state_after(self.acked), got)
            ));
        };
        if matched < self.waited {
            return Err(format!(
                "writer {}: operation {} was acknowledged by WAIT 1 but the new primary shows at most the first {matched} \
                 (of {} acknowledged, {issued} sent): {}",
                self.id,
                self.waited,
                self.acked,
                self.diff(&self.state_after(self.waited), got)
            ));
        }
        Ok(Prefix { matched, acked: self.acked, issued })
    }

    /// With every operation acknowledged and none in flight: `got` must
    /// hold exactly the model's state of this writer's keys.
    pub fn check_exact(&self, got: &Model) -> Result<(), String> {
        if self.acked != self.ops.len() {
            return Err(format!("writer {}: {} operations sent, {} acknowledged", self.id, self.ops.len(), self.acked));
        }
        let d = self.diff(&self.model, got);
        if d.is_empty() {
            Ok(())
        } else {
            Err(format!("writer {}: {d}", self.id))
        }
    }

    /// Takes `got` (a checked state) as the new base: the operations in
    /// flight are decided.
    pub fn resolve(&mut self, got: &Model) {
        self.base = self.keys.iter().filter_map(|k| got.get(k).map(|e| (k.clone(), e.clone()))).collect();
        self.model = self.base.clone();
        self.ops.clear();
        self.acked = 0;
        self.waited = 0;
    }
}

fn show_cmd(c: &Cmd) -> String {
    c.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}

fn single(conn: &mut Client, cmds: &[Cmd]) -> anyhow::Result<Result<Vec<Reply>, String>> {
    let mut out = Vec::new();
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
        out.push(conn.call(&args)?);
    }
    Ok(Ok(out))
}

/// MULTI, the commands and EXEC in one send; the EXEC array's items are the
/// commands' replies.
fn transaction(conn: &mut Client, cmds: &[Cmd]) -> anyhow::Result<Result<Vec<Reply>, String>> {
    let mut buf = encode(&[b"MULTI"]);
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
        buf.extend_from_slice(&encode(&args));
    }
    buf.extend_from_slice(&encode(&[b"EXEC"]));
    conn.send_raw(&buf)?;
    match conn.read_reply()? {
        Reply::Simple(s) if s == "OK" => {}
        other => return Ok(Err(format!("MULTI answered {other:?}"))),
    }
    for c in cmds {
        match conn.read_reply()? {
            Reply::Simple(s) if s == "QUEUED" => {}
            other => return Ok(Err(format!("{} in MULTI answered {other:?}", show_cmd(c)))),
        }
    }
    match conn.read_reply()? {
        Reply::Array(Some(items)) if items.len() == cmds.len() => Ok(Ok(items)),
        other => Ok(Err(format!("EXEC answered {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(w: &mut Writer, args: &[&str]) {
        let c: Cmd = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        apply(&mut w.model, &c);
        w.ops.push(Op { cmds: vec![c], multi: false });
        w.acked = w.ops.len();
    }

    #[test]
    fn prefix_check_finds_the_longest_prefix_and_enforces_wait() {
        let mut w = Writer::new(0, 1);
        let k = String::from_utf8_lossy(&key_name(0, 0)).into_owned();
        op(&mut w, &["SET", &k, "a"]);
        op(&mut w, &["SET", &k, "b"]);
        w.waited = 2;
        op(&mut w, &["SET", &k, "c"]);
        let after = |n| w.state_after(n);
        assert_eq!(w.check_prefix(&after(3)).map(|p| p.matched), Ok(3));
        assert_eq!(w.check_prefix(&after(2)).map(|p| p.matched), Ok(2));
        assert!(w.check_prefix(&after(1)).is_err(), "lost a write WAIT acknowledged");
        let mut other = Model::new();
        apply(&mut other, &vec![b"SET".to_vec(), key_name(0, 0), b"z".to_vec()]);
        assert!(w.check_prefix(&other).is_err(), "a value never written");
        assert!(w.check_exact(&after(3)).is_ok());
        assert!(w.check_exact(&after(2)).is_err());
    }

    #[test]
    fn half_a_transaction_matches_no_prefix() {
        let mut w = Writer::new(1, 2);
        let (a, b) = (key_name(1, 0), key_name(1, 6));
        let cmds: Vec<Cmd> =
            vec![vec![b"SET".to_vec(), a.clone(), b"1".to_vec()], vec![b"SET".to_vec(), b.clone(), b"1".to_vec()]];
        for c in &cmds {
            apply(&mut w.model, c);
        }
        w.ops.push(Op { cmds: cmds.clone(), multi: true });
        let mut half = Model::new();
        apply(&mut half, &cmds[0]);
        assert!(w.check_prefix(&half).is_err());
        assert!(w.check_prefix(&w.model.clone()).is_ok());
        assert!(w.check_prefix(&Model::new()).is_ok(), "nothing acknowledged, nothing waited");
    }
}
