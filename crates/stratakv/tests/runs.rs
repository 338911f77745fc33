//! The sorted runs of the matrix profile (`Options::max_runs`): each
//! column-compaction round writes one run, complete runs are merged into
//! L1 once `max_runs` of them gather, and reads see the newest version
//! across the matrix, the runs (newest first) and the levels, also across
//! reopens and a change of `max_runs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use stratakv::{Db, L0Kind, Options};

fn opts(max_runs: usize) -> Options {
    let mut o = Options::for_tests();
    o.l0 = L0Kind::Matrix;
    o.max_runs = max_runs;
    o.write_buffer_size = 32 << 10;
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Writes one round: every key gets a value naming the round; every
/// seventh key of odd rounds is deleted instead.
fn round(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, r: u32, keys: u32) {
    for i in 0..keys {
        let k = key(i);
        if r % 2 == 1 && i % 7 == 0 {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("round{r}-{i}-{}", "v".repeat((i % 40) as usize)).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: u32, ctx: &str) {
    for i in 0..keys {
        assert_eq!(db.get(key(i)).unwrap().as_ref(), model.get(&key(i)), "get {i} ({ctx})");
    }
    let fwd: Vec<_> = db.iter(..).unwrap().collect();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(fwd == want, "forward scan ({ctx})");
    let mut back: Vec<_> = db.iter(..).unwrap().rev().collect();
    back.reverse();
    assert!(back == want, "backward scan ({ctx})");
}

#[test]
fn rounds_become_runs_that_merge_into_l1_and_reads_see_the_newest_version() {
    let dir = tempfile::tempdir().unwrap();
    let keys = 3000;
    let db = Db::open(dir.path(), opts(3)).unwrap();
    let mut model = BTreeMap::new();
    let snap_model;
    let snap;
    let mut most_runs = 0;
    let mut merges = 0;
    {
        for r in 0..3 {
            round(&db, &mut model, r, keys);
        }
        snap = db.snapshot();
        snap_model = model.clone();
        for r in 3..12 {
            round(&db, &mut model, r, keys);
            db.wait_for_compactions().unwrap();
            let s = db.stats();
            most_runs = most_runs.max(s.runs.len());
            merges = s.run_merges;
            // Every complete run is merged once `max_runs` gather; a
            // running round may hold one more.
            assert!(s.runs.len() <= 3, "{} runs after round {r}", s.runs.len());
            check(&db, &model, keys, &format!("round {r}"));
        }
    }
    assert!(most_runs >= 2, "rounds never gathered as runs (at most {most_runs})");
    assert!(merges > 0, "runs were never merged into L1");
    // A snapshot taken before those rounds still reads its versions.
    for i in 0..keys {
        assert_eq!(snap.get(key(i)).unwrap().as_ref(), snap_model.get(&key(i)), "snapshot get {i}");
    }
    drop(snap);

    // The runs are in the MANIFEST: a reopen finds the same ones.
    let mut r = 12;
    while db.stats().runs.is_empty() {
        assert!(r < 30, "no run left standing after round {r}");
        round(&db, &mut model, r, keys);
        db.wait_for_compactions().unwrap();
        r += 1;
    }
    let before: Vec<_> = db.stats().runs;
    db.close().unwrap();
    let db = Db::open(dir.path(), opts(3)).unwrap();
    assert_eq!(db.stats().runs, before, "runs after a reopen");
    check(&db, &model, keys, "after reopen");
    db.verify_checksums().unwrap();

    // Without runs (max_runs = 1) the runs left are merged into L1 first,
    // and later columns go straight to L1.
    db.close().unwrap();
    let db = Db::open(dir.path(), opts(1)).unwrap();
    db.wait_for_compactions().unwrap();
    assert!(db.stats().runs.is_empty(), "runs left with max_runs = 1: {:?}", db.stats().runs);
    check(&db, &model, keys, "runs merged after a second reopen");
    for r in r..r + 3 {
        round(&db, &mut model, r, keys);
        db.wait_for_compactions().unwrap();
        assert!(db.stats().runs.is_empty(), "a column wrote a run with max_runs = 1");
    }
    assert!(db.stats().columns > 0);
    check(&db, &model, keys, "max_runs = 1");

    // compact_range pushes everything, runs included, below the matrix.
    db.close().unwrap();
    let db = Db::open(dir.path(), opts(4)).unwrap();
    round(&db, &mut model, 99, keys);
    db.compact_range(..).unwrap();
    let s = db.stats();
    assert!(
        s.runs.is_empty() && s.matrix_rows == 0,
        "after compact_range: {} runs, {} rows",
        s.runs.len(),
        s.matrix_rows
    );
    check(&db, &model, keys, "after compact_range");
}

fn fill_tagged(db: &Db, prefix: &str, n: u32, tag: &str) {
    for i in 0..n {
        let k = format!("{prefix}{i:06}");
        let v = format!("{tag}-{i}-{}", "x".repeat(200));
        db.put(k.as_bytes(), v.as_bytes()).unwrap();
    }
}

/// Review (runs): an iterator pins the version it was created with. Tables
/// of a sorted run that a run merge then moves into L1 unchanged (trivial
/// move: runs disjoint, nothing in L1 there, as in a sequential load) must
/// stay on disk while that version lives, also after a later compaction
/// rewrites them in L1. They did not: the moved file got a new `Arc`, and
/// obsolete files are deleted when their `Arc` is the last one, so the
/// iterator failed with NotFound. The same held for leveled trivial moves,
/// which `max_runs = 1` exercises.
#[test]
fn an_iterator_survives_a_trivial_move_of_its_tables_and_their_rewrite() {
    for max_runs in [1, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(max_runs);
        o.target_file_size = 16 << 10;
        let db = Db::open(dir.path(), o).unwrap();
        fill_tagged(&db, "a", 6000, "r1");
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();

        // Pins the current version; reads one key.
        let mut it = db.iter(..).unwrap();
        assert_eq!(it.next().unwrap().0, b"a000000".to_vec());

        // Disjoint, larger keys: the next round's run is moved into L1 with
        // the first. Then overwrite the first keys, so that compactions
        // rewrite (and delete) those L1 tables.
        fill_tagged(&db, "b", 6000, "r2");
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        for r in 3..6 {
            fill_tagged(&db, "a", 6000, &format!("r{r}"));
            db.flush().unwrap();
            db.wait_for_compactions().unwrap();
        }

        let mut n = 1;
        loop {
            match it.try_next() {
                Ok(Some((k, v))) => {
                    if k.starts_with(b"b") {
                        break;
                    }
                    assert!(v.starts_with(b"r1-"), "max_runs {max_runs}: {}", String::from_utf8_lossy(&k));
                    n += 1;
                }
                Ok(None) => break,
                Err(e) => panic!("max_runs {max_runs}: the iterator pinned before the merges fails: {e}"),
            }
        }
        assert_eq!(n, 6000, "max_runs {max_runs}");
    }
}
