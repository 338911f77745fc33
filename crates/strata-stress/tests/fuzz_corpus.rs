//! Replays the fuzz targets' seed corpora (generated from real engine
//! files), mutations of them, and every input in `fuzz/regressions/` on
//! stable: none may panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_stress::fuzz_targets::{run_target, split_matrix_input, TARGETS};

fn mutate(data: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let mut d = data.to_vec();
    if d.is_empty() {
        return vec![rng.gen()];
    }
    match rng.gen_range(0..4) {
        0 => {
            for _ in 0..rng.gen_range(1..8) {
                let i = rng.gen_range(0..d.len());
                d[i] ^= 1 << rng.gen_range(0..8);
            }
        }
        1 => d.truncate(rng.gen_range(0..d.len())),
        2 => {
            let i = rng.gen_range(0..d.len());
            let n = rng.gen_range(1..64).min(d.len() - i);
            d[i..i + n].fill(if rng.gen_bool(0.5) { 0 } else { 0xff });
        }
        _ => {
            let i = rng.gen_range(0..d.len());
            let w = rng.gen::<u64>().to_le_bytes();
            let n = 8.min(d.len() - i);
            d[i..i + n].copy_from_slice(&w[..n]);
        }
    }
    d
}

#[test]
fn seeds_and_their_mutations_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let n = strata_stress::corpus::generate(dir.path()).unwrap();
    assert!(n >= 15, "only {n} seeds");
    let mut rng = StdRng::seed_from_u64(42);
    for target in TARGETS {
        let d = dir.path().join(target);
        let seeds: Vec<Vec<u8>> =
            std::fs::read_dir(&d).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
        assert!(!seeds.is_empty(), "no seeds for {target}");
        // Whole-database targets cost a reopen per input: fewer mutations.
        let per_seed = if matches!(target, "log_recover" | "matrix_row") { 40 } else { 300 };
        for s in &seeds {
            assert!(run_target(target, s));
            for _ in 0..per_seed {
                let m = if target == "matrix_row" {
                    // Mutate the MANIFEST or the PM image, keeping the split.
                    let (man, img) = split_matrix_input(s).unwrap();
                    if rng.gen_bool(0.5) {
                        strata_stress::fuzz_targets::join_matrix_input(&mutate(man, &mut rng), img)
                    } else {
                        strata_stress::fuzz_targets::join_matrix_input(man, &mutate(img, &mut rng))
                    }
                } else {
                    mutate(s, &mut rng)
                };
                run_target(target, &m);
            }
        }
    }
}

#[test]
fn matrix_seed_holds_rows_and_data() {
    // The matrix seed must exercise row decoding: the database it encodes
    // opens and has data in its rows.
    let dir = tempfile::tempdir().unwrap();
    strata_stress::corpus::generate(dir.path()).unwrap();
    let s = std::fs::read(dir.path().join("matrix_row/matrix")).unwrap();
    let (man, _) = split_matrix_input(&s).unwrap();
    let (recs, _) = stratakv::tooling::decode_manifest_records(man, Path::new("m")).unwrap();
    let has_rows = recs.iter().any(|(_, r)| {
        stratakv::tooling::VersionEdit::decode(r)
            .ok()
            .and_then(|e| e.l0_record)
            .and_then(|m| stratakv::tooling::MatrixRecord::decode(&m).ok())
            .is_some_and(|m| !m.rows.is_empty())
    });
    assert!(has_rows, "the matrix seed's MANIFEST names no rows");
    let keys = strata_stress::fuzz_targets::matrix_row_keys(&s);
    assert!(keys.is_some_and(|n| n > 10), "the matrix seed does not open with its data: {keys:?}");
    for name in ["region-sstable", "region-log-only", "region-matrix"] {
        let img = std::fs::read(dir.path().join("log_recover").join(name)).unwrap();
        let keys = strata_stress::fuzz_targets::log_recover_keys(&img);
        assert!(keys.is_some(), "{name} does not open");
    }
}

#[test]
fn committed_fuzz_regressions_never_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    for target in TARGETS {
        let d = root.join(target);
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            run_target(target, &std::fs::read(&p).unwrap());
        }
    }
}
