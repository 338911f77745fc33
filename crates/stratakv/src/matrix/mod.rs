//! The matrix container: level 0 in PM (MatrixKV), built on the
//! index-unified log (ListDB).
//!
//! A sealed memtable becomes a *row*: a sorted array of elements pointing
//! at its log entries, with cross-row hints into the next-older row (see
//! [`row`]). Rows are grouped into segments. Lookups search segments and
//! their rows newest first. By default each segment has a DRAM hash index
//! ([`hash_index`]) that names the elements of a key in all its rows
//! outright; without it (`Options::matrix_hash_index = false`, the thesis'
//! design) each segment has a bloom filter, a per-row bloom filter skips
//! rows and each older row's binary search is narrowed to the window the
//! hints give. Column compaction moves key
//! ranges of the oldest rows (the *compactor* group) into L1 tables, one
//! column at a time, while new rows (the *receiver* group) keep arriving.
//!
//! The matrix's persistent state (which rows are live, how far each was
//! compacted, which form the compactor group) is recorded in the MANIFEST
//! with every change, together with the L1 files a column compaction adds:
//! that record is the container root, so a crash at any point leaves either
//! the old or the new state.

pub mod build;
pub mod column;
pub mod hash_index;
pub mod iter;
pub mod merge;
pub mod row;

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use crate::coding::{put_varint, Reader};
use crate::error::Result;
use crate::filter::BlockedBloom;
use crate::iterator::InternalIterator;
use crate::key::key_prefix;
use crate::key::Lookup;
use crate::key::{make_internal_key, Kind, SeqNo, KIND_FOR_SEEK};
use crate::key::{prefix_hash, PrefixExtractor};
use hash_index::HashIndex;
use row::Row;

/// Bloom bits per key for row and segment filters.
const FILTER_BITS: u32 = 10;

/// What the MANIFEST records about one live row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowMeta {
    /// Row id (= its extent's number).
    pub id: u64,
    /// First slot of its extent.
    pub slot: u64,
    /// Slots of its extent.
    pub slots: u64,
    /// Elements before this index are compacted into L1.
    pub start: u32,
    /// Smallest log number its elements point into.
    pub first_log: u64,
    /// Largest log number its elements point into.
    pub last_log: u64,
    /// Whether it belongs to the compactor group.
    pub compactor: bool,
}

/// Decoded matrix record of the MANIFEST.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatrixRecord {
    /// Next row id to hand out.
    pub next_row_id: u64,
    /// Live rows, newest first.
    pub rows: Vec<RowMeta>,
}

impl MatrixRecord {
    /// Encodes: `version (1) | next_row_id | n | n * (id, slot, slots, start, first_log, last_log, flags)`, all varints.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, 1);
        put_varint(&mut b, self.next_row_id);
        put_varint(&mut b, self.rows.len() as u64);
        for r in &self.rows {
            for v in [r.id, r.slot, r.slots, r.start as u64, r.first_log, r.last_log, r.compactor as u64] {
                put_varint(&mut b, v);
            }
        }
        b
    }

    /// Decodes; `Err(reason)` if malformed.
    pub fn decode(b: &[u8]) -> std::result::Result<MatrixRecord, String> {
        let mut r = Reader::new(b);
        let bad = || "malformed matrix record".to_string();
        if r.varint().ok_or_else(bad)? != 1 {
            return Err("unknown matrix record version".into());
        }
        let next_row_id = r.varint().ok_or_else(bad)?;
        let n = r.varint().ok_or_else(bad)?;
        let mut rows = Vec::new();
        for _ in 0..n {
            let mut f = [0u64; 7];
            for v in f.iter_mut() {
                *v = r.varint().ok_or_else(bad)?;
            }
            rows.push(RowMeta {
                id: f[0],
                slot: f[1],
                slots: f[2],
                start: u32::try_from(f[3]).map_err(|_| bad())?,
                first_log: f[4],
                last_log: f[5],
                compactor: f[6] != 0,
            });
        }
        if !r.is_empty() {
            return Err(bad());
        }
        Ok(MatrixRecord { next_row_id, rows })
    }
}

/// How point lookups find a key in one row.
#[derive(Clone, Debug)]
pub enum RowProbe {
    /// Through the hash index of the row's segment (if the segment has
    /// none, by a search inside the fence window).
    Segment,
    /// A bloom filter; the row is then searched inside the fence and hint window.
    Bloom(Arc<BlockedBloom>),
}

impl RowProbe {
    /// DRAM bytes used.
    pub fn bytes(&self) -> usize {
        match self {
            RowProbe::Segment => 0,
            RowProbe::Bloom(f) => f.bytes(),
        }
    }
}

/// How point lookups skip or search one segment.
#[derive(Clone, Debug)]
enum SegProbe {
    /// A bloom filter of the segment's keys (rows are then probed one by one).
    Bloom(Arc<BlockedBloom>),
    /// A hash index naming the key's elements in every row of the segment.
    Index(Arc<HashIndex>),
}

impl SegProbe {
    fn bytes(&self) -> usize {
        match self {
            SegProbe::Bloom(f) => f.bytes(),
            SegProbe::Index(ix) => ix.bytes(),
        }
    }
}

/// A row as the matrix holds it: the row, its consumed prefix, its lookup structures.
#[derive(Clone, Debug)]
pub struct LiveRow {
    /// The row.
    pub row: Arc<Row>,
    /// Elements before this index are in L1.
    pub start: u32,
    /// Member of the compactor group.
    pub compactor: bool,
    /// Log number range its elements point into.
    pub first_log: u64,
    /// See `first_log`.
    pub last_log: u64,
    /// Segment the row belongs to.
    pub seg: u64,
    /// How a point lookup finds keys in the row.
    pub probe: RowProbe,
    /// Fences: a lookup narrows its binary search with these, in DRAM,
    /// before touching PM.
    fences: Arc<Fences>,
    /// Bloom filter of the row's key prefixes (with a prefix extractor):
    /// a scan inside one prefix skips the row when the prefix is absent.
    prefixes: Option<Arc<BlockedBloom>>,
}

/// Every `FENCE_EVERY`-th key of a row, in DRAM, after the row's common key
/// prefix and cut to `FENCE_BYTES`. The element prefixes stored in PM are
/// the first 8 key bytes, which tell nothing apart when keys share a long
/// prefix (the server's `key:000000…`, `H<len>user…` hash fields, any
/// `user:…` scheme); skipping the shared bytes and keeping more of the
/// rest makes the fences distinct again.
///
/// A fence is compared as (8-byte word, up to `FENCE_BYTES - 8` more bytes).
/// That map from keys is monotone (cutting and zero-padding never reorder
/// two keys), so a fence that compares below (above) a key's image
/// belongs to a smaller (larger) key; equal images decide nothing.
#[derive(Debug, Default)]
struct Fences {
    /// The bytes all keys of the row begin with.
    common: Vec<u8>,
    /// `key_prefix(rest)` of elements 0, FENCE_EVERY, ..., where `rest` is
    /// the key after `common`.
    words: Vec<u64>,
    /// `rest[8..FENCE_BYTES]` of the same elements, back to back; fence
    /// `i`'s bytes are `tails[tail_starts[i]..tail_starts[i + 1]]`.
    tails: Vec<u8>,
    tail_starts: Vec<u32>,
}

/// Key bytes (after the row's common prefix) a fence keeps.
const FENCE_BYTES: usize = 32;

/// The bytes of a key's image after its 8-byte word (see [`Fences`]).
fn fence_tail(rest: &[u8]) -> &[u8] {
    rest.get(8..rest.len().min(FENCE_BYTES)).unwrap_or_default()
}

/// The first index in `0..n` where `pred` is false (`pred` holds on a prefix).
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Elements per fence: a lookup's search in PM spans at most about this many.
/// Each fence costs up to 40 bytes of DRAM; 8 rather than 16 made YCSB's
/// HGETALL-only workload C 6-18% faster (a seek reads about one PM key fewer
/// per row) and left redis-benchmark GET unchanged.
const FENCE_EVERY: u32 = 8;

/// Longest window a point lookup scans by key hash instead of searching.
const HASH_SCAN_LIMIT: u32 = 64;

/// The answer a row's element `e` gives to a point lookup.
fn found(row: &Row, e: &row::Elem) -> Result<Lookup> {
    match e.kind() {
        Some(Kind::Put) => Ok(Lookup::Found(row.value(e)?.to_vec())),
        _ => Ok(Lookup::Deleted),
    }
}

impl LiveRow {
    /// A live row for `row`, found through its segment's hash index (with
    /// `hash_index`) or else through a bloom filter built from the stored hashes.
    pub fn new(
        row: Row,
        start: u32,
        compactor: bool,
        first_log: u64,
        last_log: u64,
        hash_index: bool,
        prefix_extractor: Option<&dyn PrefixExtractor>,
    ) -> Result<LiveRow> {
        let probe = if hash_index {
            RowProbe::Segment
        } else {
            let hashes = row.hashes()?;
            RowProbe::Bloom(Arc::new(BlockedBloom::from_hashes(&hashes, hashes.len(), FILTER_BITS)))
        };
        let fences = Fences::of(&row)?;
        let prefixes = match prefix_extractor {
            Some(x) => Some(Arc::new(prefix_filter(&row, x)?)),
            None => None,
        };
        Ok(LiveRow {
            row: Arc::new(row),
            start,
            compactor,
            first_log,
            last_log,
            seg: 0,
            probe,
            fences: Arc::new(fences),
            prefixes,
        })
    }

    /// Whether the row may hold a key whose prefix hashes to `prefix_hash`
    /// (true when the row has no prefix filter).
    fn may_hold_prefix(&self, prefix_hash: u64) -> bool {
        self.prefixes.as_ref().is_none_or(|f| f.may_contain(prefix_hash))
    }

    /// The range `[lo, hi)` that holds the row's first element with user
    /// key >= `ukey` (or `hi == len` if there is none).
    fn window(&self, ukey: &[u8]) -> (u32, u32) {
        self.fences.window(ukey, self.row.len())
    }

    /// Elements not yet compacted.
    pub fn remaining(&self) -> u32 {
        self.row.len().saturating_sub(self.start)
    }

    /// Log bytes of the elements not yet compacted (estimated pro rata).
    pub fn remaining_data_bytes(&self) -> u64 {
        let n = self.row.len().max(1) as u64;
        self.row.header().log_bytes * self.remaining() as u64 / n
    }

    fn meta(&self) -> RowMeta {
        let h = self.row.extent().head();
        RowMeta {
            id: self.row.id(),
            slot: h.slot,
            slots: h.slots,
            start: self.start,
            first_log: self.first_log,
            last_log: self.last_log,
            compactor: self.compactor,
        }
    }
}

impl Fences {
    /// DRAM bytes used.
    fn bytes(&self) -> usize {
        self.common.len() + self.words.len() * 8 + self.tails.len() + self.tail_starts.len() * 4
    }

    /// The range `[lo, hi)` of a row of `n` elements that holds its first
    /// element with user key >= `ukey` (or `hi == n` if there is none).
    /// Every element before `lo` has a smaller user key and element `hi`,
    /// if any, a larger one, so a search for any internal key of `ukey`
    /// may stay inside the window.
    fn window(&self, ukey: &[u8], n: u32) -> (u32, u32) {
        let common = &self.common;
        let head = &ukey[..ukey.len().min(common.len())];
        // Keys of the row all start with `common`: a key that does not sort
        // before or after all of them.
        match head.cmp(common) {
            Ordering::Less => return (0, 0),
            Ordering::Greater => return (n, n),
            Ordering::Equal if ukey.len() < common.len() => return (0, 0),
            Ordering::Equal => {}
        }
        let rest = &ukey[common.len()..];
        let (word, tail) = (key_prefix(rest), fence_tail(rest));
        // Fences are monotone in the key: a fence that compares below
        // (above) the probe bounds the range from below (above).
        let nf = self.words.len();
        let below = partition(nf, |i| self.cmp(i, word, tail) == Ordering::Less) as u32;
        let lo = if below == 0 { 0 } else { (below - 1) * FENCE_EVERY + 1 };
        // Fences equal to the probe follow `below` and are usually none:
        // step over a few, and search only if there are more.
        let mut above = below as usize;
        while above < nf && above < below as usize + 4 && self.cmp(above, word, tail) == Ordering::Equal {
            above += 1;
        }
        if above == below as usize + 4 {
            above += partition(nf - above, |i| self.cmp(above + i, word, tail) == Ordering::Equal);
        }
        let hi = if above == nf { n } else { above as u32 * FENCE_EVERY };
        (lo.min(n), hi.min(n))
    }

    /// Fence `i` against a key image `(word, tail)`.
    fn cmp(&self, i: usize, word: u64, tail: &[u8]) -> Ordering {
        let w = self.words.get(i).copied().unwrap_or(u64::MAX);
        let start = self.tail_starts.get(i).copied().unwrap_or(0) as usize;
        let end = self.tail_starts.get(i + 1).copied().unwrap_or(0) as usize;
        w.cmp(&word).then_with(|| self.tails.get(start..end).unwrap_or_default().cmp(tail))
    }

    /// Reads the fence keys of `row` (about one key in `FENCE_EVERY`).
    fn of(row: &Row) -> Result<Fences> {
        let n = row.len();
        if n == 0 {
            return Ok(Fences::default());
        }
        let first = row.user_key(&row.elem(0)?)?;
        let last = row.user_key(&row.elem(n - 1)?)?;
        let shared = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let mut f = Fences { common: first[..shared].to_vec(), tail_starts: vec![0], ..Fences::default() };
        for i in (0..n).step_by(FENCE_EVERY as usize) {
            let key = row.user_key(&row.elem(i)?)?;
            let rest = key.get(shared..).unwrap_or_default();
            f.words.push(key_prefix(rest));
            f.tails.extend_from_slice(fence_tail(rest));
            f.tail_starts.push(f.tails.len() as u32);
        }
        Ok(f)
    }
}

/// A bloom filter of the distinct key prefixes in `row` (every key is read
/// once from PM; keys are sorted, so equal prefixes are adjacent).
fn prefix_filter(row: &Row, extractor: &dyn PrefixExtractor) -> Result<BlockedBloom> {
    let mut hashes = Vec::new();
    let mut last: Option<&[u8]> = None;
    for i in 0..row.len() {
        let key = row.user_key(&row.elem(i)?)?;
        if let Some(p) = extractor.prefix(key) {
            if last != Some(p) {
                hashes.push(prefix_hash(p));
                last = Some(p);
            }
        }
    }
    Ok(BlockedBloom::from_hashes(&hashes, hashes.len(), FILTER_BITS))
}

/// The probe of a row that will form a segment of its own (a merged row),
/// built before taking the matrix lock: a big row's index takes a while.
pub struct SoloProbe(SegProbe);

impl SoloProbe {
    /// The probe `row` needs as a segment of its own: a hash index with
    /// `hash_index`, else none (a segment short of full has no filter).
    pub fn of(row: &Row, hash_index: bool) -> Result<Option<SoloProbe>> {
        if !hash_index {
            return Ok(None);
        }
        let rows = row_hashes(std::iter::once(row))?;
        Ok(Some(SoloProbe(probe_of(&rows, 0, true))))
    }
}

/// The probe of a segment that is still taking rows: sized for a full
/// segment of rows like its first, and copied on every new row (readers
/// hold the old copy).
#[derive(Clone, Debug)]
struct Growing {
    seg: u64,
    probe: SegProbe,
    /// Keys the bloom filter was sized for (the hash index checks its own room).
    capacity: usize,
    keys: usize,
}

/// The authoritative matrix state (changed under the `versions` lock).
#[derive(Clone, Debug, Default)]
pub struct MatrixState {
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
    /// When the current compaction round started (not persisted).
    round_started: Option<std::time::Instant>,
    /// Compactor data bytes when the round started.
    round_total: u64,
    /// Length of the last finished round, in seconds (0 = none yet).
    pub last_round_secs: f64,
    /// The sorted run the current round writes its columns to, once its
    /// first column has picked one (not persisted: a round resumed after a
    /// restart writes the rest to a new run, as its keys are disjoint from
    /// what the old run holds).
    pub round_run: Option<u64>,
}

/// Reads the stored key hashes of `rows`, oldest first, with their ids.
fn row_hashes<'a>(rows: impl Iterator<Item = &'a Row>) -> Result<Vec<(u64, Vec<u64>)>> {
    rows.map(|r| Ok((r.id(), r.hashes()?))).collect()
}

/// The probe of a segment made of `rows` (oldest first), with room for at
/// least `room` keys: a hash index with `hash_index`, else a bloom filter.
fn probe_of(rows: &[(u64, Vec<u64>)], room: usize, hash_index: bool) -> SegProbe {
    if hash_index {
        return SegProbe::Index(Arc::new(HashIndex::build(rows, room)));
    }
    let keys: usize = rows.iter().map(|(_, h)| h.len()).sum();
    let f = BlockedBloom::with_capacity(keys.max(room), FILTER_BITS);
    rows.iter().for_each(|(_, hs)| hs.iter().for_each(|h| f.insert(*h)));
    SegProbe::Bloom(Arc::new(f))
}

impl MatrixState {
    /// An empty matrix; segments get hash indexes with `hash_index`, else bloom filters.
    pub fn new(rows_per_segment: usize, hash_index: bool) -> MatrixState {
        MatrixState { next_row_id: 1, rows_per_segment: rows_per_segment.max(1), hash_index, ..Default::default() }
    }

    /// A matrix made of recovered rows (newest first).
    pub fn recovered(next_row_id: u64, rows: Vec<LiveRow>, rows_per_segment: usize, hash_index: bool) -> MatrixState {
        let mut m = MatrixState::new(rows_per_segment, hash_index);
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

    /// Hands out a row id.
    pub fn new_row_id(&mut self) -> u64 {
        let id = self.next_row_id;
        self.next_row_id += 1;
        id
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
                hashes.iter().for_each(|h| f.insert(*h));
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

    /// Log bytes of data not yet compacted.
    pub fn data_bytes(&self) -> u64 {
        self.rows.iter().map(|r| r.remaining_data_bytes()).sum()
    }

    /// Whether a compaction round is under way (some compactor row has data left).
    pub fn round_active(&self) -> bool {
        self.rows.iter().any(|r| r.compactor && r.remaining() > 0)
    }

    /// The run the running round writes to, if any.
    pub fn active_run(&self) -> Option<u64> {
        self.round_run.filter(|_| self.round_active())
    }

    /// Starts a round: every current row joins the compactor group.
    pub fn begin_round(&mut self) {
        self.round_run = None;
        for r in &mut self.rows {
            r.compactor = true;
        }
        self.round_started = Some(std::time::Instant::now());
        self.round_total = self.compactor_data_bytes();
    }

    /// Data bytes of the compactor group not yet compacted.
    pub fn compactor_data_bytes(&self) -> u64 {
        self.rows.iter().filter(|r| r.compactor).map(|r| r.remaining_data_bytes()).sum()
    }

    /// Estimated seconds until the current round (or, if none runs, a whole
    /// round) finishes, from its progress so far or the last round's length.
    pub fn round_seconds_left(&self) -> f64 {
        let fallback = if self.last_round_secs > 0.0 { self.last_round_secs } else { 2.0 };
        match self.round_started {
            Some(t) if self.round_total > 0 => {
                let done = 1.0 - self.compactor_data_bytes() as f64 / self.round_total as f64;
                let elapsed = t.elapsed().as_secs_f64();
                if done > 0.05 {
                    elapsed * (1.0 - done) / done
                } else {
                    (fallback - elapsed).max(fallback * 0.5)
                }
            }
            _ => fallback,
        }
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
        if !self.round_active() {
            if let Some(t) = self.round_started.take() {
                self.last_round_secs = t.elapsed().as_secs_f64();
            }
        }
        self.seal_segments();
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
    }

    /// An immutable view for readers.
    pub fn view(&self) -> Arc<MatrixView> {
        let mut groups = Vec::new();
        let mut i = 0;
        while i < self.rows.len() {
            let seg = self.rows[i].seg;
            let n = self.rows[i..].iter().take_while(|r| r.seg == seg).count();
            let growing = self.growing.as_ref().filter(|g| g.seg == seg).map(|g| g.probe.clone());
            groups.push(Group { first: i, len: n, probe: self.seg_probes.get(&seg).cloned().or(growing) });
            i += n;
        }
        Arc::new(MatrixView { rows: self.rows.clone(), groups })
    }
}

#[derive(Clone, Debug)]
struct Group {
    first: usize,
    len: usize,
    probe: Option<SegProbe>,
}

/// What readers see of the matrix: rows newest first, grouped in segments.
#[derive(Clone, Debug, Default)]
pub struct MatrixView {
    /// Live rows, newest first.
    pub rows: Vec<LiveRow>,
    groups: Vec<Group>,
}

impl MatrixView {
    /// Number of live rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Asks for the cache lines a lookup of a key with hash `hash` reads
    /// first: each segment's index slot or filter block.
    pub fn prefetch(&self, hash: u64) {
        for g in &self.groups {
            match &g.probe {
                Some(SegProbe::Bloom(f)) => f.prefetch(hash),
                Some(SegProbe::Index(ix)) => ix.prefetch(hash),
                None => {}
            }
        }
    }

    /// The newest version of `ukey` with sequence <= `seq` (`hash` = its key hash).
    pub fn get(&self, ukey: &[u8], seq: SeqNo, hash: u64) -> Result<Lookup> {
        if self.rows.is_empty() {
            return Ok(Lookup::Missing);
        }
        let mut probe = Vec::with_capacity(ukey.len() + 8);
        make_internal_key(&mut probe, ukey, seq, KIND_FOR_SEEK);
        let prefix = key_prefix(ukey);
        // Window in the next row, valid if that row is `hint_row`: [lo, hi).
        let mut hint: Option<(u64, u32, u32)> = None;
        let mut cands = Vec::new();
        for g in &self.groups {
            let rows = self.rows.get(g.first..g.first + g.len).unwrap_or_default();
            match &g.probe {
                Some(SegProbe::Bloom(f)) if !f.may_contain(hash) => {
                    hint = None;
                    continue;
                }
                Some(SegProbe::Bloom(_)) | None => {}
                Some(SegProbe::Index(ix)) => {
                    // Candidates come newest row first, so the first version
                    // visible at `seq` is the newest. Candidates before a
                    // row's `start` are keys already moved to L1 (columns
                    // end at user-key boundaries, in every compactor row).
                    ix.candidates(hash, &mut cands);
                    for &(id, c) in &cands {
                        let Some(lr) = rows.iter().find(|r| r.row.id() == id) else { continue };
                        if c < lr.start {
                            continue;
                        }
                        if let Some(e) = lr.row.find_in_run(ukey, hash, seq, c)? {
                            return found(&lr.row, &e);
                        }
                    }
                    hint = None;
                    continue;
                }
            }
            for lr in rows {
                let row = &lr.row;
                match &lr.probe {
                    RowProbe::Segment => {}
                    RowProbe::Bloom(f) if !f.may_contain(hash) => {
                        hint = None;
                        continue;
                    }
                    RowProbe::Bloom(_) => {}
                }
                let n = row.len();
                let (mut lo, mut hi) = lr.window(ukey);
                if let Some((_, l, h)) = hint.filter(|h| h.0 == row.id()) {
                    lo = lo.max(l);
                    hi = hi.min(h);
                }
                let (lo, hi) = (lo.max(lr.start), hi.min(n));
                // The window holds every visible version of the key (fences
                // and hints bound it by key order), so when it is short a
                // scan of its key hashes finds the version with the fewest
                // PM reads. A miss here (a filter false positive) still needs
                // the binary search below for the next row's hints.
                if hi.saturating_sub(lo) <= HASH_SCAN_LIMIT {
                    if let Some(e) = row.find_in_window(ukey, hash, seq, lo, hi)? {
                        return found(row, &e);
                    }
                }
                let idx = row.lower_bound(&probe, prefix, lo, hi)?;
                if idx < n {
                    let e = row.elem(idx)?;
                    if e.prefix == prefix && row.user_key(&e)? == ukey && idx >= lr.start {
                        return found(row, &e);
                    }
                }
                // The older row's first element >= probe lies between the
                // hints of our neighbours of the probe.
                let lo_h = if idx > 0 { row.elem(idx - 1)?.hint } else { 0 };
                let hi_h = if idx < n { row.elem(idx)?.hint.saturating_add(1) } else { u32::MAX };
                hint = Some((row.header().older_id, lo_h, hi_h));
            }
        }
        Ok(Lookup::Missing)
    }

    /// Cursors over every row's live part, newest first. With `prefix`
    /// (every key the caller will read begins with it), rows whose prefix
    /// filter rules it out are left out; returns how many were.
    pub fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>, prefix: Option<&[u8]>) -> usize {
        let hash = prefix.map(prefix_hash);
        let mut skipped = 0;
        for r in &self.rows {
            if hash.is_some_and(|h| !r.may_hold_prefix(h)) {
                skipped += 1;
                continue;
            }
            out.push(Box::new(iter::RowIter::with_fences(r.row.clone(), r.start, r.row.len(), r.fences.clone())));
        }
        skipped
    }

    /// DRAM held by the rows' filters, fences and prefix filters and by the segments' indexes or filters.
    pub fn dram_bytes(&self) -> u64 {
        let rows: usize = self
            .rows
            .iter()
            .map(|r| r.probe.bytes() + r.fences.bytes() + r.prefixes.as_ref().map_or(0, |f| f.bytes()))
            .sum();
        let segs: usize = self.groups.iter().filter_map(|g| g.probe.as_ref()).map(|f| f.bytes()).sum();
        (rows + segs) as u64
    }
}

#[cfg(test)]
mod tests;
