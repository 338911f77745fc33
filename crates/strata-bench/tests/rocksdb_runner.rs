//! With the `rocksdb` feature: the RocksDB runner sees the same keys as
//! StrataKV for the same command line (identical code paths).
#![cfg(feature = "rocksdb")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test helpers fail the test on bad output")]

use std::process::Command;

fn found_counts(engine: &str) -> Vec<u64> {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .arg(format!("--engine={engine}"))
        .arg(format!("--db={}", dir.path().join("db").display()))
        .arg(format!("--json={}", json.display()))
        .args(["--num=3000", "--seed=42", "--compression_type=none", "--bloom_bits=10", "--seek_nexts=5"])
        .arg("--benchmarks=fillrandom,readrandom,seekrandom,multireadrandom,readseq,ycsbload,ycsbc")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["found"].as_u64().unwrap() + b["ops"].as_u64().unwrap() * 1_000_000)
        .collect()
}

#[test]
fn rocksdb_and_strata_see_the_same_keys() {
    assert_eq!(found_counts("rocksdb"), found_counts("strata"));
}
