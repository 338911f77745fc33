//! The PM skiplist nodes a pm-only log entry carries, one per record
//! (ListDB's index-unified log: the log entry is the list node). Only their
//! sizes and fixed words are chosen here, when the entry is written; their
//! links are written when the entry is linked into a list (`crate::pmlist`).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use rand::Rng;

use super::node::{meta_word, MAX_HEIGHT};
use crate::batch::Records;
use crate::key::trailer;

/// Bytes of a node before its links: the meta word and the trailer.
pub const TOWER_FIXED: usize = 16;

/// The nodes of one entry: a height per record, and the PM region (NUMA
/// node) the writing thread belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Towers {
    heights: Vec<u8>,
    region: u8,
}

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's number, for spreading writers over PM regions the way
    /// ListDB's threads sit on NUMA nodes.
    static THREAD_NO: Cell<usize> = Cell::new(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
}

/// The PM region of the calling thread among `regions` (threads are dealt
/// out in turn, as ListDB's threads sit on NUMA nodes).
pub fn thread_region(regions: usize) -> usize {
    THREAD_NO.with(|t| t.get()) % regions.clamp(1, 15)
}

impl Towers {
    /// Nodes for `count` records written by this thread, with `regions`
    /// PM regions: heights are geometric with branching 4 (ListDB's).
    pub fn choose(count: u32, regions: usize) -> Towers {
        let mut rng = rand::thread_rng();
        let heights = (0..count)
            .map(|_| {
                let mut h = 1u8;
                while (h as usize) < MAX_HEIGHT && rng.gen_ratio(1, 4) {
                    h += 1;
                }
                h
            })
            .collect();
        Towers { heights, region: thread_region(regions) as u8 }
    }

    /// One node of `height` in `region` (a copy of a node that moves).
    pub fn one(height: usize, region: usize) -> Towers {
        Towers { heights: vec![height.clamp(1, MAX_HEIGHT) as u8], region: region.min(15) as u8 }
    }

    /// Bytes the nodes take.
    pub fn bytes(&self) -> usize {
        self.heights.iter().map(|&h| TOWER_FIXED + 8 * h as usize).sum()
    }

    /// Region offsets of the nodes, given where the first one starts.
    pub fn offsets(&self, start: u64) -> impl Iterator<Item = u64> + '_ {
        self.heights.iter().scan(start, |at, &h| {
            let here = *at;
            *at += (TOWER_FIXED + 8 * h as usize) as u64;
            Some(here)
        })
    }

    /// The nodes' bytes (links zero) for records `body`, which starts at
    /// region offset `body_off`, with nodes from `start` and the first
    /// record at sequence `seq`.
    pub fn encode(&self, start: u64, body: &[u8], body_off: u64, seq: u64) -> Vec<u8> {
        let mut out = vec![0u8; self.bytes()];
        let records = Records::new(body, body_off).map_while(|r| r.ok());
        for (i, ((rec, node), &h)) in records.zip(self.offsets(start)).zip(&self.heights).enumerate() {
            let at = (node - start) as usize;
            let meta = meta_word(rec.key_off - node, rec.key.len(), h, self.region);
            if let Some(w) = out.get_mut(at..at + 16) {
                w[..8].copy_from_slice(&meta.to_le_bytes());
                w[8..].copy_from_slice(&trailer(seq + i as u64, rec.kind).to_le_bytes());
            }
        }
        out
    }
}
