//! Training a table's learned index, and the slot of every key, from which
//! the builder cuts the data blocks.
//!
//! The model is a greedy error-bounded piecewise-linear fit (the "shrinking
//! cone": every segment passes through its first point and keeps the range
//! of slopes that stay within `γ` bytes of every point so far). We chose it
//! over a two-stage RMI because its error bound is set in advance: with the
//! blocks cut where the model predicts, a bound of `γ` keeps every block
//! between `B - 2γ` and `B + 2γ` bytes away from segment ends, where an
//! RMI's leaves can be off by any amount and make blocks of any size. It
//! also trains in one pass over the buffered keys.

use super::keycode::{group_keys, KeyCode};
use super::learned::{Group, Model, Segment};

/// A trained model and the slot of each key.
#[derive(Debug)]
pub struct Plan {
    /// The model to store.
    pub model: Model,
    /// Slot of each user key given to [`train`], in order.
    pub slots: Vec<u32>,
}

/// Why training gave up (the table then gets the binary index).
#[derive(Debug, PartialEq, Eq)]
pub enum Untrained {
    /// No keys.
    Empty,
    /// A key's code or slot would not fit, or the model disagrees with itself.
    Model,
    /// The blocks the model would cut are too small, too big or too sparse.
    Blocks,
}

/// Error bounds tried, in quarters of a block: the first whose model costs
/// at most [`SEGMENT_BUDGET`] wins. Random keys with large values need the
/// wider ones (a line cannot follow them to within one entry for long);
/// the widest still keeps blocks under 4 block sizes.
const GAMMA_QUARTERS: [u32; 4] = [1, 2, 4, 6];
/// Segments per expected block above which a wider error bound is tried:
/// a segment takes about 40 bytes, so 1/10 keeps the model under 4 bytes a
/// block (with the block table's 2.3, under a quarter of what separator
/// keys take for 16-byte keys). The widest bounds make blocks less even
/// (random 16-byte keys with 1 KiB values: p99 block 6.3 KiB at γ = B/4,
/// 9.4 KiB at γ = B, 10.4 KiB at γ = 1.5 B), which costs direct reads, so
/// the budget is no tighter than the memory target needs.
const SEGMENT_BUDGET: f64 = 1.0 / 10.0;

/// Trains on distinct, sorted user keys; `ys[i]` is the byte offset where
/// key i's entries start and `ys[n]` the end of the data.
pub fn train(keys: &[&[u8]], ys: &[u64], block_size: u32) -> Result<Plan, Untrained> {
    if keys.is_empty() || ys.len() != keys.len() + 1 || block_size == 0 {
        return Err(Untrained::Empty);
    }
    let blocks = (ys.last().copied().unwrap_or(0) / block_size as u64).max(1) as f64;
    // The leanest model that trained; over budget, a wider bound may do better.
    let mut best: Result<Plan, Untrained> = Err(Untrained::Blocks);
    for q in GAMMA_QUARTERS {
        match train_with(keys, ys, block_size, block_size as f64 * q as f64 / 4.0) {
            Ok(plan) => {
                let lean = (plan.segments() as f64) <= blocks * SEGMENT_BUDGET;
                if best.as_ref().map_or(true, |b| plan.segments() < b.segments()) {
                    best = Ok(plan);
                }
                if lean {
                    break;
                }
            }
            Err(Untrained::Model) => return Err(Untrained::Model),
            Err(e) if best.is_err() => best = Err(e),
            Err(_) => {}
        }
    }
    best
}

impl Plan {
    /// Segments of the model.
    pub fn segments(&self) -> usize {
        self.model.groups.iter().map(|g| g.segments.len()).sum()
    }
}

/// [`train`] with error bound `gamma` bytes.
fn train_with(keys: &[&[u8]], ys: &[u64], block_size: u32, gamma: f64) -> Result<Plan, Untrained> {
    let starts = group_keys(keys);
    let mut groups = Vec::with_capacity(starts.len());
    let mut slots = Vec::with_capacity(keys.len());
    let mut prev_hi = 0u64;
    for (gi, &s) in starts.iter().enumerate() {
        let e = starts.get(gi + 1).copied().unwrap_or(keys.len());
        let gkeys = keys.get(s..e).ok_or(Untrained::Model)?;
        let code = KeyCode::fit(gkeys).ok_or(Untrained::Model)?;
        let xs: Vec<u64> = gkeys.iter().map(|k| code.code(k)).collect();
        if xs.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Untrained::Model);
        }
        let mut segments = Vec::new();
        for (a, b, mut seg) in fit_segments(&xs, ys.get(s..e).ok_or(Untrained::Model)?, gamma) {
            // The segment's slots start at its first key's, or where the
            // previous segment ended if that is higher, and never fall.
            let first = seg.raw_slot(xs[a], block_size).max(prev_hi);
            let mut last = first;
            for &x in &xs[a..b] {
                last = last.max(seg.raw_slot(x, block_size));
                slots.push(u32::try_from(last).map_err(|_| Untrained::Model)?);
            }
            seg.lo = u32::try_from(first).map_err(|_| Untrained::Model)?;
            seg.hi = u32::try_from(last).map_err(|_| Untrained::Model)?;
            prev_hi = last;
            segments.push(seg);
        }
        groups.push(Group { first: gkeys[0].to_vec(), code, segments });
    }
    let model = Model { block_size, groups };
    // The lookup must find every key where the cut puts it.
    if keys.iter().zip(&slots).any(|(k, s)| model.slot(k) != *s) {
        return Err(Untrained::Model);
    }
    check_blocks(&slots, ys, block_size)?;
    Ok(Plan { model, slots })
}

/// Segments over `(xs[i], ys[i])`: (first index, end index, segment with
/// `lo`/`hi` still unset). `xs` is strictly increasing.
fn fit_segments(xs: &[u64], ys: &[u64], gamma: f64) -> Vec<(usize, usize, Segment)> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let (mut lo, mut hi) = (0.0f64, f64::INFINITY);
    let close = |start: usize, end: usize, lo: f64, hi: f64| {
        let slope = if hi.is_finite() { (lo + hi) / 2.0 } else { lo };
        (start, end, Segment { x0: xs[start], y0: ys[start] as f64, slope, lo: 0, hi: 0 })
    };
    for i in 1..xs.len() {
        let dx = (xs[i] - xs[start]) as f64;
        let dy = ys[i] as f64 - ys[start] as f64;
        let (l, h) = (lo.max((dy - gamma) / dx), hi.min((dy + gamma) / dx));
        if l > h {
            out.push(close(start, i, lo, hi));
            start = i;
            (lo, hi) = (0.0, f64::INFINITY);
        } else {
            (lo, hi) = (l, h);
        }
    }
    if !xs.is_empty() {
        out.push(close(start, xs.len(), lo, hi));
    }
    out
}

/// Rejects cuts whose blocks would be over 4 block sizes (unless one key
/// fills it), average under a quarter of one, or whose slots are so sparse
/// that the slot table would outgrow the blocks.
fn check_blocks(slots: &[u32], ys: &[u64], block_size: u32) -> Result<(), Untrained> {
    let b = block_size as u64;
    let (mut blocks, mut start) = (0u64, 0usize);
    for i in 1..=slots.len() {
        if i == slots.len() || slots[i] != slots[start] {
            let bytes = ys[i] - ys[start];
            if bytes > 4 * b && i - start > 1 {
                return Err(Untrained::Blocks);
            }
            blocks += 1;
            start = i;
        }
    }
    let total = ys.last().copied().unwrap_or(0);
    let max_slot = slots.last().copied().unwrap_or(0) as u64;
    if (blocks > 1 && total / blocks < b / 4) || max_slot > 4 * blocks + 64 {
        return Err(Untrained::Blocks);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ys_for(n: usize, size: u64) -> Vec<u64> {
        (0..=n as u64).map(|i| i * size).collect()
    }

    #[test]
    fn sequential_keys_cut_full_blocks() {
        let keys: Vec<Vec<u8>> = (0..20_000u64).map(|i| format!("{:016}", i * 3).into_bytes()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let ys = ys_for(keys.len(), 130);
        let plan = train(&refs, &ys, 4096).unwrap();
        assert_eq!(plan.model.groups.len(), 1);
        assert!(plan.model.groups[0].segments.len() <= 2, "{:?}", plan.model.groups[0].segments.len());
        let blocks = plan.slots.windows(2).filter(|w| w[0] != w[1]).count() + 1;
        let want = (20_000 * 130) / 4096;
        assert!((blocks as i64 - want as i64).abs() <= 2, "{blocks} blocks, {want} expected");
    }

    #[test]
    fn slots_never_fall_and_blocks_stay_bounded_on_skewed_keys() {
        let mut x = 88172645463325252u64;
        let mut nums: Vec<u64> = (0..30_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 {
                    x % 1000
                } else {
                    x
                }
            })
            .collect();
        nums.sort();
        nums.dedup();
        let keys: Vec<Vec<u8>> = nums.iter().map(|n| format!("user{n}").into_bytes()).collect();
        let mut keys = keys;
        keys.sort();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let ys = ys_for(keys.len(), 1100);
        let plan = train(&refs, &ys, 4096).unwrap();
        assert!(plan.slots.windows(2).all(|w| w[0] <= w[1]));
        for (k, s) in refs.iter().zip(&plan.slots) {
            assert_eq!(plan.model.slot(k), *s);
        }
    }

    #[test]
    fn huge_values_make_sparse_slots_and_fall_back() {
        let keys: Vec<Vec<u8>> = (0..100u64).map(|i| format!("{i:08}").into_bytes()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        assert_eq!(train(&refs, &ys_for(100, 1 << 20), 4096).unwrap_err(), Untrained::Blocks);
        assert_eq!(train(&[], &[0], 4096).unwrap_err(), Untrained::Empty);
    }
}
