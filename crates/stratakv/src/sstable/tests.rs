use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::fs::{Fs, StdFs};
use crate::iterator::InternalIterator;
use crate::key::{internal_key, key_hash, Kind};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn build(dir: &Path, n: usize, opts: TableOptions) -> (Arc<Table>, Entries) {
    let path = dir.join("000001.sst");
    let f = StdFs.create(&path).unwrap();
    let mut b = TableBuilder::new(f, &path, opts);
    let mut entries = Vec::new();
    for i in 0..n {
        let k = internal_key(
            format!("key{:06}", i * 2).as_bytes(),
            100 + i as u64,
            if i % 7 == 0 { Kind::Delete } else { Kind::Put },
        );
        let v = format!("value-{i}-{}", "x".repeat(i % 50)).into_bytes();
        b.add(&k, &v).unwrap();
        entries.push((k, v));
    }
    let (size, props) = b.finish().unwrap();
    assert_eq!(props.entries, n as u64);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let t = Table::open(&StdFs, &path, 1, Some(cache)).unwrap();
    assert_eq!(t.size(), size);
    (Arc::new(t), entries)
}

#[test]
fn table_round_trip_iterate_seek_get() {
    for compression in [Compression::None, Compression::Lz4, Compression::Snappy] {
        let dir = tempfile::tempdir().unwrap();
        let opts = TableOptions { block_size: 512, compression, ..Default::default() };
        let (t, entries) = build(dir.path(), 2000, opts);
        assert_eq!(t.verify().unwrap(), 2000);
        let mut it = t.iter();
        it.seek_to_first().unwrap();
        for (k, v) in &entries {
            assert!(it.valid());
            assert_eq!(it.key(), &k[..]);
            assert_eq!(it.value(), &v[..]);
            it.next().unwrap();
        }
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        for (k, _) in entries.iter().rev() {
            assert_eq!(it.key(), &k[..]);
            it.prev().unwrap();
        }
        assert!(!it.valid());
        // Point reads: present keys found, odd keys (never written) not.
        for (i, (k, v)) in entries.iter().enumerate().step_by(13) {
            let uk = format!("key{:06}", i * 2);
            let seek = internal_key(uk.as_bytes(), u64::MAX >> 8, Kind::Put);
            let got = t.get(&seek, uk.as_bytes(), key_hash(uk.as_bytes())).unwrap().unwrap();
            assert_eq!((&got.0, &got.1), (k, v));
            let miss = format!("key{:06}", i * 2 + 1);
            let seek = internal_key(miss.as_bytes(), u64::MAX >> 8, Kind::Put);
            assert!(t.get(&seek, miss.as_bytes(), key_hash(miss.as_bytes())).unwrap().is_none());
        }
    }
}

#[test]
fn every_flipped_byte_is_detected_or_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions { block_size: 256, ..Default::default() };
    let (t, _) = build(dir.path(), 60, opts);
    let path = t.path().to_path_buf();
    drop(t);
    let good = std::fs::read(&path).unwrap();
    let mut detected = 0;
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x5a;
        std::fs::write(&path, &bad).unwrap();
        let r = Table::open(&StdFs, &path, 1, None).map(Arc::new).and_then(|t| t.verify());
        match r {
            Err(e) => {
                assert!(e.is_corruption(), "flip at {i}: unexpected error kind {e}");
                assert!(e.to_string().contains("000001.sst"));
                detected += 1;
            }
            // Only bytes no checksum covers (the footer's reserved word) may pass.
            Ok(_) => assert!((good.len() - 12..good.len() - 8).contains(&i), "flip at {i} undetected"),
        }
    }
    assert!(detected >= good.len() - 4);
}
