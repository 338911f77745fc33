//! Learned tables answer exactly as binary ones over the same entries.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::fs::{Fs, StdFs};
use crate::iterator::InternalIterator;
use crate::key::{internal_key, key_hash, user_key, Kind};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Entries for sorted, distinct user keys, each with `versions[i]` versions.
fn entries_of(mut ukeys: Vec<Vec<u8>>, versions: &[u8], value_len: usize) -> Entries {
    ukeys.sort();
    ukeys.dedup();
    let mut out = Vec::new();
    for (i, uk) in ukeys.iter().enumerate() {
        let n = versions.get(i % versions.len().max(1)).copied().unwrap_or(1).max(1) as u64;
        for v in (0..n).rev() {
            let kind = if (i as u64 + v).is_multiple_of(11) { Kind::Delete } else { Kind::Put };
            let val = vec![b'a' + (i % 26) as u8; value_len + (i * 7) % 40];
            out.push((internal_key(uk, 1000 + v * 10 + i as u64 % 7, kind), val));
        }
    }
    out
}

fn build(dir: &Path, name: &str, entries: &Entries, index: IndexKind, block_size: usize) -> Arc<Table> {
    let path = dir.join(name);
    let mut b = TableBuilder::new(
        StdFs.create(&path).unwrap(),
        &path,
        TableOptions { block_size, index, ..Default::default() },
    );
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    b.finish().unwrap();
    Arc::new(Table::open(&StdFs, &path, 1, Some(Arc::new(BlockCache::new(1 << 20)))).unwrap())
}

fn seek_result(t: &Arc<Table>, target: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut it = t.iter();
    it.seek(target).unwrap();
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

fn all(t: &Arc<Table>, backward: bool) -> Entries {
    let mut it = t.iter();
    let mut out = Vec::new();
    if backward {
        it.seek_to_last().unwrap();
    } else {
        it.seek_to_first().unwrap();
    }
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if backward {
            it.prev().unwrap();
        } else {
            it.next().unwrap();
        }
    }
    out
}

/// Compares the two tables on full scans, seeks and gets of `probes`.
fn same_answers(
    bin: &Arc<Table>,
    lrn: &Arc<Table>,
    entries: &Entries,
    probes: &[Vec<u8>],
) -> Result<(), TestCaseError> {
    prop_assert_eq!(&all(lrn, false), entries);
    prop_assert_eq!(all(lrn, true), all(bin, true));
    prop_assert_eq!(lrn.verify().unwrap(), entries.len() as u64);
    for uk in probes {
        for seq in [0u64, 1003, 1500, u64::MAX >> 8] {
            let target = internal_key(uk, seq, Kind::Put);
            prop_assert_eq!(seek_result(lrn, &target), seek_result(bin, &target), "seek {:?}@{}", uk, seq);
            let h = key_hash(uk);
            prop_assert_eq!(lrn.get(&target, uk, h).unwrap(), bin.get(&target, uk, h).unwrap(), "get {:?}", uk);
        }
    }
    Ok(())
}

fn probes(entries: &Entries, extra: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = extra.to_vec();
    for (k, _) in entries.iter().step_by(3) {
        let uk = user_key(k).to_vec();
        let mut after = uk.clone();
        after.push(0);
        p.push(after);
        if let Some((last, head)) = uk.split_last() {
            p.push(head.to_vec());
            let mut bumped = head.to_vec();
            bumped.push(last.wrapping_add(1));
            p.push(bumped);
        }
        p.push(uk);
    }
    p.extend([Vec::new(), vec![0xff; 30], vec![0]]);
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn learned_and_binary_tables_agree(
        head in prop::sample::select(vec![b"".to_vec(), b"user".to_vec(), b"0000".to_vec()]),
        tails in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 1..600),
        versions in prop::collection::vec(1u8..4, 1..8),
        value_len in prop::sample::select(vec![0usize, 20, 100, 1000]),
        block_size in prop::sample::select(vec![256usize, 1024, 4096]),
        extra in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..30),
    ) {
        let ukeys: Vec<Vec<u8>> = tails.iter().map(|t| [head.as_slice(), t].concat()).collect();
        let entries = entries_of(ukeys, &versions, value_len);
        let dir = tempfile::tempdir().unwrap();
        let bin = build(dir.path(), "000001.sst", &entries, IndexKind::Binary, block_size);
        let lrn = build(dir.path(), "000002.sst", &entries, IndexKind::Learned, block_size);
        prop_assert_eq!(bin.index_kind(), IndexKind::Binary);
        same_answers(&bin, &lrn, &entries, &probes(&entries, &extra))?;
    }

    #[test]
    fn db_bench_and_ycsb_keys_train_and_agree(
        nums in prop::collection::vec(any::<u64>(), 200..2000),
        ycsb in any::<bool>(),
        bound in prop::sample::select(vec![10_000u64, 4_000_000, u64::MAX]),
    ) {
        let ukeys: Vec<Vec<u8>> = nums
            .iter()
            .map(|n| if ycsb { format!("user{n}") } else { format!("{:016}", n % bound) }.into_bytes())
            .collect();
        let entries = entries_of(ukeys, &[1], 100);
        let dir = tempfile::tempdir().unwrap();
        let bin = build(dir.path(), "000001.sst", &entries, IndexKind::Binary, 4096);
        let lrn = build(dir.path(), "000002.sst", &entries, IndexKind::Learned, 4096);
        prop_assert_eq!(lrn.index_kind(), IndexKind::Learned);
        same_answers(&bin, &lrn, &entries, &probes(&entries, &[b"user5".to_vec(), b"0000000000005000".to_vec()]))?;
    }
}

#[test]
fn learned_index_is_smaller_and_blocks_are_near_the_target_size() {
    let ukeys: Vec<Vec<u8>> = (0..40_000u64).map(|i| format!("{:016}", i * 97).into_bytes()).collect();
    let entries = entries_of(ukeys, &[1], 1000);
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "000001.sst", &entries, IndexKind::Binary, 4096);
    let lrn = build(dir.path(), "000002.sst", &entries, IndexKind::Learned, 4096);
    assert_eq!(lrn.index_kind(), IndexKind::Learned);
    let (b, l) = (bin.index_memory_bytes(), lrn.index_memory_bytes());
    assert!(l * 4 <= b, "learned index {l} B, binary {b} B");
    let sizes: Vec<u64> = lrn.block_handles().iter().map(|h| h.size).collect();
    let mean = sizes.iter().sum::<u64>() / sizes.len() as u64;
    assert!((3000..6000).contains(&mean), "mean block {mean} B");
    assert!(sizes.iter().all(|s| *s < 4 * 4096 + 2000), "max block {:?} B", sizes.iter().max());
}

#[test]
fn every_flipped_byte_of_a_learned_table_is_detected_or_harmless() {
    let ukeys: Vec<Vec<u8>> = (0..300u64).map(|i| format!("k{:05}", i * 3).into_bytes()).collect();
    let entries = entries_of(ukeys, &[1, 2], 10);
    let dir = tempfile::tempdir().unwrap();
    let t = build(dir.path(), "000001.sst", &entries, IndexKind::Learned, 256);
    assert_eq!(t.index_kind(), IndexKind::Learned);
    let path = t.path().to_path_buf();
    drop(t);
    let good = std::fs::read(&path).unwrap();
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x5a;
        std::fs::write(&path, &bad).unwrap();
        match Table::open(&StdFs, &path, 1, None).map(Arc::new).and_then(|t| t.verify()) {
            Err(e) => assert!(e.is_corruption(), "flip at {i}: unexpected error kind {e}"),
            Ok(_) => assert!((good.len() - 12..good.len() - 8).contains(&i), "flip at {i} undetected"),
        }
    }
}
