//! The persistent-memory (PM) region of StrataKV.
//!
//! A region is one memory-mapped file (or, for tests, a simulated PM
//! buffer). Everything the engine keeps in PM lives in it, addressed by
//! byte offsets from the region base, never by raw pointers, so the file
//! can be mapped anywhere.
//!
//! # The persist/publish rule
//!
//! Every persistent update follows one order (DESIGN.md §3):
//!
//! 1. write the payload into space nobody can reach yet,
//! 2. persist it ([`Slot::persist`]),
//! 3. publish it with one aligned 8-byte store ([`Slot::publish_u64`],
//!    [`Region::publish_root`]),
//! 4. persist that word (the publish calls do this themselves).
//!
//! Nothing is reachable from a root until it is durable.
//!
//! # What `persist` means on each placement
//!
//! | placement | persist | durable against |
//! | --- | --- | --- |
//! | DAX (MAP_SYNC accepted) | clwb/clflushopt per line + sfence | power loss |
//! | ordinary file | store ordering only; [`Region::sync`] msyncs | process crash; power loss after sync |
//! | `/dev/shm` | store ordering only | process crash |
//! | simulated | recorded flush + fence | whatever the simulated crash keeps |
//!
//! # Layout
//!
//! The region starts with a 4 KiB superblock, then a table with one 8-byte
//! *head word* per slot, then the slots themselves. Space is handed out as
//! *extents*: runs of contiguous slots whose first head word names the
//! extent's kind, length and number. See FORMAT.md, "PM region".
//!
//! This is the only crate of the workspace that contains `unsafe` code; it
//! is confined to the `map`, `flush`, `region`, `alloc` (`Slot::write`),
//! `prefetch` and `uring` (batched io_uring reads) modules, and `UNSAFE.md` at the repository root lists every
//! block and why it is sound.

mod alloc;
mod error;
mod flush;
mod layout;
mod map;
mod prefetch;
mod region;
mod sim;
mod slots;
mod syncview;
#[cfg(target_os = "linux")]
mod uring;

pub use alloc::{Extent, ExtentWriter, HeadSync, Slot};
pub use error::PmError;
pub use flush::CACHE_LINE;
pub use layout::{ROOT_WORDS, SUPERBLOCK_BYTES};
pub use prefetch::prefetch;
pub use region::{Backing, OpenOutcome, Placement, Region, RegionOptions, RegionStats};
pub use sim::{CrashModel, CrashState, SimHold, SimPm};
pub use slots::ExtentHead;
#[cfg(target_os = "linux")]
pub use uring::{AlignedBuf, ReadAt, SendRing, SendTo, Uring, READ_ALIGN};
