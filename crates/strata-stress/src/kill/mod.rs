//! Mode `kill`: writer processes killed with SIGKILL under concurrent load,
//! with an expected-state file outside the database directory
//! (`db_crashtest.py`'s blackbox mode).
//!
//! Engine rounds: a child process (`strata-stress --kill-child`) opens the
//! database and writes from several threads (puts, deletes, batches; sync
//! or not), marking each key pending in the expected-state file before the
//! write and committed after it returns. The parent kills it at a random
//! moment (one round in five within the first 40 ms, usually during
//! recovery), reopens the database itself, checks every key holds its
//! committed or pending value and no batch is half applied, passes
//! `check`, and resolves the pending writes. Two databases alternate: the
//! matrix L0 with the PM region in the data directory, and the SSTable L0
//! with the region on /dev/shm.
//!
//! Server rounds (when a `strata-server` binary is found: `STRATA_SERVER_BIN`,
//! or next to this binary): the same against `strata-server --durability
//! sync`, with the clients (and their expected state) in this process, and
//! a FLUSHDB of database 3 (a partition drop) among their writes; every
//! other server round is a FLUSHALL round instead (`flushall`: databases 0,
//! 3 and 5 of a server of its own, all flushed or none after the kill).
//!
//! With `--shards N`, the rounds run against the sharded front end instead
//! (`sharded`): cross-shard batches must be all there or none.
//!
//! With `--target replication` the rounds kill members of a replicated
//! group of strata-servers instead (`replication`): the primary (followed
//! by a Sentinel-style failover; writes acknowledged by `WAIT 1` must
//! survive it) or a replica (which must resync); at the end every replica
//! must hold exactly what the primary holds.
//!
//! SIGKILL cannot catch a missing flush or fsync (the kernel keeps what was
//! stored): modes pm-crash and fs-fault do that.

pub mod child;
pub mod expected;
pub mod flushall;
pub mod flushdb;
pub mod replication;
pub mod scratch;
pub mod server;
pub mod sharded;
pub mod verify;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stratakv::{Db, L0Kind};

use crate::report::{Report, Value};
use crate::RunCfg;
use child::{engine_options, Spec};
use expected::ExpectedFile;

/// Keys per database.
pub const KEYS: u64 = 2000;

/// The engine key of index `k`.
pub fn key_of(k: u64) -> Vec<u8> {
    format!("kill-{k:05}").into_bytes()
}

struct Target {
    name: &'static str,
    dir: PathBuf,
    pm_dir: Option<PathBuf>,
    l0: L0Kind,
    state: PathBuf,
}

/// Runs the mode for the configured time.
pub fn run(cfg: &RunCfg) -> anyhow::Result<Report> {
    let mut rep = Report::new("kill", cfg.seed);
    if cfg.shards > 0 {
        sharded::run(cfg, &mut rep)?;
        return Ok(rep);
    }
    let root = tempfile::Builder::new().prefix("strata-stress-kill").tempdir()?;
    let shm = Path::new("/dev/shm");
    let shm_dir =
        if shm.is_dir() { tempfile::Builder::new().prefix("strata-stress-kill").tempdir_in(shm).ok() } else { None };
    let mut targets = vec![Target {
        name: "engine_matrix_pmfile",
        dir: root.path().join("matrix"),
        pm_dir: None,
        l0: L0Kind::Matrix,
        state: root.path().join("matrix.state"),
    }];
    targets.push(Target {
        name: if shm_dir.is_some() { "engine_sstable_pmshm" } else { "engine_sstable_pmfile" },
        dir: root.path().join("sstable"),
        pm_dir: shm_dir.as_ref().map(|d| d.path().to_path_buf()),
        l0: L0Kind::Sstable,
        state: root.path().join("sstable.state"),
    });
    targets.push(Target {
        name: "engine_single_level_pmfile",
        dir: root.path().join("single"),
        pm_dir: None,
        l0: L0Kind::SingleLevel,
        state: root.path().join("single.state"),
    });
    targets.push(Target {
        name: if shm_dir.is_some() { "engine_pm_only_pmshm" } else { "engine_pm_only_pmfile" },
        dir: root.path().join("pmonly"),
        pm_dir: shm_dir.as_ref().map(|d| d.path().join("pmonly")),
        l0: L0Kind::PmOnly,
        state: root.path().join("pmonly.state"),
    });
    for t in &targets {
        ExpectedFile::create(&t.state, KEYS)?;
    }
    let server_bin = server::find_binary();
    let mut server = match &server_bin {
        Some(bin) => Some((
            server::ServerTarget::new(bin.clone(), root.path().join("server"), KEYS)?,
            flushall::FlushAllTarget::new(bin.clone(), root.path().join("server-flushall"))?,
        )),
        None => {
            rep.set(
                "server",
                Value::Text("skipped: no strata-server binary (build it, or set STRATA_SERVER_BIN)".into()),
            );
            None
        }
    };
    let exe = std::env::current_exe().context("locating strata-stress")?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let deadline = cfg.deadline();
    let mut round = 0u64;
    while Instant::now() < deadline && rep.violations() == 0 {
        round += 1;
        let use_server = server.is_some() && round.is_multiple_of(3);
        let r = if use_server {
            match server.as_mut() {
                // Every other server round is a FLUSHALL round.
                Some((_, f)) if round.is_multiple_of(6) => f.round(&mut rng, round, &mut rep),
                Some((s, _)) => s.round(&mut rng, round, cfg.jobs.max(2), &mut rep),
                None => Ok(Ok(())),
            }
        } else {
            let t = &targets[(round as usize) % targets.len()];
            engine_round(&exe, t, round, cfg, &mut rng, &mut rep)
        };
        match r? {
            Ok(()) => rep.add("kill_rounds", 1),
            Err(v) => rep.violation(cfg.seed, format!("round {round}: {v}")),
        }
        if cfg.verbose && round.is_multiple_of(10) {
            eprintln!("kill: {}", rep.json());
        }
    }
    Ok(rep)
}

fn engine_round(
    exe: &Path,
    t: &Target,
    round: u64,
    cfg: &RunCfg,
    rng: &mut StdRng,
    rep: &mut Report,
) -> anyhow::Result<Result<(), String>> {
    let spec = Spec {
        dir: t.dir.clone(),
        state: t.state.clone(),
        pm_dir: t.pm_dir.clone(),
        l0: t.l0,
        threads: cfg.jobs.clamp(2, 8) as u64,
        round,
        seed: cfg.seed,
    };
    let mut child = Command::new(exe)
        .arg("--kill-child")
        .arg(spec.encode())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .context("spawning the writer")?;
    let opened = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let stdout = child.stdout.take().context("child stdout")?;
    let (o2, a2) = (opened.clone(), acked.clone());
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line == "open" {
                o2.store(true, Ordering::SeqCst);
            } else if let Some(n) = line.strip_prefix("acked ") {
                a2.store(n.trim().parse().unwrap_or(0), Ordering::SeqCst);
            }
        }
    });
    let stderr = child.stderr.take().context("child stderr")?;
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
        s
    });
    let early = round % 5 == 4;
    let wait =
        if early { Duration::from_millis(rng.gen_range(0..40)) } else { Duration::from_millis(rng.gen_range(80..700)) };
    std::thread::sleep(wait);
    let exited_early = child.try_wait()?.is_some();
    // SIGKILL: no chance to flush or clean up.
    let _ = child.kill();
    let status = child.wait()?;
    let _ = reader.join();
    let errors = err_reader.join().unwrap_or_default();
    if exited_early {
        return Ok(Err(format!("the writer exited before it was killed ({status}): {}", errors.trim())));
    }
    rep.add(&format!("rounds_{}", t.name), 1);
    if !opened.load(Ordering::SeqCst) {
        rep.add("kills_during_recovery", 1);
    }
    rep.add("writes_acked_reported", acked.load(Ordering::SeqCst));
    // Recover in this process and check against the expected state.
    let db = match Db::open(&t.dir, engine_options(t.l0, t.pm_dir.clone())) {
        Ok(db) => db,
        Err(e) => return Ok(Err(format!("{}: reopen after SIGKILL failed: {e}", t.name))),
    };
    let got: BTreeMap<u64, Vec<u8>> = match verify::read_engine(&db) {
        Ok(g) => g,
        Err(e) => return Ok(Err(format!("{}: {e}", t.name))),
    };
    let exp = ExpectedFile::open(&t.state)?;
    if let Err(v) = verify::check_and_resolve(&exp, &got, rep)? {
        return Ok(Err(format!("{}: {v}", t.name)));
    }
    if let Err(v) = scratch::check_and_resolve(&db, &t.state)? {
        return Ok(Err(format!("{}: {v}", t.name)));
    }
    rep.add("scratch_partitions_checked", 1);
    if let Err(e) = db.verify_checksums() {
        return Ok(Err(format!("{}: check after recovery failed: {e}", t.name)));
    }
    if let Err(e) = db.close() {
        return Ok(Err(format!("{}: close failed: {e}", t.name)));
    }
    Ok(Ok(()))
}
