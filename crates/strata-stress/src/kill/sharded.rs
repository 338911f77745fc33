//! Mode `kill --shards N`: the sharded front end (`stratakv::Sharded`)
//! killed with SIGKILL while writer threads commit batches that span shards.
//!
//! Batch `i` sets the shared keys `group-00..` (over every shard) to `i` and
//! its own keys `own-<i>-0..` to `i`. After each kill the parent reopens the
//! database (which redoes partly applied batches from the coordinator log)
//! and checks: each batch's own keys are all there or none; every batch
//! the child acknowledged is there; the group keys hold one value, that of
//! a batch that is there. Any other state is a violation.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stratakv::{Options, Sharded, ShardedOptions, WriteBatch};

use crate::report::Report;
use crate::RunCfg;

/// Keys every batch sets.
const GROUP: usize = 8;
/// Keys only batch `i` sets.
const OWN: usize = 4;

fn options(shards: usize) -> ShardedOptions {
    let mut o = Options::for_tests();
    o.write_buffer_size = 32 << 10;
    let mut s = ShardedOptions::new(shards, o);
    // Small, so the log is also emptied while the child runs.
    s.coord_log_limit = 64 << 10;
    s
}

fn batch(i: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    let v = i.to_string();
    for j in 0..GROUP {
        b.put(format!("group-{j:02}"), &v);
    }
    for j in 0..OWN {
        b.put(format!("own-{i:012}-{j}"), &v);
    }
    b
}

/// The child (`--kill-child sharded:<shards>:<threads>:<first id>:<dir>`):
/// commits batches from several threads, printing `ack <i>` after each.
pub fn child(spec: &str) -> anyhow::Result<()> {
    let mut parts = spec.splitn(4, ':');
    let mut num = || -> anyhow::Result<u64> { Ok(parts.next().context("short spec")?.parse()?) };
    let (shards, threads, from) = (num()? as usize, num()?, num()?);
    let dir = parts.next().context("no directory")?;
    let db = Arc::new(Sharded::open(dir, options(shards))?);
    println!("open");
    let next = Arc::new(AtomicU64::new(from));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (db, next) = (db.clone(), next.clone());
            std::thread::spawn(move || -> anyhow::Result<()> {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    db.write_async(batch(i), i % 8 == 0).wait()?;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {i}")?;
                    out.flush()?;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("a writer panicked"))??;
    }
    Ok(())
}

/// Checks the recovered state; the number of batches found, or the violation.
fn check(db: &Sharded, acked: &BTreeSet<u64>) -> anyhow::Result<Result<usize, String>> {
    let mut it = db.iter(..)?;
    let mut own: BTreeMap<u64, usize> = BTreeMap::new();
    let mut group = Vec::new();
    while let Some((k, v)) = it.try_next()? {
        let k = String::from_utf8_lossy(&k).into_owned();
        if let Some(rest) = k.strip_prefix("own-") {
            let i: u64 = rest.get(..12).and_then(|s| s.parse().ok()).context("malformed key")?;
            if v != i.to_string().as_bytes() {
                return Ok(Err(format!("{k} holds another batch's value")));
            }
            *own.entry(i).or_default() += 1;
        } else {
            group.push(v);
        }
    }
    if let Some((i, n)) = own.iter().find(|(_, n)| **n != OWN) {
        return Ok(Err(format!("batch {i} has {n} of its {OWN} keys (half applied)")));
    }
    if let Some(i) = acked.iter().find(|i| !own.contains_key(i)) {
        return Ok(Err(format!("acknowledged batch {i} lost")));
    }
    if !own.is_empty() {
        if group.len() != GROUP || group.windows(2).any(|w| w[0] != w[1]) {
            return Ok(Err(format!("the group keys disagree: {} of {GROUP} present", group.len())));
        }
        let gi: Option<u64> = String::from_utf8_lossy(&group[0]).parse().ok();
        if !gi.is_some_and(|g| own.contains_key(&g)) {
            return Ok(Err(format!("the group keys hold batch {gi:?}, which is absent")));
        }
    }
    Ok(Ok(own.len()))
}

/// Runs sharded kill rounds for the configured time.
pub fn run(cfg: &RunCfg, rep: &mut Report) -> anyhow::Result<()> {
    let root = tempfile::Builder::new().prefix("strata-stress-kill-sharded").tempdir()?;
    let dir = root.path().join("db");
    let exe = std::env::current_exe().context("locating strata-stress")?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let deadline = cfg.deadline();
    let mut acked = BTreeSet::new();
    let mut round = 0u64;
    while Instant::now() < deadline && rep.violations() == 0 {
        round += 1;
        let spec = format!("sharded:{}:{}:{}:{}", cfg.shards, cfg.jobs.clamp(2, 8), round * 100_000_000, dir.display());
        let r = one_round(&exe, &spec, &dir, cfg.shards, round, &mut rng, &mut acked, rep)?;
        match r {
            Ok(()) => rep.add("kill_rounds", 1),
            Err(v) => rep.violation(cfg.seed, format!("round {round} ({} shards): {v}", cfg.shards)),
        }
    }
    rep.add("batches_acked", acked.len() as u64);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn one_round(
    exe: &Path,
    spec: &str,
    dir: &Path,
    shards: usize,
    round: u64,
    rng: &mut StdRng,
    acked: &mut BTreeSet<u64>,
    rep: &mut Report,
) -> anyhow::Result<Result<(), String>> {
    let mut child = Command::new(exe)
        .arg("--kill-child")
        .arg(spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .context("spawning the writer")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let wait = if round % 5 == 4 { rng.gen_range(0..40) } else { rng.gen_range(80..700) };
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(wait));
        let exited = child.try_wait().ok().flatten().is_some();
        let _ = child.kill();
        let _ = child.wait();
        exited
    });
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if let Some(i) = line.strip_prefix("ack ").and_then(|n| n.trim().parse().ok()) {
            acked.insert(i);
        }
    }
    if killer.join().unwrap_or(true) {
        return Ok(Err("the writer exited before it was killed".into()));
    }
    let db = match Sharded::open(dir, options(shards)) {
        Ok(db) => db,
        Err(e) => return Ok(Err(format!("reopen after SIGKILL failed: {e}"))),
    };
    rep.add("parts_redone", db.stats().redone_parts);
    match check(&db, acked)? {
        Ok(n) => rep.max("batches_found", n as u64),
        Err(v) => return Ok(Err(v)),
    }
    if let Err(e) = db.verify_checksums() {
        return Ok(Err(format!("check after recovery failed: {e}")));
    }
    if let Err(e) = db.close() {
        return Ok(Err(format!("close failed: {e}")));
    }
    Ok(Ok(()))
}
