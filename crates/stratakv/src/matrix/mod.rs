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
//!
//! This module holds the matrix's data structures and policy; the level-0
//! kind that builds rows, runs column compactions and merges runs is
//! `l0/matrix`. By concern:
//!
//! | file | what |
//! | --- | --- |
//! | `row.rs`, `build.rs` | a row in PM: format (FORMAT.md, "Matrix rows"), search, building |
//! | `record.rs` | the MANIFEST record (FORMAT.md, "Matrix record") |
//! | `fences.rs` | DRAM fences that narrow a search inside a row |
//! | `probe.rs`, `hash_index.rs` | bloom filters and hash indexes of rows and segments |
//! | `live_row.rs` | a row as the matrix holds it |
//! | `state.rs` | the rows, their segments and probes: what a version holds |
//! | `view.rs` | point lookups and cursors over that state |
//! | `iter.rs` | a cursor over one row |
//! | `policy/` | when rounds start, the write pace, column cuts, row merges, run merges |

pub(crate) mod build;
mod fences;
pub(crate) mod hash_index;
pub(crate) mod iter;
mod live_row;
pub(crate) mod policy;
mod probe;
mod record;
pub(crate) mod row;
mod state;
mod view;

pub(crate) use live_row::LiveRow;
pub(crate) use probe::SoloProbe;
pub use record::MatrixRecord;
#[cfg(test)]
pub(crate) use record::RowMeta;
pub(crate) use state::Matrix;

#[cfg(test)]
mod tests;
