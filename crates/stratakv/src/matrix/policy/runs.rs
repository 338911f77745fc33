//! Run merges (the tiered part of the matrix profile): which sorted runs
//! to merge into L1, and when. A pure function of a version, like the
//! leveled picker (`compaction::picker`).
//!
//! Each column-compaction round writes one new sorted run instead of
//! rewriting the L1 tables its columns overlap; once `trigger` complete runs
//! have gathered, all of them are merged into L1 at once. A byte is then
//! written once into a run and once more by the merge, where merging every
//! round into L1 would rewrite L1 once per round (L1 size / round size).

use std::collections::HashSet;
use std::sync::Arc;

use crate::key::compare_internal;
use crate::version::{FileMeta, Run, Version};

/// Complete runs to merge into L1, with what they overlap there.
#[derive(Clone, Debug)]
pub struct RunMergeTask {
    /// The runs merged, newest first.
    pub runs: Vec<Run>,
    /// L1 tables overlapping the runs.
    pub next_inputs: Vec<Arc<FileMeta>>,
    /// L2 tables overlapping the output (to cut outputs early).
    pub grandparents: Vec<Arc<FileMeta>>,
    /// Every input table is disjoint from every other and nothing in L1
    /// overlaps: move the tables into L1 without rewriting them.
    pub trivial_move: bool,
}

impl RunMergeTask {
    /// Every input table.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.runs.iter().flat_map(|r| r.files.iter()).chain(self.next_inputs.iter())
    }

    /// Input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.size).sum()
    }
}

/// The runs of `v` a merge may take: all but `active` (the run a
/// compaction round is still writing).
fn complete_runs(v: &Version, active: Option<u64>) -> Vec<&Run> {
    v.runs.iter().filter(|r| Some(r.id) != active).collect()
}

/// Whether a run merge is due: `trigger` complete runs (with `trigger` <= 1,
/// runs are not wanted at all, so any complete run is due).
pub fn merge_due(v: &Version, active: Option<u64>, trigger: usize) -> bool {
    let n = complete_runs(v, active).len();
    n > 0 && n >= trigger.max(1)
}

/// Picks a merge of every complete run into L1 if one is due (or, with
/// `force`, if any complete run exists) and no input is `busy`.
pub fn pick_run_merge(
    v: &Version,
    active: Option<u64>,
    trigger: usize,
    force: bool,
    busy: &HashSet<u64>,
) -> Option<RunMergeTask> {
    if !(force || merge_due(v, active, trigger)) {
        return None;
    }
    let runs: Vec<Run> = complete_runs(v, active).into_iter().cloned().collect();
    let files: Vec<&Arc<FileMeta>> = runs.iter().flat_map(|r| r.files.iter()).collect();
    if files.is_empty() || files.iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    let lo = files.iter().map(|f| f.smallest_user()).min()?.to_vec();
    let hi = files.iter().map(|f| f.largest_user()).max()?.to_vec();
    // Every L1 table inside the runs' key range, not only those a run
    // table overlaps: an output table may span a gap between run tables.
    // With keys that grow over time (a sequential load) L1 is left alone.
    let next_inputs = v.overlapping(1, Some(&lo), Some(&hi));
    if next_inputs.iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    let grandparents = v.overlapping(2, Some(&lo), Some(&hi));
    let trivial_move = next_inputs.is_empty() && mutually_disjoint(&files);
    Some(RunMergeTask { runs, next_inputs, grandparents, trivial_move })
}

/// Whether no two of `files` share a user key.
fn mutually_disjoint(files: &[&Arc<FileMeta>]) -> bool {
    let mut sorted: Vec<&Arc<FileMeta>> = files.to_vec();
    sorted.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
    sorted.windows(2).all(|w| match w {
        [a, b] => a.largest_user() < b.smallest_user(),
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};

    fn file(n: u64, lo: &str, hi: &str) -> Arc<FileMeta> {
        Arc::new(FileMeta {
            number: n,
            size: 10,
            smallest: internal_key(lo.as_bytes(), 1, Kind::Put),
            largest: internal_key(hi.as_bytes(), 1, Kind::Put),
            entries: 1,
            deletions: 0,
            smallest_seq: 1,
            largest_seq: 1,
        })
    }

    fn run(id: u64, files: Vec<Arc<FileMeta>>) -> Run {
        Run { id, files }
    }

    #[test]
    fn due_at_trigger_complete_runs_not_counting_the_active_one() {
        let mut v = Version::empty();
        v.runs = vec![run(30, vec![file(31, "a", "z")]), run(20, vec![file(21, "a", "z")])];
        assert!(merge_due(&v, None, 2));
        assert!(!merge_due(&v, Some(30), 2), "run 30 is still being written");
        assert!(merge_due(&v, Some(30), 1), "leveled L1 wants no runs at all");
        let t = pick_run_merge(&v, Some(30), 1, false, &HashSet::new()).unwrap();
        assert_eq!(t.runs.iter().map(|r| r.id).collect::<Vec<_>>(), vec![20]);
        assert!(pick_run_merge(&v, None, 3, false, &HashSet::new()).is_none());
        assert!(pick_run_merge(&v, None, 3, true, &HashSet::new()).is_some(), "forced");
    }

    #[test]
    fn takes_only_overlapping_l1_tables_and_moves_disjoint_runs() {
        let mut v = Version::empty();
        v.levels[1] = vec![file(1, "a", "b"), file(2, "m", "n"), file(3, "x", "z")];
        v.runs = vec![run(20, vec![file(21, "c", "d")]), run(10, vec![file(11, "e", "f")])];
        let t = pick_run_merge(&v, None, 2, false, &HashSet::new()).unwrap();
        assert!(t.next_inputs.is_empty());
        assert!(t.trivial_move, "disjoint runs over a gap in L1 move down as they are");

        v.runs = vec![run(20, vec![file(21, "c", "d")]), run(10, vec![file(11, "d", "m")])];
        let t = pick_run_merge(&v, None, 2, false, &HashSet::new()).unwrap();
        assert_eq!(t.next_inputs.iter().map(|f| f.number).collect::<Vec<_>>(), vec![2]);
        assert!(!t.trivial_move);
        assert_eq!(t.grandparents.len(), 0);

        // L1's "m..n" sits in the gap between two run tables, but an
        // output table may span the gap: it is an input too.
        v.runs = vec![run(20, vec![file(21, "c", "d"), file(22, "o", "p")]), run(10, vec![file(11, "c", "d")])];
        let t = pick_run_merge(&v, None, 2, false, &HashSet::new()).unwrap();
        assert_eq!(t.next_inputs.iter().map(|f| f.number).collect::<Vec<_>>(), vec![2]);
    }

    #[test]
    fn busy_inputs_defer_the_merge() {
        let mut v = Version::empty();
        v.levels[1] = vec![file(1, "a", "z")];
        v.runs = vec![run(20, vec![file(21, "c", "d")]), run(10, vec![file(11, "e", "f")])];
        let busy: HashSet<u64> = [1].into_iter().collect();
        assert!(pick_run_merge(&v, None, 2, false, &busy).is_none());
        let busy: HashSet<u64> = [11].into_iter().collect();
        assert!(pick_run_merge(&v, None, 2, false, &busy).is_none());
    }
}
