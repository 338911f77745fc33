//! Reads racing flushes: a read that chose its read point before loading
//! the view could find that a flush in between had dropped the version it
//! needed (newer versions were already visible to everyone), and report a
//! key that always existed as missing. Found by review in stop 18.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stratakv::{Db, L0Kind, Options};

fn never_misses(l0: L0Kind, secs: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.write_buffer_size = 4 << 10; // seal often
    let db = Db::open(dir.path(), o).unwrap();
    let keys: Vec<Vec<u8>> = (0..64u32).map(|i| format!("key{i:04}").into_bytes()).collect();
    for k in &keys {
        db.put(k, b"v0").unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, keys, stop) = (db.clone(), keys.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for k in &keys {
                    db.put(k, format!("v{i}-{}", "x".repeat(40))).unwrap();
                }
                i += 1;
            }
        })
    };
    let end = Instant::now() + Duration::from_secs(secs);
    let (mut misses, mut reads) = (0u64, 0u64);
    while Instant::now() < end {
        for v in db.multi_get(&keys).unwrap() {
            misses += u64::from(v.is_none());
        }
        for k in keys.iter().take(8) {
            misses += u64::from(db.get(k).unwrap().is_none());
        }
        reads += keys.len() as u64 + 8;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(misses, 0, "{l0:?}: {misses} of {reads} reads missed a key that always exists");
}

#[test]
fn reads_never_miss_a_key_that_always_exists_matrix() {
    never_misses(L0Kind::Matrix, 3);
}

#[test]
fn reads_never_miss_a_key_that_always_exists_sstable() {
    never_misses(L0Kind::Sstable, 3);
}
