//! Which receiver rows a row merge takes.
//!
//! Merging always the oldest rows would fold every new segment into one
//! ever larger row, rewriting it again and again (quadratic in the rows
//! flushed between compaction rounds). Instead a merge takes the `k`
//! adjacent receiver rows with the fewest elements, starting at a segment
//! boundary: whole segments of flushed rows merge first, merged rows merge
//! again only once `k` of similar size lie side by side, so each element is
//! rewritten about once per factor `k` of growth (size-tiered).

use std::ops::Range;

/// What the merge choice needs to know of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeCandidate {
    /// Segment the row belongs to.
    pub seg: u64,
    /// Elements not yet compacted.
    pub elems: u64,
    /// A receiver (not claimed by a compaction round).
    pub receiver: bool,
}

/// The rows (an index range into `rows`, newest first) to merge into one,
/// or None when at most `trigger` rows are receivers. The newest segment is
/// left alone while it has fewer than `k` rows: it is still growing.
pub fn pick_merge(rows: &[MergeCandidate], k: usize, trigger: usize) -> Option<Range<usize>> {
    let k = k.max(2);
    let receivers = rows.iter().filter(|r| r.receiver).count();
    if receivers <= trigger || receivers < k {
        return None;
    }
    let newest = rows.first().map(|r| r.seg);
    let open = rows.iter().take_while(|r| Some(r.seg) == newest).count();
    let skip = if open < k { open } else { 0 };
    let window_cost = |i: usize| -> Option<u64> {
        let w = rows.get(i..i + k)?;
        w.iter().all(|r| r.receiver).then(|| w.iter().map(|r| r.elems).sum())
    };
    let best = |aligned: bool| -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for i in skip..rows.len().saturating_sub(k - 1) {
            let starts_segment = i == skip || rows.get(i - 1).map(|r| r.seg) != rows.get(i).map(|r| r.seg);
            if aligned && !starts_segment {
                continue;
            }
            // Ties go to the older window: `<=` keeps moving to later (older) rows.
            if let Some(c) = window_cost(i) {
                if best.is_none_or(|(bc, _)| c <= bc) {
                    best = Some((c, i));
                }
            }
        }
        best.map(|(_, i)| i)
    };
    best(true).or_else(|| best(false)).map(|i| i..i + k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flushes `flushes` rows of `elems` elements, segmenting like the
    /// matrix (a new segment every `k` rows, merged rows alone in theirs),
    /// merging whenever `pick_merge` asks; returns (elements rewritten by
    /// merges, most rows ever held after merging).
    fn simulate(flushes: u64, elems: u64, k: usize, trigger: usize) -> (u64, usize) {
        let mut rows: Vec<MergeCandidate> = Vec::new();
        let (mut next_seg, mut work, mut most) = (0u64, 0u64, 0usize);
        for _ in 0..flushes {
            let open = rows.first().map(|r| rows.iter().take_while(|x| x.seg == r.seg).count());
            let seg = match (open, rows.first()) {
                (Some(n), Some(r)) if n < k && r.elems == elems => r.seg,
                _ => {
                    next_seg += 1;
                    next_seg
                }
            };
            rows.insert(0, MergeCandidate { seg, elems, receiver: true });
            while let Some(w) = pick_merge(&rows, k, trigger) {
                assert_eq!(w.len(), k);
                let total: u64 = rows[w.clone()].iter().map(|r| r.elems).sum();
                work += total;
                next_seg += 1;
                rows.splice(w, [MergeCandidate { seg: next_seg, elems: total, receiver: true }]);
            }
            most = most.max(rows.len());
        }
        (work, most)
    }

    #[test]
    fn merges_are_size_tiered_not_quadratic() {
        let (flushes, elems) = (4000u64, 100u64);
        let (work, most) = simulate(flushes, elems, 8, 32);
        assert!(most <= 32, "{most} rows");
        // Size tiers of 8: an element is rewritten about once per tier,
        // log8(4000) ≈ 4 of them (4.8× measured). Rewriting the oldest row
        // each time would cost about flushes² × elems / 14 = 114M copies.
        assert!(work <= 6 * flushes * elems, "{work} elements rewritten for {} flushed", flushes * elems);
    }

    #[test]
    fn windows_skip_claimed_rows_and_the_growing_segment() {
        let row = |seg, elems, receiver| MergeCandidate { seg, elems, receiver };
        // Newest segment 9 has 2 of 4 rows: still growing, left alone.
        let mut rows = vec![row(9, 1, true), row(9, 1, true)];
        rows.extend((0..4).map(|_| row(8, 10, true)));
        rows.extend((0..4).map(|_| row(7, 10, true)));
        rows.push(row(6, 50, true));
        rows.extend((0..4).map(|_| row(5, 1, false)));
        assert_eq!(pick_merge(&rows, 4, 12), None, "12 receivers do not pass 12");
        // Equal costs: the older of the two full segments.
        assert_eq!(pick_merge(&rows, 4, 10), Some(6..10));
        // Only claimed rows past the big one: windows reaching them are out.
        rows[3].elems = 1;
        assert_eq!(pick_merge(&rows, 4, 10), Some(2..6));
    }
}
