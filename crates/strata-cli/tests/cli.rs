//! The `strata` command's forms, exactly as documented.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn strata(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_strata")).arg("--dir").arg(dir).args(args).output().unwrap()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn put_get_delete_scan_stats_check() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    for (k, v) in [("b", "2"), ("a", "1"), ("c", "3"), ("d", "4")] {
        let o = strata(&dir, &["put", k, v]);
        assert!(o.status.success(), "put failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let o = strata(&dir, &["get", "a"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "1\n");
    let o = strata(&dir, &["get", "zzz"]);
    assert_eq!(o.status.code(), Some(1), "absent key must exit 1");
    assert!(strata(&dir, &["delete", "c"]).status.success());
    assert_eq!(strata(&dir, &["get", "c"]).status.code(), Some(1));
    let o = strata(&dir, &["scan"]);
    assert_eq!(stdout(&o), "a\t1\nb\t2\nd\t4\n");
    let o = strata(&dir, &["scan", "--from", "b", "--to", "d"]);
    assert_eq!(stdout(&o), "b\t2\n");
    let o = strata(&dir, &["scan", "--limit", "2"]);
    assert_eq!(stdout(&o), "a\t1\nb\t2\n");
    let o = strata(&dir, &["stats"]);
    assert!(o.status.success());
    let s = stdout(&o);
    assert!(s.contains("PM region") && s.contains("L1"), "{s}");
    let o = strata(&dir, &["check"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).starts_with("ok:"));
}

#[test]
fn partitions_and_range_deletes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    assert!(strata(&dir, &["put", "k", "default"]).status.success());
    let o = strata(&dir, &["--partition", "users", "put", "k", "in users"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(strata(&dir, &["--partition", "users", "put", "m", "2"]).status.success());
    assert_eq!(stdout(&strata(&dir, &["get", "k"])), "default\n");
    assert_eq!(stdout(&strata(&dir, &["--partition", "users", "get", "k"])), "in users\n");
    assert_eq!(stdout(&strata(&dir, &["--partition", "users", "scan"])), "k\tin users\nm\t2\n");
    assert_eq!(stdout(&strata(&dir, &["scan"])), "k\tdefault\n", "the default partition shows only its own keys");
    assert_eq!(stdout(&strata(&dir, &["partition", "list"])), "default\nusers\n");
    let s = stdout(&strata(&dir, &["stats"]));
    assert!(s.contains("partitions:           default, users"), "{s}");
    assert!(strata(&dir, &["--partition", "users", "delete-range", "a", "l"]).status.success());
    assert_eq!(stdout(&strata(&dir, &["--partition", "users", "scan"])), "m\t2\n");
    assert!(strata(&dir, &["partition", "drop", "users"]).status.success());
    assert_eq!(strata(&dir, &["--partition", "users", "get", "m"]).status.code(), Some(2), "no such partition");
    assert!(strata(&dir, &["partition", "create", "logs"]).status.success());
    assert_eq!(stdout(&strata(&dir, &["partition", "list"])), "default\nlogs\n");
    assert!(strata(&dir, &["check"]).status.success());
}

#[test]
fn check_reports_corruption_with_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    for i in 0..200 {
        assert!(strata(&dir, &["put", &format!("key{i:04}"), &"v".repeat(100)]).status.success());
    }
    assert!(strata(&dir, &["compact"]).status.success());
    let sst = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().map(|x| x == "sst").unwrap_or(false))
        .expect("compaction wrote a table");
    let mut bytes = std::fs::read(&sst).unwrap();
    bytes[10] ^= 0xff;
    std::fs::write(&sst, bytes).unwrap();
    let o = strata(&dir, &["check"]);
    assert!(!o.status.success(), "check passed a damaged table");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(".sst") && err.contains("offset"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn read_commands_on_a_missing_database_fail_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nothing-here");
    let o = strata(&dir, &["get", "a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

/// Bytes of storage under `p`, as `du` counts them (allocated blocks).
fn disk_usage(p: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::symlink_metadata(p).unwrap();
    let mut total = md.blocks() * 512;
    if md.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            total += disk_usage(&e.unwrap().path());
        }
    }
    total
}

/// Issue 31: a database takes disk in proportion to its data. With the
/// default 4 GiB region, a one-key database stays under 64 MiB, and
/// `strata stats` shows what the region takes next to its ceiling.
#[test]
fn a_one_key_database_takes_under_64_mib_and_stats_show_the_region_ceiling() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = strata(&dir, &["put", "a", "b"]);
    assert!(o.status.success(), "put failed: {}", String::from_utf8_lossy(&o.stderr));
    let used = disk_usage(&dir);
    assert!(used < 64 << 20, "a one-key database takes {} MiB", used >> 20);
    let s = stdout(&strata(&dir, &["stats"]));
    assert!(s.contains("allocated of 4096 MiB"), "{s}");
}
