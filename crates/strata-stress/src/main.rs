//! `strata-stress`: crash, fault and hostile-input testing of StrataKV.
//!
//! ```text
//! strata-stress --seconds S [--mode pm-crash|fs-fault|kill|model|limits|all] [--seed N] [--jobs N]
//! strata-stress --mode kill --target replication --seconds S [--seed N]
//! ```
//!
//! Each mode prints one JSON line of counts last (e.g.
//! `{"mode":"pm-crash","seed":1,"crash_points":..,"crash_states":..,"violations":0,..}`)
//! and the process exits non-zero if any mode found a violation; each
//! violation is printed to stderr with the seed that reproduces it.

use std::process::ExitCode;

use anyhow::bail;
use clap::Parser;
use strata_stress::report::Report;
use strata_stress::{fs_fault, kill, limits, model, pm_crash, RunCfg};

/// Crash, fault and hostile-input testing of StrataKV.
#[derive(Parser, Debug)]
#[command(name = "strata-stress", version)]
struct Args {
    /// Time budget per mode, in seconds (`all` gives each mode this much).
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// pm-crash, fs-fault, kill, model, limits, or all.
    #[arg(long, default_value = "all")]
    mode: String,
    /// Seed of the first episode (default: from the clock; printed in the JSON line).
    #[arg(long)]
    seed: Option<u64>,
    /// Checker threads (pm-crash) / writer threads (kill). Default: the number of CPUs.
    #[arg(long)]
    jobs: Option<usize>,
    /// Progress lines on stderr.
    #[arg(long)]
    verbose: bool,
    /// Run against the sharded front end with this many shards (0: the plain engine). kill:
    /// cross-shard batches all there or none after each SIGKILL; model, limits: the same checks
    /// through the front end; pm-crash: one simulated PM device per shard, crash images of every
    /// device and the file system (coordinator log included) at one instant, exact-state oracle;
    /// fs-fault: injected file-system faults (the coordinator log's too), then a crash and the
    /// per-key oracle with cross-shard batches all or nothing.
    #[arg(long, default_value_t = 0)]
    shards: usize,
    /// What the kill mode kills: `processes` (engine writer processes and a single strata-server)
    /// or `replication` (a strata-server primary with one or two replicas: SIGKILL of the primary
    /// and a Sentinel-style failover, or of a replica and its resync; writes acknowledged by
    /// `WAIT 1` must survive, replicas must end equal to the primary).
    #[arg(long, default_value = "processes")]
    target: String,
    /// Internal: run as the child writer process of the kill mode.
    #[arg(long, hide = true)]
    kill_child: Option<String>,
    /// Internal: write the fuzz seed corpora into this directory and exit.
    #[arg(long, hide = true)]
    gen_corpus: Option<std::path::PathBuf>,
}

const MODES: [&str; 5] = ["pm-crash", "fs-fault", "kill", "model", "limits"];

fn run_mode(mode: &str, target: &str, cfg: &RunCfg) -> anyhow::Result<Report> {
    Ok(match mode {
        "pm-crash" => pm_crash::run(cfg),
        "fs-fault" => fs_fault::run(cfg),
        "kill" => match target {
            "processes" => kill::run(cfg)?,
            "replication" if cfg.shards == 0 => kill::replication::run(cfg)?,
            "replication" => bail!("--target replication runs single-engine servers (no --shards)"),
            other => bail!("unknown kill target {other:?} (processes, replication)"),
        },
        "model" => model::run(cfg),
        "limits" => limits::run(cfg)?,
        other => bail!("unknown mode {other:?} (pm-crash, fs-fault, kill, model, limits, all)"),
    })
}

fn run() -> anyhow::Result<bool> {
    let args = Args::parse();
    if let Some(spec) = &args.kill_child {
        match spec.strip_prefix("sharded:") {
            Some(rest) => kill::sharded::child(rest)?,
            None => kill::child::main(spec)?,
        }
        return Ok(true);
    }
    if let Some(dir) = &args.gen_corpus {
        let n = strata_stress::corpus::generate(dir)?;
        eprintln!("wrote {n} seed files under {}", dir.display());
        return Ok(true);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000_007)
            .unwrap_or(1)
    });
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    let cfg = RunCfg { seconds: args.seconds, seed, jobs, verbose: args.verbose, shards: args.shards };
    let modes: Vec<&str> = if args.mode == "all" { MODES.to_vec() } else { vec![args.mode.as_str()] };
    let mut ok = true;
    if args.target != "processes" && args.mode != "kill" {
        bail!("--target is for --mode kill");
    }
    for m in modes {
        let rep = run_mode(m, &args.target, &cfg)?;
        println!("{}", rep.json());
        ok &= rep.violations() == 0;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("strata-stress: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
