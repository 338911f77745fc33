//! The deletehalf benchmarks (bench/compare's qad suite) on a tiny key
//! space: each method deletes the odd parts, reads afterwards ask for the
//! survivors only and find them all, and the deleted keys are gone.
//! StrataKV always; RocksDB when the `rocksdb` feature is built.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test helpers fail the test on bad output")]

use std::path::Path;
use std::process::Command;

use strata_bench::keygen::Mt64;
use strata_bench::keyspace::KeySpace;

const NUM: u64 = 2000;
const READS: u64 = 1000;

/// Runs strata-bench on the database at `db`; returns its JSON benchmarks.
fn bench(engine: &str, db: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let json = db.with_extension("json");
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .arg(format!("--engine={engine}"))
        .arg(format!("--db={}", db.display()))
        .arg(format!("--json={}", json.display()))
        .arg(format!("--num={NUM}"))
        .arg(format!("--reads={READS}"))
        .args(["--compression_type=none", "--bloom_bits=10", "--write_buffer_size=65536", "--value_size=100"])
        .args(args)
        .output()
        .expect("run strata-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "strata-bench failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    v["benchmarks"].as_array().unwrap().clone()
}

/// How many of readrandom's draws (seed `seed`, every key number) land in a surviving part.
fn surviving_draws(seed: u64) -> u64 {
    let ks = KeySpace::new(NUM, 4, false);
    let mut rng = Mt64::new(seed);
    (0..READS)
        .filter(|_| {
            rng.next_u64(); // SelectDB
            ks.part_of(rng.below(NUM)).is_multiple_of(2)
        })
        .count() as u64
}

fn delete_half(engine: &str, method: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let layout = if method == "drop" { "--partitions=4" } else { "--key_ranges=4" };
    // Every key number exists (fillseq), in 4 parts of 500.
    bench(engine, &db, &[layout, "--benchmarks=fillseq,flush", "--seed=42"]);
    let reads = ["--seed=7", "--read_keys=survivors", "--use_existing_db=1"];
    let before = bench(engine, &db, &[&[layout, "--benchmarks=readrandom,seekrandom"], &reads[..]].concat());
    let bench_list = format!("--benchmarks=deletehalf_{method},readrandom,seekrandom");
    let after = bench(engine, &db, &[&[layout, bench_list.as_str()], &reads[..]].concat());
    let d = &after[0]["delete"];
    assert_eq!(after[0]["benchmark"], format!("deletehalf_{method}"));
    assert_eq!(d["method"], method);
    assert_eq!(d["parts"], 2, "the odd parts of 4");
    assert_eq!(d["survivor_key_numbers"], 1000);
    assert!(
        d["total_ms"].as_f64().unwrap() > 0.0 && d["longest_ms"].as_f64().unwrap() <= d["total_ms"].as_f64().unwrap()
    );
    if method == "point" {
        assert_eq!(d["keys_deleted"], 1000, "every key of parts 1 and 3");
        assert_eq!(after[0]["ops"], 1000);
    } else {
        assert!(d["keys_deleted"].is_null());
        assert_eq!(after[0]["ops"], 2);
    }
    // The same survivors are read before and after, and all are found.
    for (b, a) in before.iter().zip(&after[1..]) {
        assert_eq!(b["benchmark"], a["benchmark"]);
        assert_eq!((b["found"].as_u64(), a["found"].as_u64()), (Some(READS), Some(READS)), "{}", b["benchmark"]);
    }
    // Reading every key number: only the survivors are left.
    let all = bench(engine, &db, &[layout, "--benchmarks=readrandom", "--seed=42", "--use_existing_db=1"]);
    assert_eq!(all[0]["found"].as_u64(), Some(surviving_draws(43)), "{method}: deleted keys are gone");
}

#[test]
fn strata_drops_half_the_partitions() {
    delete_half("strata", "drop");
}

#[test]
fn strata_deletes_half_the_key_ranges() {
    delete_half("strata", "range");
}

#[test]
fn strata_deletes_half_the_keys_one_by_one() {
    delete_half("strata", "point");
}

#[test]
fn the_layout_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        ["--benchmarks=deletehalf_drop", "--key_ranges=4"],
        ["--benchmarks=readseq", "--partitions=4"],
        ["--benchmarks=deletehalf_range", "--partitions=1"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
            .arg(format!("--db={}", dir.path().join("db").display()))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("partitions"), "{args:?}");
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_deletes_half_three_ways() {
    for method in ["drop", "range", "point"] {
        delete_half("rocksdb", method);
    }
}
