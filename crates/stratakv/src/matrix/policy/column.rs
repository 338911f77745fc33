//! Column compaction policy (MatrixKV §3.4): cut the compactor group into
//! key ranges whose upper bounds are L1 table bounds and whose sizes are
//! near a target, and merge one such column at a time with only the L1
//! tables it overlaps. Pure apart from reading row elements. (With sorted
//! runs, `Options::max_runs`, a column is written to the round's run
//! instead, and its bounds follow only the target size.)

use std::collections::HashSet;
use std::sync::Arc;

use crate::error::Result;
use crate::matrix::row::Row;
use crate::matrix::LiveRow;
use crate::version::FileMeta;

/// One column: for each compactor row, the element range to move.
#[derive(Clone, Debug)]
pub struct ColumnTask {
    /// (row, start, end) per compactor row with elements in the column, newest row first.
    pub slices: Vec<(Arc<Row>, u32, u32)>,
    /// Smallest user key in the column.
    pub lo: Vec<u8>,
    /// Largest user key in the column; `None` = everything left.
    pub hi: Option<Vec<u8>>,
    /// L1 tables overlapping `[lo, hi]` (none when the column goes to a run).
    pub l1_inputs: Vec<Arc<FileMeta>>,
    /// The sorted run the column is written to, instead of merging into L1.
    pub run: Option<u64>,
    /// Estimated log bytes of the column's elements.
    pub bytes: u64,
}

impl ColumnTask {
    /// New `start` of each row once the column is compacted.
    pub fn ends(&self) -> Vec<(u64, u32)> {
        self.slices.iter().map(|(r, _, e)| (r.id(), *e)).collect()
    }

    /// Elements moved.
    #[cfg(test)]
    pub fn elements(&self) -> u64 {
        self.slices.iter().map(|(_, s, e)| (e - s) as u64).sum()
    }
}

/// Picks the next column of the compactor rows (`rows` newest first; only
/// those flagged compactor are used). `l1` is level 1, sorted. Returns
/// `None` if there is nothing to compact or an L1 table it needs is busy.
pub fn pick_column(
    rows: &[LiveRow],
    l1: &[Arc<FileMeta>],
    column_bytes: u64,
    busy: &HashSet<u64>,
) -> Result<Option<ColumnTask>> {
    let comp: Vec<&LiveRow> = rows.iter().filter(|r| r.compactor && r.remaining() > 0).collect();
    if comp.is_empty() {
        return Ok(None);
    }
    // Smallest unconsumed user key.
    let mut lo: Option<Vec<u8>> = None;
    for r in &comp {
        let e = r.row.elem(r.start)?;
        let k = r.row.user_key(&e)?;
        if lo.as_deref().map(|l| k < l).unwrap_or(true) {
            lo = Some(k.to_vec());
        }
    }
    let Some(lo) = lo else { return Ok(None) };
    let avg: Vec<f64> = comp.iter().map(|r| r.row.header().log_bytes as f64 / r.row.len().max(1) as f64).collect();
    let bytes_upto = |u: &[u8]| -> Result<u64> {
        let mut b = 0f64;
        for (r, a) in comp.iter().zip(&avg) {
            let end = r.row.upper_bound_user(u, r.start)?;
            b += (end - r.start) as f64 * a;
        }
        Ok(b as u64)
    };
    // Candidate upper bounds: ends of L1 tables at or after `lo`, then keys
    // sampled from the largest compactor row past the last table.
    let mut chosen: Option<Vec<u8>> = None;
    let mut last_candidate: Option<Vec<u8>> = None;
    for f in l1.iter().filter(|f| f.largest_user() >= lo.as_slice()) {
        let u = f.largest_user().to_vec();
        last_candidate = Some(u.clone());
        if bytes_upto(&u)? >= column_bytes {
            chosen = Some(u);
            break;
        }
    }
    if chosen.is_none() {
        if let Some(big) = comp.iter().max_by_key(|r| r.remaining()) {
            let (s, n) = (big.start, big.row.len());
            let step = ((n - s) / 64).max(1);
            let mut i = s + step;
            while i < n {
                let e = big.row.elem(i)?;
                let u = big.row.user_key(&e)?.to_vec();
                if last_candidate.as_deref().map(|l| u.as_slice() > l).unwrap_or(true)
                    && bytes_upto(&u)? >= column_bytes
                {
                    chosen = Some(u);
                    break;
                }
                i += step;
            }
        }
    }
    let l1_inputs: Vec<Arc<FileMeta>> =
        l1.iter().filter(|f| f.overlaps(Some(&lo), chosen.as_deref())).cloned().collect();
    if l1_inputs.iter().any(|f| busy.contains(&f.number)) {
        return Ok(None);
    }
    let mut slices = Vec::new();
    let mut bytes = 0f64;
    for (r, a) in comp.iter().zip(&avg) {
        let end = match &chosen {
            Some(u) => r.row.upper_bound_user(u, r.start)?,
            None => r.row.len(),
        };
        if end > r.start {
            bytes += (end - r.start) as f64 * a;
            slices.push((r.row.clone(), r.start, end));
        }
    }
    if slices.is_empty() {
        return Ok(None);
    }
    Ok(Some(ColumnTask { slices, lo, hi: chosen, l1_inputs, run: None, bytes: bytes as u64 }))
}
