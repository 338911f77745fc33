//! Matrix unit tests on a simulated PM region: hints never hide a key,
//! lookups equal a full search of every row, columns respect L1 bounds.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::Region;

use super::build::{build_row, RowEntry, RowSpec};
use super::iter::RowIter;
use super::policy::column::pick_column;
use super::probe::SegProbe;
use super::row::{Elem, Row};
use super::{LiveRow, Matrix, MatrixRecord, RowMeta};
use crate::coding::put_varint;
use crate::iterator::InternalIterator;
use crate::key::key_hash;
use crate::key::key_prefix;
use crate::key::Lookup;
use crate::key::{internal_key, Kind, KIND_FOR_SEEK};

mod hint_cases;

fn region() -> (Region, Arc<PathBuf>) {
    (crate::test_util::sim_region(32 << 20), Arc::new(PathBuf::from("sim.pm")))
}

/// Writes records into a fresh log extent; returns entries sorted by internal key.
fn write_log(
    region: &Region,
    log_no: u64,
    recs: &[(Vec<u8>, u64, Kind, Vec<u8>)],
) -> (Vec<RowEntry>, strata_pmem::Extent, u64) {
    let mut body = Vec::new();
    let mut offs = Vec::new();
    for (k, _, kind, v) in recs {
        body.push(*kind as u8);
        put_varint(&mut body, k.len() as u64);
        offs.push(body.len());
        body.extend_from_slice(k);
        if *kind == Kind::Put {
            put_varint(&mut body, v.len() as u64);
            body.extend_from_slice(v);
        }
    }
    let slots = (body.len() as u64 + 64).div_ceil(region.slot_bytes());
    let mut w = region.allocate(1, slots, log_no).unwrap();
    let mut slot = w.reserve(body.len() as u64).unwrap();
    slot.write(0, &body).unwrap();
    slot.persist(0, body.len() as u64).unwrap();
    let base = slot.offset();
    let mut entries: Vec<RowEntry> = recs
        .iter()
        .zip(&offs)
        .map(|((k, seq, kind, v), off)| RowEntry {
            elem: Elem {
                prefix: key_prefix(k),
                trailer: seq << 8 | *kind as u64,
                key_off: base + *off as u64,
                key_len: k.len() as u32,
                value_len: v.len() as u32,
                hint: 0,
            },
            hash: key_hash(k),
        })
        .collect();
    let keyed: Vec<(Vec<u8>, RowEntry)> =
        entries.drain(..).zip(recs).map(|(e, (k, seq, kind, _))| (internal_key(k, *seq, *kind), e)).collect();
    let mut keyed = keyed;
    keyed.sort_by(|a, b| crate::key::compare_internal(&a.0, &b.0));
    (keyed.into_iter().map(|(_, e)| e).collect(), w.extent().clone(), body.len() as u64)
}

fn random_key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    // Shared prefixes longer than 8 bytes exercise the full-key comparison.
    match rng.gen_range(0..3) {
        0 => format!("{:04}", rng.gen_range(0..space)).into_bytes(),
        1 => format!("common-prefix-{:05}", rng.gen_range(0..space)).into_bytes(),
        _ => {
            let mut k = format!("{:03}", rng.gen_range(0..space)).into_bytes();
            k.extend(std::iter::repeat_n(0u8, rng.gen_range(0..3)));
            k
        }
    }
}

/// Keys that all share an 11-byte prefix, as the server's `key:000000…` do.
fn shared_prefix_key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    format!("user:000000{:06}", rng.gen_range(0..space)).into_bytes()
}

/// Keys shaped like the server's (`m` meta keys and `H<len>key field` hash
/// fields in one row): hash fields agree on their first 12 bytes, so only
/// fence bytes past the first 8 tell them apart.
fn tagged_key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    let n = rng.gen_range(0..space);
    if rng.gen_bool(0.2) {
        format!("m{n:08}").into_bytes()
    } else {
        let mut k = b"H\0\0\0\x17".to_vec();
        k.extend_from_slice(format!("user{:019}field{}", n / 10, n % 10).as_bytes());
        k
    }
}

/// Keys of a few groups whose members agree on far more than a fence
/// keeps (`FENCE_BYTES`): long runs of fences in a row are equal.
fn long_shared_key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    let n = rng.gen_range(0..space);
    format!("g{}-{}-{n:06}", n % 3, "x".repeat(40)).into_bytes()
}

/// Builds `n_rows` rows of random data; seqs grow with row age (newest = highest).
fn build_matrix(seed: u64, n_rows: usize, per_row: usize, space: u32) -> (Region, Matrix) {
    build_matrix_with(random_key, seed, n_rows, per_row, space, Shape::default())
}

/// How `build_matrix_with` builds rows.
#[derive(Clone, Copy, Debug)]
struct Shape {
    /// Rows get hash indexes (else bloom filters and the hint-guided search).
    hash_index: bool,
    /// A key may have several versions in one row, as an unflushed
    /// memtable with overwrites or an open snapshot leaves them.
    versions: bool,
    /// Row `r` has `per_row * 3^r` keys instead of `per_row`.
    grow: bool,
}

impl Default for Shape {
    fn default() -> Self {
        Shape { hash_index: true, versions: false, grow: false }
    }
}

/// Every combination of `Shape`.
const SHAPES: [Shape; 4] = [
    Shape { hash_index: true, versions: false, grow: false },
    Shape { hash_index: false, versions: false, grow: false },
    Shape { hash_index: true, versions: true, grow: false },
    Shape { hash_index: false, versions: true, grow: false },
];

/// `build_matrix` with keys drawn by `key`.
fn build_matrix_with(
    key: fn(&mut StdRng, u32) -> Vec<u8>,
    seed: u64,
    n_rows: usize,
    per_row: usize,
    space: u32,
    shape: Shape,
) -> (Region, Matrix) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (region, path) = region();
    let mut state = Matrix::new(3, shape.hash_index);
    let mut seq = 1u64;
    for r in 0..n_rows {
        let mut keys = BTreeSet::new();
        let mut recs = Vec::new();
        let want = if shape.grow { per_row * 3usize.pow(r as u32) } else { per_row };
        while recs.len() < want {
            let k = key(&mut rng, space);
            // One version per key per row, as a memtable flush with drops
            // would give, unless the shape asks for more.
            let another_version = shape.versions && rng.gen_bool(0.5);
            if !keys.insert(k.clone()) && !another_version {
                continue;
            }
            let kind = if rng.gen_bool(0.15) { Kind::Delete } else { Kind::Put };
            let v = format!("v{seq}").into_bytes();
            recs.push((k, seq, kind, v));
            seq += 1;
        }
        let (mut entries, log, bytes) = write_log(&region, 1000 + r as u64, &recs);
        let id = state.next_row_id;
        state.next_row_id += 1;
        let older = state.rows.first().map(|l| l.row.clone());
        let spec = RowSpec { id, entries: &mut entries, older: older.as_deref(), log_bytes: bytes, logs: vec![log] };
        let row = build_row(&region, &path, spec).unwrap();
        state.push_newest(
            LiveRow::new(row, 0, false, 1000 + r as u64, 1000 + r as u64, shape.hash_index, None).unwrap(),
        );
    }
    (region, state)
}

/// Reference: full binary search of every row, newest first.
fn brute(state: &Matrix, k: &[u8], seq: u64) -> Lookup {
    let probe = internal_key(k, seq, KIND_FOR_SEEK);
    for lr in &state.rows {
        let i = lr.row.lower_bound(&probe, key_prefix(k), lr.start, lr.row.len()).unwrap();
        if i < lr.row.len() {
            let e = lr.row.elem(i).unwrap();
            if lr.row.user_key(&e).unwrap() == k {
                return match e.kind() {
                    Some(Kind::Put) => Lookup::Found(lr.row.value(&e).unwrap().to_vec()),
                    _ => Lookup::Deleted,
                };
            }
        }
    }
    Lookup::Missing
}

#[test]
fn hints_never_skip_a_present_key() {
    // Also the hash index: both must agree with a full search of every row.
    for seed in 0..8 {
        let shape = SHAPES[seed as usize % SHAPES.len()];
        let (_region, mut state) = build_matrix_with(random_key, seed, 9, 300, 400, shape);
        let mut rng = StdRng::seed_from_u64(seed + 100);
        let max_seq = 9 * 300 + 1;
        // Partly consume the oldest rows as a column compaction would.
        if seed / 4 == 1 {
            state.begin_round();
            let u = random_key(&mut rng, 400);
            let ends: Vec<(u64, u32)> =
                state.rows.iter().map(|r| (r.row.id(), r.row.upper_bound_user(&u, r.start).unwrap())).collect();
            state.apply_column(&ends);
        }
        let view = &state;
        let mut found = 0;
        for _ in 0..4000 {
            let k = random_key(&mut rng, 450);
            let seq = if rng.gen_bool(0.5) { max_seq } else { rng.gen_range(0..max_seq) };
            let want = brute(&state, &k, seq);
            let got = view.get(&k, seq, key_hash(&k)).unwrap();
            if matches!(want, Lookup::Found(_)) {
                found += 1;
            }
            assert_eq!(got, want, "seed {seed} {shape:?} key {:?} seq {seq}", String::from_utf8_lossy(&k));
        }
        assert!(found > 500, "too few hits ({found}) to mean anything");
    }
}

#[test]
fn fences_find_keys_that_share_a_long_prefix() {
    // `user:000000…`: every key shares 11 bytes, so the stored 8-byte
    // element prefixes are all equal and only the fences (which skip the
    // shared bytes) narrow the search; probes outside the shared prefix
    // must still be answered. Server-shaped keys: meta keys and hash fields
    // in the same rows, the fields sharing 12 bytes, so the fence bytes
    // after the first 8 do the narrowing.
    let odd_probes = |i: u32, rng: &mut StdRng| match i % 10 {
        0 => Some(b"user:".to_vec()),
        1 => Some(format!("user:000000{:07}", rng.gen_range(0..50_000)).into_bytes()),
        2 => Some(format!("user:000001{:06}", rng.gen_range(0..5000)).into_bytes()),
        3 => Some(b"a".to_vec()),
        _ => None,
    };
    let key_fns: [fn(&mut StdRng, u32) -> Vec<u8>; 2] = [shared_prefix_key, tagged_key];
    for (seed, (key_fn, shape)) in key_fns.into_iter().flat_map(|k| SHAPES.map(|s| (k, s))).enumerate() {
        let (_region, state) = build_matrix_with(key_fn, 5 + seed as u64, 6, 700, 5000, shape);
        let view = &state;
        let mut rng = StdRng::seed_from_u64(55 + seed as u64);
        let max_seq = 6 * 700 + 1;
        let mut found = 0;
        for i in 0..5000 {
            let k = odd_probes(i, &mut rng).unwrap_or_else(|| key_fn(&mut rng, 5200));
            let seq = if rng.gen_bool(0.7) { max_seq } else { rng.gen_range(0..max_seq) };
            let want = brute(&state, &k, seq);
            if matches!(want, Lookup::Found(_)) {
                found += 1;
            }
            let got = view.get(&k, seq, key_hash(&k)).unwrap();
            assert_eq!(got, want, "{shape:?} key {:?} seq {seq}", String::from_utf8_lossy(&k));
        }
        assert!(found > 700, "too few hits ({found}) to mean anything");
    }
}

#[test]
fn fenced_seeks_land_where_full_searches_do() {
    // Row cursors narrow a seek with the row's fences; on keys that share a
    // long prefix (and on plain random keys), with part of each row already
    // compacted, every seek must land on the element a search of the whole
    // live range finds, and step on from there the same way.
    let key_fns: [fn(&mut StdRng, u32) -> Vec<u8>; 4] = [shared_prefix_key, random_key, tagged_key, long_shared_key];
    for (seed, key_fn) in key_fns.into_iter().enumerate() {
        let (_region, mut state) = build_matrix_with(key_fn, 60 + seed as u64, 4, 600, 4000, Shape::default());
        let mut rng = StdRng::seed_from_u64(66 + seed as u64);
        for r in state.rows.iter_mut() {
            r.start = rng.gen_range(0..r.row.len() / 2);
        }
        let max_seq = 4 * 600 + 1;
        for lr in &state.rows {
            let end = lr.row.len() - rng.gen_range(0..50);
            let mut fenced = RowIter::with_fences(lr.row.clone(), lr.start, end, lr.fences.clone());
            let mut plain = RowIter::new(lr.row.clone(), lr.start, end);
            let mut landed = 0;
            for i in 0..2000 {
                let k = match i % 8 {
                    0 => b"user:".to_vec(),
                    1 => b"a".to_vec(),
                    2 => b"zz".to_vec(),
                    3 => format!("g{}-{}", i % 3, "x".repeat(40)).into_bytes(),
                    _ => key_fn(&mut rng, 4400),
                };
                let target = internal_key(&k, rng.gen_range(0..=max_seq), KIND_FOR_SEEK);
                fenced.seek(&target).unwrap();
                plain.seek(&target).unwrap();
                for _ in 0..2 {
                    assert_eq!(fenced.valid(), plain.valid(), "seek {:?}", String::from_utf8_lossy(&k));
                    assert_eq!(fenced.key(), plain.key(), "seek {:?}", String::from_utf8_lossy(&k));
                    if !plain.valid() {
                        break;
                    }
                    landed += 1;
                    fenced.next().unwrap();
                    plain.next().unwrap();
                }
            }
            assert!(landed > 1000, "too few seeks landed inside the row ({landed})");
        }
    }
}

#[test]
fn record_round_trips() {
    let r = MatrixRecord {
        next_row_id: 9,
        rows: vec![RowMeta { id: 8, slot: 3, slots: 2, start: 17, first_log: 4, last_log: 6, compactor: true }],
    };
    assert_eq!(MatrixRecord::decode(&r.encode()).unwrap(), r);
    assert!(MatrixRecord::decode(&[1, 2]).is_err());
}

#[test]
fn row_damage_is_detected() {
    let (region, state) = build_matrix(7, 1, 50, 100);
    let row: &Row = &state.rows[0].row;
    let ext = row.extent().clone();
    // Reopening the intact row works; the hashes match.
    let again = Row::open(ext.clone(), vec![], Arc::new("sim.pm".into())).unwrap();
    assert_eq!(again.hashes().unwrap(), row.hashes().unwrap());
    drop(region);
}

#[test]
fn columns_end_on_l1_bounds_and_cover_everything() {
    let (_region, mut state) = build_matrix(11, 5, 400, 1000);
    state.begin_round();
    // Pretend L1 has tables every 100 keys of the 4-digit space.
    let l1: Vec<Arc<crate::version::FileMeta>> = (0..10)
        .map(|i| {
            Arc::new(crate::version::FileMeta {
                number: 100 + i,
                size: 1,
                smallest: internal_key(format!("{:04}", i * 100).as_bytes(), 1, Kind::Put),
                largest: internal_key(format!("{:04}", i * 100 + 99).as_bytes(), 1, Kind::Put),
                entries: 1,
                deletions: 0,
                smallest_seq: 1,
                largest_seq: 1,
            })
        })
        .collect();
    let total: u64 = state.rows.iter().map(|r| r.row.len() as u64).sum();
    let mut moved = 0;
    let mut columns = 0;
    while let Some(c) = pick_column(&state.rows, &l1, 4000, &HashSet::new()).unwrap() {
        if let Some(hi) = &c.hi {
            assert!(l1.iter().any(|f| f.largest_user() == hi.as_slice()) || hi.as_slice() > l1[9].largest_user());
        }
        moved += c.elements();
        columns += 1;
        state.apply_column(&c.ends());
        assert!(columns < 1000);
    }
    assert_eq!(moved, total);
    assert!(columns > 3, "only {columns} columns");
    assert!(state.rows.is_empty());
}

/// Whether a segment's probe may hold key hash `h`.
fn admits(p: &SegProbe, h: u64, cands: &mut Vec<(u64, u32)>) -> bool {
    match p {
        SegProbe::Bloom(f) => f.may_contain(h),
        SegProbe::Index(ix) => {
            ix.candidates(h, cands);
            !cands.is_empty()
        }
    }
}

#[test]
fn segment_filters_keep_a_low_false_positive_rate() {
    // The filling segment's filter is sized for a full segment like its
    // first row; rows that grow 3x each overflow that plan, and the filter
    // must then be rebuilt bigger rather than overfilled.
    let cases = [(9, false), (11, false), (5, true), (6, true)];
    for ((n_rows, grow), hash_index) in cases.into_iter().flat_map(|c| [(c, true), (c, false)]) {
        let shape = Shape { grow, hash_index, ..Shape::default() };
        let (_region, state) = build_matrix_with(random_key, 33, n_rows, 40, 1_000_000, shape);
        let view = &state;
        let mut rng = StdRng::seed_from_u64(7);
        let mut cands = Vec::new();
        for g in &view.groups {
            let f = g.probe.as_ref().expect("every segment has a probe");
            let mut present = HashSet::new();
            for lr in view.rows.iter().skip(g.first).take(g.len) {
                present.extend(lr.row.hashes().unwrap().iter().copied());
            }
            let (mut probes, mut false_hits) = (0u32, 0u32);
            while probes < 20_000 {
                let h: u64 = rng.gen();
                if present.contains(&h) {
                    continue;
                }
                probes += 1;
                false_hits += u32::from(admits(f, h, &mut cands));
            }
            let rate = f64::from(false_hits) / f64::from(probes);
            // 10 bits per key: about 1% for a blocked bloom filter; far less
            // for a hash index's fingerprints.
            assert!(rate < 0.03, "rows {n_rows} grow {grow}: {} keys, false-positive rate {rate}", present.len());
        }
    }
}

#[test]
fn every_segment_has_a_filter_that_admits_its_keys() {
    // build_matrix uses 3 rows per segment: 9 rows make 3 full segments,
    // 10 and 11 leave a newest segment still filling (its filter grows
    // with each row); rows that grow 3x each overflow the growing filter's
    // planned size, which rebuilds it.
    // With hash indexes, every run start of every row is a candidate.
    let cases = [(9, false, 3), (10, false, 4), (11, false, 4), (5, true, 2)];
    let mut cands = Vec::new();
    for ((n_rows, grow, groups), hash_index) in cases.into_iter().flat_map(|c| [(c, true), (c, false)]) {
        let shape = Shape { grow, hash_index, versions: true };
        let (_region, state) = build_matrix_with(random_key, 21, n_rows, 40, 1_000_000, shape);
        let view = &state;
        assert_eq!(view.groups.len(), groups, "{:?}", view.groups.iter().map(|g| g.len).collect::<Vec<_>>());
        for g in &view.groups {
            let f = g.probe.as_ref().expect("every segment has a probe");
            assert_eq!(matches!(f, SegProbe::Index(_)), hash_index);
            for lr in view.rows.iter().skip(g.first).take(g.len) {
                let hashes = lr.row.hashes().unwrap();
                for (i, h) in hashes.iter().enumerate() {
                    let run_start = i == 0 || hashes[i - 1] != *h;
                    let ok = match f {
                        SegProbe::Bloom(b) => b.may_contain(*h),
                        SegProbe::Index(ix) => {
                            ix.candidates(*h, &mut cands);
                            !run_start || cands.contains(&(lr.row.id(), i as u32))
                        }
                    };
                    assert!(ok, "rows {n_rows} grow {grow}: element {i} of row {} is not found", lr.row.id());
                }
            }
        }
    }
}
