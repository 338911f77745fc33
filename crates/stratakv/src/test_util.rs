//! Helpers shared by the unit tests.

use std::sync::Arc;

use rand::rngs::StdRng;
use strata_pmem::{Backing, CrashModel, CrashState, Region, RegionOptions, SimPm};

use crate::iterator::InternalIterator;

/// The keys of `it` first to last, and last to first (reversed back).
pub(crate) fn keys_both_ways(it: &mut dyn InternalIterator) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut fwd = Vec::new();
    it.seek_to_first().expect("seek_to_first");
    while it.valid() {
        fwd.push(it.key().to_vec());
        it.next().expect("next");
    }
    let mut back = Vec::new();
    it.seek_to_last().expect("seek_to_last");
    while it.valid() {
        back.push(it.key().to_vec());
        it.prev().expect("prev");
    }
    back.reverse();
    (fwd, back)
}

/// Three images of the simulated PM a crash at this event could leave:
/// every unflushed line lost, a random prefix of them kept, and a random
/// subset of their 8-byte words kept.
pub(crate) fn crash_images(cs: &CrashState, rng: &mut StdRng) -> [Vec<u8>; 3] {
    [cs.minimal_image(), cs.random_image(CrashModel::LinePrefix, rng), cs.random_image(CrashModel::WordSubset, rng)]
}

/// A fresh simulated PM region of `len` bytes in 64 KiB slots.
pub(crate) fn sim_region(len: u64) -> Region {
    let sim = Arc::new(SimPm::new(len as usize));
    let o = RegionOptions { len, slot_bytes: 64 << 10, write_latency_ns: 0, create: true, expect_id: None };
    Region::open(Backing::Sim(sim), &o).expect("a fresh simulated region opens").0
}
