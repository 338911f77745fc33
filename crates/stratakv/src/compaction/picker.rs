//! Leveled compaction policy: a pure function of a version.
//!
//! Scores follow LevelDB: L0's score is its file count over the trigger;
//! level n's is its bytes over its target. The highest score >= 1 wins.
//! No I/O happens here, so the policy is unit-tested directly.

use std::collections::HashSet;
use std::sync::Arc;

use crate::key::compare_internal;
use crate::version::{sorted_overlapping, FileMeta, Version, NUM_LEVELS};

/// Sizes that drive the policy.
#[derive(Clone, Debug)]
pub struct LevelPolicy {
    /// L0 files that make L0 due.
    pub l0_trigger: usize,
    /// Target bytes of L1.
    pub base_bytes: u64,
    /// Growth per level.
    pub multiplier: u64,
    /// Target output file size.
    pub target_file_size: u64,
}

impl LevelPolicy {
    /// Target bytes of `level` (>= 1).
    pub fn max_bytes(&self, level: usize) -> u64 {
        let mut b = self.base_bytes;
        for _ in 1..level {
            b = b.saturating_mul(self.multiplier);
        }
        b
    }

    /// Compaction scores per level (index = level); the last level has none.
    pub fn scores(&self, v: &Version) -> Vec<f64> {
        let mut out = vec![0.0; NUM_LEVELS];
        if let Some(s) = out.get_mut(0) {
            *s = v.files(0).len() as f64 / self.l0_trigger.max(1) as f64;
        }
        for (level, s) in out.iter_mut().enumerate().take(NUM_LEVELS - 1).skip(1) {
            *s = v.level_bytes(level) as f64 / self.max_bytes(level).max(1) as f64;
        }
        out
    }
}

/// One unit of compaction work.
#[derive(Clone, Debug)]
pub struct CompactionTask {
    /// Level the inputs come from.
    pub level: usize,
    /// Files of `level`.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Overlapping files of `level + 1`.
    pub next_inputs: Vec<Arc<FileMeta>>,
    /// Files of `level + 2` overlapping the output range (to cut outputs early).
    pub grandparents: Vec<Arc<FileMeta>>,
    /// Move the single input down without rewriting it.
    pub trivial_move: bool,
}

impl CompactionTask {
    /// Level the outputs go to.
    pub fn output_level(&self) -> usize {
        self.level + 1
    }

    /// Every input file.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(self.next_inputs.iter())
    }

    /// Input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.size).sum()
    }
}

fn range_of(files: &[Arc<FileMeta>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| f.smallest_user()).min()?;
    let hi = files.iter().map(|f| f.largest_user()).max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

/// Picks the most urgent compaction, skipping files in `busy`. `pointers`
/// holds, per level, the largest key compacted last time (round robin).
pub fn pick(v: &Version, policy: &LevelPolicy, busy: &HashSet<u64>, pointers: &[Vec<u8>]) -> Option<CompactionTask> {
    let scores = policy.scores(v);
    let mut order: Vec<usize> = (0..NUM_LEVELS - 1).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
    for level in order {
        if scores[level] < 1.0 {
            break;
        }
        let task = if level == 0 { pick_l0(v, busy) } else { pick_level(v, level, busy, pointers) };
        if let Some(mut t) = task {
            finish(v, policy, &mut t);
            return Some(t);
        }
    }
    None
}

/// A compaction of `level` restricted to user keys in `[lo, hi]` (manual compaction).
pub fn pick_range(
    v: &Version,
    policy: &LevelPolicy,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    busy: &HashSet<u64>,
) -> Option<CompactionTask> {
    if level + 1 >= NUM_LEVELS {
        return None;
    }
    let mut inputs = v.overlapping(level, lo, hi);
    if level == 0 {
        // L0 files overlap each other: take every one that touches the
        // range, growing it until no other L0 file overlaps. An older L0
        // file left out would stay above the newer data moved to L1 and
        // shadow it (and a tombstone dropped at the bottom would bring its
        // value back).
        loop {
            let (l, h) = range_of(&inputs)?;
            let grown = v.overlapping(0, Some(&l), Some(&h));
            let done = grown.len() == inputs.len();
            inputs = grown;
            if done {
                break;
            }
        }
    } else {
        // Keep the task bounded; the caller loops until the range is done.
        let mut bytes = 0;
        let limit = policy.target_file_size.saturating_mul(25);
        inputs.retain(|f| {
            let keep = bytes < limit;
            bytes += f.size;
            keep
        });
    }
    if inputs.is_empty() || inputs.iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    let (l, h) = range_of(&inputs)?;
    let next_inputs = v.overlapping(level + 1, Some(&l), Some(&h));
    if next_inputs.iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    let mut t = CompactionTask { level, inputs, next_inputs, grandparents: Vec::new(), trivial_move: false };
    finish(v, policy, &mut t);
    // A manual compaction should rewrite data (to drop tombstones), not just move it.
    t.trivial_move = false;
    Some(t)
}

fn pick_l0(v: &Version, busy: &HashSet<u64>) -> Option<CompactionTask> {
    let l0 = v.files(0);
    if l0.is_empty() || l0.iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    let inputs = l0.to_vec();
    let (lo, hi) = range_of(&inputs)?;
    let next_inputs = v.overlapping(1, Some(&lo), Some(&hi));
    if next_inputs.iter().any(|f| busy.contains(&f.number)) {
        return None;
    }
    Some(CompactionTask { level: 0, inputs, next_inputs, grandparents: Vec::new(), trivial_move: false })
}

/// Picks the file of `level` whose overlap with `level + 1` is smallest for
/// its size (RocksDB's "min overlapping ratio"): pushing it down rewrites the
/// fewest bytes per byte moved. Ties go to the first file after the last
/// compacted key, so equal files are taken round robin.
fn pick_level(v: &Version, level: usize, busy: &HashSet<u64>, pointers: &[Vec<u8>]) -> Option<CompactionTask> {
    let files = v.files(level);
    let ptr = pointers.get(level).filter(|p| !p.is_empty());
    // Start after the last compacted key, wrapping around.
    let start = match ptr {
        Some(p) => files.partition_point(|f| compare_internal(&f.largest, p) != std::cmp::Ordering::Greater),
        None => 0,
    };
    let n = files.len();
    let mut best: Option<(f64, CompactionTask)> = None;
    for i in 0..n {
        let f = files.get((start + i) % n)?;
        if busy.contains(&f.number) {
            continue;
        }
        let next_inputs = v.overlapping(level + 1, Some(f.smallest_user()), Some(f.largest_user()));
        if next_inputs.iter().any(|g| busy.contains(&g.number)) {
            continue;
        }
        let overlap: u64 = next_inputs.iter().map(|g| g.size).sum();
        let ratio = overlap as f64 / f.size.max(1) as f64;
        if best.as_ref().is_none_or(|(r, _)| ratio < *r) {
            let task = CompactionTask {
                level,
                inputs: vec![f.clone()],
                next_inputs,
                grandparents: Vec::new(),
                trivial_move: false,
            };
            best = Some((ratio, task));
        }
    }
    best.map(|(_, t)| t)
}

fn finish(v: &Version, policy: &LevelPolicy, t: &mut CompactionTask) {
    let all: Vec<Arc<FileMeta>> = t.all_inputs().cloned().collect();
    if let Some((lo, hi)) = range_of(&all) {
        if t.level + 2 < NUM_LEVELS {
            t.grandparents = v.overlapping(t.level + 2, Some(&lo), Some(&hi));
        }
    }
    let gp_bytes: u64 = t.grandparents.iter().map(|f| f.size).sum();
    t.trivial_move = t.inputs.len() == 1
        && t.next_inputs.is_empty()
        && gp_bytes <= policy.target_file_size.saturating_mul(10)
        && (t.level > 0 || v.files(0).len() == 1);
}

/// Whether `ukey` might exist in a level deeper than `level` (so a tombstone
/// for it must be kept). The runs sit between L0 and L1: below level 0.
pub fn key_may_exist_below(v: &Version, level: usize, ukey: &[u8]) -> bool {
    // Runs and the levels below L0 are sorted and disjoint.
    let holds = |files: &[Arc<FileMeta>]| !sorted_overlapping(files, Some(ukey), Some(ukey)).is_empty();
    (level == 0 && v.runs.iter().any(|r| holds(&r.files))) || v.levels.iter().skip(level + 1).any(|files| holds(files))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};

    fn file(n: u64, lo: &str, hi: &str, size: u64) -> Arc<FileMeta> {
        Arc::new(FileMeta {
            number: n,
            size,
            smallest: internal_key(lo.as_bytes(), 10, Kind::Put),
            largest: internal_key(hi.as_bytes(), 1, Kind::Put),
            entries: 1,
            deletions: 0,
            smallest_seq: 1,
            largest_seq: 10,
        })
    }

    fn policy() -> LevelPolicy {
        LevelPolicy { l0_trigger: 4, base_bytes: 1000, multiplier: 10, target_file_size: 100 }
    }

    #[test]
    fn l0_is_picked_when_over_trigger_with_overlapping_l1() {
        let mut v = Version::empty();
        v.levels[0] = (0..4).map(|i| file(10 + i, "b", "d", 10)).collect();
        v.levels[1] = vec![file(1, "a", "a", 10), file(2, "c", "c", 10), file(3, "x", "z", 10)];
        let t = pick(&v, &policy(), &HashSet::new(), &[]).unwrap();
        assert_eq!(t.level, 0);
        assert_eq!(t.inputs.len(), 4);
        assert_eq!(t.next_inputs.iter().map(|f| f.number).collect::<Vec<_>>(), vec![2]);
        // Busy L0 files block the pick.
        let busy: HashSet<u64> = [11].into_iter().collect();
        assert!(pick(&v, &policy(), &busy, &[]).is_none());
    }

    #[test]
    fn oversized_level_is_picked_round_robin_and_trivially_moved() {
        let mut v = Version::empty();
        v.levels[1] = vec![file(1, "a", "b", 600), file(2, "c", "d", 600)];
        let t = pick(&v, &policy(), &HashSet::new(), &[]).unwrap();
        assert_eq!((t.level, t.inputs[0].number, t.trivial_move), (1, 1, true));
        let ptrs = vec![Vec::new(), t.inputs[0].largest.clone()];
        let t2 = pick(&v, &policy(), &HashSet::new(), &ptrs).unwrap();
        assert_eq!(t2.inputs[0].number, 2);
    }

    #[test]
    fn the_file_with_the_least_overlap_below_for_its_size_is_picked() {
        let mut v = Version::empty();
        v.levels[1] = vec![file(1, "a", "b", 600), file(2, "c", "d", 600), file(3, "e", "f", 300)];
        // File 1 overlaps 900 bytes (1.5x), file 2 300 (0.5x), file 3 300 (1.0x).
        v.levels[2] =
            vec![file(4, "a", "a", 400), file(5, "b", "b", 500), file(6, "c", "c", 300), file(7, "e", "e", 300)];
        let t = pick(&v, &policy(), &HashSet::new(), &[]).unwrap();
        assert_eq!(t.inputs[0].number, 2);
        assert_eq!(t.next_inputs.iter().map(|f| f.number).collect::<Vec<_>>(), vec![6]);
        // A busy file below rules its L1 file out; the next best is taken.
        let busy: HashSet<u64> = [6].into_iter().collect();
        assert_eq!(pick(&v, &policy(), &busy, &[]).unwrap().inputs[0].number, 3);
    }

    #[test]
    fn nothing_to_do_under_targets() {
        let mut v = Version::empty();
        v.levels[0] = vec![file(1, "a", "b", 10)];
        v.levels[1] = vec![file(2, "a", "b", 10)];
        assert!(pick(&v, &policy(), &HashSet::new(), &[]).is_none());
        assert!(key_may_exist_below(&v, 0, b"a"));
        assert!(!key_may_exist_below(&v, 1, b"a"));
    }
}
