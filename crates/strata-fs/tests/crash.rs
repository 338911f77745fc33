//! Crash test: three server processes, mixed operations from two clients
//! (including cross-server and directory renames), SIGKILL of random
//! servers at random moments, restart, recovery, then the tree checker and
//! a model of every operation the client saw succeed.
//!
//! `STRATA_FS_CRASH_ROUNDS=200 cargo test -p strata-fs --test crash -- --nocapture`
//! runs the long form; the default is 20 rounds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_fs::check::check;
use strata_fs::rpc::Peers;
use strata_fs::types::Kind;
use strata_fs::{Client, ClientOptions, FsError};

#[derive(Debug, Clone)]
enum Op {
    Mkdir(String),
    Create(String),
    Unlink(String),
    Rmdir(String),
    Rename(String, String),
    Chmod(String, u32),
}

/// The tree as the client knows it, and the paths whose state it does not.
#[derive(Debug, Default)]
struct Model {
    root: String,
    tree: BTreeMap<String, Kind>,
    unsure: Vec<String>,
}

fn under(p: &str, prefix: &str) -> bool {
    p == prefix || (p.starts_with(prefix) && p.as_bytes().get(prefix.len()) == Some(&b'/'))
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

impl Model {
    fn dirs(&self) -> Vec<String> {
        self.tree.iter().filter(|(_, k)| **k == Kind::Dir).map(|(p, _)| p.clone()).collect()
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Mkdir(p) => {
                self.tree.insert(p.clone(), Kind::Dir);
            }
            Op::Create(p) => {
                self.tree.insert(p.clone(), Kind::File);
            }
            Op::Unlink(p) | Op::Rmdir(p) => {
                self.tree.remove(p);
            }
            Op::Rename(s, d) => {
                let moved: Vec<(String, Kind)> =
                    self.tree.iter().filter(|(p, _)| under(p, s)).map(|(p, k)| (p.clone(), *k)).collect();
                for (p, _) in &moved {
                    self.tree.remove(p);
                }
                self.tree.remove(d);
                for (p, k) in moved {
                    self.tree.insert(format!("{d}{}", &p[s.len()..]), k);
                }
                let extra: Vec<String> =
                    self.unsure.iter().filter(|u| under(u, s)).map(|u| format!("{d}{}", &u[s.len()..])).collect();
                self.unsure.extend(extra);
            }
            Op::Chmod(..) => {}
        }
    }

    fn mark_unsure(&mut self, op: &Op) {
        match op {
            Op::Mkdir(p) | Op::Create(p) | Op::Unlink(p) | Op::Rmdir(p) | Op::Chmod(p, _) => {
                self.unsure.push(p.clone())
            }
            Op::Rename(s, d) => {
                self.unsure.push(s.clone());
                self.unsure.push(d.clone());
            }
        }
    }

    fn sure(&self, p: &str) -> bool {
        !self.unsure.iter().any(|u| under(p, u))
    }
}

fn pick_op(rng: &mut StdRng, m: &Model) -> Op {
    let dirs = m.dirs();
    let entries: Vec<(&String, &Kind)> = m.tree.iter().filter(|(p, _)| **p != m.root).collect();
    let files: Vec<&String> = entries.iter().filter(|(_, k)| **k == Kind::File).map(|(p, _)| *p).collect();
    let join = |d: &str, n: String| if d == "/" { format!("/{n}") } else { format!("{d}/{n}") };
    let dir = dirs[rng.gen_range(0..dirs.len())].clone();
    match rng.gen_range(0..100) {
        0..=24 => Op::Create(join(&dir, format!("f{}", rng.gen_range(0..6)))),
        25..=36 if !files.is_empty() => Op::Unlink(files[rng.gen_range(0..files.len())].clone()),
        37..=54 if dir.matches('/').count() < 3 => Op::Mkdir(join(&dir, format!("d{}", rng.gen_range(0..4)))),
        55..=64 if dirs.len() > 1 => Op::Rmdir(dirs[rng.gen_range(1..dirs.len())].clone()),
        65..=71 if dirs.len() > 2 => {
            // A directory onto an empty one (POSIX replaces it), or onto a
            // non-empty one (ENOTEMPTY); never onto its own subtree.
            let src = dirs[rng.gen_range(1..dirs.len())].clone();
            let empty = |d: &String| !m.tree.keys().any(|p| p != d && under(p, d));
            let targets: Vec<&String> = dirs
                .iter()
                .skip(1)
                .filter(|d| !under(d, &src) && !under(&src, d) && (empty(d) || rng.gen_bool(0.2)))
                .collect();
            match targets.get(rng.gen_range(0..targets.len().max(1))) {
                Some(dst) => Op::Rename(src, (*dst).clone()),
                None => Op::Create(join(&dir, format!("f{}", rng.gen_range(0..6)))),
            }
        }
        65..=94 if !entries.is_empty() => {
            let (src, _) = entries[rng.gen_range(0..entries.len())];
            let prefix = if rng.gen_bool(0.5) { "d" } else { "f" };
            Op::Rename(src.clone(), join(&dir, format!("{prefix}{}", rng.gen_range(0..4))))
        }
        95..=99 if dirs.len() > 1 => Op::Chmod(dirs[rng.gen_range(1..dirs.len())].clone(), 0o755),
        _ => Op::Create(join(&dir, format!("f{}", rng.gen_range(0..6)))),
    }
}

fn run(fs: &Client, op: &Op) -> Result<(), FsError> {
    match op {
        Op::Mkdir(p) => fs.mkdir(p, 0o755).map(|_| ()),
        Op::Create(p) => fs.create(p, 0o644).map(|_| ()),
        Op::Unlink(p) => fs.unlink(p),
        Op::Rmdir(p) => fs.rmdir(p),
        Op::Rename(s, d) => fs.rename(s, d),
        Op::Chmod(p, m) => fs.chmod(p, *m).map(|_| ()),
    }
}

fn wait_recovered(fs: &Client) {
    let t0 = Instant::now();
    fs.wait_ready(Duration::from_secs(30)).unwrap();
    loop {
        match fs.pending_intents() {
            Ok(0) => return,
            _ if t0.elapsed() > Duration::from_secs(60) => panic!("intents still pending after 60 s"),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Concurrent clients, each in its own subtree `/w<i>` (so each has an exact model).
const WORKERS: usize = 2;

#[test]
fn sigkill_rounds_keep_the_tree_sound() {
    let rounds: usize = std::env::var("STRATA_FS_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let seed: u64 = std::env::var("STRATA_FS_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(32);
    let (_d, mut c) = common::slow_cluster(3, 500);
    let addrs = c.config.addrs();
    let peers = || Peers::new(addrs.clone(), Duration::from_secs(10));
    let opts = ClientOptions { timeout: Duration::from_secs(5), ..Default::default() };
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut violations, mut ops_ok, mut ops_unsure, mut kills) = (0usize, 0usize, 0usize, 0usize);
    let mut dirs_replaced = 0usize;
    let fs = c.client(opts.clone());
    for w in 0..WORKERS {
        fs.mkdir(&format!("/w{w}"), 0o777).unwrap();
    }
    drop(fs);
    for round in 0..rounds {
        let rep = check(&peers()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let root = format!("/w{w}");
                let tree = rep.tree.iter().filter(|(p, _)| under(p, &root)).map(|(p, k)| (p.clone(), *k)).collect();
                let model = Model { root, tree, unsure: Vec::new() };
                let stop = stop.clone();
                let fs = c.client(opts.clone());
                let mut rng = StdRng::seed_from_u64(seed ^ (round as u64 * 7919) ^ (w as u64) << 40);
                std::thread::spawn(move || {
                    let mut m = model;
                    let (mut ok, mut unsure, mut replaced) = (0, 0, 0);
                    while !stop.load(Ordering::Relaxed) {
                        let op = pick_op(&mut rng, &m);
                        match run(&fs, &op) {
                            Ok(()) => {
                                ok += 1;
                                if let Op::Rename(s, d) = &op {
                                    let is_dir = |p: &String| m.tree.get(p) == Some(&Kind::Dir);
                                    replaced += usize::from(is_dir(s) && is_dir(d));
                                }
                                m.apply(&op);
                            }
                            Err(FsError::Transport(_)) | Err(FsError::Storage(_)) => {
                                unsure += 1;
                                m.mark_unsure(&op);
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            Err(_) => {}
                        }
                    }
                    (m, ok, unsure, replaced)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(2..40)));
        let victims: Vec<usize> = match rng.gen_range(0..10) {
            0 => vec![0, 1, 2],
            1..=2 => vec![0, rng.gen_range(1..3)],
            _ => vec![rng.gen_range(0..3)],
        };
        for &v in &victims {
            c.kill(v);
            kills += 1;
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..20)));
        for &v in &victims {
            c.restart(v).unwrap();
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(10..40)));
        stop.store(true, Ordering::Relaxed);
        let models: Vec<Model> = workers
            .into_iter()
            .map(|h| {
                let (m, ok, unsure, replaced) = h.join().unwrap();
                ops_ok += ok;
                dirs_replaced += replaced;
                ops_unsure += unsure;
                m
            })
            .collect();
        let fs = c.client(opts.clone());
        wait_recovered(&fs);
        let rep = check(&peers()).unwrap();
        let mut bad = rep.violations.clone();
        for m in &models {
            for (p, k) in &m.tree {
                if m.sure(p) && rep.tree.get(p) != Some(k) {
                    bad.push(format!("lost: {p} ({k:?}) succeeded but is {:?}", rep.tree.get(p)));
                }
            }
            for (p, k) in rep.tree.iter().filter(|(p, _)| under(p, &m.root)) {
                if m.sure(p) && !m.tree.contains_key(p) && m.sure(parent(p)) {
                    bad.push(format!("unexpected: {p} ({k:?}) exists but no successful op made it"));
                }
            }
        }
        if !bad.is_empty() {
            eprintln!("round {round} (killed {victims:?}): {bad:#?}");
        }
        violations += bad.len();
    }
    let log = std::fs::read_to_string(c.log_path(0)).unwrap_or_default();
    let rolled: usize = log
        .lines()
        .filter_map(|l| l.strip_prefix("strata-fs-server: rolled "))
        .filter_map(|l| l.split_whitespace().next()?.parse::<usize>().ok())
        .sum();
    eprintln!(
        "crash test: {rounds} rounds, {kills} SIGKILLs, {ops_ok} ops succeeded, {ops_unsure} with unknown outcome, \
         {dirs_replaced} directories replaced by a rename, {rolled} intents rolled forward by recovery, \
         {violations} violations"
    );
    assert_eq!(violations, 0);
}
