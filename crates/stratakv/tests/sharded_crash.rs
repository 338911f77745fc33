//! Crash test of the sharded front end: a child process (this test binary
//! run again) commits cross-shard batches from several threads and reports
//! each acknowledged one; the parent kills it with SIGKILL at random
//! moments, reopens, and checks that every batch is in every shard it
//! spans or in none, that acknowledged batches are all there, and that the
//! keys all batches overwrite agree (one batch's value in every shard).
//!
//! `STRATA_CRASH_ROUNDS` sets the number of rounds (default 16).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stratakv::{Options, Sharded, ShardedOptions, WriteBatch};

/// Keys every batch overwrites (over every shard).
const GROUP: usize = 8;
/// Keys only batch `i` writes.
const OWN: usize = 4;

fn opts(shards: usize) -> ShardedOptions {
    let mut o = Options::for_tests();
    o.write_buffer_size = 32 << 10;
    let mut s = ShardedOptions::new(shards, o);
    s.coord_log_limit = 64 << 10;
    s
}

fn batch(i: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    let v = i.to_string();
    for j in 0..GROUP {
        b.put(format!("g{j:02}"), &v);
    }
    for j in 0..OWN {
        b.put(format!("own{i:010}-{j}"), &v);
    }
    b
}

/// The child: commit batches from four threads until killed.
#[test]
fn sharded_crash_child() {
    let Ok(dir) = std::env::var("STRATA_SHARD_CRASH_DIR") else { return };
    let from: u64 = std::env::var("STRATA_SHARD_CRASH_FROM").unwrap().parse().unwrap();
    let shards: usize = std::env::var("STRATA_SHARD_CRASH_N").unwrap().parse().unwrap();
    let db = Arc::new(Sharded::open(&dir, opts(shards)).unwrap());
    let next = Arc::new(AtomicU64::new(from));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (db, next) = (db.clone(), next.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                db.write_async(batch(i), i % 8 == 0).wait().unwrap();
                let mut out = std::io::stdout().lock();
                writeln!(out, "ack {i}").unwrap();
                out.flush().unwrap();
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// Checks the recovered state; returns the number of batches found.
fn check(shards: usize, round: u64, db: &Sharded, acked: &BTreeSet<u64>) -> usize {
    let all: BTreeMap<Vec<u8>, Vec<u8>> = db.iter(..).unwrap().collect();
    let mut own: BTreeMap<u64, usize> = BTreeMap::new();
    let mut group = Vec::new();
    for (k, v) in &all {
        let k = String::from_utf8(k.clone()).unwrap();
        if let Some(rest) = k.strip_prefix("own") {
            let i: u64 = rest[..10].parse().unwrap();
            assert_eq!(v, i.to_string().as_bytes(), "shards {shards} round {round}: {k}");
            *own.entry(i).or_default() += 1;
        } else {
            group.push(v.clone());
        }
    }
    for (i, n) in &own {
        assert_eq!(*n, OWN, "shards {shards} round {round}: batch {i} has {n} of its {OWN} keys");
    }
    for i in acked {
        assert!(own.contains_key(i), "shards {shards} round {round}: acknowledged batch {i} lost");
    }
    if !own.is_empty() {
        assert_eq!(group.len(), GROUP, "shards {shards} round {round}: group keys missing");
        assert!(group.windows(2).all(|w| w[0] == w[1]), "shards {shards} round {round}: group split: {group:?}");
        let gi: u64 = String::from_utf8(group[0].clone()).unwrap().parse().unwrap();
        assert!(own.contains_key(&gi), "shards {shards} round {round}: group holds batch {gi}, which is absent");
    }
    own.len()
}

fn run_rounds(shards: usize) {
    let rounds: u64 = std::env::var("STRATA_CRASH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(16);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(11 + shards as u64);
    let mut acked = BTreeSet::new();
    let (mut redone, mut found) = (0u64, 0usize);
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["--exact", "sharded_crash_child", "--nocapture", "--test-threads=1"])
            .env("STRATA_SHARD_CRASH_DIR", dir.path())
            .env("STRATA_SHARD_CRASH_FROM", (round * 10_000_000).to_string())
            .env("STRATA_SHARD_CRASH_N", shards.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let kill_after =
            Duration::from_millis(if round % 5 == 4 { rng.gen_range(0..30) } else { rng.gen_range(50..400) });
        let killer = std::thread::spawn(move || {
            std::thread::sleep(kill_after);
            let _ = child.kill();
            let _ = child.wait();
        });
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("ack ").and_then(|n| n.trim().parse().ok()) {
                acked.insert(n);
            }
        }
        killer.join().unwrap();
        let db = match Sharded::open(dir.path(), opts(shards)) {
            Ok(db) => db,
            Err(e) => panic!("shards {shards} round {round}: reopen after SIGKILL failed: {e}"),
        };
        redone += db.stats().redone_parts;
        found = check(shards, round, &db, &acked);
        db.verify_checksums().unwrap();
        // Half the rounds close cleanly before the next child.
        if round % 2 == 0 {
            db.close().unwrap();
        }
    }
    println!(
        "sharded crash[{shards}]: rounds={rounds} acknowledged={} batches_found={found} parts_redone={redone} violations=0",
        acked.len()
    );
    assert!(!acked.is_empty(), "no batch was ever acknowledged");
    // Kills land between a record and its parts: the redo must have run.
    assert!(redone > 0, "no kill ever left a cross-shard batch partly applied");
}

#[test]
fn sigkill_keeps_cross_shard_batches_whole_2() {
    if std::env::var("STRATA_SHARD_CRASH_DIR").is_ok() {
        return;
    }
    run_rounds(2);
}

#[test]
fn sigkill_keeps_cross_shard_batches_whole_4() {
    if std::env::var("STRATA_SHARD_CRASH_DIR").is_ok() {
        return;
    }
    run_rounds(4);
}
