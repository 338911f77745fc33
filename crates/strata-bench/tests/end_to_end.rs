//! Runs the strata-bench binary on a few thousand operations and checks
//! what it printed and wrote to --json.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test helpers fail the test on bad output")]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use strata_bench::keygen::Mt64;

fn bench(db: &Path, json: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .arg(format!("--db={}", db.display()))
        .arg(format!("--json={}", json.display()))
        .args(["--num=3000", "--seed=42", "--compression_type=none", "--bloom_bits=10", "--write_buffer_size=65536"])
        .args(extra)
        .output()
        .expect("run strata-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "strata-bench failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn results(json: &Path) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    v["benchmarks"].as_array().unwrap().clone()
}

/// Distinct keys db_bench's fillrandom writes with --num=3000 --seed=42.
fn distinct_fillrandom_keys() -> usize {
    let mut rng = Mt64::new(43);
    let mut keys = BTreeSet::new();
    for _ in 0..3000 {
        rng.next_u64();
        keys.insert(rng.below(3000));
    }
    keys.len()
}

#[test]
fn fill_then_read_in_a_second_process_replays_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (db, json) = (dir.path().join("db"), dir.path().join("out.json"));
    let out = bench(&db, &json, &["--benchmarks=fillrandom,flush", "--histogram=1", "--profile=sstable"]);
    assert!(out.contains("fillrandom   : "), "{out}");
    assert!(out.contains("Percentiles: P50: "), "{out}");
    let r = results(&json);
    assert_eq!(r[0]["benchmark"], "fillrandom");
    assert_eq!(r[0]["ops"], 3000);
    assert!(r[0]["user_bytes_written"].as_u64().unwrap() >= 3000 * 116);
    assert!(r[0]["p999_us"].as_f64().unwrap() >= r[0]["p50_us"].as_f64().unwrap());
    assert_eq!(r[0]["end_state"]["after"][0], "flush");
    assert!(r[0]["end_state"]["device_bytes_since_open"].as_u64().unwrap() > 0, "the flush wrote tables");
    assert_eq!(r[0]["timeline"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).sum::<u64>(), 3000);
    // What bench/plot draws: the throughput series, the latency curve, the store's size.
    let t = r[0]["throughput_t_s"].as_array().unwrap();
    assert_eq!(t.len(), r[0]["throughput_ops_per_sec"].as_array().unwrap().len());
    assert!((t.last().unwrap().as_f64().unwrap() - r[0]["elapsed_s"].as_f64().unwrap()).abs() < 0.01, "{t:?}");
    assert_eq!(r[0]["latency_curve"].as_array().unwrap().len(), 14);
    assert!(r[0]["store_size_bytes"].as_u64().unwrap() >= r[0]["pm_file_bytes"].as_u64().unwrap());
    assert!(r[0]["end_state"]["store_size_bytes"].as_u64().unwrap() > 0);

    // Same seed in a new process: readrandom draws the fill's keys again.
    let out = bench(
        &db,
        &json,
        &["--use_existing_db=1", "--benchmarks=readrandom,readseq,readreverse,seekrandom,readmissing"],
    );
    assert!(out.contains("(3000 of 3000 found)"), "{out}");
    let r = results(&json);
    let distinct = distinct_fillrandom_keys() as u64;
    assert_eq!(r[1]["benchmark"], "readseq");
    assert_eq!(r[1]["ops"].as_u64(), Some(distinct));
    assert_eq!(r[2]["ops"].as_u64(), Some(distinct));
    assert_eq!(r[4]["found"], 0, "readmissing must miss");
    assert!(r[0]["db_size_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn mixed_and_ycsb_workloads_run() {
    let dir = tempfile::tempdir().unwrap();
    let (db, json) = (dir.path().join("db"), dir.path().join("out.json"));
    let out = bench(
        &db,
        &json,
        &[
            "--benchmarks=fillseq,overwrite,readwhilewriting,readrandomwriterandom,multireadrandom,deleterandom,\
             ycsbload,ycsba,ycsbb,ycsbc,ycsbd,ycsbe,ycsbf,stats,levelstats",
            "--reads=1000",
            "--batch_size=4",
            "--profile=matrix",
        ],
    );
    assert!(out.contains("Level Files Size(MB)"), "{out}");
    let r = results(&json);
    let names: Vec<&str> = r.iter().map(|b| b["benchmark"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "fillseq",
            "overwrite",
            "readwhilewriting",
            "readrandomwriterandom",
            "multireadrandom",
            "deleterandom",
            "ycsbload",
            "ycsba",
            "ycsbb",
            "ycsbc",
            "ycsbd",
            "ycsbe",
            "ycsbf"
        ]
    );
    // fillseq writes every key once, so multireadrandom's keys mostly exist.
    assert_eq!(r[0]["ops"], 3000);
    assert_eq!(r[2]["ops"], 1000, "readers of readwhilewriting");
    assert!(r[2]["bg_write_ops"].as_u64().is_some());
    assert_eq!(r[3]["counts"]["reads"], 900);
    assert_eq!(r[6]["ops"], 3000, "ycsbload inserts --num records");
    assert_eq!(r[9]["found"], 1000, "ycsbc reads only loaded records");
    for b in &r[7..] {
        assert_eq!(b["engine"], "strata/matrix");
        assert!(b["ops_per_sec"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn bad_flags_fail_cleanly() {
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(["--benchmarks=nosuch", "--db=/nonexistent/x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown benchmark 'nosuch'"));
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench")).args(["--num=many"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
