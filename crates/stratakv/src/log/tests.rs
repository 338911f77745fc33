//! Log scanning over recycled extents with concurrent writers.

use std::path::Path;

use strata_pmem::Region;

use super::*;
use crate::batch::WriteBatch;

fn region() -> Region {
    crate::test_util::sim_region(8 << 20)
}

fn body(i: u32) -> Vec<u8> {
    let mut b = WriteBatch::new();
    b.put(format!("key{i:04}"), vec![b'v'; 40 + (i as usize % 7) * 8]);
    b.rep().to_vec()
}

/// Writer A reserves a slot in a recycled extent and is killed after
/// writing part of its entry; writer B, reserved after it, publishes.
/// Scans the extent and returns how the scan ended.
fn kill_in_flight_writer(clear: bool) -> (u64, ScanEnd) {
    let region = region();
    // Earlier use of the slots: log 7, entries of other sizes.
    let mut old = region.allocate(EXTENT_KIND_LOG, 1, 7).unwrap();
    let old_off = old.extent().offset();
    for i in 0..20 {
        let b = body(i * 3 + 1);
        let mut s = old.reserve(entry_len(b.len())).unwrap();
        write_entry(&mut s, 7, 100 + i as u64, 1, &b, None).unwrap();
    }
    drop(old);
    let mut w = region.allocate(EXTENT_KIND_LOG, 1, 9).unwrap();
    assert_eq!(w.extent().offset(), old_off, "the test needs the slots reused");
    let (a, b) = (body(0), body(1));
    let mut sa = w.reserve(entry_len(a.len())).unwrap();
    if clear {
        clear_commit_word(&mut sa).unwrap();
    }
    let mut sb = w.reserve(entry_len(b.len())).unwrap();
    if clear {
        clear_commit_word(&mut sb).unwrap();
    }
    // A wrote its header (log number, sequence), then the process died.
    let mut hdr = [0u8; HEADER_LEN - 8];
    hdr[0..8].copy_from_slice(&9u64.to_le_bytes());
    hdr[8..16].copy_from_slice(&1u64.to_le_bytes());
    sa.write(8, &hdr).unwrap();
    write_entry(&mut sb, 9, 2, 1, &b, None).unwrap();
    let ext = w.extent().clone();
    let mut next = Some(1);
    let mut accepted = 0;
    let end = scan_extent(&ext, 9, &mut next, Path::new("sim.pm"), |_| {
        accepted += 1;
        Ok(())
    })
    .unwrap();
    (accepted, end)
}

#[test]
fn a_killed_writer_ends_the_log_cleanly_in_a_recycled_extent() {
    assert_eq!(kill_in_flight_writer(true), (0, ScanEnd::Clean));
}

#[test]
fn without_clearing_the_stale_commit_word_the_same_kill_looks_like_corruption() {
    // The failure mode the clearing prevents (and the check above would catch).
    let (accepted, end) = kill_in_flight_writer(false);
    assert_eq!(accepted, 0);
    assert!(matches!(end, ScanEnd::Torn { valid_after: true, .. }), "{end:?}");
}

/// A placeholder entry (no records: a range tombstone's sequence number)
/// takes one sequence and the log goes on after it; an entry that claims
/// records it lacks is still corruption.
#[test]
fn a_placeholder_entry_takes_one_sequence_number() {
    let region = region();
    let mut w = region.allocate(EXTENT_KIND_LOG, 1, 9).unwrap();
    let a = body(1);
    let mut s = w.reserve(entry_len(a.len())).unwrap();
    write_entry(&mut s, 9, 1, 1, &a, None).unwrap();
    let mut s = w.reserve(entry_len(0)).unwrap();
    write_entry(&mut s, 9, 2, 0, &[], None).unwrap();
    let b = body(2);
    let mut s = w.reserve(entry_len(b.len())).unwrap();
    write_entry(&mut s, 9, 3, 1, &b, None).unwrap();
    let ext = w.extent().clone();
    let mut next = Some(1);
    let mut seen = Vec::new();
    let end = scan_extent(&ext, 9, &mut next, Path::new("sim.pm"), |e| {
        seen.push((e.seq, e.records.len()));
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, vec![(1, 1), (2, 0), (3, 1)]);
    assert_eq!(next, Some(4));
    assert_eq!(end, ScanEnd::Clean);

    let mut w = region.allocate(EXTENT_KIND_LOG, 1, 10).unwrap();
    let mut s = w.reserve(entry_len(a.len())).unwrap();
    write_entry(&mut s, 10, 1, 0, &a, None).unwrap();
    let ext = w.extent().clone();
    let mut next = Some(1);
    assert!(scan_extent(&ext, 10, &mut next, Path::new("sim.pm"), |_| Ok(())).is_err());
}
