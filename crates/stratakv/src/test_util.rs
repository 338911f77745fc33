//! Helpers shared by the unit tests.

use std::sync::Arc;

use strata_pmem::{Backing, Region, RegionOptions, SimPm};

/// A fresh simulated PM region of `len` bytes in 64 KiB slots.
pub(crate) fn sim_region(len: u64) -> Region {
    let sim = Arc::new(SimPm::new(len as usize));
    let o = RegionOptions { len, slot_bytes: 64 << 10, write_latency_ns: 0, create: true, expect_id: None };
    Region::open(Backing::Sim(sim), &o).expect("a fresh simulated region opens").0
}
