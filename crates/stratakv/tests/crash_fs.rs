//! The SSD side at a power cut and after I/O errors, with the in-memory
//! file system that keeps only what was fsynced (`MemFs`), the
//! fault-injecting wrapper (`FaultFs`) and simulated PM: LevelDB's
//! fault_injection_test and the fsyncgate rule, as deterministic tests.
//! (`strata-stress --mode fs-fault` runs the randomized version.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::SeedableRng;
use strata_pmem::{CrashModel, SimPm};
use stratakv::fs::{FaultError, FaultFs, FaultOp, FaultPlan, Fs, FsCrashMode, MemFs};
use stratakv::{Db, Error, L0Kind, Options, WriteOptions};

const DIR: &str = "/db";

fn opts(l0: L0Kind, sim: &Arc<SimPm>, fs: Arc<dyn stratakv::fs::Fs>) -> Options {
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.pm_slot_bytes = 8 << 10;
    o.pm_size = 2 << 20;
    o.write_buffer_size = 8 << 10;
    o.matrix_bytes = 512 << 10;
    o.column_bytes = 32 << 10;
    o.target_file_size = 16 << 10;
    o.pm_sim = Some(sim.clone());
    o.fs = fs;
    o
}

/// A simulated PM region, an in-memory disk, a fault injector over it, and
/// options that open a database on the injector.
fn faulty(l0: L0Kind) -> (Arc<SimPm>, MemFs, FaultFs, Options) {
    let sim = Arc::new(SimPm::new(2 << 20));
    let mem = MemFs::new();
    let fault = FaultFs::over_mem(mem.clone());
    let o = opts(l0, &sim, Arc::new(fault.clone()));
    (sim, mem, fault, o)
}

fn k(i: u32) -> String {
    format!("key{i:05}")
}

fn v(i: u32, round: u32) -> String {
    format!("value-{i}-{round}-{}", "x".repeat((i % 50) as usize))
}

/// Freezes both devices at one instant and builds the images a power cut
/// leaves (a region modelling an ordinary file stays one).
fn power_cut(mem: &MemFs, sim: &SimPm, mode: FsCrashMode, seed: u64) -> (MemFs, Arc<SimPm>) {
    let (snap, cs) = mem.snapshot_with(|| sim.crash_state());
    let fs = snap.restore(mode, &mut StdRng::seed_from_u64(seed));
    let image = cs.minimal_image();
    let sim = if sim.is_file_like() { SimPm::file_from_image(image) } else { SimPm::from_image(image) };
    (fs, Arc::new(sim))
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter(..).unwrap().collect()
}

#[test]
fn power_cut_keeps_every_acknowledged_write() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        for (m, mode) in
            [FsCrashMode::DropUnsynced, FsCrashMode::KeepNamesDropData, FsCrashMode::TornTail].into_iter().enumerate()
        {
            let sim = Arc::new(SimPm::new(2 << 20));
            let mem = MemFs::new();
            let db = Db::open(DIR, opts(l0, &sim, Arc::new(mem.clone()))).unwrap();
            let mut want = BTreeMap::new();
            for round in 0..3u32 {
                for i in 0..600u32 {
                    let key = k((i * 7 + round) % 500);
                    let val = v(i, round);
                    db.put_opt(&key, &val, &WriteOptions { sync: i % 2 == 0 }).unwrap();
                    want.insert(key.into_bytes(), val.into_bytes());
                }
                if round == 1 {
                    db.compact_range(..).unwrap();
                }
            }
            let (fs, sim2) = power_cut(&mem, &sim, mode, m as u64);
            drop(db);
            let db = Db::open(DIR, opts(l0, &sim2, Arc::new(fs))).unwrap();
            assert!(contents(&db) == want, "{l0:?} {mode:?}: acknowledged writes lost after a power cut");
            db.verify_checksums().unwrap();
        }
    }
}

/// The same power cut with the PM region in an ordinary file (the default
/// placement), where only msync makes anything durable: the superblock, the
/// extent heads, the rows and the log entries the MANIFEST relies on must
/// all have been msynced. Every write acknowledged before the last `sync`
/// write survives; the image keeps nothing that was not msynced, or (the
/// kernel may write back any dirty page at any time) a random part of it.
#[test]
fn power_cut_on_an_ordinary_file_region_keeps_every_write_before_a_sync() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        for (m, mode) in
            [FsCrashMode::DropUnsynced, FsCrashMode::KeepNamesDropData, FsCrashMode::TornTail].into_iter().enumerate()
        {
            let sim = Arc::new(SimPm::new_file(2 << 20));
            let mem = MemFs::new();
            let db = Db::open(DIR, opts(l0, &sim, Arc::new(mem.clone()))).unwrap();
            assert_eq!(db.stats().pm_placement, "file");
            let mut want = BTreeMap::new();
            for round in 0..3u32 {
                for i in 0..600u32 {
                    let key = k((i * 7 + round) % 500);
                    let val = v(i, round);
                    // Plain writes, with a sync write now and then (the last one too).
                    db.put_opt(&key, &val, &WriteOptions { sync: i % 97 == 0 || i == 599 }).unwrap();
                    want.insert(key.into_bytes(), val.into_bytes());
                }
                if round == 1 {
                    db.compact_range(..).unwrap();
                }
            }
            let (snap, cs) = mem.snapshot_with(|| sim.crash_state());
            drop(db);
            let mut rng = StdRng::seed_from_u64(m as u64);
            for image in [cs.minimal_image(), cs.random_image(CrashModel::LinePrefix, &mut rng)] {
                let fs = snap.restore(mode, &mut rng);
                let sim2 = Arc::new(SimPm::file_from_image(image));
                let db = Db::open(DIR, opts(l0, &sim2, Arc::new(fs))).unwrap();
                assert!(contents(&db) == want, "{l0:?} {mode:?}: writes before a sync lost after a power cut");
                db.verify_checksums().unwrap();
            }
        }
    }
}

/// Plain writes, then `flush`: once it returns they are in tables or
/// matrix rows, and a power cut keeps them all. For the matrix this needs
/// the log entries a row points to msynced before the MANIFEST names it.
#[test]
fn flushed_writes_on_an_ordinary_file_region_survive_a_power_cut() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        let sim = Arc::new(SimPm::new_file(2 << 20));
        let mem = MemFs::new();
        let mut o = opts(l0, &sim, Arc::new(mem.clone()));
        o.write_buffer_size = 64 << 10;
        let db = Db::open(DIR, o.clone()).unwrap();
        let mut want = BTreeMap::new();
        for i in 0..300u32 {
            db.put(k(i), v(i, 0)).unwrap();
            want.insert(k(i).into_bytes(), v(i, 0).into_bytes());
        }
        db.flush().unwrap();
        let (fs, sim) = power_cut(&mem, &sim, FsCrashMode::DropUnsynced, 0);
        drop(db);
        o.fs = Arc::new(fs);
        o.pm_sim = Some(sim);
        let db = Db::open(DIR, o).unwrap();
        assert!(contents(&db) == want, "{l0:?}: flushed writes lost after a power cut");
        db.verify_checksums().unwrap();
    }
}

/// A fresh database whose only write is one `sync` put: a power cut right
/// after it must keep it (the region's superblock and the log extent's
/// head have to be msynced too, not only the entry).
#[test]
fn first_sync_write_on_an_ordinary_file_region_survives_a_power_cut() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        let sim = Arc::new(SimPm::new_file(2 << 20));
        let mem = MemFs::new();
        let db = Db::open(DIR, opts(l0, &sim, Arc::new(mem.clone()))).unwrap();
        db.put_opt(b"k", b"v", &WriteOptions { sync: true }).unwrap();
        let (fs, img) = {
            let (snap, cs) = mem.snapshot_with(|| sim.crash_state());
            (snap.restore(FsCrashMode::DropUnsynced, &mut StdRng::seed_from_u64(0)), cs.minimal_image())
        };
        drop(db);
        let db = Db::open(DIR, opts(l0, &Arc::new(SimPm::file_from_image(img)), Arc::new(fs))).unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]), "{l0:?}");
    }
}

/// Concurrent `sync` writers while every msync fails: none of them may be
/// acknowledged (a group's failed msync poisons before the group is
/// published, so followers see the poison), and later writes are refused.
#[test]
fn no_sync_write_is_acknowledged_when_its_msync_fails() {
    for round in 0..20 {
        let sim = Arc::new(SimPm::new_file(2 << 20));
        let db = Db::open(DIR, opts(L0Kind::Matrix, &sim, Arc::new(MemFs::new()))).unwrap();
        db.put(b"before", b"x").unwrap();
        sim.fail_syncs(true);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || db.put_opt(k(t), v(t, round), &WriteOptions { sync: true }))
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|h| h.join().unwrap()).collect();
        let acked = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(acked, 0, "round {round}: sync writes acknowledged although every msync failed: {results:?}");
        assert!(matches!(db.put(b"after", b"x"), Err(Error::Poisoned(_))));
    }
}

/// `Db::sync` whose msync fails poisons at once, even if the disk recovers:
/// the kernel may have dropped the dirty pages, so a later msync that
/// succeeds would not make the earlier writes durable (fsyncgate).
#[test]
fn a_failed_db_sync_poisons() {
    let sim = Arc::new(SimPm::new_file(2 << 20));
    let db = Db::open(DIR, opts(L0Kind::Sstable, &sim, Arc::new(MemFs::new()))).unwrap();
    db.put(b"k", b"v").unwrap();
    sim.fail_syncs(true);
    assert!(db.sync().is_err());
    sim.fail_syncs(false);
    assert!(matches!(db.put(b"after", b"x"), Err(Error::Poisoned(_))));
    assert!(db.sync().is_err(), "a sync after a failed one must not report success");
}

#[test]
fn failed_fsync_poisons_and_the_file_is_never_synced_again() {
    for target in ["sst", "MANIFEST"] {
        let (sim, mem, fault, mut o) = faulty(L0Kind::Sstable);
        // Only flushes sync tables and edits here: a compaction's failed
        // sync poisons when its thread settles, which may be after the
        // flush below has returned (covered by strata-stress fs-fault).
        o.disable_auto_compaction = true;
        let db = Db::open(DIR, o).unwrap();
        for i in 0..200 {
            db.put(k(i), v(i, 0)).unwrap();
        }
        fault.inject(FaultPlan { path_contains: Some(target), ..FaultPlan::nth(FaultOp::Sync, 1, FaultError::Eio) });
        for i in 200..400 {
            // Writes go to PM and succeed until the flush fails and poisons.
            if db.put(k(i), v(i, 0)).is_err() {
                break;
            }
        }
        let err = db.flush().unwrap_err();
        assert!(matches!(err, Error::Poisoned(_) | Error::Io { .. }), "{target}: {err}");
        assert!(matches!(db.put(b"after", b"x"), Err(Error::Poisoned(_))), "{target}: writes must be refused");
        let s = fault.stats();
        assert_eq!((s.syncs_after_failed_sync, s.appends_after_failed_sync), (0, 0), "{target}: fsyncgate");
        drop(db);
        // Reopen (same boot): everything acknowledged is there.
        let db = Db::open(DIR, opts(L0Kind::Sstable, &sim, Arc::new(mem.clone()))).unwrap();
        for i in 0..200 {
            assert_eq!(db.get(k(i)).unwrap(), Some(v(i, 0).into_bytes()), "{target}");
        }
    }
}

/// Regression (found by `strata-stress --mode fs-fault`, seed 16): an fsync
/// of the MANIFEST fails (Linux may then mark the page clean without
/// writing it); the database is reopened in the same boot, reads the
/// record from the page cache, *appends* to that MANIFEST and syncs it
/// successfully. A power cut then leaves a hole in the middle of the
/// MANIFEST and the database no longer opens. Reopening must not append
/// to a MANIFEST whose earlier bytes may not be durable.
#[test]
fn manifest_after_a_failed_fsync_and_a_reopen_survives_a_power_cut() {
    let (sim, mem, fault, o) = faulty(L0Kind::Sstable);
    let db = Db::open(DIR, o).unwrap();
    let mut want = BTreeMap::new();
    for i in 0..300u32 {
        db.put_opt(k(i), v(i, 0), &WriteOptions { sync: true }).unwrap();
        want.insert(k(i).into_bytes(), v(i, 0).into_bytes());
    }
    db.flush().unwrap();
    fault.inject(FaultPlan { path_contains: Some("MANIFEST"), ..FaultPlan::nth(FaultOp::Sync, 1, FaultError::Eio) });
    // A write that fails (the flush poisoned the database meanwhile) may or
    // may not be applied: stop there and accept either.
    let mut maybe = None;
    for i in 300..400u32 {
        if db.put_opt(k(i), v(i, 0), &WriteOptions { sync: true }).is_ok() {
            want.insert(k(i).into_bytes(), v(i, 0).into_bytes());
        } else {
            maybe = Some((k(i).into_bytes(), v(i, 0).into_bytes()));
            break;
        }
    }
    // The flush fails, unless the failed fsync was a concurrent
    // compaction's edit: the flush's own edit then starts a new MANIFEST
    // and succeeds before that compaction poisons the database. Either
    // way a MANIFEST fsync failed before the reopen below.
    let flushed = db.flush();
    assert!(fault.fired(), "the MANIFEST fsync fault never fired (flush: {flushed:?})");
    drop(db);
    fault.clear();
    let db = Db::open(DIR, opts(L0Kind::Sstable, &sim, Arc::new(fault.clone()))).unwrap();
    for i in 400..700u32 {
        db.put_opt(k(i), v(i, 1), &WriteOptions { sync: true }).unwrap();
        want.insert(k(i).into_bytes(), v(i, 1).into_bytes());
    }
    db.flush().unwrap();
    let (fs, sim2) = power_cut(&mem, &sim, FsCrashMode::DropUnsynced, 0);
    drop(db);
    let db = match Db::open(DIR, opts(L0Kind::Sstable, &sim2, Arc::new(fs))) {
        Ok(db) => db,
        Err(e) => panic!("the database does not open after the power cut: {e}"),
    };
    let mut got = contents(&db);
    if let Some((mk, mv)) = maybe {
        if got.get(&mk) == Some(&mv) && !want.contains_key(&mk) {
            got.remove(&mk);
        }
    }
    let lost: Vec<_> =
        want.keys().filter(|k| got.get(*k) != want.get(*k)).map(|k| String::from_utf8_lossy(k).into_owned()).collect();
    assert!(
        lost.is_empty(),
        "acknowledged writes lost: {} keys, first {:?}",
        lost.len(),
        lost.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(got.len(), want.len(), "keys that were never acknowledged appeared");
}

/// Regression (found by `strata-stress --mode fs-fault`, seed 103): a
/// MANIFEST edit that publishes a new matrix row fails (here ENOSPC on its
/// fsync, retried; EIO behaves alike), the row is dropped and its PM slots
/// are reused, but the edit is already in the MANIFEST that CURRENT names
/// (in the page cache, and possibly on disk). A crash then leaves a
/// MANIFEST naming a row whose PM slots hold something else, and the
/// database does not open. PM that a failed edit references must stay
/// untouched until the process restarts.
#[test]
fn matrix_row_of_a_failed_manifest_edit_is_not_reused() {
    let (sim, mem, fault, mut o) = faulty(L0Kind::Matrix);
    o.pm_full_timeout_ms = 200;
    let db = Db::open(DIR, o.clone()).unwrap();
    let mut want = BTreeMap::new();
    for i in 0..200u32 {
        db.put(k(i), v(i, 0)).unwrap();
        want.insert(k(i).into_bytes(), v(i, 0).into_bytes());
    }
    db.flush().unwrap();
    fault.inject(FaultPlan {
        sticky: true,
        path_contains: Some("MANIFEST"),
        ..FaultPlan::nth(FaultOp::Sync, 1, FaultError::Enospc)
    });
    for i in 200..400u32 {
        if db.put(k(i), v(i, 1)).is_err() {
            break;
        }
        want.insert(k(i).into_bytes(), v(i, 1).into_bytes());
    }
    // Let the flush thread fail and retry (rebuilding the row) a few times.
    let start = std::time::Instant::now();
    while fault.stats().fired.len() < 4 && start.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(fault.stats().fired.len() >= 2, "the MANIFEST fsync never failed twice");
    // The process dies: the kernel keeps every write (page cache and PM file).
    let (snap, img) = mem.snapshot_with(|| sim.visible_image());
    fault.power_cut();
    drop(db);
    let fs = snap.restore(FsCrashMode::KeepAll, &mut StdRng::seed_from_u64(0));
    let mut o2 = o.clone();
    o2.pm_sim = Some(Arc::new(SimPm::from_image(img)));
    o2.fs = Arc::new(fs);
    let db = match Db::open(DIR, o2) {
        Ok(db) => db,
        Err(e) => panic!("the database does not open after the crash: {e}"),
    };
    let got = contents(&db);
    let lost = want.keys().filter(|k| got.get(*k) != want.get(*k)).count();
    assert_eq!(lost, 0, "acknowledged writes lost");
}

/// Regression (found by `strata-stress --mode fs-fault`: an episode hung):
/// with the disk full, background flushes retry forever, and `Db::flush`
/// waited for them forever. Like writers, it must give up with
/// `DiskFull` after `pm_full_timeout_ms`, and work again once space is freed.
#[test]
fn flush_on_a_full_disk_returns_disk_full() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        let (_sim, _mem, fault, mut o) = faulty(l0);
        o.pm_full_timeout_ms = 200;
        let db = Db::open(DIR, o).unwrap();
        for i in 0..100u32 {
            db.put(k(i), v(i, 0)).unwrap();
        }
        fault.inject(FaultPlan { sticky: true, ..FaultPlan::nth(FaultOp::Append, 1, FaultError::Enospc) });
        let (tx, rx) = std::sync::mpsc::channel();
        let db2 = db.clone();
        std::thread::spawn(move || {
            let _ = tx.send(db2.flush());
        });
        // A liveness bound, not a timing assertion: without the fix it never returns.
        let r = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("Db::flush hung on a full disk");
        assert!(matches!(r, Err(Error::DiskFull { .. })), "{l0:?}: {r:?}");
        assert!(db.stats().poisoned.is_none(), "a full disk must not poison");
        fault.clear();
        db.flush().unwrap();
        for i in 0..100u32 {
            assert_eq!(db.get(k(i)).unwrap(), Some(v(i, 0).into_bytes()));
        }
    }
}

/// Regression (found by `strata-stress --mode fs-fault`, seed 1277: "flush
/// after space was freed failed: disk full: write /db/MANIFEST-126593"):
/// once space is freed, `Db::flush` must succeed without a reopen. It gave
/// up with the `DiskFull` of a background attempt made *before* the space
/// was freed, because the background slept out its back-off (250 ms) and
/// nobody asked it to retry within `pm_full_timeout_ms`. Meanwhile every
/// failed retry left a partial MANIFEST behind and burned a file number.
#[test]
fn flush_after_space_is_freed_does_not_report_a_stale_disk_full() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        let (sim, mem, fault, mut o) = faulty(l0);
        o.disable_auto_compaction = true;
        // Shorter than the background back-off: only a failure seen after
        // the caller asked for a retry may be reported to it.
        o.pm_full_timeout_ms = 30;
        let db = Db::open(DIR, o).unwrap();
        for i in 0..100u32 {
            db.put(k(i), v(i, 0)).unwrap();
        }
        fault.inject(FaultPlan {
            sticky: true,
            path_contains: Some("MANIFEST"),
            ..FaultPlan::nth(FaultOp::Append, 1, FaultError::Enospc)
        });
        // The disk stays full across a few background retries (each one
        // after the first rolls a new MANIFEST, whose write fails).
        let start = std::time::Instant::now();
        while fault.stats().fired.len() < 4 {
            let r = db.flush();
            assert!(matches!(r, Err(Error::DiskFull { .. })), "{l0:?}: {r:?}");
            assert!(start.elapsed() < std::time::Duration::from_secs(60), "{l0:?}: the background never retried");
        }
        assert!(db.stats().poisoned.is_none(), "{l0:?}: a full disk must not poison");
        fault.clear();
        db.flush().unwrap_or_else(|e| panic!("{l0:?}: flush after space was freed: {e}"));
        db.put_opt(b"after", b"x", &WriteOptions { sync: true }).unwrap();
        // The failed MANIFESTs were removed, not left to fill the disk.
        let manifests: Vec<String> =
            mem.list(std::path::Path::new(DIR)).unwrap().into_iter().filter(|n| n.starts_with("MANIFEST-")).collect();
        assert_eq!(manifests.len(), 1, "{l0:?}: {manifests:?}");
        for i in 0..100u32 {
            assert_eq!(db.get(k(i)).unwrap(), Some(v(i, 0).into_bytes()), "{l0:?}");
        }
        drop(db);
        let db = Db::open(DIR, opts(l0, &sim, Arc::new(mem.clone()))).unwrap();
        assert_eq!(db.get(b"after").unwrap(), Some(b"x".to_vec()), "{l0:?}");
        for i in 0..100u32 {
            assert_eq!(db.get(k(i)).unwrap(), Some(v(i, 0).into_bytes()), "{l0:?}");
        }
    }
}

/// Tables written by a flush or compaction whose MANIFEST edit failed on a
/// full disk are not named by any version, but the failed record may sit
/// in the MANIFEST that CURRENT names, so they are kept until a new
/// MANIFEST replaces that one, and removed then, without a reopen: every
/// retry on a disk that stays full writes its tables again, and keeping
/// the old ones would hold the space the retry needs.
#[test]
fn tables_of_a_failed_manifest_edit_are_removed_once_a_new_manifest_is_current() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        let (sim, mem, fault, mut o) = faulty(l0);
        o.disable_auto_compaction = true;
        o.pm_full_timeout_ms = 30;
        let db = Db::open(DIR, o).unwrap();
        let tables = |db: &Db| -> (usize, usize) {
            let on_disk =
                mem.list(std::path::Path::new(DIR)).unwrap().into_iter().filter(|n| n.ends_with(".sst")).count();
            let s = db.stats();
            // With the matrix, "level 0" counts rows in PM, not tables.
            let levels = s.levels.iter().filter(|l| l0 == L0Kind::Sstable || l.level > 0);
            (on_disk, levels.map(|l| l.files).sum::<usize>() + s.runs.iter().map(|r| r.files).sum::<usize>())
        };
        for round in 0..2u32 {
            for i in 0..300u32 {
                db.put(k(i), v(i, round)).unwrap();
            }
            if l0 == L0Kind::Matrix {
                // Rows first; the tables come from moving them into L1.
                db.flush().unwrap();
            }
        }
        fault.inject(FaultPlan {
            sticky: true,
            path_contains: Some("MANIFEST"),
            ..FaultPlan::nth(FaultOp::Append, 1, FaultError::Enospc)
        });
        let start = std::time::Instant::now();
        while fault.stats().fired.len() < 3 {
            let r = if l0 == L0Kind::Matrix { db.compact_range(..) } else { db.flush() };
            assert!(matches!(r, Err(Error::DiskFull { .. })), "{l0:?}: {r:?}");
            assert!(start.elapsed() < std::time::Duration::from_secs(60), "{l0:?}: no retry");
        }
        let (on_disk, named) = tables(&db);
        assert!(on_disk > named, "{l0:?}: the failed edits' tables are still there ({on_disk} vs {named})");
        fault.clear();
        if l0 == L0Kind::Matrix {
            db.compact_range(..).unwrap();
        } else {
            db.flush().unwrap();
        }
        // One more change after the MANIFEST roll, so the removal has run.
        db.put(b"after", b"x").unwrap();
        db.flush().unwrap();
        let (on_disk, named) = tables(&db);
        assert_eq!(on_disk, named, "{l0:?}: tables of failed edits left behind");
        for i in 0..300u32 {
            assert_eq!(db.get(k(i)).unwrap(), Some(v(i, 1).into_bytes()), "{l0:?}");
        }
        drop(db);
        let db = Db::open(DIR, opts(l0, &sim, Arc::new(mem.clone()))).unwrap();
        for i in 0..300u32 {
            assert_eq!(db.get(k(i)).unwrap(), Some(v(i, 1).into_bytes()), "{l0:?}");
        }
        assert_eq!(db.get(b"after").unwrap(), Some(b"x".to_vec()), "{l0:?}");
    }
}

/// Regression (found while writing the fs-fault mode): `compact_range`
/// poisoned the database on any error, a full disk included, although a
/// full disk is retryable everywhere else (background flushes and
/// compactions back off and retry; writers get `DiskFull`).
#[test]
fn compact_range_on_a_full_disk_does_not_poison() {
    let (_sim, _mem, fault, mut o) = faulty(L0Kind::Sstable);
    o.disable_auto_compaction = true;
    o.pm_full_timeout_ms = 200;
    let db = Db::open(DIR, o).unwrap();
    for round in 0..3u32 {
        for i in 0..300u32 {
            db.put(k(i), v(i, round)).unwrap();
        }
        db.flush().unwrap();
    }
    fault.inject(FaultPlan { sticky: true, ..FaultPlan::nth(FaultOp::Append, 1, FaultError::Enospc) });
    let r = db.compact_range(..);
    assert!(matches!(r, Err(Error::DiskFull { .. })), "{r:?}");
    assert!(db.stats().poisoned.is_none(), "a full disk must not poison: {:?}", db.stats().poisoned);
    fault.clear();
    db.compact_range(..).unwrap();
    db.put(b"after", b"x").unwrap();
    for i in 0..300u32 {
        assert_eq!(db.get(k(i)).unwrap(), Some(v(i, 2).into_bytes()));
    }
}

/// Regression (found by `strata-stress --mode fs-fault`, seeds 34, 112,
/// 205, 302): with the matrix L0, `compact_range` moves the matrix into L1
/// in the caller's thread; an I/O error there (an SST write, or the fsync
/// of the directory) was returned without poisoning, so the database kept
/// accepting writes after a failed fsync. Background compactions and the
/// SSTable-L0 path poison in that case.
#[test]
fn compact_range_io_error_in_the_matrix_poisons() {
    for op in [FaultOp::Append, FaultOp::SyncDir, FaultOp::Sync] {
        let (sim, mem, fault, mut o) = faulty(L0Kind::Matrix);
        o.disable_auto_compaction = true;
        let db = Db::open(DIR, o).unwrap();
        for round in 0..2u32 {
            for i in 0..300u32 {
                db.put(k(i), v(i, round)).unwrap();
            }
            db.flush().unwrap();
        }
        fault.inject(FaultPlan {
            path_contains: Some(if op == FaultOp::SyncDir { "db" } else { ".sst" }),
            ..FaultPlan::nth(op, 1, FaultError::Eio)
        });
        let r = db.compact_range(..);
        assert!(r.is_err(), "{op:?}: the injected EIO was not reported");
        assert!(fault.fired(), "{op:?}: the fault never fired");
        assert!(
            matches!(db.put(b"after", b"x"), Err(Error::Poisoned(_))),
            "{op:?}: writes must be refused after an I/O error"
        );
        drop(db);
        fault.clear();
        let db = Db::open(DIR, opts(L0Kind::Matrix, &sim, Arc::new(mem.clone()))).unwrap();
        for i in 0..300u32 {
            assert_eq!(db.get(k(i)).unwrap(), Some(v(i, 1).into_bytes()), "{op:?}");
        }
    }
}

/// Plain writes on an ordinary-file region reach the page cache, the
/// process dies (nothing msynced), and the database is reopened: recovery
/// rebuilds the memtable from the log extent it finds there. Returns the
/// reopened database, its disk and region, and its options.
fn reopen_after_a_process_crash(l0: L0Kind) -> (Db, MemFs, Arc<SimPm>, Options) {
    let sim = Arc::new(SimPm::new_file(4 << 20));
    let mem = MemFs::new();
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.pm_size = 4 << 20;
    o.pm_slot_bytes = 64 << 10;
    o.write_buffer_size = 1 << 20;
    o.pm_sync_interval_ms = 0; // no background msync: the window is explicit
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(mem.clone());
    let db = Db::open(DIR, o.clone()).unwrap();
    for i in 0..20u32 {
        db.put(k(i), v(i, 0)).unwrap();
    }
    // The page cache (the sim's visible bytes) and every file the kernel
    // has keep everything.
    let (snap, ()) = mem.snapshot_with(|| ());
    std::mem::forget(db);
    let fs = snap.restore(FsCrashMode::KeepAll, &mut StdRng::seed_from_u64(0));
    o.fs = Arc::new(fs.clone());
    let db = Db::open(DIR, o.clone()).unwrap();
    assert_eq!(db.get(k(3)).unwrap().as_deref(), Some(v(3, 0).as_bytes()), "process crash lost a write");
    (db, fs, sim, o)
}

/// Cuts power under `db` and opens what is left.
fn reopen_after_a_power_cut(db: Db, fs: &MemFs, sim: &SimPm, mut o: Options) -> Db {
    let (fs, sim) = power_cut(fs, sim, FsCrashMode::DropUnsynced, 1);
    std::mem::forget(db);
    o.fs = Arc::new(fs);
    o.pm_sim = Some(sim);
    Db::open(DIR, o).unwrap()
}

/// Review (PM changes): after a process crash and a reopen (see
/// `reopen_after_a_process_crash`), a `sync` write goes to a new log
/// extent and is msynced alone; unless the open made the recovered
/// extent's entries durable, a power cut then loses them and, with them
/// (recovery stops at the gap), the acknowledged sync write.
#[test]
fn sync_write_after_reopen_from_a_process_crash_survives_a_power_cut() {
    let (db, fs, sim, o) = reopen_after_a_process_crash(L0Kind::Matrix);
    db.put_opt(b"acked", b"sync", &WriteOptions { sync: true }).unwrap();
    let db = reopen_after_a_power_cut(db, &fs, &sim, o);
    assert_eq!(db.get(b"acked").unwrap().as_deref(), Some(&b"sync"[..]), "acknowledged sync write lost");
    for i in 0..20u32 {
        assert_eq!(db.get(k(i)).unwrap().as_deref(), Some(v(i, 0).as_bytes()), "write before an acked sync lost");
    }
}

/// Review (PM changes), the matrix side of the same gap: after a process
/// crash, the recovered memtable is sealed into a matrix row that points
/// into the recovered log extent; the MANIFEST must not name that row
/// before the extent's entries are durable.
#[test]
fn flush_after_reopen_from_a_process_crash_survives_a_power_cut() {
    let (db, fs, sim, o) = reopen_after_a_process_crash(L0Kind::Matrix);
    db.flush().unwrap();
    let db = reopen_after_a_power_cut(db, &fs, &sim, o);
    for i in 0..20u32 {
        assert_eq!(db.get(k(i)).unwrap().as_deref(), Some(v(i, 0).as_bytes()), "flushed write {i} lost");
    }
}
