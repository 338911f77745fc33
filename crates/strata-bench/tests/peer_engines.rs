//! fjall (always) and RocksDB (with the `rocksdb` feature) run through the
//! same code paths as StrataKV: for the same command line they see the same
//! keys, and their JSON names the engine's version and build.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test helpers fail the test on bad output")]

use std::process::Command;

/// Runs a read-heavy benchmark list and returns (found + ops * 10^6) per benchmark, and the JSON.
fn found_counts(engine: &str) -> (Vec<u64>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .arg(format!("--engine={engine}"))
        .arg(format!("--db={}", dir.path().join("db").display()))
        .arg(format!("--json={}", json.display()))
        .args([
            "--num=3000",
            "--seed=42",
            "--compression_type=none",
            "--bloom_bits=10",
            "--seek_nexts=5",
            "--batch_size=4",
        ])
        .arg("--benchmarks=fillrandom,readrandom,seekrandom,multireadrandom,readseq,readreverse,ycsbload,ycsbc,ycsbe")
        .args(["--reads=1000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("readrandom   : "), "db_bench-format lines: {stdout}");
    assert!(stdout.contains("Engine:     "), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let counts = v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["found"].as_u64().unwrap() + b["ops"].as_u64().unwrap() * 1_000_000)
        .collect();
    (counts, v)
}

#[test]
fn fjall_and_strata_see_the_same_keys() {
    let (fjall, v) = found_counts("fjall");
    assert_eq!(fjall, found_counts("strata").0);
    assert_eq!(v["engine"], "fjall");
    assert!(v["engine_version"].as_str().unwrap().starts_with('3'), "{}", v["engine_version"]);
    assert!(v["engine_build"].as_str().unwrap().contains("fjall"));
    assert_eq!(v["benchmarks"][0]["engine_version"], v["engine_version"]);
    let settings = v["engine_settings"].as_array().unwrap();
    assert!(settings.iter().any(|s| s["name"] == "filter_policy" && s["value"] != s["default"]));
}

#[test]
fn strata_json_names_its_version_and_build() {
    let (_, v) = found_counts("strata");
    assert_eq!(v["engine_version"], env!("CARGO_PKG_VERSION"));
    assert!(v["engine_build"].as_str().unwrap().contains("opt-level"), "{}", v["engine_build"]);
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_and_strata_see_the_same_keys() {
    let (rocks, v) = found_counts("rocksdb");
    assert_eq!(rocks, found_counts("strata").0);
    assert_eq!(v["engine"], "rocksdb");
    let version = v["engine_version"].as_str().unwrap();
    assert_eq!(version, env!("STRATA_BENCH_ROCKSDB_VERSION"), "the version the library wrote into OPTIONS");
    assert!(v["engine_build"].as_str().unwrap().contains("NDEBUG"), "{}", v["engine_build"]);
}

#[cfg(not(feature = "rocksdb"))]
#[test]
fn rocksdb_without_the_feature_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(["--engine=rocksdb", "--benchmarks=fillseq"])
        .arg(format!("--db={}", dir.path().join("db").display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--features rocksdb"));
}
