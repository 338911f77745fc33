//! The write path's durability: log heads in flight, log numbers never
//! reused, syncs that cover writers still copying, spare memtable buffers.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use strata_pmem::SimPm;

use crate::batch::WriteBatch;
use crate::fs::{FsCrashMode, MemFs};
use crate::log::{entry_len, EXTENT_KIND_LOG, LOG_HEADS_IN_FLIGHT};
use crate::{Db, Options};

/// Options for a 4 MiB simulated ordinary-file region of 64 KiB slots
/// on an in-memory disk, with no background log sync, and both devices.
fn small_file_region() -> (Options, Arc<SimPm>, MemFs) {
    let mut o = Options::for_tests();
    o.pm_size = 4 << 20;
    o.pm_slot_bytes = 64 << 10;
    o.write_buffer_size = 2 << 20;
    o.pm_sync_interval_ms = 0;
    let sim = Arc::new(SimPm::new_file(4 << 20));
    let mem = MemFs::new();
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(mem.clone());
    (o, sim, mem)
}

/// The disk and the ordinary-file region a power cut leaves: only
/// fsynced files, only msynced pages.
fn power_cut(mem: &MemFs, sim: &SimPm, seed: u64) -> (MemFs, Arc<SimPm>) {
    let (snap, cs) = mem.snapshot_with(|| sim.crash_state());
    let fs = snap.restore(FsCrashMode::DropUnsynced, &mut StdRng::seed_from_u64(seed));
    (fs, Arc::new(SimPm::file_from_image(cs.minimal_image())))
}

/// Makes every write to `db` durable and cuts the power: what is left.
fn sync_and_cut(db: Db, fs: &MemFs, sim: &SimPm, seed: u64) -> (MemFs, Arc<SimPm>) {
    db.sync().unwrap();
    let left = power_cut(fs, sim, seed);
    std::mem::forget(db);
    left
}

/// [`sync_and_cut`], then opens what is left with `o`.
fn sync_cut_and_reopen(db: Db, mut o: Options, fs: &MemFs, sim: &SimPm, seed: u64) -> Db {
    let (fs, sim) = sync_and_cut(db, fs, sim, seed);
    o.fs = Arc::new(fs);
    o.pm_sim = Some(sim);
    Db::open("/db", o).unwrap()
}

/// Log extent heads are msynced off the write path (by the prefault
/// thread), but before a log extent is allocated, every head older than
/// the newest `LOG_HEADS_IN_FLIGHT` is durable: at a power cut, the
/// durable heads name the log up to at most that many extents from its
/// end. The prefault thread is cut off here, so only the writer syncs.
#[test]
fn log_heads_older_than_the_ones_in_flight_are_durable_before_a_newer_extent_is_allocated() {
    let sim = Arc::new(SimPm::new_file(4 << 20));
    let mut o = Options::for_tests();
    o.pm_size = 4 << 20;
    o.pm_slot_bytes = 64 << 10;
    o.write_buffer_size = 2 << 20;
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(MemFs::new());
    let db = Db::open("/db", o).unwrap();
    let _held = db.inner.eng.log.prefault.hold_jobs();
    let start = db.inner.eng.log.lock().next_log_number();
    let value = vec![b'v'; 1000];
    for i in 0..600u32 {
        db.put(format!("k{i:04}"), &value).unwrap();
    }
    let newest = db.inner.eng.log.lock().log_number();
    let cs = sim.crash_state();
    let image = Arc::new(SimPm::file_from_image(cs.minimal_image()));
    let ro = strata_pmem::RegionOptions {
        len: 4 << 20,
        slot_bytes: 64 << 10,
        write_latency_ns: 0,
        create: false,
        expect_id: None,
    };
    let (region, _) = strata_pmem::Region::open(strata_pmem::Backing::Sim(image), &ro).unwrap();
    let mut durable: Vec<u64> =
        region.heads().unwrap().into_iter().filter(|h| h.kind == EXTENT_KIND_LOG).map(|h| h.number).collect();
    durable.sort_unstable();
    assert!(newest >= 8, "the writes spanned only {newest} log extents");
    // Every extent but the newest ones, whose heads may still be pending.
    let settled = newest + 1 - LOG_HEADS_IN_FLIGHT as u64;
    let older: Vec<u64> = durable.iter().copied().filter(|n| *n < settled).collect();
    let first = older.first().copied().unwrap_or(settled);
    assert!(first <= start, "durable log heads {durable:?}, first log number {start}");
    assert_eq!(older, (first..settled).collect::<Vec<u64>>(), "durable log heads {durable:?}");
}

/// With two log heads in flight, a power cut can keep the newer one and
/// lose the older (a torn write of the head table). Recovery then keeps
/// the log up to the hole: the newer extent's entries do not continue
/// the sequence, so they are dropped with the older extent's, and the
/// writes that survive are a prefix of the history. Neither number is
/// handed out again, so the dropped entries never come back.
#[test]
fn a_newer_log_head_kept_without_an_older_one_recovers_the_log_up_to_the_hole() {
    let (mut o, sim, mem) = small_file_region();
    let slot = o.pm_slot_bytes;
    let key = |i: u32| format!("k{i:04}");
    let val = |tag: u8| vec![tag; 1000];
    let db = Db::open("/db", o.clone()).unwrap();
    let mut log_of = Vec::new();
    for i in 0..400u32 {
        db.put(key(i), val(b'1')).unwrap();
        log_of.push(db.inner.eng.log.lock().log_number());
    }
    let newest = db.inner.eng.log.lock().log_number();
    assert!(newest >= log_of[0] + 4, "the writes spanned too few log extents: {log_of:?}");
    // Entries and heads all reach the media ...
    let (fs, sim) = sync_and_cut(db, &mem, &sim, 1);
    // ... except the head of the second-newest extent.
    let hole = newest - 1;
    {
        let ro = strata_pmem::RegionOptions {
            len: 4 << 20,
            slot_bytes: slot,
            write_latency_ns: 0,
            create: false,
            expect_id: None,
        };
        let (region, _) = strata_pmem::Region::open(strata_pmem::Backing::Sim(sim.clone()), &ro).unwrap();
        let h = region.heads().unwrap().into_iter().find(|h| h.kind == EXTENT_KIND_LOG && h.number == hole);
        region.retire(h.expect("the hole's head was durable")).unwrap();
    }
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(fs.clone());
    let db = Db::open("/db", o.clone()).unwrap();
    for (i, log) in log_of.iter().enumerate() {
        let got = db.get(key(i as u32)).unwrap();
        if *log < hole {
            assert_eq!(got, Some(val(b'1')), "write {i} (log {log}) before the hole lost");
        } else {
            assert_eq!(got, None, "write {i} (log {log}) at or after the hole kept");
        }
    }
    // New writes, made durable, then another power cut: they are kept,
    // and no entry dropped at the first one comes back.
    for i in 0..20 {
        db.put(key(i), val(b'2')).unwrap();
    }
    // The newest durable head was `newest`, and the cut process may have
    // had LOG_HEADS_IN_FLIGHT more extents whose heads never became
    // durable: none of those numbers is handed out again (their entries
    // may be on the media, and a reused number would revive them).
    let first_new = db.inner.eng.log.lock().log_number();
    let skipped = newest + LOG_HEADS_IN_FLIGHT as u64;
    assert!(first_new > skipped, "log number {first_new} reused; numbers up to {skipped} must be skipped");
    let db = sync_cut_and_reopen(db, o, &fs, &sim, 2);
    for (i, log) in log_of.iter().enumerate() {
        let got = db.get(key(i as u32)).unwrap();
        let want = if i < 20 {
            Some(val(b'2'))
        } else if *log < hole {
            Some(val(b'1'))
        } else {
            None
        };
        assert_eq!(got, want, "write {i} (log {log}) after the second power cut");
    }
}

/// Regression (review of stop 18): writer X reserves space in log
/// extent A and is preempted before copying; writer Y allocates extent
/// B; a sync runs. That sync must not forget A, or X's bytes (written
/// after it) are never msynced and a power cut loses X and every write
/// after it, although `Db::sync` returned.
#[test]
fn a_sync_keeps_an_older_extent_that_a_writer_is_still_filling() {
    let sim = Arc::new(SimPm::new_file(4 << 20));
    let mem = MemFs::new();
    let mut o = Options::for_tests();
    o.pm_size = 4 << 20;
    o.pm_slot_bytes = 64 << 10;
    o.write_buffer_size = 1 << 20;
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(mem.clone());
    let db = Db::open("/db", o.clone()).unwrap();
    let inner = db.inner.clone();

    let mut bx = WriteBatch::new();
    bx.put(b"x", b"value of x");
    let mut x = inner.reserve(entry_len(bx.rep().len()), bx.count(), false).unwrap();
    assert_eq!(inner.eng.log.unsynced_extents(), 1, "X's reservation allocated extent A");

    // Y does not fit in the rest of A: it allocates B, then waits for X to publish.
    let y = {
        let db = db.clone();
        std::thread::spawn(move || db.put(b"y", vec![b'y'; 100 << 10]))
    };
    let start = std::time::Instant::now();
    while inner.eng.log.unsynced_extents() < 2 {
        assert!(start.elapsed() < Duration::from_secs(20), "Y never allocated extent B");
        std::thread::yield_now();
    }
    inner.eng.sync_log().unwrap();

    x.fill(&inner.eng.region_path, bx.rep(), bx.count(), None).unwrap();
    let seq = x.seq;
    drop(x);
    inner.eng.pipeline.publish(seq, seq, false, &|_| Ok(())).unwrap();
    y.join().unwrap().unwrap();
    db.sync().unwrap();

    let (fs, sim) = power_cut(&mem, &sim, 1);
    drop(db);
    o.pm_sim = Some(sim);
    o.fs = Arc::new(fs);
    let db = Db::open("/db", o).unwrap();
    assert_eq!(db.get(b"x").unwrap().as_deref(), Some(&b"value of x"[..]), "X lost after Db::sync");
    assert_eq!(db.get(b"y").unwrap().map(|v| v.len()), Some(100 << 10), "Y lost after Db::sync");
}
/// A memtable switch takes the buffers the prefault thread made ready
/// (their pages already mapped), and the next spare is made once the
/// new memtable has its first log extent.
#[test]
fn a_memtable_switch_takes_the_spare_buffers_and_a_new_spare_follows() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::for_tests()).unwrap();
    let inner = db.inner.clone();
    let wait_for_spare = || {
        let start = std::time::Instant::now();
        while !inner.eng.log.prefault.has_spare() {
            assert!(start.elapsed() < Duration::from_secs(20), "no spare memtable was made");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    for round in 0..3 {
        db.put(format!("k{round}"), b"v").unwrap();
        wait_for_spare();
        let before = inner.eng.log.lock().mem.id();
        {
            let mut w = inner.eng.log.lock();
            inner.eng.switch_memtable(&mut w);
        }
        assert_ne!(inner.eng.log.lock().mem.id(), before, "round {round}: no switch");
        assert!(!inner.eng.log.prefault.has_spare(), "round {round}: the switch left the spare unused");
    }
    // The memtables built on spare buffers hold what was written.
    db.put(b"last", b"v").unwrap();
    for k in ["k0", "k1", "k2", "last"] {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&b"v"[..]), "{k}");
    }
    wait_for_spare();
}
/// A log extent's head is msynced after the writer starts filling it,
/// so a power cut can keep some of its entries (written back by the
/// kernel) without its head. The next open must not hand out that log
/// number again: a new extent with the same number on the same slots,
/// holding fewer entries of the same sizes, would be followed on the
/// media by the stale entries, whose log number and sequence numbers
/// continue it, and a later recovery would bring back writes that the
/// first power cut had lost, over newer ones.
#[test]
fn a_log_number_whose_head_may_not_be_durable_is_not_reused() {
    let (mut o, sim, mem) = small_file_region();
    let key = |i: u32| format!("k{i:04}");
    let val = |tag: u8| vec![tag; 100];
    let db = Db::open("/db", o.clone()).unwrap();
    // The prefault thread never makes the new extents' heads durable.
    let _held = db.inner.eng.log.prefault.hold_jobs();
    // Enough for the writer to have as many extents as heads can be in
    // flight, so none of their heads was synced by the writer either.
    let mut n = 0;
    while db.inner.eng.log.lock().heads_in_flight() < LOG_HEADS_IN_FLIGHT {
        db.put(key(n), val(b'1')).unwrap();
        n += 1;
    }
    for _ in 0..10 {
        db.put(key(n), val(b'1')).unwrap();
        n += 1;
    }
    assert!(n < 1000 && db.inner.eng.log.lock().heads_in_flight() == LOG_HEADS_IN_FLIGHT);
    // The kernel wrote the extents' entries back, not their heads.
    for ext in db.inner.eng.log.lock().mem.extents() {
        db.inner.eng.region.sync(ext.offset(), ext.len()).unwrap();
    }
    let (fs, sim) = power_cut(&mem, &sim, 1);
    std::mem::forget(db);
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(fs.clone());
    let db = Db::open("/db", o.clone()).unwrap();
    for i in 0..n {
        assert_eq!(db.get(key(i)).unwrap(), None, "unsynced write {i} with no durable head survived");
    }
    // Fewer writes of the same sizes, made durable.
    for i in 0..10 {
        db.put(key(i), val(b'2')).unwrap();
    }
    let db = sync_cut_and_reopen(db, o, &fs, &sim, 2);
    for i in 0..10 {
        assert_eq!(db.get(key(i)).unwrap(), Some(val(b'2')), "synced write {i} lost or overwritten");
    }
    for i in 10..n {
        assert_eq!(db.get(key(i)).unwrap(), None, "write {i}, lost at the first power cut, came back");
    }
}
