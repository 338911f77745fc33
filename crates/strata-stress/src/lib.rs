//! strata-stress: crash, fault and hostile-input testing of StrataKV.
//!
//! Modes (each ends with one JSON line of counts; see the binary's help):
//!
//! * [`pm_crash`]: crash images of the simulated PM (and of the SSD side,
//!   kept by [`stratakv::fs::MemFs`]) at random points of a random
//!   workload; recovery on each; an exact oracle.
//! * [`fs_fault`]: injected EIO/ENOSPC, torn writes and power cuts on the
//!   SSD side ([`stratakv::fs::FaultFs`]); no false acknowledgement, poison
//!   after a failed fsync, nothing lost after recovery.
//! * [`kill`]: SIGKILL of writer processes (the engine, and `strata-server
//!   --durability sync` when built) with an expected-state file; with
//!   `--target replication`, of the primary or a replica of a replicated
//!   strata-server group, with a Sentinel-style failover
//!   ([`kill::replication`]).
//! * [`model`]: long random runs against a `BTreeMap`.
//! * [`limits`]: keys/values at and over the limits, full PM, full disk,
//!   many connections.
//!
//! With `--shards N` (see [`RunCfg::shards`]) the modes run against the
//! sharded front end (`stratakv::Sharded`) instead.
//!
//! [`fuzz_targets`] holds the bodies of the cargo-fuzz targets in `fuzz/`,
//! so the seed corpora can be replayed by `cargo test` on stable.

pub mod corpus;
pub mod fs_fault;
pub mod fuzz_targets;
pub mod kill;
pub mod limits;
pub mod model;
pub mod oracle;
pub mod pm_crash;
pub mod report;
pub mod resp_client;
pub mod workload;

use std::time::{Duration, Instant};

/// What every mode gets from the command line.
#[derive(Clone, Debug)]
pub struct RunCfg {
    /// Time budget of the mode.
    pub seconds: f64,
    /// Seed of the first episode; episode `i` uses `seed + i`.
    pub seed: u64,
    /// Checker threads (pm-crash) or writer threads (kill).
    pub jobs: usize,
    /// Print progress lines to stderr.
    pub verbose: bool,
    /// Run the modes against the sharded front end with this many shards
    /// (0: the plain engine).
    pub shards: usize,
}

impl RunCfg {
    /// When the mode must stop starting new work.
    pub fn deadline(&self) -> Instant {
        Instant::now() + Duration::from_secs_f64(self.seconds.max(0.0))
    }
}

/// Reads a whole database with a checked iterator.
pub fn read_all(db: &stratakv::Db) -> Result<oracle::Kvs, stratakv::Error> {
    let mut it = db.iter(..)?;
    let mut out = Vec::new();
    while let Some(kv) = it.try_next()? {
        out.push(kv);
    }
    Ok(out)
}
