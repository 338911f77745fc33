//! `strata-fs bench` runs end to end in a tiny configuration (so the
//! benchmark does not rot between sweeps).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn bench_runs_every_mode_briefly() {
    let out = Command::new(env!("CARGO_BIN_EXE_strata-fs"))
        .args(["bench", "--servers", "2", "--mode", "all", "--markdown", "--depth", "1", "--fanout", "2"])
        .args(["--items", "2", "--threads", "2", "--pangu-ops", "50", "--lookups", "5", "--lookup-depths", "1,10"])
        .env_remove("STRATA_FS_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    for phase in [
        "dir create",
        "file create",
        "file stat",
        "dir readdir",
        "file rename",
        "dir rename",
        "file remove",
        "dir remove",
        "pangu mix",
    ] {
        assert!(text.contains(phase), "{phase} missing:\n{text}");
    }
    // depth-10 cold lookup: 1 round with speculation, 10 without
    let row = text.lines().find(|l| l.starts_with("| 2 | 10 |")).expect("lookup row");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(cells[3], "1.00", "{row}");
    assert_eq!(cells[5], "10.00", "{row}");
}
