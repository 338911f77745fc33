//! Which tables a selective compaction merges (SLM-DB's `TryToPick`):
//! among the candidates, the one whose key range overlaps the others most,
//! with the candidates that overlap it best, up to a limit.

use std::collections::HashSet;
use std::sync::Arc;

use crate::version::FileMeta;

/// A user key as a number (its 8 bytes after the `skip` bytes every
/// candidate's keys share, big-endian), to measure overlap as SLM-DB does
/// with its integer keys; without the skip, keys like zero-padded numbers
/// would all be the same number.
fn as_number(k: &[u8], skip: usize) -> f64 {
    let k = k.get(skip..).unwrap_or(&[]);
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(b) as f64
}

/// Bytes every bound of `files` begins with.
fn shared_prefix(files: &[&Arc<FileMeta>]) -> usize {
    let Some(first) = files.first() else { return 0 };
    let base = first.smallest_user();
    files
        .iter()
        .flat_map(|f| [f.smallest_user(), f.largest_user()])
        .map(|k| base.iter().zip(k).take_while(|(x, y)| x == y).count())
        .min()
        .unwrap_or(0)
}

/// Overlap length over union length of two tables' key ranges.
fn score(a: &FileMeta, b: &FileMeta, skip: usize) -> f64 {
    let (a0, a1) = (as_number(a.smallest_user(), skip), as_number(a.largest_user(), skip));
    let (b0, b1) = (as_number(b.smallest_user(), skip), as_number(b.largest_user(), skip));
    let overlap = a1.min(b1) - a0.max(b0);
    if overlap < 0.0 || a.largest_user() < b.smallest_user() || b.largest_user() < a.smallest_user() {
        return 0.0;
    }
    let union = a1.max(b1) - a0.min(b0);
    if union <= 0.0 {
        1.0
    } else {
        overlap / union
    }
}

/// The tables to merge out of `candidates` (numbers of `files` that are not
/// busy). `forced`: take the first `forced_size` candidates when overlap
/// alone finds too few (writers are stopped).
pub(super) fn pick(files: &[Arc<FileMeta>], candidates: &HashSet<u64>, max: usize, forced: bool) -> Vec<Arc<FileMeta>> {
    let cands: Vec<&Arc<FileMeta>> = files.iter().filter(|f| candidates.contains(&f.number)).collect();
    if cands.is_empty() {
        return Vec::new();
    }
    let skip = shared_prefix(&cands);
    // The candidate that overlaps the others most.
    let total = |a: &FileMeta| cands.iter().filter(|b| b.number != a.number).map(|b| score(a, b, skip)).sum::<f64>();
    let mut best = cands[0];
    let mut best_total = total(best);
    for c in &cands[1..] {
        let t = total(c);
        if t > best_total {
            best = c;
            best_total = t;
        }
    }
    let mut others: Vec<(f64, &Arc<FileMeta>)> = cands
        .iter()
        .filter(|b| b.number != best.number)
        .map(|b| (score(best, b, skip), *b))
        .filter(|(s, _)| *s > 0.0)
        .collect();
    others.sort_by(|x, y| y.0.total_cmp(&x.0));
    let mut out = vec![best.clone()];
    out.extend(others.into_iter().take(max.saturating_sub(1)).map(|(_, f)| f.clone()));
    if out.len() <= 1 && forced {
        out = cands.into_iter().take(max.min(6)).cloned().collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};

    fn file(n: u64, lo: &[u8], hi: &[u8]) -> Arc<FileMeta> {
        Arc::new(FileMeta {
            number: n,
            size: 1,
            smallest: internal_key(lo, 9, Kind::Put),
            largest: internal_key(hi, 1, Kind::Put),
            entries: 1,
            deletions: 0,
            smallest_seq: 1,
            largest_seq: 9,
        })
    }

    #[test]
    fn the_most_overlapping_candidate_and_its_overlaps_are_picked() {
        let files = vec![
            file(1, b"a0000000", b"m0000000"),
            file(2, b"b0000000", b"l0000000"),
            file(3, b"c0000000", b"k0000000"),
            file(4, b"x0000000", b"z0000000"),
        ];
        let all: HashSet<u64> = [1, 2, 3, 4].into();
        let picked: Vec<u64> = pick(&files, &all, 15, false).iter().map(|f| f.number).collect();
        assert_eq!(picked.len(), 3, "{picked:?}");
        assert!(!picked.contains(&4));
        // Keys with a long common prefix (zero-padded numbers) are told apart past it.
        let padded = vec![
            file(5, b"0000000000100000", b"0000000000900000"),
            file(6, b"0000000000800000", b"0000000000999999"),
            file(7, b"0000000000150000", b"0000000000850000"),
        ];
        let c: HashSet<u64> = [5, 6, 7].into();
        let picked: Vec<u64> = pick(&padded, &c, 2, false).iter().map(|f| f.number).collect();
        assert_eq!(picked, vec![5, 7], "the widest overlap first, then its best partner");
        // A lone candidate is not worth a merge unless writers are stopped.
        let lone: HashSet<u64> = [4].into();
        assert_eq!(pick(&files, &lone, 15, false).len(), 1);
        assert_eq!(pick(&files, &HashSet::new(), 15, true).len(), 0);
    }
}
