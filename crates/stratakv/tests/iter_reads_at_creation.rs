//! An iterator reads the database as of its creation ("at the sequence
//! number it was created with", DbIter's contract), even if its first
//! step comes after later writes, flushes and compactions.
//!
//! Regression (found by `strata-stress --mode model`, seed 2): iterators
//! build their cursor lazily, and the sequence they read at was not
//! protected from compaction, so versions it should see could be dropped
//! before its first step.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use stratakv::{Db, L0Kind, Options};

#[test]
fn iterator_created_before_compaction_sees_its_state() {
    for l0 in [L0Kind::Sstable, L0Kind::Matrix] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Options::for_tests();
        o.l0 = l0;
        o.write_buffer_size = 8 << 10;
        let db = Db::open(dir.path(), o).unwrap();
        let mut want = BTreeMap::new();
        for i in 0..500u32 {
            let (k, v) = (format!("k{i:04}"), format!("old-{i}"));
            db.put(&k, &v).unwrap();
            want.insert(k.into_bytes(), v.into_bytes());
        }
        let it = db.iter(..).unwrap();
        let rev = db.iter(..).unwrap();
        for i in 0..500u32 {
            if i % 3 == 0 {
                db.delete(format!("k{i:04}")).unwrap();
            } else {
                db.put(format!("k{i:04}"), format!("new-{i}")).unwrap();
            }
        }
        db.flush().unwrap();
        db.compact_range(..).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = it.collect();
        assert!(
            got == want,
            "{l0:?}: forward iterator saw {} keys, want {} (old versions dropped?)",
            got.len(),
            want.len()
        );
        let got_rev: Vec<(Vec<u8>, Vec<u8>)> = rev.rev().collect();
        let want_rev: Vec<(Vec<u8>, Vec<u8>)> = want.into_iter().rev().collect();
        assert!(got_rev == want_rev, "{l0:?}: reverse iterator differs");
    }
}
