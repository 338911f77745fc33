//! Crash test: a child process writes with `sync` and reports each
//! acknowledged operation; the parent kills it with SIGKILL at random
//! moments, reopens, and checks that every acknowledged write is present,
//! that the one in-flight operation is applied whole or not at all, and
//! that nothing never written appears. Many rounds on one database.
//!
//! `STRATA_CRASH_ROUNDS` sets the number of rounds (default 25).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stratakv::{Db, L0Kind, Options, WriteBatch, WriteOptions};

const SEED: u64 = 0x5eed;
const KEYS: u64 = 400;

/// One deterministic operation: a list of (key, Some(value) | None).
fn op(i: u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut rng = StdRng::seed_from_u64(SEED ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let n = if rng.gen_bool(0.2) { rng.gen_range(2..8) } else { 1 };
    (0..n)
        .map(|j| {
            let k = format!("key{:04}", rng.gen_range(0..KEYS)).into_bytes();
            let v = if rng.gen_bool(0.15) {
                None
            } else {
                let pad = rng.gen_range(0..300);
                Some(format!("op{i}.{j}.{}", "v".repeat(pad)).into_bytes())
            };
            (k, v)
        })
        .collect()
}

fn opts(l0: L0Kind, max_runs: usize) -> Options {
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.write_buffer_size = 32 << 10;
    o.max_runs = max_runs;
    o
}

/// The matrix profile's sorted runs change from round to round: none
/// (columns merge into L1), a few, and back, so crashes land in run
/// merges and in the switch between the two.
fn max_runs_of_round(round: u64) -> usize {
    [1, 2, 4][(round % 3) as usize]
}

fn l0_from_env() -> L0Kind {
    match std::env::var("STRATA_CRASH_L0").as_deref() {
        Ok("matrix") => L0Kind::Matrix,
        Ok("single-level") => L0Kind::SingleLevel,
        Ok("pm-only") => L0Kind::PmOnly,
        _ => L0Kind::Sstable,
    }
}

/// The child: open, then apply operations from STRATA_CRASH_FROM on,
/// printing "ack <i>" after each one returns.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("STRATA_CRASH_DIR") else { return };
    let from: u64 = std::env::var("STRATA_CRASH_FROM").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let runs = std::env::var("STRATA_CRASH_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(4);
    let db = Db::open(&dir, opts(l0_from_env(), runs)).unwrap();
    println!("open");
    let wo = WriteOptions { sync: true };
    for i in from.. {
        let mut b = WriteBatch::new();
        for (k, v) in op(i) {
            match v {
                Some(v) => b.put(k, v),
                None => b.delete(k),
            };
        }
        db.write_opt(&b, &wo).unwrap();
        println!("ack {i}");
    }
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, i: u64) {
    for (k, v) in op(i) {
        match v {
            Some(v) => model.insert(k, v),
            None => model.remove(&k),
        };
    }
}

fn run_rounds(l0: L0Kind) {
    let rounds: u64 = std::env::var("STRATA_CRASH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(25);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut next_op = 0u64;
    let mut acked_total = 0u64;
    let mut in_flight_applied = 0u64;
    let started = Instant::now();
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env("STRATA_CRASH_DIR", dir.path())
            .env("STRATA_CRASH_FROM", next_op.to_string())
            .env("STRATA_CRASH_L0", l0.name())
            .env("STRATA_CRASH_RUNS", max_runs_of_round(round).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Every fifth round kills early, possibly during recovery.
        let kill_after = if round % 5 == 4 {
            Duration::from_millis(rng.gen_range(0..30))
        } else {
            Duration::from_millis(rng.gen_range(50..400))
        };
        let killer = std::thread::spawn(move || {
            std::thread::sleep(kill_after);
            // Child::kill sends SIGKILL: no chance to flush or clean up.
            let _ = child.kill();
            let _ = child.wait();
        });
        let mut last_ack: Option<u64> = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("ack ") {
                last_ack = n.trim().parse().ok();
            }
        }
        killer.join().unwrap();
        // Every acknowledged op is now part of the expected state.
        if let Some(a) = last_ack {
            for i in next_op..=a {
                apply(&mut model, i);
            }
            acked_total += a + 1 - next_op;
            next_op = a + 1;
        }
        // The op after the last ack may or may not have been applied, but
        // only whole.
        let db = match Db::open(dir.path(), opts(l0, max_runs_of_round(round + 1))) {
            Ok(db) => db,
            Err(e) => panic!("round {round}: reopen after SIGKILL failed: {e}"),
        };
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter(..).unwrap().collect();
        let mut with_next = model.clone();
        apply(&mut with_next, next_op);
        if got == with_next && got != model {
            model = with_next;
            next_op += 1;
            in_flight_applied += 1;
        } else if got != model {
            let missing: Vec<_> = model.keys().filter(|k| !got.contains_key(*k)).take(5).collect();
            let extra: Vec<_> = got.keys().filter(|k| !model.contains_key(*k)).take(5).collect();
            let wrong: Vec<_> = model
                .iter()
                .filter(|(k, v)| got.get(*k).map(|g| g != *v).unwrap_or(false))
                .map(|(k, _)| k)
                .take(5)
                .collect();
            panic!(
                "round {round}: recovered state is neither the acknowledged state nor it plus the in-flight op {next_op}; \
                 missing {missing:?} extra {extra:?} wrong {wrong:?}"
            );
        }
        db.verify_checksums().unwrap();
        drop(db);
    }
    println!(
        "crash[{}]: rounds={rounds} acknowledged_ops={acked_total} in_flight_applied={in_flight_applied} \
         keys_checked={} lost=0 elapsed={:.1}s",
        l0.name(),
        model.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(acked_total > 0, "no operation was ever acknowledged");
}

#[test]
fn sigkill_never_loses_acknowledged_writes_sstable_l0() {
    if std::env::var("STRATA_CRASH_DIR").is_ok() {
        return;
    }
    run_rounds(L0Kind::Sstable);
}

#[test]
fn sigkill_never_loses_acknowledged_writes_matrix_l0() {
    if std::env::var("STRATA_CRASH_DIR").is_ok() {
        return;
    }
    run_rounds(L0Kind::Matrix);
}

#[test]
fn sigkill_never_loses_acknowledged_writes_single_level_l0() {
    if std::env::var("STRATA_CRASH_DIR").is_ok() {
        return;
    }
    run_rounds(L0Kind::SingleLevel);
}

#[test]
fn sigkill_never_loses_acknowledged_writes_pm_only_l0() {
    if std::env::var("STRATA_CRASH_DIR").is_ok() {
        return;
    }
    run_rounds(L0Kind::PmOnly);
}
