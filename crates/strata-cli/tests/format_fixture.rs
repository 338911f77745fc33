//! `strata` on the format fixtures (crates/stratakv/tests/fixtures/format-v1
//! and format-v1-single-level, databases written by earlier builds): `check` passes, `get` finds
//! keys from every part of it, and a scan prints exactly the expected
//! contents. Each command runs on a copy, with the default options a user
//! gets (the region keeps the size it was made with).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The fixture directory holding the database of profile `kind`.
fn fixture(kind: &str) -> PathBuf {
    let name = if kind == "single-level" { "format-v1-single-level" } else { "format-v1" };
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stratakv/tests/fixtures").join(name)
}

fn strata(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata")).arg("--dir").arg(dir).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A fresh copy of the fixture database `kind` in a temporary directory.
fn copy_of(kind: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(kind);
    copy_dir(&fixture(kind).join(kind), &dir);
    (tmp, dir)
}

/// The live lines of expected.txt (`key hex TAB value hex`), and the
/// deleted keys (hex).
fn expected(kind: &str) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(fixture(kind).join("expected.txt")).unwrap();
    let mut live = Vec::new();
    let mut deleted = Vec::new();
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        match line.split_once('\t') {
            Some((k, "-")) => deleted.push(k.to_string()),
            Some(_) => live.push(line.to_string()),
            None => panic!("bad line {line:?}"),
        }
    }
    (live, deleted)
}

fn fixture_passes_check_get_and_scan(kind: &str) {
    let (live, deleted) = expected(kind);

    let (_tmp, dir) = copy_of(kind);
    let o = strata(&dir, &["check"]);
    assert!(o.status.success(), "strata check on the {kind} fixture: {}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("ok:"), "{}", text(&o.stdout));

    // Keys that live in the L2 tables, in L1 or a run, in L0 or the matrix
    // rows, and only in the PM log.
    for (key, value) in [
        ("batch1-a", "rewritten in a batch"),
        ("phase2", "in a run or L1"),
        ("phase3", "in L0 or matrix rows"),
        ("phase4", "only in the PM log"),
        ("empty-value", "no longer empty"),
    ] {
        let (_tmp, dir) = copy_of(kind);
        let o = strata(&dir, &["get", key]);
        assert!(o.status.success(), "strata get {key} on the {kind} fixture: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), format!("{value}\n"), "get {key}");
    }
    let (_tmp, dir) = copy_of(kind);
    for key in deleted.iter().step_by(20) {
        let o = strata(&dir, &["--hex", "get", key]);
        assert_eq!(o.status.code(), Some(1), "deleted key {key} found: {}", text(&o.stdout));
    }
    for line in live.iter().step_by(50) {
        let (key, value) = line.split_once('\t').unwrap();
        let o = strata(&dir, &["--hex", "get", key]);
        assert!(o.status.success(), "strata get {key}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), format!("{value}\n"), "get {key}");
    }

    // The whole contents, in both directions.
    let (_tmp, dir) = copy_of(kind);
    let o = strata(&dir, &["--hex", "scan"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let got: Vec<String> = text(&o.stdout).lines().map(str::to_string).collect();
    assert_eq!(got.len(), live.len(), "scan of the {kind} fixture");
    assert!(got == live, "scan of the {kind} fixture differs from expected.txt");
    let o = strata(&dir, &["--hex", "scan", "--reverse"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut back: Vec<String> = text(&o.stdout).lines().map(str::to_string).collect();
    back.reverse();
    assert!(back == live, "reverse scan of the {kind} fixture differs from expected.txt");
}

#[test]
fn strata_reads_and_checks_the_format_v1_sstable_fixture() {
    fixture_passes_check_get_and_scan("sstable");
}

#[test]
fn strata_reads_and_checks_the_format_v1_matrix_fixture() {
    fixture_passes_check_get_and_scan("matrix");
}

#[test]
fn strata_reads_and_checks_the_format_v1_single_level_fixture() {
    fixture_passes_check_get_and_scan("single-level");
}
