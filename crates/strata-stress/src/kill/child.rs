//! The child writer process of the kill mode (`strata-stress --kill-child
//! SPEC`): opens the database, prints `open`, then writes from several
//! threads until it is killed, marking each key pending in the
//! expected-state file before the write and committed after it returns.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stratakv::{Db, L0Kind, Options, WriteBatch, WriteOptions};

use super::expected::{value_of, ExpectedFile, DELETE};

/// What the parent tells the child (`key=value;...`).
#[derive(Clone, Debug)]
pub struct Spec {
    /// Database directory.
    pub dir: PathBuf,
    /// Expected-state file.
    pub state: PathBuf,
    /// PM directory (None: inside the data directory).
    pub pm_dir: Option<PathBuf>,
    /// L0 kind of a new database.
    pub l0: L0Kind,
    /// Writer threads.
    pub threads: u64,
    /// Round number (part of every write id).
    pub round: u64,
    /// Seed of the writers.
    pub seed: u64,
}

impl Spec {
    /// `dir=..;state=..;pm=..;l0=..;threads=..;round=..;seed=..`
    pub fn encode(&self) -> String {
        format!(
            "dir={};state={};pm={};l0={};threads={};round={};seed={}",
            self.dir.display(),
            self.state.display(),
            self.pm_dir.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            self.l0.name(),
            self.threads,
            self.round,
            self.seed
        )
    }

    /// Parses [`Spec::encode`]'s output.
    pub fn parse(s: &str) -> anyhow::Result<Spec> {
        let mut spec = Spec {
            dir: PathBuf::new(),
            state: PathBuf::new(),
            pm_dir: None,
            l0: L0Kind::Matrix,
            threads: 1,
            round: 0,
            seed: 0,
        };
        for part in s.split(';') {
            let (k, v) = part.split_once('=').with_context(|| format!("bad spec part {part:?}"))?;
            match k {
                "dir" => spec.dir = v.into(),
                "state" => spec.state = v.into(),
                "pm" => spec.pm_dir = (!v.is_empty()).then(|| v.into()),
                "l0" => spec.l0 = L0Kind::parse(v).context("bad l0")?,
                "threads" => spec.threads = v.parse()?,
                "round" => spec.round = v.parse()?,
                "seed" => spec.seed = v.parse()?,
                other => bail!("unknown spec key {other}"),
            }
        }
        Ok(spec)
    }
}

/// Engine options of the kill mode (the parent reopens with the same).
/// Tables get the learned index: the model mode and the pm-crash and
/// fs-fault modes draw both kinds.
pub fn engine_options(l0: L0Kind, pm_dir: Option<PathBuf>) -> Options {
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.table_index = stratakv::IndexKind::Learned;
    o.write_buffer_size = 32 << 10;
    o.pm_dir = pm_dir;
    o
}

/// The partition that holds every kill-mode key whose index is 2 mod 3,
/// so that batches span two partitions.
pub const KILL_PARTITION: &str = "kill-p";

/// Whether key index `k` lives in [`KILL_PARTITION`].
pub fn in_partition(k: u64) -> bool {
    k % 3 == 2
}

fn writer(db: Db, exp: Arc<ExpectedFile>, spec: Spec, t: u64, acked: Arc<AtomicU64>) -> anyhow::Result<()> {
    let part = db.partition_or_create(KILL_PARTITION).context("opening the kill partition")?;
    let mut rng = StdRng::seed_from_u64(spec.seed ^ (spec.round << 20) ^ t);
    let per = exp.keys() / spec.threads.max(1);
    let mut counter = 0u64;
    loop {
        counter += 1;
        let id = (spec.round << 40) | (t << 32) | (counter & 0xffff_ffff);
        let n = if rng.gen_bool(0.25) { rng.gen_range(2..7) } else { 1 };
        let mut keys: Vec<u64> = Vec::new();
        while keys.len() < n {
            let k = t + spec.threads * rng.gen_range(0..per.max(1));
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let delete = rng.gen_bool(0.15);
        let mut b = WriteBatch::new();
        for (i, k) in keys.iter().enumerate() {
            let key = super::key_of(*k);
            // In a batch only the first key may be a delete.
            let p = in_partition(*k).then_some(&part);
            if delete && i == 0 {
                exp.set_pending(*k, id | DELETE)?;
                match p {
                    Some(p) => b.delete_in(p, key),
                    None => b.delete(key),
                };
            } else {
                exp.set_pending(*k, id)?;
                match p {
                    Some(p) => b.put_in(p, key, value_of(*k, id)),
                    None => b.put(key, value_of(*k, id)),
                };
            }
        }
        db.write_opt(&b, &WriteOptions { sync: rng.gen_bool(0.5) }).context("write failed")?;
        for (i, k) in keys.iter().enumerate() {
            exp.commit(*k, if delete && i == 0 { id | DELETE } else { id })?;
        }
        let a = acked.fetch_add(1, Ordering::Relaxed) + 1;
        if a.is_multiple_of(64) {
            println!("acked {a}");
        }
    }
}

/// Runs the child until killed (returns only on an error).
pub fn main(spec: &str) -> anyhow::Result<()> {
    let spec = Spec::parse(spec)?;
    let exp = Arc::new(ExpectedFile::open(&spec.state)?);
    let db = Db::open(&spec.dir, engine_options(spec.l0, spec.pm_dir.clone())).context("open")?;
    println!("open");
    let _ = std::io::stdout().flush();
    let acked = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    {
        let (db, state) = (db.clone(), spec.state.clone());
        hs.push(std::thread::spawn(move || super::scratch::run(db, &state)));
    }
    for t in 0..spec.threads.max(1) {
        let (db, exp, spec, acked) = (db.clone(), exp.clone(), spec.clone(), acked.clone());
        hs.push(std::thread::spawn(move || writer(db, exp, spec, t, acked)));
    }
    for h in hs {
        match h.join() {
            Ok(r) => r?,
            Err(_) => bail!("a writer thread panicked"),
        }
    }
    Ok(())
}
