//! `--mode kill --target replication`: SIGKILL in a replicated
//! strata-server group, with failover done the way Sentinel does it.
//!
//! Each round starts a primary, writes up to 3000 bulk keys to it
//! ([`preload`]: so that full syncs carry an image worth the name), starts
//! one or two replicas (`--durability sync`, a data directory each, fresh
//! ports, full syncs served diskless or from a file), waits for the links,
//! and runs writer threads against the primary ([`writer`]: each owns its
//! keys and keeps every operation it sent, 30% of them followed by
//! `WAIT 1`). Then, one to three times, at a random moment (once every link
//! is up again), either
//!
//! * the primary is killed: the replica with the highest
//!   `slave_repl_offset` is promoted with `REPLICAOF NO ONE`, and its
//!   contents are checked — each writer's keys must show the state after a
//!   prefix of its operations that reaches the last one `WAIT` counted
//!   (acknowledged writes without `WAIT` that are missing are counted, not
//!   failed: asynchronous replication may lose them); then the other
//!   replica and the old primary (restarted on its directory) follow the
//!   new primary, and the writers go on against it; or
//! * a replica is killed and restarted on its directory, and resyncs while
//!   the writers go on (with two replicas, three times in ten the primary
//!   is killed too, during that resync, and the failover follows).
//!
//! Then the writers stop, the replicas must catch up (offsets equal to the
//! primary's), the primary must hold exactly every writer's model, and each
//! replica's full dump ([`dump`]: type, value, absolute expiry of every key)
//! must equal the primary's. A server that does not come back up or a
//! replica whose link never comes up is a violation too.

pub mod dump;
pub mod model;
pub mod node;
pub mod preload;
pub mod writer;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::server;
use crate::oracle::show;
use crate::report::{Report, Value};
use crate::RunCfg;
use dump::Dump;
use node::{field, Node};
use preload::Preload;
use writer::{End, Writer};

/// How long a replica may take to reach `master_link_status:up` (a full
/// sync of a small database under load), and to catch up at the end.
const LINK_TIMEOUT: Duration = Duration::from_secs(30);

/// The `WAIT` timeout of the writers, in milliseconds.
const WAIT_MS: u64 = 500;

/// Unwraps a round's inner result: `Err` is the round's violation.
macro_rules! check {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(v) => return Ok(Err(v)),
        }
    };
}

/// Runs replication rounds for the configured time.
pub fn run(cfg: &RunCfg) -> anyhow::Result<Report> {
    let mut rep = Report::new("kill", cfg.seed);
    rep.set("target", Value::Text("replication".into()));
    let Some(bin) = server::find_binary() else {
        rep.set("server", Value::Text("skipped: no strata-server binary (build it, or set STRATA_SERVER_BIN)".into()));
        return Ok(rep);
    };
    // The main counters first, in a fixed order (30-stress.sh reads `repl_rounds`).
    for k in [
        "repl_rounds",
        "repl_failovers",
        "repl_replica_kills",
        "repl_failover_checks",
        "repl_acked_without_wait_lost",
        "repl_writes_acked",
    ] {
        rep.add(k, 0);
    }
    let root = tempfile::Builder::new().prefix("strata-stress-repl").tempdir()?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let writers = cfg.jobs.clamp(2, 4);
    let deadline = cfg.deadline();
    let mut round = 0u64;
    while Instant::now() < deadline && rep.violations() == 0 {
        round += 1;
        let dir = root.path().join(format!("round-{round}"));
        match one_round(&bin, &dir, writers, deadline, &mut rng, &mut rep)? {
            Ok(()) => {
                rep.add("repl_rounds", 1);
                let _ = std::fs::remove_dir_all(&dir);
            }
            Err(v) => rep.violation(cfg.seed, format!("round {round}: {v}")),
        }
        if cfg.verbose {
            eprintln!("kill --target replication: {}", rep.json());
        }
    }
    if rep.violations() > 0 {
        // Keep the data directories and server logs of the failing round.
        let kept = root.keep();
        eprintln!("kill --target replication: data and logs kept in {}", kept.display());
    }
    Ok(rep)
}

type Running = (Arc<AtomicBool>, Vec<JoinHandle<(Writer, End)>>);

fn spawn_writers(writers: Vec<Writer>, addr: &str) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let hs = writers
        .into_iter()
        .map(|mut w| {
            let (stop, addr) = (stop.clone(), addr.to_string());
            std::thread::spawn(move || {
                let end = w.run(&addr, &stop, WAIT_MS);
                (w, end)
            })
        })
        .collect();
    (stop, hs)
}

fn join_writers((stop, hs): Running) -> anyhow::Result<Vec<(Writer, End)>> {
    stop.store(true, Ordering::SeqCst);
    let mut out = Vec::new();
    for h in hs {
        out.push(h.join().map_err(|_| anyhow::anyhow!("a writer thread panicked"))?);
    }
    Ok(out)
}

/// The writers, or the first thing the server answered that the model
/// does not allow (or, if `alive`, a lost connection to a live primary).
fn ended(ends: Vec<(Writer, End)>, alive: bool) -> Result<Vec<Writer>, String> {
    let mut out = Vec::new();
    for (w, e) in ends {
        match e {
            End::Stopped => {}
            End::Wrong(e) => return Err(format!("writer {}: {e}", w.id)),
            End::ConnLost(e) if alive => return Err(format!("writer {}: lost its live primary: {e}", w.id)),
            End::ConnLost(_) => {}
        }
        out.push(w);
    }
    Ok(out)
}

fn sleep_ms(rng: &mut StdRng, lo: u64, hi: u64) {
    std::thread::sleep(Duration::from_millis(rng.gen_range(lo..hi)));
}

fn read_dump(n: &Node) -> anyhow::Result<Result<Dump, String>> {
    let mut c = n.client()?;
    Ok(dump::dump(&mut c)?.map_err(|e| format!("{}: {e}", n.name)))
}

fn unknown_keys(d: &Dump, writers: &[Writer], pre: &Preload) -> Result<(), String> {
    match d.keys().find(|k| !pre.owns(k) && !writers.iter().any(|w| w.owns(k))) {
        Some(k) => Err(format!("key {} was never written", show(k))),
        None => Ok(()),
    }
}

fn nodes_mut(nodes: &mut [Node], i: usize) -> anyhow::Result<&mut Node> {
    nodes.get_mut(i).context("node index")
}

fn one_round(
    bin: &Path,
    dir: &Path,
    writers: usize,
    deadline: Instant,
    rng: &mut StdRng,
    rep: &mut Report,
) -> anyhow::Result<Result<(), String>> {
    let replicas = if rng.gen_bool(0.5) { 2 } else { 1 };
    let mut nodes = Vec::new();
    for i in 0..=replicas {
        nodes.push(Node::new(bin, dir.join(format!("n{i}")), format!("n{i}"), rng.gen_bool(0.5))?);
    }
    rep.add(&format!("repl_rounds_{replicas}_replicas"), 1);
    let mut primary = 0usize;
    check!(nodes_mut(&mut nodes, 0)?.start(None)?);
    let p0 = nodes_mut(&mut nodes, 0)?.port;
    let pre = Preload::new(rng, 3000);
    check!(pre.write(&mut nodes_mut(&mut nodes, 0)?.client()?)?);
    rep.add("repl_bulk_keys", pre.len() as u64);
    for n in nodes.iter_mut().skip(1) {
        check!(n.start(Some(p0))?);
    }
    for n in nodes.iter_mut().skip(1) {
        check!(n.wait_link_up(LINK_TIMEOUT)?);
    }
    let ws: Vec<Writer> = (0..writers).map(|w| Writer::new(w, rng.gen())).collect();
    let mut running = spawn_writers(ws, &nodes_mut(&mut nodes, primary)?.addr());
    // One to three kills, each once every link is up again.
    let events = rng.gen_range(1..=3);
    for e in 0..events {
        // Past the deadline, only the round's first kill.
        if e > 0 && Instant::now() >= deadline {
            break;
        }
        rep.add("repl_kills", 1);
        sleep_ms(rng, 200, 1200);
        // With two replicas the primary is sometimes killed while the
        // other is still syncing after its own kill: only the up-to-date
        // one may be promoted (a syncing replica must not claim an offset
        // whose data it has not loaded).
        let primary_too = if rng.gen_bool(0.5) {
            true
        } else {
            let victims: Vec<usize> = (0..nodes.len()).filter(|i| *i != primary).collect();
            let victim = victims.choose(rng).copied().context("no replica")?;
            let pport = nodes_mut(&mut nodes, primary)?.port;
            let v = nodes_mut(&mut nodes, victim)?;
            v.kill();
            rep.add("repl_replica_kills", 1);
            sleep_ms(rng, 50, 500);
            check!(restart_as_replica(v, pport, rng, rep)?);
            if nodes.len() == 3 && rng.gen_bool(0.3) {
                sleep_ms(rng, 0, 100);
                rep.add("repl_primary_kills_during_a_resync", 1);
                true
            } else {
                check!(nodes_mut(&mut nodes, victim)?.wait_link_up(LINK_TIMEOUT)?);
                false
            }
        };
        if primary_too {
            nodes_mut(&mut nodes, primary)?.kill();
            let ws = check!(ended(join_writers(running)?, false));
            rep.add("repl_failovers", 1);
            let (new, ws) = check!(failover(&mut nodes, primary, ws, &pre, rng, rep)?);
            primary = new;
            running = spawn_writers(ws, &nodes_mut(&mut nodes, primary)?.addr());
            for (i, n) in nodes.iter_mut().enumerate() {
                if i != primary {
                    check!(n.wait_link_up(LINK_TIMEOUT)?);
                }
            }
        }
    }
    sleep_ms(rng, 200, 800);
    let ws = check!(ended(join_writers(running)?, true));
    check!(caught_up(&mut nodes, primary)?);
    // Everything was acknowledged: the primary holds exactly the models,
    // and every replica exactly the primary.
    let pn = nodes.get(primary).context("primary")?;
    let pd = check!(read_dump(pn)?);
    check!(unknown_keys(&pd, &ws, &pre).map_err(|e| format!("primary {}: {e}", pn.name)));
    let pm = dump::to_model(&pd);
    check!(pre.check(&pm).map_err(|e| format!("primary {}: {e}", pn.name)));
    for w in &ws {
        check!(w.check_exact(&pm).map_err(|e| format!("primary {} after all writes: {e}", pn.name)));
    }
    rep.add("repl_keys_compared", pd.len() as u64);
    for (i, n) in nodes.iter().enumerate() {
        if i == primary {
            continue;
        }
        let rd = check!(read_dump(n)?);
        check!(dump::compare(&pd, &rd).map_err(|e| format!("replica {} differs from primary {}: {e}", n.name, pn.name)));
        rep.add("repl_bytes_compared", dump::size(&pd) + dump::size(&rd));
        rep.add("repl_replica_dumps_compared", 1);
    }
    // Syncs served: the killed primaries' counts died with them.
    for n in &nodes {
        let stats = n.info("stats")?;
        match (field(&stats, "sync_full"), field(&stats, "sync_partial_ok")) {
            (Some(f), Some(p)) => {
                rep.add("repl_sync_full", f as u64);
                rep.add("repl_sync_partial_ok", p as u64);
            }
            _ => rep.set("repl_sync_stats", Value::Text("absent from INFO stats".into())),
        }
    }
    for w in &ws {
        rep.add("repl_writes_acked", w.stats.acked);
        rep.add("repl_multi_exec_acked", w.stats.multi);
        rep.add("repl_waits", w.stats.waits);
        rep.add("repl_waits_counting_a_replica", w.stats.waits_ok);
    }
    Ok(Ok(()))
}

/// Restarts a killed replica on its directory: with `--replicaof`, or as a
/// primary turned replica by `REPLICAOF` (as Sentinel reconfigures one).
/// Three times in ten it is killed once more within 150 ms, usually in the
/// middle of its full sync (its databases emptied and half loaded), and
/// started again.
fn restart_as_replica(
    n: &mut Node,
    primary_port: u16,
    rng: &mut StdRng,
    rep: &mut Report,
) -> anyhow::Result<Result<(), String>> {
    let again = rng.gen_bool(0.3);
    for attempt in 0..=usize::from(again) {
        if attempt > 0 {
            sleep_ms(rng, 0, 150);
            n.kill();
            rep.add("repl_kills_during_sync", 1);
        }
        if rng.gen_bool(0.5) {
            check!(n.start(Some(primary_port))?);
        } else {
            check!(n.start(None)?);
            check!(n.replicaof(Some(primary_port))?);
        }
        rep.add("repl_restarts", 1);
    }
    Ok(Ok(()))
}

/// After the primary's SIGKILL: promote the most advanced replica, check
/// the writers' oracle on it, and point the others (the old primary
/// restarted) at it. Returns the new primary's index.
fn failover(
    nodes: &mut [Node],
    old: usize,
    mut ws: Vec<Writer>,
    pre: &Preload,
    rng: &mut StdRng,
    rep: &mut Report,
) -> anyhow::Result<Result<(usize, Vec<Writer>), String>> {
    // Let each replica see the link drop, so its offset is final.
    let start = Instant::now();
    let mut best: Option<(i64, usize)> = None;
    for (i, n) in nodes.iter().enumerate() {
        if i == old {
            continue;
        }
        let mut info = n.info("replication")?;
        while info.get("master_link_status").is_some_and(|s| s == "up") && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
            info = n.info("replication")?;
        }
        if info.get("master_link_status").is_some_and(|s| s == "up") {
            rep.add("repl_link_still_up_5s_after_kill", 1);
        }
        let off = field(&info, "slave_repl_offset").unwrap_or(-1);
        if best.is_none_or(|(o, _)| off > o) {
            best = Some((off, i));
        }
    }
    let (_, new) = best.context("no replica")?;
    let nn = nodes.get(new).context("new primary")?;
    check!(nn.replicaof(None)?);
    let d = check!(read_dump(nn)?);
    check!(unknown_keys(&d, &ws, pre).map_err(|e| format!("promoted {}: {e}", nn.name)));
    let m = dump::to_model(&d);
    check!(pre.check(&m).map_err(|e| format!("promoted {}: {e}", nn.name)));
    for w in ws.iter_mut() {
        let p = check!(w.check_prefix(&m).map_err(|e| format!("after failover to {}: {e}", nn.name)));
        rep.add("repl_acked_without_wait_lost", p.acked.saturating_sub(p.matched) as u64);
        rep.add("repl_in_flight_kept", u64::from(p.matched > p.acked));
        w.resolve(&m);
    }
    rep.add("repl_failover_checks", 1);
    let pport = nn.port;
    let mut others: Vec<usize> = (0..nodes.len()).filter(|i| *i != new).collect();
    others.shuffle(rng);
    for i in others {
        let n = nodes.get_mut(i).context("node")?;
        if i == old {
            check!(restart_as_replica(n, pport, rng, rep)?);
        } else {
            check!(n.replicaof(Some(pport))?);
        }
    }
    Ok(Ok((new, ws)))
}

/// Waits until every replica's link is up and its `slave_repl_offset`
/// equals the primary's `master_repl_offset`.
fn caught_up(nodes: &mut [Node], primary: usize) -> anyhow::Result<Result<(), String>> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < LINK_TIMEOUT {
        let p = nodes.get(primary).context("primary")?;
        let po = field(&p.info("replication")?, "master_repl_offset");
        let mut all = true;
        last.clear();
        for (i, n) in nodes.iter().enumerate() {
            if i == primary {
                continue;
            }
            let info = n.info("replication")?;
            let ro = field(&info, "slave_repl_offset");
            let up = info.get("master_link_status").is_some_and(|s| s == "up");
            if !up || ro != po {
                all = false;
                last.push_str(&format!("{} link {} offset {ro:?} vs {po:?}; ", n.name, if up { "up" } else { "down" }));
            }
        }
        if all {
            return Ok(Ok(()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Err(format!("replicas did not catch up in {LINK_TIMEOUT:?}: {last}")))
}
