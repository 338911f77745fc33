//! Single-level behaviours the model test only agrees with: a get reads one
//! block, and a scan over keys spread across many tables (range-query
//! sequentiality) makes those tables candidates that a selective
//! compaction then merges.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use stratakv::{Db, L0Kind, Options};

fn options(pm: &std::path::Path) -> Options {
    let mut o = Options::for_tests();
    o.l0 = L0Kind::SingleLevel;
    o.pm_dir = Some(pm.to_path_buf());
    // Only the scan trigger: no leaf scans, no live-ratio candidates.
    o.slm_leaf_scan_min_tables = usize::MAX;
    o.slm_live_percent = 0;
    o.slm_compaction_trigger = 0;
    o
}

fn key(k: usize) -> Vec<u8> {
    format!("key{k:08}").into_bytes()
}

/// `tables` flushes; flush t writes keys t, t + tables, t + 2 * tables, ...:
/// every run of consecutive keys is spread over every table.
fn fill_interleaved(db: &Db, tables: usize, per: usize) {
    for t in 0..tables {
        for i in 0..per {
            let k = i * tables + t;
            db.put(key(k), format!("v{k}")).unwrap();
        }
        db.flush().unwrap();
    }
}

#[test]
fn a_get_reads_one_block() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(&dir.path().join("pm"))).unwrap();
    fill_interleaved(&db, 6, 300);
    let before = db.stats();
    for k in (0..1800).step_by(7) {
        assert_eq!(db.get(key(k)).unwrap(), Some(format!("v{k}").into_bytes()));
    }
    let after = db.stats();
    let gets = after.gets - before.gets;
    let blocks = after.data_blocks_read - before.data_blocks_read;
    assert_eq!(gets, 258);
    assert_eq!(blocks, gets, "every get read exactly one data block");
    assert_eq!(after.slm_block_reads - before.slm_block_reads, gets);
}

#[test]
fn a_scan_over_interleaved_tables_gets_them_merged() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(&dir.path().join("pm"))).unwrap();
    fill_interleaved(&db, 12, 200);
    db.wait_for_compactions().unwrap();
    let before = db.stats();
    assert_eq!(before.levels[0].files, 12, "{before}");
    assert_eq!(before.slm_candidates, 0, "{before}");
    assert_eq!(before.slm_scans_marked, 0);
    // A scan of 40 consecutive keys: each window of 30 touches all 12 tables.
    let got: Vec<_> = db.iter(key(500)..key(2400)).unwrap().take(40).collect();
    assert_eq!(got.len(), 40);
    assert_eq!(got[0].0, key(500));
    let marked = db.stats();
    assert_eq!(marked.slm_scans_marked, 1, "{marked}");
    assert!(marked.slm_candidates >= 9, "{marked}");
    db.wait_for_compactions().unwrap();
    let after = db.stats();
    assert!(after.slm_compactions >= 1, "{after}");
    assert!(after.levels[0].files < 12, "{after}");
    // Everything still reads back, by get and by scan.
    for k in 0..2400 {
        assert_eq!(db.get(key(k)).unwrap(), Some(format!("v{k}").into_bytes()), "key {k}");
    }
    assert_eq!(db.iter(..).unwrap().count(), 2400);
    db.verify_checksums().unwrap();
}

#[test]
fn a_scan_over_sorted_tables_marks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(&dir.path().join("pm"))).unwrap();
    for t in 0..12 {
        for i in 0..200 {
            db.put(key(t * 200 + i), b"v").unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(db.iter(..).unwrap().count(), 2400);
    let s = db.stats();
    assert_eq!(s.slm_scans_marked, 0, "{s}");
    assert_eq!(s.slm_candidates, 0, "{s}");
}

/// With automatic compaction off, candidates past the stop trigger must not
/// stop writers: nothing would ever clear the stall (as in RocksDB,
/// `disable_auto_compactions` turns the compaction-debt stalls off).
#[test]
fn no_write_stall_without_automatic_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir.path().join("pm"));
    o.disable_auto_compaction = true;
    o.slm_leaf_scan_min_tables = 2;
    o.slm_slowdown_candidates = 2;
    o.slm_stop_candidates = 3;
    let path = dir.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let db = Db::open(&path, o).unwrap();
        fill_interleaved(&db, 8, 300);
        let s = db.stats();
        tx.send((s.levels[0].files, s.slm_candidates)).unwrap();
    });
    let (files, candidates) = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("writers stalled for good");
    assert_eq!(files, 8);
    assert!(candidates >= 3, "the leaf scans marked the tables ({candidates} candidates)");
}
