//! The learned index (TridentKV): a model from user key to data block, with
//! the data blocks cut where the model says, so a lookup computes its
//! block and reads it, with no index search and no error window.
//!
//! The model: the table's keys are split into groups ([`group_keys`]), each
//! with its own [`KeyCode`]; within a group, piecewise-linear segments map
//! a key's code to a byte offset, and offset / block size is the key's
//! *slot*. Each segment clamps its slots to the range its own keys had, so
//! slots never decrease as keys grow, for any key, not only the table's.
//! Physical blocks are the runs of entries with one slot; a bitmap of the
//! slots that have a block, ranked, gives the first block whose slot is `s`
//! or more. So for any probe, every
//! entry >= the probe lies in that block or after it, as [`TableIndex`]
//! asks. Training and cutting are in `train.rs`; the byte layout is in
//! FORMAT.md, "Learned index block".

use std::path::Path;

use super::format::{BlockHandle, BLOCK_TRAILER_LEN};
use super::index::TableIndex;
use super::keycode::KeyCode;
use crate::coding::{put_bytes, put_u64, put_varint, Reader};
use crate::error::{Error, Result};
use crate::key::user_key;

/// Version of the learned block's contents.
const LEARNED_VERSION: u64 = 1;

/// One linear piece: keys with code >= `x0` (up to the next segment) are
/// predicted at byte `y0 + slope * (code - x0)`; slots clamped to `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// First code the segment covers.
    pub x0: u64,
    /// Predicted byte offset at `x0`.
    pub y0: f64,
    /// Bytes per code unit (never negative).
    pub slope: f64,
    /// Smallest slot of the segment's keys.
    pub lo: u32,
    /// Largest slot of the segment's keys.
    pub hi: u32,
}

impl Segment {
    /// The slot the line predicts for `x`, before clamping. Build and
    /// lookup call this same function, so they agree to the bit.
    pub fn raw_slot(&self, x: u64, block_size: u32) -> u64 {
        let p = self.y0 + self.slope * x.saturating_sub(self.x0) as f64;
        if p > 0.0 {
            // `as` saturates: a huge prediction is clamped below anyway.
            (p / block_size as f64) as u64
        } else {
            0
        }
    }

    /// The slot of `x`: the prediction clamped to the segment's range.
    pub fn slot(&self, x: u64, block_size: u32) -> u32 {
        self.raw_slot(x, block_size).clamp(self.lo as u64, self.hi as u64) as u32
    }
}

/// The keys of one group: where they start, their code, their segments.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// The group's smallest user key.
    pub first: Vec<u8>,
    /// The group's key code.
    pub code: KeyCode,
    /// The group's segments, by `x0`.
    pub segments: Vec<Segment>,
}

/// The trained model: user key → slot.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Bytes per slot.
    pub block_size: u32,
    /// Groups by first key.
    pub groups: Vec<Group>,
}

impl Model {
    /// The slot of any user key; never smaller for a larger key.
    pub fn slot(&self, ukey: &[u8]) -> u32 {
        let g = self.groups.partition_point(|g| g.first.as_slice() <= ukey);
        let Some(group) = g.checked_sub(1).and_then(|g| self.groups.get(g)) else {
            return 0; // below the table's first key
        };
        let x = group.code.code(ukey);
        let i = group.segments.partition_point(|s| s.x0 <= x).saturating_sub(1);
        group.segments.get(i).map_or(0, |s| s.slot(x, self.block_size))
    }

    fn memory_bytes(&self) -> usize {
        self.groups
            .iter()
            .map(|g| g.first.len() + g.code.memory_bytes() + g.segments.len() * std::mem::size_of::<Segment>() + 48)
            .sum()
    }
}

/// A learned index: the model, and where each slot's block is, packed
/// (about 2.2 bytes per block, where separator keys take 25 or more).
#[derive(Debug)]
pub struct LearnedIndex {
    model: Model,
    /// One bit per slot: whether a block has that slot.
    occupied: Vec<u64>,
    /// Per word of `occupied`: blocks whose slot is below the word's first.
    ranks: Vec<u32>,
    /// Bytes of each block with its trailer.
    sizes: Sizes,
    /// Offset of every `SPAN`th block.
    starts: Vec<u32>,
}

/// Blocks between the entries of `LearnedIndex::starts`.
const SPAN: usize = 32;

/// Block sizes, in 16 bits when every block fits.
#[derive(Debug)]
enum Sizes {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl Sizes {
    fn new(sizes: &[u32]) -> Sizes {
        match sizes.iter().map(|&s| u16::try_from(s)).collect::<std::result::Result<Vec<u16>, _>>() {
            Ok(narrow) => Sizes::Narrow(narrow),
            Err(_) => Sizes::Wide(sizes.to_vec()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Sizes::Narrow(v) => v.len(),
            Sizes::Wide(v) => v.len(),
        }
    }

    fn get(&self, i: usize) -> Option<u64> {
        match self {
            Sizes::Narrow(v) => v.get(i).map(|&s| s as u64),
            Sizes::Wide(v) => v.get(i).map(|&s| s as u64),
        }
    }

    /// Sum of sizes `from..to`.
    fn sum(&self, from: usize, to: usize) -> u64 {
        match self {
            Sizes::Narrow(v) => v.get(from..to).map_or(0, |w| w.iter().map(|&s| s as u64).sum()),
            Sizes::Wide(v) => v.get(from..to).map_or(0, |w| w.iter().map(|&s| s as u64).sum()),
        }
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Sizes::Narrow(v) => v.len() * 2,
            Sizes::Wide(v) => v.len() * 4,
        }
    }
}

/// Appends the learned block's contents: the model, then each block's slot
/// (as a delta) and stored size. Blocks start at offset 0 and follow one
/// another, each with its trailer.
pub fn encode(model: &Model, blocks: &[(u32, BlockHandle)]) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, LEARNED_VERSION);
    put_varint(&mut b, model.block_size as u64);
    put_varint(&mut b, model.groups.len() as u64);
    for g in &model.groups {
        put_bytes(&mut b, &g.first);
        g.code.encode_to(&mut b);
        put_varint(&mut b, g.segments.len() as u64);
        for s in &g.segments {
            put_u64(&mut b, s.x0);
            put_u64(&mut b, s.y0.to_bits());
            put_u64(&mut b, s.slope.to_bits());
            put_varint(&mut b, s.lo as u64);
            put_varint(&mut b, s.hi as u64);
        }
    }
    put_varint(&mut b, blocks.len() as u64);
    let mut prev = 0u32;
    for (slot, h) in blocks {
        put_varint(&mut b, (slot - prev) as u64);
        put_varint(&mut b, h.size);
        prev = *slot;
    }
    b
}

impl LearnedIndex {
    /// Decodes a learned block read from `file` at `offset`; `data_end` is
    /// where the data blocks must end (the first metadata block).
    pub fn decode(data: &[u8], file: &Path, offset: u64, data_end: u64) -> Result<LearnedIndex> {
        let bad = |why: &str| Error::corruption(file, offset, format!("learned index block: {why}"));
        let mut r = Reader::new(data);
        if r.varint() != Some(LEARNED_VERSION) {
            return Err(bad("unknown version"));
        }
        let block_size = r.varint32().filter(|b| *b > 0).ok_or_else(|| bad("bad block size"))?;
        let ngroups = r.varint().ok_or_else(|| bad("short"))?;
        let mut groups: Vec<Group> = Vec::new();
        let mut last_hi = 0u32;
        for _ in 0..ngroups {
            let first = r.len_bytes().ok_or_else(|| bad("short"))?.to_vec();
            if groups.last().is_some_and(|g| g.first >= first) {
                return Err(bad("groups out of order"));
            }
            let code = KeyCode::decode(&mut r).ok_or_else(|| bad("malformed key code"))?;
            let nseg = r.varint().filter(|n| *n > 0).ok_or_else(|| bad("group without segments"))?;
            let mut segments: Vec<Segment> = Vec::new();
            for _ in 0..nseg {
                let (x0, y0, slope) = (r.u64(), r.u64().map(f64::from_bits), r.u64().map(f64::from_bits));
                let (lo, hi) = (r.varint32(), r.varint32());
                let (Some(x0), Some(y0), Some(slope), Some(lo), Some(hi)) = (x0, y0, slope, lo, hi) else {
                    return Err(bad("short segment"));
                };
                // Slots rise from segment to segment, so the model is monotone.
                let sorted = segments.last().is_none_or(|p| p.x0 < x0);
                if !(y0.is_finite() && slope.is_finite() && slope >= 0.0) || lo > hi || lo < last_hi || !sorted {
                    return Err(bad("segment out of order or not monotone"));
                }
                last_hi = hi;
                segments.push(Segment { x0, y0, slope, lo, hi });
            }
            groups.push(Group { first, code, segments });
        }
        let nblocks = r.varint().filter(|n| *n > 0).ok_or_else(|| bad("no blocks"))?;
        let mut slots: Vec<u32> = Vec::new();
        let mut sizes: Vec<u32> = Vec::new();
        let (mut slot, mut at) = (0u64, 0u64);
        for i in 0..nblocks {
            let (d, size) = (r.varint().ok_or_else(|| bad("short"))?, r.varint().ok_or_else(|| bad("short"))?);
            if i > 0 && d == 0 {
                return Err(bad("two blocks with one slot"));
            }
            slot += d;
            let with_trailer = size.saturating_add(BLOCK_TRAILER_LEN as u64);
            at = at.saturating_add(with_trailer);
            if at > data_end || at > u32::MAX as u64 || slot > u32::MAX as u64 {
                return Err(bad("blocks run past the data"));
            }
            slots.push(slot as u32);
            sizes.push(with_trailer as u32);
        }
        if !r.is_empty() {
            return Err(bad("trailing bytes"));
        }
        let max_slot = slots.last().copied().unwrap_or(0);
        if last_hi != max_slot || max_slot as u64 > 4 * nblocks + 64 {
            return Err(bad("model and blocks disagree on the last slot"));
        }
        let words = max_slot as usize / 64 + 1;
        let mut occupied = vec![0u64; words];
        for &s in &slots {
            occupied[s as usize / 64] |= 1 << (s % 64);
        }
        let mut ranks = Vec::with_capacity(words);
        let mut below = 0u32;
        for w in &occupied {
            ranks.push(below);
            below += w.count_ones();
        }
        let mut starts = Vec::with_capacity(sizes.len() / SPAN + 1);
        let mut off = 0u64;
        for (i, s) in sizes.iter().enumerate() {
            if i % SPAN == 0 {
                starts.push(off as u32);
            }
            off += *s as u64;
        }
        Ok(LearnedIndex { model: Model { block_size, groups }, occupied, ranks, sizes: Sizes::new(&sizes), starts })
    }

    /// The first block whose slot is `s` or more (the number of blocks with a smaller slot).
    fn block_of_slot(&self, s: usize) -> Option<usize> {
        let (w, bit) = (s / 64, s % 64);
        let word = *self.occupied.get(w)?;
        let i = *self.ranks.get(w)? as usize + (word & ((1u64 << bit) - 1)).count_ones() as usize;
        (i < self.sizes.len()).then_some(i)
    }
}

impl TableIndex for LearnedIndex {
    fn num_blocks(&self) -> usize {
        self.sizes.len()
    }

    fn block(&self, i: usize) -> Option<BlockHandle> {
        let size = self.sizes.get(i)?;
        let first = i / SPAN * SPAN;
        let offset = *self.starts.get(i / SPAN)? as u64 + self.sizes.sum(first, i);
        Some(BlockHandle { offset, size: size - BLOCK_TRAILER_LEN as u64 })
    }

    fn find_block(&self, ikey: &[u8]) -> Option<usize> {
        self.block_of_slot(self.model.slot(user_key(ikey)) as usize)
    }

    fn memory_bytes(&self) -> usize {
        self.model.memory_bytes()
            + self.occupied.len() * 8
            + self.ranks.len() * 4
            + self.sizes.memory_bytes()
            + self.starts.len() * 4
    }
}
