//! The `strata-fs` command line against a running cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

fn cli(cfg: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata-fs")).arg("--config").arg(cfg).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn ls_mkdir_touch_stat_mv_rm() {
    let (_d, c) = common::cluster(2);
    let cfg = c.config_path.clone();
    assert!(cli(&cfg, &["mkdir", "-p", "/a/b/c"]).0);
    assert!(cli(&cfg, &["touch", "/a/b/f", "/a/g"]).0);
    assert_eq!(cli(&cfg, &["ls", "/a"]).1, "b/\ng\n");
    assert!(cli(&cfg, &["stat", "/a/b/f"]).1.contains("File"));
    assert!(cli(&cfg, &["mv", "/a/g", "/a/b"]).0); // into the directory
    assert_eq!(cli(&cfg, &["ls", "/a/b"]).1, "c/\nf\ng\n");
    assert!(!cli(&cfg, &["rm", "/a"]).0); // a directory without -r
    assert!(cli(&cfg, &["rm", "-r", "/a"]).0);
    assert_eq!(cli(&cfg, &["ls", "/"]).1, "");
    let (ok, out) = cli(&cfg, &["check"]);
    assert!(ok && out.contains("0 violation"), "{out}");
}
