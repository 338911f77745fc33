//! The matrix's state: its live rows, newest first, grouped into
//! segments, with the DRAM probes of the segments. A version holds it
//! (`Version::l0`); a change makes a changed copy that the next version
//! holds, so readers keep the state they started with.

use std::collections::HashMap;
use std::sync::Arc;

use super::live_row::LiveRow;
use super::probe::{probe_of, row_hashes, Growing, SegProbe, SoloProbe};
use super::record::MatrixRecord;

/// The matrix's state (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Matrix {
    /// Next row id.
    pub next_row_id: u64,
    /// Live rows, newest first.
    pub rows: Vec<LiveRow>,
    next_seg: u64,
    /// Probes of sealed segments, built once from all their rows: every
    /// segment but the growing one with hash indexes, full ones with filters.
    seg_probes: HashMap<u64, SegProbe>,
    /// The probe of the newest segment while it fills, so a lookup skips
    /// or searches its rows with one probe instead of one per row.
    growing: Option<Growing>,
    rows_per_segment: usize,
    /// Segments get hash indexes rather than bloom filters.
    hash_index: bool,
    /// The rows grouped by segment, with each segment's probe: what a
    /// lookup walks (rebuilt by every change).
    pub(super) groups: Vec<Group>,
    /// Log bytes of the data not yet compacted (kept with `groups`).
    data_bytes: u64,
    /// PM bytes of the rows and the log extents they point into (likewise).
    pm_bytes: u64,
}

impl Matrix {
    /// An empty matrix; segments get hash indexes with `hash_index`, else bloom filters.
    pub fn new(rows_per_segment: usize, hash_index: bool) -> Matrix {
        Matrix { next_row_id: 1, rows_per_segment: rows_per_segment.max(1), hash_index, ..Default::default() }
    }

    /// A matrix made of recovered rows (newest first).
    pub fn recovered(next_row_id: u64, rows: Vec<LiveRow>, rows_per_segment: usize, hash_index: bool) -> Matrix {
        let mut m = Matrix::new(rows_per_segment, hash_index);
        m.next_row_id = next_row_id.max(1);
        for r in rows.into_iter().rev() {
            m.push_newest(r);
        }
        m
    }

    /// The persistent record of this state.
    pub fn record(&self) -> MatrixRecord {
        MatrixRecord { next_row_id: self.next_row_id, rows: self.rows.iter().map(|r| r.meta()).collect() }
    }

    /// Adds a row as the newest.
    pub fn push_newest(&mut self, mut r: LiveRow) {
        let cur = self.rows.first().map(|x| x.seg);
        let in_cur = cur.map(|s| self.rows.iter().take_while(|x| x.seg == s).count()).unwrap_or(0);
        r.seg = match cur {
            Some(s) if in_cur < self.rows_per_segment && !self.seg_probes.contains_key(&s) => s,
            _ => {
                self.next_seg += 1;
                self.next_seg
            }
        };
        let seg = r.seg;
        self.rows.insert(0, r);
        self.grow(seg);
        self.seal_segments();
        self.refresh();
    }

    /// Adds the newest row's keys to the probe of its (unsealed) segment.
    fn grow(&mut self, seg: u64) {
        let Some(row) = self.rows.first().map(|r| r.row.clone()) else { return };
        let Ok(hashes) = row.hashes() else {
            // Unreadable hashes: no probe, so lookups search every row.
            self.growing = None;
            return;
        };
        let g = match self.growing.take() {
            Some(g) if g.seg == seg => self.grow_by(g, row.id(), &hashes),
            _ => None,
        };
        // A new segment, or more keys than planned: start over from the
        // segment's rows with room for a full segment.
        self.growing = g.or_else(|| self.start_growing(seg, hashes.len()));
    }

    /// `g` with the newest row added, or None if it has no room left.
    fn grow_by(&self, mut g: Growing, id: u64, hashes: &[u64]) -> Option<Growing> {
        match &mut g.probe {
            SegProbe::Index(ix) => {
                if !Arc::make_mut(ix).add_row(id, hashes) {
                    return None;
                }
            }
            SegProbe::Bloom(f) => {
                if g.keys + hashes.len() > g.capacity {
                    return None;
                }
                let f = Arc::make_mut(f);
                hashes.iter().for_each(|h| f.insert_mut(*h));
            }
        }
        g.keys += hashes.len();
        Some(g)
    }

    /// A probe of every row of `seg`, with room for a full segment of rows
    /// of `newest_len` elements.
    fn start_growing(&self, seg: u64, newest_len: usize) -> Option<Growing> {
        let rows = row_hashes(self.rows.iter().rev().filter(|r| r.seg == seg).map(|r| r.row.as_ref())).ok()?;
        let keys: usize = rows.iter().map(|(_, h)| h.len()).sum();
        let capacity = keys.max(newest_len * self.rows_per_segment);
        Some(Growing { seg, probe: probe_of(&rows, capacity, self.hash_index), capacity, keys })
    }

    /// Seals every segment that lacks a probe and will take no more rows:
    /// full ones, and with hash indexes also any but the growing one (a
    /// merged row's, say), so a lookup never probes rows one by one.
    fn seal_segments(&mut self) {
        // Rows of each segment, newest first (a segment's rows are adjacent
        // but collecting by id keeps it right even if they were not).
        let mut by_seg: Vec<(u64, Vec<&LiveRow>)> = Vec::new();
        for r in &self.rows {
            match by_seg.iter_mut().find(|(s, _)| *s == r.seg) {
                Some((_, v)) => v.push(r),
                None => by_seg.push((r.seg, vec![r])),
            }
        }
        let growing = self.growing.as_ref().map(|g| g.seg);
        let newest = self.rows.first().map(|r| r.seg);
        let mut built = Vec::new();
        for (seg, rows) in by_seg {
            let full = rows.len() >= self.rows_per_segment;
            // The newest segment still takes rows unless it is full.
            let open = !full && newest == Some(seg) && growing == Some(seg);
            if self.seg_probes.contains_key(&seg) || open || !(full || self.hash_index) {
                continue;
            }
            // The growing probe already holds every row of its segment.
            if let Some(g) = self.growing.as_ref().filter(|g| g.seg == seg) {
                built.push((seg, g.probe.clone()));
                continue;
            }
            // A row whose hashes cannot be read would leave its keys out of
            // the probe: then the segment gets none and lookups search its rows.
            let Ok(hashes) = row_hashes(rows.iter().rev().map(|r| r.row.as_ref())) else { continue };
            built.push((seg, probe_of(&hashes, 0, self.hash_index)));
        }
        self.seg_probes.extend(built);
        let live: std::collections::HashSet<u64> = self.rows.iter().map(|r| r.seg).collect();
        self.seg_probes.retain(|s, _| live.contains(s));
        if self.growing.as_ref().is_some_and(|g| self.seg_probes.contains_key(&g.seg) || !live.contains(&g.seg)) {
            self.growing = None;
        }
    }

    /// PM bytes held by the matrix (row extents and the log extents they pin).
    pub fn pm_bytes(&self) -> u64 {
        self.pm_bytes
    }

    /// Log bytes of data not yet compacted.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Recomputes what readers and the write path read off the rows: the
    /// segment groups and the byte counts.
    fn refresh(&mut self) {
        self.groups = self.group_rows();
        self.data_bytes = self.rows.iter().map(|r| r.remaining_data_bytes()).sum();
        self.pm_bytes = self.count_pm_bytes();
    }

    fn count_pm_bytes(&self) -> u64 {
        let mut logs = std::collections::HashSet::new();
        let mut total = 0;
        for r in &self.rows {
            total += r.row.extent().len();
            for l in r.row.logs() {
                if logs.insert(l.offset()) {
                    total += l.len();
                }
            }
        }
        total
    }

    /// Whether a compaction round is under way (some compactor row has data left).
    pub fn round_active(&self) -> bool {
        self.rows.iter().any(|r| r.compactor && r.remaining() > 0)
    }

    /// Starts a round: every current row joins the compactor group.
    pub fn begin_round(&mut self) {
        for r in &mut self.rows {
            r.compactor = true;
        }
    }

    /// Data bytes of the compactor group not yet compacted.
    pub fn compactor_data_bytes(&self) -> u64 {
        self.rows.iter().filter(|r| r.compactor).map(|r| r.remaining_data_bytes()).sum()
    }

    /// Advances the compacted prefix of rows (`(id, new start)`), dropping
    /// rows that are fully compacted.
    pub fn apply_column(&mut self, ends: &[(u64, u32)]) {
        for (id, end) in ends {
            if let Some(r) = self.rows.iter_mut().find(|r| r.row.id() == *id) {
                r.start = r.start.max(*end);
            }
        }
        self.rows.retain(|r| r.remaining() > 0);
        self.seal_segments();
        self.refresh();
    }

    /// Replaces the rows `ids` (adjacent, receivers) with `merged`, which
    /// forms a segment of its own with `probe` (if built ahead).
    pub fn replace(&mut self, ids: &[u64], mut merged: LiveRow, probe: Option<SoloProbe>) {
        let Some(pos) = self.rows.iter().position(|r| ids.contains(&r.row.id())) else { return };
        self.rows.retain(|r| !ids.contains(&r.row.id()));
        self.next_seg += 1;
        merged.seg = self.next_seg;
        if let Some(SoloProbe(p)) = probe {
            self.seg_probes.insert(merged.seg, p);
        }
        self.rows.insert(pos.min(self.rows.len()), merged);
        self.seal_segments();
        self.refresh();
    }

    /// The rows grouped by segment, each with its segment's probe.
    fn group_rows(&self) -> Vec<Group> {
        let mut groups = Vec::new();
        let mut i = 0;
        while i < self.rows.len() {
            let seg = self.rows[i].seg;
            let n = self.rows[i..].iter().take_while(|r| r.seg == seg).count();
            let growing = self.growing.as_ref().filter(|g| g.seg == seg).map(|g| g.probe.clone());
            groups.push(Group { first: i, len: n, probe: self.seg_probes.get(&seg).cloned().or(growing) });
            i += n;
        }
        groups
    }
}

/// The rows of one segment (`rows[first..first + len]`) and its probe.
#[derive(Clone, Debug)]
pub(super) struct Group {
    pub first: usize,
    pub len: usize,
    pub probe: Option<SegProbe>,
}
