//! Partitions and range deletion, in every level-0 kind: isolation,
//! atomic cross-partition batches, O(1) drop, and range tombstones that
//! reads, iterators, snapshots, flushes, compactions and reopening obey.

use stratakv::{Db, L0Kind, Options, WriteBatch};

const KINDS: [L0Kind; 4] = [L0Kind::Sstable, L0Kind::Matrix, L0Kind::SingleLevel, L0Kind::PmOnly];

fn opts(l0: L0Kind) -> Options {
    Options { l0, ..Options::for_tests() }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn keys(db_iter: stratakv::DbIter) -> Vec<Vec<u8>> {
    db_iter.map(|(k, _)| k).collect()
}

#[test]
fn delete_range_hides_keys_for_readers_at_or_after_it() {
    for l0 in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), opts(l0)).unwrap();
        for i in 0..2000 {
            db.put(key(i), format!("v{i}")).unwrap();
        }
        db.flush().unwrap();
        for i in 2000..3000 {
            db.put(key(i), format!("v{i}")).unwrap();
        }
        let before = db.snapshot();
        db.delete_range(key(500), key(2500)).unwrap();
        db.put(key(1000), "again").unwrap();
        assert_eq!(db.get(key(499)).unwrap().as_deref(), Some(&b"v499"[..]), "{l0:?}");
        assert_eq!(db.get(key(500)).unwrap(), None, "{l0:?}");
        assert_eq!(db.get(key(2499)).unwrap(), None, "{l0:?}");
        assert_eq!(db.get(key(2500)).unwrap().as_deref(), Some(&b"v2500"[..]), "{l0:?}");
        assert_eq!(db.get(key(1000)).unwrap().as_deref(), Some(&b"again"[..]), "{l0:?}");
        assert_eq!(before.get(key(600)).unwrap().as_deref(), Some(&b"v600"[..]), "{l0:?}: the snapshot predates it");
        let got = db.multi_get(&[key(10), key(600), key(1000), key(2600)]).unwrap();
        assert_eq!(got[0].as_deref(), Some(&b"v10"[..]));
        assert_eq!(got[1], None);
        assert_eq!(got[2].as_deref(), Some(&b"again"[..]));
        let all = keys(db.iter(..).unwrap());
        assert_eq!(all.len(), 3000 - 2000 + 1, "{l0:?}");
        let back: Vec<_> = db.iter(..).unwrap().rev().map(|(k, _)| k).collect();
        assert_eq!(back.len(), all.len());
        assert_eq!(keys(before.iter(..).unwrap()).len(), 3000);
        drop(before);
        // The tombstone outlives flushes, compactions and reopening.
        db.flush().unwrap();
        db.compact_range(..).unwrap();
        assert_eq!(keys(db.iter(..).unwrap()).len(), 1001, "{l0:?} after compaction");
        if matches!(l0, L0Kind::Sstable | L0Kind::Matrix) {
            // Compaction dropped what it hid: the tombstone goes too.
            db.wait_for_compactions().unwrap();
            let s = db.stats();
            assert_eq!((s.range_tombstones, s.range_tombstones_retired), (0, 1), "{l0:?}");
            assert_eq!(db.get(key(700)).unwrap(), None);
        }
        drop(db);
        let db = Db::open(dir.path(), opts(l0)).unwrap();
        assert_eq!(db.get(key(700)).unwrap(), None, "{l0:?} after reopen");
        assert_eq!(db.get(key(1000)).unwrap().as_deref(), Some(&b"again"[..]));
        assert_eq!(keys(db.iter(..).unwrap()).len(), 1001, "{l0:?} after reopen");
        // Writes after it (and after reopening) are not hidden.
        db.put(key(800), "new").unwrap();
        assert_eq!(db.get(key(800)).unwrap().as_deref(), Some(&b"new"[..]));
    }
}

#[test]
fn partitions_are_isolated_and_batches_span_them_atomically() {
    for l0 in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), opts(l0)).unwrap();
        db.put("shared", "default").unwrap();
        let a = db.create_partition("a").unwrap();
        let b = db.create_partition("b").unwrap();
        assert!(db.create_partition("a").is_err());
        a.put("shared", "in a").unwrap();
        b.put("shared", "in b").unwrap();
        let mut batch = WriteBatch::new();
        batch.put_in(&a, "x", "1").put_in(&b, "x", "2").put("x", "0");
        db.write(batch).unwrap();
        assert_eq!(db.get("shared").unwrap().as_deref(), Some(&b"default"[..]));
        assert_eq!(a.get("shared").unwrap().as_deref(), Some(&b"in a"[..]));
        assert_eq!(b.get("x").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(keys(a.iter(..).unwrap()), vec![b"shared".to_vec(), b"x".to_vec()]);
        assert_eq!(
            keys(db.iter(..).unwrap()),
            vec![b"shared".to_vec(), b"x".to_vec()],
            "{l0:?}: default excludes partitions"
        );
        let mut c = a.cursor(..).unwrap();
        c.seek(b"t").unwrap();
        assert_eq!(c.key(), b"x");
        assert!(db.put([0xff, 0xff, 1], "v").is_err(), "reserved once partitions exist");
        assert_eq!(db.list_partitions(), vec!["default", "a", "b"]);
        for i in 0..3000 {
            a.put(key(i), "a-value").unwrap();
        }
        db.flush().unwrap();
        db.compact_range(..).unwrap();
        db.drop_partition("a").unwrap();
        assert!(a.get("x").is_err(), "the handle is dead");
        assert!(db.partition("a").is_err());
        assert_eq!(b.get("x").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(db.get("x").unwrap().as_deref(), Some(&b"0"[..]));
        let a2 = db.create_partition("a").unwrap();
        assert_eq!(keys(a2.iter(..).unwrap()).len(), 0, "{l0:?}: a new partition under the old name is empty");
        a2.put("fresh", "1").unwrap();
        db.wait_for_compactions().unwrap();
        if l0 == L0Kind::Sstable || l0 == L0Kind::Matrix {
            assert!(db.stats().range_dropped_files > 0, "{l0:?}: the dropped partition's tables go");
        }
        drop((a, b, a2, db));
        let db = Db::open(dir.path(), opts(l0)).unwrap();
        assert_eq!(db.list_partitions(), vec!["default", "a", "b"]);
        let a = db.partition("a").unwrap();
        assert_eq!(keys(a.iter(..).unwrap()), vec![b"fresh".to_vec()], "{l0:?}");
        assert_eq!(db.partition("b").unwrap().get("shared").unwrap().as_deref(), Some(&b"in b"[..]));
        a.delete_range("a", "z").unwrap();
        assert_eq!(a.get("fresh").unwrap(), None);
        assert_eq!(db.partition("b").unwrap().get("x").unwrap().as_deref(), Some(&b"2"[..]));
    }
}

#[test]
fn partitions_need_the_reserved_keys_free() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::for_tests()).unwrap();
    db.put([0xff, 0xff, 0, 0, 0, 1, b'k'], "v").unwrap();
    assert!(db.create_partition("p").is_err());
    db.delete([0xff, 0xff, 0, 0, 0, 1, b'k']).unwrap();
    let p = db.create_partition("p").unwrap();
    p.put("k", "mine").unwrap();
    assert_eq!(p.get("k").unwrap().as_deref(), Some(&b"mine"[..]));
}

#[test]
fn range_partitions_split_as_they_grow_and_drop_whole_tables() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        let dir = tempfile::tempdir().unwrap();
        let o = Options { l0, partition_split_bytes: 256 << 10, ..opts(l0) };
        let db = Db::open(dir.path(), o.clone()).unwrap();
        let value = [b'v'; 200];
        for round in 0..4u32 {
            for i in 0..6000u32 {
                db.put(key(i * 7 % 6000), [&value[..], &round.to_be_bytes()].concat()).unwrap();
            }
            db.flush().unwrap();
            db.wait_for_compactions().unwrap();
        }
        db.compact_range(..).unwrap();
        db.wait_for_compactions().unwrap();
        let ranges = db.range_partitions();
        assert!(ranges.len() >= 3, "{l0:?}: {} ranges", ranges.len());
        assert_eq!(db.stats().range_partitions, ranges.len() as u64);
        // Drop the range holding the middle key: its keys go, the rest stay.
        let mid = key(3000);
        let r = ranges.iter().find(|r| r.start <= mid && r.end.as_ref().is_none_or(|e| mid < *e)).unwrap().clone();
        db.drop_range_partition(&mid).unwrap();
        db.wait_for_compactions().unwrap();
        for i in (0..6000).step_by(97) {
            let k = key(i);
            let inside = r.start <= k && r.end.as_ref().is_none_or(|e| k < *e);
            assert_eq!(db.get(&k).unwrap().is_none(), inside, "{l0:?} key {i}");
        }
        assert!(db.stats().range_dropped_files > 0, "{l0:?}: the range's tables are deleted whole");
        drop(db);
        let db = Db::open(dir.path(), o).unwrap();
        assert_eq!(db.range_partitions().len(), ranges.len(), "{l0:?}: the router is in the MANIFEST");
        db.verify_checksums().unwrap();
    }
}

#[test]
fn clear_all_partitions_empties_every_partition_in_one_step() {
    for l0 in KINDS {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Db::open(dir.path(), opts(l0)).unwrap();
            let a = db.create_partition("a").unwrap();
            let b = db.create_partition("b").unwrap();
            for i in 0..500 {
                db.put(key(i), "d").unwrap();
                a.put(key(i), "a").unwrap();
                b.put(key(i), "b").unwrap();
            }
            db.flush().unwrap();
            for i in 500..700 {
                a.put(key(i), "a").unwrap();
            }
            let before = db.snapshot();
            db.clear_all_partitions().unwrap();
            assert_eq!(keys(db.iter(..).unwrap()).len(), 0, "{l0:?}");
            assert_eq!(keys(a.iter(..).unwrap()).len(), 0, "{l0:?}");
            assert_eq!(keys(b.iter(..).unwrap()).len(), 0, "{l0:?}");
            assert_eq!(a.get(key(600)).unwrap(), None, "{l0:?}");
            // A snapshot from before still sees everything.
            assert_eq!(before.get(key(3)).unwrap().as_deref(), Some(&b"d"[..]), "{l0:?}");
            drop(before);
            b.put(key(7), "after").unwrap();
            db.put(key(8), "after").unwrap();
        }
        let db = Db::open(dir.path(), opts(l0)).unwrap();
        assert_eq!(db.list_partitions(), vec!["default".to_string(), "a".into(), "b".into()], "{l0:?}");
        assert_eq!(keys(db.iter(..).unwrap()), vec![key(8)], "{l0:?}");
        assert_eq!(keys(db.partition("a").unwrap().iter(..).unwrap()).len(), 0, "{l0:?}");
        assert_eq!(keys(db.partition("b").unwrap().iter(..).unwrap()), vec![key(7)], "{l0:?}");
        db.compact_range(..).unwrap();
        assert_eq!(keys(db.partition("b").unwrap().iter(..).unwrap()), vec![key(7)], "{l0:?}");
    }
}
