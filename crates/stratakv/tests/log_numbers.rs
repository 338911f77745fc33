//! Log numbers are never reused: recovery erases the heads of log extents
//! whose entries do not continue the log, and a later open must not hand
//! their numbers out again, or their stale entries (which carry that
//! number) would be accepted as part of a newer log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use strata_pmem::{Backing, Region, RegionOptions, SimPm};
use stratakv::{Db, Options};

const PM: usize = 8 << 20;
const SLOT: u64 = 64 << 10;
const LOG_KIND: u8 = 1;

fn opts(sim: &Arc<SimPm>) -> Options {
    let mut o = Options::for_tests();
    o.pm_size = PM as u64;
    o.pm_slot_bytes = SLOT;
    o.pm_sim = Some(sim.clone());
    o
}

/// Zeroes the commit word of the first entry of the only log extent: what a
/// kill leaves when writer A reserved the extent's first entry and died
/// before publishing it, while B and C, reserved after it, had published
/// theirs and were waiting for A (so were never acknowledged).
fn unpublish_first_entry(img: Vec<u8>) -> Vec<u8> {
    let sim = Arc::new(SimPm::from_image(img));
    let ro = RegionOptions { len: PM as u64, slot_bytes: SLOT, write_latency_ns: 0, create: false, expect_id: None };
    let (region, _) = Region::open(Backing::Sim(sim.clone()), &ro).unwrap();
    let logs: Vec<_> = region.heads().unwrap().into_iter().filter(|h| h.kind == LOG_KIND).collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let off = region.adopt(logs[0]).unwrap().offset() as usize;
    drop(region);
    let mut img = sim.visible_image();
    img[off..off + 8].fill(0);
    img
}

#[test]
fn entries_dropped_by_recovery_stay_dropped_after_later_opens() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Arc::new(SimPm::new(PM));
    let db = Db::open(dir.path(), opts(&sim)).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"2").unwrap();
    db.put(b"c", b"3").unwrap();
    drop(db);
    let img = unpublish_first_entry(sim.visible_image());

    // Open 1: the log ends before A; B and C go with it.
    let sim = Arc::new(SimPm::from_image(img));
    let db = Db::open(dir.path(), opts(&sim)).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"b").unwrap(), None);
    db.close().unwrap();

    // Open 2: one write of A's size lands where A was.
    let sim = Arc::new(SimPm::from_image(sim.visible_image()));
    let db = Db::open(dir.path(), opts(&sim)).unwrap();
    db.put(b"w", b"9").unwrap();
    db.close().unwrap();

    // Open 3: B and C, still in the slot after W, must not come back.
    let sim = Arc::new(SimPm::from_image(sim.visible_image()));
    let db = Db::open(dir.path(), opts(&sim)).unwrap();
    assert_eq!(db.get(b"w").unwrap().as_deref(), Some(&b"9"[..]));
    assert_eq!(db.get(b"b").unwrap(), None, "B, dropped at open 1, came back");
    assert_eq!(db.get(b"c").unwrap(), None, "C, dropped at open 1, came back");
}
