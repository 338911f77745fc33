//! A PM region filled by writers: the flush of the memtables that filled it
//! still gets room for its level-0 structure (a matrix row), so writers
//! see back-pressure and go on, never a wedge; and where room truly cannot
//! be made, writers get `PmFull` after `pm_full_timeout_ms`, and later
//! writers get it at once instead of each waiting the whole timeout again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::time::{Duration, Instant};

use stratakv::{Db, Error, L0Kind, Options};

/// Runs `f` on a thread of its own and returns its result, failing the test
/// if it takes longer than `limit` (a wedged engine fails the test instead
/// of hanging it; the stuck thread is left behind for the process to end).
fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        // The thread ended without a result: it panicked; fail with its message.
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => panic!("{what}: ended without a result"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still running after {limit:?} (wedged)"),
    }
}

/// A 1 MiB region of 16 slots of 64 KiB, and memtables larger than the
/// whole region: the log of the first memtable alone fills the region
/// before the memtable is sealed, so sealing it into a row needs PM that
/// the log must have left free (the strata-server report: a 16 MiB region
/// and 8 MiB memtables wedged about one start in eight, when the writer
/// took the last slots before the flush thread built its row).
fn small_region() -> Options {
    let mut o = Options::for_tests();
    o.l0 = L0Kind::Matrix;
    o.pm_size = 1 << 20;
    o.pm_slot_bytes = 64 << 10;
    o.matrix_bytes = 256 << 10;
    o.write_buffer_size = 4 << 20;
    o.pm_full_timeout_ms = 3_000;
    o
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(1000, b'v');
    v
}

#[test]
fn a_writer_that_fills_the_pm_region_with_one_memtable_is_not_wedged() {
    let dir = tempfile::tempdir().unwrap();
    let o = small_region();
    let db = Db::open(dir.path(), o.clone()).unwrap();
    // About 4 MiB of log: four times the region, so it fills repeatedly.
    let n = 4_000u32;
    let db = within(Duration::from_secs(60), "writing 4x the PM region", move || {
        for i in 0..n {
            if let Err(e) = db.put(format!("k{i:06}"), value(i)) {
                panic!("put k{i:06}: {e}");
            }
        }
        db
    });
    for i in (0..n).step_by(97) {
        assert_eq!(db.get(format!("k{i:06}")).unwrap(), Some(value(i)), "k{i:06}");
    }
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..n {
        assert_eq!(db.get(format!("k{i:06}")).unwrap(), Some(value(i)), "k{i:06} lost at reopen");
    }
}

/// Same, with memtables half the region as the server's 16 MiB / 8 MiB
/// configuration has them, several rounds of writers (the wedge there
/// depended on the flush thread's timing).
#[test]
fn writers_over_memtables_half_the_pm_region_are_not_wedged() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small_region();
    o.write_buffer_size = 512 << 10;
    let db = Db::open(dir.path(), o).unwrap();
    let n = 6_000u32;
    let db = within(Duration::from_secs(60), "writing 6x the PM region", move || {
        let mut b = stratakv::WriteBatch::new();
        for i in 0..n {
            b.put(format!("k{i:06}"), value(i));
            if i % 50 == 49 {
                let full = std::mem::replace(&mut b, stratakv::WriteBatch::new());
                if let Err(e) = db.write(full) {
                    panic!("batch ending at k{i:06}: {e}");
                }
            }
        }
        db
    });
    for i in (0..n).step_by(89) {
        assert_eq!(db.get(format!("k{i:06}")).unwrap(), Some(value(i)), "k{i:06}");
    }
}

/// Room truly cannot be made (open iterators pin every memtable they saw,
/// so nothing flushed frees its log): the first writer that meets the full
/// region gets `PmFull` after `pm_full_timeout_ms`, not a hang, and the
/// writers after it get `PmFull` at once rather than each waiting the
/// timeout again (a server pipelining 500 writes would otherwise answer
/// nothing for hours); once the pins go, writes resume.
#[test]
fn writers_get_pm_full_after_the_timeout_when_nothing_can_free_pm_then_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small_region();
    o.write_buffer_size = 256 << 10;
    o.pm_full_timeout_ms = 500;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let (db, acked) = within(Duration::from_secs(60), "filling a pinned region", move || {
        let mut pins = Vec::new();
        let mut acked = 0u32;
        let first = loop {
            if acked.is_multiple_of(50) {
                let mut it = db.iter(..).unwrap();
                it.next(); // the first step builds the cursor, which pins the memtables
                pins.push(it);
            }
            let t = Instant::now();
            match db.put(format!("k{acked:06}"), value(acked)) {
                Ok(()) => acked += 1,
                Err(e) => break (e, t.elapsed()),
            }
            assert!(acked < 10_000, "PM never filled up");
        };
        assert!(matches!(first.0, Error::PmFull(_)), "{}", first.0);
        assert!(first.1 >= Duration::from_millis(400), "the first writer gave up after only {:?}", first.1);
        for j in 0..20 {
            let t = Instant::now();
            let e = db.put(format!("x{j}"), value(j)).unwrap_err();
            assert!(matches!(e, Error::PmFull(_)), "{e}");
            assert!(t.elapsed() < Duration::from_millis(400), "writer {j} after the first waited {:?}", t.elapsed());
        }
        drop(pins);
        (db, acked)
    });
    let db = within(Duration::from_secs(60), "writing once the pins are gone", move || {
        for i in acked..acked + 2000 {
            if let Err(e) = db.put(format!("k{i:06}"), value(i)) {
                panic!("put k{i:06} after the pins went: {e}");
            }
        }
        db
    });
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..acked + 2000 {
        assert_eq!(db.get(format!("k{i:06}")).unwrap(), Some(value(i)), "k{i:06} lost");
    }
}
