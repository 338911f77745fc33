//! Basic behaviour of the public API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use stratakv::{Db, Error, Options, WriteBatch, WriteOptions};

fn opts() -> Options {
    Options::for_tests()
}

#[test]
fn put_get_delete_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.put(b"k1", b"v1").unwrap();
        db.put(b"k2", b"v2").unwrap();
        db.delete(b"k1").unwrap();
        db.put_opt(b"k3", b"v3", &WriteOptions { sync: true }).unwrap();
        assert_eq!(db.get(b"k1").unwrap(), None);
        assert_eq!(db.get(b"k2").unwrap().as_deref(), Some(&b"v2"[..]));
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.get(b"k1").unwrap(), None);
    assert_eq!(db.get(b"k2").unwrap().as_deref(), Some(&b"v2"[..]));
    assert_eq!(db.get(b"k3").unwrap().as_deref(), Some(&b"v3"[..]));
}

#[test]
fn many_writes_flush_compact_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000u32;
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        for i in 0..n {
            db.put(format!("key{:08}", i * 7919 % n), format!("value{i}")).unwrap();
        }
        db.flush().unwrap();
        let s = db.stats();
        assert!(s.flushes > 0, "{s}");
        for i in 0..n {
            let k = format!("key{:08}", i * 7919 % n);
            assert_eq!(db.get(&k).unwrap(), Some(format!("value{i}").into_bytes()), "{k}");
        }
        db.compact_range(..).unwrap();
        assert_eq!(db.iter(..).unwrap().count(), n as usize);
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    let all: Vec<_> = db.iter(..).unwrap().collect();
    assert_eq!(all.len(), n as usize);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    let back: Vec<_> = db.iter(..).unwrap().rev().collect();
    assert_eq!(back.len(), n as usize);
    assert_eq!(back.first().map(|x| &x.0), all.last().map(|x| &x.0));
    assert!(db.verify_checksums().unwrap() > 0);
}

#[test]
fn batches_snapshots_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let mut b = WriteBatch::new();
    for i in 0..10 {
        b.put(format!("k{i}"), format!("{i}"));
    }
    db.write(b).unwrap();
    let snap = db.snapshot();
    db.delete("k3").unwrap();
    db.put("k4", "new").unwrap();
    assert_eq!(snap.get("k3").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(snap.get("k4").unwrap().as_deref(), Some(&b"4"[..]));
    assert_eq!(db.get("k3").unwrap(), None);
    let keys: Vec<_> = db.iter("k2".."k6").unwrap().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![b"k2".to_vec(), b"k4".to_vec(), b"k5".to_vec()]);
    let keys: Vec<_> = db.iter("k2"..="k6").unwrap().rev().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![b"k6".to_vec(), b"k5".to_vec(), b"k4".to_vec(), b"k2".to_vec()]);
    let snap_keys: Vec<_> = snap.iter(..).unwrap().map(|(k, _)| k).collect();
    assert_eq!(snap_keys.len(), 10);
    // Double-ended meets in the middle without repeating.
    let mut it = db.iter(..).unwrap();
    let mut seen = Vec::new();
    loop {
        match (it.next(), it.next_back()) {
            (Some(a), Some(b)) => {
                seen.push(a.0);
                seen.push(b.0);
            }
            (Some(a), None) | (None, Some(a)) => seen.push(a.0),
            (None, None) => break,
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 9);
}

#[test]
fn limits_and_lock() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let big_key = vec![0u8; 64 * 1024 + 1];
    assert!(matches!(db.put(&big_key, b"v"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.get(&big_key), Err(Error::InvalidArgument(_))));
    let ok_key = vec![1u8; 64 * 1024];
    db.put(&ok_key, b"v").unwrap();
    assert!(matches!(Db::open(dir.path(), opts()), Err(Error::Locked { .. })));
    drop(db);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.get(&ok_key).unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn matrix_profile_builds_rows_merges_and_compacts_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts();
    o.l0 = stratakv::L0Kind::Matrix;
    let n = 30_000u32;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let mut max_rows = 0;
    for i in 0..n {
        db.put(format!("key{:08}", (i as u64 * 7919) % n as u64), format!("value{i}-{}", "x".repeat(40))).unwrap();
        if i % 1000 == 0 {
            max_rows = max_rows.max(db.stats().matrix_rows);
        }
    }
    let s = db.stats();
    println!("{s}");
    assert_eq!(s.l0, "matrix");
    assert!(max_rows > 3, "rows never accumulated: {max_rows}");
    assert!(s.columns > 0, "no column compaction ran");
    assert!(s.levels[1].files > 0, "nothing reached L1");
    for i in (0..n).step_by(7) {
        let k = format!("key{:08}", (i as u64 * 7919) % n as u64);
        assert_eq!(db.get(&k).unwrap(), Some(format!("value{i}-{}", "x".repeat(40)).into_bytes()));
    }
    db.compact_range(..).unwrap();
    let s = db.stats();
    assert_eq!(s.matrix_rows, 0, "compact_range left rows: {s}");
    assert_eq!(db.iter(..).unwrap().count(), n as usize);
    db.close().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.stats().l0, "matrix");
    assert_eq!(db.iter(..).unwrap().count(), n as usize);
}

/// A database whose PM region is an ordinary file (msync makes it durable),
/// or None, with the reason on stderr, where the temp dir is on tmpfs.
fn db_on_a_file_region() -> Option<(tempfile::TempDir, Db)> {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let placement = db.stats().pm_placement;
    if placement != "file" {
        eprintln!("skipped: the PM region is on {placement}, not an ordinary file");
        return None;
    }
    Some((dir, db))
}

/// DURABILITY.md: on an ordinary-file PM region a `sync` write msyncs the
/// log before it returns, and a write without `sync` does not (it is left
/// to the periodic msync, off here). A new log extent's head word is
/// msynced by a background thread, so the first write below (which
/// allocates one) is followed by a `Db::sync` and a quiet moment before
/// counting starts.
#[test]
fn sync_writes_msync_an_ordinary_file_region_and_plain_writes_do_not() {
    let Some((_dir, db)) = db_on_a_file_region() else { return };
    db.put(b"first", b"v").unwrap();
    db.sync().unwrap();
    let mut before = db.stats().pm_syncs;
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = db.stats().pm_syncs;
        if now == before {
            break;
        }
        before = now;
    }
    for i in 0..100 {
        db.put(format!("plain{i}"), b"v").unwrap();
    }
    assert_eq!(db.stats().pm_syncs, before, "plain writes must not msync");
    db.put_opt(b"durable", b"v", &WriteOptions { sync: true }).unwrap();
    assert!(db.stats().pm_syncs > before, "a sync write must msync before it returns");
}

/// DURABILITY.md: fresh log extents are written through ahead of the
/// writer (`Extent::write_through_once`) only while writers wait for log
/// msyncs; with plain writes the periodic msync converts their blocks off
/// the write path, and a write-through would write every page twice.
#[test]
fn log_extents_are_written_through_only_while_writers_wait_for_msyncs() {
    let Some((_dir, db)) = db_on_a_file_region() else { return };
    let value = vec![7u8; 1000];
    // Plain writes across many log extents (64 KiB each here).
    for i in 0..1000 {
        db.put(format!("plain{i:05}"), &value).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(db.stats().pm_write_throughs, 0);
    // Sync writes: the extents started after them are written through
    // (by the prefault thread, so wait for it).
    for i in 0..300 {
        db.put_opt(format!("durable{i:05}"), &value, &WriteOptions { sync: true }).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.stats().pm_write_throughs == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(db.stats().pm_write_throughs > 0);
}

/// DURABILITY.md: on tmpfs (/dev/shm) there is nothing to msync: the
/// region is DRAM, so a power loss loses it, and the engine then refuses
/// to open rather than silently serving the tables alone.
#[test]
fn a_lost_shm_region_is_a_clear_error_on_open() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: no /dev/shm");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let pm = tempfile::tempdir_in(shm).unwrap();
    let mut o = opts();
    o.pm_dir = Some(pm.path().to_path_buf());
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        assert_eq!(db.stats().pm_placement, "shm");
        db.put_opt(b"k", b"v", &WriteOptions { sync: true }).unwrap();
        db.close().unwrap();
    }
    // A power loss empties /dev/shm.
    for e in std::fs::read_dir(pm.path()).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    match Db::open(dir.path(), o) {
        Err(Error::Corruption { .. }) => {}
        Err(e) => panic!("expected a corruption error naming the region, got {e}"),
        Ok(_) => panic!("opened without its PM region"),
    }
}

/// Regression (strata-stress fs-fault, seed 467: a deleted key came back
/// after a manual compaction): `compact_range` over `a..=b` reaches L0
/// table C (a..k), through it B (k..p, with p's tombstone), and through B
/// the oldest table A (p). The range grew once only, so A stayed in L0
/// while B and C went to L1, where p's tombstone was dropped at the bottom:
/// A's old p was back.
#[test]
fn compact_range_takes_every_l0_table_its_tables_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts();
    o.l0 = stratakv::L0Kind::Sstable;
    o.disable_auto_compaction = true;
    let db = Db::open(dir.path(), o).unwrap();
    db.put(b"p", b"old").unwrap();
    db.flush().unwrap();
    db.put(b"k", b"1").unwrap();
    db.delete(b"p").unwrap();
    db.flush().unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"k", b"2").unwrap();
    db.flush().unwrap();
    db.compact_range(b"a".to_vec()..=b"b".to_vec()).unwrap();
    assert_eq!(db.get(b"p").unwrap(), None, "a deleted key is back");
    assert_eq!(db.get(b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
}
