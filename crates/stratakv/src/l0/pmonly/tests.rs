//! The pm-only level 0 driven step by step (background compaction off; the
//! test runs merges and log cleanings itself): a reader of an old version
//! keeps every extent it can reach leased, relocation extents included.

use super::state::pm_only_in;
use super::{PmOnlyL0, EXTENT_KIND_RELOC};
use crate::iterator::InternalIterator;
use crate::key::{trailer, user_key, KIND_FOR_SEEK, MAX_SEQ};
use crate::tests_support::{engine_of, l0_of};
use crate::{Db, L0Kind, Options};

fn opts() -> Options {
    let mut o = Options::for_tests();
    o.l0 = L0Kind::PmOnly;
    o.disable_auto_compaction = true;
    // 128 slots of 16 KiB: a few thousand entries fill half the region
    // (log cleaning's threshold).
    o.pm_size = 2 << 20;
    o.pm_slot_bytes = 16 << 10;
    // One memtable per step, sealed by the test's flushes.
    o.write_buffer_size = 64 << 20;
    o
}

/// A value of about 1000 bytes that names its key and generation.
fn value(generation: &str, k: &str) -> Vec<u8> {
    let mut v = format!("{generation}:{k}:").into_bytes();
    v.resize(1000, b'.');
    v
}

/// `ukey` as a seek target before every version of it.
fn target(ukey: &[u8]) -> Vec<u8> {
    let mut t = ukey.to_vec();
    t.extend_from_slice(&trailer(MAX_SEQ, KIND_FOR_SEEK).to_le_bytes());
    t
}

/// (user key, value) at `it`'s position.
fn entry(it: &dyn InternalIterator) -> (Vec<u8>, Vec<u8>) {
    (user_key(it.key()).to_vec(), it.value().to_vec())
}

/// A cursor over L1 made from a version before a log cleaning, standing on
/// a node the cleaning moved into a relocation extent, must still read
/// right after a second cleaning empties that extent and writes reuse its
/// slots. The relocation extents were leased only by the versions made
/// after them (no era held them), so the second cleaning freed the extent
/// under the cursor and its next step read log entries written there since.
#[test]
fn a_cursor_keeps_the_relocation_extents_it_reaches() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let eng = engine_of(&db);
    let pm = l0_of(&db).as_any().downcast_ref::<PmOnlyL0>().unwrap();
    let a = |i: usize| format!("a{i:04}");
    // The a keys' first versions fill the first log extents; all but a0005
    // are overwritten next, so those extents are left nearly empty
    // (cleaning's victims). Filler keys b… fill the region past half.
    for i in 0..60 {
        db.put(a(i), value("old", &a(i))).unwrap();
    }
    db.flush().unwrap();
    assert!(pm.merge_oldest(eng).unwrap());
    for i in (0..60).filter(|&i| i != 5) {
        db.put(a(i), value("new", &a(i))).unwrap();
    }
    for i in 0..850 {
        let b = format!("b{i:04}");
        db.put(&b, value("fill", &b)).unwrap();
    }
    db.flush().unwrap();
    assert!(pm.merge_oldest(eng).unwrap());
    // A later write, then a merge step with no list: the overwritten
    // versions are unlinked (no reader older than the merge is left).
    db.put(b"c", b"tick").unwrap();
    assert!(!pm.merge_oldest(eng).unwrap());

    // A cursor over L1 as of now, on a0004, and what L1 holds from there.
    let _snapshot = db.snapshot();
    let cursor = |v: &crate::version::Version| {
        let mut its = Vec::new();
        v.l0.as_ref().unwrap().add_iterators(&mut its, None);
        let mut l1 = its.pop().unwrap();
        l1.seek(&target(a(4).as_bytes())).unwrap();
        assert_eq!(user_key(l1.key()), a(4).as_bytes());
        l1
    };
    let mut it = cursor(&eng.version());
    let want: Vec<(Vec<u8>, Vec<u8>)> = {
        let mut r = cursor(&eng.version());
        let mut out = Vec::new();
        while r.valid() {
            out.push(entry(&*r));
            r.next().unwrap();
        }
        out
    };
    assert_eq!(want[1], (a(5).into_bytes(), value("old", &a(5))));

    // Cleaning 1 moves a0005 (and whatever else is live in the emptiest
    // extents) into a relocation extent; the cursor steps onto its copy.
    assert!(pm.clean(eng).unwrap(), "the old a extents are cleaning's victims");
    it.next().unwrap();
    assert_eq!(entry(&*it), want[1]);
    let moved_to = {
        let v = eng.version();
        let st = pm_only_in(&v).unwrap();
        let n = st.space.seek(st.l1(), 0, a(5).as_bytes(), trailer(MAX_SEQ, KIND_FOR_SEEK)).unwrap().unwrap();
        let e = st.space.extent_of(n.off).unwrap().clone();
        assert_eq!(e.head().kind, EXTENT_KIND_RELOC);
        let victims = pm.victims(eng, st);
        assert!(
            victims.iter().any(|(x, _)| x.offset() == e.offset()),
            "the test needs a0005's relocation extent to be under half full, so that the next cleaning \
             empties it: victims {victims:?}"
        );
        e.offset()
    };

    // Cleaning 2 moves a0005 again and lets its first relocation extent
    // go; new writes then take the lowest free slots.
    assert!(pm.clean(eng).unwrap());
    {
        let v = eng.version();
        let st = pm_only_in(&v).unwrap();
        assert!(st.space.extent_of(moved_to).is_none(), "the first relocation extent left the state");
    }
    for i in 0..48 {
        let d = format!("d{i:04}");
        db.put(&d, value("reuse", &d)).unwrap();
    }

    // The cursor reads on from the copy it stands on, as L1 was.
    let mut got = vec![want[0].clone(), entry(&*it)];
    while got.len() <= want.len() {
        it.next().unwrap();
        if !it.valid() {
            break;
        }
        got.push(entry(&*it));
    }
    assert_eq!(got.len(), want.len(), "entries read by the cursor from a0004");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g == w,
            "entry {i}: {} = {:?}…, want {}",
            String::from_utf8_lossy(&g.0),
            String::from_utf8_lossy(&g.1[..g.1.len().min(16)]),
            String::from_utf8_lossy(&w.0)
        );
    }
}

/// Regression (`strata-stress --mode fs-fault` with pm-only, a sticky
/// ENOSPC on the MANIFEST: "skiplist node outside the lists' extents"):
/// a merge whose last edit fails is redone by walking from its list's
/// head, which still leads to the nodes it merged. What the failed attempt
/// noted was handed to the next merge steps at once, so they reaped its
/// tombstones before the redo, the redo linked them into L1 again, and
/// once the edit was made their extent left the state and was reused
/// under L1.
#[test]
fn a_merge_whose_last_edit_failed_reaps_nothing_before_it_is_redone() {
    use crate::fs::{FaultError, FaultFs, FaultOp, FaultPlan, MemFs};
    use std::sync::Arc;
    let mem = MemFs::new();
    let fault = FaultFs::over_mem(mem);
    let mut o = opts();
    o.pm_sim = Some(Arc::new(strata_pmem::SimPm::new(o.pm_size as usize)));
    o.fs = Arc::new(fault.clone());
    o.pm_full_timeout_ms = 200;
    let db = Db::open("/db", o).unwrap();
    let eng = engine_of(&db);
    let pm = l0_of(&db).as_any().downcast_ref::<PmOnlyL0>().unwrap();
    let a = |i: usize| format!("a{i:04}");
    for i in 0..60 {
        db.put(a(i), value("old", &a(i))).unwrap();
    }
    db.flush().unwrap();
    assert!(pm.merge_oldest(eng).unwrap());
    // A list of tombstones only: once merged, the old versions are
    // dropped, then the tombstones reaped, and their extent holds nothing.
    for i in 0..60 {
        db.delete(a(i)).unwrap();
    }
    db.flush().unwrap();
    // The merge's first edit is made; its last one, and every later
    // edit, fail until the space is freed.
    fault.inject(FaultPlan {
        sticky: true,
        path_contains: Some("MANIFEST"),
        ..FaultPlan::nth(FaultOp::Sync, 2, FaultError::Enospc)
    });
    for tick in 0..3 {
        // Each later step sees a newer sequence: what is noted is due.
        db.put(b"tick", format!("{tick}")).unwrap();
        let r = pm.merge_oldest(eng);
        assert!(matches!(r, Err(crate::Error::DiskFull { .. })), "attempt {tick}: {r:?}");
    }
    fault.clear();
    db.put(b"tick", b"3").unwrap();
    assert!(pm.merge_oldest(eng).unwrap());
    // Later steps unlink and reap what the merge noted; writes then reuse
    // the slots of every extent that left the state.
    for round in 0..6 {
        db.put(b"tick", format!("r{round}")).unwrap();
        pm.merge_oldest(eng).unwrap();
        for i in 0..300 {
            let b = format!("b{i:04}");
            db.put(&b, value(&format!("fill{round}"), &b)).unwrap();
        }
        db.flush().unwrap();
        pm.merge_oldest(eng).unwrap();
    }
    for i in 0..60 {
        assert_eq!(db.get(a(i)).unwrap(), None, "{}", a(i));
    }
    for i in 0..300 {
        let b = format!("b{i:04}");
        assert_eq!(db.get(&b).unwrap(), Some(value("fill5", &b)), "{b}");
    }
    l0_of(&db).check(eng).unwrap();
    let mut it = db.iter(..).unwrap();
    let mut n = 0;
    while let Some((k, _)) = it.try_next().unwrap() {
        assert!(!k.starts_with(b"a"), "a deleted key is back: {:?}", String::from_utf8_lossy(&k));
        n += 1;
    }
    assert_eq!(n, 301);
}
